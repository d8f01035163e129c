//! Account moves (`account_move`, `account_move_row`): the move that
//! `kith_move_account` opens, and its job's batches, each under the job's
//! lease and inside the batch's own transaction. The aliases a move needs
//! are in [`super::aliases`].

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Bool, Int4, Nullable, Text, Timestamptz, Uuid};
use diesel_async::RunQueryDsl;

use super::PgConn;
use crate::model::{FollowOptions, UserId};

pub(crate) use super::move_progress::{Progress, advance, forget_left_behind, quiet};

/// A move as stored.
#[derive(QueryableByName, Clone, Debug)]
pub(crate) struct MoveRow {
    #[diesel(sql_type = BigInt)]
    pub id: i64,
    #[diesel(sql_type = BigInt)]
    pub from_id: i64,
    #[diesel(sql_type = BigInt)]
    pub to_id: i64,
    #[diesel(sql_type = Text)]
    pub state: String,
    #[diesel(sql_type = Int4)]
    pub total: i32,
    #[diesel(sql_type = Int4)]
    pub moved: i32,
    #[diesel(sql_type = Int4)]
    pub requested: i32,
    #[diesel(sql_type = Int4)]
    pub skipped: i32,
    #[diesel(sql_type = Int4)]
    pub failed: i32,
    #[diesel(sql_type = BigInt)]
    pub after_id: i64,
    #[diesel(sql_type = Nullable<Text>)]
    pub failure: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    pub created_at: DateTime<Utc>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub finished_at: Option<DateTime<Utc>>,
}

const MOVE_COLUMNS: &str = "id, from_id, to_id, state, total, moved, requested, skipped, failed, \
     after_id, failure, created_at, finished_at";

/// What `kith_move_account` answered: `ok` with the new move's id, or a
/// refusal.
#[derive(QueryableByName)]
pub(crate) struct Opened {
    #[diesel(sql_type = Text)]
    pub outcome: String,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub move_id: Option<i64>,
}

/// Moves `from` to `to` (see `kith_move_account`).
pub(crate) async fn open(
    conn: &mut PgConn,
    from: UserId,
    to: UserId,
    events: [uuid::Uuid; 2],
) -> diesel::QueryResult<Opened> {
    let rows: Vec<Opened> = diesel::sql_query("SELECT * FROM kith_move_account($1, $2, $3, $4)")
        .bind::<BigInt, _>(from.get())
        .bind::<BigInt, _>(to.get())
        .bind::<Uuid, _>(events[0])
        .bind::<Uuid, _>(events[1])
        .load(conn)
        .await?;
    super::committed(rows).ok_or(diesel::result::Error::NotFound)
}

/// How long ago, in ms by the database's clock, `account`'s latest move
/// was made; `None` if it never moved, or is moved now (then its move is
/// refused for that).
pub(crate) async fn since_last_move(
    conn: &mut PgConn,
    account: UserId,
) -> diesel::QueryResult<Option<i64>> {
    #[derive(QueryableByName)]
    struct Since {
        #[diesel(sql_type = Nullable<BigInt>)]
        ms: Option<i64>,
    }
    let row: Since = diesel::sql_query(
        "SELECT (extract(epoch FROM now() - max(m.created_at)) * 1000)::BIGINT AS ms
           FROM account_move m
          WHERE m.from_id = $1
            AND NOT EXISTS (SELECT 1 FROM users u WHERE u.id = $1 AND u.moved_to IS NOT NULL)",
    )
    .bind::<BigInt, _>(account.get())
    .get_result(conn)
    .await?;
    Ok(row.ms)
}

