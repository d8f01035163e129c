//! `addCloseFriend` / `removeCloseFriend`: the viewer's own list of close
//! friends. The list is read as `User.closeFriends` (its owner only), and
//! each account learns only its own place in others' lists
//! (`Relationship.inTheirCloseFriends`). Services granted
//! `kith:close-friends` ask `inCloseFriendsOf` for many authors at once.

use async_graphql::{Context, ErrorExtensions as _, ID, InputObject, Object, SimpleObject};

use super::loaders::Loaders;
use super::relation::Relationship;
use super::user::UserNode;
use super::{app, ids, viewer};
use crate::auth::Scopes;
use crate::error::GraphqlResultExt;
use crate::write;

/// What services ask of close friends.
#[derive(Default)]
pub(crate) struct CloseFriendQuery;

#[Object]
impl CloseFriendQuery {
    /// Whether the user is among the close friends of each author, in the
    /// order asked (false for an unknown author): what a content service
    /// asks before it shows a page of posts shared with close friends. Only
    /// for a service token granted `kith:close-friends` (docs/api.md);
    /// `FORBIDDEN` for any other token. One read of the user's own
    /// boundaries, held in process.
    async fn in_close_friends_of(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Global id of the user who would see the posts.")] user_id: ID,
        #[graphql(desc = "Global ids of the authors, at most 100.")] author_ids: Vec<ID>,
    ) -> async_graphql::Result<Vec<bool>> {
        viewer(ctx).service(Scopes::CLOSE_FRIENDS).gql()?;
        let user = ids::decode_user(&user_id).gql()?;
        let authors = super::user_query::decode_many(&author_ids).gql()?;
        let set = ctx
            .data_unchecked::<Loaders>()
            .boundaries(user)
            .await
            .map_err(|e| e.as_ref().extend())?;
        Ok(authors
            .iter()
            .map(|author| set.close_friend_of.contains(author))
            .collect())
    }
}

/// Input of `addCloseFriend` and `removeCloseFriend`.
#[derive(InputObject)]
pub(crate) struct CloseFriendInput {
    /// Global id of the user to add or remove.
    pub user_id: ID,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Result of `addCloseFriend` or `removeCloseFriend`.
#[derive(SimpleObject)]
pub(crate) struct CloseFriendPayload {
    /// False when the user was in the asked state already; nothing was written.
    pub changed: bool,
    /// The user added or removed; null when the account is deleted, as
    /// every query reads it.
    pub user: Option<UserNode>,
    /// The viewer's relation to that user after the mutation.
    pub viewer_relation: Relationship,
    /// The input's `clientMutationId`.
    pub client_mutation_id: Option<String>,
}

/// Close-friend mutations. Each takes a rate-limit token from the viewer.
#[derive(Default)]
pub(crate) struct CloseFriendMutation;

#[Object]
impl CloseFriendMutation {
    /// Adds a user to the viewer's close friends: a private list that only
    /// the viewer reads (`User.closeFriends`) and that content services
    /// share with. The user learns of it only through its own relation to
    /// the viewer (`inTheirCloseFriends`); nobody else learns of it. A
    /// listing changes no follow. `BLOCKED` while a block stands between
    /// the two (a block removes the listing both ways); at most
    /// `KITH_MAX_CLOSE_FRIENDS` (default 1,000) per account
    /// (`CLOSE_FRIENDS_LIMIT`). Repeating it changes nothing.
    async fn add_close_friend(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: CloseFriendInput,
    ) -> async_graphql::Result<CloseFriendPayload> {
        run(ctx, input, true).await
    }

    /// Removes a user from the viewer's close friends. Repeating it changes
    /// nothing.
    async fn remove_close_friend(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: CloseFriendInput,
    ) -> async_graphql::Result<CloseFriendPayload> {
        run(ctx, input, false).await
    }
}

async fn run(
    ctx: &Context<'_>,
    input: CloseFriendInput,
    add: bool,
) -> async_graphql::Result<CloseFriendPayload> {
    let actor = viewer(ctx).require().gql()?;
    let target = ids::decode_user(&input.user_id).gql()?;
    let outcome = write::change_close_friend(app(ctx), actor, target, add)
        .await
        .gql()?;
    ctx.data_unchecked::<Loaders>().forget_boundaries();
    Ok(CloseFriendPayload {
        changed: outcome.changed,
        viewer_relation: Relationship::between(actor, outcome.target.id, outcome.relation),
        user: UserNode::visible(outcome.target),
        client_mutation_id: input.client_mutation_id,
    })
}
