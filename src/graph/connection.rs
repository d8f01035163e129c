//! Relay cursor connections over follow lists, newest first.
//!
//! `first`/`after` pages towards older edges, `last`/`before` towards newer
//! ones; `offset` (with `first`) jumps to a rank for clients that show page
//! numbers. Offsets shift when the list changes (an edge added at the top
//! moves every rank by one); cursors do not — a cursor marks a position
//! (follow time, user id), so paging by cursor never skips or repeats an edge
//! that exists for the whole walk.

use async_graphql::{Context, ErrorExtensions, Object, SimpleObject};
use chrono::{DateTime, TimeZone, Utc};

use super::count::Count;
use super::cursor::{CursorKeys, CursorScope};
use super::loaders::Loaders;
use super::page_args::PageArgs;
use super::user::UserNode;
use super::{app, viewer};
use crate::error::{ApiError, GraphqlResultExt};
use crate::model::{UserId, UserStatus};
use crate::paging::ListKey;
use crate::paging::{Page, Position, PrivateList};
use crate::read::{filtered, intersect, pages};

/// A page of a list of users.
pub(crate) struct FollowConnection {
    edges: Vec<FollowEdge>,
    page_info: PageInfo,
    total: u64,
    hidden: bool,
}

/// Relay page information.
#[derive(SimpleObject, Clone)]
#[graphql(shareable)]
pub(crate) struct PageInfo {
    /// More edges exist after the last edge (older).
    pub has_next_page: bool,
    /// More edges exist before the first edge (newer).
    pub has_previous_page: bool,
    /// Cursor of the first edge.
    pub start_cursor: Option<String>,
    /// Cursor of the last edge.
    pub end_cursor: Option<String>,
}

/// One edge of a list of users.
pub(crate) struct FollowEdge {
    cursor: String,
    position: Position,
    /// The list's owner, on a `following` list.
    follower: Option<UserId>,
}

/// One edge of a list of users: the user, when they entered the list,
/// and the cursor of its position.
#[Object(shareable)]
impl FollowEdge {
    /// Opaque cursor of this edge, for `after` / `before`.
    async fn cursor(&self) -> &str {
        &self.cursor
    }

    /// The other user. Lists leave out accounts that are suspended or
    /// deleted, so this is never null.
    async fn node(&self, ctx: &Context<'_>) -> async_graphql::Result<UserNode> {
        let loaders = ctx.data_unchecked::<Loaders>();
        let user = loaders
            .user(self.position.user)
            .await
            .map_err(|e| async_graphql::ErrorExtensions::extend(e.as_ref()))?;
        // The connection kept only edges whose user this request loaded.
        user.map(UserNode).ok_or_else(|| {
            ApiError::internal(anyhow::anyhow!("edge user {} vanished", self.position.user))
                .extend()
        })
    }

    /// The viewer's options for this follow, on the viewer's own
    /// `following` list; null on every other list (nobody but the follower
    /// reads them). From the viewer's boundaries, held in process.
    async fn follow_options(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<super::relation::FollowOptionsNode>> {
        let Some(owner) = self.follower else {
            return Ok(None);
        };
        if viewer(ctx).optional().ok().flatten() != Some(owner) {
            return Ok(None);
        }
        let set = ctx
            .data_unchecked::<Loaders>()
            .boundaries(owner)
            .await
            .map_err(|e| e.as_ref().extend())?;
        Ok(Some(
            set.options_for(self.position.user, self.position.followed_at_ms)
                .into(),
        ))
    }

    /// When the user entered this list: when the follow, block, mute or
    /// request was made (in `commonFollowing`, the later of the two
    /// follows). Kept under this name for the lists it began with.
    async fn followed_at(&self) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(self.position.followed_at_ms)
            .single()
            .unwrap_or_default()
    }
}

/// A page of a list of users (Relay connection), newest first: followers,
/// following, blocked, muted, follow requests, or the shared members of
/// two lists.
#[Object(shareable)]
impl FollowConnection {
    /// The edges of this page, newest first.
    async fn edges(&self) -> &[FollowEdge] {
        &self.edges
    }

    /// Where this page sits in the list.
    async fn page_info(&self) -> &PageInfo {
        &self.page_info
    }

