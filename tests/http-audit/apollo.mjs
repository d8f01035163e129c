// Apollo Client 4 with `relayStylePagination()` pages a Kith list both ways:
//   node tests/http-audit/apollo.mjs <http url> <user id> <expected ids, newest first, comma-separated> <late follower token>
// Forward: the first page, then `fetchMore({ after: endCursor })` until
// `hasNextPage` is false, while the late follower follows the user after
// the first page (a list that changes while it is paged). Once the late
// follow shows in the list and its count (the pipeline applies it a moment
// after its commit), backward, with a fresh cache: `last`, then `fetchMore({ before: startCursor })` until
// `hasPreviousPage` is false. Each time the merged list in Apollo's cache
// must be exactly the expected one (forward: without the late follower,
// who is newer than the first page); exits 0, or 1 saying what differed.
import { ApolloClient, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { relayStylePagination } from '@apollo/client/utilities';
import { args, checkList, fail } from './paging.mjs';

const [url, userId, expectedList, lateToken] = args(
  'apollo.mjs <http-url> <user-id> <expected-ids> <late-follower-token>',
);
const expected = expectedList.split(',');

const FOLLOWERS = gql`
  query Followers($id: ID!, $first: Int, $after: String, $last: Int, $before: String) {
    user(id: $id) {
      id
      followers(first: $first, after: $after, last: $last, before: $before) {
        totalCount
        edges { cursor node { id handle } }
        pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
      }
    }
  }
`;
const FOLLOW = gql`
  mutation Follow($id: ID!) { follow(input: { userId: $id }) { changed } }
`;

const client = () =>
  new ApolloClient({
    link: new HttpLink({ uri: url }),
    cache: new InMemoryCache({
      typePolicies: { User: { fields: { followers: relayStylePagination() } } },
    }),
  });

// Watches `query` as a component would: `next(n)` resolves with the first
// result whose list holds more than `n` edges (what the component renders
// after a `fetchMore`).
const watch = (query) => {
  let latest = null;
  let waiting = null;
  const sub = query.subscribe({
    next: (result) => {
      if (!result.data?.user) return;
      latest = result.data;
      if (waiting && latest.user.followers.edges.length > waiting.n) {
        waiting.resolve(latest);
        waiting = null;
      }
    },
    error: (e) => fail(`watch: ${e}`),
  });
  const next = (n) =>
    latest && latest.user.followers.edges.length > n
      ? Promise.resolve(latest)
      : new Promise((resolve) => {
          waiting = { n, resolve };
        });
  return { sub, next };
};

const same = (what, got) => checkList(what, got.edges.map((e) => e.node.id), expected);

// Forward, while the list changes.
{
  const apollo = client();
  const query = apollo.watchQuery({ query: FOLLOWERS, variables: { id: userId, first: 7 } });
  const { sub, next } = watch(query);
  let data = await next(0);
  const late = new ApolloClient({
    link: new HttpLink({ uri: url, headers: { authorization: `Bearer ${lateToken}` } }),
    cache: new InMemoryCache(),
  });
  const followed = await late.mutate({ mutation: FOLLOW, variables: { id: userId } });
  if (!followed.data.follow.changed) fail('the late follow changed nothing');
  let pages = 1;
  while (data.user.followers.pageInfo.hasNextPage) {
    const had = data.user.followers.edges.length;
    await query.fetchMore({ variables: { after: data.user.followers.pageInfo.endCursor } });
    data = await next(had);
    pages += 1;
    if (pages > expected.length + 2) fail('paging never ends');
  }
  same('forward', data.user.followers);
  sub.unsubscribe();
  console.log(`forward: ${pages} pages, ${data.user.followers.edges.length} followers`);
}

// The late follow reaches the list and its count through the pipeline, a
// moment after its commit: wait for both before paging backward.
{
  const newest = gql`
    query Newest($id: ID!) {
      user(id: $id) { id followers(first: 1) { totalCount edges { node { id } } } }
    }
  `;
  const apollo = client();
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { data } = await apollo.query({
      query: newest,
      variables: { id: userId },
      fetchPolicy: 'network-only',
    });
    const list = data.user.followers;
    const first = list.edges[0]?.node.id;
    if (list.totalCount === expected.length + 1 && first && !expected.includes(first)) break;
    if (Date.now() > deadline) fail(`the late follow is not listed after 30 s: ${JSON.stringify(list)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// Backward from the oldest, with a fresh cache (the late follower is now
// the newest).
{
  const apollo = client();
  const query = apollo.watchQuery({ query: FOLLOWERS, variables: { id: userId, last: 6 } });
  const { sub, next } = watch(query);
  let data = await next(0);
  let pages = 1;
  while (data.user.followers.pageInfo.hasPreviousPage) {
    const had = data.user.followers.edges.length;
    await query.fetchMore({ variables: { before: data.user.followers.pageInfo.startCursor } });
    data = await next(had);
    pages += 1;
    if (pages > expected.length + 2) fail('paging never ends');
  }
  const edges = data.user.followers.edges;
  if (edges.length !== expected.length + 1) fail(`backward: ${edges.length} followers`);
  same('backward (without the newest)', { edges: edges.slice(1) });
  if (data.user.followers.totalCount !== expected.length + 1) {
    fail(`totalCount ${data.user.followers.totalCount}`);
  }
  sub.unsubscribe();
  console.log(`backward: ${pages} pages, ${edges.length} followers`);
}
process.exit(0);
