//! `block` / `unblock`, `mute` / `unmute`, and `updateAccountSettings`.

use async_graphql::{Context, ID, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};

use super::loaders::Loaders;
use super::mutation::FollowPayload;
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
    /// The user blocked or unblocked; null when the account is deleted,
    /// as every query reads it.
    pub user: Option<UserNode>,
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
        #[graphql(desc = "The mutation's input.")] input: BlockInput,
    ) -> async_graphql::Result<BlockPayload> {
        run(ctx, input, true).await
    }

    /// Lifts the viewer's block of a user. The follows the block ended stay
    /// ended. Repeating it changes nothing.
    async fn unblock(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: BlockInput,
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
    ctx.data_unchecked::<Loaders>().forget_boundaries();
    Ok(BlockPayload {
        changed: outcome.changed,
        viewer_relation: Relationship::between(actor, outcome.target.id, outcome.relation),
        user: UserNode::visible(outcome.target),
        client_mutation_id: input.client_mutation_id,
    })
}

/// Input of `mute`.
#[derive(InputObject)]
pub(crate) struct MuteInput {
    /// Global id of the user to mute.
    pub user_id: ID,
    /// How long the mute lasts, in seconds (1 to ten years); null: until
    /// unmuted. Muting again sets a new end.
    pub duration_secs: Option<i64>,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Input of `unmute`.
#[derive(InputObject)]
pub(crate) struct UnmuteInput {
    /// Global id of the user to unmute.
    pub user_id: ID,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Result of `mute` or `unmute`.
#[derive(SimpleObject)]
pub(crate) struct MutePayload {
    /// False when nothing changed: an unmute of no live mute, or a mute
    /// without end over one without end.
    pub changed: bool,
    /// The user muted or unmuted; null when the account is deleted, as
    /// every query reads it.
    pub user: Option<UserNode>,
    /// The viewer's relation to that user after the mutation.
    pub viewer_relation: Relationship,
    /// When the mute made now ends by itself; null for no end (and for `unmute`).
    pub expires_at: Option<DateTime<Utc>>,
    /// The input's `clientMutationId`.
    pub client_mutation_id: Option<String>,
}

/// Mute mutations. Each takes a rate-limit token from the viewer.
#[derive(Default)]
pub(crate) struct MuteMutation;

#[Object]
impl MuteMutation {
    /// Mutes a user, for `durationSecs` or until unmuted. A mute changes no
    /// follow and filters no list: it shows in the viewer's relation
    /// (`muting`), in the viewer's `muting` list and in the events, for
    /// feeds to act on. It ends by itself when due.
    async fn mute(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: MuteInput,
    ) -> async_graphql::Result<MutePayload> {
        run_mute(
            ctx,
            &input.user_id,
            true,
            input.duration_secs,
            input.client_mutation_id,
        )
        .await
    }

    /// Ends the viewer's mute of a user. Repeating it changes nothing.
    async fn unmute(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: UnmuteInput,
    ) -> async_graphql::Result<MutePayload> {
        run_mute(ctx, &input.user_id, false, None, input.client_mutation_id).await
    }
}

async fn run_mute(
    ctx: &Context<'_>,
    user_id: &ID,
    mute: bool,
    seconds: Option<i64>,
    client_mutation_id: Option<String>,
) -> async_graphql::Result<MutePayload> {
    let actor = viewer(ctx).require().gql()?;
    let target = ids::decode_user(user_id).gql()?;
    let outcome = write::change_mute(app(ctx), actor, target, mute, seconds)
        .await
        .gql()?;
    ctx.data_unchecked::<Loaders>().forget_boundaries();
    Ok(MutePayload {
        changed: outcome.changed,
        viewer_relation: Relationship::between(actor, outcome.target.id, outcome.relation),
        user: UserNode::visible(outcome.target),
        expires_at: outcome.expires_at,
        client_mutation_id,
    })
}

/// Input of `updateAccountSettings`: the settings to change (null: as they are).
#[derive(InputObject)]
pub(crate) struct AccountSettingsInput {
    /// Follows of the account wait for its consent: a follow becomes a
    /// request the account accepts or rejects (see `User.locked`). Turning
    /// it off accepts every pending request, in the background.
    pub locked: Option<bool>,
    /// Only the account itself sees its `followers` and `following`, and
    /// nothing derived from them (see `User.hidesCollections`).
    pub hides_collections: Option<bool>,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Result of `updateAccountSettings`.
#[derive(SimpleObject)]
pub(crate) struct AccountSettingsPayload {
    /// The viewer's account after the change.
    pub user: UserNode,
    /// The input's `clientMutationId`.
    pub client_mutation_id: Option<String>,
}

/// The viewer's own account settings.
#[derive(Default)]
pub(crate) struct SettingsMutation;

#[Object]
impl SettingsMutation {
    /// Changes the viewer's own account settings; costs a rate-limit token.
    async fn update_account_settings(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: AccountSettingsInput,
    ) -> async_graphql::Result<AccountSettingsPayload> {
        let actor = viewer(ctx).require().gql()?;
        let change = crate::store::users::SettingsChange {
            locked: input.locked,
            hides_collections: input.hides_collections,
        };
        let user = write::update_settings(app(ctx), actor, change)
            .await
            .gql()?;
        Ok(AccountSettingsPayload {
            user: UserNode(user),
            client_mutation_id: input.client_mutation_id,
        })
    }
}

/// Input of `acceptFollowRequest` and `rejectFollowRequest`.
#[derive(InputObject)]
pub(crate) struct FollowRequestInput {
    /// Global id of the user who asked to follow the viewer.
    pub user_id: ID,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Answers to the follow requests the viewer's locked account received.
#[derive(Default)]
pub(crate) struct RequestMutation;

#[Object]
impl RequestMutation {
    /// Accepts a pending request: the user follows the viewer from now on,
    /// exactly as by a follow (events, counters, lists). `changed: false`
    /// when no request of that user is pending. `BLOCKED` while a block
    /// stands between the two; `INVALID_INPUT` for a requester that is
    /// suspended or deleted (the request waits). The payload's user is the
    /// requester, its relation the viewer's to them.
    async fn accept_follow_request(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: FollowRequestInput,
    ) -> async_graphql::Result<FollowPayload> {
        answer(ctx, input, true).await
    }

    /// Rejects a pending request: it ends, and no follow is made.
    async fn reject_follow_request(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: FollowRequestInput,
    ) -> async_graphql::Result<FollowPayload> {
        answer(ctx, input, false).await
    }
}

async fn answer(
    ctx: &Context<'_>,
    input: FollowRequestInput,
    accept: bool,
) -> async_graphql::Result<FollowPayload> {
    let owner = viewer(ctx).require().gql()?;
    let requester = ids::decode_user(&input.user_id).gql()?;
    let outcome = write::requests::answer(app(ctx), owner, requester, accept)
        .await
        .gql()?;
    ctx.data_unchecked::<Loaders>().forget_boundaries();
    Ok(FollowPayload::new(owner, outcome, input.client_mutation_id))
}