    /// How many edges the whole list has.
    async fn total_count(&self) -> Count {
        Count(self.total)
    }

    /// True when the list's owner hides it from the viewer
    /// (`User.hidesCollections`): no edge is shown; `totalCount` of a
    /// `followers` or `following` list stays the public count, that of an
    /// intersection is 0.
    async fn hidden(&self) -> bool {
        self.hidden
    }
}

/// Loads, in one batch per kind, what the query will ask of the page's
/// users (`node`: the selection on each), so that the round trips of a page
/// do not depend on its size nor on how the executor happens to interleave
/// the edges' resolvers. Failures are left for the field resolvers to
/// report.
pub(crate) async fn prime(
    ctx: &Context<'_>,
    loaders: &Loaders,
    ids: &[UserId],
    node: async_graphql::Lookahead<'_>,
) {
    if ids.is_empty() || !node.exists() {
        return;
    }
    let me = viewer(ctx).optional().ok().flatten();
    let relations = async {
        match me {
            Some(me) if node.field("viewerRelation").exists() => {
                let pairs: Vec<(UserId, UserId)> = ids.iter().map(|id| (me, *id)).collect();
                let _ = loaders.relations(&pairs).await;
            }
            _ => {}
        }
    };
    let counters = async {
        if node.field("counters").exists() {
            let _ = loaders.counters_many(ids).await;
        }
    };
    let users = async {
        let _ = loaders.users(ids).await;
    };
    tokio::join!(users, counters, relations);
}

/// Resolves one page of `list`.
pub(crate) async fn resolve(
    ctx: &Context<'_>,
    list: ListKey,
    args: PageArgs,
) -> async_graphql::Result<FollowConnection> {
    let keys = ctx.data_unchecked::<CursorKeys>();
    let (request, forward) = args
        .request(keys, list.into(), app(ctx).config.limits.max_offset)
        .gql()?;
    let owner = list.owner();
    let loaders = ctx.data_unchecked::<Loaders>();
    let app = app(ctx);
    app.read.heads().served(list, request);
    // The owner's counters (for `totalCount` and to tell a hot list) and the
    // cached page travel in one Redis round trip, with the level's other reads.
    let hot = pages::hot_cached(app, list, request).await;
    let me = viewer(ctx).optional().gql()?;
    let (counters, cached, blocks) = tokio::join!(
        loaders.counters(owner),
        async {
            match hot {
                Some(_) => None,
                None => Some(loaders.cached_page(list, request).await),
            }
        },
        async {
            match me {
                Some(me) => loaders.boundaries(me).await.map(Some),
                None => Ok(None),
            }
        }
    );
    let counters = counters.map_err(|e| async_graphql::ErrorExtensions::extend(e.as_ref()))?;
    let blocks = blocks.map_err(|e| async_graphql::ErrorExtensions::extend(e.as_ref()))?;
    let total = u64::from(match list {
        ListKey::Following(_) => counters.followings,
        ListKey::Followers(_) => counters.followers,
    });
    let held_hot = hot.is_some();
    let (page, source) = match (hot, cached) {
        (Some(page), _) => (page, pages::Source::Hot),
        (None, cached) => {
            let cached = cached
                .transpose()
                .map_err(|e| async_graphql::ErrorExtensions::extend(e.as_ref()))?
                .unwrap_or(Err(None));
            pages::complete(app, list, request, Some(total), cached)
                .await
                .gql()?
        }
    };
    match (held_hot, source) {
        (true, _) => app.metrics.cache_lookup("hot_list", true, 1),
        // A hot list not held in process: loaded now.
        (false, pages::Source::Hot) => app.metrics.cache_lookup("hot_list", false, 1),
        (false, pages::Source::Cache) => app.metrics.cache_lookup("list", true, 1),
        (false, pages::Source::Postgres) => app.metrics.cache_lookup("list", false, 1),
    }
    // A signed-in viewer sees no account it blocks or that blocks it.
    let (page, end) = match blocks.filter(|b| !b.blocks_none()) {
        None => (page, None),
        Some(blocks) => {
            let filtered = filtered::without(app, list, request, Some(total), page, |u| {
                blocks.separates(u)
            })
            .await
            .gql()?;
            (filtered.page, filtered.end)
        }
    };
    build(ctx, list.into(), &page, end, forward, total).await
}

