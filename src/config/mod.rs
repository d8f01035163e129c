//! Configuration, read once from the environment at start-up.
//!
//! Every variable has a default that works against the local stack
//! (`scripts/stack up`); `docs/configuration.md` lists the same set.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `DATABASE_URL` | `postgres://kith:kith@127.0.0.1:5432/kith` | PostgreSQL, the truth |
//! | `DATABASE_POOL_SIZE` | `16` | PostgreSQL connections per process |
//! | `REDIS_URL` | `redis://127.0.0.1:6379/0` | Redis: rate limits, caches |
//! | `REDIS_POOL_SIZE` | `16` | Redis connections per process |
//! | `KITH_REDIS_PREFIX` | empty | prefix for every Redis key (isolates tenants and tests) |
//! | `KAFKA_BROKERS` | `127.0.0.1:9092` | Kafka bootstrap servers |
//! | `KITH_KAFKA_<PROPERTY>` | unset | any librdkafka property for every Kafka client: the name lowercased, `_` read as `.` (`KITH_KAFKA_SECURITY_PROTOCOL=SASL_SSL` is `security.protocol`) |
//! | `KITH_KAFKA_PROPERTIES_FILE` | unset | librdkafka properties from a `name=value` file (read first; the variables above override it) |
//! | `KITH_FOLLOW_TOPIC` | `kith.follow-events` | topic of follow events (outbox → projector) |
//! | `KITH_CONTENT_TOPIC` | `kith.content-events` | topic of content events from other services |
//! | `KITH_DEAD_LETTER_TOPIC` | `kith.dead-letters` | where undecodable or unappliable events go |
//! | `KITH_TOPIC_PARTITIONS` | `6` | partitions of topics Kith creates |
//! | `KITH_TOPIC_REPLICATION_FACTOR` | `3` | replicas of each partition of topics Kith creates (the local stack sets 1) |
//! | `KITH_TOPIC_MIN_INSYNC_REPLICAS` | `2` | `min.insync.replicas` of topics Kith creates (the local stack sets 1) |
//! | `KITH_CONSUMER_GROUP` | `kith-projector` | the projector's consumer group |
//! | `KITH_RELAY_BATCH` | `500` | outbox rows published per relay round |
//! | `KITH_RELAY_POLL_MS` | `1000` | relay fallback poll when no wake-up arrives (writers wake relays after each commit) |
//! | `KITH_PROJECTOR_BATCH` | `500` | events applied per projector transaction |
//! | `KITH_FETCH_WAIT_MS` | `10` | longest a projector fetch waits on the broker |
//! | `KITH_PROJECTOR_IDLE_POLL_MS` | `500` | an idle projector stops fetching until a relay announces events, and looks anyway this often (bounds the delay of events no relay announces, such as content events; 0: never stop fetching) |
//! | `KITH_PROJECTOR_LEASE_MS` | `5000` | how long a projector's hold on a partition outlives its last heartbeat |
//! | `KITH_CONTENT_LEDGER_RETENTION_HOURS` | `720` | how long content event ids are remembered (keep above the topic's retention) |
//! | `KITH_RECONCILE_INTERVAL_SECS` | `0` | `kith run`/`project`: repair the projection and counters from the truth this often (0 = never) |
//! | `KITH_COUNTER_CHECK_INTERVAL_SECS` | `300` | sampled check of a read user's counters against the truth, at most once per user per interval (0 = off) |
//! | `KITH_LIST_CACHE_SIZE` | `1000` | newest edges a list cache holds after a fill |
//! | `KITH_LIST_CACHE_TTL_SECS` | `3600` | life of a list cache |
//! | `KITH_HOT_FOLLOWERS` | `100000` | list size from which first pages are also held in process |
//! | `KITH_HOT_PAGE_TTL_MS` | `1000` | life of an in-process hot page |
//! | `KITH_LOADER_DELAY_MS` | `0` | how long a DataLoader collects keys before one batched fetch (0: the keys a level's resolvers ask for together, in one poll) |
//! | `KITH_USER_CACHE_CAPACITY` | `100000` | user rows held in process (0: none) |
//! | `KITH_USER_CACHE_TTL_SECS` | `60` | longest life of a user row held in process (changes drop it at once through PostgreSQL's `NOTIFY`; 0: none held) |
//! | `KITH_INTERSECTION_WALK_MAX` | `20000` | most edges of the smaller list `commonFollowing` / `knownFollowers` walk (past it they cover its newest edges and say so); at most 20000, what the complexity model charges |
//! | `KITH_INTERSECTION_CACHE_TTL_SECS` | `300` | life of a computed `commonFollowing` / `knownFollowers` in process (a follow or unfollow by either user drops it at once) |
//! | `KITH_MAX_LIVE_CONNECTIONS_PER_USER` | `10` | WebSocket connections (`/graphql`, `graphql-transport-ws`) one user may hold open on one replica |
//! | `KITH_MAX_SUBSCRIPTIONS_PER_CONNECTION` | `20` | subscriptions one WebSocket connection may run at once |
//! | `KITH_LIVE_COUNTERS_INTERVAL_MS` | `250` | `userCountersChanged` sends at most one update per interval (changes in between are coalesced) |
//! | `KITH_WS_INIT_TIMEOUT_MS` | `10000` | how long a WebSocket may take to authenticate (`connection_init`) before it is dropped |
//! | `KITH_APQ_CACHE_BYTES` | `16777216` | query text learnt from clients through Automatic Persisted Queries, held in process (0: APQ off, hashes alone answered `PERSISTED_QUERY_NOT_SUPPORTED`) |
//! | `KITH_PERSISTED_QUERIES_FILE` | unset | a persisted-query manifest (Apollo's `apollo-persisted-query-manifest` JSON, or an object of SHA-256 → query text), read at start |
//! | `KITH_PERSISTED_ONLY` | `false` | run only the operations of that manifest (allow-list mode; needs the file) |
//! | `KITH_MAX_QUERY_DEPTH` | `12` | deepest GraphQL selection accepted |
//! | `KITH_MAX_QUERY_COMPLEXITY` | `20000` | most complex GraphQL query accepted (page sizes multiply; an offset costs a tenth of the rows it skips) |
//! | `KITH_MAX_OFFSET` | `10000` | deepest `offset` a list accepts (cursors reach any depth) |
//! | `KITH_MAX_ALIASES` | `50` | most aliased fields in one GraphQL document |
//! | `KITH_MAX_ROOT_FIELDS` | `20` | most root fields in one operation |
//! | `KITH_MAX_BODY_BYTES` | `1048576` | largest request body; larger ones get 413 |
//! | `KITH_MAX_QUERY_BYTES` | `65536` | longest GraphQL query text, refused (`INVALID_INPUT`) before it is parsed |
//! | `KITH_INTROSPECTION` | `true` | answer introspection (`__schema`, `__type`); `false` refuses it (`INTROSPECTION_DISABLED`) |
//! | `KITH_MAX_OPERATIONS_PER_CONNECTION` | `4` | queries and mutations one WebSocket connection may run at once (more wait, up to 64; past that `RATE_LIMITED`) |
//! | `KITH_REQUEST_TIMEOUT_MS` | `5000` | deadline of one GraphQL request; past it the answer is `TIMEOUT` |
//! | `KITH_STATEMENT_TIMEOUT_MS` | `4000` | PostgreSQL `statement_timeout` of pooled connections (0 = none; operator commands use none) |
//! | `KITH_REDIS_TIMEOUT_MS` | `1000` | deadline of connecting to Redis and of each Redis answer |
//! | `KITH_MAX_CONCURRENT_FILLS` | `4` | list-cache fills started by reads that may run at once per process |
//! | `KITH_MAX_FILLS_PER_SEC` | `200` | lists reads may fill per second per process (past it they are read from PostgreSQL until the budget refills) |
//! | `KITH_CORS_ORIGINS` | empty | comma-separated origins browsers may call the API from (`*` = any) |
//! | `KITH_HTTP_ADDR` | `127.0.0.1:8080` | where `kith serve` listens |
//! | `KITH_METRICS_ADDR` | `127.0.0.1:9464` | where `GET /metrics` is served, apart from the API (`off`: nowhere) |
//! | `KITH_JWT_SECRET` | a dev-only secret | HS256 key for bearer tokens (`kith token`); without it, HS256 tokens are refused once a provider is configured |
//! | `KITH_JWT_JWKS_URL` | unset | an identity provider's JWKS (`https://…/.well-known/jwks.json`): RS256 / ES256 tokens are verified with its keys (cached 10 min; re-read on an unknown `kid`) |
//! | `KITH_JWT_PUBLIC_KEY_FILE` | unset | instead, one PEM public key (RSA for RS256, P-256 for ES256) |
//! | `KITH_JWT_JWKS_TTL_SECS` | `600` | how long a JWKS read is used before it is read again (in the background: requests keep the keys known meanwhile) |
//! | `KITH_JWT_JWKS_MIN_REFRESH_MS` | `10000` | the shortest time between two reads of the JWKS (an unknown `kid` re-reads it at most this often) |
//! | `KITH_JWT_ISSUER` / `KITH_JWT_AUDIENCE` | unset | when set, the `iss` / `aud` provider tokens must carry |
//! | `KITH_JWT_LEEWAY_SECS` | `30` | clock skew allowed on `exp` and `nbf` |
//! | `KITH_JWT_USER_CLAIM` | `sub` | the claim of a provider token that names the user |
//! | `KITH_JWT_USER_LOOKUP` | `id` | how that claim maps to a Kith user: `id` (its numeric id) or `handle` |
//! | `KITH_RATE_LIMIT_CAPACITY` | `100` | follow/unfollow token bucket size |
//! | `KITH_RATE_LIMIT_PER_SEC` | `1` | bucket refill rate, tokens per second |
//! | `KITH_AUTO_MIGRATE` | `true` | apply migrations on `serve` / `run` |
//! | `KITH_LOG_FORMAT` | `text` | `text` or `json` |
//! | `RUST_LOG` | `info` | tracing filter |

