//! What the GraphQL layer holds in process: the persisted queries and the
//! parsed documents, by query text.

use crate::config::Config;
use crate::graph::limits::{self, Documents};
use crate::graph::persisted::PersistedQueries;

/// Operations known to this process.
pub struct Operations {
    /// Persisted queries: texts learnt through APQ, the manifest, the allow-list mode.
    pub persisted: PersistedQueries,
    /// Parsed GraphQL documents by query text ([`crate::graph::limits`]).
    pub documents: Documents,
}

impl Operations {
    /// The persisted queries `config` names, and an empty document cache;
    /// an error says which setting is unusable.
    pub fn new(config: &Config) -> Result<Self, String> {
        Ok(Self {
            persisted: PersistedQueries::new(config)?,
            documents: limits::documents(),
        })
    }
}
