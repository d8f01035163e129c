//! Edge-writing mutations: `follow`, `unfollow`, their batch forms
//! `followMany` / `unfollowMany`, and `removeFollower`.

use async_graphql::{Context, Enum, ID, InputObject, MaybeUndefined, Object, SimpleObject};

use super::loaders::Loaders;
use super::relation::Relationship;
use super::user::UserNode;
use super::{app, ids, viewer};
use crate::error::GraphqlResultExt;
use crate::model::UserId;
use crate::write::{self, EdgeChange, FollowOutcome, TargetError};

/// Input of `follow`.
#[derive(InputObject)]
pub(crate) struct FollowInput {
    /// Global id of the user to follow.
    pub user_id: ID,
    /// Be told when the user posts. Absent: false for a new follow, as it
    /// is for a follow that stands.
    pub notify: Option<bool>,
    /// See the user's reposts. Absent: true for a new follow, as it is for
    /// a follow that stands.
    pub show_reposts: Option<bool>,
    /// Only the user's posts in these languages (ISO 639 codes: two or three
    /// lowercase letters, at most 16); null: every language. Absent: every
    /// language for a new follow, as they are for a follow that stands.
    pub languages: MaybeUndefined<Vec<String>>,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Input of `unfollow`.
#[derive(InputObject)]
pub(crate) struct UnfollowInput {
    /// Global id of the user to unfollow.
    pub user_id: ID,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Input of `followMany` and `unfollowMany`.
#[derive(InputObject)]
pub(crate) struct EdgesInput {
    /// Global ids of the users, at most 100. Each costs one rate-limit token.
    /// Follows are counted against the follow cap in the order given: those
    /// that fit apply, the rest are refused one by one with `FOLLOW_LIMIT`.
    pub user_ids: Vec<ID>,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Input of `removeFollower`.
#[derive(InputObject)]
pub(crate) struct RemoveFollowerInput {
    /// Global id of the follower to remove.
    pub user_id: ID,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Why one user of a batch was not changed.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeErrorCode {
    /// The viewer itself.
    SelfTarget,
    /// Named earlier in the same list; the first mention was applied.
    Duplicate,
    /// No such user.
    NotFound,
    /// The account cannot be followed (not active).
    NotFollowable,
    /// One of the two accounts blocks the other.
    Blocked,
    /// Following this user would pass the viewer's follow cap; the users
    /// before it in the list that fit were followed.
    FollowLimit,
}

impl EdgeErrorCode {
    #[cfg(test)]
    /// The code of the API's vocabulary this value is named after.
    pub(crate) const fn code(self) -> crate::error::ErrorCode {
        use crate::error::ErrorCode;
        match self {
            Self::SelfTarget => ErrorCode::SelfTarget,
            Self::Duplicate => ErrorCode::Duplicate,
            Self::NotFound => ErrorCode::NotFound,
            Self::NotFollowable => ErrorCode::NotFollowable,
            Self::Blocked => ErrorCode::Blocked,
            Self::FollowLimit => ErrorCode::FollowLimit,
        }
    }
}

/// The error of one user of a batch.
#[derive(SimpleObject)]
pub(crate) struct EdgeError {
    /// Stable machine-readable code.
    pub code: EdgeErrorCode,
    /// What went wrong, for humans.
    pub message: String,
}

impl From<TargetError> for EdgeError {
    fn from(e: TargetError) -> Self {
        let (code, message) = match e {
            TargetError::SelfTarget => (
                EdgeErrorCode::SelfTarget,
                "a user cannot follow or unfollow themselves",
            ),
            TargetError::Duplicate => (
                EdgeErrorCode::Duplicate,
                "this user is named earlier in the list",
            ),
            TargetError::NotFound => (EdgeErrorCode::NotFound, "user not found"),
            TargetError::NotFollowable => {
                (EdgeErrorCode::NotFollowable, "this user cannot be followed")
            }
            TargetError::Blocked => (
                EdgeErrorCode::Blocked,
                "one of these accounts blocks the other",
            ),
            TargetError::FollowLimit => (
                EdgeErrorCode::FollowLimit,
                "following this user would pass your follow limit",
            ),
        };
        Self {
            code,
            message: message.to_owned(),
        }
    }
}

/// The result for one user of `followMany` / `unfollowMany`, in the order asked.
#[derive(SimpleObject)]
pub(crate) struct EdgeResult {
    /// The global id as given.
    pub user_id: ID,
    /// True when this call changed the edge; false when it was in the asked
    /// state already or `error` is set.
    pub changed: bool,
    /// A request to follow this (locked) user is pending after the call:
    /// the follow waits for the user's consent.
    pub requested: bool,
    /// The user, when the edge was applied (null when the account is deleted).
    pub user: Option<UserNode>,
    /// The viewer's relation to the user after the call, when applied.
    pub viewer_relation: Option<Relationship>,
    /// Why this user was not applied; null when it was.
    pub error: Option<EdgeError>,
}

/// Result of `followMany` or `unfollowMany`.
#[derive(SimpleObject)]
pub(crate) struct EdgesPayload {
    /// One result per id given, in the same order.
    pub results: Vec<EdgeResult>,
    /// How many edges this call changed.
    pub changed_count: i32,
    /// The input's `clientMutationId`.
    pub client_mutation_id: Option<String>,
}

/// Result of `follow`, `unfollow`, `removeFollower`, `acceptFollowRequest`
/// or `rejectFollowRequest`.
#[derive(SimpleObject)]
pub(crate) struct FollowPayload {
    /// False when nothing was written: the edge (or the request) was in the
    /// asked state already. A follow of a locked account is a request:
    /// `changed` says one was made, `viewerRelation.requested` that it waits.
    pub changed: bool,
    /// The target user (for `removeFollower`, the follower removed; for an
    /// answer to a request, the requester); null when the account is
    /// deleted, as every query reads it.
    pub user: Option<UserNode>,
    /// The viewer's relation to that user after the mutation.
    pub viewer_relation: Relationship,
    /// The input's `clientMutationId`.
    pub client_mutation_id: Option<String>,
}

impl FollowPayload {
    pub(crate) fn new(
        viewer: UserId,
        outcome: FollowOutcome,
        client_mutation_id: Option<String>,
    ) -> Self {
        Self {
            changed: outcome.changed,
            viewer_relation: Relationship::between(viewer, outcome.target.id, outcome.relation),
            user: UserNode::visible(outcome.target),
            client_mutation_id,
        }
    }
}

/// Edge-writing mutations. Each takes a rate-limit token from the viewer.
#[derive(Default)]
pub(crate) struct FollowMutation;

#[Object]
impl FollowMutation {
    /// Makes the viewer follow a user. With options (`notify`,
    /// `showReposts`, `languages`), the follow and its options commit
    /// together, and a follow that stands already gets them (`changed` when
    /// they change); a follow of a locked account keeps them for the follow
    /// its acceptance makes. Repeating it changes nothing.
    async fn follow(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: FollowInput,
    ) -> async_graphql::Result<FollowPayload> {
        let options =
            super::follow_options::change(input.notify, input.show_reposts, input.languages);
        if !options.is_empty() {
            let actor = viewer(ctx).require().gql()?;
            let target = ids::decode_user(&input.user_id).gql()?;
            let outcome = write::follow_options::follow_with(app(ctx), actor, target, &options)
                .await
                .gql()?;
            ctx.data_unchecked::<Loaders>().forget_boundaries();
            return Ok(FollowPayload::new(actor, outcome, input.client_mutation_id));
        }
        let (viewer, outcome) = run(ctx, &input.user_id, EdgeChange::Follow).await?;
        Ok(FollowPayload::new(
            viewer,
            outcome,
            input.client_mutation_id,
        ))
    }

