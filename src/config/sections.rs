//! The sections of [`super::Config`], one per section of the configuration
//! reference (`docs/configuration.md`), each read by the parts it names.

use std::net::SocketAddr;

use super::UserLookup;

/// PostgreSQL: the request pool, the sessions of their own, the replica, the group commit.
/// `Debug` hides its secrets (`super::shown`).
#[derive(Clone)]
pub struct DatabaseSettings {
    /// PostgreSQL connection URL of the request pool (may be a pooler).
    pub url: String,
    /// PostgreSQL itself, for sessions of their own (see [`super::Config::session_url`]).
    pub session_url: Option<String>,
    /// Prepared statements on the request pool (false behind a transaction pooler).
    pub pg_statement_cache: bool,
    /// A read replica for what the caches miss ([`crate::read::replica`]).
    pub replica_url: Option<String>,
    /// How far behind the primary the replica may be and still answer.
    pub replica_max_lag_ms: u64,
    /// Maximum PostgreSQL connections in the pool.
    pub pool_size: u32,
    /// PostgreSQL `statement_timeout` of pooled connections, ms (0 = none).
    pub statement_timeout_ms: u64,
    /// Most edge changes in one group-commit transaction.
    pub write_batch: usize,
    /// Group-commit batches in flight at once.
    pub write_batches_in_flight: usize,
    /// Apply pending migrations when the service starts.
    pub auto_migrate: bool,
}

/// Redis.
/// `Debug` hides its secrets (`super::shown`).
#[derive(Clone)]
pub struct RedisSettings {
    /// Redis connection URL.
    pub url: String,
    /// Maximum Redis connections in the pool.
    pub pool_size: u32,
    /// Prefix prepended to every Redis key.
    pub prefix: String,
    /// Deadline of connecting to Redis and of each Redis answer, ms.
    pub timeout_ms: u64,
}

/// Kafka and the pipeline: the broker, the topics, the relay and the projector.
/// `Debug` hides its secrets (`super::shown`).
#[derive(Clone)]
pub struct PipelineSettings {
    /// librdkafka properties passed through to every Kafka client (TLS,
    /// SASL, timeouts…): from `KITH_KAFKA_PROPERTIES_FILE`, then the
    /// `KITH_KAFKA_<PROPERTY>` variables.
    pub kafka_properties: Vec<(String, String)>,
    /// Kafka bootstrap servers, comma separated.
    pub kafka_brokers: String,
    /// Topic of follow events.
    pub follow_topic: String,
    /// Topic of content events (posts, likes, favourites) from other services.
    pub content_topic: String,
    /// Topic of events the projector could not decode or apply.
    pub dead_letter_topic: String,
    /// Partition count of topics created at start-up.
    pub topic_partitions: i32,
    /// Replication factor of topics created at start-up.
    pub topic_replication_factor: i32,
    /// `min.insync.replicas` of topics created at start-up.
    pub topic_min_insync_replicas: i32,
    /// Consumer group of the projector.
    pub consumer_group: String,
    /// Outbox rows published per relay round.
    pub relay_batch: i64,
    /// Relay fallback poll interval in milliseconds.
    pub relay_poll_ms: u64,
    /// Events applied per projector transaction.
    pub projector_batch: usize,
    /// Longest wait of one consumer fetch (`fetch.wait.max.ms`).
    pub fetch_wait_ms: u32,
    /// How often an idle (parked) projector fetches anyway, ms.
    pub projector_idle_poll_ms: u64,
    /// How long a projector's partition lease lasts without a heartbeat, ms.
    pub projector_lease_ms: u64,
    /// How long content event ids are kept in the ledger, hours.
    pub content_ledger_retention_hours: u64,
}

/// Consistency: scheduled reconciliation and the sampled counter check.
#[derive(Clone, Debug)]
pub struct ConsistencySettings {
    /// Scheduled reconciliation interval, seconds (0 = never).
    pub reconcile_interval_secs: u64,
    /// Sampled counter check interval per user, seconds (0 = off).
    pub counter_check_interval_secs: u64,
}

/// Caches and reads.
#[derive(Clone, Debug)]
pub struct CacheSettings {
    /// Newest edges a list cache holds after a fill.
    pub list_cache_size: usize,
    /// Newest edges a following list cache holds after a fill (at least
    /// `list_cache_size`): whole lists up to it, so that relations are
    /// answered from the cache.
    pub following_cache_size: usize,
    /// Life of a list cache, seconds.
    pub list_cache_ttl_secs: u64,
    /// List size from which first pages are also held in process.
    pub hot_threshold: u64,
    /// Life of an in-process hot page, ms.
    pub hot_page_ttl_ms: u64,
    /// How long a DataLoader collects keys before its batched fetch, ms.
    pub loader_delay_ms: u64,
    /// Users held in process (0 = none).
    pub user_cache_capacity: u64,
    /// Longest life of a user held in process, seconds (0 = none held).
    pub user_cache_ttl_secs: u64,
    /// Members of notify followers lists held in process, all together
    /// (0 = none held).
    pub notify_cache_members: u64,
    /// Most edges of the smaller list an intersection walks.
    pub intersection_walk_max: usize,
    /// Life of a computed intersection held in process, seconds.
    pub intersection_cache_ttl_secs: u64,
    /// List-cache fills started by reads that may run at once.
    pub max_concurrent_fills: usize,
    /// Lists reads may fill per second, per process.
    pub max_fills_per_sec: u32,
    /// Redis memory past which reads fill no list (0: 3/4 of `maxmemory`).
    pub fill_memory_limit: u64,
}

