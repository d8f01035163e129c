//! `users`: accounts and their public profile.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::schema::users;
use crate::model::{User, UserId, UserStatus};

#[derive(Queryable, QueryableByName, Selectable)]
#[diesel(table_name = users)]
struct UserRow {
    id: i64,
    handle: String,
    display_name: String,
    status: String,
    locked: bool,
    hides_collections: bool,
    moved_to: Option<i64>,
}

impl From<UserRow> for User {
    fn from(row: UserRow) -> Self {
        Self {
            id: UserId::new(row.id).expect("users.id is an identity column"),
            handle: row.handle,
            display_name: row.display_name,
            status: UserStatus::from_db(&row.status),
            locked: row.locked,
            hides_collections: row.hides_collections,
            moved_to: row.moved_to.and_then(UserId::new),
        }
    }
}

/// The user with this id, whatever their status.
pub async fn find(conn: &mut PgConn, id: UserId) -> QueryResult<Option<User>> {
    users::table
        .find(id.get())
        .select(UserRow::as_select())
        .first(conn)
        .await
        .optional()
        .map(|row| row.map(User::from))
}

/// The user with this handle, whatever their status.
pub(crate) async fn find_by_handle(conn: &mut PgConn, handle: &str) -> QueryResult<Option<User>> {
    users::table
        .filter(users::handle.eq(handle))
        .select(UserRow::as_select())
        .first(conn)
        .await
        .optional()
        .map(|row| row.map(User::from))
}

/// The users with these handles, whatever their status, in no particular order.
pub(crate) async fn find_by_handles(
    conn: &mut PgConn,
    handles: &[String],
) -> QueryResult<Vec<User>> {
    users::table
        .filter(users::handle.eq_any(handles))
        .select(UserRow::as_select())
        .load(conn)
        .await
        .map(|rows: Vec<UserRow>| rows.into_iter().map(User::from).collect())
}

/// The users with these ids, whatever their status, in no particular order.
pub async fn find_many(conn: &mut PgConn, ids: &[UserId]) -> QueryResult<Vec<User>> {
    let raw: Vec<i64> = ids.iter().map(|id| id.get()).collect();
    users::table
        .filter(users::id.eq_any(raw))
        .select(UserRow::as_select())
        .load(conn)
        .await
        .map(|rows| rows.into_iter().map(User::from).collect())
}

/// Creates one user with an empty `user_stats` row; returns its id.
pub async fn create(
    conn: &mut PgConn,
    handle: &str,
    display_name: &str,
    status: UserStatus,
) -> QueryResult<UserId> {
    #[derive(QueryableByName)]
    struct Created {
        #[diesel(sql_type = BigInt)]
        id: i64,
    }
    let created: Vec<Created> = diesel::sql_query(
        "WITH new_user AS (
             INSERT INTO users (handle, display_name, status) VALUES ($1, $2, $3) RETURNING id
         ), stats AS (
             INSERT INTO user_stats (user_id) SELECT id FROM new_user
         )
         SELECT id FROM new_user",
    )
    .bind::<Text, _>(handle)
    .bind::<Text, _>(display_name)
    .bind::<Text, _>(status.as_str())
    .load(conn)
    .await?;
    // Answered only once committed (see `committed`).
    let created = super::committed(created).ok_or(diesel::result::Error::NotFound)?;
    Ok(UserId::new(created.id).expect("identity ids are positive"))
}

/// Creates active users `{prefix}0` … `{prefix}{count-1}`, leaving existing
/// handles alone; returns how many were created.
pub async fn seed(conn: &mut PgConn, prefix: &str, count: i64) -> QueryResult<usize> {
    diesel::sql_query(
        "WITH new_users AS (
             INSERT INTO users (handle, display_name)
             SELECT $1 || g, $1 || g FROM generate_series(0, $2 - 1) AS g
             ON CONFLICT (handle) DO NOTHING
             RETURNING id
         )
         INSERT INTO user_stats (user_id) SELECT id FROM new_users",
    )
    .bind::<Text, _>(prefix)
    .bind::<BigInt, _>(count)
    .execute(conn)
    .await
}

