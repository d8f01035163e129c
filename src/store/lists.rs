//! Pages of one user's follow lists straight from PostgreSQL: `following`
//! (the truth) for whom a user follows, `follower` (the projection) for who
//! follows a user. Keyset queries in newest-first order with ties broken by
//! user id, descending — the same order as the list caches — served by the
//! `*_recent_idx` indexes at any depth.

use chrono::{DateTime, TimeZone, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Timestamptz};
use diesel_async::RunQueryDsl;

use super::PgConn;
use crate::model::UserId;
use crate::paging::{ListKey, Page, PageRequest, Position, PrivateList};

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = BigInt)]
    member: i64,
    #[diesel(sql_type = Timestamptz)]
    followed_at: DateTime<Utc>,
    /// false: a page row; true: the probe for the other side.
    #[diesel(sql_type = Bool)]
    probe: bool,
}

/// (table, owner column, member column) of following lists (`following`)
/// or followers lists.
fn columns(following: bool) -> (&'static str, &'static str, &'static str) {
    if following {
        ("following", "from_user_id", "to_user_id")
    } else {
        ("follower", "to_user_id", "from_user_id")
    }
}

/// (table, owner column, member column, owner) of a list.
fn shape(list: ListKey) -> (&'static str, &'static str, &'static str, UserId) {
    let (following, owner) = kind(list);
    let (table, owner_col, member_col) = columns(following);
    (table, owner_col, member_col, owner)
}

/// Whether `list` is a following list, and its owner.
fn kind(list: ListKey) -> (bool, UserId) {
    match list {
        ListKey::Following(owner) => (true, owner),
        ListKey::Followers(owner) => (false, owner),
    }
}

