//! The content-event ledger (`content_events`): the ids the projector has
//! counted, kept long enough to count a redelivered event once.

/// Keeps the content-event ledger to `KITH_CONTENT_LEDGER_RETENTION_HOURS`:
/// every few minutes, deletes what is older in bounded batches.
pub(crate) async fn prune(
    app: std::sync::Arc<crate::app::App>,
    mut shutdown: crate::shutdown::Shutdown,
) {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(600);
    const BATCH: i64 = 10_000;
    let retention = chrono::Duration::hours(
        i64::try_from(app.config.pipeline.content_ledger_retention_hours)
            .unwrap_or(i64::MAX / 3_600_000),
    );
    loop {
        loop {
            let deleted = async {
                let mut conn = app.pg.get().await.map_err(|e| e.to_string())?;
                crate::store::content::prune(&mut conn, retention, BATCH)
                    .await
                    .map_err(|e| e.to_string())
            }
            .await;
            match deleted {
                Ok(n) if n as i64 == BATCH && !shutdown.requested() => continue,
                Ok(n) => {
                    if n > 0 {
                        tracing::info!(deleted = n, "content ledger pruned");
                    }
                    break;
                }
                Err(error) => {
                    tracing::warn!(%error, "content ledger pruning failed");
                    break;
                }
            }
        }
        if !shutdown.sleep(EVERY).await {
            return;
        }
    }
}
