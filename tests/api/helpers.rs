//! `spawn_app()` and friends: an isolated Kith application per test.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_graphql::{Request, Variables};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Jsonb, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use kith::app::App;
use kith::auth::Viewer;
use kith::config::Config;
use kith::events::follow::FollowEvent;
use kith::graph::{self, KithSchema};
use kith::model::{UserId, UserStatus};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

/// One isolated application: its own PostgreSQL schema and Redis key prefix.
pub struct TestApp {
    pub app: Arc<App>,
    pub schema: KithSchema,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);
static PRUNED: OnceCell<()> = OnceCell::const_new();

/// An application with the default configuration.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// An application whose configuration `tweak` may adjust.
pub async fn spawn_app_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
    // Logs (internal errors with their cause) show in the output of failing tests.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn,kith=info"))
        .with_test_writer()
        .try_init();
    let mut config = Config::from_env().expect("configuration");
    let base_url = config.database_url.clone();
    PRUNED.get_or_init(|| prune_old_schemas(&base_url)).await;

    let now = chrono::Utc::now().timestamp();
    let name = format!(
        "kt_{now}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let mut admin = AsyncPgConnection::establish(&base_url)
        .await
        .expect("PostgreSQL is up (scripts/stack up)");
    diesel::sql_query(format!("CREATE SCHEMA {name}"))
        .execute(&mut admin)
        .await
        .unwrap();

    let separator = if base_url.contains('?') { '&' } else { '?' };
    config.database_url = format!("{base_url}{separator}options=-c%20search_path%3D{name}");
    config.database_pool_size = 8;
    config.redis_pool_size = 4;
    config.redis_prefix = format!("test:{name}:");
    config.follow_topic = format!("{name}.follow");
    config.content_topic = format!("{name}.content");
    config.dead_letter_topic = format!("{name}.dead");
    config.consumer_group = format!("{name}.projector");
    config.topic_partitions = 2;
    // One broker: one replica.
    config.topic_replication_factor = 1;
    config.topic_min_insync_replicas = 1;
    config.auto_migrate = true;
    // Background checks would add statements to the round-trip counts;
    // the tests of the sampled check turn it on.
    config.counter_check_interval_secs = 0;
    // Tests run many apps in one process: none serves metrics unless asked.
    config.metrics_addr = None;
    tweak(&mut config);

    let app = App::start(config).await.expect("app starts");
    let schema = graph::schema(app.clone());
    TestApp { app, schema }
}

/// Drops test schemas left behind by runs more than an hour old.
async fn prune_old_schemas(url: &str) {
    #[derive(QueryableByName)]
    struct Name {
        #[diesel(sql_type = Text)]
        nspname: String,
    }
    let Ok(mut conn) = AsyncPgConnection::establish(url).await else {
        return;
    };
    let names: Vec<Name> =
        diesel::sql_query("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'kt\\_%'")
            .load(&mut conn)
            .await
            .unwrap_or_default();
    let cutoff = chrono::Utc::now().timestamp() - 3600;
    for Name { nspname } in names {
        let stamp = nspname
            .split('_')
            .nth(1)
            .and_then(|s| s.parse::<i64>().ok());
        if stamp.is_some_and(|t| t < cutoff) {
            let _ = diesel::sql_query(format!("DROP SCHEMA IF EXISTS {nspname} CASCADE"))
                .execute(&mut conn)
                .await;
        }
    }
}

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

impl TestApp {
    pub async fn conn(
        &self,
    ) -> bb8::PooledConnection<
        '_,
        diesel_async::pooled_connection::AsyncDieselConnectionManager<AsyncPgConnection>,
    > {
        self.app.pg.get().await.unwrap()
    }

    /// Creates an active user.
    pub async fn user(&self, handle: &str) -> UserId {
        self.user_with_status(handle, UserStatus::Active).await
    }

    /// Creates a user in the given state.
    pub async fn user_with_status(&self, handle: &str, status: UserStatus) -> UserId {
        let mut conn = self.conn().await;
        kith::store::users::create(&mut conn, handle, &format!("{handle} display"), status)
            .await
            .unwrap()
    }

