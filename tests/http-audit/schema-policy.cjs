// The schema's deprecation policy (docs/api.md, Deprecations) as a rule of
// `graphql-inspector diff <released> <current>`, which fails on any change
// left BREAKING:
//
// - Removing a field, argument, input field or enum value is breaking
//   unless the released schema deprecated it with a reason that names its
//   removal date ("Removed after YYYY-MM-DD") and that date has passed.
// - A new deprecation must name a removal date at least 90 days ahead.
// - A change that is breaking for another reason passes only when the
//   changelog's Unreleased section names it (its path in backquotes) in a
//   bullet marked **Breaking**: a privacy or security fix that cannot wait.
// - A dangerous change (a new enum value, for one) must be named in the
//   changelog's Unreleased section, or it is breaking too.
//
// KITH_SCHEMA_CHANGELOG: the changelog's path; KITH_SCHEMA_TODAY: the day
// the policy is applied on (YYYY-MM-DD; today when unset).

const { readFileSync } = require('node:fs');
const { isEnumType, isInputObjectType, isInterfaceType, isObjectType } = require('graphql');

const DAY_MS = 24 * 60 * 60 * 1000;
const NOTICE_DAYS = 90;

const today = new Date(process.env.KITH_SCHEMA_TODAY ?? new Date().toISOString().slice(0, 10));
const changelog = readFileSync(process.env.KITH_SCHEMA_CHANGELOG, 'utf8');
const unreleased = (() => {
  const start = changelog.indexOf('## Unreleased');
  if (start < 0) return '';
  const next = changelog.indexOf('\n## ', start + 1);
  return changelog.slice(start, next < 0 ? undefined : next);
})();
const bullets = unreleased.split(/\n(?=- )/);
const named = (path) => bullets.some((b) => b.includes(`\`${path}\``));
const namedAsBreaking = (path) =>
  bullets.some((b) => b.startsWith('- **Breaking') && b.includes(`\`${path}\``));

const removalDate = (reason) => {
  const m = /Removed after (\d{4}-\d{2}-\d{2})/.exec(reason ?? '');
  return m ? new Date(m[1]) : null;
};

// The deprecation reason the released schema gave `path` (null: none).
function releasedReason(schema, path) {
  // A deprecation's path ends in `.@deprecated`.
  const [typeName, member, argument] = path.split('.').filter((part) => !part.startsWith('@'));
  const type = schema.getType(typeName);
  if (!type || !member) return null;
  if (isEnumType(type)) return type.getValue(member)?.deprecationReason ?? null;
  if (isObjectType(type) || isInterfaceType(type) || isInputObjectType(type)) {
    const field = type.getFields()[member];
    if (!field) return null;
    if (argument) return field.args?.find((a) => a.name === argument)?.deprecationReason ?? null;
    return field.deprecationReason ?? null;
  }
  return null;
}

const REMOVALS = new Set([
  'FIELD_REMOVED',
  'FIELD_ARGUMENT_REMOVED',
  'INPUT_FIELD_REMOVED',
  'ENUM_VALUE_REMOVED',
]);
const DEPRECATIONS = new Set([
  'FIELD_DEPRECATION_ADDED',
  'FIELD_DEPRECATION_REASON_ADDED',
  'FIELD_DEPRECATION_REASON_CHANGED',
  'ENUM_VALUE_DEPRECATION_REASON_ADDED',
  'ENUM_VALUE_DEPRECATION_REASON_CHANGED',
]);

function judge(change, oldSchema, newSchema) {
  const path = change.path ?? '';
  if (REMOVALS.has(change.type)) {
    const date = removalDate(releasedReason(oldSchema, path));
    if (date && date <= today) return ['NON_BREAKING', `removed after its date`];
    if (date) return ['BREAKING', `deprecated until ${date.toISOString().slice(0, 10)}`];
    return ['BREAKING', 'removed without a deprecation naming its removal date'];
  }
  if (DEPRECATIONS.has(change.type)) {
    const date = removalDate(releasedReason(newSchema, path));
    if (!date) return ['BREAKING', 'a deprecation must say "Removed after YYYY-MM-DD"'];
    if (date - today < NOTICE_DAYS * DAY_MS) {
      return ['BREAKING', `a removal date at least ${NOTICE_DAYS} days ahead is required`];
    }
    return null;
  }
  if (change.criticality.level === 'BREAKING') {
    return namedAsBreaking(path)
      ? ['DANGEROUS', 'named in the changelog as a breaking fix']
      : ['BREAKING', 'not in the changelog as a **Breaking** fix'];
  }
  if (change.criticality.level === 'DANGEROUS' && !named(path)) {
    return ['BREAKING', 'dangerous for clients, and not in the changelog'];
  }
  return null;
}

module.exports = ({ changes, oldSchema, newSchema }) =>
  changes.map((change) => {
    const verdict = judge(change, oldSchema, newSchema);
    if (!verdict) return change;
    const [level, why] = verdict;
    return {
      ...change,
      message: `${change.message} (policy: ${why})`,
      criticality: { ...change.criticality, level },
    };
  });
