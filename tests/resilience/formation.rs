//! The local pg_auto_failover formation (`scripts/stack ha`), shared by the
//! tests that fail it over or read from its standby, one at a time.

use std::process::{Command, Stdio};

use tokio::sync::{Mutex, MutexGuard};

/// Held by a test for as long as it uses the formation.
pub async fn exclusive() -> MutexGuard<'static, ()> {
    static FORMATION: Mutex<()> = Mutex::const_new(());
    FORMATION.lock().await
}

/// `scripts/stack ha <args>`; the last line it printed.
pub fn formation(args: &[&str]) -> String {
    output(args).lines().last().unwrap_or_default().to_owned()
}

/// The monitor's last events (`scripts/stack ha events`): what the
/// formation did and why, for a test's failure message.
pub async fn events() -> String {
    tokio::task::spawn_blocking(|| output(&["events"]))
        .await
        .unwrap()
}

/// Everything `scripts/stack ha <args>` printed to its standard output.
fn output(args: &[&str]) -> String {
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/stack"))
        .arg("ha")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("scripts/stack runs");
    assert!(
        out.status.success(),
        "scripts/stack ha {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// [`formation`] off the runtime's threads.
pub async fn blocking(args: &'static [&'static str]) -> String {
    tokio::task::spawn_blocking(move || formation(args))
        .await
        .unwrap()
}

/// `scripts/stack ha up`: the formation's `DATABASE_URL`.
pub async fn up() -> String {
    let line = blocking(&["up"]).await;
    line.strip_prefix("DATABASE_URL=")
        .unwrap_or_else(|| panic!("scripts/stack ha up ended with {line:?}"))
        .to_owned()
}