    /// The same application with its Redis pool pointed at a closed port
    /// (built by hand: `App::start` refuses to start without Redis).
    pub fn without_redis(&self) -> Arc<App> {
        let closed = kith::cache::RedisPool::new(
            "redis://127.0.0.1:1/",
            4,
            std::time::Duration::from_millis(200),
            std::time::Duration::from_millis(200),
        )
        .unwrap();
        App::new(
            self.app.config.clone(),
            self.app.pg.clone(),
            closed,
            Default::default(),
        )
    }

    /// A valid bearer token for `user`.
    pub fn token(&self, user: UserId) -> String {
        self.app
            .auth
            .tokens
            .issue(user, chrono::Utc::now().timestamp(), 300)
    }

    /// Runs a GraphQL operation as `viewer`; returns the whole response as JSON.
    pub async fn execute(&self, viewer: Viewer, query: &str, variables: Value) -> Value {
        let request = Request::new(query).variables(Variables::from_json(variables));
        serde_json::to_value(graph::execute(&self.schema, &self.app, request, viewer).await)
            .unwrap()
    }

    /// `follow` or `unfollow` (`mutation` names which) of `target` by `actor`.
    pub async fn edge_mutation(&self, mutation: &str, actor: UserId, target: UserId) -> Value {
        let query = format!(
            "mutation($id: ID!) {{ {mutation}(input: {{userId: $id}}) {{
                changed
                user {{ id handle }}
                viewerRelation {{ following followedBy mutual followedAt followedByAt }}
            }} }}"
        );
        self.execute(
            Viewer::User(actor),
            &query,
            json!({ "id": kith::graph::ids::user_id(target).to_string() }),
        )
        .await
    }

    pub async fn follow(&self, actor: UserId, target: UserId) -> Value {
        self.edge_mutation("follow", actor, target).await
    }

    pub async fn unfollow(&self, actor: UserId, target: UserId) -> Value {
        self.edge_mutation("unfollow", actor, target).await
    }

    /// The outbox, oldest first.
    pub async fn outbox(&self) -> Vec<FollowEvent> {
        let rows: Vec<PayloadRow> = diesel::sql_query("SELECT payload FROM outbox ORDER BY id")
            .load(&mut self.conn().await)
            .await
            .unwrap();
        rows.into_iter()
            .map(|r| serde_json::from_value(r.payload).unwrap())
            .collect()
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
        let stats = kith::store::stats::find(&mut conn, user)
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
}

/// `extensions.code` of the first error, if any.
pub fn error_code(response: &Value) -> Option<&str> {
    response["errors"][0]["extensions"]["code"].as_str()
}

/// Panics with the response when it carries errors.
#[track_caller]
pub fn assert_ok(response: &Value) {
    assert!(
        response["errors"].is_null(),
        "unexpected errors: {response:#}"
    );
}