    /// Makes the viewer stop following a user. Repeating it changes nothing.
    async fn unfollow(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: UnfollowInput,
    ) -> async_graphql::Result<FollowPayload> {
        let (viewer, outcome) = run(ctx, &input.user_id, EdgeChange::Unfollow).await?;
        Ok(FollowPayload::new(
            viewer,
            outcome,
            input.client_mutation_id,
        ))
    }

    /// Makes the viewer follow up to 100 users in one transaction. One
    /// rate-limit token per id, taken up front: a call the viewer's bucket
    /// cannot cover is refused whole (`RATE_LIMITED`). Users that cannot be
    /// followed get an error in their result; the others are applied.
    #[graphql(complexity = "input.user_ids.len().max(1) * child_complexity + 1")]
    async fn follow_many(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: EdgesInput,
    ) -> async_graphql::Result<EdgesPayload> {
        run_many(ctx, input, EdgeChange::Follow).await
    }

    /// Makes the viewer stop following up to 100 users in one transaction;
    /// rate limited and reported as `followMany`.
    #[graphql(complexity = "input.user_ids.len().max(1) * child_complexity + 1")]
    async fn unfollow_many(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: EdgesInput,
    ) -> async_graphql::Result<EdgesPayload> {
        run_many(ctx, input, EdgeChange::Unfollow).await
    }

