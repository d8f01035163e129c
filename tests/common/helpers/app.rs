//! The isolated application each test gets (its own PostgreSQL schema and
//! Redis key prefix), and how a test acts on it and checks answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_graphql::{Request, Variables};
use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use kith::app::App;
use kith::config::Config;
use kith::model::{UserId, UserStatus};
use kith::testing::auth::Viewer;
use kith::testing::graph::run::QueryText;
use kith::testing::graph::{self, KithSchema};
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
    let config = Config::from_env().expect("configuration");
    spawn_app_from(config, tweak).await
}

/// An application on the PostgreSQL `database_url` names (a failover
/// formation, say) instead of `DATABASE_URL`'s.
pub async fn spawn_app_on(database_url: &str, tweak: impl FnOnce(&mut Config)) -> TestApp {
    let mut config = Config::from_env().expect("configuration");
    config.database.url = database_url.to_owned();
    spawn_app_from(config, tweak).await
}

async fn spawn_app_from(mut config: Config, tweak: impl FnOnce(&mut Config)) -> TestApp {
    // Logs (internal errors with their cause) show in the output of failing tests.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn,kith=info"))
        .with_test_writer()
        .try_init();
    let base_url = config.database.url.clone();
    PRUNED.get_or_init(|| prune_old_schemas(&base_url)).await;

    let now = chrono::Utc::now().timestamp();
    let name = format!(
        "kt_{now}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    // Through a transaction pooler (`scripts/stack pooler up`): a database
    // of its own.
    let pooler = std::env::var("KITH_TEST_POOLER_URL").ok();
    kith::testing::isolate_postgres(&mut config, &name, pooler.as_deref())
        .await
        .expect("PostgreSQL is up (scripts/stack up; pooler up grants CREATE DATABASE)");
    config.database.pool_size = 8;
    config.redis.pool_size = 4;
    config.redis.prefix = format!("test:{name}:");
    config.pipeline.follow_topic = format!("{name}.follow");
    config.pipeline.content_topic = format!("{name}.content");
    config.pipeline.dead_letter_topic = format!("{name}.dead");
    config.pipeline.consumer_group = format!("{name}.projector");
    config.pipeline.topic_partitions = 2;
    // One broker: one replica.
    config.pipeline.topic_replication_factor = 1;
    config.pipeline.topic_min_insync_replicas = 1;
    config.database.auto_migrate = true;
    // Background checks would add statements to the round-trip counts;
    // the tests of the sampled check turn it on.
    config.consistency.counter_check_interval_secs = 0;
    // Tests run many apps in one process: none serves metrics unless asked.
    config.http.metrics_addr = None;
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
    // Schemas, and the databases of runs through a pooler.
    let names: Vec<Name> = diesel::sql_query(
        "SELECT 'SCHEMA ' || nspname || ' CASCADE' AS nspname FROM pg_namespace WHERE nspname LIKE 'kt\\_%'
         UNION ALL
         SELECT 'DATABASE ' || datname FROM pg_database WHERE datname LIKE 'kt\\_%'",
    )
    .load(&mut conn)
    .await
    .unwrap_or_default();
    let cutoff = chrono::Utc::now().timestamp() - 3600;
    for Name { nspname: what } in names {
        let stamp = what.split('_').nth(1).and_then(|s| s.parse::<i64>().ok());
        if stamp.is_some_and(|t| t < cutoff) {
            let (kind, rest) = what.split_once(' ').unwrap_or_default();
            if kind == "DATABASE" {
                // Not WITH (FORCE), which a role that is not a superuser
                // cannot use while autovacuum is in the database: the
                // role's own sessions end first, and a plain drop waits
                // for autovacuum to leave.
                let _ = diesel::sql_query(
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
                      WHERE datname = $1 AND usename = current_user",
                )
                .bind::<Text, _>(rest)
                .execute(&mut conn)
                .await;
            }
            let _ = diesel::sql_query(format!("DROP {kind} IF EXISTS {rest}"))
                .execute(&mut conn)
                .await;
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

impl TestApp {
    /// A connection of the app's pool, for a test's own statements. The
    /// app may give up on a connection sooner than a test's setup should
    /// (its wait is half its request deadline, 150 ms for some tests, and
    /// through a pooler a first session of a new database can take longer
    /// on a busy machine): the test waits up to 10 s.
    pub async fn conn(
        &self,
    ) -> bb8::PooledConnection<
        '_,
        diesel_async::pooled_connection::AsyncDieselConnectionManager<AsyncPgConnection>,
    > {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match self.app.pg.get().await {
                Ok(conn) => return conn,
                Err(bb8::RunError::TimedOut) if tokio::time::Instant::now() < deadline => {}
                Err(e) => panic!("no connection for the test: {e:?}"),
            }
        }
    }

    /// Creates an active user.
    pub async fn user(&self, handle: &str) -> UserId {
        self.user_with_status(handle, UserStatus::Active).await
    }

    /// Creates a user in the given state.
    pub async fn user_with_status(&self, handle: &str, status: UserStatus) -> UserId {
        let mut conn = self.conn().await;
        kith::testing::store::users::create(&mut conn, handle, &format!("{handle} display"), status)
            .await
            .unwrap()
    }

    /// The same application with its Redis pool pointed at a closed port
    /// (built by hand: `App::start` refuses to start without Redis).
    pub fn without_redis(&self) -> Arc<App> {
        let closed = kith::testing::cache::RedisPool::new(
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
        serde_json::to_value(
            graph::run::run(
                &self.schema,
                &self.app,
                request,
                viewer,
                QueryText::Unresolved,
            )
            .await
            .response,
        )
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
            json!({ "id": kith::testing::graph::ids::user_id(target).to_string() }),
        )
        .await
    }

    pub async fn follow(&self, actor: UserId, target: UserId) -> Value {
        self.edge_mutation("follow", actor, target).await
    }

    pub async fn unfollow(&self, actor: UserId, target: UserId) -> Value {
        self.edge_mutation("unfollow", actor, target).await
    }
}
