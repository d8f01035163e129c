//! The `kith` command line: its commands (clap), and the operator commands
//! that run once and exit. The long-running ones (`run`, `serve`, `relay`,
//! `project`) are [`crate::jobs`]. The binary (`src/main.rs`) only sets the
//! allocator and calls [`main`].

mod logging;
mod recovery;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};

use crate::app::App;
use crate::config::Config;
use crate::jobs::Jobs;
use crate::model::UserId;
use crate::store;

/// Parses the command line and runs its command.
pub async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::PrintSchema { subgraph } = cli.command {
        if subgraph {
            print!("{}", crate::graph::federation::subgraph_sdl());
        } else {
            print!("{}", crate::graph::sdl());
        }
        return Ok(());
    }
    let mut config = Config::from_env()?;
    logging::init(config.logs.json);
    if !matches!(
        cli.command,
        Command::Run | Command::Serve | Command::Relay | Command::Project
    ) {
        // Operator commands walk whole tables and count huge lists; a bound
        // meant for API requests would only make them fail on big accounts.
        config.database.statement_timeout_ms = 0;
        // And they run on PostgreSQL itself, not through a pooler (whose
        // sessions carry the API's statement timeout).
        config.database.url = config.session_url().to_owned();
        config.database.session_url = None;
        config.database.pg_statement_cache = true;
    }
    match cli.command {
        Command::Run => Ok(crate::jobs::run(config, Jobs::RUN).await?),
        Command::Serve => Ok(crate::jobs::run(config, Jobs::SERVE).await?),
        Command::Relay => Ok(crate::jobs::run(config, Jobs::RELAY).await?),
        Command::Project => Ok(crate::jobs::run(config, Jobs::PROJECT).await?),
        command => operate(command, config).await,
    }
}

#[derive(Parser)]
#[command(name = "kith", version, about = "Kith follow-graph service")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
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
    /// Generate a realistic follow graph inside PostgreSQL: power-law
    /// followers, a few celebrities, three years of follow times; truth,
    /// projection and counters consistent. Caches fill as it is read.
    SeedData {
        /// Users to create.
        #[arg(long, default_value_t = 100_000)]
        users: i64,
        /// Follow edges to create (celebrities' included).
        #[arg(long, default_value_t = 5_000_000)]
        edges: i64,
        /// Accounts with `--celebrity-followers` followers each.
        #[arg(long, default_value_t = 3)]
        celebrities: i64,
        /// Followers of each celebrity (at most users - 1; default: every other user).
        #[arg(long)]
        celebrity_followers: Option<i64>,
        /// Handle prefix (default: `s<unix time>_`, so runs never collide).
        #[arg(long)]
        prefix: Option<String>,
        /// Seed of the generator, in [-1, 1].
        #[arg(long, default_value_t = 0.42)]
        seed: f64,
        /// Communities: 80% of each user's follows stay within its own
        /// (user i is in community i mod K); 0 or 1: none.
        #[arg(long, default_value_t = 0)]
        communities: i64,
    },
    /// Print a signed development bearer token for a user (handle or
    /// numeric id), or for another service with its Kith scopes.
    Token {
        /// The user's handle or numeric id.
        #[arg(long, required_unless_present = "service", conflicts_with = "service")]
        user: Option<String>,
        /// A service's name: the token acts for no account, with `--scope`.
        #[arg(long, requires = "scope")]
        service: Option<String>,
        /// The service's Kith scopes, space-separated (`kith:close-friends`, `kith:notify`).
        #[arg(long)]
        scope: Option<String>,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 3600)]
        ttl: i64,
    },
    /// Print the GraphQL schema (SDL), as committed in `schema.graphql`.
    PrintSchema {
        /// The Federation 2 subgraph schema instead, as committed in
        /// `schema.subgraph.graphql` (what composition reads).
        #[arg(long)]
        subgraph: bool,
    },
    /// Compare every derived view with the truth (read-only); exits 1 on any disagreement.
    Verify {
        /// Only this user's edges, counters and lists.
        #[arg(long, value_parser = parse_user_id)]
        user: Option<UserId>,
        /// Rows per page.
        #[arg(long, default_value_t = 1000)]
        batch: i64,
        /// Look again after this long at what disagreed (lag is normal on a live system); 0: report at once.
        #[arg(long, default_value_t = 3000)]
        settle_ms: u64,
        /// No progress line on stderr.
        #[arg(long)]
        quiet: bool,
    },
    /// Rebuild counter records and list caches from PostgreSQL (safe while everything runs).
    RebuildCache {
        /// Only this user (its record and both its lists).
        #[arg(long, value_parser = parse_user_id)]
        user: Option<UserId>,
        /// Fill every user's lists, not only the ones cached now.
        #[arg(long)]
        all_lists: bool,
        /// No progress line on stderr.
        #[arg(long)]
        quiet: bool,
    },
    /// Repair the follower projection and the counters from the truth (safe while everything runs).
    Reconcile {
        /// Only edges changed since this time (RFC 3339), and their users.
        #[arg(long, conflicts_with_all = ["full", "user"])]
        since: Option<chrono::DateTime<chrono::Utc>>,
        /// Everything (default: incremental from the previous run's watermark).
        #[arg(long, conflicts_with = "user")]
        full: bool,
        /// Only this user's edges and counters.
        #[arg(long, value_parser = parse_user_id)]
        user: Option<UserId>,
        /// No progress line on stderr.
        #[arg(long)]
        quiet: bool,
    },
    /// After PostgreSQL was restored to an earlier point while Redis and the
    /// broker kept newer state (every Kith process stopped): renew the event
    /// origin, skip what the lost timeline published, rebuild the derived views.
    AfterRestore {
        /// No progress line on stderr.
        #[arg(long)]
        quiet: bool,
    },
    /// Show or change this database's event origin (every event it writes carries it).
    Origin {
        #[command(subcommand)]
        action: recovery::OriginAction,
    },
    /// Inspect and re-apply messages the projector could not apply.
    DeadLetters {
        #[command(subcommand)]
        action: DeadLetterAction,
    },
    /// Suspend, delete or restore an account (its edges follow, batch by batch).
    User {
        #[command(subcommand)]
        action: UserAction,
    },
}

