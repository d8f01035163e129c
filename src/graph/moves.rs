//! Account moves: `addAccountAlias` / `removeAccountAlias` (the new
//! account claims the old), `moveAccount` (the old account names the new),
//! and `accountMove(id:)`, which either account watches while the move's
//! job brings the followers along.

use async_graphql::{Context, Enum, ErrorExtensions as _, ID, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};

use super::connection::PageInfo;
use super::import_rows::RowErrorCode;
use super::loaders::Loaders;
use super::user::UserNode;
use super::{app, ids, page_args, viewer};
use crate::error::{ApiError, GraphqlResultExt};
use crate::model::UserId;
use crate::store::moves::{self, MoveRow};
use crate::write::import::RowError;
use crate::write::moves as write;

/// Where a move stands.
#[derive(Enum, Copy, Clone, Eq, PartialEq)]
pub(crate) enum AccountMoveState {
    /// Followers are being brought to the new account.
    Running,
    /// Every follower was handled.
    Done,
    /// The account was moved back before every follower was handled: the
    /// rest stay with it.
    Superseded,
    /// The move stopped (see `failure`): the followers not yet handled
    /// still follow the old account.
    Failed,
}

/// One move of an account's followers to its new account.
pub(crate) struct AccountMove(MoveRow);

/// One move of an account's followers to its new account: where it
/// stands, and whom it could not bring along. Seen by the two accounts
/// only.
#[Object]
impl AccountMove {
    /// Opaque global id.
    async fn id(&self) -> ID {
        ids::account_move_id(self.0.id)
    }

    /// The account that moved.
    async fn from(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<UserNode>> {
        user(ctx, self.0.from_id).await
    }

    /// The account it moved to.
    async fn to(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<UserNode>> {
        user(ctx, self.0.to_id).await
    }

    /// Where it stands.
    async fn state(&self) -> AccountMoveState {
        match self.0.state.as_str() {
            "running" => AccountMoveState::Running,
            "done" => AccountMoveState::Done,
            "superseded" => AccountMoveState::Superseded,
            _ => AccountMoveState::Failed,
        }
    }

    /// The old account's followers when it moved (with the accounts whose
    /// request to follow it was pending).
    async fn total(&self) -> i32 {
        self.0.total
    }

    /// Followers that now follow the new account and no longer the old.
    async fn moved(&self) -> i32 {
        self.0.moved
    }

    /// Followers that asked to follow the new account (it is locked) and
    /// no longer follow the old.
    async fn requested(&self) -> i32 {
        self.0.requested
    }

    /// Followers that followed the new account already; they no longer
    /// follow the old.
    async fn skipped(&self) -> i32 {
        self.0.skipped
    }

    /// Followers the move could not bring along (see `errors`); they still
    /// follow the old account.
    async fn failed(&self) -> i32 {
        self.0.failed
    }

    /// Why the move stopped, when it failed.
    async fn failure(&self) -> Option<&str> {
        self.0.failure.as_deref()
    }

    /// When the account moved.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }

    /// When the move ended.
    async fn finished_at(&self) -> Option<DateTime<Utc>> {
        self.0.finished_at
    }

    /// The followers the move could not bring along, each with why
    /// (`BLOCKED`, `FOLLOW_LIMIT`, `NOT_FOLLOWABLE`; `SELF_TARGET` for the
    /// new account's own follow of the old one, which stays), in id order.
    #[graphql(complexity = "page_args::page_cost(first, None, None, child_complexity)")]
    async fn errors(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Page size from the start of the list (or after `after`), at most 100; 20 when no size is given."
        )]
        first: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page starts after it.")] after: Option<
            String,
        >,
    ) -> async_graphql::Result<AccountMoveErrorConnection> {
        let n = page_args::first_size(first).gql()?;
        let after = match after {
            None => 0,
            Some(cursor) => cursor
                .strip_prefix("follower:")
                .and_then(|n| n.parse::<i64>().ok())
                .filter(|n| *n > 0)
                .ok_or(ApiError::BadCursor)
                .gql()?,
        };
        let mut rows = {
            let mut conn = app(ctx).pg.get().await.map_err(ApiError::from).gql()?;
            moves::left_behind(&mut conn, self.0.id, after, n as i64 + 1)
                .await
                .map_err(ApiError::from)
                .gql()?
        };
        let has_next_page = rows.len() > n;
        rows.truncate(n);
        let ids: Vec<UserId> = rows
            .iter()
            .filter_map(|r| UserId::new(r.follower_id))
            .collect();
        let users = ctx
            .data_unchecked::<Loaders>()
            .users(&ids)
            .await
            .map_err(|e| e.as_ref().extend())?;
        let edges: Vec<AccountMoveErrorEdge> = rows
            .into_iter()
            .map(|r| AccountMoveErrorEdge {
                cursor: format!("follower:{}", r.follower_id),
                node: AccountMoveError {
                    user: UserId::new(r.follower_id)
                        .and_then(|id| users.get(&id).cloned())
                        .and_then(UserNode::visible),
                    reason: RowError::from_code(&r.outcome)
                        .unwrap_or(RowError::NotFollowable)
                        .into(),
                },
            })
            .collect();
        Ok(AccountMoveErrorConnection {
            page_info: PageInfo {
                has_next_page,
                has_previous_page: after > 0,
                start_cursor: edges.first().map(|e| e.cursor.clone()),
                end_cursor: edges.last().map(|e| e.cursor.clone()),
            },
            edges,
            total_count: self.0.failed,
        })
    }
}

