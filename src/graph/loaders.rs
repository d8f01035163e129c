//! DataLoaders: every user, counter and relationship a request needs is
//! fetched in one batch per kind, whatever the shape of the query.

use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::dataloader::{DataLoader, HashMapCache, Loader};

use crate::app::App;
use crate::cache::counters::CounterRecord;
use crate::error::ApiError;
use crate::model::{User, UserId, UserStatus};
use crate::read;
use crate::store::following::PairState;
use crate::store::users;

/// Users by id (deleted accounts are absent).
pub struct UserLoader(Arc<App>);

impl Loader<UserId> for UserLoader {
    type Value = User;
    type Error = Arc<ApiError>;

    async fn load(&self, keys: &[UserId]) -> Result<HashMap<UserId, User>, Self::Error> {
        let mut conn = self.0.pg.get().await.map_err(|e| Arc::new(e.into()))?;
        let found = users::find_many(&mut conn, keys)
            .await
            .map_err(|e| Arc::new(e.into()))?;
        Ok(found
            .into_iter()
            .filter(|u| u.status != UserStatus::Deleted)
            .map(|u| (u.id, u))
            .collect())
    }
}

/// Users by handle (deleted accounts are absent): every `userByHandle` of a
/// request in one statement.
pub struct HandleLoader(Arc<App>);

impl Loader<String> for HandleLoader {
    type Value = User;
    type Error = Arc<ApiError>;

    async fn load(&self, keys: &[String]) -> Result<HashMap<String, User>, Self::Error> {
        let mut conn = self.0.pg.get().await.map_err(|e| Arc::new(e.into()))?;
        let found = users::find_by_handles(&mut conn, keys)
            .await
            .map_err(|e| Arc::new(e.into()))?;
        Ok(found
            .into_iter()
            .filter(|u| u.status != UserStatus::Deleted)
            .map(|u| (u.handle.clone(), u))
            .collect())
    }
}

/// Counter records by user.
pub struct CounterLoader(Arc<App>);

impl Loader<UserId> for CounterLoader {
    type Value = CounterRecord;
    type Error = Arc<ApiError>;

    async fn load(&self, keys: &[UserId]) -> Result<HashMap<UserId, CounterRecord>, Self::Error> {
        let loaded = read::counters::load(&self.0, keys)
            .await
            .map_err(Arc::new)?;
        self.0.sampled_check.counters_read(&self.0, keys);
        Ok(loaded)
    }
}

/// Relationships by `(subject, other)`.
pub struct RelationLoader(Arc<App>);

impl Loader<(UserId, UserId)> for RelationLoader {
    type Value = PairState;
    type Error = Arc<ApiError>;

    async fn load(
        &self,
        keys: &[(UserId, UserId)],
    ) -> Result<HashMap<(UserId, UserId), PairState>, Self::Error> {
        read::relations::load(&self.0, keys).await.map_err(Arc::new)
    }
}

/// The loaders of one request; each caches what it loaded for that request only.
pub struct Loaders {
    /// Users by id.
    pub users: DataLoader<UserLoader, HashMapCache>,
    /// Users by handle.
    pub handles: DataLoader<HandleLoader, HashMapCache>,
    /// Counters by user.
    pub counters: DataLoader<CounterLoader, HashMapCache>,
    /// Relationships by pair.
    pub relations: DataLoader<RelationLoader, HashMapCache>,
}

impl Loaders {
    /// Fresh loaders (their caches live for one request).
    pub fn new(app: &Arc<App>) -> Self {
        let delay = std::time::Duration::from_millis(app.config.loader_delay_ms);
        Self {
            users: batched(UserLoader(app.clone()), delay),
            handles: batched(HandleLoader(app.clone()), delay),
            counters: batched(CounterLoader(app.clone()), delay),
            relations: batched(RelationLoader(app.clone()), delay),
        }
    }
}

fn batched<T: Send + Sync + 'static>(
    loader: T,
    delay: std::time::Duration,
) -> DataLoader<T, HashMapCache> {
    DataLoader::with_cache(loader, tokio::spawn, HashMapCache::default()).delay(delay)
}
