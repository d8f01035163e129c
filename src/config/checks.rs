//! What the configuration refuses on its own: values out of range, and the
//! development secret on an address other hosts can reach.

use super::{Config, ConfigError, DEV_JWT_SECRET, invalid};

/// Largest `KITH_FOLLOWING_CACHE_SIZE`: a fill reads and commits a list at once.
const MAX_FOLLOWING_CACHE_SIZE: usize = 100_000;

impl Config {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        // A transaction pooler hands each transaction to any server
        // session: an advisory lock, a LISTEN or a migration's lock would
        // be held by a session nobody owns.
        if !self.pg_statement_cache && self.database_session_url.is_none() {
            return Err(invalid(
                "DATABASE_SESSION_URL",
                "",
                "required with KITH_PG_STATEMENT_CACHE=false (DATABASE_URL is a transaction pooler): \
                 set it to PostgreSQL itself, for migrations, the relay's leadership, the projector's \
                 leases, the user cache's notices and reconcile's lock",
            ));
        }
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
        if !(1..=1000).contains(&self.write_batch) {
            return Err(invalid(
                "KITH_WRITE_BATCH",
                &self.write_batch.to_string(),
                "must be from 1 to 1000",
            ));
        }
        if !(1..=16).contains(&self.write_batches_in_flight) {
            return Err(invalid(
                "KITH_WRITE_BATCHES_IN_FLIGHT",
                &self.write_batches_in_flight.to_string(),
                "must be from 1 to 16",
            ));
        }
        if !(self.followings_ratio.is_finite() && self.followings_ratio >= 0.0) {
            return Err(invalid(
                "KITH_FOLLOWINGS_RATIO",
                &self.followings_ratio.to_string(),
                "must be a number of at least 0",
            ));
        }
        if self.cursor_key.len() < 16 {
            return Err(invalid(
                "KITH_CURSOR_KEY",
                "<hidden>",
                "must be at least 16 bytes",
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
        if self.following_cache_size > MAX_FOLLOWING_CACHE_SIZE {
            return Err(invalid(
                "KITH_FOLLOWING_CACHE_SIZE",
                &self.following_cache_size.to_string(),
                "at most 100000 (a fill reads and writes a list in one go)",
            ));
        }
        if self.list_cache_size < 1 || self.list_cache_ttl_secs < 1 || self.hot_page_ttl_ms < 1 {
            return Err(invalid(
                "KITH_LIST_CACHE_*/KITH_HOT_PAGE_TTL_MS",
                "0",
                "must be at least 1",
            ));
        }
        if self.persisted_only && self.persisted_manifest.is_none() {
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
        if self.account_domain.is_empty()
            || self
                .account_domain
                .contains(|c: char| c == '@' || c == ',' || c.is_whitespace())
        {
            return Err(invalid(
                "KITH_ACCOUNT_DOMAIN",
                &self.account_domain,
                "must be a domain name: not empty, no '@', ',' or spaces",
            ));
        }
        if self.import_max_rows == 0 || self.import_rows_per_sec == 0 {
            return Err(invalid(
                "KITH_IMPORT_MAX_ROWS/KITH_IMPORT_ROWS_PER_SEC",
                "0",
                "must be at least 1",
            ));
        }
        if self.request_timeout_ms > super::MAX_REQUEST_TIMEOUT_MS {
            return Err(invalid(
                "KITH_REQUEST_TIMEOUT_MS",
                &self.request_timeout_ms.to_string(),
                "must be at most 60000: a write's cache update is late by at most this long, and tombstones are kept for that",
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
    /// user. A deployment that takes only an identity provider's tokens (no
    /// `KITH_JWT_SECRET`, so HS256 is refused) still signs paging cursors,
    /// and refuses to sign them with the published secret there too: anyone
    /// could forge a cursor, and a list's cursors are how Kith knows a
    /// position came from that list.
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
        if self.cursor_key == DEV_JWT_SECRET && !self.http_addr.ip().is_loopback() {
            return Err(invalid(
                "KITH_CURSOR_KEY",
                "<development default>",
                &format!(
                    "paging cursors would be signed with the published development secret, \
                     which lets anyone forge them; on {} set KITH_CURSOR_KEY (or KITH_JWT_SECRET)",
                    self.http_addr
                ),
            ));
        }
        Ok(())
    }
}
