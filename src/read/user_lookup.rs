//! Reading users through the process's cache ([`super::users::UserCache`]):
//! what it holds, and the rest from PostgreSQL (or its read replica) in one
//! statement, kept unless a change was noticed meanwhile.

use std::sync::Arc;

use super::users::UserCache;
use crate::error::ApiError;
use crate::model::{User, UserId};
use crate::store::{PgConn, PgPool};

impl UserCache {
    /// The users with these handles: from the process cache, the rest from
    /// PostgreSQL in one statement, kept in the cache unless a change was
    /// noticed meanwhile. Handles nobody has are left out.
    pub(crate) async fn by_handles(
        self: &Arc<Self>,
        pg: &PgPool,
        handles: &[String],
    ) -> Result<Vec<User>, ApiError> {
        self.lookup(
            pg,
            handles,
            |h| self.get_by_handle(h),
            |h| self.held_by_handle(h),
            async |conn, missing| crate::store::users::find_by_handles(conn, missing).await,
        )
        .await
    }

    /// The users with these ids, whatever their status, as [`Self::by_handles`].
    pub(crate) async fn by_ids(
        self: &Arc<Self>,
        pg: &PgPool,
        ids: &[UserId],
    ) -> Result<Vec<User>, ApiError> {
        self.lookup(
            pg,
            ids,
            |id| self.get(*id),
            |id| self.held(*id),
            async |conn, missing| crate::store::users::find_many(conn, missing).await,
        )
        .await
    }

    /// The users `keys` name: those `cached` has, and the rest as `read`
    /// finds them in one statement (kept unless a change was noticed since
    /// before it ran) — or, when PostgreSQL cannot answer and the cache has
    /// lost its session, as `held` has them all.
    async fn lookup<K: Clone>(
        self: &Arc<Self>,
        pg: &PgPool,
        keys: &[K],
        cached: impl Fn(&K) -> Option<User>,
        held: impl Fn(&K) -> Option<User>,
        read: impl AsyncFnOnce(&mut PgConn, &[K]) -> diesel::QueryResult<Vec<User>> + Clone,
    ) -> Result<Vec<User>, ApiError> {
        let mut found = Vec::with_capacity(keys.len());
        let mut missing = Vec::new();
        for key in keys {
            match cached(key) {
                Some(user) => found.push(user),
                None => missing.push(key.clone()),
            }
        }
        if missing.is_empty() {
            return Ok(found);
        }
        let held = if self.is_serving() {
            None
        } else {
            missing.iter().map(held).collect::<Option<Vec<User>>>()
        };
        let seen = self.generation();
        let (read, fresh) = self
            .or_held(pg, held, async |conn| Ok(read(conn, &missing).await?))
            .await?;
        if fresh {
            self.insert(seen, &read);
        }
        found.extend(read);
        Ok(found)
    }
}
