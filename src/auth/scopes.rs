//! Service scopes: what a token issued to another service (not to a user)
//! may ask of Kith. A token is a service's when its `scope` claim — a
//! space-separated list, as OAuth 2.0 (RFC 9068) writes it — names at
//! least one Kith scope; its `sub` then names the service, not a user, and
//! it acts for no account. Scopes of other APIs in the claim are ignored.

/// A set of Kith scopes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scopes(u8);

impl Scopes {
    /// `kith:close-friends`: whether an account is in the close friends of
    /// many authors at once, and any account's close friends (what a
    /// content service shares with).
    pub const CLOSE_FRIENDS: Self = Self(1);

    /// `kith:notify`: who asked to be told when an account posts (what a
    /// notification service sends to).
    pub const NOTIFY: Self = Self(2);

    /// Every scope with its name in the `scope` claim.
    pub const NAMED: [(&'static str, Self); 2] = [
        ("kith:close-friends", Self::CLOSE_FRIENDS),
        ("kith:notify", Self::NOTIFY),
    ];

    /// The Kith scopes named in a `scope` claim's value.
    pub fn parse(claim: &str) -> Self {
        claim
            .split_ascii_whitespace()
            .filter_map(|word| Self::NAMED.iter().find(|(name, _)| *name == word))
            .fold(Self::default(), |all, (_, scope)| Self(all.0 | scope.0))
    }

    /// The Kith scopes of a token's claims (none without a `scope` string).
    pub(crate) fn of(claims: &serde_json::Value) -> Self {
        claims
            .get("scope")
            .and_then(serde_json::Value::as_str)
            .map(Self::parse)
            .unwrap_or_default()
    }

    /// Whether every scope of `other` is in this set.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set holds no scope.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The claim's text for this set, names in their order.
    pub fn names(self) -> String {
        Self::NAMED
            .iter()
            .filter(|(_, scope)| self.contains(*scope))
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_kith_scopes_count() {
        assert_eq!(
            Scopes::parse("openid kith:close-friends profile"),
            Scopes::CLOSE_FRIENDS
        );
        assert!(Scopes::parse("openid profile kith:unknown").is_empty());
        assert!(Scopes::parse("kith:close-friendsX").is_empty());
        assert!(Scopes::of(&serde_json::json!({ "scope": ["kith:close-friends"] })).is_empty());
        assert_eq!(Scopes::CLOSE_FRIENDS.names(), "kith:close-friends");
        assert_eq!(
            Scopes::parse("kith:notify kith:close-friends").names(),
            "kith:close-friends kith:notify"
        );
        assert!(Scopes::CLOSE_FRIENDS.contains(Scopes::default()));
        assert!(!Scopes::default().contains(Scopes::CLOSE_FRIENDS));
    }
}