/// Takes the lease, for `lease_ms`, of the open move due first whose
/// lease is free or lapsed.
pub(crate) async fn claim(
    conn: &mut PgConn,
    token: uuid::Uuid,
    lease_ms: i64,
) -> diesel::QueryResult<Option<MoveRow>> {
    let rows: Vec<MoveRow> = diesel::sql_query(format!(
        "UPDATE account_move
            SET lease_token = $1, lease_until = now() + $2 * interval '1 millisecond'
          WHERE id = (SELECT id FROM account_move
                       WHERE state = 'running' AND due_at <= now()
                         AND (lease_until IS NULL OR lease_until < now())
                       ORDER BY due_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
         RETURNING {MOVE_COLUMNS}"
    ))
    .bind::<Uuid, _>(token)
    .bind::<BigInt, _>(lease_ms)
    .load(conn)
    .await?;
    Ok(super::committed(rows))
}

/// When the soonest open move held back by its pace comes due, if any.
pub(crate) async fn next_due(conn: &mut PgConn) -> diesel::QueryResult<Option<DateTime<Utc>>> {
    #[derive(QueryableByName)]
    struct Due {
        #[diesel(sql_type = Nullable<Timestamptz>)]
        due: Option<DateTime<Utc>>,
    }
    let row: Due = diesel::sql_query(
        "SELECT min(due_at) AS due FROM account_move WHERE state = 'running' AND due_at > now()",
    )
    .get_result(conn)
    .await?;
    Ok(row.due)
}

/// Inside a batch's transaction: the move, locked, if `token` still holds
/// its lease (extended by `lease_ms`) and it runs (a move back supersedes
/// it, waiting for this lock); `None` otherwise.
pub(crate) async fn fence(
    conn: &mut PgConn,
    id: i64,
    token: uuid::Uuid,
    lease_ms: i64,
) -> diesel::QueryResult<Option<MoveRow>> {
    let rows: Vec<MoveRow> = diesel::sql_query(format!(
        "UPDATE account_move m
            SET lease_until = now() + $3 * interval '1 millisecond'
          WHERE m.id = $1 AND m.lease_token = $2 AND m.state = 'running'
         RETURNING {MOVE_COLUMNS}"
    ))
    .bind::<BigInt, _>(id)
    .bind::<Uuid, _>(token)
    .bind::<BigInt, _>(lease_ms)
    .load(conn)
    .await?;
    Ok(rows.into_iter().next())
}

/// One follower of the moved account, with the options of its follow.
#[derive(QueryableByName, Clone, Debug)]
pub(crate) struct Follower {
    #[diesel(sql_type = BigInt)]
    pub id: i64,
    /// Whether the follow's options were ever set for this follow.
    #[diesel(sql_type = Bool)]
    pub has_options: bool,
    #[diesel(sql_type = Bool)]
    pub notify: bool,
    #[diesel(sql_type = Bool)]
    pub show_reposts: bool,
    #[diesel(sql_type = Nullable<Array<Text>>)]
    pub languages: Option<Vec<String>>,
}

impl Follower {
    /// The options its follow had, if set.
    pub(crate) fn options(&self) -> Option<FollowOptions> {
        self.has_options.then(|| FollowOptions {
            notify: self.notify,
            show_reposts: self.show_reposts,
            languages: self.languages.clone(),
        })
    }
}

/// The next `limit` active followers of `account` after id `after`, and
/// the accounts whose request to follow it is pending, in id order, with
/// the options of their follow or request; none that move `move_id` left
/// behind.
pub(crate) async fn followers_after(
    conn: &mut PgConn,
    account: i64,
    after: i64,
    limit: i64,
    move_id: i64,
) -> diesel::QueryResult<Vec<Follower>> {
    diesel::sql_query(
        "SELECT DISTINCT ON (id) * FROM (
             (SELECT f.from_user_id AS id,
                     f.options_at IS NOT DISTINCT FROM f.followed_at AS has_options,
                     f.notify, f.show_reposts, f.languages
                FROM following f
               WHERE f.to_user_id = $1 AND f.from_user_id > $2 AND f.active
                 AND NOT EXISTS (SELECT 1 FROM account_move_row r
                                  WHERE r.move_id = $4 AND r.follower_id = f.from_user_id)
               ORDER BY f.from_user_id LIMIT $3)
             UNION ALL
             (SELECT q.from_user_id, q.options_at IS NOT DISTINCT FROM q.requested_at,
                     q.notify, q.show_reposts, q.languages
                FROM follow_request q
               WHERE q.to_user_id = $1 AND q.from_user_id > $2 AND q.active
                 AND NOT EXISTS (SELECT 1 FROM account_move_row r
                                  WHERE r.move_id = $4 AND r.follower_id = q.from_user_id)
               ORDER BY q.from_user_id LIMIT $3)) c
          ORDER BY id, has_options DESC LIMIT $3",
    )
    .bind::<BigInt, _>(account)
    .bind::<BigInt, _>(after)
    .bind::<BigInt, _>(limit)
    .bind::<BigInt, _>(move_id)
    .load(conn)
    .await
}

