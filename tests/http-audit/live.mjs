// Subscribes with the `graphql-ws` client (the one Apollo Client and most
// frontends use for subscriptions) and checks that a follow shows up live:
//   node tests/http-audit/live.mjs <ws url> <http url> <star token> <fan token> <star id>
// Subscribes, as the star, to its counters and follower events, follows the star as
// the fan over HTTP once the current counters arrive, and exits 0 once both
// subscriptions have shown the follow (1 on any error, or after 20 s).
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const [wsUrl, httpUrl, starToken, fanToken, star] = process.argv.slice(2);
if (!star) {
  console.error('usage: node live.mjs <ws url> <http url> <star token> <fan token> <star id>');
  process.exit(2);
}
const fail = (why) => {
  console.error(`FAIL ${why}`);
  process.exit(1);
};
setTimeout(() => fail('no live update within 20 s'), 20_000);

const client = createClient({
  url: wsUrl,
  webSocketImpl: WebSocket,
  connectionParams: { authorization: `Bearer ${starToken}` },
  retryAttempts: 0,
});

const seen = { counters: false, event: false };
const done = () => {
  if (seen.counters && seen.event) {
    console.log('ok: counters and follower event received');
    client.dispose();
    process.exit(0);
  }
};
const sink = (name, onData) => ({
  next: (result) => {
    if (result.errors) fail(`${name}: ${JSON.stringify(result.errors)}`);
    onData(result.data);
  },
  error: (e) => fail(`${name}: ${e instanceof Error ? e.message : JSON.stringify(e)}`),
  complete: () => {},
});

let followed = false;
client.subscribe(
  {
    query: `subscription($id: ID!) { followerEvents(userId: $id) { type follower { handle } } }`,
    variables: { id: star },
  },
  sink('followerEvents', (data) => {
    const e = data.followerEvents;
    if (e.type === 'FOLLOWED' && e.follower.handle === 'fan') {
      seen.event = true;
      done();
    }
  }),
);
client.subscribe(
  {
    query: `subscription($id: ID!) { userCountersChanged(userId: $id) { counters { followers } } }`,
    variables: { id: star },
  },
  sink('userCountersChanged', async (data) => {
    const followers = data.userCountersChanged.counters.followers;
    if (!followed) {
      // The events subscription was sent first: the server has started it
      // by the time this one answers (it starts a connection's operations
      // in the order they arrive).
      followed = true;
      const response = await fetch(httpUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${fanToken}` },
        body: JSON.stringify({
          query: 'mutation($id: ID!) { follow(input: {userId: $id}) { changed } }',
          variables: { id: star },
        }),
      });
      const body = await response.json();
      if (!body.data?.follow?.changed) fail(`follow: ${JSON.stringify(body)}`);
    } else if (followers === 1) {
      seen.counters = true;
      done();
    }
  }),
);
