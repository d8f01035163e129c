//! What Redis and the in-process caches hold for a test, and waiting for them.

use kith::model::UserId;
use kith::testing::auth::Viewer;
use serde_json::{Value, json};

use super::*;

impl TestApp {
    /// Marks a list as cached (and empty), as a reader's fill would.
    pub async fn cache_list(
        &self,
        list: kith::testing::paging::ListKey,
        entries: &[kith::testing::cache::lists::ListEntry],
    ) {
        use kith::testing::cache::lists::{FillClaim, begin_fill, commit_fill};
        let mut redis = self.app.redis.get().await.unwrap();
        let claim = begin_fill(&mut *redis, &self.app.keys, list, "test", false)
            .await
            .unwrap();
        assert_eq!(claim, FillClaim::Granted);
        let ttl = std::time::Duration::from_secs(600);
        assert!(
            commit_fill(
                &mut *redis,
                &self.app.keys,
                list,
                "test",
                ttl,
                entries,
                true
            )
            .await
            .unwrap()
        );
    }

    /// Writes counter records and edge states through to the caches, as
    /// the projector and the write path do (many users a script call on one
    /// Redis server, one user's a call on a cluster).
    pub async fn write_through(
        &self,
        records: &[(UserId, kith::testing::cache::counters::CounterRecord)],
        edges: &[kith::testing::cache::lists::EdgeState],
    ) {
        let mut redis = self.app.redis.get().await.unwrap();
        let together = !self.app.redis.is_cluster();
        kith::testing::cache::write_through(&mut *redis, &self.app.keys, records, edges, together)
            .await
            .unwrap();
    }

    /// The members of a cached list (newest first), `None` if not cached.
    pub async fn cached_list(&self, list: kith::testing::paging::ListKey) -> Option<Vec<UserId>> {
        let mut redis = self.app.redis.get().await.unwrap();
        kith::testing::cache::lists::cached_members(&mut *redis, &self.app.keys, list)
            .await
            .unwrap()
            .map(|members| members.into_iter().map(|(user, _)| user).collect())
    }

    /// The cached counter record of `user`.
    pub async fn counter_record(
        &self,
        user: UserId,
    ) -> Option<kith::testing::cache::counters::CounterRecord> {
        let mut redis = self.app.redis.get().await.unwrap();
        kith::testing::cache::counters::load_many(&mut *redis, &self.app.keys, &[user])
            .await
            .unwrap()
            .pop()
            .flatten()
    }

    /// Waits until the list-cache fills this process started are done.
    pub async fn fills_finished(&self) {
        eventually("the fills finish", 10, || async {
            (self.app.read.fills_in_flight() == 0).then_some(())
        })
        .await;
    }

    /// Waits until the in-process user cache serves (its listening session is up).
    pub async fn users_cached(&self) {
        eventually("the user cache listens", 10, || async {
            self.app.read.users().is_serving().then_some(())
        })
        .await;
    }

    /// Waits until a change of `user`'s row made outside this process has
    /// reached its user cache (PostgreSQL's notice takes milliseconds).
    pub async fn user_change_seen(&self, user: UserId) {
        let fresh = {
            let mut conn = self.conn().await;
            kith::testing::store::users::find(&mut conn, user)
                .await
                .unwrap()
        };
        eventually("the user cache drops the old row", 5, || async {
            let cached = self.app.read.users().get(user);
            (cached.is_none() || cached == fresh).then_some(())
        })
        .await;
    }

    /// Deletes every Redis key of this test, as a FLUSHALL would (other
    /// tests share the server, so only this prefix goes).
    pub async fn flush_redis(&self) {
        let mut redis = self.app.redis.get().await.unwrap();
        let pattern = format!("{}*", self.app.config.redis.prefix);
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(&pattern)
            .query_async(&mut *redis)
            .await
            .unwrap();
        if !keys.is_empty() {
            let _: () = redis::cmd("DEL")
                .arg(&keys)
                .query_async(&mut *redis)
                .await
                .unwrap();
        }
    }
}

/// The user query a user-cache test reads with.
const USER: &str = "query($id: ID!) { user(id: $id) { handle displayName } }";

/// `user(id:) { handle displayName }`, read anonymously.
pub async fn read_user(t: &TestApp, id: UserId) -> Value {
    let id = kith::testing::graph::ids::user_id(id).to_string();
    let r = t
        .execute(Viewer::Anonymous, USER, json!({ "id": id }))
        .await;
    assert_ok(&r);
    r["data"]["user"].clone()
}

/// Reads `id` until a read costs no statement: the row is cached.
pub async fn user_row_cached(t: &TestApp, id: UserId) {
    t.users_cached().await;
    eventually("the row is cached", 5, || async {
        let before = t.app.round_trips.snapshot().0;
        read_user(t, id).await;
        (t.app.round_trips.snapshot().0 == before).then_some(())
    })
    .await;
}
