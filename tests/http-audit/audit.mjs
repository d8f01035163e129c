// Runs the GraphQL-over-HTTP audit suite against a live server:
//   node tests/http-audit/audit.mjs http://127.0.0.1:8080/graphql
// Prints every audit that did not pass and a tally per level; exits 1 when
// any MUST or SHOULD audit fails (the Rust test that runs it requires every
// MAY audit too, from the tallies).
import { auditServer } from 'graphql-http';

const url = process.argv[2];
if (!url) {
  console.error('usage: node audit.mjs <graphql url>');
  process.exit(2);
}
const results = await auditServer({ url });
const level = (r) => r.name.split(' ')[0];
let required = 0;
for (const r of results) {
  if (r.status === 'ok') continue;
  console.log(`${r.status.toUpperCase()} ${r.id} ${r.name}: ${r.reason}`);
  if (level(r) === 'MUST' || level(r) === 'SHOULD') required += 1;
}
for (const l of ['MUST', 'SHOULD', 'MAY']) {
  const all = results.filter((r) => level(r) === l);
  const ok = all.filter((r) => r.status === 'ok');
  console.log(`${l} ${ok.length}/${all.length}`);
}
process.exit(required ? 1 : 0);
