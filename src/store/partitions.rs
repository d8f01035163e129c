//! `projector_partition` and `projector_member`: which projector owns which
//! partition (a lease on PostgreSQL's clock), and how far each partition has
//! been applied. The projector writes its position in the same transaction
//! as the projection, guarded by the lease's owner and epoch, so a batch is
//! applied exactly once even when a stalled owner wakes up after losing it.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Integer, Nullable, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use super::PgConn;

/// One partition of one topic.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.topic, self.partition)
    }
}

/// A partition this member holds, as read when it was claimed or renewed.
#[derive(Clone, Debug, PartialEq, Eq, QueryableByName)]
pub(crate) struct Lease {
    /// The topic.
    #[diesel(sql_type = Text)]
    pub topic: String,
    /// The partition.
    #[diesel(sql_type = Integer)]
    pub partition: i32,
    /// The claim this lease belongs to.
    #[diesel(sql_type = BigInt)]
    pub epoch: i64,
    /// First offset not applied to PostgreSQL; `None`: from the start.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub next_offset: Option<i64>,
    /// First offset whose Redis effects are not known to be written.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub synced_offset: Option<i64>,
}

impl Lease {
    /// Which partition.
    pub(crate) fn topic_partition(&self) -> TopicPartition {
        TopicPartition {
            topic: self.topic.clone(),
            partition: self.partition,
        }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Makes sure partitions `0..count` of `topic` have rows (new ones start at the beginning).
pub(crate) async fn ensure(
    conn: &mut PgConn,
    group: &str,
    topic: &str,
    count: i32,
) -> QueryResult<()> {
    diesel::sql_query(
        "INSERT INTO projector_partition (consumer_group, topic, partition)
         SELECT $1, $2, p FROM generate_series(0, $3 - 1) AS p
         ON CONFLICT DO NOTHING",
    )
    .bind::<Text, _>(group)
    .bind::<Text, _>(topic)
    .bind::<Integer, _>(count)
    .execute(conn)
    .await
    .map(drop)
}

/// Records that `member` is alive, and forgets members silent for a long time.
pub(crate) async fn heartbeat(conn: &mut PgConn, group: &str, member: Uuid) -> QueryResult<()> {
    diesel::sql_query(
        "WITH gone AS (
             DELETE FROM projector_member
              WHERE consumer_group = $1 AND heartbeat_at < now() - interval '1 hour'
         )
         INSERT INTO projector_member (consumer_group, member, heartbeat_at)
         VALUES ($1, $2, now())
         ON CONFLICT (consumer_group, member) DO UPDATE SET heartbeat_at = now()",
    )
    .bind::<Text, _>(group)
    .bind::<SqlUuid, _>(member)
    .execute(conn)
    .await
    .map(drop)
}

/// Removes `member` from the group (a clean stop).
pub(crate) async fn leave(conn: &mut PgConn, group: &str, member: Uuid) -> QueryResult<()> {
    diesel::sql_query("DELETE FROM projector_member WHERE consumer_group = $1 AND member = $2")
        .bind::<Text, _>(group)
        .bind::<SqlUuid, _>(member)
        .execute(conn)
        .await
        .map(drop)
}

/// Extends every lease `member` still holds; returns them (the ones it lost are absent).
pub(crate) async fn renew(
    conn: &mut PgConn,
    group: &str,
    member: Uuid,
    ttl: Duration,
) -> QueryResult<Vec<Lease>> {
    diesel::sql_query(
        "UPDATE projector_partition
            SET lease_until = now() + $3 * interval '1 millisecond'
          WHERE consumer_group = $1 AND owner = $2
         RETURNING topic, partition, epoch, next_offset, synced_offset",
    )
    .bind::<Text, _>(group)
    .bind::<SqlUuid, _>(member)
    .bind::<BigInt, _>(millis(ttl))
    .load(conn)
    .await
}

/// Per topic: how many partitions exist, and how many members heartbeat within `ttl`.
#[derive(Clone, Debug, PartialEq, Eq, QueryableByName)]
pub(crate) struct TopicShare {
    /// The topic.
    #[diesel(sql_type = Text)]
    pub topic: String,
    /// Its partitions.
    #[diesel(sql_type = BigInt)]
    pub partitions: i64,
    /// Live members of the group (the same for every topic).
    #[diesel(sql_type = BigInt)]
    pub members: i64,
}

/// The facts the share-out is computed from.
pub(crate) async fn shares(
    conn: &mut PgConn,
    group: &str,
    ttl: Duration,
) -> QueryResult<Vec<TopicShare>> {
    diesel::sql_query(
        "SELECT topic, count(*) AS partitions,
                (SELECT count(*) FROM projector_member
                  WHERE consumer_group = $1
                    AND heartbeat_at > now() - $2 * interval '1 millisecond') AS members
           FROM projector_partition
          WHERE consumer_group = $1
          GROUP BY topic",
    )
    .bind::<Text, _>(group)
    .bind::<BigInt, _>(millis(ttl))
    .load(conn)
    .await
}

/// Claims up to `limit` partitions of `topic` that nobody holds (or whose
/// lease ran out), bumping their epoch; returns the new leases. Rows an
/// in-flight batch has locked are skipped, to be claimed once it committed.
pub(crate) async fn claim(
    conn: &mut PgConn,
    group: &str,
    topic: &str,
    member: Uuid,
    ttl: Duration,
    limit: i64,
) -> QueryResult<Vec<Lease>> {
    diesel::sql_query(
        "UPDATE projector_partition p
            SET owner = $3, epoch = p.epoch + 1,
                lease_until = now() + $4 * interval '1 millisecond'
          WHERE (p.consumer_group, p.topic, p.partition) IN (
                SELECT consumer_group, topic, partition FROM projector_partition
                 WHERE consumer_group = $1 AND topic = $2
                   AND (owner IS NULL OR lease_until < now())
                 ORDER BY partition
                 LIMIT $5
                   FOR UPDATE SKIP LOCKED)
         RETURNING p.topic, p.partition, p.epoch, p.next_offset, p.synced_offset",
    )
    .bind::<Text, _>(group)
    .bind::<Text, _>(topic)
    .bind::<SqlUuid, _>(member)
    .bind::<BigInt, _>(millis(ttl))
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}

/// Gives up leases of `member`. `synced` (per partition, may be empty)
/// records how far Redis is known to be written, so the next owner redoes less.
pub(crate) async fn release(
    conn: &mut PgConn,
    group: &str,
    member: Uuid,
    partitions: &[(TopicPartition, Option<i64>)],
) -> QueryResult<usize> {
    let topics: Vec<&str> = partitions.iter().map(|(tp, _)| tp.topic.as_str()).collect();
    let numbers: Vec<i32> = partitions.iter().map(|(tp, _)| tp.partition).collect();
    let synced: Vec<Option<i64>> = partitions.iter().map(|(_, s)| *s).collect();
    diesel::sql_query(
        "UPDATE projector_partition p
            SET owner = NULL, lease_until = NULL,
                synced_offset = coalesce(v.synced, p.synced_offset)
           FROM unnest($3::text[], $4::int[], $5::bigint[]) AS v(topic, partition, synced)
          WHERE p.consumer_group = $1 AND p.owner = $2
            AND p.topic = v.topic AND p.partition = v.partition",
    )
    .bind::<Text, _>(group)
    .bind::<SqlUuid, _>(member)
    .bind::<Array<Text>, _>(topics)
    .bind::<Array<Integer>, _>(numbers)
    .bind::<Array<Nullable<BigInt>>, _>(synced)
    .execute(conn)
    .await
}

/// Starts a partition this member holds from the beginning again (its log
/// was recreated).
pub(crate) async fn reset_position(
    conn: &mut PgConn,
    group: &str,
    member: Uuid,
    partition: &TopicPartition,
    epoch: i64,
) -> QueryResult<usize> {
    diesel::sql_query(
        "UPDATE projector_partition SET next_offset = NULL, synced_offset = NULL
          WHERE consumer_group = $1 AND owner = $2 AND topic = $3 AND partition = $4 AND epoch = $5",
    )
    .bind::<Text, _>(group)
    .bind::<SqlUuid, _>(member)
    .bind::<Text, _>(&partition.topic)
    .bind::<Integer, _>(partition.partition)
    .bind::<BigInt, _>(epoch)
    .execute(conn)
    .await
}

/// Moving one partition's position forward within a batch transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Advance {
    /// Which partition.
    pub partition: TopicPartition,
    /// The epoch of the lease the batch was read under.
    pub epoch: i64,
    /// The position the batch expects to find.
    pub expected: Option<i64>,
    /// The new position: one past the batch's last message.
    pub next_offset: i64,
    /// How far Redis is known to be written.
    pub synced_offset: Option<i64>,
}

