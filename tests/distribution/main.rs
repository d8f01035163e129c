//! Every statement Kith's hot paths run filters on its table's distribution
//! column, as `docs/scale-out.md` plans it — or is one of the deviations that
//! document names (each listed below with the section that explains it).
//!
//! Its own test binary: a process-wide diesel instrumentation records every
//! statement any connection of this process sends, so nothing else may run
//! here. The hot paths run for real (GraphQL mutations and queries with cold
//! caches, the relay and the projector); the bodies of the `kith_*` SQL
//! functions they call are read from the database and split into statements.

#[path = "../common/helpers/mod.rs"]
mod helpers;
#[allow(dead_code)]
#[path = "../common/http.rs"]
mod http_client;
#[allow(dead_code)]
#[path = "../common/rng.rs"]
mod rng;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use diesel::QueryableByName;
use diesel::connection::{Instrumentation, InstrumentationEvent};
use diesel::sql_types::Text;
use kith::model::UserId;
use kith::testing::auth::Viewer;
use kith::testing::graph::ids;
use kith::testing::pipeline::projector::ProjectorHooks;
use serde_json::json;

use helpers::{assert_ok, settled, spawn_app};

/// Statements sent by any connection of this process while recording.
static SENT: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Set once setup (migrations, users) is done.
static RECORDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

struct Recorder;

impl Instrumentation for Recorder {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        if let InstrumentationEvent::StartQuery { query, .. } = event
            && RECORDING.load(std::sync::atomic::Ordering::Relaxed)
        {
            let text = query.to_string();
            let sql = text.split(" -- binds:").next().unwrap_or(&text).to_owned();
            SENT.lock().unwrap().push(sql);
        }
    }
}

/// The distribution column of each distributed table (docs/scale-out.md,
/// "Tables"); the others stay on the coordinator.
const DISTRIBUTED: &[(&str, &str)] = &[
    ("users", "id"),
    ("user_stats", "user_id"),
    ("user_stats_tombstone", "user_id"),
    ("following", "from_user_id"),
    ("follower", "to_user_id"),
    ("hidden_edge", "from_user_id"),
    ("outbox", "actor_id"),
    ("content_event_ledger", "author_id"),
    ("account_transition", "account_id"),
];

/// Statements that do not filter on the distribution column today, each a
/// deviation `docs/scale-out.md` names: (a lowercase fragment that identifies
/// the statement, the table, the document's section that explains it).
const DEVIATIONS: &[(&str, &str, &str)] = &[
    ("handle = any", "users", "### Read path"),
    ("delete from outbox", "outbox", "### Pipeline"),
    ("insert into outbox", "outbox", "## Tables"),
    ("event_id = p_event", "content_event_ledger", "## Tables"),
    ("where applied_at <", "content_event_ledger", "## Tables"),
    // The account sweeper's scans.
    (
        "from account_transition order by",
        "account_transition",
        "### Off the hot path",
    ),
    ("u.status <> 'active'", "users", "### Off the hot path"),
    ("u.status <> 'active'", "following", "### Off the hot path"),
    ("from follow_request q", "users", "### Off the hot path"),
    (
        "cross join lateral",
        "following",
        "## Citus rules the current SQL breaks",
    ),
    ("unnest(p_actors", "users", "### Group commit"),
    ("unnest(p_actors", "user_stats", "### Group commit"),
    ("unnest(p_actors", "following", "### Group commit"),
    ("unnest(p_actors", "hidden_edge", "### Group commit"),
    ("unnest(p_user", "users", "### Set-based projector batches"),
    (
        "unnest(p_user",
        "user_stats",
        "### Set-based projector batches",
    ),
    (
        "unnest(p_to, p_from)",
        "follower",
        "### Set-based projector batches",
    ),
    (
        "cross join lateral",
        "follower",
        "## Citus rules the current SQL breaks",
    ),
];

/// Whether `statement` keeps `table` on the shards its filter names: an
/// insert names the column, anything else compares it to a bound value.
fn filters_on(statement: &str, table: &str, column: &str) -> bool {
    let s = statement.to_lowercase();
    if let Some(at) = s.find(&format!("insert into {table}")) {
        let rest = &s[at..];
        let head = &rest[..rest.find(')').unwrap_or(rest.len())];
        return head.contains(column);
    }
    compares_to_a_value(&s, column)
}

