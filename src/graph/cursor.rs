//! Opaque, signed paging cursors: a list, a follow time and a user id.
//!
//! A cursor names the list it was issued for, so one list's cursor cannot be
//! replayed against another, and carries an HMAC, so a tampered cursor is
//! refused (`BAD_CURSOR`) instead of silently paging somewhere else.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::cache::ListKey;
use crate::error::ApiError;
use crate::model::UserId;
use crate::store::lists::Position;

const VERSION: u8 = 1;
const BODY: usize = 1 + 1 + 8 + 8 + 8;
const MAC: usize = 12;

/// Signs and checks cursors.
#[derive(Clone)]
pub struct CursorKeys {
    secret: Vec<u8>,
}

fn list_parts(list: ListKey) -> (u8, UserId) {
    match list {
        ListKey::Following(owner) => (1, owner),
        ListKey::Followers(owner) => (2, owner),
    }
}

impl CursorKeys {
    /// Keys derived from the service secret (domain-separated from tokens).
    pub fn new(secret: &str) -> Self {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
        mac.update(b"kith cursor key v1");
        Self {
            secret: mac.finalize().into_bytes().to_vec(),
        }
    }

    fn tag(&self, body: &[u8]) -> [u8; MAC] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("any key length");
        mac.update(body);
        let full = mac.finalize().into_bytes();
        let mut tag = [0u8; MAC];
        tag.copy_from_slice(&full[..MAC]);
        tag
    }

    /// The cursor of `position` in `list`.
    pub fn encode(&self, list: ListKey, position: Position) -> String {
        let (kind, owner) = list_parts(list);
        let mut bytes = Vec::with_capacity(BODY + MAC);
        bytes.push(VERSION);
        bytes.push(kind);
        bytes.extend_from_slice(&owner.get().to_be_bytes());
        bytes.extend_from_slice(&position.followed_at_ms.to_be_bytes());
        bytes.extend_from_slice(&position.user.get().to_be_bytes());
        let tag = self.tag(&bytes);
        bytes.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The position a cursor names, if it was issued for `list` and is intact.
    pub fn decode(&self, list: ListKey, cursor: &str) -> Result<Position, ApiError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(cursor)
            .map_err(|_| ApiError::BadCursor)?;
        if bytes.len() != BODY + MAC {
            return Err(ApiError::BadCursor);
        }
        let (body, tag) = bytes.split_at(BODY);
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("any key length");
        mac.update(body);
        mac.verify_truncated_left(tag)
            .map_err(|_| ApiError::BadCursor)?;
        let (kind, owner) = list_parts(list);
        let i64_at = |i: usize| i64::from_be_bytes(body[i..i + 8].try_into().expect("8 bytes"));
        if body[0] != VERSION || body[1] != kind || i64_at(2) != owner.get() {
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
    }
}