fn time(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// Reads one page (one round trip, including the probe for the other side).
pub async fn page(conn: &mut PgConn, list: ListKey, request: PageRequest) -> QueryResult<Page> {
    let (table, owner_col, member_col, owner) = shape(list);
    let source = Source {
        table,
        owner_col,
        member_col,
        time_col: "followed_at",
        live: "",
    };
    page_of(conn, source, owner, request).await
}

/// Where a list's rows are: the table, its owner, member and time columns,
/// and what else makes a row live (beside `active`). Constants of this
/// module, never input.
#[derive(Clone, Copy, Debug)]
struct Source {
    table: &'static str,
    owner_col: &'static str,
    member_col: &'static str,
    time_col: &'static str,
    live: &'static str,
}

impl Source {
    fn of(list: PrivateList) -> Self {
        // Members that are not active (suspended, deleted) are set aside:
        // neither listed nor counted, back with a restore.
        const ACTIVE_TO: &str =
            " AND EXISTS (SELECT 1 FROM users u WHERE u.id = to_user_id AND u.status = 'active')";
        const ACTIVE_FROM: &str =
            " AND EXISTS (SELECT 1 FROM users u WHERE u.id = from_user_id AND u.status = 'active')";
        const MUTE_LIVE: &str = " AND (expires_at IS NULL OR expires_at > now()) AND EXISTS (SELECT 1 FROM users u WHERE u.id = to_user_id AND u.status = 'active')";
        let (table, owner_col, member_col, time_col, live) = match list {
            PrivateList::Blocking(_) => (
                "block",
                "from_user_id",
                "to_user_id",
                "blocked_at",
                ACTIVE_TO,
            ),
            PrivateList::Muting(_) => ("mute", "from_user_id", "to_user_id", "muted_at", MUTE_LIVE),
            PrivateList::FollowRequests(_) => (
                "follow_request",
                "to_user_id",
                "from_user_id",
                "requested_at",
                ACTIVE_FROM,
            ),
            PrivateList::SentFollowRequests(_) => (
                "follow_request",
                "from_user_id",
                "to_user_id",
                "requested_at",
                ACTIVE_TO,
            ),
            PrivateList::CloseFriends(_) => (
                "close_friend",
                "from_user_id",
                "to_user_id",
                "added_at",
                ACTIVE_TO,
            ),
            // `following_notify_idx`'s rows: the notify option set for
            // this follow.
            PrivateList::NotifyFollowers(_) => (
                "following",
                "to_user_id",
                "from_user_id",
                "followed_at",
                " AND notify AND options_at = followed_at AND EXISTS (SELECT 1 FROM users u WHERE u.id = from_user_id AND u.status = 'active')",
            ),
        };
        Self {
            table,
            owner_col,
            member_col,
            time_col,
            live,
        }
    }
}

/// One page of one of the viewer's own lists, by keyset as any list.
pub(crate) async fn private_page(
    conn: &mut PgConn,
    list: PrivateList,
    request: PageRequest,
) -> QueryResult<Page> {
    page_of(conn, Source::of(list), list.owner(), request).await
}

/// How many rows one of the viewer's own lists has.
pub(crate) async fn private_count(conn: &mut PgConn, list: PrivateList) -> QueryResult<u64> {
    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let Source {
        table,
        owner_col,
        live,
        ..
    } = Source::of(list);
    let row: Count = diesel::sql_query(format!(
        "SELECT count(*) AS n FROM {table} WHERE {owner_col} = $1 AND active{live}"
    ))
    .bind::<BigInt, _>(list.owner().get())
    .get_result(conn)
    .await?;
    Ok(u64::try_from(row.n).unwrap_or(0))
}

async fn page_of(
    conn: &mut PgConn,
    source: Source,
    owner: UserId,
    request: PageRequest,
) -> QueryResult<Page> {
    let Source {
        table,
        owner_col,
        member_col,
        time_col,
        live,
    } = source;
    let fetch = |n: usize| i64::try_from(n + 1).unwrap_or(i64::MAX);
    // $1 owner, $2 the page size + 1, then the cursor ($3, $4) or the offset ($3).
    let (page_filter, page_order, probe_filter, probe_order, offset_clause) = match request {
        PageRequest::After(Some(_), _) => (
            format!("AND ({time_col}, {member_col}) < ($3, $4)"),
            "DESC",
            format!("AND ({time_col}, {member_col}) >= ($3, $4)"),
            "ASC",
            "",
        ),
        PageRequest::Before(Some(_), _) => (
            format!("AND ({time_col}, {member_col}) > ($3, $4)"),
            "ASC",
            format!("AND ({time_col}, {member_col}) <= ($3, $4)"),
            "DESC",
            "",
        ),
        PageRequest::After(None, _) => (String::new(), "DESC", "AND FALSE".into(), "ASC", ""),
        PageRequest::Before(None, _) => (String::new(), "ASC", "AND FALSE".into(), "ASC", ""),
        PageRequest::Offset(..) => (
            String::new(),
            "DESC",
            "AND $3 > 0".into(),
            "ASC",
            " OFFSET $3",
        ),
    };
    let sql = format!(
        "(SELECT {member_col} AS member, {time_col} AS followed_at, FALSE AS probe FROM {table}
           WHERE {owner_col} = $1 AND active{live} {page_filter}
           ORDER BY {time_col} {page_order}, {member_col} {page_order} LIMIT $2{offset_clause})
         UNION ALL
         (SELECT {member_col}, {time_col}, TRUE FROM {table}
           WHERE {owner_col} = $1 AND active{live} {probe_filter}
           ORDER BY {time_col} {probe_order}, {member_col} {probe_order} LIMIT 1)"
    );
    let mut query = diesel::sql_query(sql)
        .into_boxed()
        .bind::<BigInt, _>(owner.get());
    let n = match request {
        PageRequest::After(cursor, n) | PageRequest::Before(cursor, n) => {
            query = query.bind::<BigInt, _>(fetch(n));
            if let Some(c) = cursor {
                query = query
                    .bind::<Timestamptz, _>(time(c.followed_at_ms))
                    .bind::<BigInt, _>(c.user.get());
            }
            n
        }
        PageRequest::Offset(offset, n) => {
            query = query
                .bind::<BigInt, _>(fetch(n))
                .bind::<BigInt, _>(i64::try_from(offset).unwrap_or(i64::MAX));
            n
        }
    };
    let rows: Vec<Row> = query.load(conn).await?;

    let other = rows.iter().any(|r| r.probe);
    let mut items: Vec<Position> = rows
        .into_iter()
        .filter(|r| !r.probe)
        .filter_map(|r| {
            Some(Position {
                followed_at_ms: r.followed_at.timestamp_millis(),
                user: UserId::new(r.member)?,
            })
        })
        .collect();
    let more = items.len() > n;
    items.truncate(n);
    if matches!(request, PageRequest::Before(..)) {
        items.reverse();
    }
    Ok(Page { items, more, other })
}

/// One edge as a list cache holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, QueryableByName)]
pub struct NewestRow {
    /// The member.
    #[diesel(sql_type = BigInt)]
    pub member: i64,
    /// Follow time.
    #[diesel(sql_type = Timestamptz)]
    pub followed_at: DateTime<Utc>,
    /// Edge version.
    #[diesel(sql_type = BigInt)]
    pub version: i64,
}

/// The newest `limit` active edges of a list, with versions, for a cache fill.
pub async fn newest(conn: &mut PgConn, list: ListKey, limit: usize) -> QueryResult<Vec<NewestRow>> {
    let (following, owner) = kind(list);
    let rows = newest_many(conn, following, &[owner], limit).await?;
    Ok(rows.into_iter().map(|owned| owned.row).collect())
}

/// One row of [`newest_many`]: a member of `owner`'s list.
#[derive(QueryableByName)]
pub(crate) struct OwnedRow {
    /// The list's owner.
    #[diesel(sql_type = BigInt)]
    pub owner: i64,
    /// The member, its follow time and edge version.
    #[diesel(embed)]
    pub row: NewestRow,
}