/// `[alias.]column = value`, `= ANY(value)` or `IN (value)`, where the value
/// is `$n`, a literal, or a plpgsql argument or variable (a name without a
/// dot: a dotted name is another table's column, a join).
fn compares_to_a_value(s: &str, column: &str) -> bool {
    let bytes = s.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut from = 0;
    while let Some(at) = s[from..].find(column) {
        let start = from + at;
        let end = start + column.len();
        from = end;
        if (start > 0 && word(bytes[start - 1])) || (end < s.len() && word(bytes[end])) {
            continue;
        }
        let rest = s[end..].trim_start();
        let value = if let Some(r) = rest.strip_prefix('=') {
            let r = r.trim_start();
            r.strip_prefix("any")
                .map_or(r, |r| r.trim_start().trim_start_matches('(').trim_start())
        } else if let Some(r) = rest.strip_prefix("in ") {
            r.trim_start().trim_start_matches('(').trim_start()
        } else {
            continue;
        };
        let name: String = value
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.' || *c == '$')
            .collect();
        if !name.is_empty() && !name.contains('.') {
            return true;
        }
    }
    false
}

/// The tables of `DISTRIBUTED` a statement reads or writes.
fn tables_of(statement: &str) -> Vec<(&'static str, &'static str)> {
    let s = statement.to_lowercase();
    DISTRIBUTED
        .iter()
        .copied()
        .filter(|(table, _)| {
            ["from ", "join ", "update ", "into "].iter().any(|kw| {
                s.match_indices(&format!("{kw}{table}")).any(|(i, m)| {
                    let after = s[i + m.len()..].chars().next();
                    !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                })
            })
        })
        .collect()
}

/// Splits a plpgsql body into its SQL statements (on `;`, outside quotes,
/// comments dropped).
fn statements_of(body: &str) -> Vec<String> {
    let code: String = body
        .lines()
        .map(|line| line.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in code.chars() {
        if c == '\'' {
            quoted = !quoted;
        }
        if c == ';' && !quoted {
            out.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    out.push(current);
    out.into_iter()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|s| !s.is_empty())
        .collect()
}

#[derive(QueryableByName)]
struct Function {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    body: String,
}

fn gid(user: UserId) -> serde_json::Value {
    json!(ids::user_id(user).to_string())
}

const PROFILE: &str = "query($id: ID!) { user(id: $id) { handle displayName
  counters { followings followers posts }
  followers(first: 20) { totalCount edges { cursor node { id handle
    counters { followings followers }
    viewerRelation { following followedBy mutual } } } }
  following(first: 20) { edges { node { id } } } } }";

