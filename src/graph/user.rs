//! `type User` (the queries that find users are in `user_query`).

use async_graphql::{Context, ErrorExtensions as _, ID, Object};

use super::connection::{self, FollowConnection, Shared};
use super::count::Counters;
use super::loaders::Loaders;
use super::page_args::{self, PageArgs};
use super::relation::Relationship;
use super::{ids, viewer};
use crate::error::GraphqlResultExt;
use crate::model::{User, UserId};
use crate::paging::{ListKey, PrivateList};

/// A user's public profile. Private fields (email, phone) are never exposed.
pub(crate) struct UserNode(pub User);

impl UserNode {
    /// `user` as readers may see it: `None` once the account is deleted,
    /// as every query reads it (a mutation's payload too).
    pub(crate) fn visible(user: User) -> Option<Self> {
        (user.status != crate::model::UserStatus::Deleted).then_some(Self(user))
    }
}

/// A user's public profile.
#[Object(name = "User")]
impl UserNode {
    /// Opaque global id.
    pub async fn id(&self) -> ID {
        ids::user_id(self.0.id)
    }

    /// Unique public handle.
    async fn handle(&self) -> &str {
        &self.0.handle
    }

    /// Name shown in the UI.
    async fn display_name(&self) -> &str {
        &self.0.display_name
    }

    /// Follows of this user wait for its consent: `follow` makes a request
    /// it accepts or rejects (`acceptFollowRequest`, `rejectFollowRequest`).
    async fn locked(&self) -> bool {
        self.0.locked
    }

    /// Only this user sees its `followers` and `following`: to anyone else
    /// they are empty and `hidden`, with their public `totalCount`, and
    /// nothing derived from them shows their members (`commonFollowing`,
    /// `knownFollowers` and `relationTo` involving this user are hidden or
    /// null, `knownFollowersCount` is 0 and not exact). The counters stay
    /// public.
    async fn hides_collections(&self) -> bool {
        self.0.hides_collections
    }