/// Sets the status of `id`; returns the status it had, `None` if no such user.
pub async fn set_status(
    conn: &mut PgConn,
    id: UserId,
    status: UserStatus,
) -> QueryResult<Option<UserStatus>> {
    #[derive(QueryableByName)]
    struct Old {
        #[diesel(sql_type = Text)]
        status: String,
    }
    // The change is recorded as pending until its edges are carried along.
    let old: Vec<Old> = diesel::sql_query(
        "WITH old AS (SELECT status FROM users WHERE id = $1 FOR UPDATE),
              pending AS (
                  INSERT INTO account_transition (account_id, status)
                  SELECT $1, $2 FROM old
                  ON CONFLICT (account_id) DO UPDATE
                      SET status = EXCLUDED.status, started_at = now())
         UPDATE users u SET status = $2, updated_at = now() FROM old
          WHERE u.id = $1 RETURNING old.status",
    )
    .bind::<BigInt, _>(id.get())
    .bind::<Text, _>(status.as_str())
    .load(conn)
    .await?;
    // Answered only once committed (see `committed`): the edges are carried
    // along next, on other sessions that must see the new status.
    Ok(super::committed(old).map(|o| UserStatus::from_db(&o.status)))
}

/// Account settings to change; `None` leaves one as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SettingsChange {
    /// Follows wait for the account's consent.
    pub locked: Option<bool>,
    /// Only the account sees its lists.
    pub hides_collections: Option<bool>,
}

/// Changes the settings of an active account, with its
/// `AccountSettingsChanged` event (`event_id`) when anything changed;
/// returns the account after, or `None` when there is no active account `id`.
pub(crate) async fn update_settings(
    conn: &mut PgConn,
    id: UserId,
    change: SettingsChange,
    event_id: uuid::Uuid,
) -> QueryResult<Option<User>> {
    let rows: Vec<UserRow> = diesel::sql_query(
        "SELECT id, handle, display_name, status, locked, hides_collections, moved_to
           FROM kith_update_settings($1, $2, $3, $4)",
    )
    .bind::<BigInt, _>(id.get())
    .bind::<Nullable<Bool>, _>(change.locked)
    .bind::<Nullable<Bool>, _>(change.hides_collections)
    .bind::<diesel::sql_types::Uuid, _>(event_id)
    .load(conn)
    .await?;
    Ok(super::committed(rows).map(User::from))
}

/// Status changes whose edges are not all carried along yet.
pub(crate) async fn pending_transitions(
    conn: &mut PgConn,
) -> QueryResult<Vec<(UserId, UserStatus)>> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = BigInt)]
        account_id: i64,
        #[diesel(sql_type = Text)]
        status: String,
    }
    let rows: Vec<Row> =
        diesel::sql_query("SELECT account_id, status FROM account_transition ORDER BY account_id")
            .load(conn)
            .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| Some((UserId::new(r.account_id)?, UserStatus::from_db(&r.status))))
        .collect())
}

/// Marks the status change of `id` to `status` as carried along (a newer
/// change of the same account stays pending).
pub(crate) async fn transition_done(
    conn: &mut PgConn,
    id: UserId,
    status: UserStatus,
) -> QueryResult<()> {
    diesel::sql_query("DELETE FROM account_transition WHERE account_id = $1 AND status = $2")
        .bind::<BigInt, _>(id.get())
        .bind::<Text, _>(status.as_str())
        .execute(conn)
        .await
        .map(drop)
}

/// Accounts that are not active but still have active edges.
pub(crate) async fn inactive_with_edges(conn: &mut PgConn) -> QueryResult<Vec<UserId>> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = BigInt)]
        id: i64,
    }
    let rows: Vec<Row> = diesel::sql_query(
        "SELECT u.id FROM users u
          WHERE u.status <> 'active'
            AND (EXISTS (SELECT 1 FROM following f WHERE f.from_user_id = u.id AND f.active)
              OR EXISTS (SELECT 1 FROM following f WHERE f.to_user_id = u.id AND f.active))
          ORDER BY u.id",
    )
    .load(conn)
    .await?;
    Ok(rows.into_iter().filter_map(|r| UserId::new(r.id)).collect())
}

/// The status of `id`, if the user exists.
pub(crate) async fn status_of(conn: &mut PgConn, id: UserId) -> QueryResult<Option<UserStatus>> {
    users::table
        .find(id.get())
        .select(users::status)
        .first::<String>(conn)
        .await
        .optional()
        .map(|s| s.map(|s| UserStatus::from_db(&s)))
}
