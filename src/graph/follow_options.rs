//! Per-follow options: what `follow` and `updateFollow` take, and
//! `updateFollow` itself (`type FollowOptions` is with the relations).

use async_graphql::{Context, ID, InputObject, MaybeUndefined, Object, SimpleObject};

use super::loaders::Loaders;
use super::relation::{FollowOptionsNode, Relationship};
use super::user::{UserNode, load_visible, relation};
use super::{app, ids, viewer};
use crate::error::GraphqlResultExt;
use crate::store::follow_options::OptionsChange;
use crate::write;

/// The options an input names (an absent field: as they are).
pub(crate) fn change(
    notify: Option<bool>,
    show_reposts: Option<bool>,
    languages: MaybeUndefined<Vec<String>>,
) -> OptionsChange {
    OptionsChange {
        notify,
        show_reposts,
        languages: match languages {
            MaybeUndefined::Undefined => None,
            MaybeUndefined::Null => Some(None),
            MaybeUndefined::Value(list) => Some(Some(list)),
        },
    }
}

/// Input of `updateFollow`: the options to change (absent: as they are).
#[derive(InputObject)]
pub(crate) struct UpdateFollowInput {
    /// Global id of the user the viewer follows (or asked to follow).
    pub user_id: ID,
    /// Be told when the user posts.
    pub notify: Option<bool>,
    /// See the user's reposts.
    pub show_reposts: Option<bool>,
    /// Only the user's posts in these languages (ISO 639 codes: two or three
    /// lowercase letters, at most 16); null: every language.
    pub languages: MaybeUndefined<Vec<String>>,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Result of `updateFollow`.
#[derive(SimpleObject)]
pub(crate) struct UpdateFollowPayload {
    /// False when the options were as asked already; nothing was written.
    pub changed: bool,
    /// The options are kept for a pending request to follow a locked
    /// account: they apply to the follow its acceptance makes.
    pub requested: bool,
    /// The options after the mutation.
    pub follow_options: FollowOptionsNode,
    /// The user followed; null when the account is deleted.
    pub user: Option<UserNode>,
    /// The viewer's relation to that user after the mutation.
    pub viewer_relation: Relationship,
    /// The input's `clientMutationId`.
    pub client_mutation_id: Option<String>,
}

/// `updateFollow`.
#[derive(Default)]
pub(crate) struct FollowOptionsMutation;

#[Object]
impl FollowOptionsMutation {
    /// Changes the viewer's options for its follow of a user (or for its
    /// pending request to follow a locked one): each option given is set,
    /// the others stay. `NOT_FOUND` when the viewer neither follows the
    /// user nor asked to. A change is a `FollowOptionsChanged` event; a
    /// later follow of the same user, after an unfollow, starts from the
    /// defaults. Costs a rate-limit token.
    async fn update_follow(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: UpdateFollowInput,
    ) -> async_graphql::Result<UpdateFollowPayload> {
        let actor = viewer(ctx).require().gql()?;
        let target = ids::decode_user(&input.user_id).gql()?;
        let change = change(input.notify, input.show_reposts, input.languages);
        let outcome = write::follow_options::update_follow(app(ctx), actor, target, &change)
            .await
            .gql()?;
        ctx.data_unchecked::<Loaders>().forget_boundaries();
        Ok(UpdateFollowPayload {
            changed: outcome.changed,
            requested: outcome.requested,
            follow_options: outcome.options.into(),
            user: load_visible(ctx, target).await?,
            viewer_relation: relation(ctx, actor, target).await?,
            client_mutation_id: input.client_mutation_id,
        })
    }
}