    /// The account this one moved to (`moveAccount`): it takes no follows
    /// (`MOVED`), and its followers are brought to that account. Null when
    /// it has not moved, or moved back.
    async fn moved_to(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<UserNode>> {
        let loaders = ctx.data_unchecked::<Loaders>();
        // The held row, not this object's copy: a mutation's payload
        // describes its users without it.
        let held = loaders
            .user(self.0.id)
            .await
            .map_err(|e| e.as_ref().extend())?;
        let Some(to) = held.and_then(|u| u.moved_to) else {
            return Ok(None);
        };
        let user = loaders.user(to).await.map_err(|e| e.as_ref().extend())?;
        Ok(user.and_then(UserNode::visible))
    }

    /// Follow and content counters (exact, never negative).
    async fn counters(&self, ctx: &Context<'_>) -> async_graphql::Result<Counters> {
        let record = ctx
            .data_unchecked::<Loaders>()
            .counters(self.0.id)
            .await
            .map_err(|e| e.as_ref().extend())?;
        Ok(Counters::from(record))
    }

    /// Whom this user follows, newest first. To a viewer this user blocks:
    /// no edge (`hidden`, `totalCount` the public count) and a `BLOCKED`
    /// error at this field beside it.
    #[graphql(complexity = "page_args::page_cost(first, last, offset, child_complexity)")]
    async fn following(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Page size from the start of the list (or after `after`), at most 100; 20 when no size is given."
        )]
        first: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page starts after it.")] after: Option<
            String,
        >,
        #[graphql(
            desc = "Page size from the end of the list (or before `before`), at most 100; 20 when `before` comes alone."
        )]
        last: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page ends before it.")] before: Option<
            String,
        >,
        #[graphql(
            desc = "Edges to skip from the start, by rank (at most `KITH_MAX_OFFSET`), with `first` or alone (a page of 20 then); ranks shift when the list changes, cursors do not."
        )]
        offset: Option<i32>,
    ) -> async_graphql::Result<FollowConnection> {
        let args = PageArgs::new(first, after, last, before, offset);
        self.list(ctx, ListKey::Following(self.0.id), args).await
    }

    /// Who follows this user, newest first; to a viewer this user blocks,
    /// as `following`.
    #[graphql(complexity = "page_args::page_cost(first, last, offset, child_complexity)")]
    async fn followers(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Page size from the start of the list (or after `after`), at most 100; 20 when no size is given."
        )]
        first: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page starts after it.")] after: Option<
            String,
        >,
        #[graphql(
            desc = "Page size from the end of the list (or before `before`), at most 100; 20 when `before` comes alone."
        )]
        last: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page ends before it.")] before: Option<
            String,
        >,
        #[graphql(
            desc = "Edges to skip from the start, by rank (at most `KITH_MAX_OFFSET`), with `first` or alone (a page of 20 then); ranks shift when the list changes, cursors do not."
        )]
        offset: Option<i32>,
    ) -> async_graphql::Result<FollowConnection> {
        let args = PageArgs::new(first, after, last, before, offset);
        self.list(ctx, ListKey::Followers(self.0.id), args).await
    }

    /// Accounts this user may want to follow, best first, each with its
    /// reason: followed by accounts it follows, following it, or among the
    /// most followed. Only the user itself may read it (`FORBIDDEN`).
    /// Computed with bounded work and kept 15 minutes; the user's own
    /// follows, blocks, mutes and dismissals compute it again.
    #[graphql(
        complexity = "page_args::page_cost(first, None, None, child_complexity) + page_args::INTERSECTION_COST"
    )]
    async fn suggested_follows(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Page size from the start of the list (or after `after`), at most 100; 20 when no size is given."
        )]
        first: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page starts after it.")] after: Option<
            String,
        >,
    ) -> async_graphql::Result<super::suggest::SuggestionConnection> {
        Box::pin(async move { super::suggest::resolve(ctx, self.0.id, first, after).await }).await
    }

    /// Whom this user blocks, newest first (`followedAt`: when the block
    /// was made). Only the user itself may read it (`FORBIDDEN`).
    #[graphql(complexity = "page_args::page_cost(first, last, offset, child_complexity)")]
    async fn blocking(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Page size from the start of the list (or after `after`), at most 100; 20 when no size is given."
        )]
        first: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page starts after it.")] after: Option<
            String,
        >,
        #[graphql(
            desc = "Page size from the end of the list (or before `before`), at most 100; 20 when `before` comes alone."
        )]
        last: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page ends before it.")] before: Option<
            String,
        >,
        #[graphql(
            desc = "Edges to skip from the start, by rank (at most `KITH_MAX_OFFSET`), with `first` or alone (a page of 20 then); ranks shift when the list changes, cursors do not."
        )]
        offset: Option<i32>,
    ) -> async_graphql::Result<FollowConnection> {
        let args = PageArgs::new(first, after, last, before, offset);
        connection::resolve_private(ctx, PrivateList::Blocking(self.0.id), args).await
    }

    /// Whom this user mutes, newest first (`followedAt`: when the mute
    /// began; mutes past their end are left out). Only the user itself may
    /// read it (`FORBIDDEN`).
    #[graphql(complexity = "page_args::page_cost(first, last, offset, child_complexity)")]
    async fn muting(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Page size from the start of the list (or after `after`), at most 100; 20 when no size is given."
        )]
        first: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page starts after it.")] after: Option<
            String,
        >,
        #[graphql(
            desc = "Page size from the end of the list (or before `before`), at most 100; 20 when `before` comes alone."
        )]
        last: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page ends before it.")] before: Option<
            String,
        >,
        #[graphql(
            desc = "Edges to skip from the start, by rank (at most `KITH_MAX_OFFSET`), with `first` or alone (a page of 20 then); ranks shift when the list changes, cursors do not."
        )]
        offset: Option<i32>,
    ) -> async_graphql::Result<FollowConnection> {
        let args = PageArgs::new(first, after, last, before, offset);
        connection::resolve_private(ctx, PrivateList::Muting(self.0.id), args).await
    }

    /// Whom this user lists among its close friends, newest first
    /// (`followedAt`: when each was added). Only the user itself may read
    /// it, and a service token granted `kith:close-friends` (else
    /// `FORBIDDEN`).
    #[graphql(complexity = "page_args::page_cost(first, last, offset, child_complexity)")]
    async fn close_friends(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Page size from the start of the list (or after `after`), at most 100; 20 when no size is given."
        )]
        first: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page starts after it.")] after: Option<
            String,
        >,
        #[graphql(
            desc = "Page size from the end of the list (or before `before`), at most 100; 20 when `before` comes alone."
        )]
        last: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page ends before it.")] before: Option<
            String,
        >,
        #[graphql(
            desc = "Edges to skip from the start, by rank (at most `KITH_MAX_OFFSET`), with `first` or alone (a page of 20 then); ranks shift when the list changes, cursors do not."
        )]
        offset: Option<i32>,
    ) -> async_graphql::Result<FollowConnection> {
        let args = PageArgs::new(first, after, last, before, offset);
        connection::resolve_private(ctx, PrivateList::CloseFriends(self.0.id), args).await
    }

    /// Who asked to follow this (locked) user and waits, newest first
    /// (`followedAt`: when they asked). Only the user itself may read it
    /// (`FORBIDDEN`).
    #[graphql(complexity = "page_args::page_cost(first, last, offset, child_complexity)")]
    async fn follow_requests(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Page size from the start of the list (or after `after`), at most 100; 20 when no size is given."
        )]
        first: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page starts after it.")] after: Option<
            String,
        >,
        #[graphql(
            desc = "Page size from the end of the list (or before `before`), at most 100; 20 when `before` comes alone."
        )]
        last: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page ends before it.")] before: Option<
            String,
        >,
        #[graphql(
            desc = "Edges to skip from the start, by rank (at most `KITH_MAX_OFFSET`), with `first` or alone (a page of 20 then); ranks shift when the list changes, cursors do not."
        )]
        offset: Option<i32>,
    ) -> async_graphql::Result<FollowConnection> {
        let args = PageArgs::new(first, after, last, before, offset);
        connection::resolve_private(ctx, PrivateList::FollowRequests(self.0.id), args).await
    }

    /// Whom this user asked to follow and waits for, newest first. Only the
    /// user itself may read it (`FORBIDDEN`).
    #[graphql(complexity = "page_args::page_cost(first, last, offset, child_complexity)")]
    async fn sent_follow_requests(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Page size from the start of the list (or after `after`), at most 100; 20 when no size is given."
        )]
        first: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page starts after it.")] after: Option<
            String,
        >,
        #[graphql(
            desc = "Page size from the end of the list (or before `before`), at most 100; 20 when `before` comes alone."
        )]
        last: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page ends before it.")] before: Option<
            String,
        >,
        #[graphql(
            desc = "Edges to skip from the start, by rank (at most `KITH_MAX_OFFSET`), with `first` or alone (a page of 20 then); ranks shift when the list changes, cursors do not."
        )]
        offset: Option<i32>,
    ) -> async_graphql::Result<FollowConnection> {
        let args = PageArgs::new(first, after, last, before, offset);
        connection::resolve_private(ctx, PrivateList::SentFollowRequests(self.0.id), args).await
    }

    /// Users both this user and `with` follow (none when `with` is unknown
    /// or deleted; none, with a `BLOCKED` error, when either blocks the
    /// viewer), newest first by the more
    /// recent of the two follow times (each edge's `followedAt`). Computed by
    /// walking the smaller of the two following lists and probing the other;
    /// `totalCount` is exact while that list has at most
    /// `KITH_INTERSECTION_WALK_MAX` (default 20,000) edges — past that, the
    /// connection covers its newest ones. Computed results are kept for up to
    /// 5 minutes; a follow or unfollow by either user drops them at once.
    #[graphql(complexity = "page_args::intersection_cost(first, last, child_complexity)")]
    async fn common_following(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Global id of the other user, whose `following` is intersected with this user's."
        )]
        with: ID,
        #[graphql(
            desc = "Page size from the start of the list (or after `after`), at most 100; 20 when no size is given."
        )]
        first: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page starts after it.")] after: Option<
            String,
        >,
        #[graphql(
            desc = "Page size from the end of the list (or before `before`), at most 100; 20 when `before` comes alone."
        )]
        last: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page ends before it.")] before: Option<
            String,
        >,
    ) -> async_graphql::Result<FollowConnection> {
        Box::pin(async move {
            let other = ids::decode_user(&with).gql()?;
            // Nothing is shared with a user that does not exist (or is deleted),
            // and nothing is read for one.
            let Some(other_user) = load_visible(ctx, other).await? else {
                return Ok(connection::empty());
            };
            let me = viewer(ctx).optional().gql()?;
            let args = PageArgs::new(first, after, last, before, None);
            if self.blocks(ctx, me).await? || other_user.blocks(ctx, me).await? {
                args.shape(0).gql()?;
                connection::report_blocked(ctx);
                return Ok(connection::hidden(0));
            }
            if !self.shows_lists_to(me) || !other_user.shows_lists_to(me) {
                args.shape(0).gql()?;
                return Ok(connection::hidden(0));
            }
            connection::resolve_shared(ctx, Shared::Common(self.0.id, other), args).await
        })
        .await
    }

    /// Followers of this user whom the signed-in viewer follows ("followers
    /// you know"), newest first by when they followed this user. Empty for
    /// an anonymous viewer, and with a `BLOCKED` error for a viewer this
    /// user blocks. Computed and bounded as `commonFollowing`.
    #[graphql(complexity = "page_args::intersection_cost(first, last, child_complexity)")]
    async fn known_followers(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Page size from the start of the list (or after `after`), at most 100; 20 when no size is given."
        )]
        first: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page starts after it.")] after: Option<
            String,
        >,
        #[graphql(
            desc = "Page size from the end of the list (or before `before`), at most 100; 20 when `before` comes alone."
        )]
        last: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page ends before it.")] before: Option<
            String,
        >,
    ) -> async_graphql::Result<FollowConnection> {
        Box::pin(async move {
            let Some(me) = viewer(ctx).optional().gql()? else {
                return Ok(connection::empty());
            };
            let args = PageArgs::new(first, after, last, before, None);
            if self.blocks(ctx, Some(me)).await? {
                args.shape(0).gql()?;
                connection::report_blocked(ctx);
                return Ok(connection::hidden(0));
            }
            if !self.shows_lists_to(Some(me)) {
                args.shape(0).gql()?;
                return Ok(connection::hidden(0));
            }
            let shared = Shared::KnownFollowers {
                user: self.0.id,
                viewer: me,
            };
            connection::resolve_shared(ctx, shared, args).await
        })
        .await
    }

    /// How this user relates to `other` (read from the truth, both
    /// directions); null when `other` is unknown or deleted, and for a
    /// viewer who is neither of the two when either hides its lists.
    async fn relation_to(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Global id of the other user.")] other: ID,
    ) -> async_graphql::Result<Option<Relationship>> {
        Box::pin(async move {
            let other = ids::decode_user(&other).gql()?;
            let Some(other_user) = load_visible(ctx, other).await? else {
                return Ok(None);
            };
            // How two users relate is in their lists: hidden from a third
            // party when either hides them (each party sees its own lists).
            let me = viewer(ctx).optional().gql()?;
            let party = me == Some(self.0.id) || me == Some(other);
            if !party && (!self.shows_lists_to(me) || !other_user.shows_lists_to(me)) {
                return Ok(None);
            }
            relation(ctx, self.0.id, other).await.map(Some)
        })
        .await
    }

    /// How the signed-in viewer relates to this user; null when anonymous.
    async fn viewer_relation(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<Relationship>> {
        match viewer(ctx).optional().gql()? {
            None => Ok(None),
            Some(me) => relation(ctx, me, self.0.id).await.map(Some),
        }
    }
}

/// How `subject` relates to `other`, through the request's relation loader.
pub(crate) async fn relation(
    ctx: &Context<'_>,
    subject: UserId,
    other: UserId,
) -> async_graphql::Result<Relationship> {
    let state = ctx
        .data_unchecked::<Loaders>()
        .relation(subject, other)
        .await
        .map_err(|e| e.as_ref().extend())?;
    Ok(Relationship::between(subject, other, state))
}

/// Loads a user that readers may see (deleted accounts are invisible).
pub(crate) async fn load_visible(
    ctx: &Context<'_>,
    id: UserId,
) -> async_graphql::Result<Option<UserNode>> {
    let user = ctx
        .data_unchecked::<Loaders>()
        .user(id)
        .await
        .map_err(|e| e.as_ref().extend())?;
    Ok(user.map(UserNode))
}