/// The newest `limit` active edges of each list of `owners` (all of one
/// kind: `following` lists when `following`, else followers lists), in one
/// statement, each list an index walk that stops at `limit`.
pub(crate) async fn newest_many(
    conn: &mut PgConn,
    following: bool,
    owners: &[UserId],
    limit: usize,
) -> QueryResult<Vec<OwnedRow>> {
    let (table, owner_col, member_col) = columns(following);
    let owners: Vec<i64> = owners.iter().map(|o| o.get()).collect();
    // Raw SQL: diesel's DSL has no LATERAL join; the table and columns are
    // constants of this module, never input.
    diesel::sql_query(format!(
        "SELECT o.owner, e.member, e.followed_at, e.version
           FROM unnest($1::bigint[]) AS o(owner)
           CROSS JOIN LATERAL (
               SELECT {member_col} AS member, followed_at, version FROM {table}
                WHERE {owner_col} = o.owner AND active
                ORDER BY followed_at DESC, {member_col} DESC LIMIT $2) e"
    ))
    .bind::<diesel::sql_types::Array<BigInt>, _>(owners)
    .bind::<BigInt, _>(i64::try_from(limit).unwrap_or(i64::MAX))
    .load(conn)
    .await
}

/// How many of the newest edges to read of each kind of list.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub following: usize,
    pub followers: usize,
}

impl Limits {
    /// The same limit for both kinds.
    pub(crate) fn both(limit: usize) -> Self {
        Self {
            following: limit,
            followers: limit,
        }
    }

    /// The limit for `list`'s kind.
    pub(crate) fn of(self, list: ListKey) -> usize {
        match list {
            ListKey::Following(_) => self.following,
            ListKey::Followers(_) => self.followers,
        }
    }
}

/// The newest active edges of each of `lists` (of either kind), as many as
/// `limits` says for its kind, one statement per kind ([`newest_many`]);
/// every list is in the answer, empty when it has no edges.
pub(crate) async fn newest_of(
    conn: &mut PgConn,
    lists: &[ListKey],
    limits: Limits,
) -> QueryResult<std::collections::HashMap<ListKey, Vec<NewestRow>>> {
    let mut out: std::collections::HashMap<ListKey, Vec<NewestRow>> =
        lists.iter().map(|list| (*list, Vec::new())).collect();
    for following in [true, false] {
        let owners: Vec<UserId> = lists
            .iter()
            .map(|list| kind(*list))
            .filter(|(f, _)| *f == following)
            .map(|(_, owner)| owner)
            .collect();
        if owners.is_empty() {
            continue;
        }
        let limit = if following {
            limits.following
        } else {
            limits.followers
        };
        for owned in newest_many(conn, following, &owners, limit).await? {
            let Some(owner) = UserId::new(owned.owner) else {
                continue;
            };
            let list = if following {
                ListKey::Following(owner)
            } else {
                ListKey::Followers(owner)
            };
            if let Some(rows) = out.get_mut(&list) {
                rows.push(owned.row);
            }
        }
    }
    Ok(out)
}

/// One page of a list's active edges, newest first, strictly older than
/// `after` and no older than `down_to` (both optional), with versions: what
/// a list cache covering down to `down_to` must hold.
pub(crate) async fn window_page(
    conn: &mut PgConn,
    list: ListKey,
    down_to: Option<Position>,
    after: Option<Position>,
    limit: usize,
) -> QueryResult<Vec<NewestRow>> {
    let (table, owner_col, member_col, owner) = shape(list);
    let far_past = Position {
        followed_at_ms: i64::MIN / 2,
        user: UserId::new(1).expect("positive"),
    };
    let far_future = Position {
        followed_at_ms: i64::MAX / 2,
        user: UserId::new(i64::MAX).expect("positive"),
    };
    let (low, high) = (down_to.unwrap_or(far_past), after.unwrap_or(far_future));
    let clamp = |ms: i64| time(ms.clamp(-8_000_000_000_000, 8_000_000_000_000));
    diesel::sql_query(format!(
        "SELECT {member_col} AS member, followed_at, version FROM {table}
          WHERE {owner_col} = $1 AND active
            AND (followed_at, {member_col}) >= ($2, $3)
            AND (followed_at, {member_col}) < ($4, $5)
          ORDER BY followed_at DESC, {member_col} DESC LIMIT $6"
    ))
    .bind::<BigInt, _>(owner.get())
    .bind::<Timestamptz, _>(clamp(low.followed_at_ms))
    .bind::<BigInt, _>(if down_to.is_some() { low.user.get() } else { 0 })
    .bind::<Timestamptz, _>(clamp(high.followed_at_ms))
    .bind::<BigInt, _>(high.user.get())
    .bind::<BigInt, _>(i64::try_from(limit).unwrap_or(i64::MAX))
    .load(conn)
    .await
}