/// Resolves one page of one of the viewer's own lists, from PostgreSQL.
/// Boxed: inline, its future would set the size of every field's future
/// of every `User`, each of which async-graphql moves to the heap.
pub(crate) async fn resolve_private(
    ctx: &Context<'_>,
    list: PrivateList,
    args: PageArgs,
) -> async_graphql::Result<FollowConnection> {
    Box::pin(async move {
        // A service granted `kith:close-friends` reads any account's close
        // friends (whom a post shared with them goes to); one granted
        // `kith:notify`, any account's notify followers, which nobody else
        // reads (a follow's options are its follower's alone).
        use crate::auth::Scopes;
        let (scope, owner_reads) = match list {
            PrivateList::CloseFriends(_) => (Some(Scopes::CLOSE_FRIENDS), true),
            PrivateList::NotifyFollowers(_) => (Some(Scopes::NOTIFY), false),
            _ => (None, true),
        };
        let service = scope.is_some_and(|scope| viewer(ctx).service(scope).is_ok());
        if !service {
            if !owner_reads {
                return Err(ApiError::Forbidden(
                    "only a service granted kith:notify reads this list",
                )
                .extend());
            }
            if viewer(ctx).optional().gql()? != Some(list.owner()) {
                return Err(ApiError::Forbidden("only the account itself sees this list").extend());
            }
        }
        let keys = ctx.data_unchecked::<CursorKeys>();
        let app = app(ctx);
        let (request, forward) = args
            .request(keys, list.into(), app.config.limits.max_offset)
            .gql()?;
        let (page, total) = match list {
            PrivateList::NotifyFollowers(account) => {
                let want_total = ctx.look_ahead().field("totalCount").exists();
                app.read
                    .notify()
                    .page(&app.pg, account, request, want_total)
                    .await
            }
            _ => crate::read::private::page(app, list, request).await,
        }
        .gql()?;
        build(ctx, list.into(), &page, None, forward, total).await
    })
    .await
}

/// Two lists whose shared members a connection shows.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Shared {
    /// Whom both users follow, by the more recent of the two follow times.
    Common(UserId, UserId),
    /// Followers of `user` whom `viewer` follows, by when they followed `user`.
    KnownFollowers {
        /// Whose followers.
        user: UserId,
        /// Who follows them.
        viewer: UserId,
    },
}

/// Resolves one page of an intersection of two lists ([`intersect`]).
pub(crate) async fn resolve_shared(
    ctx: &Context<'_>,
    shared: Shared,
    args: PageArgs,
) -> async_graphql::Result<FollowConnection> {
    let keys = ctx.data_unchecked::<CursorKeys>();
    let (scope, first, second, order) = match shared {
        Shared::Common(a, b) => (
            CursorScope::Common(a, b),
            ListKey::Following(a),
            ListKey::Following(b),
            intersect::Order::Latest,
        ),
        Shared::KnownFollowers { user, viewer } => (
            CursorScope::KnownFollowers(user, viewer),
            ListKey::Following(viewer),
            ListKey::Followers(user),
            intersect::Order::Second,
        ),
    };
    let (request, forward) = args.request(keys, scope, 0).gql()?;
    let (a, b) = (first.owner(), second.owner());
    let loaders = ctx.data_unchecked::<Loaders>();
    let counters = loaders
        .counters_many(&[a, b])
        .await
        .map_err(|e| async_graphql::ErrorExtensions::extend(e.as_ref()))?;
    let record = |user: UserId| counters.get(&user).copied().unwrap_or_default();
    let task = intersect::Task::sized(first, second, order, record);
    let result = intersect::cached(app(ctx), task, (record(a).version, record(b).version))
        .await
        .gql()?;
    let total = result.items.len() as u64;
    // A signed-in viewer sees no account it blocks or that blocks it.
    let blocks = match viewer(ctx).optional().gql()? {
        Some(me) => Some(
            loaders
                .boundaries(me)
                .await
                .map_err(|e| async_graphql::ErrorExtensions::extend(e.as_ref()))?,
        ),
        None => None,
    };
    let page = match blocks.filter(|b| !b.blocks_none()) {
        None => crate::paging::page_of(&result.items, request),
        Some(blocks) => {
            let shown: Vec<Position> = result
                .items
                .iter()
                .filter(|p| !blocks.separates(p.user))
                .copied()
                .collect();
            crate::paging::page_of(&shown, request)
        }
    };
    build(ctx, scope, &page, None, forward, total).await
}

