//! The schema's deprecation policy (docs/api.md, Deprecations):
//! `graphql-inspector diff` between the last release's schema and
//! `schema.graphql`, with Kith's rule (`tests/http-audit/schema-policy.cjs`),
//! passes; and the rule refuses what the policy forbids.

use std::path::{Path, PathBuf};

fn audit_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/http-audit")
}

/// Runs the diff from `old` to `new` (paths) with `changelog` on `today`,
/// new deprecations' notice counted from `notice_from`: whether it passed,
/// and what it printed.
fn diff(
    old: &Path,
    new: &Path,
    changelog: &Path,
    today: &str,
    notice_from: &str,
) -> (bool, String) {
    let dir = audit_dir();
    assert!(
        dir.join("node_modules/@graphql-inspector/cli").exists(),
        "@graphql-inspector/cli is not installed (scripts/stack tools)"
    );
    let output = std::process::Command::new("node")
        .arg("node_modules/@graphql-inspector/cli/cjs/index.js")
        .arg("diff")
        .arg(old)
        .arg(new)
        .args(["--rule", "./schema-policy.cjs"])
        .env("KITH_SCHEMA_CHANGELOG", changelog)
        .env("KITH_SCHEMA_TODAY", today)
        .env("KITH_SCHEMA_NOTICE_FROM", notice_from)
        .current_dir(&dir)
        .output()
        .expect("node runs (scripts/stack tools installs it)");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), printed)
}

/// The day of the last release: the changelog's first dated heading.
fn last_release(changelog: &str) -> String {
    changelog
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .find(|heading| chrono::NaiveDate::parse_from_str(heading, "%Y-%m-%d").is_ok())
        .expect("the changelog has a dated release")
        .to_owned()
}

#[test]
fn the_schema_keeps_the_policy_against_the_last_release() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let today = chrono::Utc::now().date_naive().to_string();
    let changelog = root.join("docs/schema-changelog.md");
    // A deprecation not released yet counts its notice from the last
    // release, so that this verdict does not change as days pass; the
    // release script checks it again on its own day.
    let released = last_release(&std::fs::read_to_string(&changelog).unwrap());
    let (passed, printed) = diff(
        &root.join("docs/schema-released.graphql"),
        &root.join("schema.graphql"),
        &changelog,
        &today,
        &released,
    );
    assert!(
        passed,
        "the schema breaks the deprecation policy:\n{printed}"
    );
}

const RELEASED: &str = r#"
type Query {
  a(x: Int, y: Int): Int
  b: Int @deprecated(reason: "Use `a`. Removed after 2027-01-01.")
  c: Int
  e: E
  old: Old @deprecated(reason: "Use `a`. Removed after 2027-01-01.")
  node: Node
  d(z: Int @deprecated(reason: "Removed after 2027-06-01.")): Int
}
type Old { v: Int }
interface Node { id: ID! }
type Post implements Node { id: ID! }
enum E { X }
"#;

/// A fixture: a released schema and a changelog in a directory of their
/// own; new deprecations' notice counts from 2026-12-04.
struct Fixture {
    dir: PathBuf,
}

impl Fixture {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("kith-schema-policy-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("released.graphql"), RELEASED).unwrap();
        Self { dir }
    }

