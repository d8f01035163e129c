//! What PostgreSQL holds for a test: the truth, the outbox, the
//! projections, and whether the derived views agree with it.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Jsonb};
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
use kith::model::UserId;
use kith::testing::events::follow::FollowEvent;
use serde_json::Value;

use super::*;

/// Every row of the truth, the outbox and the counters, for "nothing changed" checks.
#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub following: Vec<(i64, i64, bool, i64)>,
    pub outbox: Vec<Value>,
    pub user_stats: Vec<(i64, i64, i64)>,
}

#[derive(QueryableByName)]
struct EdgeRow {
    #[diesel(sql_type = BigInt)]
    from_user_id: i64,
    #[diesel(sql_type = BigInt)]
    to_user_id: i64,
    #[diesel(sql_type = Bool)]
    active: bool,
    #[diesel(sql_type = BigInt)]
    version: i64,
}

#[derive(QueryableByName)]
struct PayloadRow {
    #[diesel(sql_type = Jsonb)]
    payload: Value,
}

#[derive(QueryableByName)]
struct StatsRow {
    #[diesel(sql_type = BigInt)]
    user_id: i64,
    #[diesel(sql_type = BigInt)]
    followings: i64,
    #[diesel(sql_type = BigInt)]
    version: i64,
}

/// The projection, counters, counter records and cached lists of some users.
#[derive(Debug, PartialEq, Eq)]
pub struct DerivedState {
    pub follower: Vec<(i64, i64, bool, i64)>,
    pub stats: Vec<kith::testing::store::stats::UserStats>,
    pub records: Vec<Option<kith::testing::cache::counters::CounterRecord>>,
    pub lists: Vec<Option<Vec<UserId>>>,
}

/// True when the projection holds exactly the truth (every edge, same state and version).
pub async fn projection_matches_truth(t: &TestApp) -> bool {
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName, PartialEq, Debug)]
    struct Diff {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let diff: Diff = diesel::sql_query(
        "SELECT count(*) AS n FROM (
             (SELECT from_user_id, to_user_id, active, version FROM following
              EXCEPT SELECT from_user_id, to_user_id, active, version FROM follower)
             UNION ALL
             (SELECT from_user_id, to_user_id, active, version FROM follower
              EXCEPT SELECT from_user_id, to_user_id, active, version FROM following)
         ) d",
    )
    .get_result(&mut t.conn().await)
    .await
    .unwrap();
    diff.n == 0
}

pub async fn backlog(t: &TestApp) -> i64 {
    kith::testing::store::outbox::backlog(&mut *t.conn().await)
        .await
        .unwrap()
}

/// Waits until every committed change has gone through relay and projector.
pub async fn settled(t: &TestApp, users: &[UserId], secs: u64) {
    eventually("the pipeline to settle", secs, || async {
        if backlog(t).await != 0 || !projection_matches_truth(t).await {
            return None;
        }
        for user in users {
            let stats = t.full_stats(*user).await;
            let record = t.counter_record(*user).await?;
            if record.version != stats.version as u64 {
                return None;
            }
        }
        Some(())
    })
    .await;
}

/// Asserts a report has no disagreement.
#[track_caller]
pub fn assert_consistent(report: &kith::testing::consistency::verify::Report) {
    assert_eq!(report.total(), 0, "verify found disagreements:\n{report}");
}

impl TestApp {
    /// The follow events of the outbox, oldest first.
    pub async fn outbox(&self) -> Vec<FollowEvent> {
        let rows: Vec<PayloadRow> = diesel::sql_query(
            "SELECT payload FROM outbox WHERE event_type LIKE 'Follow%' ORDER BY id",
        )
        .load(&mut self.conn().await)
        .await
        .unwrap();
        rows.into_iter()
            .map(|r| serde_json::from_value(r.payload).unwrap())
            .collect()
    }

    /// Every event of the outbox as stored (JSON), oldest first.
    pub async fn outbox_payloads(&self) -> Vec<Value> {
        let rows: Vec<PayloadRow> = diesel::sql_query("SELECT payload FROM outbox ORDER BY id")
            .load(&mut self.conn().await)
            .await
            .unwrap();
        rows.into_iter().map(|r| r.payload).collect()
    }

    /// How many messages were recorded as dead letters.
    pub async fn dead_letter_count(&self) -> i64 {
        self.count("SELECT count(*) AS n FROM dead_letter").await
    }

    /// The `n` a counting query answers (`SELECT count(*) AS n ...`).
    pub async fn count(&self, query: &str) -> i64 {
        #[derive(QueryableByName)]
        struct Count {
            #[diesel(sql_type = BigInt)]
            n: i64,
        }
        let row: Count = diesel::sql_query(query)
            .get_result(&mut self.conn().await)
            .await
            .unwrap_or_else(|e| panic!("{query}: {e}"));
        row.n
    }

    /// `(active, version)` of the edge, if the row exists.
    pub async fn edge(&self, from: UserId, to: UserId) -> Option<(bool, i64)> {
        let rows: Vec<EdgeRow> = diesel::sql_query(
            "SELECT from_user_id, to_user_id, active, version FROM following
              WHERE from_user_id = $1 AND to_user_id = $2",
        )
        .bind::<BigInt, _>(from.get())
        .bind::<BigInt, _>(to.get())
        .load(&mut self.conn().await)
        .await
        .unwrap();
        rows.into_iter().next().map(|r| (r.active, r.version))
    }

