//! The listening session of a cache that PostgreSQL's notices keep right:
//! one per cache and process, on the cache's channel for the session's
//! schema, reconnecting after any failure. The cache is told when it
//! listens and when it stops (a notice sent meanwhile is lost: it must not
//! serve what it held), and is handed each notice in commit order.

use std::sync::Weak;
use std::time::Duration;

use futures_util::StreamExt as _;

/// How long the listening session may take to answer its periodic check.
const ALIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long the listener waits before reconnecting after a failure.
const RECONNECT_DELAY: Duration = Duration::from_millis(500);

/// A cache kept right by notices.
pub(crate) trait Listening: Send + Sync + 'static {
    /// Its channel's name, before the schema's.
    const CHANNEL_PREFIX: &'static str;
    /// What the log calls it.
    const NAME: &'static str;
    /// Applies one notice's payload.
    fn apply_notice(&self, payload: &str);
    /// Whether its session listens now (from `true`, every notice is
    /// delivered until it says `false`).
    fn set_listening(&self, on: bool);
}

/// Holds `cache`'s listening session for as long as the cache lives.
pub(crate) async fn listen<T: Listening>(cache: Weak<T>, url: String) {
    let url = crate::store::pool::with_keepalives(&url);
    loop {
        if cache.strong_count() == 0 {
            return;
        }
        if let Err(error) = listen_once(&cache, &url).await {
            tracing::warn!(%error, cache = T::NAME, "listening session lost; reading from PostgreSQL");
        }
        if let Some(cache) = cache.upgrade() {
            cache.set_listening(false);
        }
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

async fn listen_once<T: Listening>(
    cache: &Weak<T>,
    url: &str,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let (tx, mut notices) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                    if tx.send(Ok(n.payload().to_owned())).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
    });
    let result = async {
        let schema: String = client
            .query_one("SELECT current_schema()", &[])
            .await?
            .get(0);
        let channel = format!("{}{schema}", T::CHANNEL_PREFIX).replace('"', "\"\"");
        client
            .batch_execute(&format!("LISTEN \"{channel}\""))
            .await?;
        match cache.upgrade() {
            Some(cache) => cache.set_listening(true),
            None => return Ok(()),
        }
        let mut alive = tokio::time::interval(Duration::from_secs(5));
        loop {
            tokio::select! {
                notice = notices.recv() => match notice {
                    Some(Ok(payload)) => match cache.upgrade() {
                        Some(cache) => cache.apply_notice(&payload),
                        None => return Ok(()),
                    },
                    Some(Err(e)) => return Err(e),
                    None => return Ok(()),
                },
                _ = alive.tick() => {
                    if cache.strong_count() == 0 {
                        return Ok(());
                    }
                    // A session that went quiet without closing (a network
                    // partition, a failover) would deliver nothing: prove it alive.
                    match tokio::time::timeout(ALIVE_TIMEOUT, client.simple_query("")).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => return Err(e),
                        Err(_) => return Ok(()),
                    }
                }
            }
        }
    }
    .await;
    driver.abort();
    result
}