/// Those of `ids` who follow `account`, or whose request to follow it is
/// pending, now, with the options of their follow or request: read once
/// their pairs are locked.
pub(crate) async fn followers_among(
    conn: &mut PgConn,
    account: i64,
    ids: &[i64],
) -> diesel::QueryResult<Vec<Follower>> {
    diesel::sql_query(
        "SELECT DISTINCT ON (id) * FROM (
             SELECT f.from_user_id AS id,
                    f.options_at IS NOT DISTINCT FROM f.followed_at AS has_options,
                    f.notify, f.show_reposts, f.languages
               FROM following f
              WHERE f.to_user_id = $1 AND f.from_user_id = ANY ($2) AND f.active
             UNION ALL
             SELECT q.from_user_id, q.options_at IS NOT DISTINCT FROM q.requested_at,
                    q.notify, q.show_reposts, q.languages
               FROM follow_request q
              WHERE q.to_user_id = $1 AND q.from_user_id = ANY ($2) AND q.active) c
          ORDER BY id, has_options DESC",
    )
    .bind::<BigInt, _>(account)
    .bind::<Array<BigInt>, _>(ids)
    .load(conn)
    .await
}

/// Takes, for `conn`'s transaction, the pair locks of every follower in
/// `followers` with each of `accounts`, in the one order every edge
/// change takes pair locks in (`kith_change_edges`): a batch that changes
/// two pairs of one follower holds both before either changes. Then the
/// rows of those pairs, all of them before any changes, in the order a
/// restore and every edge change take them (hidden edges, then edges,
/// each by `(from, to)`): the batch's follows of the new account and
/// unfollows of the old would otherwise lock a follower's two edge rows
/// one way, and a suspension hiding its edges the other.
pub(crate) async fn lock_pairs(
    conn: &mut PgConn,
    followers: &[i64],
    accounts: [i64; 2],
) -> diesel::QueryResult<()> {
    diesel::sql_query(
        "SELECT count(*) FROM (
             SELECT pg_advisory_xact_lock(hashint8(p.lo), hashint8(p.hi))
               FROM (SELECT DISTINCT least(f.id, a.id) AS lo, greatest(f.id, a.id) AS hi
                       FROM unnest($1::BIGINT[]) AS f(id), unnest($2::BIGINT[]) AS a(id)
                      ORDER BY 1, 2) p) l",
    )
    .bind::<Array<BigInt>, _>(followers)
    .bind::<Array<BigInt>, _>(&accounts[..])
    .execute(conn)
    .await?;
    for (table, alias) in [("hidden_edge", "h"), ("following", "e")] {
        // One of two fixed table names.
        diesel::sql_query(format!(
            "SELECT 1 FROM {table} {alias}
               JOIN unnest($1::BIGINT[]) AS f(id) ON {alias}.from_user_id = f.id
              WHERE {alias}.to_user_id = ANY ($2::BIGINT[])
              ORDER BY {alias}.from_user_id, {alias}.to_user_id
                FOR UPDATE OF {alias}"
        ))
        .bind::<Array<BigInt>, _>(followers)
        .bind::<Array<BigInt>, _>(&accounts[..])
        .execute(conn)
        .await?;
    }
    Ok(())
}

/// Gives up `token`'s lease of move `id`.
pub(crate) async fn release(
    conn: &mut PgConn,
    id: i64,
    token: uuid::Uuid,
) -> diesel::QueryResult<()> {
    diesel::sql_query(
        "UPDATE account_move SET lease_token = NULL, lease_until = NULL
          WHERE id = $1 AND lease_token = $2",
    )
    .bind::<BigInt, _>(id)
    .bind::<Uuid, _>(token)
    .execute(conn)
    .await?;
    Ok(())
}

