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
mod sections;
pub mod settings;
mod settings_accounts;
mod settings_auth;
mod shown;

pub use kafka::kafka_properties;
pub use reference::reference;
pub use sections::{
    AuthSettings, CacheSettings, ConsistencySettings, DatabaseSettings, HttpSettings,
    LimitSettings, LiveSettings, LogSettings, PipelineSettings, PortabilitySettings, RedisSettings,
    SuggestionSettings, WriteSettings,
};

use std::env;
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
            _ => Err("must be `id` or `handle`".to_owned()),
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
    /// PostgreSQL: the request pool, the sessions of their own, the replica, the group commit.
    pub database: DatabaseSettings,
    /// Redis.
    pub redis: RedisSettings,
    /// Kafka and the pipeline: the broker, the topics, the relay and the projector.
    pub pipeline: PipelineSettings,
    /// Consistency: scheduled reconciliation and the sampled counter check.
    pub consistency: ConsistencySettings,
    /// Caches and reads.
    pub caches: CacheSettings,
    /// Requests and their limits.
    pub limits: LimitSettings,
    /// Live updates (WebSocket).
    pub live: LiveSettings,
    /// HTTP.
    pub http: HttpSettings,
    /// Authentication.
    pub auth: AuthSettings,
    /// Logs.
    pub logs: LogSettings,
    /// Rate limits and caps of writes.
    pub writes: WriteSettings,
    /// Import and export.
    pub portability: PortabilitySettings,
    /// Suggestions.
    pub suggestions: SuggestionSettings,
}

impl Config {
    /// Where sessions of their own connect — migrations, the relay's
    /// leadership, the projector's lease keeper, the user cache's notices,
    /// reconcile's lock, the operator commands: `DATABASE_SESSION_URL`, or
    /// `DATABASE_URL` when it is unset.
    pub fn session_url(&self) -> &str {
        self.database
            .session_url
            .as_deref()
            .unwrap_or(&self.database.url)
    }

    /// How long a request waits for a pooled connection (PostgreSQL's or
    /// Redis's), counted from when it asked: half the request deadline, so
    /// that a store being away answers `UNAVAILABLE` rather than `TIMEOUT`.
    pub fn connection_wait(&self) -> std::time::Duration {
        std::time::Duration::from_millis((self.limits.request_timeout_ms / 2).max(100))
    }

