//! Development tokens (HS256 with `KITH_JWT_SECRET`, `sub` = the user's
//! id, or a service's name with its `scope`: what `kith token` issues), and
//! what every verified token yields.

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};

use super::scopes::Scopes;
use crate::model::UserId;

/// Signs and verifies development tokens (HS256) with one shared secret.
#[derive(Clone)]
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    leeway: u64,
    /// The subjects whose tokens may carry Kith scopes.
    services: std::sync::Arc<[String]>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Claims {
    sub: String,
    exp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    iat: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scope: Option<String>,
}

/// Why a presented token was refused. Deliberately coarse for clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a JWT, or without a required claim.
    #[error("malformed token")]
    Malformed,
    /// An algorithm that is not configured, including `none`.
    #[error("unsupported token algorithm")]
    Algorithm,
    /// The signature does not match, or no known key signed it.
    #[error("bad token signature")]
    Signature,
    /// `exp` is in the past, or `nbf` in the future.
    #[error("token expired or not yet valid")]
    Expired,
    /// `iss` or `aud` is not the configured one.
    #[error("token issuer or audience not accepted")]
    Claims,
    /// The user claim names no Kith user.
    #[error("token subject is not a user")]
    Subject,
    /// The identity provider's keys could not be read.
    #[error("token keys unavailable")]
    Keys,
}

impl TokenError {
    /// How `jsonwebtoken` refusals read to a client.
    pub fn from_jwt(e: &jsonwebtoken::errors::Error) -> Self {
        match e.kind() {
            ErrorKind::InvalidSignature => Self::Signature,
            ErrorKind::ExpiredSignature | ErrorKind::ImmatureSignature => Self::Expired,
            ErrorKind::InvalidIssuer | ErrorKind::InvalidAudience => Self::Claims,
            ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => Self::Algorithm,
            ErrorKind::InvalidSubject => Self::Subject,
            _ => Self::Malformed,
        }
    }
}

impl TokenKeys {
    /// Keys from the configured secret, with `leeway` seconds of clock skew.
    pub fn new(secret: &str) -> Self {
        Self::with_leeway(secret, 0)
    }

    /// Keys from the configured secret, with `leeway` seconds of clock skew.
    pub fn with_leeway(secret: &str, leeway: u64) -> Self {
        Self {
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            decoding: DecodingKey::from_secret(secret.as_bytes()),
            leeway,
            services: std::sync::Arc::from(Vec::new()),
        }
    }

    /// These keys, taking tokens with Kith scopes from `services` only.
    pub fn with_services(mut self, services: &[String]) -> Self {
        self.services = std::sync::Arc::from(services.to_vec());
        self
    }

    /// Issues a token for `user` valid for `ttl_secs` from `now` (unix seconds).
    pub fn issue(&self, user: UserId, now: i64, ttl_secs: i64) -> String {
        self.sign(&Claims {
            sub: user.to_string(),
            exp: now + ttl_secs,
            iat: Some(now),
            scope: None,
        })
    }

    /// Issues a token for the service `name` with `scopes`, valid for
    /// `ttl_secs` from `now` (unix seconds); it acts for no account.
    pub fn issue_service(&self, name: &str, scopes: Scopes, now: i64, ttl_secs: i64) -> String {
        self.sign(&Claims {
            sub: name.to_owned(),
            exp: now + ttl_secs,
            iat: Some(now),
            scope: Some(scopes.names()),
        })
    }

    fn sign(&self, claims: &Claims) -> String {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &self.encoding)
            .expect("HS256 signing cannot fail")
    }

    /// Verifies an HS256 `token` at time `now` (unix seconds) and returns
    /// the user it names (a service's token names none: `Subject`).
    pub fn verify(&self, token: &str, now: i64) -> Result<UserId, TokenError> {
        match self.verify_until(token, now)?.principal {
            Principal::User(user) => Ok(user),
            Principal::Service(_) => Err(TokenError::Subject),
        }
    }

    /// Verifies an HS256 `token` at time `now` (unix seconds): its subject,
    /// and until when it is valid.
    pub fn verify_until(&self, token: &str, now: i64) -> Result<Verified, TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| TokenError::from_jwt(&e))?;
        if header.alg != Algorithm::HS256 {
            return Err(TokenError::Algorithm);
        }
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_required_spec_claims(&["exp"]);
        validation.validate_nbf = true;
        // `now` is given (tests): the library reads the clock itself, so the
        // time checks are made here, against `now`.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        let data = jsonwebtoken::decode::<serde_json::Value>(token, &self.decoding, &validation)
            .map_err(|e| TokenError::from_jwt(&e))?;
        let valid_until = check_times(&data.claims, now, self.leeway)?;
        if let Some(scopes) = service_of(&data.claims, &self.services)? {
            return Ok(Verified {
                principal: Principal::Service(scopes),
                valid_until,
            });
        }
        let sub = data.claims.get("sub").and_then(serde_json::Value::as_str);
        let user = sub
            .and_then(|s| s.parse().ok())
            .ok_or(TokenError::Subject)?;
        Ok(Verified {
            principal: Principal::User(user),
            valid_until,
        })
    }
}