use std::env;
use std::net::SocketAddr;
use std::str::FromStr;

/// The secret used when `KITH_JWT_SECRET` is unset; good for the local stack only.
pub const DEV_JWT_SECRET: &str = "kith-local-development-secret-do-not-deploy";

/// The librdkafka properties of `KITH_KAFKA_<PROPERTY>` variables: the
/// name after the prefix, lowercased, `_` read as `.` (`KITH_KAFKA_SASL_MECHANISMS`
/// is `sasl.mechanisms`). Sorted, so the result does not depend on the
/// environment's order.
pub fn kafka_properties(vars: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut properties: Vec<(String, String)> = vars
        .into_iter()
        .filter_map(|(name, value)| {
            let property = name.strip_prefix("KITH_KAFKA_")?;
            (!property.is_empty() && property != "PROPERTIES_FILE")
                .then(|| (property.to_ascii_lowercase().replace('_', "."), value))
        })
        .collect();
    properties.sort();
    properties
}

/// The properties of a Java-style properties file (`name=value` lines;
/// `#` and `!` comments).
fn properties_file(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#') && !line.starts_with('!'))
        .filter_map(|line| {
            let (name, value) = line.split_once('=')?;
            Some((name.trim().to_owned(), value.trim().to_owned()))
        })
        .collect()
}

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
    /// PostgreSQL connection URL.
    pub database_url: String,
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
    /// Origins allowed to call the API from a browser (`*` = any).
    pub cors_origins: Vec<String>,
    /// Address of the HTTP listener.
    pub http_addr: SocketAddr,
    /// Address of the metrics listener (`None`: metrics are not served).
    pub metrics_addr: Option<SocketAddr>,
    /// HS256 secret for bearer tokens.
    pub jwt_secret: String,
    /// Whether HS256 tokens are accepted: unless an identity provider is
    /// configured and `KITH_JWT_SECRET` is not.
    pub jwt_hs256: bool,
    /// The identity provider's JWKS URL.
    pub jwt_jwks_url: Option<String>,
    /// The shortest time between two JWKS reads, ms.
    pub jwt_jwks_min_refresh_ms: u64,
    /// How long a JWKS read is used before it is read again, seconds.
    pub jwt_jwks_ttl_secs: u64,
    /// The identity provider's public key (PEM), read from its file.
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
    /// Apply pending migrations when the service starts.
    pub auto_migrate: bool,
    /// Emit logs as JSON lines instead of text.
    pub log_json: bool,
    /// Bytes of query text learnt through Automatic Persisted Queries, held at most.
    pub apq_cache_bytes: u64,
    /// The persisted-query manifest's operations, by SHA-256 (empty: none).
    pub persisted_manifest: std::sync::Arc<std::collections::HashMap<String, std::sync::Arc<str>>>,
    /// Run only the manifest's operations.
    pub persisted_only: bool,
}

