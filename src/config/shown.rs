//! How the settings that hold secrets show in `Debug`: database and Redis
//! URLs without their passwords, the JWT secret and the cursor key hidden,
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
    jwt_hs256, jwt_jwks_url, jwt_jwks_min_refresh_ms, jwt_jwks_ttl_secs,
    jwt_public_key_pem, jwt_issuer, jwt_audience, jwt_leeway_secs, jwt_user_claim,
    jwt_user_lookup,
} hiding {
    jwt_secret => hidden,
    cursor_key => hidden,
});

fn hidden(_: &str) -> &'static str {
    HIDDEN
}

/// A connection string with its passwords hidden: the user info's
/// (`postgres://kith:<hidden>@db/kith`) and every `password=` value, in a
/// URL's query or in libpq's `key=value` form. When the string is
/// ambiguous (a password with an unescaped `/` or `@`) more is hidden, never
/// less.
fn url_shown(url: &str) -> String {
    let mut shown = url.to_owned();
    if let Some(start) = shown.find("://").map(|i| i + 3)
        && let Some(at) = shown[start..].rfind('@').map(|i| start + i)
        && let Some(colon) = shown[start..at].find(':').map(|i| start + i)
    {
        shown.replace_range(colon + 1..at, HIDDEN);
    }
    let mut from = 0;
    while let Some(found) = shown[from..].to_ascii_lowercase().find("password=") {
        let value = from + found + "password=".len();
        // libpq quotes a value with spaces: `password='a b'`.
        let end = if shown[value..].starts_with('\'') {
            shown[value + 1..]
                .find('\'')
                .map_or(shown.len(), |i| value + i + 2)
        } else {
            shown[value..]
                .find(['&', ' ', '\t', '\n'])
                .map_or(shown.len(), |i| value + i)
        };
        shown.replace_range(value..end, HIDDEN);
        from = value + HIDDEN.len();
    }
    shown
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
            .any(|word| name.contains(word));
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
            (
                "postgres://kith:s3cret@db:5432/kith",
                "postgres://kith:<hidden>@db:5432/kith",
            ),
            (
                "postgres://kith:p@ss@db/kith?sslmode=require",
                "postgres://kith:<hidden>@db/kith?sslmode=require",
            ),
            (
                "redis://:s3cret@cache:6379/0",
                "redis://:<hidden>@cache:6379/0",
            ),
            (
                "redis+cluster://u:s3cret@a:7000,b:7001",
                "redis+cluster://u:<hidden>@a:7000,b:7001",
            ),
            ("postgres://kith@db/kith", "postgres://kith@db/kith"),
            ("postgres://db/kith?user=a@b", "postgres://db/kith?user=a@b"),
            (
                "postgres://kith:pa/ss@db/kith",
                "postgres://kith:<hidden>@db/kith",
            ),
            (
                "postgres://kith:a#b?c@db/kith",
                "postgres://kith:<hidden>@db/kith",
            ),
            (
                "postgres://db/kith?user=kith&password=s3cret&sslmode=require",
                "postgres://db/kith?user=kith&password=<hidden>&sslmode=require",
            ),
            (
                "host=db user=kith PASSWORD=s3cret dbname=kith",
                "host=db user=kith PASSWORD=<hidden> dbname=kith",
            ),
            (
                "host=db password='a b' user=kith",
                "host=db password=<hidden> user=kith",
            ),
            ("not a url", "not a url"),
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
        assert!(printed.contains("postgres://kith:<hidden>@db/kith"));
    }
}
