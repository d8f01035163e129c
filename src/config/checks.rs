//! What the configuration refuses beyond each setting's range (which the
//! settings table holds, and the parser checks): settings that must agree
//! with each other, secrets too short, and the development secret on an
//! address other hosts can reach.

use super::{Config, ConfigError, DEV_JWT_SECRET, breaks_rule, invalid};

impl Config {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        // A transaction pooler hands each transaction to any server
        // session: an advisory lock, a LISTEN or a migration's lock would
        // be held by a session nobody owns.
        if !self.database.pg_statement_cache && self.database.session_url.is_none() {
            let mut refusal = breaks_rule("DATABASE_SESSION_URL", "");
            refusal.reason.push_str(
                ": set it to PostgreSQL itself, for migrations, the relay's leadership, the \
                 projector's leases, the user cache's notices and reconcile's lock",
            );
            return Err(refusal);
        }
        if !(self.writes.rate_limit_per_sec.is_finite() && self.writes.rate_limit_per_sec > 0.0) {
            return Err(breaks_rule(
                "KITH_RATE_LIMIT_PER_SEC",
                &self.writes.rate_limit_per_sec.to_string(),
            ));
        }
        if self.auth.jwt_secret.len() < 16 {
            return Err(breaks_rule("KITH_JWT_SECRET", "<hidden>"));
        }
        if self.auth.cursor_key.len() < 16 {
            return Err(breaks_rule("KITH_CURSOR_KEY", "<hidden>"));
        }
        // 0 switches parking off; below 10 ms it would only spin.
        if self.pipeline.projector_idle_poll_ms != 0 && self.pipeline.projector_idle_poll_ms < 10 {
            return Err(breaks_rule(
                "KITH_PROJECTOR_IDLE_POLL_MS",
                &self.pipeline.projector_idle_poll_ms.to_string(),
            ));
        }
        if self.limits.persisted_only && self.limits.persisted_manifest.is_none() {
            return Err(breaks_rule("KITH_PERSISTED_ONLY", "true"));
        }
        // Both are at least 1 by their ranges.
        if self.pipeline.topic_min_insync_replicas > self.pipeline.topic_replication_factor {
            return Err(breaks_rule(
                "KITH_TOPIC_MIN_INSYNC_REPLICAS",
                &self.pipeline.topic_min_insync_replicas.to_string(),
            ));
        }
        if self.portability.account_domain.is_empty()
            || self
                .portability
                .account_domain
                .contains(|c: char| c == '@' || c == ',' || c.is_whitespace())
        {
            return Err(breaks_rule(
                "KITH_ACCOUNT_DOMAIN",
                &self.portability.account_domain,
            ));
        }
        if self.limits.max_query_bytes > self.limits.max_body_bytes {
            return Err(breaks_rule(
                "KITH_MAX_QUERY_BYTES",
                &self.limits.max_query_bytes.to_string(),
            ));
        }
        Ok(())
    }

    /// True when the JWT secret is the published development default.
    pub fn uses_dev_secret(&self) -> bool {
        self.auth.jwt_secret == DEV_JWT_SECRET
    }

    /// Refuses to accept tokens signed with the published development secret
    /// on an address other hosts can reach: anyone could sign tokens for any
    /// user. A deployment that takes only an identity provider's tokens (no
    /// `KITH_JWT_SECRET`, so HS256 is refused) still signs paging cursors,
    /// and refuses to sign them with the published secret there too: anyone
    /// could forge a cursor, and a list's cursors are how Kith knows a
    /// position came from that list.
    pub fn check_listener(&self) -> Result<(), ConfigError> {
        if self.auth.jwt_hs256 && self.uses_dev_secret() && !self.http.addr.ip().is_loopback() {
            return Err(invalid(
                "KITH_JWT_SECRET",
                "<development default>",
                &format!(
                    "the published development secret is only allowed on a loopback address, \
                     not {}; set KITH_JWT_SECRET",
                    self.http.addr
                ),
            ));
        }
        if self.auth.cursor_key == DEV_JWT_SECRET && !self.http.addr.ip().is_loopback() {
            return Err(invalid(
                "KITH_CURSOR_KEY",
                "<development default>",
                &format!(
                    "paging cursors would be signed with the published development secret, \
                     which lets anyone forge them; on {} set KITH_CURSOR_KEY (or KITH_JWT_SECRET)",
                    self.http.addr
                ),
            ));
        }
        Ok(())
    }
}
