//! Configuration, read once from the environment at start-up.
//!
//! Every setting is declared once, in [`settings::SECTIONS`] — its
//! variable, default, section and meaning. [`Config::from_lookup`] takes
//! its defaults from there, and `docs/configuration.md` is generated from
//! there ([`reference()`]); tests check that neither drifts. Every default
//! works against the local stack (`scripts/stack up`). This module reads
//! only the environment and the files it names: each part of Kith checks
//! its own settings' contents when the service starts.

mod catalog;
mod checks;
mod kafka;
mod reference;
pub mod settings;
mod settings_accounts;

pub use kafka::kafka_properties;
pub use reference::reference;

use std::env;
use std::net::SocketAddr;
use std::str::FromStr;

/// The longest `KITH_REQUEST_TIMEOUT_MS` may be: a write's cache update is
/// late by at most its request's deadline, and removals' tombstones are kept
/// for twice this long.
pub const MAX_REQUEST_TIMEOUT_MS: u64 = 60_000;

/// The largest `KITH_FOLLOWING_CACHE_SIZE`: a fill reads and writes a list
/// in one go.
pub const MAX_FOLLOWING_CACHE_SIZE: usize = 100_000;

/// The largest `KITH_INTERSECTION_WALK_MAX`: the complexity of an
/// intersection is charged for a walk this long.
pub const MAX_INTERSECTION_WALK: usize = 20_000;

/// The secret used when `KITH_JWT_SECRET` is unset; good for the local stack only.
pub const DEV_JWT_SECRET: &str = "kith-local-development-secret-do-not-deploy";

/// How an identity provider's user claim maps to a Kith user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserLookup {
    /// The claim is the user's numeric id.
    Id,
    /// The claim is the user's handle.
    Handle,
}

impl FromStr for UserLookup {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "id" => Ok(Self::Id),
            "handle" => Ok(Self::Handle),
            other => Err(format!("{other:?} is neither `id` nor `handle`")),
        }
    }
}

/// A configuration value that could not be parsed.
#[derive(Debug, thiserror::Error)]
#[error("environment variable {name}={value:?} is invalid: {reason}")]
pub struct ConfigError {
    name: &'static str,
    value: String,
    reason: String,
}

