//! The configuration's own tests: defaults, refusals, and the settings
//! table against the parser and the generated document.

use super::*;

#[test]
fn every_setting_is_read_and_only_settings_are() {
    let asked = std::sync::Mutex::new(std::collections::BTreeSet::new());
    Config::from_lookup(|name| {
        asked.lock().unwrap().insert(name.to_owned());
        None
    })
    .unwrap();
    let asked = asked.into_inner().unwrap();
    let declared: std::collections::BTreeSet<String> = settings::all()
        .filter(|s| s.kind == settings::Kind::Value)
        .map(|s| s.name.to_owned())
        .collect();
    assert_eq!(
        asked, declared,
        "read by the parser vs declared in settings.rs"
    );
}

#[test]
fn the_configuration_document_is_generated_from_the_settings() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
    let generated = reference();
    if std::env::var_os("KITH_UPDATE_DOCS").is_some() {
        std::fs::write(path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap();
    assert!(
        committed == generated,
        "docs/configuration.md differs from src/config/settings.rs; \
         KITH_UPDATE_DOCS=1 cargo test --lib config rewrites it"
    );
}

#[test]
fn defaults_match_the_local_stack() {
    let config = Config::from_lookup(|_| None).unwrap();
    assert_eq!(config.http.addr.to_string(), "127.0.0.1:8080");
    assert_eq!(config.writes.rate_limit_capacity, 100);
    assert_eq!(config.writes.rate_limit_per_sec, 1.0);
    assert!(config.uses_dev_secret());
}

#[test]
fn rejects_bad_values_with_the_variable_name() {
    let err =
        Config::from_lookup(|name| (name == "KITH_RATE_LIMIT_PER_SEC").then(|| "fast".to_owned()))
            .unwrap_err();
    assert!(err.to_string().contains("KITH_RATE_LIMIT_PER_SEC"));
    let err = Config::from_lookup(|name| (name == "KITH_JWT_SECRET").then(|| "short".into()))
        .unwrap_err();
    assert!(!err.to_string().contains("short"), "secret leaked: {err}");
    let timeout = |ms: &'static str| {
        Config::from_lookup(|name| (name == "KITH_REQUEST_TIMEOUT_MS").then(|| ms.to_owned()))
    };
    assert!(timeout("60000").is_ok());
    let err = timeout("60001").unwrap_err().to_string();
    assert!(err.contains("KITH_REQUEST_TIMEOUT_MS"), "{err}");
}

