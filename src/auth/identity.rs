//! Tokens from an identity provider: `RS256` / `ES256` JWTs, verified with
//! keys from a JWKS URL or a PEM file, their `iss` / `aud` checked when
//! configured, and one claim mapped to a Kith user.
//!
//! A JWKS is read when first needed and again after [`JWKS_TTL`]; a token
//! whose `kid` is unknown makes it read again at once — that is how a key
//! rotation is picked up — but at most once per
//! `KITH_JWT_JWKS_MIN_REFRESH_MS`, so tokens with made-up `kid`s cannot make
//! Kith hammer the provider.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

use super::{TokenError, check_times};
use crate::app::App;
use crate::config::{Config, UserLookup};
use crate::model::{UserId, UserStatus};

/// How long a JWKS read is used before it is read again.
pub const JWKS_TTL: Duration = Duration::from_secs(600);
/// How long one JWKS read may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// One verification key.
#[derive(Clone)]
struct Key {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

/// Where the provider's keys come from.
enum Keys {
    /// A JWKS document, read over HTTP(S) and cached.
    Jwks {
        url: String,
        min_refresh: Duration,
        cache: Mutex<JwksCache>,
        /// One read at a time.
        reading: tokio::sync::Mutex<()>,
    },
    /// One public key from a PEM file.
    Pem(Key),
}

#[derive(Default)]
struct JwksCache {
    keys: Arc<Vec<Key>>,
    read_at: Option<Instant>,
    tried_at: Option<Instant>,
}

/// The identity provider's token rules.
pub struct Identity {
    keys: Keys,
    issuer: Option<String>,
    audience: Option<String>,
    leeway: u64,
    user_claim: String,
    lookup: UserLookup,
}

impl Identity {
    /// The provider configured (`KITH_JWT_JWKS_URL` or
    /// `KITH_JWT_PUBLIC_KEY_FILE`), if any.
    pub fn from_config(config: &Config) -> Option<Self> {
        let keys = if let Some(url) = &config.jwt_jwks_url {
            Keys::Jwks {
                url: url.clone(),
                min_refresh: Duration::from_millis(config.jwt_jwks_min_refresh_ms),
                cache: Mutex::default(),
                reading: tokio::sync::Mutex::new(()),
            }
        } else {
            let pem = config.jwt_public_key_pem.as_deref()?;
            Keys::Pem(pem_key(pem).expect("checked when the configuration was read"))
        };
        Some(Self {
            keys,
            issuer: config.jwt_issuer.clone(),
            audience: config.jwt_audience.clone(),
            leeway: config.jwt_leeway_secs,
            user_claim: config.jwt_user_claim.clone(),
            lookup: config.jwt_user_lookup,
        })
    }

    /// Verifies `token` at `now` (unix seconds) and finds its user.
    pub async fn verify(&self, app: &App, token: &str, now: i64) -> Result<UserId, TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| TokenError::from_jwt(&e))?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(TokenError::Algorithm);
        }
        let key = self.key_for(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(key.alg);
        validation.set_required_spec_claims(&["exp"]);
        // Times are checked against `now`, with the configured leeway.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        match &self.issuer {
            Some(issuer) => validation.set_issuer(&[issuer]),
            None => validation.iss = None,
        }
        match &self.audience {
            Some(audience) => validation.set_audience(&[audience]),
            None => validation.validate_aud = false,
        }
        let data = jsonwebtoken::decode::<serde_json::Value>(token, &key.key, &validation)
            .map_err(|e| TokenError::from_jwt(&e))?;
        check_times(&data.claims, now, self.leeway)?;
        let claim = data.claims.get(&self.user_claim);
        let value = match claim {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Number(n)) => n.to_string(),
            _ => return Err(TokenError::Subject),
        };
        match self.lookup {
            UserLookup::Id => value.parse().map_err(|()| TokenError::Subject),
            UserLookup::Handle => user_by_handle(app, &value).await,
        }
    }

    /// The key that signed a token with `kid` and `alg`.
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<Key, TokenError> {
        let (jwks, cache) = match &self.keys {
            Keys::Pem(key) if key.alg == alg => return Ok(key.clone()),
            Keys::Pem(_) => return Err(TokenError::Algorithm),
            jwks @ Keys::Jwks { cache, .. } => (jwks, cache),
        };
        let fresh = {
            let cache = cache.lock().expect("jwks lock");
            cache.read_at.is_some_and(|at| at.elapsed() < JWKS_TTL)
        };
        if !fresh {
            refresh(jwks).await;
        }
        if let Some(key) = find(&cache.lock().expect("jwks lock").keys, kid, alg) {
            return Ok(key);
        }
        // An unknown key: perhaps a rotation — read again (rate-bounded).
        if kid.is_some()
            && refresh(jwks).await
            && let Some(key) = find(&cache.lock().expect("jwks lock").keys, kid, alg)
        {
            return Ok(key);
        }
        let empty = cache.lock().expect("jwks lock").keys.is_empty();
        Err(if empty {
            TokenError::Keys
        } else {
            TokenError::Signature
        })
    }
}