impl Config {
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
        let text = |name: &'static str, default: &str| -> String {
            lookup(name).unwrap_or_else(|| default.to_owned())
        };
        let config = Self {
            database_url: text("DATABASE_URL", "postgres://kith:kith@127.0.0.1:5432/kith"),
            database_pool_size: parse(&lookup, "DATABASE_POOL_SIZE", "16")?,
            redis_url: text("REDIS_URL", "redis://127.0.0.1:6379/0"),
            redis_pool_size: parse(&lookup, "REDIS_POOL_SIZE", "16")?,
            redis_prefix: text("KITH_REDIS_PREFIX", ""),
            kafka_brokers: text("KAFKA_BROKERS", "127.0.0.1:9092"),
            kafka_properties: match lookup("KITH_KAFKA_PROPERTIES_FILE") {
                None => Vec::new(),
                Some(path) => {
                    properties_file(&std::fs::read_to_string(&path).map_err(|e| {
                        invalid("KITH_KAFKA_PROPERTIES_FILE", &path, &e.to_string())
                    })?)
                }
            },
            follow_topic: text("KITH_FOLLOW_TOPIC", "kith.follow-events"),
            content_topic: text("KITH_CONTENT_TOPIC", "kith.content-events"),
            dead_letter_topic: text("KITH_DEAD_LETTER_TOPIC", "kith.dead-letters"),
            topic_partitions: parse(&lookup, "KITH_TOPIC_PARTITIONS", "6")?,
            topic_replication_factor: parse(&lookup, "KITH_TOPIC_REPLICATION_FACTOR", "3")?,
            topic_min_insync_replicas: parse(&lookup, "KITH_TOPIC_MIN_INSYNC_REPLICAS", "2")?,
            consumer_group: text("KITH_CONSUMER_GROUP", "kith-projector"),
            relay_batch: parse(&lookup, "KITH_RELAY_BATCH", "500")?,
            relay_poll_ms: parse(&lookup, "KITH_RELAY_POLL_MS", "1000")?,
            projector_batch: parse(&lookup, "KITH_PROJECTOR_BATCH", "500")?,
            fetch_wait_ms: parse(&lookup, "KITH_FETCH_WAIT_MS", "10")?,
            projector_idle_poll_ms: parse(&lookup, "KITH_PROJECTOR_IDLE_POLL_MS", "500")?,
            projector_lease_ms: parse(&lookup, "KITH_PROJECTOR_LEASE_MS", "5000")?,
            content_ledger_retention_hours: parse(
                &lookup,
                "KITH_CONTENT_LEDGER_RETENTION_HOURS",
                "720",
            )?,
            reconcile_interval_secs: parse(&lookup, "KITH_RECONCILE_INTERVAL_SECS", "0")?,
            counter_check_interval_secs: parse(&lookup, "KITH_COUNTER_CHECK_INTERVAL_SECS", "300")?,
            list_cache_size: parse(&lookup, "KITH_LIST_CACHE_SIZE", "1000")?,
            list_cache_ttl_secs: parse(&lookup, "KITH_LIST_CACHE_TTL_SECS", "3600")?,
            hot_threshold: parse(&lookup, "KITH_HOT_FOLLOWERS", "100000")?,
            hot_page_ttl_ms: parse(&lookup, "KITH_HOT_PAGE_TTL_MS", "1000")?,
            loader_delay_ms: parse(&lookup, "KITH_LOADER_DELAY_MS", "0")?,
            user_cache_capacity: parse(&lookup, "KITH_USER_CACHE_CAPACITY", "100000")?,
            user_cache_ttl_secs: parse(&lookup, "KITH_USER_CACHE_TTL_SECS", "60")?,
            intersection_walk_max: parse(&lookup, "KITH_INTERSECTION_WALK_MAX", "20000")?,
            intersection_cache_ttl_secs: parse(&lookup, "KITH_INTERSECTION_CACHE_TTL_SECS", "300")?,
            max_live_connections_per_user: parse(
                &lookup,
                "KITH_MAX_LIVE_CONNECTIONS_PER_USER",
                "10",
            )?,
            max_subscriptions_per_connection: parse(
                &lookup,
                "KITH_MAX_SUBSCRIPTIONS_PER_CONNECTION",
                "20",
            )?,
            live_counters_interval_ms: parse(&lookup, "KITH_LIVE_COUNTERS_INTERVAL_MS", "250")?,
            ws_init_timeout_ms: parse(&lookup, "KITH_WS_INIT_TIMEOUT_MS", "10000")?,
            max_query_depth: parse(&lookup, "KITH_MAX_QUERY_DEPTH", "12")?,
            max_query_complexity: parse(&lookup, "KITH_MAX_QUERY_COMPLEXITY", "20000")?,
            max_offset: parse(&lookup, "KITH_MAX_OFFSET", "10000")?,
            max_aliases: parse(&lookup, "KITH_MAX_ALIASES", "50")?,
            max_root_fields: parse(&lookup, "KITH_MAX_ROOT_FIELDS", "20")?,
            max_body_bytes: parse(&lookup, "KITH_MAX_BODY_BYTES", "1048576")?,
            max_query_bytes: parse(&lookup, "KITH_MAX_QUERY_BYTES", "65536")?,
            introspection: parse(&lookup, "KITH_INTROSPECTION", "true")?,
            max_operations_per_connection: parse(
                &lookup,
                "KITH_MAX_OPERATIONS_PER_CONNECTION",
                "4",
            )?,
            request_timeout_ms: parse(&lookup, "KITH_REQUEST_TIMEOUT_MS", "5000")?,
            statement_timeout_ms: parse(&lookup, "KITH_STATEMENT_TIMEOUT_MS", "4000")?,
            redis_timeout_ms: parse(&lookup, "KITH_REDIS_TIMEOUT_MS", "1000")?,
            max_concurrent_fills: parse(&lookup, "KITH_MAX_CONCURRENT_FILLS", "4")?,
            max_fills_per_sec: parse(&lookup, "KITH_MAX_FILLS_PER_SEC", "200")?,
            cors_origins: text("KITH_CORS_ORIGINS", "")
                .split(',')
                .map(|o| o.trim().trim_end_matches('/').to_owned())
                .filter(|o| !o.is_empty())
                .collect(),
            http_addr: parse(&lookup, "KITH_HTTP_ADDR", "127.0.0.1:8080")?,
            metrics_addr: match text("KITH_METRICS_ADDR", "127.0.0.1:9464").trim() {
                "" | "off" => None,
                addr => Some(addr.parse().map_err(|e: std::net::AddrParseError| {
                    invalid("KITH_METRICS_ADDR", addr, &e.to_string())
                })?),
            },
            jwt_secret: text("KITH_JWT_SECRET", DEV_JWT_SECRET),
            jwt_hs256: lookup("KITH_JWT_SECRET").is_some()
                || (lookup("KITH_JWT_JWKS_URL").is_none()
                    && lookup("KITH_JWT_PUBLIC_KEY_FILE").is_none()),
            jwt_jwks_url: lookup("KITH_JWT_JWKS_URL").filter(|u| !u.is_empty()),
            jwt_jwks_min_refresh_ms: parse(&lookup, "KITH_JWT_JWKS_MIN_REFRESH_MS", "10000")?,
            jwt_jwks_ttl_secs: parse(&lookup, "KITH_JWT_JWKS_TTL_SECS", "600")?,
            jwt_public_key_pem: match lookup("KITH_JWT_PUBLIC_KEY_FILE") {
                None => None,
                Some(path) => {
                    let pem = std::fs::read_to_string(&path)
                        .map_err(|e| invalid("KITH_JWT_PUBLIC_KEY_FILE", &path, &e.to_string()))?;
                    crate::auth::identity::check_pem(&pem)
                        .map_err(|e| invalid("KITH_JWT_PUBLIC_KEY_FILE", &path, &e))?;
                    Some(pem)
                }
            },
            jwt_issuer: lookup("KITH_JWT_ISSUER").filter(|v| !v.is_empty()),
            jwt_audience: lookup("KITH_JWT_AUDIENCE").filter(|v| !v.is_empty()),
            jwt_leeway_secs: parse(&lookup, "KITH_JWT_LEEWAY_SECS", "30")?,
            jwt_user_claim: text("KITH_JWT_USER_CLAIM", "sub"),
            jwt_user_lookup: parse(&lookup, "KITH_JWT_USER_LOOKUP", "id")?,
            rate_limit_capacity: parse(&lookup, "KITH_RATE_LIMIT_CAPACITY", "100")?,
            rate_limit_per_sec: parse(&lookup, "KITH_RATE_LIMIT_PER_SEC", "1")?,
            auto_migrate: parse(&lookup, "KITH_AUTO_MIGRATE", "true")?,
            apq_cache_bytes: parse(&lookup, "KITH_APQ_CACHE_BYTES", "16777216")?,
            persisted_manifest: match lookup("KITH_PERSISTED_QUERIES_FILE") {
                None => Default::default(),
                Some(path) => {
                    let text = std::fs::read_to_string(&path).map_err(|e| {
                        invalid("KITH_PERSISTED_QUERIES_FILE", &path, &e.to_string())
                    })?;
                    std::sync::Arc::new(
                        crate::graph::persisted::parse_manifest(&text)
                            .map_err(|e| invalid("KITH_PERSISTED_QUERIES_FILE", &path, &e))?,
                    )
                }
            },
            persisted_only: parse(&lookup, "KITH_PERSISTED_ONLY", "false")?,
            log_json: match text("KITH_LOG_FORMAT", "text").as_str() {
                "text" => false,
                "json" => true,
                other => return Err(invalid("KITH_LOG_FORMAT", other, "expected text or json")),
            },
        };
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.rate_limit_capacity == 0 {
            return Err(invalid(
                "KITH_RATE_LIMIT_CAPACITY",
                "0",
                "must be at least 1",
            ));
        }
        if !(self.rate_limit_per_sec.is_finite() && self.rate_limit_per_sec > 0.0) {
            return Err(invalid(
                "KITH_RATE_LIMIT_PER_SEC",
                &self.rate_limit_per_sec.to_string(),
                "must be a positive number",
            ));
        }
        if self.jwt_secret.len() < 16 {
            return Err(invalid(
                "KITH_JWT_SECRET",
                "<hidden>",
                "must be at least 16 bytes",
            ));
        }
        if self.topic_partitions < 1 {
            return Err(invalid(
                "KITH_TOPIC_PARTITIONS",
                &self.topic_partitions.to_string(),
                "must be at least 1",
            ));
        }
        if self.relay_batch < 1
            || self.projector_batch < 1
            || self.relay_poll_ms < 10
            || (self.projector_idle_poll_ms != 0 && self.projector_idle_poll_ms < 10)
        {
            return Err(invalid(
                "KITH_RELAY_BATCH/KITH_PROJECTOR_BATCH/KITH_RELAY_POLL_MS/KITH_PROJECTOR_IDLE_POLL_MS",
                "",
                "too small",
            ));
        }
        if self.list_cache_size < 1 || self.list_cache_ttl_secs < 1 || self.hot_page_ttl_ms < 1 {
            return Err(invalid(
                "KITH_LIST_CACHE_*/KITH_HOT_PAGE_TTL_MS",
                "0",
                "must be at least 1",
            ));
        }
        if self.persisted_only && self.persisted_manifest.is_empty() {
            return Err(invalid(
                "KITH_PERSISTED_ONLY",
                "true",
                "needs a manifest with operations (KITH_PERSISTED_QUERIES_FILE)",
            ));
        }
        if !(1..=60_000).contains(&self.live_counters_interval_ms) {
            return Err(invalid(
                "KITH_LIVE_COUNTERS_INTERVAL_MS",
                &self.live_counters_interval_ms.to_string(),
                "must be between 1 and 60000",
            ));
        }
        // The complexity model charges an intersection for 20,000 rows.
        if !(1..=20_000).contains(&self.intersection_walk_max) {
            return Err(invalid(
                "KITH_INTERSECTION_WALK_MAX",
                &self.intersection_walk_max.to_string(),
                "must be between 1 and 20000",
            ));
        }
        if self.projector_lease_ms < 500 {
            return Err(invalid(
                "KITH_PROJECTOR_LEASE_MS",
                &self.projector_lease_ms.to_string(),
                "must be at least 500",
            ));
        }
        if self.content_ledger_retention_hours < 1 {
            return Err(invalid(
                "KITH_CONTENT_LEDGER_RETENTION_HOURS",
                "0",
                "must be at least 1",
            ));
        }
        if self.topic_replication_factor < 1
            || !(1..=self.topic_replication_factor).contains(&self.topic_min_insync_replicas)
        {
            return Err(invalid(
                "KITH_TOPIC_REPLICATION_FACTOR/KITH_TOPIC_MIN_INSYNC_REPLICAS",
                &format!(
                    "{}/{}",
                    self.topic_replication_factor, self.topic_min_insync_replicas
                ),
                "need 1 <= min.insync.replicas <= replication factor",
            ));
        }
        if self.max_offset < 0 || self.max_body_bytes < 1024 {
            return Err(invalid(
                "KITH_MAX_OFFSET/KITH_MAX_BODY_BYTES",
                "",
                "offset must be >= 0, body limit >= 1024",
            ));
        }
        if self.request_timeout_ms < 10 || self.redis_timeout_ms < 10 {
            return Err(invalid(
                "KITH_REQUEST_TIMEOUT_MS/KITH_REDIS_TIMEOUT_MS",
                "",
                "must be at least 10",
            ));
        }
        if self.max_query_bytes < 1024 || self.max_query_bytes > self.max_body_bytes {
            return Err(invalid(
                "KITH_MAX_QUERY_BYTES",
                &self.max_query_bytes.to_string(),
                "must be at least 1024 and at most KITH_MAX_BODY_BYTES",
            ));
        }
        if self.max_operations_per_connection == 0 || self.max_fills_per_sec == 0 {
            return Err(invalid(
                "KITH_MAX_OPERATIONS_PER_CONNECTION/KITH_MAX_FILLS_PER_SEC",
                "0",
                "must be at least 1",
            ));
        }
        if self.database_pool_size == 0 || self.redis_pool_size == 0 {
            return Err(invalid("*_POOL_SIZE", "0", "must be at least 1"));
        }
        Ok(())
    }

    /// True when the JWT secret is the published development default.
    pub fn uses_dev_secret(&self) -> bool {
        self.jwt_secret == DEV_JWT_SECRET
    }

    /// Refuses to accept tokens signed with the published development secret
    /// on an address other hosts can reach: anyone could sign tokens for any
    /// user. A deployment that takes only an identity provider's tokens
    /// (no `KITH_JWT_SECRET`, so HS256 is refused) needs no secret: the
    /// development default then signs only paging cursors, which name a
    /// position in a list the client may read anyway.
    pub fn check_listener(&self) -> Result<(), ConfigError> {
        if self.jwt_hs256 && self.uses_dev_secret() && !self.http_addr.ip().is_loopback() {
            return Err(invalid(
                "KITH_JWT_SECRET",
                "<development default>",
                &format!(
                    "the published development secret is only allowed on a loopback address, \
                     not {}; set KITH_JWT_SECRET",
                    self.http_addr
                ),
            ));
        }
        Ok(())
    }
}

