// What the paging clients (apollo.mjs, urql.mjs, relay.mjs) share: their
// arguments, failing with a reason, and the check of a merged list.

// Exits 1 saying why.
export const fail = (why) => {
  console.error(`FAIL ${why}`);
  process.exit(1);
};

// The script's arguments, named as in `usage`; exits 2 when some are
// missing. Fails the script if it is not done within 60 s.
export const args = (usage) => {
  const names = usage.split(' ').slice(1);
  const values = process.argv.slice(2);
  if (values.length < names.length) {
    console.error(`usage: node ${usage}`);
    process.exit(2);
  }
  setTimeout(() => fail('not done within 60 s'), 60_000);
  return values;
};

// Fails unless the merged list `ids` is `expected` (newest first), each once.
export const checkList = (what, ids, expected) => {
  if (new Set(ids).size !== ids.length) fail(`${what}: a follower shows twice`);
  if (ids.join(',') !== expected.join(',')) {
    fail(`${what}: got ${ids.length} followers, expected ${expected.length}:\n${ids}\n${expected}`);
  }
};