/// Ends move `id` as `state` ('done' or 'failed', with why), if `token`
/// still holds it.
pub(crate) async fn finish(
    conn: &mut PgConn,
    id: i64,
    token: uuid::Uuid,
    state: &str,
    failure: Option<&str>,
) -> diesel::QueryResult<bool> {
    let n = diesel::sql_query(
        "UPDATE account_move
            SET state = $3, failure = $4, finished_at = now(),
                lease_token = NULL, lease_until = NULL
          WHERE id = $1 AND lease_token = $2 AND state = 'running'",
    )
    .bind::<BigInt, _>(id)
    .bind::<Uuid, _>(token)
    .bind::<Text, _>(state)
    .bind::<Nullable<Text>, _>(failure)
    .execute(conn)
    .await?;
    Ok(n == 1)
}

/// Move `id`, if it exists.
pub(crate) async fn get(conn: &mut PgConn, id: i64) -> diesel::QueryResult<Option<MoveRow>> {
    let rows: Vec<MoveRow> = diesel::sql_query(format!(
        "SELECT {MOVE_COLUMNS} FROM account_move WHERE id = $1"
    ))
    .bind::<BigInt, _>(id)
    .load(conn)
    .await?;
    Ok(rows.into_iter().next())
}

/// A follower a move left behind, and why.
#[derive(QueryableByName, Clone, Debug)]
pub(crate) struct LeftBehind {
    #[diesel(sql_type = BigInt)]
    pub follower_id: i64,
    #[diesel(sql_type = Text)]
    pub outcome: String,
}

/// Up to `limit` followers move `id` left behind after follower `after`,
/// in id order.
pub(crate) async fn left_behind(
    conn: &mut PgConn,
    id: i64,
    after: i64,
    limit: i64,
) -> diesel::QueryResult<Vec<LeftBehind>> {
    diesel::sql_query(
        "SELECT follower_id, outcome FROM account_move_row
          WHERE move_id = $1 AND follower_id > $2 ORDER BY follower_id LIMIT $3",
    )
    .bind::<BigInt, _>(id)
    .bind::<BigInt, _>(after)
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}

/// A follower a finished move left following the moved account, though
/// not among those it left behind.
#[derive(QueryableByName, Clone, Debug)]
pub(crate) struct Stranded {
    #[diesel(sql_type = BigInt)]
    pub move_id: i64,
    #[diesel(sql_type = BigInt)]
    pub from_id: i64,
    #[diesel(sql_type = BigInt)]
    pub to_id: i64,
    #[diesel(embed)]
    pub follower: Follower,
}

/// Up to `limit` followers of moved accounts (of `user`, or following
/// `user`, if given) whose account's latest move is done and did not leave
/// them behind — but as `NOT_FOLLOWABLE`, an account that could not act
/// then and follows again since its restore — by move; none of a move
/// whose new account cannot take them now (suspended, deleted, moved).
pub(crate) async fn stranded(
    conn: &mut PgConn,
    user: Option<i64>,
    limit: i64,
) -> diesel::QueryResult<Vec<Stranded>> {
    diesel::sql_query(
        "SELECT m.id AS move_id, m.from_id, m.to_id, f.from_user_id AS id,
                f.options_at IS NOT DISTINCT FROM f.followed_at AS has_options,
                f.notify, f.show_reposts, f.languages
           FROM users u
           JOIN LATERAL (SELECT * FROM account_move m WHERE m.from_id = u.id
                          ORDER BY m.id DESC LIMIT 1) m ON m.state = 'done' AND m.to_id = u.moved_to
           JOIN users t ON t.id = m.to_id AND t.status = 'active' AND t.moved_to IS NULL
           JOIN following f ON f.to_user_id = u.id AND f.active
          WHERE u.moved_to IS NOT NULL
            AND ($1::BIGINT IS NULL OR u.id = $1 OR f.from_user_id = $1)
            AND NOT EXISTS (SELECT 1 FROM account_move_row r
                             WHERE r.move_id = m.id AND r.follower_id = f.from_user_id
                               AND r.outcome <> 'NOT_FOLLOWABLE')
          ORDER BY m.id, f.from_user_id LIMIT $2",
    )
    .bind::<Nullable<BigInt>, _>(user)
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}
