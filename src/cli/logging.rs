//! Logs and traces of the `kith` process: a `tracing` subscriber writing
//! to stderr, and OTLP export of spans with the `otlp` feature.

/// Logs to stderr (JSON with `KITH_LOG_JSON`), filtered by `RUST_LOG`.
pub(super) fn init(json: bool) {
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
