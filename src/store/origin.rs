//! `event_origin`: the identity of this database as the writer of its
//! events, and where it was made (see the migration that creates it).

use diesel::prelude::*;
use diesel::sql_types::{Array, Bool, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use super::PgConn;

/// This database's origin, with where it was made and where it is now.
#[derive(Clone, Debug, PartialEq, Eq, QueryableByName)]
pub struct Origin {
    /// What every event of this database carries.
    #[diesel(sql_type = SqlUuid)]
    pub origin: Uuid,
    /// Earlier origins of this database, newest first.
    #[diesel(sql_type = Array<SqlUuid>)]
    pub retired: Vec<Uuid>,
    /// Where the origin was made (system identifier / table oid).
    #[diesel(sql_type = Text)]
    pub identity: String,
    /// Where the database is now.
    #[diesel(sql_type = Text)]
    pub live_identity: String,
}

impl Origin {
    /// Whether the database is where its origin was made: not a logical
    /// copy or restore of it, and not on another cluster.
    pub fn in_place(&self) -> bool {
        self.identity == self.live_identity
    }
}

/// The origin row.
pub(crate) async fn current(conn: &mut PgConn) -> QueryResult<Origin> {
    diesel::sql_query(
        "SELECT origin, retired, identity, kith_database_identity() AS live_identity
           FROM event_origin",
    )
    .get_result(conn)
    .await
}

/// Gives the database a new origin made here; the old one is retired.
/// Returns the row as it now stands.
pub(crate) async fn renew(conn: &mut PgConn) -> QueryResult<Origin> {
    diesel::sql_query(
        "UPDATE event_origin
            SET retired = origin || retired, origin = gen_random_uuid(),
                identity = kith_database_identity(), made_at = now()
         RETURNING origin, retired, identity, identity AS live_identity",
    )
    .get_result(conn)
    .await
}

/// Keeps the origin and records that it now lives here (a database moved
/// or upgraded with everything it wrote). Returns the row as it now stands.
pub(crate) async fn adopt(conn: &mut PgConn) -> QueryResult<Origin> {
    diesel::sql_query(
        "UPDATE event_origin SET identity = kith_database_identity()
         RETURNING origin, retired, identity, identity AS live_identity",
    )
    .get_result(conn)
    .await
}

/// Whether this schema's relay or any of its projectors is running: the
/// relay's leadership lock is held, or a projector holds a lease that has
/// not lapsed. Says which, or `None`. An origin changes only while neither
/// is.
pub(crate) async fn pipeline_running(conn: &mut PgConn) -> QueryResult<Option<String>> {
    #[derive(QueryableByName)]
    struct Taken {
        #[diesel(sql_type = Bool)]
        taken: bool,
    }
    #[derive(QueryableByName)]
    struct Lease {
        #[diesel(sql_type = Text)]
        lease: String,
    }
    // Held by another session, the relay's lock cannot be taken; taken
    // here, it is given back at once.
    let Taken { taken } = diesel::sql_query(
        "SELECT pg_try_advisory_lock(hashtext('kith.outbox_relay.' || current_schema())) AS taken",
    )
    .get_result(conn)
    .await?;
    if !taken {
        return Ok(Some("an outbox relay holds its lock".to_owned()));
    }
    diesel::sql_query(
        "SELECT pg_advisory_unlock(hashtext('kith.outbox_relay.' || current_schema()))",
    )
    .execute(conn)
    .await?;
    let lease: Option<Lease> = diesel::sql_query(
        "SELECT consumer_group || ' ' || topic || '/' || partition || ' until ' || lease_until AS lease
           FROM projector_partition
          WHERE owner IS NOT NULL AND lease_until > now()
          ORDER BY lease_until DESC LIMIT 1",
    )
    .get_result(conn)
    .await
    .optional()?;
    Ok(lease.map(|l| format!("a projector holds the lease of {}", l.lease)))
}