    /// Reads the configuration from the process environment, including
    /// every `KITH_KAFKA_<PROPERTY>` variable.
    pub fn from_env() -> Result<Self, ConfigError> {
        let mut config = Self::from_lookup(|name| env::var(name).ok())?;
        config
            .pipeline
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
            database: DatabaseSettings {
                url: text("DATABASE_URL"),
                session_url: lookup("DATABASE_SESSION_URL").filter(|u| !u.is_empty()),
                pg_statement_cache: parse(&lookup, "KITH_PG_STATEMENT_CACHE")?,
                replica_url: lookup("DATABASE_REPLICA_URL").filter(|u| !u.is_empty()),
                replica_max_lag_ms: parse(&lookup, "KITH_REPLICA_MAX_LAG_MS")?,
                pool_size: parse(&lookup, "DATABASE_POOL_SIZE")?,
                statement_timeout_ms: parse(&lookup, "KITH_STATEMENT_TIMEOUT_MS")?,
                write_batch: parse(&lookup, "KITH_WRITE_BATCH")?,
                write_batches_in_flight: parse(&lookup, "KITH_WRITE_BATCHES_IN_FLIGHT")?,
                auto_migrate: parse(&lookup, "KITH_AUTO_MIGRATE")?,
            },
            redis: RedisSettings {
                url: text("REDIS_URL"),
                pool_size: parse(&lookup, "REDIS_POOL_SIZE")?,
                prefix: text("KITH_REDIS_PREFIX"),
                timeout_ms: parse(&lookup, "KITH_REDIS_TIMEOUT_MS")?,
            },
            pipeline: PipelineSettings {
                kafka_properties: match lookup("KITH_KAFKA_PROPERTIES_FILE") {
                    None => Vec::new(),
                    Some(path) => {
                        kafka::properties_file(&std::fs::read_to_string(&path).map_err(|e| {
                            invalid("KITH_KAFKA_PROPERTIES_FILE", &path, &e.to_string())
                        })?)
                    }
                },
                kafka_brokers: text("KAFKA_BROKERS"),
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
                content_ledger_retention_hours: parse(
                    &lookup,
                    "KITH_CONTENT_LEDGER_RETENTION_HOURS",
                )?,
            },
            consistency: ConsistencySettings {
                reconcile_interval_secs: parse(&lookup, "KITH_RECONCILE_INTERVAL_SECS")?,
                counter_check_interval_secs: parse(&lookup, "KITH_COUNTER_CHECK_INTERVAL_SECS")?,
            },
            caches: CacheSettings {
                list_cache_size: parse(&lookup, "KITH_LIST_CACHE_SIZE")?,
                following_cache_size: parse(&lookup, "KITH_FOLLOWING_CACHE_SIZE")?,
                list_cache_ttl_secs: parse(&lookup, "KITH_LIST_CACHE_TTL_SECS")?,
                hot_threshold: parse(&lookup, "KITH_HOT_FOLLOWERS")?,
                hot_page_ttl_ms: parse(&lookup, "KITH_HOT_PAGE_TTL_MS")?,
                loader_delay_ms: parse(&lookup, "KITH_LOADER_DELAY_MS")?,
                user_cache_capacity: parse(&lookup, "KITH_USER_CACHE_CAPACITY")?,
                user_cache_ttl_secs: parse(&lookup, "KITH_USER_CACHE_TTL_SECS")?,
                notify_cache_members: parse(&lookup, "KITH_NOTIFY_CACHE_MEMBERS")?,
                intersection_walk_max: parse(&lookup, "KITH_INTERSECTION_WALK_MAX")?,
                intersection_cache_ttl_secs: parse(&lookup, "KITH_INTERSECTION_CACHE_TTL_SECS")?,
                max_concurrent_fills: parse(&lookup, "KITH_MAX_CONCURRENT_FILLS")?,
                max_fills_per_sec: parse(&lookup, "KITH_MAX_FILLS_PER_SEC")?,
                fill_memory_limit: parse(&lookup, "KITH_FILL_MEMORY_LIMIT")?,
            },
            limits: LimitSettings {
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
                request_timeout_ms: parse(&lookup, "KITH_REQUEST_TIMEOUT_MS")?,
                apq_cache_bytes: parse(&lookup, "KITH_APQ_CACHE_BYTES")?,
                persisted_manifest: match lookup("KITH_PERSISTED_QUERIES_FILE") {
                    None => None,
                    Some(path) => Some(
                        std::fs::read_to_string(&path)
                            .map_err(|e| {
                                invalid("KITH_PERSISTED_QUERIES_FILE", &path, &e.to_string())
                            })?
                            .into(),
                    ),
                },
                persisted_only: parse(&lookup, "KITH_PERSISTED_ONLY")?,
            },
            live: LiveSettings {
                max_connections_per_user: parse(&lookup, "KITH_MAX_LIVE_CONNECTIONS_PER_USER")?,
                max_subscriptions_per_connection: parse(
                    &lookup,
                    "KITH_MAX_SUBSCRIPTIONS_PER_CONNECTION",
                )?,
                counters_interval_ms: parse(&lookup, "KITH_LIVE_COUNTERS_INTERVAL_MS")?,
                ws_init_timeout_ms: parse(&lookup, "KITH_WS_INIT_TIMEOUT_MS")?,
                max_operations_per_connection: parse(
                    &lookup,
                    "KITH_MAX_OPERATIONS_PER_CONNECTION",
                )?,
            },
            http: HttpSettings {
                cors_origins: text("KITH_CORS_ORIGINS")
                    .split(',')
                    .map(|o| o.trim().trim_end_matches('/').to_owned())
                    .filter(|o| !o.is_empty())
                    .collect(),
                addr: parse(&lookup, "KITH_HTTP_ADDR")?,
                metrics_addr: match text("KITH_METRICS_ADDR").trim() {
                    "" | "off" => None,
                    addr => Some(addr.parse().map_err(|e: std::net::AddrParseError| {
                        invalid("KITH_METRICS_ADDR", addr, &e.to_string())
                    })?),
                },
                server_timing: parse(&lookup, "KITH_SERVER_TIMING")?,
            },
            auth: AuthSettings {
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
                    Some(path) => {
                        Some(std::fs::read_to_string(&path).map_err(|e| {
                            invalid("KITH_JWT_PUBLIC_KEY_FILE", &path, &e.to_string())
                        })?)
                    }
                },
                jwt_issuer: lookup("KITH_JWT_ISSUER").filter(|v| !v.is_empty()),
                jwt_audience: lookup("KITH_JWT_AUDIENCE").filter(|v| !v.is_empty()),
                jwt_leeway_secs: parse(&lookup, "KITH_JWT_LEEWAY_SECS")?,
                jwt_user_claim: text("KITH_JWT_USER_CLAIM"),
                service_clients: text("KITH_SERVICE_CLIENTS")
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
                jwt_user_lookup: parse(&lookup, "KITH_JWT_USER_LOOKUP")?,
            },
            logs: LogSettings {
                json: match text("KITH_LOG_FORMAT").as_str() {
                    "text" => false,
                    "json" => true,
                    other => return Err(breaks_rule("KITH_LOG_FORMAT", other)),
                },
            },
            writes: WriteSettings {
                rate_limit_capacity: parse(&lookup, "KITH_RATE_LIMIT_CAPACITY")?,
                rate_limit_per_sec: parse(&lookup, "KITH_RATE_LIMIT_PER_SEC")?,
                max_followings: parse(&lookup, "KITH_MAX_FOLLOWINGS")?,
                followings_ratio: parse(&lookup, "KITH_FOLLOWINGS_RATIO")?,
                max_blocks: parse(&lookup, "KITH_MAX_BLOCKS")?,
                max_close_friends: parse(&lookup, "KITH_MAX_CLOSE_FRIENDS")?,
            },
            portability: PortabilitySettings {
                account_domain: text("KITH_ACCOUNT_DOMAIN").trim().to_owned(),
                import_max_rows: parse(&lookup, "KITH_IMPORT_MAX_ROWS")?,
                import_rows_per_sec: parse(&lookup, "KITH_IMPORT_ROWS_PER_SEC")?,
                import_follows_per_day: parse(&lookup, "KITH_IMPORT_FOLLOWS_PER_DAY")?,
                import_retention_secs: parse(&lookup, "KITH_IMPORT_RETENTION_SECS")?,
                move_followers_per_sec: parse(&lookup, "KITH_MOVE_FOLLOWERS_PER_SEC")?,
                move_cooldown_secs: parse(&lookup, "KITH_MOVE_COOLDOWN_SECS")?,
            },
            suggestions: SuggestionSettings {
                sample: parse(&lookup, "KITH_SUGGESTIONS_SAMPLE")?,
                per_followee: parse(&lookup, "KITH_SUGGESTIONS_PER_FOLLOWEE")?,
                ttl_secs: parse(&lookup, "KITH_SUGGESTIONS_TTL_SECS")?,
                dismiss_secs: parse(&lookup, "KITH_SUGGESTION_DISMISS_SECS")?,
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

/// `name`, set to `value`, breaks the rule the settings table gives it.
fn breaks_rule(name: &'static str, value: &str) -> ConfigError {
    let rule = settings::find(name)
        .and_then(|s| s.rule)
        .expect("a setting checked here has a rule in the settings table");
    invalid(name, value, &format!("must be {rule}"))
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
