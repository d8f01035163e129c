//! Every Redis key Kith uses, in one place.
//!
//! A user's keys carry the id in a `{…}` hash tag, so under Redis Cluster all
//! keys of one user share a slot and every script touches one slot only.

use crate::model::UserId;

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

    /// The follow/unfollow token bucket of `user`.
    pub fn follow_rate_limit(&self, user: UserId) -> String {
        format!("{}rl:follow:{{{user}}}", self.prefix)
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