    /// The diff from the release to `schema` on `today`, with `unreleased`
    /// as the changelog's Unreleased section.
    fn check(&self, schema: &str, unreleased: &str, today: &str) -> (bool, String) {
        std::fs::write(self.dir.join("new.graphql"), schema).unwrap();
        let changelog = format!(
            "# Schema changelog\n\n## Unreleased\n\n{unreleased}\n\n## 2026-11-01\n\n\
             - **Dangerous: new enum value** `E.Y`.\n"
        );
        std::fs::write(self.dir.join("changelog.md"), changelog).unwrap();
        diff(
            &self.dir.join("released.graphql"),
            &self.dir.join("new.graphql"),
            &self.dir.join("changelog.md"),
            today,
            "2026-12-04",
        )
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn refused(verdict: (bool, String), why: &str) {
    let (passed, printed) = verdict;
    assert!(
        !passed && printed.contains(why),
        "not refused for {why:?}:\n{printed}"
    );
}

fn passed(verdict: (bool, String)) {
    let (passed, printed) = verdict;
    assert!(passed, "{printed}");
}

#[test]
fn a_removal_waits_for_its_deprecations_date() {
    let f = Fixture::new("removal");
    let without_c = RELEASED.replace("  c: Int\n", "");
    refused(
        f.check(&without_c, "", "2027-06-01"),
        "removed without a deprecation",
    );

    let b = "  b: Int @deprecated(reason: \"Use `a`. Removed after 2027-01-01.\")\n";
    let without_b = RELEASED.replace(b, "");
    assert_ne!(without_b, RELEASED);
    // Not before its date, nor on it.
    refused(
        f.check(&without_b, "", "2027-01-01"),
        "deprecated until 2027-01-01",
    );
    passed(f.check(&without_b, "", "2027-01-02"));

    // A type goes with the last field that named it.
    let old = "  old: Old @deprecated(reason: \"Use `a`. Removed after 2027-01-01.\")\n";
    let without_old = RELEASED
        .replace(old, "")
        .replace("type Old { v: Int }\n", "");
    assert!(!without_old.contains("Old"));
    passed(f.check(&without_old, "", "2027-01-02"));
    refused(f.check(&without_old, "", "2026-12-31"), "deprecated until");

    // A type no field names may still be reached through its interface.
    let without_post = RELEASED.replace("type Post implements Node { id: ID! }\n", "");
    assert_ne!(without_post, RELEASED);
    refused(
        f.check(&without_post, "", "2027-06-01"),
        "reached through an interface",
    );
}

#[test]
fn a_deprecation_names_a_removal_date_three_months_after_its_release() {
    let f = Fixture::new("deprecation");
    let deprecate = |reason: &str| {
        RELEASED.replace(
            "  a(x: Int, y: Int): Int\n",
            &format!("  a(x: Int, y: Int): Int @deprecated(reason: \"{reason}\")\n"),
        )
    };
    refused(
        f.check(&deprecate("Use `c`."), "", "2026-12-04"),
        "Removed after YYYY-MM-DD",
    );
    refused(
        f.check(
            &deprecate("Use `c`. Removed after 2027-01-15."),
            "",
            "2026-12-04",
        ),
        "at least 90 days after 2026-12-04",
    );
    refused(
        f.check(
            &deprecate("Use `c`. Removed after 2027-13-45."),
            "",
            "2026-12-04",
        ),
        "a real day",
    );
    // Counted from the release that announces it, not from the day the
    // check runs: the same schema passes on any later day.
    for today in ["2026-12-04", "2027-02-20"] {
        passed(f.check(&deprecate("Use `c`. Removed after 2027-03-04."), "", today));
    }

    // An argument's deprecation too.
    let argument = RELEASED.replace(
        "a(x: Int, y: Int)",
        "a(x: Int, y: Int @deprecated(reason: \"Removed after 2027-01-15.\"))",
    );
    refused(f.check(&argument, "", "2026-12-04"), "at least 90 days");

    // An announced deprecation may be postponed, not brought forward.
    let moved = |date: &str| {
        RELEASED.replace(
            "`a`. Removed after 2027-01-01.\")\n  c: Int",
            &format!("`a`. Removed after {date}.\")\n  c: Int"),
        )
    };
    assert_ne!(moved("2027-06-01"), RELEASED);
    passed(f.check(&moved("2027-06-01"), "", "2026-12-04"));
    refused(
        f.check(&moved("2026-12-20"), "", "2026-12-04"),
        "postponed, not brought forward",
    );
    // An argument's too, even to a date still 90 days out.
    let argument_moved = |date: &str| {
        RELEASED.replace(
            "after 2027-06-01.\")): Int",
            &format!("after {date}.\")): Int"),
        )
    };
    assert_ne!(argument_moved("2027-09-01"), RELEASED);
    passed(f.check(&argument_moved("2027-09-01"), "", "2026-12-04"));
    refused(
        f.check(&argument_moved("2027-03-05"), "", "2026-12-04"),
        "postponed, not brought forward",
    );
}

#[test]
fn a_new_enum_value_and_a_breaking_fix_are_named_in_the_changelog() {
    let f = Fixture::new("changelog");
    let with_y = RELEASED.replace("enum E { X }", "enum E { X Y }");
    // Named only under a release already made: not this change's entry.
    refused(f.check(&with_y, "", "2026-12-04"), "not in the changelog");
    passed(f.check(
        &with_y,
        "- **Dangerous: new enum value** `E.Y`.",
        "2026-12-04",
    ));

    let retyped = RELEASED.replace("  c: Int\n", "  c: String\n");
    refused(
        f.check(&retyped, "- **Changed** `Query.c`.", "2026-12-04"),
        "**Breaking** fix",
    );
    passed(f.check(
        &retyped,
        "- **Breaking** (privacy) `Query.c` shows less.",
        "2026-12-04",
    ));
}
