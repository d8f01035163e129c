//! PostgreSQL: the truth (`following`, `users`), the outbox, and the derived
//! tables the projector maintains. One module per table; every query Kith
//! runs against PostgreSQL lives below here.

pub(crate) mod aliases;
pub(crate) mod blocks;
pub(crate) mod checks;
pub(crate) mod close_friends;
pub(crate) mod content;
pub(crate) mod dead_letters;
pub(crate) mod export;
pub(crate) mod failure;
pub(crate) mod follow_options;
pub(crate) mod follower;
pub(crate) mod following;
pub(crate) mod hidden_edges;
pub(crate) mod import_budget;
pub(crate) mod imports;
pub(crate) mod lists;
pub(crate) mod migrate;
pub(crate) mod move_progress;
pub(crate) mod moves;
pub(crate) mod mutes;
pub(crate) mod origin;
pub(crate) mod outbox;
pub(crate) mod partitions;
pub(crate) mod pool;
pub(crate) mod requests;
pub(crate) mod schema;
pub(crate) mod seed;
pub(crate) mod stats;
pub(crate) mod suggestions;
pub(crate) mod users;

pub(crate) use pool::{PgConn, PgPool};

/// The row of a statement that writes outside a transaction, once its
/// commit is done: pass it what `.load()` (not `.get_result()`) returned.
/// Such a statement commits at the protocol's `Sync`, after its row is sent;
/// `get_result` answers at the row, so a crash before the commit would
/// answer a write that never happened, and a read on another session right
/// after could still miss it. `load` reads to the end (`ReadyForQuery`),
/// after the commit, and reports its failure. `None` when no row came.
pub(crate) fn committed<T>(rows: Vec<T>) -> Option<T> {
    rows.into_iter().next()
}

/// PostgreSQL's clock (`now()`): the one clock every time Kith compares
/// with times the database wrote is read from, never an application host's.
pub(crate) async fn database_now(
    conn: &mut PgConn,
) -> diesel::QueryResult<chrono::DateTime<chrono::Utc>> {
    use diesel_async::RunQueryDsl as _;
    #[derive(diesel::QueryableByName)]
    struct Now {
        #[diesel(sql_type = diesel::sql_types::Timestamptz)]
        now: chrono::DateTime<chrono::Utc>,
    }
    let row: Now = diesel::sql_query("SELECT now() AS now")
        .get_result(conn)
        .await?;
    Ok(row.now)
}
