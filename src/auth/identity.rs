//! Tokens from an identity provider: `RS256` / `ES256` JWTs, verified with
//! keys from a JWKS URL or a PEM file, their `iss` / `aud` checked when
//! configured, and one claim mapped to a Kith user.
//!
//! A JWKS is read when first needed and again every
//! `KITH_JWT_JWKS_TTL_SECS` — in the background: requests keep verifying
//! with the keys known meanwhile, so a provider that hangs or fails stalls
//! no request whose key is known. A token whose `kid` is unknown makes it
//! read again at once (and waits for that read) — that is how a key
//! rotation is picked up — but at most once per
//! `KITH_JWT_JWKS_MIN_REFRESH_MS`, checked before anything waits, so tokens
//! with made-up `kid`s cannot make Kith hammer the provider.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use futures_util::future::{BoxFuture, Shared};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

use super::tokens::{Principal, TokenError, Verified, check_times, service_of};
use crate::config::{Config, UserLookup};
use crate::model::{UserId, UserStatus};
use crate::read::users::UserCache;
use crate::store::PgPool;

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
    Jwks(Arc<Jwks>),
    /// One public key from a PEM file.
    Pem(Key),
}

/// A JWKS URL and what was read from it.
struct Jwks {
    url: String,
    /// How long a read is used before it is read again.
    ttl: Duration,
    /// The shortest time between two reads.
    min_refresh: Duration,
    state: Mutex<JwksState>,
}

#[derive(Default)]
struct JwksState {
    keys: Arc<Vec<Key>>,
    read_at: Option<Instant>,
    tried_at: Option<Instant>,
    /// The read in flight, which anyone may join; true when it succeeded.
    reading: Option<Shared<BoxFuture<'static, bool>>>,
}

impl Jwks {
    /// The keys known now, and whether they are due for a new read.
    fn known(&self) -> (Arc<Vec<Key>>, bool) {
        let state = self.state.lock().expect("jwks lock");
        let stale = state.read_at.is_none_or(|at| at.elapsed() >= self.ttl);
        (state.keys.clone(), stale)
    }

    /// The read in flight, or a new one unless one was tried within the
    /// minimum refresh interval (`None`: nothing to wait for). A new read
    /// runs to its end in the background whether or not anyone waits.
    fn read(self: &Arc<Self>) -> Option<Shared<BoxFuture<'static, bool>>> {
        let mut state = self.state.lock().expect("jwks lock");
        if let Some(reading) = &state.reading {
            return Some(reading.clone());
        }
        if state
            .tried_at
            .is_some_and(|at| at.elapsed() < self.min_refresh)
        {
            return None;
        }
        state.tried_at = Some(Instant::now());
        let jwks = self.clone();
        let reading = async move {
            let keys = fetch(&jwks.url).await;
            let mut state = jwks.state.lock().expect("jwks lock");
            state.reading = None;
            match keys {
                Some(keys) => {
                    state.keys = Arc::new(keys);
                    state.read_at = Some(Instant::now());
                    true
                }
                None => false,
            }
        }
        .boxed()
        .shared();
        state.reading = Some(reading.clone());
        tokio::spawn(reading.clone().map(drop));
        Some(reading)
    }
}

/// The identity provider's token rules.
pub struct Identity {
    keys: Keys,
    issuer: Option<String>,
    audience: Option<String>,
    leeway: u64,
    user_claim: String,
    lookup: UserLookup,
    services: Vec<String>,
}

