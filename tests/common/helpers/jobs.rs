//! The relay and the projector, started in the test process exactly as
//! `kith relay` and `kith project` start them, and messages produced to the broker.

use std::sync::Arc;

use kith::app::App;

use super::*;

/// A running pipeline job (relay or projector) of a test.
/// Runs `jobs` on `app` as a `kith` process would ([`kith::jobs::run_until`]).
fn start_jobs(
    app: Arc<App>,
    jobs: kith::jobs::Jobs,
    hooks: Arc<kith::testing::pipeline::projector::ProjectorHooks>,
) -> Job {
    let (trigger, shutdown) = kith::testing::shutdown::Shutdown::new();
    let handle = tokio::spawn(kith::jobs::run_until(app, jobs, hooks, shutdown));
    Job { trigger, handle }
}

pub struct Job {
    trigger: kith::testing::shutdown::ShutdownTrigger,
    handle: tokio::task::JoinHandle<Result<(), kith::jobs::JobError>>,
}

impl Job {
    /// Asks the job to stop and waits for it.
    pub async fn stop(self) -> Result<(), kith::jobs::JobError> {
        self.trigger.trigger();
        self.handle.await.unwrap()
    }

    /// Waits for the job to end by itself (for example a simulated crash).
    pub async fn join(self, secs: u64) -> Result<(), kith::jobs::JobError> {
        tokio::time::timeout(std::time::Duration::from_secs(secs), self.handle)
            .await
            .expect("job ended")
            .unwrap()
    }
}

impl TestApp {
    /// Starts the outbox relay.
    pub fn start_relay(&self) -> Job {
        self.start_relay_for(self.app.clone())
    }

    /// Starts what `kith relay` runs on another `App` (as another process would).
    pub fn start_relay_for(&self, app: Arc<App>) -> Job {
        start_jobs(app, kith::jobs::Jobs::RELAY, Arc::default())
    }

    /// Starts the import runner, as every serving process runs it.
    pub fn start_imports(&self) -> Job {
        start_jobs(self.app.clone(), kith::jobs::Jobs::IMPORTS, Arc::default())
    }

    /// Starts a projector in the app's consumer group.
    pub fn start_projector(
        &self,
        hooks: Arc<kith::testing::pipeline::projector::ProjectorHooks>,
    ) -> Job {
        self.start_projector_for(self.app.clone(), hooks)
    }

    /// Starts what `kith project` runs on another `App` (another consumer
    /// group, say): the projector, with its companions.
    pub fn start_projector_for(
        &self,
        app: Arc<App>,
        hooks: Arc<kith::testing::pipeline::projector::ProjectorHooks>,
    ) -> Job {
        start_jobs(app, kith::jobs::Jobs::PROJECT, hooks)
    }

    /// Publishes a raw message, as another service would; on the follow
    /// topic, stamped with this database's origin, as its relay would.
    pub async fn produce(&self, topic: &str, key: &str, payload: &[u8]) {
        let origin =
            (topic == self.app.config.pipeline.follow_topic).then_some(self.origin().await);
        self.produce_from(origin, topic, key, payload).await;
    }

    /// This database's event origin.
    pub async fn origin(&self) -> uuid::Uuid {
        #[derive(diesel::QueryableByName)]
        struct Row {
            #[diesel(sql_type = diesel::sql_types::Uuid)]
            origin: uuid::Uuid,
        }
        use diesel_async::RunQueryDsl as _;
        let row: Row = diesel::sql_query("SELECT origin FROM event_origin")
            .get_result(&mut *self.conn().await)
            .await
            .unwrap();
        row.origin
    }

    /// Publishes a raw message stamped with `origin` (none: unstamped).
    pub async fn produce_from(
        &self,
        origin: Option<uuid::Uuid>,
        topic: &str,
        key: &str,
        payload: &[u8],
    ) {
        let producer = kith::testing::pipeline::kafka::producer(&self.app.config).unwrap();
        kith::testing::pipeline::kafka::ensure_topics(&self.app.config)
            .await
            .unwrap();
        let origin = origin.map(|o| o.to_string());
        let mut headers = rdkafka::message::OwnedHeaders::new();
        if let Some(origin) = &origin {
            headers = headers.insert(rdkafka::message::Header {
                key: kith::testing::pipeline::origin::HEADER,
                value: Some(origin),
            });
        }
        let record = rdkafka::producer::FutureRecord::to(topic)
            .key(key)
            .payload(payload)
            .headers(headers);
        producer
            .send(record, std::time::Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
}