    /// `(followings, version)` from `user_stats`.
    pub async fn stats(&self, user: UserId) -> (i64, i64) {
        let mut conn = self.conn().await;
        let stats = kith::testing::store::stats::find(&mut conn, user)
            .await
            .unwrap()
            .unwrap();
        (stats.followings, stats.version)
    }

    pub async fn snapshot(&self) -> Snapshot {
        let mut conn = self.conn().await;
        let following: Vec<EdgeRow> = diesel::sql_query(
            "SELECT from_user_id, to_user_id, active, version FROM following ORDER BY 1, 2",
        )
        .load(&mut conn)
        .await
        .unwrap();
        let outbox: Vec<PayloadRow> = diesel::sql_query("SELECT payload FROM outbox ORDER BY id")
            .load(&mut conn)
            .await
            .unwrap();
        let stats: Vec<StatsRow> =
            diesel::sql_query("SELECT user_id, followings, version FROM user_stats ORDER BY 1")
                .load(&mut conn)
                .await
                .unwrap();
        Snapshot {
            following: following
                .into_iter()
                .map(|r| (r.from_user_id, r.to_user_id, r.active, r.version))
                .collect(),
            outbox: outbox.into_iter().map(|r| r.payload).collect(),
            user_stats: stats
                .into_iter()
                .map(|r| (r.user_id, r.followings, r.version))
                .collect(),
        }
    }

    /// `user_stats` of `user`, whole.
    pub async fn full_stats(&self, user: UserId) -> kith::testing::store::stats::UserStats {
        let mut conn = self.conn().await;
        kith::testing::store::stats::find(&mut conn, user)
            .await
            .unwrap()
            .unwrap()
    }

    /// `(active, version)` of the projection row `to ← from`.
    pub async fn projected(&self, from: UserId, to: UserId) -> Option<(bool, i64)> {
        let mut conn = self.conn().await;
        kith::testing::store::follower::rows(&mut conn, &[(from, to)])
            .await
            .unwrap()
            .into_iter()
            .next()
            .map(|row| (row.active, row.version))
    }

    /// Every derived view, for "nothing changed" comparisons.
    pub async fn derived_state(&self, users: &[UserId]) -> DerivedState {
        #[derive(QueryableByName, PartialEq, Eq, Debug)]
        struct Row {
            #[diesel(sql_type = BigInt)]
            to_user_id: i64,
            #[diesel(sql_type = BigInt)]
            from_user_id: i64,
            #[diesel(sql_type = Bool)]
            active: bool,
            #[diesel(sql_type = BigInt)]
            version: i64,
        }
        let rows: Vec<Row> = diesel::sql_query(
            "SELECT to_user_id, from_user_id, active, version FROM follower ORDER BY 1, 2",
        )
        .load(&mut self.conn().await)
        .await
        .unwrap();
        let mut stats = Vec::new();
        let mut records = Vec::new();
        let mut lists = Vec::new();
        for user in users {
            stats.push(self.full_stats(*user).await);
            records.push(self.counter_record(*user).await);
            lists.push(
                self.cached_list(kith::testing::paging::ListKey::Following(*user))
                    .await,
            );
            lists.push(
                self.cached_list(kith::testing::paging::ListKey::Followers(*user))
                    .await,
            );
        }
        DerivedState {
            follower: rows
                .into_iter()
                .map(|r| (r.to_user_id, r.from_user_id, r.active, r.version))
                .collect(),
            stats,
            records,
            lists,
        }
    }

    /// Runs a statement on the test's schema (for injecting faults).
    pub async fn sql(&self, statement: &str) {
        diesel::sql_query(statement)
            .execute(&mut *self.conn().await)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }

    /// `kith verify` over everything; `settle` zero reports at once.
    pub async fn verify(&self, settle_ms: u64) -> kith::testing::consistency::verify::Report {
        let options = kith::testing::consistency::verify::Options {
            settle: std::time::Duration::from_millis(settle_ms),
            batch: 7,
            ..Default::default()
        };
        kith::testing::consistency::verify::verify(&self.app, &options)
            .await
            .unwrap()
    }
}

impl TestApp {
    /// Runs `statement` in another session on the test's schema: as another
    /// process (or an operator's psql) would.
    pub async fn sql_elsewhere(&self, statement: &str) {
        let mut conn = AsyncPgConnection::establish(self.app.config.session_url())
            .await
            .unwrap();
        diesel_async::RunQueryDsl::execute(diesel::sql_query(statement), &mut conn)
            .await
            .unwrap();
    }
}

impl TestApp {
    /// Makes the commit of every new or changed edge wait `seconds` with its
    /// locks held (a deferred trigger on `following`): a write is then
    /// caught between its statement and its commit.
    pub async fn delay_edge_commits(&self, seconds: f64) {
        self.sql(&format!(
            "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN PERFORM pg_sleep({seconds}); RETURN NULL; END $$"
        ))
        .await;
        self.sql(
            "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT OR UPDATE ON following
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()",
        )
        .await;
    }
}