    /// Makes a follower of the viewer stop following the viewer: the same
    /// change as that user's own `unfollow` (their counts, lists and event),
    /// rate limited as the viewer's edge write. Repeating it changes nothing.
    async fn remove_follower(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: RemoveFollowerInput,
    ) -> async_graphql::Result<FollowPayload> {
        let owner = viewer(ctx).require().gql()?;
        let follower = ids::decode_user(&input.user_id).gql()?;
        let outcome = write::remove_follower(app(ctx), owner, follower)
            .await
            .gql()?;
        Ok(FollowPayload::new(owner, outcome, input.client_mutation_id))
    }
}

async fn run_many(
    ctx: &Context<'_>,
    input: EdgesInput,
    change: EdgeChange,
) -> async_graphql::Result<EdgesPayload> {
    let actor = viewer(ctx).require().gql()?;
    let targets: Vec<UserId> = input
        .user_ids
        .iter()
        .map(ids::decode_user)
        .collect::<Result<_, _>>()
        .gql()?;
    let results = write::change_edges(app(ctx), actor, &targets, change)
        .await
        .gql()?;
    ctx.data_unchecked::<Loaders>().forget_boundaries();
    let results: Vec<EdgeResult> = input
        .user_ids
        .into_iter()
        .zip(results)
        .map(|(user_id, result)| match result {
            Ok(outcome) => EdgeResult {
                user_id,
                changed: outcome.changed,
                requested: outcome.requested,
                viewer_relation: Some(Relationship::between(
                    actor,
                    outcome.target.id,
                    outcome.relation,
                )),
                user: UserNode::visible(outcome.target),
                error: None,
            },
            Err(e) => EdgeResult {
                user_id,
                changed: false,
                requested: false,
                user: None,
                viewer_relation: None,
                error: Some(e.into()),
            },
        })
        .collect();
    Ok(EdgesPayload {
        changed_count: i32::try_from(results.iter().filter(|r| r.changed).count())
            .unwrap_or(i32::MAX),
        results,
        client_mutation_id: input.client_mutation_id,
    })
}

async fn run(
    ctx: &Context<'_>,
    target: &ID,
    change: EdgeChange,
) -> async_graphql::Result<(UserId, FollowOutcome)> {
    let actor = viewer(ctx).require().gql()?;
    let target = ids::decode_user(target).gql()?;
    let outcome = write::change_edge(app(ctx), actor, target, change)
        .await
        .gql()?;
    ctx.data_unchecked::<Loaders>().forget_boundaries();
    Ok((actor, outcome))
}

#[cfg(test)]
mod tests {
    use async_graphql::resolver_utils::EnumType;

    use super::EdgeErrorCode;

    #[test]
    fn batch_codes_are_named_after_the_api_codes() {
        for item in EdgeErrorCode::items() {
            assert_eq!(item.name, item.value.code().as_str());
        }
    }
}