/// Everything a Kith process needs to know about its surroundings.
#[derive(Clone, Debug)]
pub struct Config {
    /// PostgreSQL connection URL of the request pool (may be a pooler).
    pub database_url: String,
    /// PostgreSQL itself, for sessions of their own (see [`Self::session_url`]).
    pub database_session_url: Option<String>,
    /// Prepared statements on the request pool (false behind a transaction pooler).
    pub pg_statement_cache: bool,
    /// A read replica for what the caches miss ([`crate::read::replica`]).
    pub database_replica_url: Option<String>,
    /// How far behind the primary the replica may be and still answer.
    pub replica_max_lag_ms: u64,
    /// Maximum PostgreSQL connections in the pool.
    pub database_pool_size: u32,
    /// Redis connection URL.
    pub redis_url: String,
    /// Maximum Redis connections in the pool.
    pub redis_pool_size: u32,
    /// Prefix prepended to every Redis key.
    pub redis_prefix: String,
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
    /// Scheduled reconciliation interval, seconds (0 = never).
    pub reconcile_interval_secs: u64,
    /// Sampled counter check interval per user, seconds (0 = off).
    pub counter_check_interval_secs: u64,
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
    /// Most edges of the smaller list an intersection walks.
    pub intersection_walk_max: usize,
    /// Life of a computed intersection held in process, seconds.
    pub intersection_cache_ttl_secs: u64,
    /// WebSocket connections one user may hold open on one replica.
    pub max_live_connections_per_user: usize,
    /// Subscriptions one WebSocket connection may run at once.
    pub max_subscriptions_per_connection: usize,
    /// Shortest interval between two counter updates of one subscription, ms.
    pub live_counters_interval_ms: u64,
    /// How long a WebSocket may take to authenticate, ms.
    pub ws_init_timeout_ms: u64,
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
    /// Queries and mutations one WebSocket connection may run at once.
    pub max_operations_per_connection: usize,
    /// Deadline of one GraphQL request, ms.
    pub request_timeout_ms: u64,
    /// PostgreSQL `statement_timeout` of pooled connections, ms (0 = none).
    pub statement_timeout_ms: u64,
    /// Deadline of connecting to Redis and of each Redis answer, ms.
    pub redis_timeout_ms: u64,
    /// List-cache fills started by reads that may run at once.
    pub max_concurrent_fills: usize,
    /// Lists reads may fill per second, per process.
    pub max_fills_per_sec: u32,
    /// Redis memory past which reads fill no list (0: 3/4 of `maxmemory`).
    pub fill_memory_limit: u64,
    /// Origins allowed to call the API from a browser (`*` = any).
    pub cors_origins: Vec<String>,
    /// Address of the HTTP listener.
    pub http_addr: SocketAddr,
    /// Address of the metrics listener (`None`: metrics are not served).
    pub metrics_addr: Option<SocketAddr>,
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
    /// Token bucket capacity for edge-writing mutations.
    pub rate_limit_capacity: u32,
    /// Token bucket refill rate, tokens per second.
    pub rate_limit_per_sec: f64,
    /// Most edge changes in one group-commit transaction.
    pub write_batch: usize,
    /// Group-commit batches in flight at once.
    pub write_batches_in_flight: usize,
    /// Followings past which a follow needs enough followers (0: no cap).
    pub max_followings: u32,
    /// Past `max_followings`, followings may be at most this many times the followers.
    pub followings_ratio: f64,
    /// Most accounts one account may block (0: no limit).
    pub max_blocks: u32,
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
    /// Followees read per computation of suggestions.
    pub suggestions_sample: u32,
    /// Follows read from each sampled followee.
    pub suggestions_per_followee: u32,
    /// How long computed suggestions are kept.
    pub suggestions_ttl_secs: u64,
    /// How long a dismissed suggestion stays out.
    pub suggestion_dismiss_secs: u64,
    /// Apply pending migrations when the service starts.
    pub auto_migrate: bool,
    /// Emit logs as JSON lines instead of text.
    pub log_json: bool,
    /// Bytes of query text learnt through Automatic Persisted Queries, held at most.
    pub apq_cache_bytes: u64,
    /// The persisted-query manifest, as read from its file (the persisted
    /// queries parse and check it).
    pub persisted_manifest: Option<std::sync::Arc<str>>,
    /// Run only the manifest's operations.
    pub persisted_only: bool,
}

impl Config {
    /// Where sessions of their own connect — migrations, the relay's
    /// leadership, the projector's lease keeper, the user cache's notices,
    /// reconcile's lock, the operator commands: `DATABASE_SESSION_URL`, or
    /// `DATABASE_URL` when it is unset.
    pub fn session_url(&self) -> &str {
        self.database_session_url
            .as_deref()
            .unwrap_or(&self.database_url)
    }

    /// How long a request waits for a pooled connection (PostgreSQL's or
    /// Redis's), counted from when it asked: half the request deadline, so
    /// that a store being away answers `UNAVAILABLE` rather than `TIMEOUT`.
    pub fn connection_wait(&self) -> std::time::Duration {
        std::time::Duration::from_millis((self.request_timeout_ms / 2).max(100))
    }

    /// Reads the configuration from the process environment, including
    /// every `KITH_KAFKA_<PROPERTY>` variable.
    pub fn from_env() -> Result<Self, ConfigError> {
        let mut config = Self::from_lookup(|name| env::var(name).ok())?;
        config
            .kafka_properties
            .extend(kafka_properties(env::vars()));
        Ok(config)
    }

