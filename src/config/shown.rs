//! How the settings that hold secrets show in `Debug`: database, Redis and
//! JWKS URLs that hold a password as their scheme alone, the JWT secret and the cursor key hidden,
//! and the librdkafka properties that carry credentials hidden. A
//! configuration printed into a log or a panic gives nothing away.
//!
//! Each section's `Debug` destructures it whole, so a field added to a
//! section does not compile until it is listed here, shown or hidden.

use std::fmt;

use super::sections::{AuthSettings, DatabaseSettings, PipelineSettings, RedisSettings};

const HIDDEN: &str = "<hidden>";

/// `Debug` of a section: `shown` fields as they are, `hidden` ones through
/// the function beside each.
macro_rules! debug_hiding {
    ($ty:ident { $($shown:ident),* $(,)? } hiding { $($hidden:ident => $how:expr),* $(,)? }) => {
        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let $ty { $($shown,)* $($hidden,)* } = self;
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($shown), $shown))*
                    $(.field(stringify!($hidden), &$how($hidden)))*
                    .finish()
            }
        }
    };
}

debug_hiding!(DatabaseSettings {
    pg_statement_cache, replica_max_lag_ms, pool_size, statement_timeout_ms,
    write_batch, write_batches_in_flight, auto_migrate,
} hiding {
    url => url_shown,
    session_url => optional_url_shown,
    replica_url => optional_url_shown,
});

debug_hiding!(RedisSettings { pool_size, prefix, timeout_ms } hiding { url => url_shown });

debug_hiding!(PipelineSettings {
    kafka_brokers, follow_topic, content_topic, dead_letter_topic, topic_partitions,
    topic_replication_factor, topic_min_insync_replicas, consumer_group, relay_batch,
    relay_poll_ms, projector_batch, fetch_wait_ms, projector_idle_poll_ms,
    projector_lease_ms, content_ledger_retention_hours,
} hiding {
    kafka_properties => properties_shown,
});

debug_hiding!(AuthSettings {
    jwt_hs256, jwt_jwks_min_refresh_ms, jwt_jwks_ttl_secs,
    jwt_public_key_pem, jwt_issuer, jwt_audience, jwt_leeway_secs, jwt_user_claim, service_clients,
    jwt_user_lookup,
} hiding {
    jwt_secret => hidden,
    cursor_key => hidden,
    jwt_jwks_url => optional_url_shown,
});

fn hidden(_: &str) -> &'static str {
    HIDDEN
}

/// A connection string as it shows: as it is when it holds no password,
/// else its scheme alone (`postgres://<hidden>`). It holds one when its user
/// info has one (`kith:s3cret@`) or it names one anywhere (`password=`,
/// Redis's `pass=`, libpq's `key=value` form), however it is spelt or
/// escaped: hiding too much is harmless here, hiding too little is not.
fn url_shown(url: &str) -> String {
    let scheme_end = url.find("://");
    let user_info_password = scheme_end.is_some_and(|start| {
        let rest = &url[start + 3..];
        rest.rfind('@').is_some_and(|at| rest[..at].contains(':'))
    });
    if !user_info_password && !url.to_ascii_lowercase().contains("pass") {
        return url.to_owned();
    }
    match scheme_end {
        Some(end) => format!("{}://{HIDDEN}", &url[..end]),
        None => HIDDEN.to_owned(),
    }
}

fn optional_url_shown(url: &Option<String>) -> Option<String> {
    url.as_deref().map(url_shown)
}

/// The librdkafka properties, the values of those that carry credentials
/// (passwords, passphrases, secrets, JAAS and OAUTHBEARER configurations,
/// private keys) hidden.
fn properties_shown(properties: &[(String, String)]) -> Vec<(&str, &str)> {
    properties
        .iter()
        .map(|(name, value)| {
            let secret = [
                "password",
                "passphrase",
                "secret",
                "jaas",
                "key.pem",
                "private.key",
                "oauthbearer.config",
            ]
            .iter()
            .any(|word| name.to_ascii_lowercase().contains(word));
            (name.as_str(), if secret { HIDDEN } else { value.as_str() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_show_without_their_passwords() {
        for (url, shown) in [
            ("postgres://kith:s3cret@db:5432/kith", "postgres://<hidden>"),
            ("postgres://kith:pa/ss@db/kith", "postgres://<hidden>"),
            ("postgres://kith:a#b?c@db/kith", "postgres://<hidden>"),
            (
                "postgres://db/kith?user=kith&password=p@ss",
                "postgres://<hidden>",
            ),
            (
                "host=db user=kith PASSWORD = s3cret dbname=kith",
                "<hidden>",
            ),
            ("host=db password='it\\'s x' user=kith", "<hidden>"),
            ("redis://:s3cret@cache:6379/0", "redis://<hidden>"),
            (
                "redis+cluster://u:s3cret@a:7000,b:7001",
                "redis+cluster://<hidden>",
            ),
            (
                "redis+unix:///run/redis.sock?pass=s3cret",
                "redis+unix://<hidden>",
            ),
            (
                "postgres://kith@db:5432/kith",
                "postgres://kith@db:5432/kith",
            ),
            ("postgres://db/kith?user=a@b", "postgres://db/kith?user=a@b"),
            (
                "redis+cluster://a:7000,b:7001",
                "redis+cluster://a:7000,b:7001",
            ),
            (
                "host=db user=kith dbname=kith",
                "host=db user=kith dbname=kith",
            ),
        ] {
            assert_eq!(url_shown(url), shown, "{url}");
        }
    }

    #[test]
    fn a_printed_configuration_holds_no_secret() {
        let mut config = crate::config::Config::from_lookup(|_| None).unwrap();
        config.database.url = "postgres://kith:db-s3cret@db/kith".to_owned();
        config.database.replica_url =
            Some("postgres://kith:replica-s3cret@replica/kith".to_owned());
        config.redis.url = "redis://:redis-s3cret@cache".to_owned();
        config.auth.jwt_secret = "jwt-s3cret-of-enough-length".to_owned();
        config.auth.cursor_key = "cursor-s3cret-of-enough-length".to_owned();
        config.pipeline.kafka_properties = vec![
            ("sasl.username".to_owned(), "kith".to_owned()),
            ("sasl.password".to_owned(), "kafka-s3cret".to_owned()),
            ("sasl.jaas.config".to_owned(), "jaas-s3cret".to_owned()),
            (
                "sasl.oauthbearer.assertion.private.key.passphrase".to_owned(),
                "passphrase-s3cret".to_owned(),
            ),
        ];
        let printed = format!("{config:?}");
        assert!(!printed.contains("s3cret"), "{printed}");
        assert!(printed.contains("sasl.username") && printed.contains("\"kith\""));
        assert!(printed.contains("postgres://<hidden>"));
    }
}
