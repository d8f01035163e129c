//! Opaque, signed paging cursors: a connection, a follow time and a user id.
//!
//! A cursor names the connection it was issued for (a list, or an
//! intersection of two), so one connection's cursor cannot be replayed
//! against another, and carries an HMAC, so a tampered cursor is refused
//! (`BAD_CURSOR`) instead of silently paging somewhere else. The position
//! is enciphered with a keystream drawn from the secret and the HMAC (a
//! deterministic, synthetic-IV construction): a cursor reveals no user id,
//! which matters where a page ends at a member it does not show (an
//! account in a block with the viewer).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::ApiError;
use crate::model::UserId;
use crate::paging::{ListKey, Position, PrivateList};

const VERSION: u8 = 1;
/// Version, kind, the scope's first id, the position (follow time, user);
/// then the scope's other id, if it has one. (A list's cursor is laid out
/// as before intersections existed: cursors already handed out stay valid.)
const HEAD: usize = 1 + 1 + 8 + 8 + 8;
const MAC: usize = 12;
/// Where the position (follow time, user) lies in a cursor's body.
const POSITION: std::ops::Range<usize> = 10..26;

/// The connection a cursor pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CursorScope {
    /// A follow list.
    List(ListKey),
    /// `User.commonFollowing`: whom the first user and the second both follow.
    Common(UserId, UserId),
    /// `User.knownFollowers`: followers of the first user whom the second (the viewer) follows.
    KnownFollowers(UserId, UserId),
    /// One of the viewer's own lists.
    Private(PrivateList),
}

impl From<PrivateList> for CursorScope {
    fn from(list: PrivateList) -> Self {
        Self::Private(list)
    }
}

impl From<ListKey> for CursorScope {
    fn from(list: ListKey) -> Self {
        Self::List(list)
    }
}

/// Signs and checks cursors.
#[derive(Clone)]
pub(crate) struct CursorKeys {
    /// An HMAC keyed with the cursor secret, before any input: cloned for
    /// each tag and keystream, so the key's two blocks are hashed once per
    /// process, not twice a cursor (a page of 20 makes 21 cursors).
    keyed: Hmac<Sha256>,
}

fn scope_parts(scope: CursorScope) -> (u8, Vec<UserId>) {
    match scope {
        CursorScope::List(ListKey::Following(owner)) => (1, vec![owner]),
        CursorScope::List(ListKey::Followers(owner)) => (2, vec![owner]),
        CursorScope::Common(a, b) => (3, vec![a, b]),
        CursorScope::KnownFollowers(user, viewer) => (4, vec![user, viewer]),
        CursorScope::Private(PrivateList::Blocking(owner)) => (5, vec![owner]),
        CursorScope::Private(PrivateList::Muting(owner)) => (6, vec![owner]),
        CursorScope::Private(PrivateList::FollowRequests(owner)) => (7, vec![owner]),
        CursorScope::Private(PrivateList::SentFollowRequests(owner)) => (8, vec![owner]),
        CursorScope::Private(PrivateList::CloseFriends(owner)) => (9, vec![owner]),
        CursorScope::Private(PrivateList::NotifyFollowers(owner)) => (10, vec![owner]),
    }
}

impl CursorKeys {
    /// Keys derived from the service secret (domain-separated from tokens).
    pub(crate) fn new(secret: &str) -> Self {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
        mac.update(b"kith cursor key v1");
        let key = mac.finalize().into_bytes();
        Self {
            keyed: Hmac::<Sha256>::new_from_slice(&key).expect("any key length"),
        }
    }

    fn tag(&self, body: &[u8]) -> [u8; MAC] {
        let mut mac = self.keyed.clone();
        mac.update(body);
        let full = mac.finalize().into_bytes();
        let mut tag = [0u8; MAC];
        tag.copy_from_slice(&full[..MAC]);
        tag
    }

    /// XORs the position bytes of `body` with the keystream of `tag`.
    fn mask(&self, tag: &[u8], body: &mut [u8]) {
        let mut mac = self.keyed.clone();
        mac.update(b"position");
        mac.update(tag);
        let stream = mac.finalize().into_bytes();
        for (byte, key) in body[POSITION].iter_mut().zip(stream.iter()) {
            *byte ^= key;
        }
    }

