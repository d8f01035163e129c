// The schema's deprecation policy (docs/api.md, Deprecations) as a rule of
// `graphql-inspector diff <released> <current>`, which fails on any change
// left BREAKING:
//
// - Removing a field, argument, input field or enum value is breaking
//   unless the released schema deprecated it with a reason that names its
//   removal date ("Removed after YYYY-MM-DD") and that date has passed; a
//   type goes once everything that named it went so.
// - A new deprecation (of a field, argument, input field or enum value)
//   must name a removal date at least 90 days after the release that
//   announces it; a changed one may only move its date later.
// - A change that is breaking for another reason passes only when the
//   changelog's Unreleased section names it (its path in backquotes) in a
//   bullet marked **Breaking**: a privacy or security fix that cannot wait.
// - A dangerous change (a new enum value, for one) must be named in the
//   changelog's Unreleased section, or it is breaking too.
//
// KITH_SCHEMA_CHANGELOG: the changelog's path; KITH_SCHEMA_TODAY: the day
// the policy is applied on (YYYY-MM-DD; today when unset), against which
// removal dates are checked; KITH_SCHEMA_NOTICE_FROM: the day a new
// deprecation's notice counts from — the release that will carry it (the
// release script gives its own day; the schema test, the last release's,
// so that its verdict does not change as days pass).

const { readFileSync } = require('node:fs');
const {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  isUnionType,
} = require('graphql');

const DAY_MS = 24 * 60 * 60 * 1000;
const NOTICE_DAYS = 90;

const day = (text) => {
  const date = new Date(`${text}T00:00:00Z`);
  // A real day, written as one ("2027-13-45" is none).
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === text ? date : null;
};
const today = day(process.env.KITH_SCHEMA_TODAY ?? new Date().toISOString().slice(0, 10));
const noticeFrom = day(process.env.KITH_SCHEMA_NOTICE_FROM ?? today.toISOString().slice(0, 10));
if (!today || !noticeFrom) throw new Error('KITH_SCHEMA_TODAY and KITH_SCHEMA_NOTICE_FROM are days (YYYY-MM-DD)');
const iso = (date) => date.toISOString().slice(0, 10);
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
  return m ? day(m[1]) : null;
};
// Removed only after the date it names, not on it.
const removable = (reason) => {
  const date = removalDate(reason);
  return date !== null && date < today;
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

// Whether every field, argument and input field of `schema` whose type is
// `name` may go (deprecated, its date passed): then `name` may go too.
function onlyNamedByRemovables(schema, name) {
  // A type that implements an interface is reachable without being named
  // (`node(id) { ... on X }`).
  if ((schema.getType(name)?.getInterfaces?.() ?? []).length > 0) return false;
  const named = (type) => getNamedType(type).name === name;
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__')) continue;
    if (isUnionType(type) && type.getTypes().some((t) => t.name === name)) return false;
    if (!(isObjectType(type) || isInterfaceType(type) || isInputObjectType(type))) continue;
    if ((type.getInterfaces?.() ?? []).some((i) => i.name === name)) return false;
    for (const field of Object.values(type.getFields())) {
      if (named(field.type) && !removable(field.deprecationReason)) return false;
      for (const arg of field.args ?? []) {
        if (named(arg.type) && !removable(arg.deprecationReason)) return false;
      }
    }
  }
  return true;
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
// Deprecations of arguments and input fields, which the diff reports only
// as a directive added.
const DIRECTIVES_ADDED = new Set([
  'DIRECTIVE_USAGE_ARGUMENT_DEFINITION_ADDED',
  'DIRECTIVE_USAGE_INPUT_FIELD_DEFINITION_ADDED',
]);
// A changed reason of an argument's or input field's deprecation, which
// the diff reports only as an argument of the directive added or removed.
const isReasonOfDeprecation = (change) =>
  change.type.startsWith('DIRECTIVE_USAGE_ARGUMENT_') && change.meta?.directiveName === 'deprecated';
const isDeprecation = (change) =>
  DEPRECATIONS.has(change.type) ||
  (DIRECTIVES_ADDED.has(change.type) && change.meta?.addedDirectiveName === 'deprecated') ||
  isReasonOfDeprecation(change);

function judge(change, oldSchema, newSchema) {
  const path = change.path ?? '';
  if (REMOVALS.has(change.type)) {
    const reason = releasedReason(oldSchema, path);
    if (removable(reason)) return ['NON_BREAKING', 'removed after its date'];
    const date = removalDate(reason);
    if (date) return ['BREAKING', `deprecated until ${iso(date)}; removable the day after`];
    return ['BREAKING', 'removed without a deprecation naming its removal date'];
  }
  if (change.type === 'TYPE_REMOVED') {
    return onlyNamedByRemovables(oldSchema, path)
      ? ['NON_BREAKING', 'everything that named it went after its date']
      : ['BREAKING', 'still named by a field that may not go yet, or reached through an interface'];
  }
  if (isDeprecation(change)) {
    const date = removalDate(releasedReason(newSchema, path));
    // A deprecation's reason removed with the deprecation itself is judged
    // as the removal of the deprecation.
    if (!date && isReasonOfDeprecation(change) && !releasedReason(newSchema, path)) return null;
    if (!date) return ['BREAKING', 'a deprecation must say "Removed after YYYY-MM-DD" (a real day)'];
    const before = removalDate(releasedReason(oldSchema, path));
    // A deprecation already announced may be reworded, or postponed; never
    // brought forward.
    if (before && date < before) {
      return ['BREAKING', `the removal date announced, ${iso(before)}, may be postponed, not brought forward`];
    }
    if (before) return ['NON_BREAKING', null];
    if (date - noticeFrom < NOTICE_DAYS * DAY_MS) {
      return [
        'BREAKING',
        `a removal date at least ${NOTICE_DAYS} days after ${iso(noticeFrom)} is required`,
      ];
    }
    return ['NON_BREAKING', null];
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
      message: why ? `${change.message} (policy: ${why})` : change.message,
      criticality: { ...change.criticality, level },
    };
  });