#[derive(Subcommand)]
pub enum UserAction {
    /// Bar the account: it cannot act or be followed, and leaves every list and count.
    Suspend {
        /// The user's numeric id.
        #[arg(value_parser = parse_user_id)]
        id: UserId,
    },
    /// Delete the account: as suspended, and invisible.
    Delete {
        /// The user's numeric id.
        #[arg(value_parser = parse_user_id)]
        id: UserId,
    },
    /// Make the account active again; its edges come back in their old place.
    Restore {
        /// The user's numeric id.
        #[arg(value_parser = parse_user_id)]
        id: UserId,
    },
}

#[derive(Subcommand)]
pub enum DeadLetterAction {
    /// List dead letters, oldest first.
    List {
        /// Include the ones a replay already applied.
        #[arg(long)]
        all: bool,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: i64,
    },
    /// Apply dead letters again (after whatever rejected them is fixed).
    Replay {
        /// Only these ids (default: every one not replayed yet).
        #[arg(long = "id")]
        ids: Vec<i64>,
    },
}

/// Runs an operator command: one that does its work and exits.
pub async fn operate(command: Command, config: Config) -> anyhow::Result<()> {
    match command {
        Command::Migrate => {
            let applied = store::migrate::run_pending(config.session_url()).await?;
            tracing::info!(count = applied.len(), ?applied, "migrations applied");
            Ok(())
        }
        Command::SeedData {
            users,
            edges,
            celebrities,
            celebrity_followers,
            prefix,
            seed,
            communities,
        } => {
            let plan = store::seed::Plan {
                users,
                edges,
                celebrities,
                celebrity_followers: celebrity_followers.unwrap_or(users - 1),
                prefix: prefix.unwrap_or_else(|| format!("s{}_", chrono::Utc::now().timestamp())),
                seed,
                communities,
            };
            let mut conn = session(&config).await?;
            let started = std::time::Instant::now();
            let summary = store::seed::generate(&mut conn, &plan, |step| {
                eprintln!("[{:>6.1} s] {step}", started.elapsed().as_secs_f64());
            })
            .await?;
            println!(
                "{} users (ids {}..={}, handles {}N), {} edges in {:.1} s",
                summary.users,
                summary.first_id,
                summary.first_id + summary.users - 1,
                plan.prefix,
                summary.edges,
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Command::SeedUsers { count, prefix } => {
            if prefix.is_empty() {
                bail!("--prefix must not be empty");
            }
            let mut conn = session(&config).await?;
            let created = store::users::seed(&mut conn, &prefix, count.into()).await?;
            println!(
                "created {created} users ({} already existed)",
                count as usize - created
            );
            Ok(())
        }
        Command::Token {
            user,
            service,
            scope,
            ttl,
        } => {
            if ttl <= 0 {
                bail!("--ttl must be positive");
            }
            let keys = crate::auth::TokenKeys::new(&config.auth.jwt_secret);
            let now = chrono::Utc::now().timestamp();
            if let Some(name) = service {
                let asked = scope.unwrap_or_default();
                let scopes = crate::auth::Scopes::parse(&asked);
                let known: Vec<&str> = crate::auth::Scopes::NAMED.iter().map(|(n, _)| *n).collect();
                if let Some(unknown) = asked.split_ascii_whitespace().find(|w| !known.contains(w)) {
                    bail!(
                        "--scope {unknown:?} is no Kith scope (known: {})",
                        known.join(", ")
                    );
                }
                if scopes.is_empty() {
                    bail!("--scope names no Kith scope (known: {})", known.join(", "));
                }
                if !config.auth.service_clients.contains(&name) {
                    bail!(
                        "{name:?} is not in KITH_SERVICE_CLIENTS, so its token would be refused: add it there (comma-separated) first"
                    );
                }
                println!("{}", keys.issue_service(&name, scopes, now, ttl));
                return Ok(());
            }
            let user = user.context("--user or --service is required")?;
            let mut conn = session(&config).await?;
            let found = match user.parse::<UserId>() {
                Ok(id) => store::users::find(&mut conn, id).await?,
                Err(()) => store::users::find_by_handle(&mut conn, &user).await?,
            };
            let found = found.with_context(|| format!("no user {user:?}"))?;
            println!("{}", keys.issue(found.id, now, ttl));
            Ok(())
        }
        Command::Verify {
            user,
            batch,
            settle_ms,
            quiet,
        } => {
            let app = App::start(config).await?;
            let options = crate::consistency::verify::Options {
                user,
                batch: batch.max(1),
                settle: std::time::Duration::from_millis(settle_ms),
                progress: !quiet,
                ..Default::default()
            };
            let report = crate::consistency::verify::verify(&app, &options).await?;
            print!("{report}");
            if report.total() > 0 {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::RebuildCache {
            user,
            all_lists,
            quiet,
        } => {
            let app = App::start(config).await?;
            let options = crate::consistency::rebuild::Options {
                user,
                all_lists,
                batch: 500,
                progress: !quiet,
            };
            let summary = crate::consistency::rebuild::rebuild(&app, options).await?;
            println!("{summary}");
            Ok(())
        }
        Command::Reconcile {
            since,
            full,
            user,
            quiet,
        } => {
            use crate::consistency::reconcile::{Scope, reconcile};
            let app = App::start(config).await?;
            let scope = match (since, full, user) {
                (Some(t), _, _) => Scope::Since(t),
                (_, _, Some(u)) => Scope::User(u),
                (_, true, _) => Scope::Full,
                _ => Scope::Incremental,
            };
            let summary = reconcile(&app, scope, 1000, !quiet).await?;
            print!("{summary}");
            Ok(())
        }
        Command::AfterRestore { quiet } => recovery::after_restore(config, !quiet).await,
        Command::Origin { action } => recovery::origin(config, action).await,
        Command::DeadLetters { action } => {
            let app = App::start(config).await?;
            match action {
                DeadLetterAction::List { all, limit } => {
                    let mut conn = app.pg.get().await?;
                    let letters =
                        store::dead_letters::list(&mut conn, 0, limit.max(1), !all).await?;
                    for l in &letters {
                        println!(
                            "#{} {}/{}@{} at {}{}: {}\n    payload: {}",
                            l.id,
                            l.source_topic,
                            l.source_partition,
                            l.source_offset,
                            l.created_at.to_rfc3339(),
                            l.replayed_at
                                .map(|t| format!(" (replayed {})", t.to_rfc3339()))
                                .unwrap_or_default(),
                            l.error,
                            l.payload
                                .as_deref()
                                .map(String::from_utf8_lossy)
                                .unwrap_or_default()
                        );
                    }
                    println!("{} dead letters", letters.len());
                }
                DeadLetterAction::Replay { ids } => {
                    let ids = (!ids.is_empty()).then_some(ids);
                    let report =
                        crate::pipeline::dead_letters::replay(&app, ids.as_deref()).await?;
                    for (id, reason) in &report.still_dead {
                        println!("#{id} still dead: {reason}");
                    }
                    println!(
                        "replayed {}, still dead {}",
                        report.replayed.len(),
                        report.still_dead.len()
                    );
                }
            }
            Ok(())
        }
        Command::User { action } => {
            use crate::model::UserStatus;
            let app = App::start(config).await?;
            let (id, status) = match action {
                UserAction::Suspend { id } => (id, UserStatus::Suspended),
                UserAction::Delete { id } => (id, UserStatus::Deleted),
                UserAction::Restore { id } => (id, UserStatus::Active),
            };
            let summary = crate::write::lifecycle::set_status(&app, id, status).await?;
            if summary.previous.is_none() {
                bail!("no user {id}");
            }
            println!("user {id}: {} now; {summary}", status.as_str());
            Ok(())
        }
        Command::Run
        | Command::Serve
        | Command::Relay
        | Command::Project
        | Command::PrintSchema { .. } => unreachable!("not an operator command"),
    }
}

/// One PostgreSQL session for a command that needs nothing else (no pool,
/// no statement timeout: these commands are the operator's).
async fn session(config: &Config) -> anyhow::Result<diesel_async::AsyncPgConnection> {
    use diesel_async::AsyncConnection as _;
    let url = store::pool::with_keepalives(config.session_url());
    Ok(diesel_async::AsyncPgConnection::establish(&url).await?)
}

fn parse_user_id(s: &str) -> Result<UserId, String> {
    s.parse()
        .map_err(|()| format!("{s:?} is not a user id (a positive integer)"))
}