/// Requests and their limits.
#[derive(Clone, Debug)]
pub struct LimitSettings {
    /// Deepest GraphQL selection accepted.
    pub max_query_depth: usize,
    /// Most complex GraphQL query accepted.
    pub max_query_complexity: usize,
    /// Deepest `offset` a list accepts.
    pub max_offset: i32,
    /// Most aliased fields in one GraphQL document.
    pub max_aliases: usize,
    /// Most root fields in one operation.
    pub max_root_fields: usize,
    /// Largest request body, bytes.
    pub max_body_bytes: usize,
    /// Longest query text, bytes (checked before parsing).
    pub max_query_bytes: usize,
    /// How long one write may wait for the client to read, seconds.
    pub write_timeout_secs: u64,
    /// How long a shared cache may keep an anonymous GET answer, seconds.
    pub public_cache_secs: u32,
    /// Whether introspection is answered.
    pub introspection: bool,
    /// Deadline of one GraphQL request, ms.
    pub request_timeout_ms: u64,
    /// Bytes of query text learnt through Automatic Persisted Queries, held at most.
    pub apq_cache_bytes: u64,
    /// The persisted-query manifest, as read from its file (the persisted
    /// queries parse and check it).
    pub persisted_manifest: Option<std::sync::Arc<str>>,
    /// Run only the manifest's operations.
    pub persisted_only: bool,
}

/// Live updates (WebSocket).
#[derive(Clone, Debug)]
pub struct LiveSettings {
    /// WebSocket connections one user may hold open on one replica.
    pub max_connections_per_user: usize,
    /// Subscriptions one WebSocket connection may run at once.
    pub max_subscriptions_per_connection: usize,
    /// Shortest interval between two counter updates of one subscription, ms.
    pub counters_interval_ms: u64,
    /// How long a WebSocket may take to authenticate, ms.
    pub ws_init_timeout_ms: u64,
    /// Queries and mutations one WebSocket connection may run at once.
    pub max_operations_per_connection: usize,
}

/// HTTP.
#[derive(Clone, Debug)]
pub struct HttpSettings {
    /// Origins allowed to call the API from a browser (`*` = any).
    pub cors_origins: Vec<String>,
    /// Address of the HTTP listener.
    pub addr: SocketAddr,
    /// Address of the metrics listener (`None`: metrics are not served).
    pub metrics_addr: Option<SocketAddr>,
    /// Whether answers carry their time in Kith (`Server-Timing`).
    pub server_timing: bool,
}

/// Authentication.
/// `Debug` hides its secrets (`super::shown`).
#[derive(Clone)]
pub struct AuthSettings {
    /// HS256 secret for bearer tokens.
    pub jwt_secret: String,
    /// The key that signs paging cursors (`KITH_CURSOR_KEY`, else the JWT secret).
    pub cursor_key: String,
    /// Whether HS256 tokens are accepted: unless an identity provider is
    /// configured and `KITH_JWT_SECRET` is not.
    pub jwt_hs256: bool,
    /// The identity provider's JWKS URL.
    pub jwt_jwks_url: Option<String>,
    /// The shortest time between two JWKS reads, ms.
    pub jwt_jwks_min_refresh_ms: u64,
    /// How long a JWKS read is used before it is read again, seconds.
    pub jwt_jwks_ttl_secs: u64,
    /// The identity provider's public key (PEM), read from its file (the
    /// identity provider checks it is one).
    pub jwt_public_key_pem: Option<String>,
    /// The `iss` provider tokens must carry.
    pub jwt_issuer: Option<String>,
    /// The `aud` provider tokens must carry.
    pub jwt_audience: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`, seconds.
    pub jwt_leeway_secs: u64,
    /// The claim of a provider token that names the user.
    pub jwt_user_claim: String,
    /// How that claim maps to a user.
    pub jwt_user_lookup: UserLookup,
    /// The subjects whose tokens may carry Kith scopes.
    pub service_clients: Vec<String>,
}

/// Logs.
#[derive(Clone, Debug)]
pub struct LogSettings {
    /// Emit logs as JSON lines instead of text.
    pub json: bool,
}

/// Rate limits and caps of writes.
#[derive(Clone, Debug)]
pub struct WriteSettings {
    /// Token bucket capacity for edge-writing mutations.
    pub rate_limit_capacity: u32,
    /// Token bucket refill rate, tokens per second.
    pub rate_limit_per_sec: f64,
    /// Followings past which a follow needs enough followers (0: no cap).
    pub max_followings: u32,
    /// Past `max_followings`, followings may be at most this many times the followers.
    pub followings_ratio: f64,
    /// Most accounts one account may block (0: no limit).
    pub max_blocks: u32,
    /// Most accounts one account may list among its close friends (0: no limit).
    pub max_close_friends: u32,
}

/// Import and export.
#[derive(Clone, Debug)]
pub struct PortabilitySettings {
    /// The domain of account addresses in exports and imports.
    pub account_domain: String,
    /// Most rows in one imported file.
    pub import_max_rows: u32,
    /// Rows an account's import applies per second.
    pub import_rows_per_sec: u32,
    /// Follows an account's imports may make in one day.
    pub import_follows_per_day: u32,
    /// How long a finished import is kept, seconds.
    pub import_retention_secs: u64,
    /// Followers an account's move brings along per second.
    pub move_followers_per_sec: u32,
    /// How long after a move the same account may move again, seconds.
    pub move_cooldown_secs: u64,
}

/// Suggestions.
#[derive(Clone, Debug)]
pub struct SuggestionSettings {
    /// Followees read per computation of suggestions.
    pub sample: u32,
    /// Follows read from each sampled followee.
    pub per_followee: u32,
    /// How long computed suggestions are kept.
    pub ttl_secs: u64,
    /// How long a dismissed suggestion stays out.
    pub dismiss_secs: u64,
}
