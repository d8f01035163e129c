//! Queries that compare the derived tables with the truth, page by page, for
//! `kith verify`, reconciliation and the sampled counter check. Every page is
//! a keyset query of bounded size, so a pass over millions of edges holds one
//! page at a time.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Nullable, Timestamptz};
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::follower::EdgeRow;
use crate::model::UserId;

/// Which edges a check or repair covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EdgeScope {
    /// Every edge.
    All,
    /// The edges of one user, both directions.
    User(UserId),
    /// Edges whose truth row changed at or after this time (reconciliation).
    ChangedSince(DateTime<Utc>),
}

/// One keyset walk over edges, each on an index of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EdgePass {
    /// Every edge, in `(from, to)` order (the truth's key).
    All,
    /// Edges from one user, in `to` order.
    Outgoing(UserId),
    /// Edges to one user, in `from` order (`following_incoming_idx`).
    Incoming(UserId),
    /// Edges changed since a time, in `(updated_at, from, to)` order.
    ChangedSince(DateTime<Utc>),
}

impl EdgeScope {
    /// The walks that cover this scope.
    pub(crate) fn passes(self) -> Vec<EdgePass> {
        match self {
            Self::All => vec![EdgePass::All],
            Self::User(u) => vec![EdgePass::Outgoing(u), EdgePass::Incoming(u)],
            Self::ChangedSince(t) => vec![EdgePass::ChangedSince(t)],
        }
    }
}

/// Where a walk stands: the last row's key (all zero: the start).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct EdgeKey {
    /// Change time of the last row (walks by change time only).
    pub updated_at: Option<DateTime<Utc>>,
    /// Its follower.
    pub from: i64,
    /// Its followed user.
    pub to: i64,
}

/// One edge as the truth and the projection hold it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, QueryableByName)]
pub(crate) struct EdgePair {
    /// The follower.
    #[diesel(sql_type = BigInt)]
    pub from_user_id: i64,
    /// The followed user.
    #[diesel(sql_type = BigInt)]
    pub to_user_id: i64,
    /// Truth: active.
    #[diesel(sql_type = Nullable<Bool>)]
    pub truth_active: Option<bool>,
    /// Truth: version.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub truth_version: Option<i64>,
    /// Truth: follow time.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub truth_followed_at: Option<DateTime<Utc>>,
    /// Truth: when the row last changed.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub truth_updated_at: Option<DateTime<Utc>>,
    /// Projection: active.
    #[diesel(sql_type = Nullable<Bool>)]
    pub projected_active: Option<bool>,
    /// Projection: version.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub projected_version: Option<i64>,
    /// Projection: follow time.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub projected_followed_at: Option<DateTime<Utc>>,
    /// Projection: when the row last changed (walks of orphans by change
    /// time only).
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub projected_updated_at: Option<DateTime<Utc>>,
}

impl EdgePair {
    /// The truth row, if there is one.
    pub(crate) fn truth(&self) -> Option<EdgeRow> {
        Some(EdgeRow {
            from_user_id: self.from_user_id,
            to_user_id: self.to_user_id,
            active: self.truth_active?,
            followed_at: self.truth_followed_at?,
            version: self.truth_version?,
        })
    }

    /// The projection row, if there is one.
    pub(crate) fn projected(&self) -> Option<EdgeRow> {
        Some(EdgeRow {
            from_user_id: self.from_user_id,
            to_user_id: self.to_user_id,
            active: self.projected_active?,
            followed_at: self.projected_followed_at?,
            version: self.projected_version?,
        })
    }

    /// The key the next page of a walk starts after.
    pub(crate) fn key(&self) -> EdgeKey {
        EdgeKey {
            updated_at: self.truth_updated_at.or(self.projected_updated_at),
            from: self.from_user_id,
            to: self.to_user_id,
        }
    }
}

const PAIR_COLUMNS: &str = "f.from_user_id, f.to_user_id,
    f.active AS truth_active, f.version AS truth_version, f.followed_at AS truth_followed_at,
    f.updated_at AS truth_updated_at,
    p.active AS projected_active, p.version AS projected_version,
    p.followed_at AS projected_followed_at, NULL::timestamptz AS projected_updated_at";

