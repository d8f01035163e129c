// Kith behind a Federation 2 gateway, as docs/clients.md sets it up:
// Kith's committed subgraph schema and a small posts subgraph (written
// here: posts by author, extending `User`) composed offline with
// @theguild/federation-composition, served by Hive Gateway's runtime.
// Checks one query spanning both services, a follow through the gateway,
// a Relay page walk with no duplicate or gap, `userCountersChanged`
// through the gateway (SSE to the gateway, graphql-ws to Kith), the posts
// subgraph as the supergraph's node owner (`@override`), and measures
// what the gateway adds to a profile query.
//
// node gateway.mjs <kith url> <star id> <expected follower ids, newest
// first, comma-separated> <token of a user who does not follow the star
// yet> <report file>

import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { buildSchema, graphql, parse } from 'graphql';
import { composeServices } from '@theguild/federation-composition';
import { createGatewayRuntime } from '@graphql-hive/gateway-runtime';

const [kithUrl, starId, expectedIds, token, reportFile] = process.argv.slice(2);
const expected = expectedIds.split(',');
const fail = (message) => {
  console.error(message);
  process.exit(1);
};

// --- The posts subgraph: posts by author, extending Kith's `User`. ---

const posts = [
  { id: 'p1', title: 'Hello from the star', authorId: starId },
  { id: 'p2', title: 'A fan writes back', authorId: expected[0] },
];
// Its SDL as composed: without `node` beside Kith as the node owner, or
// taking `Query.node` over from Kith with `@override` (docs/clients.md).
const postsSdl = (ownsNode) => /* GraphQL */ `
  extend schema
    @link(url: "https://specs.apollo.dev/federation/v2.5", import: ["@key", "@override"])

  ${ownsNode ? 'interface Node { id: ID! }' : ''}

  type Post ${ownsNode ? 'implements Node' : ''} @key(fields: "id") {
    id: ID!
    title: String!
    author: User!
  }

  type User ${ownsNode ? 'implements Node' : ''} @key(fields: "id") {
    id: ID!
    posts: [Post!]!
  }

  type Query {
    latestPosts: [Post!]!
    ${ownsNode ? 'node(id: ID!): Node @override(from: "kith")' : ''}
  }
`;
// The same types, executable, with the Federation fields a gateway calls.
const postsSchema = buildSchema(`
  interface Node { id: ID! }
  type Post implements Node { id: ID! title: String! author: User! }
  type User implements Node { id: ID! posts: [Post!]! }
  scalar _Any
  union _Entity = Post | User
  type _Service { sdl: String }
  type Query {
    latestPosts: [Post!]!
    node(id: ID!): Node
    _entities(representations: [_Any!]!): [_Entity]!
    _service: _Service!
  }
`);
postsSchema.getType('_Entity').resolveType = (value) => value.__typename;
postsSchema.getType('Node').resolveType = (value) => value.__typename;
// Fields as functions: graphql-js calls them only when they are asked.
const post = (p) => ({
  __typename: 'Post',
  ...p,
  author: () => user(p.authorId),
});
const user = (id) => ({
  __typename: 'User',
  id,
  posts: () => posts.filter((p) => p.authorId === id).map(post),
});
// As the supergraph's node owner: its own posts, and a Kith user's id by
// the type name Kith's ids carry (`base64url("User:…")`), as a reference
// whose fields the gateway asks Kith for.
let nodeCalls = 0;
const node = ({ id }) => {
  nodeCalls += 1;
  const own = posts.find((p) => p.id === id);
  if (own) return post(own);
  const name = Buffer.from(id, 'base64url').toString('utf8');
  return name.startsWith('User:') ? user(id) : null;
};
const postsRoot = {
  latestPosts: () => posts.map(post),
  node,
  _entities: ({ representations }) =>
    representations.map((r) =>
      r.__typename === 'User'
        ? user(r.id)
        : post(posts.find((p) => p.id === r.id)),
    ),
  _service: () => ({ sdl: postsSdl(false) }),
};
let postsRequests = 0;
const postsServer = createServer(async (req, res) => {
  let body = '';
  for await (const chunk of req) body += chunk;
  postsRequests += 1;
  const { query, variables } = JSON.parse(body);
  const result = await graphql({
    schema: postsSchema,
    source: query,
    variableValues: variables,
    rootValue: postsRoot,
  });
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify(result));
});
await new Promise((ok) => postsServer.listen(0, '127.0.0.1', ok));
const postsUrl = `http://127.0.0.1:${postsServer.address().port}/graphql`;

