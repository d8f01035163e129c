//! Bearer tokens: HS256 JSON Web Tokens whose `sub` is the acting user's id.
//!
//! Only `HS256` is accepted (never `none`, never another algorithm chosen by
//! the token), the signature is compared in constant time, and `exp` is
//! required. The check is small enough to keep in-house rather than pull a JWT
//! crate with its own crypto backend into the build.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::ApiError;
use crate::model::UserId;

type HmacSha256 = Hmac<Sha256>;

/// The fixed header of every token Kith issues.
const HEADER: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

/// Signs and verifies bearer tokens with one shared secret.
#[derive(Clone)]
pub struct TokenKeys {
    secret: Vec<u8>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Claims {
    sub: String,
    exp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    iat: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nbf: Option<i64>,
}

#[derive(serde::Deserialize)]
struct Header {
    alg: String,
}

/// Why a presented token was refused. Deliberately coarse for clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not three base64url parts of JSON.
    #[error("malformed token")]
    Malformed,
    /// Any algorithm other than HS256, including `none`.
    #[error("unsupported token algorithm")]
    Algorithm,
    /// The signature does not match.
    #[error("bad token signature")]
    Signature,
    /// `exp` is in the past, or `nbf` in the future.
    #[error("token expired or not yet valid")]
    Expired,
    /// `sub` is not a user id.
    #[error("token subject is not a user id")]
    Subject,
}

impl TokenKeys {
    /// Keys from the configured secret.
    pub fn new(secret: &str) -> Self {
        Self {
            secret: secret.as_bytes().to_vec(),
        }
    }

    fn mac(&self) -> HmacSha256 {
        HmacSha256::new_from_slice(&self.secret).expect("HMAC accepts keys of any length")
    }

    /// Issues a token for `user` valid for `ttl_secs` from `now` (unix seconds).
    pub fn issue(&self, user: UserId, now: i64, ttl_secs: i64) -> String {
        let claims = Claims {
            sub: user.to_string(),
            exp: now + ttl_secs,
            iat: Some(now),
            nbf: None,
        };
        let claims = serde_json::to_vec(&claims).expect("claims serialize");
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(HEADER),
            URL_SAFE_NO_PAD.encode(claims)
        );
        let mut mac = self.mac();
        mac.update(signing_input.as_bytes());
        let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{signing_input}.{signature}")
    }

    /// Verifies `token` at time `now` (unix seconds) and returns its subject.
    pub fn verify(&self, token: &str, now: i64) -> Result<UserId, TokenError> {
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let signing_input = &token[..header.len() + 1 + claims.len()];
        let header: Header = decode_json(header)?;
        if header.alg != "HS256" {
            return Err(TokenError::Algorithm);
        }
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| TokenError::Malformed)?;
        let mut mac = self.mac();
        mac.update(signing_input.as_bytes());
        mac.verify_slice(&signature)
            .map_err(|_| TokenError::Signature)?;
        let claims: Claims = decode_json(claims)?;
        if claims.exp <= now || claims.nbf.is_some_and(|nbf| nbf > now) {
            return Err(TokenError::Expired);
        }
        claims.sub.parse().map_err(|()| TokenError::Subject)
    }
}

fn decode_json<T: serde::de::DeserializeOwned>(part: &str) -> Result<T, TokenError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| TokenError::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| TokenError::Malformed)
}

/// Who is making a request, as established from its `Authorization` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Viewer {
    /// No `Authorization` header: may read public data, may not act.
    Anonymous,
    /// A verified token for this user.
    User(UserId),
    /// A token was presented and refused; the request may not act as anyone.
    Rejected(TokenError),
}

impl Viewer {
    /// Establishes the viewer from the raw `Authorization` header value.
    pub fn from_authorization(keys: &TokenKeys, header: Option<&str>, now: i64) -> Self {
        let Some(header) = header else {
            return Self::Anonymous;
        };
        let token = match header.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
            _ => return Self::Rejected(TokenError::Malformed),
        };
        match keys.verify(token, now) {
            Ok(user) => Self::User(user),
            Err(e) => Self::Rejected(e),
        }
    }

    /// The acting user, or `UNAUTHENTICATED`.
    pub fn require(self) -> Result<UserId, ApiError> {
        match self {
            Self::User(user) => Ok(user),
            Self::Anonymous => Err(ApiError::Unauthenticated("a bearer token is required")),
            Self::Rejected(e) => Err(ApiError::Unauthenticated(match e {
                TokenError::Malformed => "malformed bearer token",
                TokenError::Algorithm => "unsupported token algorithm",
                TokenError::Signature => "bad token signature",
                TokenError::Expired => "token expired",
                TokenError::Subject => "token subject is not a user id",
            })),
        }
    }

    /// The viewer if signed in, `None` if anonymous, `UNAUTHENTICATED` if the token was refused.
    pub fn optional(self) -> Result<Option<UserId>, ApiError> {
        match self {
            Self::Anonymous => Ok(None),
            other => other.require().map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn keys() -> TokenKeys {
        TokenKeys::new("test-secret-of-sufficient-length")
    }

    fn user(n: i64) -> UserId {
        UserId::new(n).unwrap()
    }

    #[test]
    fn round_trip() {
        let token = keys().issue(user(7), NOW, 60);
        assert_eq!(keys().verify(&token, NOW), Ok(user(7)));
    }

    #[test]
    fn expired_and_wrong_key_are_refused() {
        let token = keys().issue(user(7), NOW, 60);
        assert_eq!(keys().verify(&token, NOW + 60), Err(TokenError::Expired));
        let other = TokenKeys::new("another-secret-of-some-length");
        assert_eq!(other.verify(&token, NOW), Err(TokenError::Signature));
    }

    #[test]
    fn alg_none_and_tampered_claims_are_refused() {
        let claims = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"1","exp":{}}}"#, NOW + 60));
        let none = format!("{}.{claims}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#));
        assert_eq!(keys().verify(&none, NOW), Err(TokenError::Algorithm));

        let token = keys().issue(user(7), NOW, 60);
        let parts: Vec<&str> = token.split('.').collect();
        let forged = format!("{}.{claims}.{}", parts[0], parts[2]);
        assert_eq!(keys().verify(&forged, NOW), Err(TokenError::Signature));
    }

    #[test]
    fn exp_is_required() {
        let header = URL_SAFE_NO_PAD.encode(HEADER);
        let claims = URL_SAFE_NO_PAD.encode(r#"{"sub":"1"}"#);
        let input = format!("{header}.{claims}");
        let mut mac = keys().mac();
        mac.update(input.as_bytes());
        let token = format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
        );
        assert_eq!(keys().verify(&token, NOW), Err(TokenError::Malformed));
    }

    #[test]
    fn header_parsing() {
        let token = keys().issue(user(3), NOW, 60);
        let k = keys();
        assert_eq!(Viewer::from_authorization(&k, None, NOW), Viewer::Anonymous);
        assert_eq!(
            Viewer::from_authorization(&k, Some(&format!("Bearer {token}")), NOW),
            Viewer::User(user(3))
        );
        assert_eq!(
            Viewer::from_authorization(&k, Some(&token), NOW),
            Viewer::Rejected(TokenError::Malformed)
        );
    }
}
