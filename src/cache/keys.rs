//! Every Redis key Kith uses, in one place.
//!
//! A user's keys carry the id in a `{…}` hash tag, so under Redis Cluster all
//! keys of one user share a slot and every script touches one slot only.

use crate::model::UserId;
use crate::paging::ListKey;

/// Builds keys under an optional prefix (tenants, tests).
#[derive(Clone, Debug, Default)]
pub struct RedisKeys {
    prefix: String,
}

impl RedisKeys {
    /// Keys under `prefix` (may be empty).
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
        }
    }

    /// The counter record of `user` (`ucnt:{uid}`).
    pub fn counter_record(&self, user: UserId) -> String {
        format!("{}ucnt:{{{user}}}", self.prefix)
    }

    /// The three keys of one cached list: the ZSet, its member versions, its coverage marker.
    pub fn list(&self, list: ListKey) -> [String; 3] {
        let base = match list {
            ListKey::Following(user) => format!("{}uf:flws:{{{user}}}", self.prefix),
            ListKey::Followers(user) => format!("{}uf:fans:{{{user}}}", self.prefix),
        };
        [base.clone(), format!("{base}:v"), format!("{base}:cov")]
    }

    /// The member versions a cached list had before its last fill, kept a
    /// while as tombstones (see `lua/list_fill_begin.lua`).
    pub fn list_tombstones(&self, list: ListKey) -> String {
        let [_, versions, _] = self.list(list);
        format!("{versions}:prev")
    }

    /// Marks `user`'s counters as checked recently (the sampled check).
    pub fn counter_check_mark(&self, user: UserId) -> String {
        format!("{}chk:cnt:{{{user}}}", self.prefix)
    }

    /// The pub/sub channel that wakes outbox relays after a commit.
    pub fn relay_wake_channel(&self) -> String {
        format!("{}kith:outbox", self.prefix)
    }

    /// The pub/sub channel that wakes parked projectors after a relay's
    /// batch reached the broker.
    pub fn projector_wake_channel(&self) -> String {
        format!("{}kith:produced", self.prefix)
    }

    /// The pub/sub channel of live updates (what projectors applied).
    pub fn live_channel(&self) -> String {
        format!("{}kith:live", self.prefix)
    }

    /// The follow/unfollow token bucket of `user`.
    pub fn follow_rate_limit(&self, user: UserId) -> String {
        format!("{}rl:follow:{{{user}}}", self.prefix)
    }

    /// `user`'s kept suggestions (`sugg:{uid}`, JSON with the generation
    /// they were computed at) and the generation of the changes they depend
    /// on (`sugg:{uid}:gen`, one more per change): one slot.
    pub fn suggestions(&self, user: UserId) -> [String; 2] {
        let kept = format!("{}sugg:{{{user}}}", self.prefix);
        let generation = format!("{kept}:gen");
        [kept, generation]
    }

    /// Patterns of every key derived from PostgreSQL (counter records,
    /// list caches with their versions and coverage, counter-check marks,
    /// kept suggestions), for every user: what a restore must forget. Rate
    /// limits are not derived and are left out.
    pub fn derived_patterns(&self) -> Vec<String> {
        ["ucnt:", "uf:", "chk:", "sugg:"]
            .iter()
            .map(|kind| super::sweep::prefix_pattern(&format!("{}{kind}", self.prefix)))
            .collect()
    }

    /// The token bucket of `user`'s imports (`rl:import:{uid}`), apart from
    /// its follows'.
    pub fn import_rate_limit(&self, user: UserId) -> String {
        format!("{}rl:import:{{{user}}}", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_carry_the_user_hash_tag() {
        let keys = RedisKeys::new("t1:");
        assert_eq!(
            keys.follow_rate_limit(UserId::new(42).unwrap()),
            "t1:rl:follow:{42}"
        );
    }
}
