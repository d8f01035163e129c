//! The database schema has one home, the migrations; what is derived from
//! them is checked against them here:
//! - `db/schema.sql`: the schema after every migration (a schema-only
//!   `pg_dump`), to read the current SQL of any table or function without
//!   digging through the migrations that redefined it;
//! - `src/store/schema.rs`: diesel's table definitions, in `diesel
//!   print-schema`'s layout (`diesel.toml`), for every table;
//! - every `down.sql` reverts its `up.sql` exactly.
//!
//! Regenerate the two files with `KITH_UPDATE_SCHEMA=1 cargo test --test api db_schema`.
//! (The dump names the schema `kith`: it stands for whichever schema Kith
//! is migrated into.)

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use diesel::connection::Connection as _;
use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::MigrationHarness;
use kith::config::Config;
use kith::testing::store::migrate::MIGRATIONS;

const SCHEMA_SQL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/db/schema.sql");
const SCHEMA_RS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/store/schema.rs");
const REGENERATE: &str = "KITH_UPDATE_SCHEMA=1 cargo test --test api db_schema";

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// An empty schema of its own: (the server's URL, the schema's name, a URL
/// whose sessions work in it).
async fn empty_schema() -> (String, String, String) {
    let base = Config::from_env().expect("configuration").database.url;
    let name = format!(
        "kt_{}_{}_db{}",
        chrono::Utc::now().timestamp(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let (client, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
        .await
        .expect("PostgreSQL is up (scripts/stack up)");
    tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {name}"))
        .await
        .unwrap();
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}options=-c%20search_path%3D{name}");
    (base, name, url)
}

/// The schema-only dump of `schema`, the functions' comments included,
/// without what changes from run to run (the schema's name, the dump's
/// header, diesel's bookkeeping table).
fn dump(base: &str, schema: &str) -> String {
    let out = Command::new(pg_dump())
        .args(["--schema-only", "--no-owner", "--no-privileges"])
        .arg(format!("--schema={schema}"))
        .arg(format!(
            "--exclude-table={schema}.__diesel_schema_migrations"
        ))
        .arg(format!("--dbname={base}"))
        .output()
        .expect("pg_dump runs");
    assert!(
        out.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("a UTF-8 dump");
    let mut clean: String = text
        .lines()
        .filter(|l| {
            !(l.starts_with("\\restrict")
                || l.starts_with("\\unrestrict")
                || l.starts_with("-- Dumped from")
                || l.starts_with("-- Dumped by"))
        })
        .map(|l| l.replace(schema, "kith") + "\n")
        .collect();
    while clean.contains("\n\n\n") {
        clean = clean.replace("\n\n\n", "\n\n");
    }
    clean
}

/// The newest PostgreSQL's `pg_dump` (as `scripts/stack` picks its server).
fn pg_dump() -> String {
    crate::helpers::pg_tool("pg_dump")
}

/// Compares `actual` with the file at `path`, or writes it when asked to.
fn check_file(path: &str, actual: &str) {
    if std::env::var_os("KITH_UPDATE_SCHEMA").is_some() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    if committed != actual {
        let line = committed
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(actual.lines().count()));
        panic!(
            "{path} is not what the migrations make (first difference at line {}); \
             run `{REGENERATE}` and review the diff",
            line + 1
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn db_schema_sql_is_the_migrated_schema() {
    let (base, name, url) = empty_schema().await;
    kith::testing::store::migrate::run_pending(&url)
        .await
        .unwrap();
    let header = "-- The schema after every migration in migrations/ (pg_dump --schema-only).\n\
                  -- Generated; do not edit. The migrations are the source: see tests/api/db_schema.rs.\n";
    let schema = dump(&base, &name);
    check_file(SCHEMA_SQL, &format!("{header}{schema}"));
    // Every function, each overload apart, says what it is for
    // (db/README.md): its signature, as the dump writes it, is commented.
    let uncommented: Vec<&str> = schema
        .lines()
        .filter_map(|l| l.strip_prefix("CREATE FUNCTION kith."))
        .map(|l| l.split(')').next().unwrap_or(l))
        .filter(|f| !schema.contains(&format!("COMMENT ON FUNCTION kith.{f})")))
        .collect();
    assert!(
        uncommented.is_empty(),
        "functions without COMMENT ON FUNCTION: {uncommented:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn store_schema_rs_is_the_migrated_schema() {
    let (base, name, url) = empty_schema().await;
    kith::testing::store::migrate::run_pending(&url)
        .await
        .unwrap();
    check_file(SCHEMA_RS, &print_schema(&base, &name).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_down_migration_reverts_its_up() {
    let (base, name, url) = empty_schema().await;
    let reverted = tokio::task::spawn_blocking(move || {
        let mut conn = AsyncConnectionWrapper::<AsyncPgConnection>::establish(&url).unwrap();
        let mut checked = Vec::new();
        // Two dumps a migration: the schema after one is the next one's
        // "before" (its up is applied again below, and the check of the
        // next down compares with it).
        let mut before = dump(&base, &name);
        while conn.has_pending_migration(MIGRATIONS).unwrap() {
            let version = conn.run_next_migration(MIGRATIONS).unwrap().to_string();
            let after_up = dump(&base, &name);
            conn.revert_last_migration(MIGRATIONS).unwrap();
            let after_down = dump(&base, &name);
            assert!(
                before != after_up || version.is_empty(),
                "{version} changes nothing"
            );
            if before != after_down {
                let line = before
                    .lines()
                    .zip(after_down.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                panic!(
                    "the down.sql of {version} does not revert its up.sql; first difference:\n\
                     before up:  {:?}\nafter down: {:?}",
                    before.lines().nth(line),
                    after_down.lines().nth(line)
                );
            }
            conn.run_next_migration(MIGRATIONS).unwrap();
            before = after_up;
            checked.push(version);
        }
        checked
    })
    .await
    .unwrap();
    assert!(reverted.len() >= 10, "only {reverted:?} were checked");
}

/// diesel's `table!` definitions of every table in `schema`, in the layout
/// `diesel print-schema` writes (tables by name, columns by position).
async fn print_schema(base: &str, schema: &str) -> String {
    let (client, connection) = tokio_postgres::connect(base, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let columns = client
        .query(
            "SELECT c.table_name::TEXT, c.column_name::TEXT, c.udt_name::TEXT,
                    c.is_nullable = 'YES'
               FROM information_schema.columns c
               JOIN information_schema.tables t USING (table_schema, table_name)
              WHERE c.table_schema = $1 AND t.table_type = 'BASE TABLE'
                AND c.table_name <> '__diesel_schema_migrations'
              ORDER BY c.table_name, c.ordinal_position",
            &[&schema],
        )
        .await
        .unwrap();
    let keys = client
        .query(
            "SELECT k.table_name::TEXT, k.column_name::TEXT
               FROM information_schema.table_constraints c
               JOIN information_schema.key_column_usage k
                 USING (constraint_schema, constraint_name, table_name)
              WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_schema = $1
                AND k.table_name <> '__diesel_schema_migrations'
              ORDER BY k.table_name, k.ordinal_position",
            &[&schema],
        )
        .await
        .unwrap();
    // Per table: its primary key's columns, and every (column, diesel type).
    type Table = (Vec<String>, Vec<(String, String)>);
    let mut tables: BTreeMap<String, Table> = BTreeMap::new();
    for row in &keys {
        tables.entry(row.get(0)).or_default().0.push(row.get(1));
    }
    for row in &columns {
        let (table, column, udt, nullable): (String, String, String, bool) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        let sql_type = diesel_type(&udt);
        let sql_type = if nullable {
            format!("Nullable<{sql_type}>")
        } else {
            sql_type
        };
        tables.entry(table).or_default().1.push((column, sql_type));
    }
    let mut out = String::from("// @generated automatically by Diesel CLI.\n");
    for (table, (key, columns)) in &tables {
        out.push_str(&format!(
            "\ndiesel::table! {{\n    {table} ({}) {{\n",
            key.join(", ")
        ));
        for (column, sql_type) in columns {
            out.push_str(&format!("        {column} -> {sql_type},\n"));
        }
        out.push_str("    }\n}\n");
    }
    // A join for each single-column foreign key, unless two tables have
    // several (diesel cannot tell which to join on, and leaves them out).
    let keys = client
        .query(
            "SELECT child.relname::TEXT, parent.relname::TEXT, a.attname::TEXT
               FROM pg_constraint c
               JOIN pg_class child ON child.oid = c.conrelid
               JOIN pg_class parent ON parent.oid = c.confrelid
               JOIN pg_namespace n ON n.oid = child.relnamespace
               JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
              WHERE c.contype = 'f' AND n.nspname = $1 AND array_length(c.conkey, 1) = 1",
            &[&schema],
        )
        .await
        .unwrap();
    let mut joins: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for row in &keys {
        joins
            .entry((row.get(0), row.get(1)))
            .or_default()
            .push(row.get(2));
    }
    // As `diesel print-schema`: a table's key to itself is no join diesel
    // can name.
    for ((child, parent), columns) in joins.iter().filter(|((c, p), _)| c != p) {
        if let [column] = columns.as_slice() {
            out.push_str(&format!(
                "\ndiesel::joinable!({child} -> {parent} ({column}));\n"
            ));
        }
    }
    out.push_str("\ndiesel::allow_tables_to_appear_in_same_query!(");
    for table in tables.keys() {
        out.push_str(&format!("\n    {table},"));
    }
    out.push_str("\n);\n");
    out
}

/// diesel's name of a PostgreSQL type.
fn diesel_type(udt: &str) -> String {
    if let Some(element) = udt.strip_prefix('_') {
        return format!("Array<Nullable<{}>>", diesel_type(element));
    }
    match udt {
        "int2" => "Int2",
        "int4" => "Int4",
        "int8" => "Int8",
        "bool" => "Bool",
        "text" => "Text",
        "varchar" => "Varchar",
        "uuid" => "Uuid",
        "json" => "Json",
        "jsonb" => "Jsonb",
        "timestamptz" => "Timestamptz",
        "timestamp" => "Timestamp",
        "date" => "Date",
        "float4" => "Float4",
        "float8" => "Float8",
        "bytea" => "Bytea",
        "numeric" => "Numeric",
        "interval" => "Interval",
        other => panic!("no diesel type known for {other}: add it here"),
    }
    .to_string()
}

/// The counters Kith's code is built from (`model::with_counters`) are the
/// columns of `user_stats` between the user and the version, in order, and
/// every one is in the edge writes' answer (`kith_edge_result`).
#[tokio::test(flavor = "multi_thread")]
async fn the_counter_list_is_the_databases() {
    let (base, name, url) = empty_schema().await;
    kith::testing::store::migrate::run_pending(&url)
        .await
        .unwrap();
    let (client, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let columns = |sql: &'static str| {
        let client = &client;
        let name = name.clone();
        async move {
            client
                .query(sql, &[&name])
                .await
                .unwrap()
                .iter()
                .map(|r| r.get::<_, String>(0))
                .collect::<Vec<_>>()
        }
    };
    let stats = columns(
        "SELECT column_name::TEXT FROM information_schema.columns
          WHERE table_schema = $1 AND table_name = 'user_stats' ORDER BY ordinal_position",
    )
    .await;
    let mut expected = vec!["user_id".to_owned()];
    expected.extend(kith::model::COUNTER_NAMES.iter().map(|c| c.to_string()));
    expected.push("version".to_owned());
    assert_eq!(stats, expected, "user_stats's columns and the counter list");

    let result = columns(
        "SELECT a.attname::TEXT FROM pg_type t
           JOIN pg_namespace n ON n.oid = t.typnamespace
           JOIN pg_attribute a ON a.attrelid = t.typrelid AND a.attnum > 0
          WHERE n.nspname = $1 AND t.typname = 'kith_edge_result' ORDER BY a.attnum",
    )
    .await;
    for counter in kith::model::COUNTER_NAMES.iter().chain(&["version"]) {
        assert!(
            result.iter().any(|c| c == counter),
            "kith_edge_result has no {counter}: {result:?}"
        );
    }
}