/// An empty connection (what an anonymous viewer knows).
pub(crate) fn empty() -> FollowConnection {
    FollowConnection {
        edges: Vec::new(),
        page_info: PageInfo {
            has_next_page: false,
            has_previous_page: false,
            start_cursor: None,
            end_cursor: None,
        },
        total: 0,
        hidden: false,
    }
}

/// The connection of a list its owner hides from the viewer: no edge,
/// `total` as the public count says.
pub(crate) fn hidden(total: u64) -> FollowConnection {
    FollowConnection {
        total,
        hidden: true,
        ..empty()
    }
}

/// Reports, beside the field's answer, that its owner blocks the viewer:
/// a `BLOCKED` error at the field's path, while the field answers an empty,
/// `hidden` connection (with the public count where it has one), so the
/// rest of the response stands.
pub(crate) fn report_blocked(ctx: &Context<'_>) {
    use async_graphql::ErrorExtensions as _;
    let error = ApiError::Blocked.extend().into_server_error(ctx.item.pos);
    ctx.add_error(ctx.set_error_path(error));
}

/// The connection of `list`, hidden from the viewer: its public count.
/// The paging arguments are checked as a visible list's would be.
pub(crate) async fn hidden_list(
    ctx: &Context<'_>,
    list: ListKey,
    args: &PageArgs,
) -> async_graphql::Result<FollowConnection> {
    args.shape(app(ctx).config.limits.max_offset).gql()?;
    let counters = ctx
        .data_unchecked::<Loaders>()
        .counters(list.owner())
        .await
        .map_err(|e| async_graphql::ErrorExtensions::extend(e.as_ref()))?;
    Ok(hidden(u64::from(match list {
        ListKey::Following(_) => counters.followings,
        ListKey::Followers(_) => counters.followers,
    })))
}

/// The connection of one page of `scope`: its users loaded in one batch
/// per kind, suspended and deleted ones left out (their edges are being
/// taken out of the list; the page's cursors still mark where it ends).
/// `end`: where the examined part of the list ends in the paging
/// direction, when past the page's last edge (see [`filtered::Filtered`]).
async fn build(
    ctx: &Context<'_>,
    scope: CursorScope,
    page: &Page,
    end: Option<Position>,
    forward: bool,
    total: u64,
) -> async_graphql::Result<FollowConnection> {
    let keys = ctx.data_unchecked::<CursorKeys>();
    let loaders = ctx.data_unchecked::<Loaders>();
    let ids: Vec<UserId> = page.items.iter().map(|p| p.user).collect();
    let node = ctx.look_ahead().field("edges").field("node");
    prime(ctx, loaders, &ids, node).await;
    let shown = loaders
        .users(&ids)
        .await
        .map_err(|e| async_graphql::ErrorExtensions::extend(e.as_ref()))?;
    let edges: Vec<FollowEdge> = page
        .items
        .iter()
        .filter(|p| {
            shown
                .get(&p.user)
                .is_some_and(|u| u.status == UserStatus::Active)
        })
        .map(|position| FollowEdge {
            cursor: keys.encode(scope, *position),
            position: *position,
            follower: match scope {
                CursorScope::List(ListKey::Following(owner)) => Some(owner),
                _ => None,
            },
        })
        .collect();
    let (has_next_page, has_previous_page) = if forward {
        (page.more, page.other)
    } else {
        (page.other, page.more)
    };
    let (mut first, mut last) = (page.items.first(), page.items.last());
    match (end.as_ref(), forward) {
        (Some(end), true) => last = Some(end),
        (Some(end), false) => first = Some(end),
        (None, _) => {}
    }
    let page_info = PageInfo {
        has_next_page,
        has_previous_page,
        start_cursor: first.map(|p| keys.encode(scope, *p)),
        end_cursor: last.map(|p| keys.encode(scope, *p)),
    };
    Ok(FollowConnection {
        edges,
        page_info,
        total,
        hidden: false,
    })
}
