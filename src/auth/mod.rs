//! Bearer tokens: JSON Web Tokens, verified with `jsonwebtoken`.
//!
//! - `HS256` with `KITH_JWT_SECRET`, `sub` = the user's id: what `kith token`
//!   issues, for development and tests ([`TokenKeys`]).
//! - `RS256` / `ES256` from an identity provider ([`identity`]): keys from a
//!   JWKS URL (cached, refreshed on an unknown `kid` at a bounded rate) or a
//!   PEM file; optional `iss` / `aud` checks; a configurable claim mapped to
//!   a Kith user by id or by handle.
//!
//! The algorithm comes from the configuration, never from the token: `none`
//! and every algorithm not configured are refused, and an identity
//! provider's public key is never used as an HMAC secret. `exp` is required;
//! `exp` and `nbf` are checked with `KITH_JWT_LEEWAY_SECS` of clock skew.

pub(crate) mod identity;
pub(crate) mod scopes;
pub(crate) mod tokens;

use std::sync::Arc;

use jsonwebtoken::Algorithm;

use self::identity::Identity;
pub use self::scopes::Scopes;
pub use self::tokens::{Principal, TokenError, TokenKeys};
use crate::config::Config;
use crate::error::ApiError;
use crate::model::UserId;
use crate::read::users::UserCache;
use crate::store::PgPool;

/// The keys tokens are checked with: the development secret, and the
/// identity provider's keys when one is configured.
pub struct Authenticator {
    /// Signs and verifies development (HS256) tokens.
    pub tokens: TokenKeys,
    /// The identity provider whose tokens are accepted, if one is configured.
    pub identity: Option<Identity>,
    hs256: bool,
}

impl Authenticator {
    /// The keys `config` names; an error says which setting is unusable.
    pub fn new(config: &Config) -> Result<Self, String> {
        Ok(Self {
            tokens: TokenKeys::with_leeway(&config.auth.jwt_secret, config.auth.jwt_leeway_secs)
                .with_services(&config.auth.service_clients),
            identity: Identity::from_config(config)?,
            hs256: config.auth.jwt_hs256,
        })
    }

    /// Establishes who makes a request from its raw `Authorization` header:
    /// anonymous without one, the user of a valid token, or refused.
    /// `users` and `pg` find the user a provider's token names by handle.
    pub async fn authenticate(
        &self,
        users: &Arc<UserCache>,
        pg: &PgPool,
        header: Option<&str>,
    ) -> Viewer {
        self.authenticate_until(users, pg, header).await.0
    }

    /// [`Self::authenticate`], and until when (unix seconds) the token may be
    /// used: what a long-lived connection must check again.
    pub async fn authenticate_until(
        &self,
        users: &Arc<UserCache>,
        pg: &PgPool,
        header: Option<&str>,
    ) -> (Viewer, Option<i64>) {
        let Some(header) = header else {
            return (Viewer::Anonymous, None);
        };
        let token = match header.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
            _ => return (Viewer::Rejected(TokenError::Malformed), None),
        };
        let now = chrono::Utc::now().timestamp();
        let verified = match jsonwebtoken::decode_header(token).map(|h| h.alg) {
            Ok(Algorithm::HS256) if self.hs256 => self.tokens.verify_until(token, now),
            Ok(_) if self.identity.is_some() => {
                let identity = self.identity.as_ref().expect("checked");
                identity.verify(users, pg, token, now).await
            }
            Ok(_) => Err(TokenError::Algorithm),
            Err(e) => Err(TokenError::from_jwt(&e)),
        };
        match verified {
            Ok(verified) => (
                match verified.principal {
                    Principal::User(user) => Viewer::User(user),
                    Principal::Service(scopes) => Viewer::Service(scopes),
                },
                Some(verified.valid_until),
            ),
            Err(e) => (Viewer::Rejected(e), None),
        }
    }
}

/// Who is making a request, as established from its `Authorization` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Viewer {
    /// No `Authorization` header: may read public data, may not act.
    Anonymous,
    /// A verified token for this user.
    User(UserId),
    /// A verified token of another service, with its Kith scopes: it acts
    /// for no account, reads public data as an anonymous viewer does, and
    /// what its scopes grant.
    Service(Scopes),
    /// A token was presented and refused; the request may not act as anyone.
    Rejected(TokenError),
}

impl Viewer {
    /// The acting user, or `UNAUTHENTICATED`.
    pub fn require(self) -> Result<UserId, ApiError> {
        match self {
            Self::User(user) => Ok(user),
            Self::Service(_) => Err(ApiError::Forbidden("a service token acts for no account")),
            Self::Anonymous => Err(ApiError::Unauthenticated("a bearer token is required")),
            Self::Rejected(e) => Err(ApiError::Unauthenticated(match e {
                TokenError::Malformed => "malformed bearer token",
                TokenError::Algorithm => "unsupported token algorithm",
                TokenError::Signature => "bad token signature",
                TokenError::Expired => "token expired or not yet valid",
                TokenError::Claims => "token issuer or audience not accepted",
                TokenError::Subject => "token subject is not a user",
                TokenError::Keys => "token keys unavailable; retry",
            })),
        }
    }

    /// The viewer if signed in, `None` if anonymous, `UNAUTHENTICATED` if the token was refused.
    pub fn optional(self) -> Result<Option<UserId>, ApiError> {
        match self {
            Self::Anonymous | Self::Service(_) => Ok(None),
            other => other.require().map(Some),
        }
    }

    /// Nothing, for a service token granted `scope`; else `FORBIDDEN` (a
    /// user's token, or a service's without it), or `UNAUTHENTICATED`.
    pub fn service(self, scope: Scopes) -> Result<(), ApiError> {
        match self {
            Self::Service(granted) if granted.contains(scope) => Ok(()),
            Self::Service(_) => Err(ApiError::Forbidden(
                "the service token was not granted this scope",
            )),
            Self::User(_) => Err(ApiError::Forbidden(
                "only a service token with the scope may ask this",
            )),
            Self::Anonymous => Err(ApiError::Unauthenticated("a service token is required")),
            rejected @ Self::Rejected(_) => rejected.require().map(|_| ()),
        }
    }
}