#[tokio::test]
async fn hot_path_statements_filter_on_their_distribution_column() {
    diesel::connection::set_default_instrumentation(|| Some(Box::new(Recorder)))
        .expect("instrumentation set");
    let t = spawn_app().await;
    let relay = t.start_relay();
    let projector = t.start_projector(Arc::new(ProjectorHooks::default()));
    let me = t.user("me").await;
    t.user("stranger").await;
    let fans: Vec<UserId> = {
        let mut fans = Vec::new();
        for i in 0..6 {
            fans.push(t.user(&format!("fan{i}")).await);
        }
        fans
    };

    RECORDING.store(true, std::sync::atomic::Ordering::Relaxed);

    // Writes: follow, unfollow, the batch forms, removeFollower.
    for fan in &fans {
        assert_ok(&t.follow(*fan, me).await);
    }
    assert_ok(&t.follow(me, fans[0]).await);
    assert_ok(&t.unfollow(me, fans[0]).await);
    let many = "mutation($ids: [ID!]!) { followMany(input: {userIds: $ids}) { changedCount } }";
    let ids: Vec<_> = fans.iter().map(|f| gid(*f)).collect();
    assert_ok(
        &t.execute(Viewer::User(me), many, json!({ "ids": ids }))
            .await,
    );
    let remove = "mutation($id: ID!) { removeFollower(input: {userId: $id}) { changed } }";
    assert_ok(
        &t.execute(Viewer::User(me), remove, json!({ "id": gid(fans[5]) }))
            .await,
    );
    let mut everyone = fans.clone();
    everyone.push(me);
    // A content event from another service: the projector's counter path.
    let event = json!({"eventId": uuid::Uuid::new_v4(), "type": "PostPublished", "authorId": me});
    t.produce(
        &t.app.config.pipeline.content_topic,
        &me.to_string(),
        event.to_string().as_bytes(),
    )
    .await;
    settled(&t, &everyone, 60).await;
    helpers::eventually("the content event applied", 30, || async {
        (t.full_stats(me).await.posts == 1).then_some(())
    })
    .await;

    // The periodic jobs (the ledger's retention, the account sweeper) run on
    // timers that may or may not fire while recording: run each once here so
    // they are always seen.
    kith::testing::write::lifecycle::sweep(&t.app)
        .await
        .unwrap();
    {
        let mut conn = t.app.pg.get().await.unwrap();
        kith::testing::store::content::prune(&mut conn, chrono::Duration::hours(720), 10_000)
            .await
            .unwrap();
    }

    // Reads with cold caches: every fallback to PostgreSQL runs.
    t.flush_redis().await;
    let reads = [
        // A handle nobody has looked up yet.
        ("{ userByHandle(handle: \"stranger\") { id } }", json!({})),
        (PROFILE, json!({ "id": gid(me) })),
        (
            "query($ids: [ID!]!) { relationships(ids: $ids) { following followedBy } }",
            json!({ "ids": ids }),
        ),
    ];
    for (query, variables) in &reads {
        assert_ok(
            &t.execute(Viewer::User(fans[1]), query, variables.clone())
                .await,
        );
    }
    projector.stop().await.unwrap();
    relay.stop().await.unwrap();
    RECORDING.store(false, std::sync::atomic::Ordering::Relaxed);

    // The statements sent, and those inside the functions they called.
    // Less the test helpers' own whole-table comparisons (`settled`).
    let sent: Vec<String> = SENT
        .lock()
        .unwrap()
        .iter()
        .filter(|s| !s.contains(" EXCEPT ") && !s.contains("FROM outbox LIMIT 10001"))
        .cloned()
        .collect();
    let functions: Vec<Function> = diesel_async::RunQueryDsl::load(
        diesel::sql_query(
            "SELECT p.proname::text AS name, p.prosrc AS body FROM pg_proc p
             JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = current_schema() AND p.proname LIKE 'kith\\_%'",
        ),
        &mut t.conn().await,
    )
    .await
    .unwrap();
    // A name's overloads (a release's wrapper kept beside its successor)
    // are read as one body: which of them a statement calls is not known
    // here, and pg_proc returns them in no fixed order.
    let mut bodies: BTreeMap<String, String> = BTreeMap::new();
    for f in functions {
        let body = bodies.entry(f.name).or_default();
        body.push_str(&f.body);
        body.push_str(";\n");
    }
    let mut called = BTreeSet::new();
    let mut queue: Vec<String> = bodies
        .keys()
        .filter(|name| sent.iter().any(|s| s.contains(name.as_str())))
        .cloned()
        .collect();
    while let Some(name) = queue.pop() {
        if !called.insert(name.clone()) {
            continue;
        }
        for other in bodies.keys() {
            if bodies[&name].contains(other.as_str()) && !called.contains(other) {
                queue.push(other.clone());
            }
        }
    }
    assert!(
        called.contains("kith_change_edges") && called.contains("kith_ensure_stats"),
        "the write path's functions were seen: {called:?}"
    );
    let mut statements: Vec<(String, String)> = sent
        .iter()
        .map(|s| {
            let s = s.replace('"', "");
            (
                "sent".to_owned(),
                s.split_whitespace().collect::<Vec<_>>().join(" "),
            )
        })
        .collect();
    for name in &called {
        for statement in statements_of(&bodies[name]) {
            statements.push((name.clone(), statement));
        }
    }

    let mut checked = 0;
    let mut deviations_seen = BTreeSet::new();
    let mut violations = Vec::new();
    for (origin, statement) in &statements {
        for (table, column) in tables_of(statement) {
            checked += 1;
            if filters_on(statement, table, column) {
                continue;
            }

            let lower = statement.to_lowercase();
            match DEVIATIONS
                .iter()
                .position(|(fragment, t, _)| *t == table && lower.contains(fragment))
            {
                Some(i) => {
                    deviations_seen.insert(i);
                }
                None => violations.push(format!("{origin}: {table} ({column}): {statement}")),
            }
        }
    }
    assert!(checked > 40, "only {checked} table uses were checked");
    assert!(
        violations.is_empty(),
        "hot-path statements that do not filter on the distribution column:\n{}",
        violations.join("\n")
    );
    // Every named deviation still exists: when one is fixed, it leaves this
    // list and docs/scale-out.md.
    let stale: Vec<_> = DEVIATIONS
        .iter()
        .enumerate()
        .filter(|(i, _)| !deviations_seen.contains(i))
        .map(|(_, d)| d)
        .collect();
    assert!(stale.is_empty(), "deviations no longer seen: {stale:?}");
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/scale-out.md")).unwrap();
    for (_, _, heading) in DEVIATIONS {
        assert!(
            doc.contains(heading),
            "docs/scale-out.md has no section {heading:?}"
        );
    }
}
