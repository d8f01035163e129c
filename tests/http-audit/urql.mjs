// urql with Graphcache's `relayPagination()` pages a Kith list:
//   node tests/http-audit/urql.mjs <http url> <user id> <expected ids, newest first, comma-separated>
// Asks for the first page, then for each next page with `after:
// endCursor` as a component would; Graphcache merges the pages under one
// field, so each answer holds every page so far. The merged list must be
// exactly the expected one; exits 0, or 1 saying what differed.
import { Client, fetchExchange, gql } from '@urql/core';
import { cacheExchange } from '@urql/exchange-graphcache';
import { relayPagination } from '@urql/exchange-graphcache/extras';
import { args, checkList, fail } from './paging.mjs';

const [url, userId, expectedList] = args('urql.mjs <http-url> <user-id> <expected-ids>');
const expected = expectedList.split(',');

const FOLLOWERS = gql`
  query Followers($id: ID!, $first: Int, $after: String) {
    user(id: $id) {
      id
      followers(first: $first, after: $after) {
        totalCount
        edges { cursor node { id handle } }
        pageInfo { hasNextPage endCursor }
      }
    }
  }
`;

const client = new Client({
  url,
  exchanges: [
    cacheExchange({
      // Connections, edges and page info belong to their parent.
      keys: { FollowConnection: () => null, FollowEdge: () => null, PageInfo: () => null },
      resolvers: { User: { followers: relayPagination() } },
    }),
    fetchExchange,
  ],
});

let after = null;
let pages = 0;
let followers;
for (;;) {
  const result = await client.query(FOLLOWERS, { id: userId, first: 7, after }).toPromise();
  if (result.error) fail(`query: ${result.error}`);
  followers = result.data.user.followers;
  pages += 1;
  if (!followers.pageInfo.hasNextPage) break;
  if (pages > expected.length + 2) fail('paging never ends');
  after = followers.pageInfo.endCursor;
}
const ids = followers.edges.map((e) => e.node.id);
checkList('urql', ids, expected);
if (followers.totalCount !== expected.length) fail(`totalCount ${followers.totalCount}`);
console.log(`${pages} pages, ${ids.length} followers`);
process.exit(0);