/// Advances the positions of a batch — only where `member` still holds the
/// lease under the same epoch and the position is the one expected. Takes the
/// rows' locks for the rest of the transaction. Returns the partitions it
/// could not advance (the batch must not commit their effects).
pub(crate) async fn advance(
    conn: &mut PgConn,
    group: &str,
    member: Uuid,
    advances: &[Advance],
) -> QueryResult<Vec<TopicPartition>> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = Text)]
        topic: String,
        #[diesel(sql_type = Integer)]
        partition: i32,
    }
    if advances.is_empty() {
        return Ok(Vec::new());
    }
    let topics: Vec<&str> = advances
        .iter()
        .map(|a| a.partition.topic.as_str())
        .collect();
    let numbers: Vec<i32> = advances.iter().map(|a| a.partition.partition).collect();
    let epochs: Vec<i64> = advances.iter().map(|a| a.epoch).collect();
    let expected: Vec<Option<i64>> = advances.iter().map(|a| a.expected).collect();
    let next: Vec<i64> = advances.iter().map(|a| a.next_offset).collect();
    let synced: Vec<Option<i64>> = advances.iter().map(|a| a.synced_offset).collect();
    let advanced: Vec<Row> = diesel::sql_query(
        "UPDATE projector_partition p
            SET next_offset = v.next_offset,
                synced_offset = coalesce(v.synced, p.synced_offset)
           FROM unnest($3::text[], $4::int[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[])
                AS v(topic, partition, epoch, expected, next_offset, synced)
          WHERE p.consumer_group = $1 AND p.owner = $2
            AND p.topic = v.topic AND p.partition = v.partition AND p.epoch = v.epoch
            AND p.next_offset IS NOT DISTINCT FROM v.expected
         RETURNING p.topic, p.partition",
    )
    .bind::<Text, _>(group)
    .bind::<SqlUuid, _>(member)
    .bind::<Array<Text>, _>(topics)
    .bind::<Array<Integer>, _>(numbers)
    .bind::<Array<BigInt>, _>(epochs)
    .bind::<Array<Nullable<BigInt>>, _>(expected)
    .bind::<Array<BigInt>, _>(next)
    .bind::<Array<Nullable<BigInt>>, _>(synced)
    .load(conn)
    .await?;
    Ok(advances
        .iter()
        .map(|a| &a.partition)
        .filter(|tp| {
            !advanced
                .iter()
                .any(|r| r.topic == tp.topic && r.partition == tp.partition)
        })
        .cloned()
        .collect())
}