async fn user(ctx: &Context<'_>, id: i64) -> async_graphql::Result<Option<UserNode>> {
    let Some(id) = UserId::new(id) else {
        return Ok(None);
    };
    let user = ctx
        .data_unchecked::<Loaders>()
        .user(id)
        .await
        .map_err(|e| e.as_ref().extend())?;
    Ok(user.and_then(UserNode::visible))
}

/// A follower a move could not bring along.
#[derive(SimpleObject)]
pub(crate) struct AccountMoveError {
    /// The follower; null once deleted.
    pub user: Option<UserNode>,
    /// Why, under the API's error-code names.
    pub reason: RowErrorCode,
}

/// One edge of `AccountMove.errors`.
#[derive(SimpleObject)]
pub(crate) struct AccountMoveErrorEdge {
    /// Where the page may go on from.
    pub cursor: String,
    /// The follower.
    pub node: AccountMoveError,
}

/// The followers a move could not bring along.
#[derive(SimpleObject)]
pub(crate) struct AccountMoveErrorConnection {
    /// The followers of this page.
    pub edges: Vec<AccountMoveErrorEdge>,
    /// Paging.
    pub page_info: PageInfo,
    /// Every follower left behind so far.
    pub total_count: i32,
}

/// `accountMove`.
#[derive(Default)]
pub(crate) struct MoveQuery;

#[Object]
impl MoveQuery {
    /// A move from or to the viewer's account; null when there is none,
    /// and for anyone else's (who learns nothing of it).
    async fn account_move(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Global id of the move (`moveAccount` answers it).")] id: ID,
    ) -> async_graphql::Result<Option<AccountMove>> {
        let me = viewer(ctx).require().gql()?.get();
        let id = ids::decode_account_move(&id).gql()?;
        let row = {
            let mut conn = app(ctx).pg.get().await.map_err(ApiError::from).gql()?;
            moves::get(&mut conn, id)
                .await
                .map_err(ApiError::from)
                .gql()?
        };
        Ok(row
            .filter(|m| m.from_id == me || m.to_id == me)
            .map(AccountMove))
    }
}