/// Reads the JWKS again unless it was tried within its minimum refresh
/// interval; true when it was read now.
async fn refresh(jwks: &Keys) -> bool {
    let Keys::Jwks {
        url,
        min_refresh,
        cache,
        reading,
    } = jwks
    else {
        return false;
    };
    let _one_at_a_time = reading.lock().await;
    {
        let mut cache = cache.lock().expect("jwks lock");
        if cache.tried_at.is_some_and(|at| at.elapsed() < *min_refresh) {
            return false;
        }
        cache.tried_at = Some(Instant::now());
    }
    let url = url.clone();
    let read = tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(FETCH_TIMEOUT))
            .build()
            .into();
        let mut response = agent.get(&url).call().map_err(|e| e.to_string())?;
        response
            .body_mut()
            .with_config()
            .limit(1 << 20)
            .read_to_string()
            .map_err(|e| e.to_string())
    })
    .await;
    let text = match read {
        Ok(Ok(text)) => text,
        Ok(Err(error)) => {
            tracing::warn!(%error, "JWKS not read; keeping the keys known");
            return false;
        }
        Err(error) => {
            tracing::warn!(%error, "JWKS read failed");
            return false;
        }
    };
    let keys = match parse_jwks(&text) {
        Ok(keys) => keys,
        Err(error) => {
            tracing::warn!(%error, "JWKS does not parse; keeping the keys known");
            return false;
        }
    };
    let mut cache = cache.lock().expect("jwks lock");
    cache.keys = Arc::new(keys);
    cache.read_at = Some(Instant::now());
    true
}

fn find(keys: &[Key], kid: Option<&str>, alg: Algorithm) -> Option<Key> {
    match kid {
        Some(kid) => keys
            .iter()
            .find(|k| k.kid.as_deref() == Some(kid) && k.alg == alg)
            .cloned(),
        // Without a `kid`, only an unambiguous key will do.
        None => {
            let mut candidates = keys.iter().filter(|k| k.alg == alg);
            match (candidates.next(), candidates.next()) {
                (Some(key), None) => Some(key.clone()),
                _ => None,
            }
        }
    }
}

/// The RS256 / ES256 (P-256) signing keys of a JWKS document.
fn parse_jwks(text: &str) -> Result<Vec<Key>, String> {
    let set: JwkSet = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Ok(set
        .keys
        .iter()
        .filter_map(|jwk| {
            let alg = match &jwk.algorithm {
                AlgorithmParameters::RSA(_) => Algorithm::RS256,
                AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
                    Algorithm::ES256
                }
                _ => return None,
            };
            // A key declared for another algorithm is not used for this one.
            let declared = jwk.common.key_algorithm.map(|a| a.to_string());
            if declared.is_some_and(|d| d != format!("{alg:?}")) {
                return None;
            }
            Some(Key {
                kid: jwk.common.key_id.clone(),
                alg,
                key: DecodingKey::from_jwk(jwk).ok()?,
            })
        })
        .collect())
}

/// Checks that `pem` is a public key Kith verifies with.
pub fn check_pem(pem: &str) -> Result<(), String> {
    pem_key(pem).map(|_| ())
}

/// The key of a PEM public key file: RSA (RS256) or P-256 (ES256).
fn pem_key(pem: &str) -> Result<Key, String> {
    if let Ok(key) = DecodingKey::from_rsa_pem(pem.as_bytes()) {
        return Ok(Key {
            kid: None,
            alg: Algorithm::RS256,
            key,
        });
    }
    DecodingKey::from_ec_pem(pem.as_bytes())
        .map(|key| Key {
            kid: None,
            alg: Algorithm::ES256,
            key,
        })
        .map_err(|e| format!("neither an RSA nor a P-256 public key: {e}"))
}

/// The active user with this handle.
async fn user_by_handle(app: &App, handle: &str) -> Result<UserId, TokenError> {
    let user = crate::read::users::by_handles(app, &[handle.to_owned()])
        .await
        .map_err(|_| TokenError::Keys)?
        .into_iter()
        .next();
    match user {
        Some(user) if user.status != UserStatus::Deleted => Ok(user.id),
        _ => Err(TokenError::Subject),
    }
}
