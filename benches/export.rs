//! A million-row export: `GET /export/followers.csv` of an account with
//! `KITH_BENCH_EXPORT_ROWS` (1,000,000) followers, through the HTTP router,
//! read frame by frame as a client would. Reports the rows, the bytes, the
//! time, and how much the process's resident memory peaked above where it
//! stood before the export (`VmHWM` after `/proc/self/clear_refs` reset
//! it): an export streams batches of 1,000 rows, so the peak must stay far
//! below the file's size.
//!
//! Needs the local stack (`scripts/stack up`; `scripts/stack clean` first for
//! a clean measure). Run `cargo bench --bench export`; writes
//! `target/bench-reports/export.md` and prints it.

use std::time::Instant;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use diesel_async::RunQueryDsl;
use http_body_util::BodyExt;
use kith::model::UserId;
use tower::ServiceExt;

#[path = "common.rs"]
mod common;

/// A line of `/proc/self/status`, in kB.
fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"))
}

#[tokio::main]
async fn main() {
    let rows: i64 = std::env::var("KITH_BENCH_EXPORT_ROWS")
        .ok()
        .map_or(1_000_000, |v| v.parse().expect("KITH_BENCH_EXPORT_ROWS"));
    let name = format!("bench_export_{}", std::process::id());
    let app = common::isolated_app(&name, |c| c.database.statement_timeout_ms = 0).await;
    let started = Instant::now();
    {
        let mut conn = app.pg.get().await.unwrap();
        kith::testing::store::users::seed(&mut conn, "star", 1)
            .await
            .unwrap();
        kith::testing::store::users::seed(&mut conn, "fan", rows)
            .await
            .unwrap();
        diesel::sql_query(
            "INSERT INTO following (from_user_id, to_user_id, active, followed_at, version)
             SELECT f.id, s.id, TRUE, date_trunc('milliseconds', now()) - f.id * interval '1 millisecond', 1
               FROM users f, users s WHERE s.handle = 'star0' AND f.handle LIKE 'fan%'",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        diesel::sql_query("ANALYZE")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    eprintln!(
        "seeded {rows} followers in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let star = {
        #[derive(diesel::QueryableByName)]
        struct Id {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            id: i64,
        }
        let mut conn = app.pg.get().await.unwrap();
        let found: Id = diesel::sql_query("SELECT id FROM users WHERE handle = 'star0'")
            .get_result(&mut conn)
            .await
            .unwrap();
        UserId::new(found.id).unwrap()
    };
    let token = app
        .auth
        .tokens
        .issue(star, chrono::Utc::now().timestamp(), 3600);

    let before = status_kb("VmRSS:");
    // Resets VmHWM to the current resident size.
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let started = Instant::now();
    let request = Request::get("/export/followers.csv")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap();
    let response = kith::testing::http::router(app.clone())
        .oneshot(request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let (mut bytes, mut lines, mut frames, mut largest) = (0_usize, 0_usize, 0_usize, 0_usize);
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            frames += 1;
            bytes += data.len();
            largest = largest.max(data.len());
            lines += data.iter().filter(|b| **b == b'\n').count();
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let peak = status_kb("VmHWM:");
    assert_eq!(lines as i64, rows + 1, "a header and every follower");
    let mb = |kb: u64| kb as f64 / 1024.0;
    let report = format!(
        "# A million-row export\n\n`cargo bench --bench export`, on a clean stack.\n\n\
         `GET /export/followers.csv` of an account with {rows} followers, through the HTTP router, read frame by frame.\n\n\
         | rows | file | time | rows/s | frames (largest) | resident before | peak during | peak growth |\n\
         |---|---|---|---|---|---|---|---|\n\
         | {rows} | {:.1} MB | {elapsed:.1} s | {:.0} | {frames} ({:.1} kB) | {:.1} MB | {:.1} MB | **{:.1} MB** |\n\n\
         The peak growth is what the export held at once: a batch of 1,000 rows and its frame, not the list ({:.1}% of the file).\n",
        bytes as f64 / 1_048_576.0,
        rows as f64 / elapsed,
        largest as f64 / 1024.0,
        mb(before),
        mb(peak),
        mb(peak.saturating_sub(before)),
        100.0 * (peak.saturating_sub(before) as f64 * 1024.0) / bytes.max(1) as f64,
    );
    common::write_report("export.md", &report);
    println!("{report}");
}