/// Input of `addAccountAlias` and `removeAccountAlias`.
#[derive(InputObject)]
pub(crate) struct AccountAliasInput {
    /// Global id of the viewer's old account.
    pub user_id: ID,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Result of `addAccountAlias` or `removeAccountAlias`.
#[derive(SimpleObject)]
pub(crate) struct AccountAliasPayload {
    /// False when the account was in the asked state already.
    pub changed: bool,
    /// The viewer's aliases after the mutation, oldest first.
    pub aliases: Vec<UserNode>,
    /// The input's `clientMutationId`.
    pub client_mutation_id: Option<String>,
}

/// Input of `moveAccount`.
#[derive(InputObject)]
pub(crate) struct MoveAccountInput {
    /// Global id of the viewer's new account, which claims the viewer's
    /// as an alias.
    pub target_id: ID,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Result of `moveAccount`.
#[derive(SimpleObject)]
pub(crate) struct MoveAccountPayload {
    /// The move; watch it with `accountMove(id:)`.
    #[graphql(name = "move")]
    pub account_move: AccountMove,
    /// The input's `clientMutationId`.
    pub client_mutation_id: Option<String>,
}

/// Account-move mutations. Each takes a rate-limit token from the viewer.
#[derive(Default)]
pub(crate) struct MoveMutation;

#[Object]
impl MoveMutation {
    /// The viewer claims another account as its own old one, so that it
    /// may move here (`moveAccount`). At most 16 aliases (`INVALID_INPUT`).
    async fn add_account_alias(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: AccountAliasInput,
    ) -> async_graphql::Result<AccountAliasPayload> {
        let me = viewer(ctx).require().gql()?;
        let alias = ids::decode_user(&input.user_id).gql()?;
        let (changed, aliases) = write::add_alias(app(ctx), me, alias).await.gql()?;
        alias_payload(ctx, changed, &aliases, input.client_mutation_id).await
    }

    /// The viewer no longer claims the account as its old one; a move
    /// from it that ran already stays.
    async fn remove_account_alias(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: AccountAliasInput,
    ) -> async_graphql::Result<AccountAliasPayload> {
        let me = viewer(ctx).require().gql()?;
        let alias = ids::decode_user(&input.user_id).gql()?;
        let (changed, aliases) = write::remove_alias(app(ctx), me, alias).await.gql()?;
        alias_payload(ctx, changed, &aliases, input.client_mutation_id).await
    }

    /// Moves the viewer's account to its new one, which must first claim
    /// it (`addAccountAlias`; else `FORBIDDEN`). From then on the viewer's
    /// account is `movedTo` the new one and takes no follows (`MOVED`);
    /// its followers follow the new account and unfollow the old in the
    /// background, at `KITH_MOVE_FOLLOWERS_PER_SEC`: blocks are respected,
    /// a locked new account gets requests, and the follow cap is honoured
    /// (those left behind keep following the old account; see
    /// `AccountMove.errors`). The new account moving to the old one moves
    /// it back. An account that moved already, or a new account that moved
    /// elsewhere, is `MOVED`.
    async fn move_account(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: MoveAccountInput,
    ) -> async_graphql::Result<MoveAccountPayload> {
        let me = viewer(ctx).require().gql()?;
        let to = ids::decode_user(&input.target_id).gql()?;
        let row = write::start(app(ctx), me, to).await.gql()?;
        Ok(MoveAccountPayload {
            account_move: AccountMove(row),
            client_mutation_id: input.client_mutation_id,
        })
    }
}

async fn alias_payload(
    ctx: &Context<'_>,
    changed: bool,
    aliases: &[UserId],
    client_mutation_id: Option<String>,
) -> async_graphql::Result<AccountAliasPayload> {
    let users = ctx
        .data_unchecked::<Loaders>()
        .users(aliases)
        .await
        .map_err(|e| e.as_ref().extend())?;
    Ok(AccountAliasPayload {
        changed,
        aliases: aliases
            .iter()
            .filter_map(|id| users.get(id).cloned())
            .filter_map(UserNode::visible)
            .collect(),
        client_mutation_id,
    })
}
