//! `schema.graphql` (what clients see) and `schema.subgraph.graphql` (what
//! a Federation 2 composition reads) are contracts: each must match the
//! schema the code builds. Regenerate with
//! `KITH_UPDATE_SCHEMA=1 cargo test --test api schema`.

/// Compares the committed `file` with `generated`, or rewrites it.
fn matches_the_code(file: &str, generated: &str) {
    let path = format!("{}/{file}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("KITH_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{file} is out of date; run `KITH_UPDATE_SCHEMA=1 cargo test --test api schema` \
         and review the diff"
    );
}

#[test]
fn schema_file_matches_the_code() {
    matches_the_code("schema.graphql", &kith::testing::graph::sdl());
}

#[test]
fn subgraph_schema_file_matches_the_code() {
    let sdl = kith::testing::graph::subgraph_sdl();
    matches_the_code("schema.subgraph.graphql", &sdl);
    // What composition needs of Kith.
    for needed in [
        "url: \"https://specs.apollo.dev/federation/v2",
        "type User implements Node @key(fields: \"id\")",
        "type PageInfo @shareable",
        "type FollowConnection @shareable",
        "type Subscription",
    ] {
        assert!(sdl.contains(needed), "the subgraph schema lacks {needed:?}");
    }
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

/// Every type, field, argument, input field and enum value says what it is
/// (the description rules of `graphql-schema-linter`), so a client's tools
/// show a meaning for each.
#[test]
fn every_element_of_the_schema_is_described() {
    use async_graphql::parser::types::{TypeKind, TypeSystemDefinition};
    let sdl = kith::testing::graph::sdl();
    let document = async_graphql::parser::parse_schema(&sdl).expect("the SDL parses");
    let mut missing = Vec::new();
    let mut seen = 0;
    let mut check = |described: bool, what: String| {
        seen += 1;
        if !described {
            missing.push(what);
        }
    };
    for definition in &document.definitions {
        let TypeSystemDefinition::Type(ty) = definition else {
            continue;
        };
        let ty = &ty.node;
        let name = ty.name.node.as_str();
        // The Federation spec's own (`_Any`, `_Entity`, `_Service`): the
        // spec describes them.
        if name.starts_with('_') {
            continue;
        }
        check(ty.description.is_some(), format!("type {name}"));
        let fields = match &ty.kind {
            TypeKind::Object(o) => &o.fields,
            TypeKind::Interface(i) => &i.fields,
            TypeKind::InputObject(input) => {
                for field in &input.fields {
                    let field = &field.node;
                    check(
                        field.description.is_some(),
                        format!("input field {name}.{}", field.name.node),
                    );
                }
                continue;
            }
            TypeKind::Enum(e) => {
                for value in &e.values {
                    let value = &value.node;
                    check(
                        value.description.is_some(),
                        format!("enum value {name}.{}", value.value.node),
                    );
                }
                continue;
            }
            _ => continue,
        };
        for field in fields {
            let field = &field.node;
            // `_service` and `_entities`, likewise.
            if field.name.node.starts_with('_') {
                continue;
            }
            check(
                field.description.is_some(),
                format!("field {name}.{}", field.name.node),
            );
            for argument in &field.arguments {
                let argument = &argument.node;
                check(
                    argument.description.is_some(),
                    format!(
                        "argument {name}.{}({})",
                        field.name.node, argument.name.node
                    ),
                );
            }
        }
    }
    assert!(seen > 300, "the walk saw {seen} elements");
    assert!(missing.is_empty(), "undescribed: {missing:#?}");
}
