//! PostgreSQL: the truth (`following`, `users`), the outbox, and the derived
//! tables the projector maintains. One module per table; every query Kith
//! runs against PostgreSQL lives below here.

pub mod checks;
pub mod content;
pub mod dead_letters;
pub mod follower;
pub mod following;
pub mod hidden_edges;
pub mod lists;
pub mod migrate;
pub mod outbox;
pub mod partitions;
pub mod pool;
pub mod schema;
pub mod seed;
pub mod stats;
pub mod users;

pub use pool::{PgConn, PgPool};
