//! What each long-running `kith` command runs — `run`, `serve`, `relay`,
//! `project` — wired here, once, for the binary and for tests alike: a test
//! that starts a projector starts exactly what `kith project` starts.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;

use crate::app::{App, StartError};
use crate::config::{Config, ConfigError};
use crate::error::PipelineError;
use crate::pipeline::projector::ProjectorHooks;
use crate::shutdown::Shutdown;

/// How often the account sweeper finishes status changes a process left.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// Which jobs a process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Jobs {
    /// The HTTP API (with its live-update listener).
    pub http: bool,
    /// The import runner (`importGraph`'s jobs) and the move runner
    /// (`moveAccount`'s); every process serving the API runs them.
    pub imports: bool,
    /// The outbox relay.
    pub relay: bool,
    /// The projector, with the content ledger's pruning, the account
    /// sweeper and the scheduled reconciliation.
    pub projector: bool,
}

impl Jobs {
    /// `kith run`: everything.
    pub const RUN: Self = Self {
        imports: true,
        http: true,
        relay: true,
        projector: true,
    };
    /// `kith serve`: the API.
    pub const SERVE: Self = Self {
        imports: true,
        http: true,
        relay: false,
        projector: false,
    };
    /// `kith relay`: the outbox relay.
    pub const RELAY: Self = Self {
        imports: false,
        http: false,
        relay: true,
        projector: false,
    };
    /// The import runner alone (tests run it so).
    pub const IMPORTS: Self = Self {
        imports: true,
        http: false,
        relay: false,
        projector: false,
    };
    /// `kith project`: the projector and its companions.
    pub const PROJECT: Self = Self {
        imports: false,
        http: false,
        relay: false,
        projector: true,
    };
}

/// Why a process's jobs stopped.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The configuration refuses to serve (the development secret on a
    /// public address).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The service could not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// A pipeline job failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The HTTP listener failed.
    #[error("HTTP: {0}")]
    Http(#[from] std::io::Error),
    /// A job panicked.
    #[error("a job panicked: {0}")]
    Panicked(String),
}

/// Starts `config`'s service and runs `jobs` until SIGINT or SIGTERM, or
/// until one of them stops on its own (then the others are stopped too).
pub async fn run(config: Config, jobs: Jobs) -> Result<(), JobError> {
    if jobs.http {
        config.check_listener()?;
        if config.uses_dev_secret() && config.auth.jwt_hs256 {
            tracing::warn!("KITH_JWT_SECRET is unset: using the development secret");
        }
    }
    let app = App::start(config).await?;
    let (trigger, shutdown) = Shutdown::new();
    let signal = tokio::spawn(async move {
        crate::http::shutdown_signal().await;
        trigger.trigger();
    });
    let result = run_until(app, jobs, Arc::default(), shutdown).await;
    signal.abort();
    tracing::info!("stopped");
    result
}

/// Runs `jobs` on `app` until `shutdown`, or until one of them stops on
/// its own — then the others are stopped, and its result returned. The
/// metrics listener (`KITH_METRICS_ADDR`) runs beside them.
pub async fn run_until(
    app: Arc<App>,
    jobs: Jobs,
    hooks: Arc<ProjectorHooks>,
    mut shutdown: Shutdown,
) -> Result<(), JobError> {
    let (trigger, stop) = Shutdown::new();
    let mut tasks: tokio::task::JoinSet<Result<(), JobError>> = tokio::task::JoinSet::new();
    tasks.spawn(crate::http::serve_metrics(app.clone(), stop.clone()).map(Ok));
    if jobs.relay {
        tasks.spawn(
            crate::pipeline::relay::run(app.clone(), stop.clone())
                .map(|r| r.map_err(JobError::from)),
        );
    }
    if jobs.projector {
        tasks.spawn(
            crate::pipeline::projector::run(app.clone(), stop.clone(), hooks)
                .map(|r| r.map_err(JobError::from)),
        );
        tasks.spawn(crate::pipeline::ledger::prune(app.clone(), stop.clone()).map(Ok));
        tasks.spawn(
            crate::write::lifecycle::sweep_every(app.clone(), SWEEP_EVERY, stop.clone()).map(Ok),
        );
        if app.config.consistency.reconcile_interval_secs > 0 {
            let every = Duration::from_secs(app.config.consistency.reconcile_interval_secs);
            tasks.spawn(
                crate::consistency::reconcile::schedule(app.clone(), every, stop.clone()).map(Ok),
            );
        }
    }
    if jobs.imports {
        tasks.spawn(crate::portability::import::run(app.clone(), stop.clone()).map(Ok));
        tasks.spawn(crate::write::move_runner::run(app.clone(), stop.clone()).map(Ok));
    }
    if jobs.http {
        tasks.spawn(crate::live::listen(app.clone(), stop.clone()).map(Ok));
        let mut served = stop.clone();
        tasks.spawn(
            crate::http::serve(app.clone(), async move { served.wait().await })
                .map(|r| r.map_err(JobError::from)),
        );
    }
    let mut result = Ok(());
    tokio::select! {
        () = shutdown.wait() => {}
        Some(finished) = tasks.join_next() => {
            tracing::error!(?finished, "a job stopped on its own; stopping the rest");
            result = flatten(finished);
        }
    }
    trigger.trigger();
    while let Some(finished) = tasks.join_next().await {
        if let Err(error) = flatten(finished) {
            tracing::warn!(%error, "job ended with an error");
            if result.is_ok() {
                result = Err(error);
            }
        }
    }
    result
}

fn flatten(finished: Result<Result<(), JobError>, tokio::task::JoinError>) -> Result<(), JobError> {
    match finished {
        Ok(result) => result,
        Err(join) => Err(JobError::Panicked(join.to_string())),
    }
}
