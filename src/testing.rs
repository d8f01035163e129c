//! What the integration tests and benches drive directly, and nothing
//! else: the store's queries, the caches' scripts, the pipeline's parts,
//! the consistency tools. Not an API — it follows the code. The library's
//! own surface is [`crate::app`], [`crate::config`], [`crate::jobs`],
//! [`crate::cli`] and [`crate::model`]; every other module is private, so
//! the compiler finds what nothing uses.
//!
//! The modules mirror the crate's, so a test names
//! `kith::testing::store::lists::page` for `crate::store::lists::page`.
#![allow(missing_docs)]

pub mod auth {
    pub use crate::auth::{Principal, Scopes, TokenError, TokenKeys, Viewer};
}

pub mod cache {
    pub use crate::cache::{RedisPool, write_through};
    pub mod counters {
        pub use crate::cache::counters::{CounterRecord, load_many};
    }
    pub mod lists {
        pub use crate::cache::lists::{
            Coverage, EdgeState, Fill, FillClaim, ListEntry, begin_fill, cached_members,
            commit_fill, commit_fills, coverages, read_page,
        };
    }
}

pub mod consistency {
    pub mod rebuild {
        pub use crate::consistency::rebuild::{Options, rebuild};
    }
    pub mod restore {
        pub use crate::consistency::restore::{OriginChange, after_restore, change_origin};
    }
    pub mod reconcile {
        pub use crate::consistency::reconcile::{Scope, reconcile, schedule};
    }
    pub mod verify {
        pub use crate::consistency::verify::{Kind, Options, Report, verify};
    }
}

pub mod events {
    pub mod follow {
        pub use crate::events::follow::{FollowEvent, FollowEventType};
    }
}

pub mod graph {
    pub use crate::graph::federation::subgraph_sdl;
    pub use crate::graph::{KithSchema, schema, sdl};
    pub mod ids {
        pub use crate::graph::ids::{decode_user, user_id};
    }
    pub mod loaders {
        pub use crate::graph::loaders::Loaders;
    }
    pub mod persisted {
        pub use crate::graph::persisted::sha256_hex;
    }
    pub mod run {
        pub use crate::graph::run::{QueryText, run};
    }
}

pub mod http {
    pub use crate::http::{metrics_router, router, sample_backlog, serve_metrics};
}

pub mod live {
    pub use crate::live::listen;
}

pub mod metrics {
    pub use crate::metrics::{PathLabels, ReplicaLabels, SkipLabels};
}

pub mod paging {
    pub use crate::paging::{ListKey, PageRequest, Position, page_of, page_of_head};
}

pub mod pipeline {
    pub use crate::error::PipelineError;
    pub mod dead_letters {
        pub use crate::pipeline::dead_letters::replay;
    }
    pub mod origin {
        pub use crate::pipeline::origin::HEADER;
    }
    pub mod kafka {
        pub use crate::pipeline::kafka::{
            client_config, consumer_config, ensure_topics, producer, producer_config,
        };
    }
    pub mod projector {
        pub use crate::pipeline::projector::{ProjectorHooks, run};
        pub mod apply {
            pub use crate::pipeline::projector::apply::apply_items;
        }
        pub mod batch {
            pub use crate::pipeline::projector::batch::{Action, Event, Item};
        }
    }
    pub mod relay {
        pub use crate::pipeline::relay::run;
    }
}

pub mod read {
    pub mod pages {
        pub use crate::read::pages::{Source, fill, page, recheck};
    }
    pub mod suggest {
        pub use crate::read::suggest::{ReasonKind, Suggestion, compute, for_viewer};
    }
}

pub mod shutdown {
    pub use crate::shutdown::{Shutdown, ShutdownTrigger};
}

pub mod store {
    pub mod checks {
        pub use crate::store::checks::user_counts;
    }
    pub mod content {
        pub use crate::store::content::prune;
    }
    pub mod dead_letters {
        pub use crate::store::dead_letters::list;
    }
    pub mod follower {
        pub use crate::store::follower::{Applied, EdgeEvent, apply, apply_many, rows};
    }
    pub mod lists {
        pub use crate::store::lists::{newest, page};
    }
    pub mod migrate {
        pub use crate::store::migrate::{MIGRATIONS, run_pending};
    }
    pub mod outbox {
        pub use crate::store::outbox::backlog;
    }
    pub mod partitions {
        pub use crate::store::partitions::{TopicPartition, list};
    }
    pub mod seed {
        pub use crate::store::seed::{Plan, Summary, generate};
    }
    pub mod stats {
        pub use crate::store::stats::{UserStats, find};
    }
    pub mod users {
        pub use crate::store::users::{create, find, find_many, seed, set_status};
    }
}

pub mod write {
    pub use crate::write::{EdgeChange, change_edge};
    pub mod lifecycle {
        pub use crate::write::lifecycle::{set_status, sweep};
    }
}

/// Gives `config` a PostgreSQL place of its own named `name`, for a test or
/// a bench: a schema of `DATABASE_URL`'s database, reached through the
/// `search_path` in the URL's `options` — or, through a transaction pooler
/// (`pooler`, which carries no `options`), a database of its own, with
/// sessions on PostgreSQL itself (`scripts/stack pooler clean` drops the
/// databases named `kt_*`).
pub async fn isolate_postgres(
    config: &mut crate::config::Config,
    name: &str,
    pooler: Option<&str>,
) -> Result<(), diesel::result::Error> {
    use diesel_async::{AsyncConnection as _, RunQueryDsl as _};
    let base = config.database.url.clone();
    let mut admin = diesel_async::AsyncPgConnection::establish(&base)
        .await
        .map_err(|e| diesel::result::Error::QueryBuilderError(e.into()))?;
    match pooler {
        Some(pooler) => {
            diesel::sql_query(format!("CREATE DATABASE {name}"))
                .execute(&mut admin)
                .await?;
            config.database.session_url = Some(with_database(&base, name));
            config.database.url = with_database(pooler, name);
            config.database.pg_statement_cache = false;
        }
        None => {
            diesel::sql_query(format!("CREATE SCHEMA {name}"))
                .execute(&mut admin)
                .await?;
            let separator = if base.contains('?') { '&' } else { '?' };
            config.database.url = format!("{base}{separator}options=-c%20search_path%3D{name}");
        }
    }
    Ok(())
}

/// `url` with its database replaced by `database`.
fn with_database(url: &str, database: &str) -> String {
    let host = url.find("://").map_or(0, |i| i + 3);
    let path = url[host..].find('/').map_or(url.len(), |i| host + i);
    let query = url[path..].find('?').map_or(url.len(), |i| path + i);
    format!("{}/{database}{}", &url[..path], &url[query..])
}
