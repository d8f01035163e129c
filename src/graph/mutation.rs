//! `Mutation.follow` and `Mutation.unfollow`.

use async_graphql::{Context, ID, InputObject, Object, SimpleObject};

use super::relation::Relationship;
use super::user::UserNode;
use super::{app, ids, viewer};
use crate::error::GraphqlResultExt;
use crate::write::{self, EdgeChange, FollowOutcome};

/// Input of `follow`.
#[derive(InputObject)]
pub struct FollowInput {
    /// Global id of the user to follow.
    pub user_id: ID,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Input of `unfollow`.
#[derive(InputObject)]
pub struct UnfollowInput {
    /// Global id of the user to unfollow.
    pub user_id: ID,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Result of `follow` or `unfollow`.
#[derive(SimpleObject)]
pub struct FollowPayload {
    /// False when the edge was already in the requested state; nothing was written.
    pub changed: bool,
    /// The target user.
    pub user: UserNode,
    /// The viewer's relation to the target after the mutation.
    pub viewer_relation: Relationship,
    /// The input's `clientMutationId`.
    pub client_mutation_id: Option<String>,
}

impl FollowPayload {
    fn new(outcome: FollowOutcome, client_mutation_id: Option<String>) -> Self {
        Self {
            changed: outcome.changed,
            user: UserNode(outcome.target),
            viewer_relation: outcome.relation.into(),
            client_mutation_id,
        }
    }
}

/// Edge-writing mutations. Each takes a rate-limit token from the viewer.
#[derive(Default)]
pub struct FollowMutation;

#[Object]
impl FollowMutation {
    /// Makes the viewer follow a user. Repeating it changes nothing.
    async fn follow(
        &self,
        ctx: &Context<'_>,
        input: FollowInput,
    ) -> async_graphql::Result<FollowPayload> {
        let outcome = run(ctx, &input.user_id, EdgeChange::Follow).await?;
        Ok(FollowPayload::new(outcome, input.client_mutation_id))
    }

    /// Makes the viewer stop following a user. Repeating it changes nothing.
    async fn unfollow(
        &self,
        ctx: &Context<'_>,
        input: UnfollowInput,
    ) -> async_graphql::Result<FollowPayload> {
        let outcome = run(ctx, &input.user_id, EdgeChange::Unfollow).await?;
        Ok(FollowPayload::new(outcome, input.client_mutation_id))
    }
}

async fn run(
    ctx: &Context<'_>,
    target: &ID,
    change: EdgeChange,
) -> async_graphql::Result<FollowOutcome> {
    let actor = viewer(ctx).require().gql()?;
    let target = ids::decode_user(target).gql()?;
    write::change_edge(app(ctx), actor, target, change)
        .await
        .gql()
}
