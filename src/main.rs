//! The `kith` command line: the service, its jobs and developer tools.

use clap::Parser as _;

use kith::config::Config;
use kith::jobs::Jobs;

mod cli;

use cli::{Cli, Command};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::PrintSchema = cli.command {
        print!("{}", kith::graph::sdl());
        return Ok(());
    }
    let mut config = Config::from_env()?;
    init_tracing(config.log_json);
    if !matches!(
        cli.command,
        Command::Run | Command::Serve | Command::Relay | Command::Project
    ) {
        // Operator commands walk whole tables and count huge lists; a bound
        // meant for API requests would only make them fail on big accounts.
        config.statement_timeout_ms = 0;
    }
    match cli.command {
        Command::Run => Ok(kith::jobs::run(config, Jobs::RUN).await?),
        Command::Serve => Ok(kith::jobs::run(config, Jobs::SERVE).await?),
        Command::Relay => Ok(kith::jobs::run(config, Jobs::RELAY).await?),
        Command::Project => Ok(kith::jobs::run(config, Jobs::PROJECT).await?),
        command => cli::operate(command, config).await,
    }
}

/// mimalloc instead of glibc's allocator: a request allocates and frees many
/// small objects across threads (parsed documents, JSON values, futures), and
/// glibc's `malloc`/`free` took a seventh of the CPU in a profile. Set here,
/// in the binary (and in the benches), not in the library.
#[cfg(not(feature = "jemalloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// jemalloc instead, to compare (`--features jemalloc`).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn init_tracing(json: bool) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = if json {
        fmt.json().boxed()
    } else {
        fmt.boxed()
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otlp_layer())
        .init();
}

/// Spans exported over OTLP when built with the `otlp` feature and
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
#[cfg(feature = "otlp")]
fn otlp_layer<S>() -> Option<impl tracing_subscriber::Layer<S>>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use opentelemetry::trace::TracerProvider as _;
    std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT")?;
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(exporter) => exporter,
        Err(e) => {
            eprintln!("OTLP export off: {e}");
            return None;
        }
    };
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("kith")
                .build(),
        )
        .build();
    let tracer = provider.tracer("kith");
    opentelemetry::global::set_tracer_provider(provider);
    Some(tracing_opentelemetry::layer().with_tracer(tracer))
}

#[cfg(not(feature = "otlp"))]
fn otlp_layer() -> Option<tracing_subscriber::layer::Identity> {
    None
}