    /// Reads the configuration through `lookup`, so tests can supply their own values.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let text = |name: &'static str| -> String {
            lookup(name)
                .or_else(|| settings::default_of(name).map(str::to_owned))
                .unwrap_or_default()
        };
        let config = Self {
            database_url: text("DATABASE_URL"),
            database_session_url: lookup("DATABASE_SESSION_URL").filter(|u| !u.is_empty()),
            database_replica_url: lookup("DATABASE_REPLICA_URL").filter(|u| !u.is_empty()),
            replica_max_lag_ms: parse(&lookup, "KITH_REPLICA_MAX_LAG_MS")?,
            pg_statement_cache: parse(&lookup, "KITH_PG_STATEMENT_CACHE")?,
            database_pool_size: parse(&lookup, "DATABASE_POOL_SIZE")?,
            redis_url: text("REDIS_URL"),
            redis_pool_size: parse(&lookup, "REDIS_POOL_SIZE")?,
            redis_prefix: text("KITH_REDIS_PREFIX"),
            kafka_brokers: text("KAFKA_BROKERS"),
            kafka_properties: match lookup("KITH_KAFKA_PROPERTIES_FILE") {
                None => Vec::new(),
                Some(path) => {
                    kafka::properties_file(&std::fs::read_to_string(&path).map_err(|e| {
                        invalid("KITH_KAFKA_PROPERTIES_FILE", &path, &e.to_string())
                    })?)
                }
            },
            follow_topic: text("KITH_FOLLOW_TOPIC"),
            content_topic: text("KITH_CONTENT_TOPIC"),
            dead_letter_topic: text("KITH_DEAD_LETTER_TOPIC"),
            topic_partitions: parse(&lookup, "KITH_TOPIC_PARTITIONS")?,
            topic_replication_factor: parse(&lookup, "KITH_TOPIC_REPLICATION_FACTOR")?,
            topic_min_insync_replicas: parse(&lookup, "KITH_TOPIC_MIN_INSYNC_REPLICAS")?,
            consumer_group: text("KITH_CONSUMER_GROUP"),
            relay_batch: parse(&lookup, "KITH_RELAY_BATCH")?,
            relay_poll_ms: parse(&lookup, "KITH_RELAY_POLL_MS")?,
            projector_batch: parse(&lookup, "KITH_PROJECTOR_BATCH")?,
            fetch_wait_ms: parse(&lookup, "KITH_FETCH_WAIT_MS")?,
            projector_idle_poll_ms: parse(&lookup, "KITH_PROJECTOR_IDLE_POLL_MS")?,
            projector_lease_ms: parse(&lookup, "KITH_PROJECTOR_LEASE_MS")?,
            content_ledger_retention_hours: parse(&lookup, "KITH_CONTENT_LEDGER_RETENTION_HOURS")?,
            reconcile_interval_secs: parse(&lookup, "KITH_RECONCILE_INTERVAL_SECS")?,
            counter_check_interval_secs: parse(&lookup, "KITH_COUNTER_CHECK_INTERVAL_SECS")?,
            list_cache_size: parse(&lookup, "KITH_LIST_CACHE_SIZE")?,
            following_cache_size: parse(&lookup, "KITH_FOLLOWING_CACHE_SIZE")?,
            list_cache_ttl_secs: parse(&lookup, "KITH_LIST_CACHE_TTL_SECS")?,
            hot_threshold: parse(&lookup, "KITH_HOT_FOLLOWERS")?,
            hot_page_ttl_ms: parse(&lookup, "KITH_HOT_PAGE_TTL_MS")?,
            loader_delay_ms: parse(&lookup, "KITH_LOADER_DELAY_MS")?,
            user_cache_capacity: parse(&lookup, "KITH_USER_CACHE_CAPACITY")?,
            user_cache_ttl_secs: parse(&lookup, "KITH_USER_CACHE_TTL_SECS")?,
            intersection_walk_max: parse(&lookup, "KITH_INTERSECTION_WALK_MAX")?,
            intersection_cache_ttl_secs: parse(&lookup, "KITH_INTERSECTION_CACHE_TTL_SECS")?,
            max_live_connections_per_user: parse(&lookup, "KITH_MAX_LIVE_CONNECTIONS_PER_USER")?,
            max_subscriptions_per_connection: parse(
                &lookup,
                "KITH_MAX_SUBSCRIPTIONS_PER_CONNECTION",
            )?,
            live_counters_interval_ms: parse(&lookup, "KITH_LIVE_COUNTERS_INTERVAL_MS")?,
            ws_init_timeout_ms: parse(&lookup, "KITH_WS_INIT_TIMEOUT_MS")?,
            max_query_depth: parse(&lookup, "KITH_MAX_QUERY_DEPTH")?,
            max_query_complexity: parse(&lookup, "KITH_MAX_QUERY_COMPLEXITY")?,
            max_offset: parse(&lookup, "KITH_MAX_OFFSET")?,
            max_aliases: parse(&lookup, "KITH_MAX_ALIASES")?,
            max_root_fields: parse(&lookup, "KITH_MAX_ROOT_FIELDS")?,
            max_body_bytes: parse(&lookup, "KITH_MAX_BODY_BYTES")?,
            max_query_bytes: parse(&lookup, "KITH_MAX_QUERY_BYTES")?,
            write_timeout_secs: parse(&lookup, "KITH_WRITE_TIMEOUT_SECS")?,
            public_cache_secs: parse(&lookup, "KITH_PUBLIC_CACHE_SECS")?,
            introspection: parse(&lookup, "KITH_INTROSPECTION")?,
            max_operations_per_connection: parse(&lookup, "KITH_MAX_OPERATIONS_PER_CONNECTION")?,
            request_timeout_ms: parse(&lookup, "KITH_REQUEST_TIMEOUT_MS")?,
            statement_timeout_ms: parse(&lookup, "KITH_STATEMENT_TIMEOUT_MS")?,
            redis_timeout_ms: parse(&lookup, "KITH_REDIS_TIMEOUT_MS")?,
            max_concurrent_fills: parse(&lookup, "KITH_MAX_CONCURRENT_FILLS")?,
            max_fills_per_sec: parse(&lookup, "KITH_MAX_FILLS_PER_SEC")?,
            fill_memory_limit: parse(&lookup, "KITH_FILL_MEMORY_LIMIT")?,
            cors_origins: text("KITH_CORS_ORIGINS")
                .split(',')
                .map(|o| o.trim().trim_end_matches('/').to_owned())
                .filter(|o| !o.is_empty())
                .collect(),
            http_addr: parse(&lookup, "KITH_HTTP_ADDR")?,
            metrics_addr: match text("KITH_METRICS_ADDR").trim() {
                "" | "off" => None,
                addr => Some(addr.parse().map_err(|e: std::net::AddrParseError| {
                    invalid("KITH_METRICS_ADDR", addr, &e.to_string())
                })?),
            },
            jwt_secret: lookup("KITH_JWT_SECRET").unwrap_or_else(|| DEV_JWT_SECRET.to_owned()),
            cursor_key: lookup("KITH_CURSOR_KEY")
                .or_else(|| lookup("KITH_JWT_SECRET"))
                .unwrap_or_else(|| DEV_JWT_SECRET.to_owned()),
            jwt_hs256: lookup("KITH_JWT_SECRET").is_some()
                || (lookup("KITH_JWT_JWKS_URL").is_none()
                    && lookup("KITH_JWT_PUBLIC_KEY_FILE").is_none()),
            jwt_jwks_url: lookup("KITH_JWT_JWKS_URL").filter(|u| !u.is_empty()),
            jwt_jwks_min_refresh_ms: parse(&lookup, "KITH_JWT_JWKS_MIN_REFRESH_MS")?,
            jwt_jwks_ttl_secs: parse(&lookup, "KITH_JWT_JWKS_TTL_SECS")?,
            jwt_public_key_pem: match lookup("KITH_JWT_PUBLIC_KEY_FILE") {
                None => None,
                Some(path) => Some(
                    std::fs::read_to_string(&path)
                        .map_err(|e| invalid("KITH_JWT_PUBLIC_KEY_FILE", &path, &e.to_string()))?,
                ),
            },
            jwt_issuer: lookup("KITH_JWT_ISSUER").filter(|v| !v.is_empty()),
            jwt_audience: lookup("KITH_JWT_AUDIENCE").filter(|v| !v.is_empty()),
            jwt_leeway_secs: parse(&lookup, "KITH_JWT_LEEWAY_SECS")?,
            jwt_user_claim: text("KITH_JWT_USER_CLAIM"),
            jwt_user_lookup: parse(&lookup, "KITH_JWT_USER_LOOKUP")?,
            rate_limit_capacity: parse(&lookup, "KITH_RATE_LIMIT_CAPACITY")?,
            rate_limit_per_sec: parse(&lookup, "KITH_RATE_LIMIT_PER_SEC")?,
            write_batch: parse(&lookup, "KITH_WRITE_BATCH")?,
            write_batches_in_flight: parse(&lookup, "KITH_WRITE_BATCHES_IN_FLIGHT")?,
            max_followings: parse(&lookup, "KITH_MAX_FOLLOWINGS")?,
            followings_ratio: parse(&lookup, "KITH_FOLLOWINGS_RATIO")?,
            max_blocks: parse(&lookup, "KITH_MAX_BLOCKS")?,
            account_domain: text("KITH_ACCOUNT_DOMAIN").trim().to_owned(),
            import_max_rows: parse(&lookup, "KITH_IMPORT_MAX_ROWS")?,
            import_rows_per_sec: parse(&lookup, "KITH_IMPORT_ROWS_PER_SEC")?,
            import_follows_per_day: parse(&lookup, "KITH_IMPORT_FOLLOWS_PER_DAY")?,
            import_retention_secs: parse(&lookup, "KITH_IMPORT_RETENTION_SECS")?,
            suggestions_sample: parse(&lookup, "KITH_SUGGESTIONS_SAMPLE")?,
            suggestions_per_followee: parse(&lookup, "KITH_SUGGESTIONS_PER_FOLLOWEE")?,
            suggestions_ttl_secs: parse(&lookup, "KITH_SUGGESTIONS_TTL_SECS")?,
            suggestion_dismiss_secs: parse(&lookup, "KITH_SUGGESTION_DISMISS_SECS")?,
            auto_migrate: parse(&lookup, "KITH_AUTO_MIGRATE")?,
            apq_cache_bytes: parse(&lookup, "KITH_APQ_CACHE_BYTES")?,
            persisted_manifest: match lookup("KITH_PERSISTED_QUERIES_FILE") {
                None => None,
                Some(path) => Some(
                    std::fs::read_to_string(&path)
                        .map_err(|e| invalid("KITH_PERSISTED_QUERIES_FILE", &path, &e.to_string()))?
                        .into(),
                ),
            },
            persisted_only: parse(&lookup, "KITH_PERSISTED_ONLY")?,
            log_json: match text("KITH_LOG_FORMAT").as_str() {
                "text" => false,
                "json" => true,
                other => return Err(invalid("KITH_LOG_FORMAT", other, "expected text or json")),
            },
        };
        config.validate()?;
        Ok(config)
    }
}

/// The setting `name`, or its default from [`settings::SECTIONS`], parsed.
fn parse<T>(lookup: &impl Fn(&str) -> Option<String>, name: &'static str) -> Result<T, ConfigError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    let value = lookup(name)
        .or_else(|| settings::default_of(name).map(str::to_owned))
        .unwrap_or_default();
    let parsed = value
        .trim()
        .parse()
        .map_err(|e: T::Err| invalid(name, &value, &e.to_string()))?;
    // The range the settings table gives, if any.
    match settings::find(name).and_then(|s| s.refuses(&value)) {
        Some(reason) => Err(invalid(name, &value, &reason)),
        None => Ok(parsed),
    }
}

fn invalid(name: &'static str, value: &str, reason: &str) -> ConfigError {
    ConfigError {
        name,
        value: value.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests;
