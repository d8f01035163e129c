//! `notifyFollowers`: who asked to be told when an account posts, for a
//! notification service (a token granted `kith:notify`). Nobody else may
//! read it: a follow's options are its follower's alone.

use async_graphql::{Context, ID, Object};

use super::connection::{self, FollowConnection};
use super::ids;
use super::page_args::{self, PageArgs};
use crate::auth::Scopes;
use crate::error::GraphqlResultExt;
use crate::paging::PrivateList;

/// What notification services ask.
#[derive(Default)]
pub(crate) struct NotifyQuery;

#[Object]
impl NotifyQuery {
    /// The account's active followers whose follow has `notify` on, newest
    /// first (`followedAt`: when each followed), paged like `followers`:
    /// whom a notification of the account's post goes to. Only for a
    /// service token granted `kith:notify` (docs/api.md); `FORBIDDEN` for
    /// any other token, the account's own among them. Each process holds
    /// the lists it was asked for, kept by PostgreSQL's notices, so paging
    /// through a million reads no row once held.
    #[graphql(complexity = "page_args::page_cost(first, last, offset, child_complexity)")]
    #[expect(
        clippy::too_many_arguments,
        reason = "the GraphQL field's arguments: the account, and `followers`' paging"
    )]
    async fn notify_followers(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Global id of the account that posts.")] user_id: ID,
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
        super::viewer(ctx).service(Scopes::NOTIFY).gql()?;
        let account = ids::decode_user(&user_id).gql()?;
        let args = PageArgs::new(first, after, last, before, offset);
        connection::resolve_private(ctx, PrivateList::NotifyFollowers(account), args).await
    }
}