/// A page of truth rows (with their projection rows, if any) after `after`.
pub(crate) async fn truth_page(
    conn: &mut PgConn,
    pass: EdgePass,
    after: EdgeKey,
    limit: i64,
) -> QueryResult<Vec<EdgePair>> {
    // $1 from, $2 to, $3 limit, $4 user, $5 since, $6 the last change time.
    let (filter, order) = match (pass, after.updated_at) {
        (EdgePass::All, _) => (
            "(f.from_user_id, f.to_user_id) > ($1, $2)",
            "f.from_user_id, f.to_user_id",
        ),
        (EdgePass::Outgoing(_), _) => ("f.from_user_id = $4 AND f.to_user_id > $2", "f.to_user_id"),
        (EdgePass::Incoming(_), _) => (
            "f.to_user_id = $4 AND f.from_user_id > $1",
            "f.from_user_id",
        ),
        (EdgePass::ChangedSince(_), None) => (
            "f.updated_at >= $5",
            "f.updated_at, f.from_user_id, f.to_user_id",
        ),
        (EdgePass::ChangedSince(_), Some(_)) => (
            "f.updated_at >= $5 AND (f.updated_at, f.from_user_id, f.to_user_id) > ($6, $1, $2)",
            "f.updated_at, f.from_user_id, f.to_user_id",
        ),
    };
    let (user, since) = match pass {
        EdgePass::Outgoing(u) | EdgePass::Incoming(u) => (u.get(), DateTime::UNIX_EPOCH),
        EdgePass::ChangedSince(t) => (0, t),
        EdgePass::All => (0, DateTime::UNIX_EPOCH),
    };
    diesel::sql_query(format!(
        "SELECT {PAIR_COLUMNS}
           FROM following f
           LEFT JOIN follower p ON p.to_user_id = f.to_user_id AND p.from_user_id = f.from_user_id
          WHERE {filter}
          ORDER BY {order}
          LIMIT $3"
    ))
    .bind::<BigInt, _>(after.from)
    .bind::<BigInt, _>(after.to)
    .bind::<BigInt, _>(limit)
    .bind::<BigInt, _>(user)
    .bind::<Timestamptz, _>(since)
    .bind::<Timestamptz, _>(after.updated_at.unwrap_or(DateTime::UNIX_EPOCH))
    .load(conn)
    .await
}

/// A page of projection rows that have no truth row, after `after`. Whole
/// walks go in `(to, from)` order (the projection's key); a user's walk
/// covers the rows *to* that user (those rows feed its own list and count;
/// `follower` has no index by follower); a walk by change time covers the
/// rows written since (`follower_updated_idx`) — what an event with no
/// truth behind it wrote lately.
pub(crate) async fn orphan_page(
    conn: &mut PgConn,
    pass: EdgePass,
    after: EdgeKey,
    limit: i64,
) -> QueryResult<Vec<EdgePair>> {
    // $1 from, $2 to, $3 limit, $4 user, $5 since, $6 the last change time.
    let (filter, order, user, since) = match (pass, after.updated_at) {
        (EdgePass::All, _) => (
            "(p.to_user_id, p.from_user_id) > ($2, $1)",
            "p.to_user_id, p.from_user_id",
            0,
            DateTime::UNIX_EPOCH,
        ),
        (EdgePass::Incoming(u), _) => (
            "p.to_user_id = $4 AND p.from_user_id > $1",
            "p.from_user_id",
            u.get(),
            DateTime::UNIX_EPOCH,
        ),
        (EdgePass::ChangedSince(t), None) => (
            "p.updated_at >= $5",
            "p.updated_at, p.to_user_id, p.from_user_id",
            0,
            t,
        ),
        (EdgePass::ChangedSince(t), Some(_)) => (
            "p.updated_at >= $5 AND (p.updated_at, p.to_user_id, p.from_user_id) > ($6, $2, $1)",
            "p.updated_at, p.to_user_id, p.from_user_id",
            0,
            t,
        ),
        (EdgePass::Outgoing(_), _) => return Ok(Vec::new()),
    };
    diesel::sql_query(format!(
        "SELECT p.from_user_id, p.to_user_id,
                NULL::boolean AS truth_active, NULL::bigint AS truth_version,
                NULL::timestamptz AS truth_followed_at, NULL::timestamptz AS truth_updated_at,
                p.active AS projected_active, p.version AS projected_version,
                p.followed_at AS projected_followed_at, p.updated_at AS projected_updated_at
           FROM follower p
          WHERE {filter}
            AND NOT EXISTS (SELECT 1 FROM following f
                             WHERE f.from_user_id = p.from_user_id AND f.to_user_id = p.to_user_id)
          ORDER BY {order}
          LIMIT $3"
    ))
    .bind::<BigInt, _>(after.from)
    .bind::<BigInt, _>(after.to)
    .bind::<BigInt, _>(limit)
    .bind::<BigInt, _>(user)
    .bind::<Timestamptz, _>(since)
    .bind::<Timestamptz, _>(after.updated_at.unwrap_or(DateTime::UNIX_EPOCH))
    .load(conn)
    .await
}