fn parse<T>(
    lookup: &impl Fn(&str) -> Option<String>,
    name: &'static str,
    default: &str,
) -> Result<T, ConfigError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    let value = lookup(name).unwrap_or_else(|| default.to_owned());
    value
        .trim()
        .parse()
        .map_err(|e: T::Err| invalid(name, &value, &e.to_string()))
}

fn invalid(name: &'static str, value: &str, reason: &str) -> ConfigError {
    ConfigError {
        name,
        value: value.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_properties_pass_through_from_variables_and_a_file() {
        let vars = [
            ("KITH_KAFKA_SECURITY_PROTOCOL", "SASL_SSL"),
            ("KITH_KAFKA_SASL_MECHANISMS", "SCRAM-SHA-512"),
            ("KITH_KAFKA_PROPERTIES_FILE", "/etc/kith/kafka.properties"),
            ("KAFKA_BROKERS", "b1:9092"),
            ("KITH_FOLLOW_TOPIC", "f"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        assert_eq!(
            kafka_properties(vars),
            vec![
                ("sasl.mechanisms".to_owned(), "SCRAM-SHA-512".to_owned()),
                ("security.protocol".to_owned(), "SASL_SSL".to_owned()),
            ]
        );
        let file = "# MSK\nssl.ca.location = /etc/ssl/ca.pem\n! old\n\nsasl.username=kith\n";
        assert_eq!(
            properties_file(file),
            vec![
                ("ssl.ca.location".to_owned(), "/etc/ssl/ca.pem".to_owned()),
                ("sasl.username".to_owned(), "kith".to_owned()),
            ]
        );
    }

    #[test]
    fn defaults_match_the_local_stack() {
        let config = Config::from_lookup(|_| None).unwrap();
        assert_eq!(config.http_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(config.rate_limit_capacity, 100);
        assert_eq!(config.rate_limit_per_sec, 1.0);
        assert!(config.uses_dev_secret());
    }

    #[test]
    fn rejects_bad_values_with_the_variable_name() {
        let err = Config::from_lookup(|name| {
            (name == "KITH_RATE_LIMIT_PER_SEC").then(|| "fast".to_owned())
        })
        .unwrap_err();
        assert!(err.to_string().contains("KITH_RATE_LIMIT_PER_SEC"));
        let err = Config::from_lookup(|name| (name == "KITH_JWT_SECRET").then(|| "short".into()))
            .unwrap_err();
        assert!(!err.to_string().contains("short"), "secret leaked: {err}");
    }

    #[test]
    fn the_dev_secret_only_serves_loopback() {
        let on = |addr: &'static str, secret: Option<&'static str>| {
            Config::from_lookup(|name| match name {
                "KITH_HTTP_ADDR" => Some(addr.to_owned()),
                "KITH_JWT_SECRET" => secret.map(str::to_owned),
                _ => None,
            })
            .unwrap()
            .check_listener()
        };
        assert!(on("127.0.0.1:8080", None).is_ok());
        assert!(on("[::1]:8080", None).is_ok());
        let err = on("0.0.0.0:8080", None).unwrap_err().to_string();
        assert!(err.contains("KITH_JWT_SECRET"), "{err}");
        assert!(on("10.0.0.5:8080", None).is_err());
        assert!(on("0.0.0.0:8080", Some("a-real-secret-of-enough-length")).is_ok());
    }

    #[test]
    fn an_identity_provider_alone_serves_any_address() {
        let config = Config::from_lookup(|name| match name {
            "KITH_HTTP_ADDR" => Some("0.0.0.0:8080".to_owned()),
            "KITH_JWT_JWKS_URL" => Some("https://id.example/.well-known/jwks.json".to_owned()),
            _ => None,
        })
        .unwrap();
        assert!(!config.jwt_hs256, "no secret: HS256 tokens are refused");
        assert!(config.check_listener().is_ok());
    }

    #[test]
    fn topic_defaults_are_safe_for_a_cluster() {
        let config = Config::from_lookup(|_| None).unwrap();
        assert_eq!(
            (
                config.topic_replication_factor,
                config.topic_min_insync_replicas
            ),
            (3, 2)
        );
        assert!(
            Config::from_lookup(
                |name| (name == "KITH_TOPIC_MIN_INSYNC_REPLICAS").then(|| "4".to_owned())
            )
            .is_err()
        );
    }
}
