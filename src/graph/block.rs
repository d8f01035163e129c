//! `block` and `unblock`.

use async_graphql::{Context, ID, InputObject, Object, SimpleObject};

use super::relation::Relationship;
use super::user::UserNode;
use super::{app, ids, viewer};
use crate::error::GraphqlResultExt;
use crate::write;

/// Input of `block` and `unblock`.
#[derive(InputObject)]
pub(crate) struct BlockInput {
    /// Global id of the user to block or unblock.
    pub user_id: ID,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Result of `block` or `unblock`.
#[derive(SimpleObject)]
pub(crate) struct BlockPayload {
    /// False when the block was in the asked state already; nothing was written.
    pub changed: bool,
    /// The user blocked or unblocked.
    pub user: UserNode,
    /// The viewer's relation to that user after the mutation.
    pub viewer_relation: Relationship,
    /// The input's `clientMutationId`.
    pub client_mutation_id: Option<String>,
}

/// Block mutations. Each takes a rate-limit token from the viewer.
#[derive(Default)]
pub(crate) struct BlockMutation;

#[Object]
impl BlockMutation {
    /// Blocks a user: the follows between the viewer and the user end, both
    /// ways, as unfollows do (events, counters, lists); until unblocked,
    /// neither can follow the other (`BLOCKED`), and neither appears in the
    /// other's view of any list. At most `KITH_MAX_BLOCKS` (default 10,000)
    /// blocks per account (`BLOCK_LIMIT`). Repeating it changes nothing.
    async fn block(
        &self,
        ctx: &Context<'_>,
        input: BlockInput,
    ) -> async_graphql::Result<BlockPayload> {
        run(ctx, input, true).await
    }

    /// Lifts the viewer's block of a user. The follows the block ended stay
    /// ended. Repeating it changes nothing.
    async fn unblock(
        &self,
        ctx: &Context<'_>,
        input: BlockInput,
    ) -> async_graphql::Result<BlockPayload> {
        run(ctx, input, false).await
    }
}

async fn run(
    ctx: &Context<'_>,
    input: BlockInput,
    block: bool,
) -> async_graphql::Result<BlockPayload> {
    let actor = viewer(ctx).require().gql()?;
    let target = ids::decode_user(&input.user_id).gql()?;
    let outcome = write::change_block(app(ctx), actor, target, block)
        .await
        .gql()?;
    Ok(BlockPayload {
        changed: outcome.changed,
        viewer_relation: Relationship::between(actor, outcome.target.id, outcome.relation),
        user: UserNode(outcome.target),
        client_mutation_id: input.client_mutation_id,
    })
}
