//! The `kith` command line: the service, its jobs and developer tools.

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};

use std::sync::Arc;

use futures_util::FutureExt as _;
use kith::app::App;
use kith::config::Config;
use kith::model::UserId;
use kith::pipeline::Shutdown;
use kith::pipeline::projector::ProjectorHooks;
use kith::store;

#[derive(Parser)]
#[command(name = "kith", version, about = "Kith follow-graph service")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run everything in one process: the HTTP API, the outbox relay and the projector.
    Run,
    /// Serve the GraphQL API over HTTP (POST /graphql, GraphiQL at GET /graphql).
    Serve,
    /// Publish outbox events to Kafka (one active relay per database; others stand by).
    Relay,
    /// Consume events and maintain the derived views (follower projection, counters, caches).
    Project,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Create active users `<prefix>0` … `<prefix>N-1`; existing handles are left alone.
    SeedUsers {
        /// How many users.
        #[arg(long)]
        count: u32,
        /// Handle prefix.
        #[arg(long, default_value = "user")]
        prefix: String,
    },
    /// Print a signed development bearer token for a user (handle or numeric id).
    Token {
        /// The user's handle or numeric id.
        #[arg(long)]
        user: String,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 3600)]
        ttl: i64,
    },
    /// Print the GraphQL schema (SDL), as committed in `schema.graphql`.
    PrintSchema,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::PrintSchema = cli.command {
        print!("{}", kith::graph::sdl());
        return Ok(());
    }
    let config = Config::from_env()?;
    init_tracing(config.log_json);
    match cli.command {
        Command::Run => {
            run(
                config,
                Jobs {
                    http: true,
                    relay: true,
                    projector: true,
                },
            )
            .await
        }
        Command::Serve => {
            run(
                config,
                Jobs {
                    http: true,
                    relay: false,
                    projector: false,
                },
            )
            .await
        }
        Command::Relay => {
            run(
                config,
                Jobs {
                    http: false,
                    relay: true,
                    projector: false,
                },
            )
            .await
        }
        Command::Project => {
            run(
                config,
                Jobs {
                    http: false,
                    relay: false,
                    projector: true,
                },
            )
            .await
        }
        Command::Migrate => {
            let applied = store::migrate::run_pending(&config.database_url).await?;
            tracing::info!(count = applied.len(), ?applied, "migrations applied");
            Ok(())
        }
        Command::SeedUsers { count, prefix } => {
            if prefix.is_empty() {
                bail!("--prefix must not be empty");
            }
            let pool = store::pool::connect(&config.database_url, 1, Default::default()).await?;
            let mut conn = pool.get().await?;
            let created = store::users::seed(&mut conn, &prefix, count.into()).await?;
            println!(
                "created {created} users ({} already existed)",
                count as usize - created
            );
            Ok(())
        }
        Command::Token { user, ttl } => {
            if ttl <= 0 {
                bail!("--ttl must be positive");
            }
            let pool = store::pool::connect(&config.database_url, 1, Default::default()).await?;
            let mut conn = pool.get().await?;
            let found = match user.parse::<UserId>() {
                Ok(id) => store::users::find(&mut conn, id).await?,
                Err(()) => store::users::find_by_handle(&mut conn, &user).await?,
            };
            let found = found.with_context(|| format!("no user {user:?}"))?;
            let keys = kith::auth::TokenKeys::new(&config.jwt_secret);
            println!(
                "{}",
                keys.issue(found.id, chrono::Utc::now().timestamp(), ttl)
            );
            Ok(())
        }
        Command::PrintSchema => unreachable!("handled above"),
    }
}

struct Jobs {
    http: bool,
    relay: bool,
    projector: bool,
}

/// Starts the chosen jobs on one shared `App` and stops them all on SIGINT/SIGTERM.
async fn run(config: Config, jobs: Jobs) -> anyhow::Result<()> {
    if jobs.http && config.uses_dev_secret() {
        tracing::warn!("KITH_JWT_SECRET is unset: using the development secret");
    }
    let app = App::start(config).await?;
    let (trigger, shutdown) = Shutdown::new();
    let mut tasks = tokio::task::JoinSet::new();
    if jobs.relay {
        tasks.spawn(kith::pipeline::relay::run(app.clone(), shutdown.clone()).map(|()| Ok(())));
    }
    if jobs.projector {
        let hooks = Arc::new(ProjectorHooks::default());
        tasks.spawn(
            kith::pipeline::projector::run(app.clone(), shutdown.clone(), hooks)
                .map(|r| r.map_err(anyhow::Error::from)),
        );
    }
    if jobs.http {
        let mut stop = shutdown.clone();
        tasks.spawn(
            kith::http::serve(app.clone(), async move { stop.wait().await })
                .map(|r| r.map_err(anyhow::Error::from)),
        );
    }
    tokio::select! {
        () = kith::http::shutdown_signal() => {}
        Some(finished) = tasks.join_next() => {
            tracing::error!(result = ?finished, "a job stopped on its own; stopping the rest");
        }
    }
    trigger.trigger();
    while let Some(finished) = tasks.join_next().await {
        if let Ok(Err(e)) = finished {
            tracing::warn!(error = %e, "job ended with an error");
        }
    }
    tracing::info!("stopped");
    Ok(())
}

fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}