impl Identity {
    /// The provider configured (`KITH_JWT_JWKS_URL` or
    /// `KITH_JWT_PUBLIC_KEY_FILE`), if any; `Err` when the key file holds
    /// no key Kith verifies with.
    pub fn from_config(config: &Config) -> Result<Option<Self>, String> {
        let keys = if let Some(url) = &config.auth.jwt_jwks_url {
            Keys::Jwks(Arc::new(Jwks {
                url: url.clone(),
                ttl: Duration::from_secs(config.auth.jwt_jwks_ttl_secs),
                min_refresh: Duration::from_millis(config.auth.jwt_jwks_min_refresh_ms),
                state: Mutex::default(),
            }))
        } else {
            let Some(pem) = config.auth.jwt_public_key_pem.as_deref() else {
                return Ok(None);
            };
            Keys::Pem(pem_key(pem).map_err(|e| format!("KITH_JWT_PUBLIC_KEY_FILE: {e}"))?)
        };
        Ok(Some(Self {
            keys,
            issuer: config.auth.jwt_issuer.clone(),
            audience: config.auth.jwt_audience.clone(),
            leeway: config.auth.jwt_leeway_secs,
            user_claim: config.auth.jwt_user_claim.clone(),
            services: config.auth.service_clients.clone(),
            lookup: config.auth.jwt_user_lookup,
        }))
    }

    /// Verifies `token` at `now` (unix seconds) and finds its user.
    pub async fn verify(
        &self,
        users: &Arc<UserCache>,
        pg: &PgPool,
        token: &str,
        now: i64,
    ) -> Result<Verified, TokenError> {
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
        let valid_until = check_times(&data.claims, now, self.leeway)?;
        if let Some(scopes) = service_of(&data.claims, &self.services)? {
            return Ok(Verified {
                principal: Principal::Service(scopes),
                valid_until,
            });
        }
        let claim = data.claims.get(&self.user_claim);
        let value = match claim {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Number(n)) => n.to_string(),
            _ => return Err(TokenError::Subject),
        };
        let user = match self.lookup {
            UserLookup::Id => value.parse().map_err(|()| TokenError::Subject)?,
            UserLookup::Handle => user_by_handle(users, pg, &value).await?,
        };
        Ok(Verified {
            principal: Principal::User(user),
            valid_until,
        })
    }

    /// The key that signed a token with `kid` and `alg`.
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<Key, TokenError> {
        let jwks = match &self.keys {
            Keys::Pem(key) if key.alg == alg => return Ok(key.clone()),
            Keys::Pem(_) => return Err(TokenError::Algorithm),
            Keys::Jwks(jwks) => jwks,
        };
        let (mut keys, stale) = jwks.known();
        if keys.is_empty() {
            // Nothing known yet: wait for a read.
            if let Some(read) = jwks.read() {
                read.await;
            }
            keys = jwks.known().0;
        } else if stale {
            // Read again in the background; the known keys serve meanwhile.
            jwks.read();
        }
        if let Some(key) = find(&keys, kid, alg) {
            return Ok(key);
        }
        // An unknown key: perhaps a rotation — wait for a read (rate-bounded),
        // or look again at what a read that just ended brought.
        if kid.is_some() {
            if let Some(read) = jwks.read() {
                read.await;
            }
            if let Some(key) = find(&jwks.known().0, kid, alg) {
                return Ok(key);
            }
        }
        Err(if jwks.known().0.is_empty() {
            TokenError::Keys
        } else {
            TokenError::Signature
        })
    }
}

/// Reads the JWKS at `url`: its keys, or `None` (logged) when it could not
/// be read or does not parse (the keys known stay in use).
async fn fetch(url: &str) -> Option<Vec<Key>> {
    let url = url.to_owned();
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
            return None;
        }
        Err(error) => {
            tracing::warn!(%error, "JWKS read failed");
            return None;
        }
    };
    match parse_jwks(&text) {
        Ok(keys) => Some(keys),
        Err(error) => {
            tracing::warn!(%error, "JWKS does not parse; keeping the keys known");
            None
        }
    }
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
async fn user_by_handle(
    users: &Arc<UserCache>,
    pg: &PgPool,
    handle: &str,
) -> Result<UserId, TokenError> {
    let user = users
        .by_handles(pg, &[handle.to_owned()])
        .await
        .map_err(|_| TokenError::Keys)?
        .into_iter()
        .next();
    match user {
        Some(user) if user.status != UserStatus::Deleted => Ok(user.id),
        _ => Err(TokenError::Subject),
    }
}
