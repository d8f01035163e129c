// The operations relay.mjs runs, compiled by relay-compiler (the test
// compiles them into a folder of its own; see relay.config.json).
import { graphql } from 'relay-runtime';

export const query = graphql`
  query followersListQuery($id: ID!, $count: Int!, $cursor: String) {
    user(id: $id) {
      ...followers_user @arguments(count: $count, cursor: $cursor)
    }
  }
`;

export const fragment = graphql`
  fragment followers_user on User
  @refetchable(queryName: "followersPaginationQuery")
  @argumentDefinitions(count: { type: "Int!" }, cursor: { type: "String" }) {
    handle
    followers(first: $count, after: $cursor) @connection(key: "followers_followers") {
      totalCount
      edges {
        node {
          id
          handle
        }
      }
    }
  }
`;
