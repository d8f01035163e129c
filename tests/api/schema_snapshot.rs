//! `schema.graphql` is a contract: it must match the schema the code builds.
//! Regenerate with `KITH_UPDATE_SCHEMA=1 cargo test --test api schema`.

#[test]
fn schema_file_matches_the_code() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema.graphql");
    let generated = kith::testing::graph::sdl();
    if std::env::var_os("KITH_UPDATE_SCHEMA").is_some() {
        std::fs::write(path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "schema.graphql is out of date; run `KITH_UPDATE_SCHEMA=1 cargo test --test api schema` \
         and review the diff"
    );
}

#[test]
fn schema_exposes_no_private_fields() {
    let sdl = kith::testing::graph::sdl();
    let fields: Vec<String> = sdl
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('"') && !line.is_empty())
        .filter_map(|line| line.split([':', '(']).next())
        .map(|name| name.trim().to_lowercase())
        .collect();
    assert!(fields.contains(&"handle".to_owned()), "field parsing works");
    for private in ["email", "phone", "password", "status"] {
        assert!(
            !fields.contains(&private.to_owned()),
            "schema exposes {private}"
        );
    }
}
