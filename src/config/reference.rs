//! `docs/configuration.md`: the settings table of [`super::settings`],
//! between a preamble and notes, as Markdown.

use super::settings;

/// The configuration reference, `docs/configuration.md`, as the settings
/// table says it.
pub fn reference() -> String {
    let mut out = format!("# Configuration\n\n{}\n", PREAMBLE);
    for section in settings::SECTIONS {
        out.push_str(&format!(
            "\n## {}\n\n| variable | default | accepted | meaning |\n|---|---|---|---|\n",
            section.title
        ));
        for setting in section.settings {
            let default = match setting.default {
                None => "unset".to_owned(),
                Some("") => "empty".to_owned(),
                Some(value) => format!("`{value}`"),
            };
            let accepted = setting.accepted().unwrap_or_default();
            out.push_str(&format!(
                "| `{}` | {default} | {accepted} | {} |\n",
                setting.name, setting.doc
            ));
        }
    }
    out.push_str(&format!("\n{}\n", NOTES));
    out
}

/// What `docs/configuration.md` says before the settings.
const PREAMBLE: &str = "Environment variables; the defaults match the local stack \
(`scripts/stack up`). This document is generated from the settings table \
(`src/config/settings*.rs`; `KITH_UPDATE_DOCS=1 cargo test --lib config` rewrites it; a test fails when the two differ).";

/// What `docs/configuration.md` says after the settings.
const NOTES: &str = "Redis must not evict keys (`maxmemory-policy noeviction`, Redis's default): \
a cached list spans three keys that must expire together, and one evicted alone would make a \
list read as emptier than it is, so Kith refuses to start on an evicting Redis. Size it for the \
caches: a counter record is about 100 bytes with its key, a cached list about 120 bytes per \
member (ZSet entry and version) — at most `KITH_LIST_CACHE_SIZE` members after a fill \
(`KITH_FOLLOWING_CACHE_SIZE` for a following list: about 1.2 MB for one of 10,000), more as \
events arrive, for `KITH_LIST_CACHE_TTL_SECS` (the versions of removed members ten minutes \
longer). Reads stop filling lists once Redis's `used_memory` passes `KITH_FILL_MEMORY_LIMIT` \
(three quarters of `maxmemory` by default), and writes drop the cached lists they would grow \
past it, so caches — a crawl of every public list included — never take Redis to its \
limit: set `maxmemory`. Should Redis fill up \
anyway, its writes fail with `OOM`, on purpose: the rate limiter \
cannot keep its bucket, so edge writes are refused `UNAVAILABLE` (never let through \
unlimited); reads go on from PostgreSQL; the projector drops the caches a batch touched \
instead of retrying forever; `kith_redis_out_of_memory_total` counts every refused write by \
path. Reads never fill a list of a user that does not exist or is not active, so made-up ids \
cannot grow Redis.

`scripts/stack` reads `DATABASE_URL`, `REDIS_URL` and `KAFKA_BROKERS` too, so the stack and \
the service agree on ports. `KITH_STACK_DIR` (default `.stack/`) and `KITH_TOOLS_DIR` \
(default `~/.cache/kith`) move the data and the broker build.";