// --- Composition, offline, from the committed subgraph schema, and the
//     gateway: Kith as the node owner, or the posts subgraph as it. ---

const kithSdl = readFileSync(
  new URL('../../schema.subgraph.graphql', import.meta.url),
  'utf8',
);
async function serveGateway(postsOwnsNode) {
  const composed = composeServices([
    { name: 'kith', typeDefs: parse(kithSdl), url: kithUrl },
    { name: 'posts', typeDefs: parse(postsSdl(postsOwnsNode)), url: postsUrl },
  ]);
  if (composed.errors?.length) {
    fail(`composition failed:\n${composed.errors.map((e) => e.message).join('\n')}`);
  }
  const runtime = createGatewayRuntime({
    supergraph: composed.supergraphSdl,
    logging: false,
    // The viewer's JWT reaches Kith with each request…
    propagateHeaders: {
      fromClientToSubgraphs: ({ request }) => ({
        authorization: request.headers.get('authorization') ?? undefined,
      }),
    },
    // …and with each subscription, over graphql-ws.
    transportEntries: {
      kith: {
        options: {
          subscriptions: {
            kind: 'ws',
            location: '/graphql',
            options: {
              connectionParams: {
                authorization: '{context.headers.authorization}',
              },
            },
          },
        },
      },
    },
  });
  const server = createServer(runtime);
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { runtime, server, url: `http://127.0.0.1:${server.address().port}/graphql` };
}
const gateway = await serveGateway(false);
const gatewayUrl = gateway.url;

async function ask(url, query, variables = {}, auth = token) {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json, application/json',
      authorization: `Bearer ${auth}`,
    },
    body: JSON.stringify({ query, variables }),
  });
  const result = await response.json();
  if (result.errors) fail(`${url}: ${JSON.stringify(result.errors)}`);
  return result.data;
}

// 1. One query across both services, in one round trip to the gateway.
const across = await ask(
  gatewayUrl,
  `{ latestPosts { title author { id handle counters { followers }
      viewerRelation { following } posts { id } } } }`,
);
const starPost = across.latestPosts[0];
if (starPost.author.id !== starId || starPost.author.counters.followers !== expected.length) {
  fail(`the star's post, across services: ${JSON.stringify(starPost)}`);
}
if (starPost.author.viewerRelation.following !== false || starPost.author.posts[0].id !== 'p1') {
  fail(`the viewer's relation and the posts back: ${JSON.stringify(starPost)}`);
}
console.log(`across services: "${starPost.title}" by ${starPost.author.handle}`);

// 2. A Relay page walk through the gateway: each follower once, in order.
const seen = [];
let after = null;
let pages = 0;
for (;;) {
  const page = await ask(
    gatewayUrl,
    `query($id: ID!, $after: String) { user(id: $id) {
       followers(first: 7, after: $after) {
         edges { cursor node { id } } pageInfo { hasNextPage endCursor } } } }`,
    { id: starId, after },
  );
  const { edges, pageInfo } = page.user.followers;
  seen.push(...edges.map((e) => e.node.id));
  pages += 1;
  if (!pageInfo.hasNextPage) break;
  after = pageInfo.endCursor;
  if (pages > 20) fail('the walk does not end');
}
if (seen.join(',') !== expected.join(',')) {
  fail(`the walk saw ${seen.length} followers, not the list:\n${seen}\n${expected}`);
}
console.log(`walk: ${pages} pages, ${seen.length} followers`);

// 3. `userCountersChanged` through the gateway (SSE), then a follow
//    through the gateway, which the subscription must show.
const controller = new AbortController();
const stream = await fetch(gatewayUrl, {
  method: 'POST',
  signal: controller.signal,
  headers: {
    'content-type': 'application/json',
    accept: 'text/event-stream',
    authorization: `Bearer ${token}`,
  },
  body: JSON.stringify({
    query: `subscription($id: ID!) { userCountersChanged(userId: $id) {
      userId counters { followers } } }`,
    variables: { id: starId },
  }),
});
if (!stream.ok) fail(`subscription refused: ${stream.status} ${await stream.text()}`);
const updates = (async function* () {
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of stream.body) {
    buffered += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffered.indexOf('\n\n')) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = event
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trim())
        .join('');
      if (!data) continue;
      const message = JSON.parse(data);
      if (message.errors) fail(`subscription: ${JSON.stringify(message.errors)}`);
      if (message.data) yield message.data.userCountersChanged;
    }
  }
})();
const within = (ms, promise, what) =>
  Promise.race([
    promise,
    new Promise((_, no) => setTimeout(() => no(new Error(`${what}: nothing in ${ms} ms`)), ms)),
  ]);