    /// The cursor of `position` in the connection `scope`.
    pub(crate) fn encode(&self, scope: impl Into<CursorScope>, position: Position) -> String {
        let (kind, owners) = scope_parts(scope.into());
        let mut bytes = Vec::with_capacity(HEAD + 8 * (owners.len() - 1) + MAC);
        bytes.push(VERSION);
        bytes.push(kind);
        bytes.extend_from_slice(&owners[0].get().to_be_bytes());
        bytes.extend_from_slice(&position.followed_at_ms.to_be_bytes());
        bytes.extend_from_slice(&position.user.get().to_be_bytes());
        for owner in &owners[1..] {
            bytes.extend_from_slice(&owner.get().to_be_bytes());
        }
        let tag = self.tag(&bytes);
        self.mask(&tag, &mut bytes);
        bytes.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The position a cursor names, if it was issued for `scope` and is intact.
    pub(crate) fn decode(
        &self,
        scope: impl Into<CursorScope>,
        cursor: &str,
    ) -> Result<Position, ApiError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(cursor)
            .map_err(|_| ApiError::BadCursor)?;
        let (kind, owners) = scope_parts(scope.into());
        let body_len = HEAD + 8 * (owners.len() - 1);
        if bytes.len() != body_len + MAC {
            return Err(ApiError::BadCursor);
        }
        let (body, tag) = bytes.split_at(body_len);
        let mut body = body.to_vec();
        self.mask(tag, &mut body);
        let body = &body[..];
        let mut mac = self.keyed.clone();
        mac.update(body);
        mac.verify_truncated_left(tag)
            .map_err(|_| ApiError::BadCursor)?;
        let i64_at = |i: usize| i64::from_be_bytes(body[i..i + 8].try_into().expect("8 bytes"));
        let same_scope = i64_at(2) == owners[0].get()
            && owners[1..]
                .iter()
                .enumerate()
                .all(|(i, owner)| i64_at(HEAD + 8 * i) == owner.get());
        if body[0] != VERSION || body[1] != kind || !same_scope {
            return Err(ApiError::BadCursor);
        }
        Ok(Position {
            followed_at_ms: i64_at(10),
            user: UserId::new(i64_at(18)).ok_or(ApiError::BadCursor)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(n: i64) -> UserId {
        UserId::new(n).unwrap()
    }

    #[test]
    fn round_trip_and_refusals() {
        let keys = CursorKeys::new("a-secret-of-sufficient-length");
        let list = ListKey::Followers(user(7));
        let position = Position {
            followed_at_ms: 1_700_000_000_123,
            user: user(42),
        };
        let cursor = keys.encode(list, position);
        assert_eq!(keys.decode(list, &cursor).unwrap(), position);
        // The same bytes as every release before: cursors held by clients
        // stay valid.
        assert_eq!(
            cursor,
            "AQIAAAAAAAAAB6C4sx5sD6Mm9w7yfQWdvRkIdr0EzbpvIaHmz7M"
        );
        let raw = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        assert!(
            !raw.windows(8).any(|w| w == 42_i64.to_be_bytes()),
            "the member's id shows in the cursor"
        );

        let code = |r: Result<Position, ApiError>| r.unwrap_err().code();
        assert_eq!(
            code(keys.decode(ListKey::Following(user(7)), &cursor)),
            "BAD_CURSOR"
        );
        assert_eq!(
            code(keys.decode(ListKey::Followers(user(8)), &cursor)),
            "BAD_CURSOR"
        );
        assert_eq!(code(keys.decode(list, "garbage")), "BAD_CURSOR");
        let mut bytes = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        bytes[12] ^= 1;
        assert_eq!(
            code(keys.decode(list, &URL_SAFE_NO_PAD.encode(&bytes))),
            "BAD_CURSOR"
        );
        let other = CursorKeys::new("another-secret-entirely-here");
        assert_eq!(code(other.decode(list, &cursor)), "BAD_CURSOR");

        let common = CursorScope::Common(user(7), user(8));
        let cursor = keys.encode(common, position);
        assert_eq!(keys.decode(common, &cursor).unwrap(), position);
        for wrong in [
            CursorScope::Common(user(8), user(7)),
            CursorScope::KnownFollowers(user(7), user(8)),
            CursorScope::List(list),
            CursorScope::Private(PrivateList::Blocking(user(7))),
        ] {
            assert_eq!(code(keys.decode(wrong, &cursor)), "BAD_CURSOR");
        }
    }
}
