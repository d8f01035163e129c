// Relay (relay-runtime, with the artifacts relay-compiler made from
// relay/followers.js) pages a Kith list as `usePaginationFragment` does:
//   node tests/http-audit/relay.mjs <artifact dir> <http url> <user id> <expected ids, newest first, comma-separated>
// The list query renders the fragment's first page; each next page is the
// fragment's generated pagination query (`node(id:)` with `first`/`after`),
// whose edges Relay's connection handler appends to the `@connection`. The
// fragment's merged edges must be exactly the expected list; exits 0, or 1
// saying what differed.
import {
  Environment,
  Network,
  RecordSource,
  Store,
  createOperationDescriptor,
  fetchQuery,
  getSelector,
} from 'relay-runtime';
import { args, checkList, fail } from './paging.mjs';

const [artifacts, url, userId, expectedList] = args(
  'relay.mjs <artifact-dir> <http-url> <user-id> <expected-ids>',
);
const expected = expectedList.split(',');

const load = async (name) => (await import(`${artifacts}/${name}.graphql.js`)).default;
const listQuery = await load('followersListQuery');
const paginationQuery = await load('followersPaginationQuery');
const fragment = await load('followers_user');

const environment = new Environment({
  network: Network.create(async (params, variables) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: params.text, variables }),
    });
    return response.json();
  }),
  store: new Store(new RecordSource()),
});

const count = 7;
const operation = createOperationDescriptor(listQuery, { id: userId, count });
environment.retain(operation);
await fetchQuery(environment, listQuery, { id: userId, count }).toPromise();
const root = environment.lookup(operation.fragment).data;
if (!root.user) fail('no user');
const selector = getSelector(fragment, root.user);
const read = () => environment.lookup(selector).data.followers;

let pages = 1;
for (;;) {
  const followers = read();
  const pageInfo = followers.pageInfo;
  if (!pageInfo) fail('the connection has no pageInfo');
  if (!pageInfo.hasNextPage) break;
  if (pages > expected.length + 2) fail('paging never ends');
  await fetchQuery(environment, paginationQuery, {
    id: userId,
    count,
    cursor: pageInfo.endCursor,
  }).toPromise();
  pages += 1;
}
const followers = read();
const ids = followers.edges.map((e) => e.node.id);
checkList('relay', ids, expected);
if (followers.totalCount !== expected.length) fail(`totalCount ${followers.totalCount}`);
console.log(`${pages} pages, ${ids.length} followers`);
process.exit(0);
