//! CPU time of this process and of Redis, for per-request costs.

/// CPU seconds (user and system) this process has used, from /proc.
pub fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line (11 and 12 after it).
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds Redis has used (`used_cpu_user` + `used_cpu_sys`).
pub async fn redis_cpu_seconds(app: &kith::app::App) -> f64 {
    let mut conn = app.redis.get().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(&mut *conn)
        .await
        .unwrap();
    info.lines()
        .filter(|l| l.starts_with("used_cpu_user:") || l.starts_with("used_cpu_sys:"))
        .filter_map(|l| l.split_once(':')?.1.trim().parse::<f64>().ok())
        .sum()
}