const first = (await within(20_000, updates.next(), 'the first counters')).value;
if (first.counters.followers !== expected.length) {
  fail(`first counters: ${JSON.stringify(first)}`);
}
const followed = await ask(
  gatewayUrl,
  `mutation($id: ID!) { follow(input: {userId: $id}) { changed user { counters { followers } } } }`,
  { id: starId },
);
if (!followed.follow.changed) fail(`the follow: ${JSON.stringify(followed)}`);
let live = first;
while (live.counters.followers !== expected.length + 1) {
  live = (await within(20_000, updates.next(), 'the follow, live')).value;
}
controller.abort();
console.log(`live: ${first.counters.followers} -> ${live.counters.followers} followers`);

// 4. Another subgraph as the node owner: the posts subgraph takes
//    `Query.node` over with `@override(from: "kith")`. Both `node` fields
//    go to it (Kith would refuse the post's id); the star's comes back as
//    a `User` reference whose fields the gateway asks Kith's `_entities`.
const owned = await serveGateway(true);
const nodeCallsBefore = nodeCalls;
const viaNode = await ask(
  owned.url,
  `query($star: ID!) {
     star: node(id: $star) { __typename id ... on User { handle counters { followers } } }
     post: node(id: "p1") { __typename ... on Post { title author { id handle } } } }`,
  { star: starId },
);
if (
  viaNode.star?.__typename !== 'User' ||
  viaNode.star.handle !== starPost.author.handle ||
  viaNode.star.counters.followers !== expected.length + 1 ||
  viaNode.post?.title !== posts[0].title ||
  viaNode.post.author.handle !== starPost.author.handle ||
  nodeCalls - nodeCallsBefore !== 2
) {
  fail(`node owned by posts: ${JSON.stringify(viaNode)}, ${nodeCalls - nodeCallsBefore} node calls`);
}
console.log(`node owned by posts: ${viaNode.star.handle}, "${viaNode.post.title}"`);
await owned.runtime.dispose?.();
owned.server.close();

// 5. What the gateway adds to a profile query: the same query, direct and
//    through the gateway, alternating rounds of sequential requests.
const profile = `query($id: ID!) { user(id: $id) { handle displayName
  counters { followings followers }
  followers(first: 20) { totalCount edges { cursor node { id handle
    counters { followings followers } viewerRelation { following followedBy } } } }
  viewerRelation { following followedBy } } }`;
const timings = { direct: [], gateway: [] };
for (let round = 0; round < 10; round += 1) {
  for (const [name, url] of [['direct', kithUrl], ['gateway', gatewayUrl]]) {
    for (let i = 0; i < 30; i += 1) {
      const start = process.hrtime.bigint();
      await ask(url, profile, { id: starId });
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      if (round > 0) timings[name].push(ms);
    }
  }
}
const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
const row = (name) => {
  const v = timings[name];
  return `| ${name} | ${v.length} | ${quantile(v, 0.5).toFixed(2)} | ${quantile(v, 0.99).toFixed(2)} |`;
};
const added = quantile(timings.gateway, 0.5) - quantile(timings.direct, 0.5);
const report = [
  '# What the gateway adds to the profile query',
  '',
  'Sequential requests from one Node.js client over HTTP, alternating',
  'rounds of 30 (the first round of each is a warm-up), Hive Gateway',
  'runtime and Kith on the same machine, Kith as the caller built it',
  '(the tests: a debug build). Latency in ms.',
  '',
  '| path | requests | p50 | p99 |',
  '|---|---|---|---|',
  row('direct'),
  row('gateway'),
  '',
  `The gateway adds ${added.toFixed(2)} ms at the median.`,
  '',
].join('\n');
writeFileSync(reportFile, report);
console.log(`gateway adds ${added.toFixed(2)} ms at p50`);
console.log(`posts subgraph requests: ${postsRequests}`);

await gateway.runtime.dispose?.();
gateway.server.close();
postsServer.close();
process.exit(0);
