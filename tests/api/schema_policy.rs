//! The schema's deprecation policy (docs/api.md, Deprecations):
//! `graphql-inspector diff` between the last release's schema and
//! `schema.graphql`, with Kith's rule (`tests/http-audit/schema-policy.cjs`),
//! passes; and the rule refuses what the policy forbids.

use std::path::{Path, PathBuf};

fn audit_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/http-audit")
}

/// Runs the diff from `old` to `new` (paths) with `changelog` on `today`:
/// whether it passed, and what it printed.
fn diff(old: &Path, new: &Path, changelog: &Path, today: &str) -> (bool, String) {
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

#[test]
fn the_schema_keeps_the_policy_against_the_last_release() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let today = chrono::Utc::now().date_naive().to_string();
    let (passed, printed) = diff(
        &root.join("docs/schema-released.graphql"),
        &root.join("schema.graphql"),
        &root.join("docs/schema-changelog.md"),
        &today,
    );
    assert!(
        passed,
        "the schema breaks the deprecation policy:\n{printed}"
    );
}

const RELEASED: &str = r#"
type Query {
  a: Int
  b: Int @deprecated(reason: "Use `a`. Removed after 2027-01-01.")
  c: Int
  e: E
}
enum E { X }
"#;

/// A fixture: (schema, changelog) in a directory of their own.
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

    /// The diff from the release to `schema`, with `unreleased` as the
    /// changelog's Unreleased section.
    fn check(&self, schema: &str, unreleased: &str, today: &str) -> (bool, String) {
        std::fs::write(self.dir.join("new.graphql"), schema).unwrap();
        let changelog = format!(
            "# Schema changelog\n\n## Unreleased\n\n{unreleased}\n\n## 2026-11-01\n\n- **Dangerous: new enum value** `E.Y`.\n"
        );
        std::fs::write(self.dir.join("changelog.md"), changelog).unwrap();
        diff(
            &self.dir.join("released.graphql"),
            &self.dir.join("new.graphql"),
            &self.dir.join("changelog.md"),
            today,
        )
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_removal_waits_for_its_deprecations_date() {
    let f = Fixture::new("removal");
    let without_c = RELEASED.replace("  c: Int\n", "");
    let (passed, printed) = f.check(&without_c, "", "2027-06-01");
    assert!(
        !passed && printed.contains("removed without a deprecation"),
        "{printed}"
    );

    let without_b = RELEASED.replace(
        "  b: Int @deprecated(reason: \"Use `a`. Removed after 2027-01-01.\")\n",
        "",
    );
    assert_ne!(without_b, RELEASED);
    let (passed, printed) = f.check(&without_b, "", "2026-12-31");
    assert!(
        !passed && printed.contains("deprecated until 2027-01-01"),
        "{printed}"
    );
    let (passed, printed) = f.check(&without_b, "", "2027-01-02");
    assert!(passed, "{printed}");
}

#[test]
fn a_deprecation_names_a_removal_date_three_months_ahead() {
    let f = Fixture::new("deprecation");
    let deprecate = |reason: &str| {
        RELEASED.replace(
            "  a: Int\n",
            &format!("  a: Int @deprecated(reason: \"{reason}\")\n"),
        )
    };
    let (passed, printed) = f.check(&deprecate("Use `c`."), "", "2026-12-04");
    assert!(
        !passed && printed.contains("Removed after YYYY-MM-DD"),
        "{printed}"
    );
    let (passed, printed) = f.check(
        &deprecate("Use `c`. Removed after 2027-01-15."),
        "",
        "2026-12-04",
    );
    assert!(
        !passed && printed.contains("at least 90 days ahead"),
        "{printed}"
    );
    let (passed, printed) = f.check(
        &deprecate("Use `c`. Removed after 2027-03-04."),
        "",
        "2026-12-04",
    );
    assert!(passed, "{printed}");
}

#[test]
fn a_new_enum_value_and_a_breaking_fix_are_named_in_the_changelog() {
    let f = Fixture::new("changelog");
    let with_y = RELEASED.replace("enum E { X }", "enum E { X Y }");
    // Named only under a release already made: not this change's entry.
    let (passed, printed) = f.check(&with_y, "", "2026-12-04");
    assert!(
        !passed && printed.contains("not in the changelog"),
        "{printed}"
    );
    let (passed, printed) = f.check(
        &with_y,
        "- **Dangerous: new enum value** `E.Y`.",
        "2026-12-04",
    );
    assert!(passed, "{printed}");

    let retyped = RELEASED.replace("  a: Int\n", "  a: String\n");
    let (passed, printed) = f.check(&retyped, "- **Changed** `Query.a`.", "2026-12-04");
    assert!(!passed && printed.contains("**Breaking** fix"), "{printed}");
    let (passed, printed) = f.check(
        &retyped,
        "- **Breaking** (privacy) `Query.a` shows less.",
        "2026-12-04",
    );
    assert!(passed, "{printed}");
}