/// Whom a verified token names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Principal {
    /// A user, who acts as its account.
    User(UserId),
    /// Another service, with the Kith scopes it was granted.
    Service(Scopes),
}

/// A verified token: whom it names, and until when it may be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The user or service it names.
    pub principal: Principal,
    /// Unix seconds from which it is refused: its `exp` plus the leeway.
    pub valid_until: i64,
}

/// What a token's claims make it: `None` without a Kith scope (a
/// user's token); a service with its scopes when its `sub` is one of
/// `services`; refused (`Claims`) otherwise — a token that asks for a
/// Kith scope is never taken for a user's, nor for a service it is not.
pub(crate) fn service_of(
    claims: &serde_json::Value,
    services: &[String],
) -> Result<Option<Scopes>, TokenError> {
    let scopes = Scopes::of(claims);
    if scopes.is_empty() {
        return Ok(None);
    }
    let sub = claims.get("sub").and_then(serde_json::Value::as_str);
    match sub {
        Some(sub) if services.iter().any(|s| s == sub) => Ok(Some(scopes)),
        _ => Err(TokenError::Claims),
    }
}

/// `exp` (required) and `nbf` (if present) against `now`, with `leeway`;
/// returns the time (unix seconds) from which the token is refused.
pub(super) fn check_times(
    claims: &serde_json::Value,
    now: i64,
    leeway: u64,
) -> Result<i64, TokenError> {
    let leeway = i64::try_from(leeway).unwrap_or(i64::MAX);
    let exp = claims
        .get("exp")
        .and_then(serde_json::Value::as_i64)
        .ok_or(TokenError::Malformed)?;
    if exp.saturating_add(leeway) <= now {
        return Err(TokenError::Expired);
    }
    if let Some(nbf) = claims.get("nbf") {
        let nbf = nbf.as_i64().ok_or(TokenError::Malformed)?;
        if nbf.saturating_sub(leeway) > now {
            return Err(TokenError::Expired);
        }
    }
    Ok(exp.saturating_add(leeway))
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

    fn b64(text: &str) -> String {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
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
        let lenient = TokenKeys::with_leeway("test-secret-of-sufficient-length", 30);
        assert_eq!(lenient.verify(&token, NOW + 80), Ok(user(7)));
    }

    #[test]
    fn alg_none_and_tampered_claims_are_refused() {
        let claims = b64(&format!(r#"{{"sub":"1","exp":{}}}"#, NOW + 60));
        let none = format!("{}.{claims}.", b64(r#"{"alg":"none"}"#));
        assert_ne!(keys().verify(&none, NOW), Ok(user(1)));
        let rs = format!("{}.{claims}.", b64(r#"{"alg":"RS256"}"#));
        assert_eq!(keys().verify(&rs, NOW), Err(TokenError::Algorithm));

        let token = keys().issue(user(7), NOW, 60);
        let parts: Vec<&str> = token.split('.').collect();
        let forged = format!("{}.{claims}.{}", parts[0], parts[2]);
        assert_eq!(keys().verify(&forged, NOW), Err(TokenError::Signature));
    }

    #[test]
    fn exp_is_required_and_nbf_checked() {
        let encoding = EncodingKey::from_secret(b"test-secret-of-sufficient-length");
        let sign = |claims: serde_json::Value| {
            jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &encoding).unwrap()
        };
        let no_exp = sign(serde_json::json!({ "sub": "1" }));
        assert_eq!(keys().verify(&no_exp, NOW), Err(TokenError::Malformed));
        let later = sign(serde_json::json!({ "sub": "1", "exp": NOW + 600, "nbf": NOW + 60 }));
        assert_eq!(keys().verify(&later, NOW), Err(TokenError::Expired));
        assert_eq!(keys().verify(&later, NOW + 60), Ok(user(1)));
    }
}
