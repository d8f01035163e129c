//! The listening session of a cache that PostgreSQL's notices keep right:
//! one per cache and process, on the cache's channel for the session's
//! schema, reconnecting after any failure. The cache is told when it
//! listens and when it stops (a notice sent meanwhile is lost: it must not
//! serve what it held), and is handed each notice in commit order.

use std::sync::{Arc, Once, Weak};
use std::time::Duration;

use futures_util::StreamExt as _;

/// How long the listening session may take to answer its periodic check.
const ALIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long the listener waits before reconnecting after a failure.
const RECONNECT_DELAY: Duration = Duration::from_millis(500);

/// How long the listener waits before trying again a session that
/// listened but was not told of its own probe.
const DEAF_DELAY: Duration = Duration::from_secs(60);

/// The start of a probe's payload: a listener passes none on.
const PROBE: &str = "kith-probe:";

/// Why a listening session ended.
#[derive(Debug, thiserror::Error)]
enum Lost {
    #[error(transparent)]
    Session(#[from] tokio_postgres::Error),
    /// A notice sent on the channel did not reach the session (a
    /// transaction pooler between them drops what arrives between
    /// transactions): a cache that trusted it would serve stale data.
    #[error(
        "a notice sent on {0} did not reach the listening session: is its URL (DATABASE_SESSION_URL, else DATABASE_URL) a transaction pooler? The cache reads from PostgreSQL until it is"
    )]
    Deaf(String),
}

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

/// A cache's listening session, started by the cache's first read.
pub(crate) struct Session {
    started: Once,
    database_url: String,
    name: String,
}

impl Session {
    /// A session to `database_url` whose `application_name` begins with
    /// `prefix` (`kith-users`, `kith-notify`), not started yet.
    pub(crate) fn new(database_url: &str, prefix: &str) -> Self {
        Self {
            started: Once::new(),
            database_url: database_url.to_owned(),
            name: format!("{prefix}-{}", uuid::Uuid::new_v4().simple()),
        }
    }

    /// Its `application_name` (for operators and tests).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Starts listening for `cache`, once; not at all outside a runtime.
    pub(crate) fn start<T: Listening>(&self, cache: &Arc<T>) {
        self.started.call_once(|| {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let url = crate::store::pool::with_setting(
                    &self.database_url,
                    "application_name",
                    &self.name,
                );
                runtime.spawn(listen(Arc::downgrade(cache), url));
            }
        });
    }

    /// Marks it started without starting it (unit tests without a runtime).
    #[cfg(test)]
    pub(crate) fn never_start(&self) {
        self.started.call_once(|| {});
    }
}

/// Holds `cache`'s listening session for as long as the cache lives.
async fn listen<T: Listening>(cache: Weak<T>, url: String) {
    let url = crate::store::pool::with_keepalives(&url);
    loop {
        if cache.strong_count() == 0 {
            return;
        }
        let delay = match listen_once(&cache, &url).await {
            Ok(()) => RECONNECT_DELAY,
            Err(error @ Lost::Deaf(_)) => {
                tracing::error!(%error, cache = T::NAME, "notices do not arrive");
                DEAF_DELAY
            }
            Err(error) => {
                tracing::warn!(%error, cache = T::NAME, "listening session lost; reading from PostgreSQL");
                RECONNECT_DELAY
            }
        };
        if let Some(cache) = cache.upgrade() {
            cache.set_listening(false);
        }
        tokio::time::sleep(delay).await;
    }
}

async fn listen_once<T: Listening>(cache: &Weak<T>, url: &str) -> Result<(), Lost> {
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
        let channel = format!("{}{schema}", T::CHANNEL_PREFIX);
        client
            .batch_execute(&format!("LISTEN \"{}\"", channel.replace('"', "\"\"")))
            .await?;
        // Proved end to end before the cache trusts it: a notice sent from
        // another session arrives.
        if !probe(url, &channel, &mut notices).await? {
            return Ok(());
        }
        match cache.upgrade() {
            Some(cache) => cache.set_listening(true),
            None => return Ok(()),
        }
        let mut alive = tokio::time::interval(Duration::from_secs(5));
        loop {
            tokio::select! {
                notice = notices.recv() => match notice {
                    // Another process's probe.
                    Some(Ok(payload)) if payload.starts_with(PROBE) => {}
                    Some(Ok(payload)) => match cache.upgrade() {
                        Some(cache) => cache.apply_notice(&payload),
                        None => return Ok(()),
                    },
                    Some(Err(e)) => return Err(e.into()),
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
                        Ok(Err(e)) => return Err(e.into()),
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

/// Sends a probe on `channel` from a session of its own, and waits for it
/// among `notices` (those before it are dropped: the cache starts empty
/// once it listens); `false` when the listening session ended meanwhile.
async fn probe(
    url: &str,
    channel: &str,
    notices: &mut tokio::sync::mpsc::UnboundedReceiver<Result<String, tokio_postgres::Error>>,
) -> Result<bool, Lost> {
    let payload = format!("{PROBE}{}", uuid::Uuid::new_v4().simple());
    {
        // Named apart from the listening session, which operators (and
        // tests) find by its name: `probe-` and the session's name.
        let url = if url.contains("application_name=") {
            url.replacen("application_name=", "application_name=probe-", 1)
        } else {
            crate::store::pool::with_setting(url, "application_name", "kith-probe")
        };
        let (sender, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
        let driver = tokio::spawn(connection);
        let sent = sender
            .execute("SELECT pg_notify($1, $2)", &[&channel, &payload])
            .await;
        drop(sender);
        let _ = driver.await;
        sent?;
    }
    let arrived = tokio::time::timeout(ALIVE_TIMEOUT, async {
        while let Some(notice) = notices.recv().await {
            if notice? == payload {
                return Ok(true);
            }
        }
        Ok::<_, tokio_postgres::Error>(false)
    })
    .await;
    match arrived {
        Ok(Ok(arrived)) => Ok(arrived),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(Lost::Deaf(channel.to_owned())),
    }
}