/// The given pairs as both tables hold them (pairs in neither are absent).
pub(crate) async fn pairs(
    conn: &mut PgConn,
    pairs: &[(UserId, UserId)],
) -> QueryResult<Vec<EdgePair>> {
    let (from, to): (Vec<i64>, Vec<i64>) = pairs.iter().map(|(a, b)| (a.get(), b.get())).unzip();
    diesel::sql_query(
        "SELECT k.from_id AS from_user_id, k.to_id AS to_user_id,
                f.active AS truth_active, f.version AS truth_version, f.followed_at AS truth_followed_at,
                f.updated_at AS truth_updated_at,
                p.active AS projected_active, p.version AS projected_version,
                p.followed_at AS projected_followed_at, NULL::timestamptz AS projected_updated_at
           FROM unnest($1::bigint[], $2::bigint[]) AS k(from_id, to_id)
           LEFT JOIN following f ON f.from_user_id = k.from_id AND f.to_user_id = k.to_id
           LEFT JOIN follower p ON p.to_user_id = k.to_id AND p.from_user_id = k.from_id
          WHERE f.from_user_id IS NOT NULL OR p.from_user_id IS NOT NULL",
    )
    .bind::<Array<BigInt>, _>(from)
    .bind::<Array<BigInt>, _>(to)
    .load(conn)
    .await
}

/// Ids of users after `after`, in order.
pub(crate) async fn user_page(
    conn: &mut PgConn,
    after: i64,
    limit: i64,
) -> QueryResult<Vec<UserId>> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = BigInt)]
        id: i64,
    }
    let rows: Vec<Row> =
        diesel::sql_query("SELECT id FROM users WHERE id > $1 ORDER BY id LIMIT $2")
            .bind::<BigInt, _>(after)
            .bind::<BigInt, _>(limit)
            .load(conn)
            .await?;
    Ok(rows.into_iter().filter_map(|r| UserId::new(r.id)).collect())
}

/// One user's counters beside what the truth and the projection count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, QueryableByName)]
pub struct UserCounts {
    /// The user.
    #[diesel(sql_type = BigInt)]
    pub user_id: i64,
    /// `user_stats.followings`, if the row exists.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub followings: Option<i64>,
    /// `user_stats.followers`, if the row exists.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub followers: Option<i64>,
    /// `user_stats.version`, if the row exists.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub version: Option<i64>,
    /// Active truth edges from the user.
    #[diesel(sql_type = BigInt)]
    pub true_followings: i64,
    /// Active truth edges to the user.
    #[diesel(sql_type = BigInt)]
    pub true_followers: i64,
    /// Active projection edges to the user.
    #[diesel(sql_type = BigInt)]
    pub projected_followers: i64,
}

/// The counters of `users` beside the counts of the truth and the
/// projection (index scans of each user's edges).
pub async fn user_counts(conn: &mut PgConn, users: &[UserId]) -> QueryResult<Vec<UserCounts>> {
    let ids: Vec<i64> = users.iter().map(|u| u.get()).collect();
    diesel::sql_query(
        "SELECT u.id AS user_id, s.followings, s.followers, s.version,
                (SELECT count(*) FROM following f WHERE f.from_user_id = u.id AND f.active) AS true_followings,
                (SELECT count(*) FROM following f WHERE f.to_user_id = u.id AND f.active) AS true_followers,
                (SELECT count(*) FROM follower p WHERE p.to_user_id = u.id AND p.active) AS projected_followers
           FROM unnest($1::bigint[]) AS u(id)
           LEFT JOIN user_stats s ON s.user_id = u.id
          ORDER BY u.id",
    )
    .bind::<Array<BigInt>, _>(ids)
    .load(conn)
    .await
}
