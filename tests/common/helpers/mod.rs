//! What the integration tests share: an isolated Kith application per test
//! (its own PostgreSQL schema and Redis key prefix), and what a test does
//! with it, by concern. Each test binary (`api`, `resilience`,
//! `distribution`) uses part of it, hence the allowances.
#![allow(dead_code, unused_imports)]

mod app;
mod caches;
mod clients;
mod jobs;
mod live;
mod processes;
mod seed;
mod truth;

pub use app::*;
pub use caches::*;
pub use clients::*;
pub use jobs::*;
pub use live::*;
pub use processes::*;
pub use seed::*;
pub use truth::*;