/// Every partition row of a group, for status and tests.
#[derive(Clone, Debug, PartialEq, Eq, QueryableByName)]
pub struct PartitionRow {
    /// The topic.
    #[diesel(sql_type = Text)]
    pub topic: String,
    /// The partition.
    #[diesel(sql_type = Integer)]
    pub partition: i32,
    /// Current owner, if any lease is live.
    #[diesel(sql_type = Nullable<SqlUuid>)]
    pub owner: Option<Uuid>,
    /// First offset not applied.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub next_offset: Option<i64>,
}

/// The partitions of `group` with their live owners.
pub async fn list(conn: &mut PgConn, group: &str) -> QueryResult<Vec<PartitionRow>> {
    diesel::sql_query(
        "SELECT topic, partition, CASE WHEN lease_until > now() THEN owner END AS owner, next_offset
           FROM projector_partition WHERE consumer_group = $1 ORDER BY topic, partition",
    )
    .bind::<Text, _>(group)
    .load(conn)
    .await
}

/// The rows of `partitions` this member still holds, as they stand.
pub(crate) async fn held(
    conn: &mut PgConn,
    group: &str,
    member: Uuid,
    partitions: &[TopicPartition],
) -> QueryResult<Vec<Lease>> {
    let topics: Vec<&str> = partitions.iter().map(|tp| tp.topic.as_str()).collect();
    let numbers: Vec<i32> = partitions.iter().map(|tp| tp.partition).collect();
    diesel::sql_query(
        "SELECT p.topic, p.partition, p.epoch, p.next_offset, p.synced_offset
           FROM projector_partition p
           JOIN unnest($3::text[], $4::int[]) AS v(topic, partition)
             ON p.topic = v.topic AND p.partition = v.partition
          WHERE p.consumer_group = $1 AND p.owner = $2",
    )
    .bind::<Text, _>(group)
    .bind::<SqlUuid, _>(member)
    .bind::<Array<Text>, _>(topics)
    .bind::<Array<Integer>, _>(numbers)
    .load(conn)
    .await
}