/// Polls `check` until it returns `Some`, failing the test after `secs` seconds.
pub async fn eventually<T, F, Fut>(what: &str, secs: u64, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

/// A running pipeline job (relay or projector) of a test.
/// Runs `jobs` on `app` as a `kith` process would ([`kith::jobs::run_until`]).
fn start_jobs(
    app: Arc<App>,
    jobs: kith::jobs::Jobs,
    hooks: Arc<kith::pipeline::projector::ProjectorHooks>,
) -> Job {
    let (trigger, shutdown) = kith::shutdown::Shutdown::new();
    let handle = tokio::spawn(kith::jobs::run_until(app, jobs, hooks, shutdown));
    Job { trigger, handle }
}

pub struct Job {
    trigger: kith::shutdown::ShutdownTrigger,
    handle: tokio::task::JoinHandle<Result<(), kith::jobs::JobError>>,
}

impl Job {
    /// Asks the job to stop and waits for it.
    pub async fn stop(self) -> Result<(), kith::jobs::JobError> {
        self.trigger.trigger();
        self.handle.await.unwrap()
    }

    /// Waits for the job to end by itself (for example a simulated crash).
    pub async fn join(self, secs: u64) -> Result<(), kith::jobs::JobError> {
        tokio::time::timeout(std::time::Duration::from_secs(secs), self.handle)
            .await
            .expect("job ended")
            .unwrap()
    }
}

impl TestApp {
    /// Starts the outbox relay.
    pub fn start_relay(&self) -> Job {
        self.start_relay_for(self.app.clone())
    }

    /// Starts what `kith relay` runs on another `App` (as another process would).
    pub fn start_relay_for(&self, app: Arc<App>) -> Job {
        start_jobs(app, kith::jobs::Jobs::RELAY, Arc::default())
    }

    /// Starts a projector in the app's consumer group.
    pub fn start_projector(&self, hooks: Arc<kith::pipeline::projector::ProjectorHooks>) -> Job {
        self.start_projector_for(self.app.clone(), hooks)
    }

    /// Starts what `kith project` runs on another `App` (another consumer
    /// group, say): the projector, with its companions.
    pub fn start_projector_for(
        &self,
        app: Arc<App>,
        hooks: Arc<kith::pipeline::projector::ProjectorHooks>,
    ) -> Job {
        start_jobs(app, kith::jobs::Jobs::PROJECT, hooks)
    }

    /// Publishes a raw message, as another service would.
    pub async fn produce(&self, topic: &str, key: &str, payload: &[u8]) {
        let producer = kith::pipeline::kafka::producer(&self.app.config).unwrap();
        kith::pipeline::kafka::ensure_topics(&self.app.config)
            .await
            .unwrap();
        let record = rdkafka::producer::FutureRecord::to(topic)
            .key(key)
            .payload(payload);
        producer
            .send(record, std::time::Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }

    /// Marks a list as cached (and empty), as a reader's fill would.
    pub async fn cache_list(
        &self,
        list: kith::paging::ListKey,
        entries: &[kith::cache::lists::ListEntry],
    ) {
        use kith::cache::lists::{FillClaim, begin_fill, commit_fill};
        let mut redis = self.app.redis.get().await.unwrap();
        let claim = begin_fill(&mut *redis, &self.app.keys, list, "test", false)
            .await
            .unwrap();
        assert_eq!(claim, FillClaim::Granted);
        let ttl = std::time::Duration::from_secs(600);
        assert!(
            commit_fill(
                &mut *redis,
                &self.app.keys,
                list,
                "test",
                ttl,
                entries,
                true
            )
            .await
            .unwrap()
        );
    }

    /// The members of a cached list (newest first), `None` if not cached.
    pub async fn cached_list(&self, list: kith::paging::ListKey) -> Option<Vec<UserId>> {
        let mut redis = self.app.redis.get().await.unwrap();
        kith::cache::lists::cached_members(&mut *redis, &self.app.keys, list)
            .await
            .unwrap()
            .map(|members| members.into_iter().map(|(user, _)| user).collect())
    }

    /// The cached counter record of `user`.
    pub async fn counter_record(
        &self,
        user: UserId,
    ) -> Option<kith::cache::counters::CounterRecord> {
        let mut redis = self.app.redis.get().await.unwrap();
        kith::cache::counters::load_many(&mut *redis, &self.app.keys, &[user])
            .await
            .unwrap()
            .pop()
            .flatten()
    }

    /// `user_stats` of `user`, whole.
    pub async fn full_stats(&self, user: UserId) -> kith::store::stats::UserStats {
        let mut conn = self.conn().await;
        kith::store::stats::find(&mut conn, user)
            .await
            .unwrap()
            .unwrap()
    }

    /// `(active, version)` of the projection row `to ← from`.
    pub async fn projected(&self, from: UserId, to: UserId) -> Option<(bool, i64)> {
        let mut conn = self.conn().await;
        kith::store::follower::rows(&mut conn, &[(from, to)])
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
                self.cached_list(kith::paging::ListKey::Following(*user))
                    .await,
            );
            lists.push(
                self.cached_list(kith::paging::ListKey::Followers(*user))
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
}

/// The projection, counters, counter records and cached lists of some users.
#[derive(Debug, PartialEq, Eq)]
pub struct DerivedState {
    pub follower: Vec<(i64, i64, bool, i64)>,
    pub stats: Vec<kith::store::stats::UserStats>,
    pub records: Vec<Option<kith::cache::counters::CounterRecord>>,
    pub lists: Vec<Option<Vec<UserId>>>,
}

/// A real `kith` process (the binary this package builds) on a test's
/// schema, Redis prefix, topics and consumer group. Killed with SIGKILL when
/// dropped; its log goes to `target/test-logs/`.
pub struct KithProcess {
    child: std::process::Child,
    pub log: std::path::PathBuf,
}

impl KithProcess {
    /// Starts `kith <command>` (`run`, `project`, `relay`, `serve`) with the
    /// test app's configuration plus `extra` variables.
    pub fn start(t: &TestApp, command: &str, extra: &[(&str, String)]) -> Self {
        let c = &t.app.config;
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("target dir")
            .join("test-logs");
        std::fs::create_dir_all(&dir).unwrap();
        static STARTS: AtomicU32 = AtomicU32::new(0);
        let log = dir.join(format!(
            "{}-{command}-{}.log",
            c.consumer_group,
            STARTS.fetch_add(1, Ordering::Relaxed)
        ));
        let out = std::fs::File::create(&log).unwrap();
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kith"));
        cmd.arg(command)
            .env("DATABASE_URL", &c.database_url)
            .env("DATABASE_POOL_SIZE", "4")
            .env("REDIS_URL", &c.redis_url)
            .env("REDIS_POOL_SIZE", "4")
            .env("KITH_REDIS_PREFIX", &c.redis_prefix)
            .env("KAFKA_BROKERS", &c.kafka_brokers)
            .env("KITH_FOLLOW_TOPIC", &c.follow_topic)
            .env("KITH_CONTENT_TOPIC", &c.content_topic)
            .env("KITH_TOPIC_REPLICATION_FACTOR", "1")
            .env("KITH_TOPIC_MIN_INSYNC_REPLICAS", "1")
            .env("KITH_DEAD_LETTER_TOPIC", &c.dead_letter_topic)
            .env("KITH_TOPIC_PARTITIONS", c.topic_partitions.to_string())
            .env("KITH_CONSUMER_GROUP", &c.consumer_group)
            .env("KITH_PROJECTOR_LEASE_MS", c.projector_lease_ms.to_string())
            .env("KITH_RELAY_POLL_MS", c.relay_poll_ms.to_string())
            .env("KITH_HTTP_ADDR", "127.0.0.1:0")
            .env("KITH_METRICS_ADDR", "off")
            .env("RUST_LOG", "info")
            .stdin(std::process::Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        for (name, value) in extra {
            cmd.env(name, value);
        }
        let child = cmd.spawn().expect("kith binary starts");
        Self { child, log }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill -9`: no clean-up of any kind.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for KithProcess {
    fn drop(&mut self) {
        self.kill();
    }
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
    kith::store::outbox::backlog(&mut *t.conn().await)
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

impl TestApp {
    /// Waits until the list-cache fills this process started are done.
    pub async fn fills_finished(&self) {
        eventually("the fills finish", 10, || async {
            self.app
                .read
                .fills_in_flight
                .lock()
                .unwrap()
                .is_empty()
                .then_some(())
        })
        .await;
    }

    /// Waits until the in-process user cache serves (its listening session is up).
    pub async fn users_cached(&self) {
        eventually("the user cache listens", 10, || async {
            self.app.read.users.is_serving().then_some(())
        })
        .await;
    }

    /// Waits until a change of `user`'s row made outside this process has
    /// reached its user cache (PostgreSQL's notice takes milliseconds).
    pub async fn user_change_seen(&self, user: UserId) {
        let fresh = {
            let mut conn = self.conn().await;
            kith::store::users::find(&mut conn, user).await.unwrap()
        };
        eventually("the user cache drops the old row", 5, || async {
            let cached = self.app.read.users.get(user);
            (cached.is_none() || cached == fresh).then_some(())
        })
        .await;
    }

    /// Runs a statement on the test's schema (for injecting faults).
    pub async fn sql(&self, statement: &str) {
        diesel::sql_query(statement)
            .execute(&mut *self.conn().await)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }

    /// `kith verify` over everything; `settle` zero reports at once.
    pub async fn verify(&self, settle_ms: u64) -> kith::consistency::verify::Report {
        let options = kith::consistency::verify::Options {
            settle: std::time::Duration::from_millis(settle_ms),
            batch: 7,
            ..Default::default()
        };
        kith::consistency::verify::verify(&self.app, &options)
            .await
            .unwrap()
    }

    /// Deletes every Redis key of this test, as a FLUSHALL would (other
    /// tests share the server, so only this prefix goes).
    pub async fn flush_redis(&self) {
        let mut redis = self.app.redis.get().await.unwrap();
        let pattern = format!("{}*", self.app.config.redis_prefix);
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(&pattern)
            .query_async(&mut *redis)
            .await
            .unwrap();
        if !keys.is_empty() {
            let _: () = redis::cmd("DEL")
                .arg(&keys)
                .query_async(&mut *redis)
                .await
                .unwrap();
        }
    }
}

/// Asserts a report has no disagreement.
#[track_caller]
pub fn assert_consistent(report: &kith::consistency::verify::Report) {
    assert_eq!(report.total(), 0, "verify found disagreements:\n{report}");
}

/// Gives `target` `n` followers, `per_ms` of them in each millisecond, directly
/// in the truth and the projection (as a settled pipeline would leave them).
/// Returns them in list order: newest first, ties by id descending.
pub async fn seed_followers(
    t: &TestApp,
    target: UserId,
    prefix: &str,
    n: i64,
    per_ms: i64,
) -> Vec<kith::paging::Position> {
    use diesel_async::AsyncConnection as _;
    use diesel_async::RunQueryDsl as _;
    // Its own session: a bulk load is not bound by the API's statement_timeout.
    let mut conn = AsyncPgConnection::establish(&t.app.config.database_url)
        .await
        .unwrap();
    kith::store::users::seed(&mut conn, prefix, n)
        .await
        .unwrap();
    let base_ms: i64 = 1_700_000_000_000;
    for table in ["following", "follower"] {
        diesel::sql_query(format!(
            "INSERT INTO {table} (from_user_id, to_user_id, active, followed_at, version)
             SELECT id, $1, TRUE,
                    'epoch'::timestamptz
                      + ($2 + (row_number() OVER (ORDER BY id) - 1) / $3) * interval '1 millisecond', 1
               FROM users WHERE handle LIKE $4 || '%'"
        ))
        .bind::<BigInt, _>(target.get())
        .bind::<BigInt, _>(base_ms)
        .bind::<BigInt, _>(per_ms)
        .bind::<Text, _>(prefix)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    diesel::sql_query(
        "UPDATE user_stats SET followers = followers + $2, version = version + 1 WHERE user_id = $1",
    )
    .bind::<BigInt, _>(target.get())
    .bind::<BigInt, _>(n)
    .execute(&mut conn)
    .await
    .unwrap();
    diesel::sql_query(
        "UPDATE user_stats SET followings = followings + 1, version = kith_next_version(version)
          WHERE user_id IN (SELECT id FROM users WHERE handle LIKE $1 || '%')",
    )
    .bind::<Text, _>(prefix)
    .execute(&mut conn)
    .await
    .unwrap();
    let rows = kith::store::lists::newest(
        &mut conn,
        kith::paging::ListKey::Followers(target),
        n as usize + 1,
    )
    .await
    .unwrap();
    assert_eq!(rows.len() as i64, n);
    rows.iter()
        .map(|r| kith::paging::Position {
            followed_at_ms: r.followed_at.timestamp_millis(),
            user: UserId::new(r.member).unwrap(),
        })
        .collect()
}

/// Runs `tests/http-audit/<script>` under Node with `args` (the pinned
/// JavaScript clients `scripts/stack tools` installs, `package` among them);
/// panics with its output unless it exits 0. Returns its standard output.
pub async fn js_client(script: &str, package: &str, args: Vec<String>) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/http-audit");
    assert!(
        dir.join("node_modules").join(package).exists(),
        "{package} is not installed (scripts/stack tools)"
    );
    let script = dir.join(script);
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("node")
            .arg(script)
            .args(&args)
            .output()
            .expect("node runs (scripts/stack tools installs it)")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}