#[test]
fn every_rule_of_the_settings_table_is_checked() {
    // Values breaking each rule (the other settings at their defaults).
    let long = "a-key-of-more-than-sixteen-bytes";
    let breaking: &[(&str, &[(&str, &str)])] = &[
        (
            "DATABASE_SESSION_URL",
            &[("KITH_PG_STATEMENT_CACHE", "false")],
        ),
        (
            "KITH_TOPIC_MIN_INSYNC_REPLICAS",
            &[("KITH_TOPIC_MIN_INSYNC_REPLICAS", "4")],
        ),
        (
            "KITH_PROJECTOR_IDLE_POLL_MS",
            &[("KITH_PROJECTOR_IDLE_POLL_MS", "5")],
        ),
        (
            "KITH_MAX_QUERY_BYTES",
            &[("KITH_MAX_QUERY_BYTES", "2000000")],
        ),
        ("KITH_JWT_SECRET", &[("KITH_JWT_SECRET", "short")]),
        (
            "KITH_CURSOR_KEY",
            &[("KITH_CURSOR_KEY", "short"), ("KITH_JWT_SECRET", long)],
        ),
        (
            "KITH_RATE_LIMIT_PER_SEC",
            &[("KITH_RATE_LIMIT_PER_SEC", "0")],
        ),
        ("KITH_ACCOUNT_DOMAIN", &[("KITH_ACCOUNT_DOMAIN", "a@b")]),
        ("KITH_PERSISTED_ONLY", &[("KITH_PERSISTED_ONLY", "true")]),
        ("KITH_LOG_FORMAT", &[("KITH_LOG_FORMAT", "yaml")]),
        ("KITH_JWT_USER_LOOKUP", &[("KITH_JWT_USER_LOOKUP", "email")]),
    ];
    let mut ruled: Vec<&str> = settings::SECTIONS
        .iter()
        .flat_map(|s| s.settings)
        .filter(|s| s.rule.is_some())
        .map(|s| s.name)
        .collect();
    let mut named: Vec<&str> = breaking.iter().map(|(name, _)| *name).collect();
    ruled.sort_unstable();
    named.sort_unstable();
    assert_eq!(
        named, ruled,
        "a rule without a case here, or a case without a rule"
    );
    for (name, values) in breaking {
        let err = Config::from_lookup(|n| {
            values
                .iter()
                .find(|(variable, _)| *variable == n)
                .map(|(_, value)| (*value).to_owned())
        })
        .expect_err(name)
        .to_string();
        // Refused in the reference's own words.
        let rule = settings::find(name).and_then(|s| s.rule).unwrap();
        assert!(
            err.contains(name) && err.contains(rule),
            "{name}: {err} (the rule: {rule})"
        );
    }
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
fn an_identity_provider_alone_serves_any_address_with_a_cursor_key() {
    let config = Config::from_lookup(|name| match name {
        "KITH_HTTP_ADDR" => Some("0.0.0.0:8080".to_owned()),
        "KITH_JWT_JWKS_URL" => Some("https://id.example/.well-known/jwks.json".to_owned()),
        _ => None,
    })
    .unwrap();
    assert!(
        !config.auth.jwt_hs256,
        "no secret: HS256 tokens are refused"
    );
    // Cursors still need a key of their own: not the published one.
    let err = config.check_listener().unwrap_err().to_string();
    assert!(err.contains("KITH_CURSOR_KEY"), "{err}");
    let config = Config::from_lookup(|name| match name {
        "KITH_HTTP_ADDR" => Some("0.0.0.0:8080".to_owned()),
        "KITH_JWT_JWKS_URL" => Some("https://id.example/.well-known/jwks.json".to_owned()),
        "KITH_CURSOR_KEY" => Some("a-cursor-key-of-enough-length".to_owned()),
        _ => None,
    })
    .unwrap();
    assert!(config.check_listener().is_ok());
    assert_ne!(config.auth.cursor_key, config.auth.jwt_secret);
}

#[test]
fn topic_defaults_are_safe_for_a_cluster() {
    let config = Config::from_lookup(|_| None).unwrap();
    assert_eq!(
        (
            config.pipeline.topic_replication_factor,
            config.pipeline.topic_min_insync_replicas
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

#[test]
fn a_transaction_pooler_needs_a_session_url() {
    let pooled = |session: Option<&'static str>| {
        Config::from_lookup(move |name| match name {
            "DATABASE_URL" => Some("postgres://kith:kith@127.0.0.1:6432/kith".into()),
            "KITH_PG_STATEMENT_CACHE" => Some("false".into()),
            "DATABASE_SESSION_URL" => session.map(str::to_owned),
            _ => None,
        })
    };
    let err = pooled(None).unwrap_err().to_string();
    assert!(err.contains("DATABASE_SESSION_URL"), "{err}");
    let config = pooled(Some("postgres://kith:kith@127.0.0.1:5432/kith")).unwrap();
    assert_eq!(
        config.session_url(),
        "postgres://kith:kith@127.0.0.1:5432/kith"
    );
    assert!(!config.database.pg_statement_cache);
    // Without a pooler, sessions use DATABASE_URL.
    let direct = Config::from_lookup(|_| None).unwrap();
    assert_eq!(direct.session_url(), direct.database.url);
}

#[test]
fn every_default_is_within_its_range_and_a_value_outside_is_refused() {
    for setting in settings::all() {
        if let (Some(default), Some(range)) = (setting.default, setting.range()) {
            assert_eq!(
                setting.refuses(default),
                None,
                "{}: {default} ({range})",
                setting.name
            );
        }
    }
    for (name, value, reason) in [
        ("KITH_WRITE_BATCH", "0", "must be from 1 to 1000"),
        ("KITH_WRITE_BATCH", "1001", "must be from 1 to 1000"),
        ("KITH_FOLLOWINGS_RATIO", "NaN", "must be at least 0"),
        ("KITH_FOLLOWINGS_RATIO", "-0.5", "must be at least 0"),
        (
            "KITH_REQUEST_TIMEOUT_MS",
            "60001",
            "must be from 10 to 60000",
        ),
        ("DATABASE_POOL_SIZE", "0", "must be at least 1"),
    ] {
        let err = Config::from_lookup(|n| (n == name).then(|| value.to_owned())).unwrap_err();
        assert_eq!(
            (err.name, err.reason.as_str()),
            (name, reason),
            "{name}={value}"
        );
    }
}
