//! JavaScript clients (graphql-ws, graphql-http, browsers) run by Node.

/// Runs `tests/http-audit/<script>` under Node with `args` (the pinned
/// JavaScript clients `scripts/stack tools` installs, `package` among them);
/// panics with its output unless it exits 0. Returns its standard output.
pub async fn js_client(script: &str, package: &str, args: Vec<String>) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/http-audit");
    assert!(
        dir.join("node_modules").join(package).exists(),
        "{package} is not installed (scripts/stack tools)"
    );
    let script = dir.join(script);
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("node")
            .arg(script)
            .args(&args)
            .output()
            .expect("node runs (scripts/stack tools installs it)")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}
