//! Persisted queries: Apollo's Automatic Persisted Queries (APQ) and an
//! allow-list mode.
//!
//! A client sends `extensions.persistedQuery = {version: 1, sha256Hash}`
//! with or without the query text (over POST, GET or the WebSocket):
//! - with the text, its SHA-256 must be the hash (`INVALID_INPUT`
//!   otherwise); the text is remembered under it (a cache bounded to
//!   `KITH_APQ_CACHE_BYTES` of text) and runs;
//! - without it, the remembered text runs — or `PERSISTED_QUERY_NOT_FOUND`
//!   (message `PersistedQueryNotFound`, as Apollo's links expect), and the
//!   client sends the text once. With `KITH_APQ_CACHE_BYTES=0` nothing is
//!   remembered and a hash alone is `PERSISTED_QUERY_NOT_SUPPORTED`, which
//!   tells Apollo's links to stop sending hashes.
//!
//! With `KITH_PERSISTED_ONLY=true`, only the operations of the manifest
//! `KITH_PERSISTED_QUERIES_FILE` run: by hash, or by text whose hash is in
//! it. Anything else is refused before parsing — `PERSISTED_QUERY_NOT_IN_LIST`
//! for an unknown hash, `QUERY_NOT_IN_SAFELIST` for other text — and
//! nothing is learnt from clients.

use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::Request;
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::error::ErrorCode;

/// Why a persisted-query request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PersistedError {
    /// A hash the server does not know (yet): send the text with it.
    #[error("PersistedQueryNotFound")]
    NotFound,
    /// Automatic persisted queries are off: send the text.
    #[error("PersistedQueryNotSupported")]
    NotSupported,
    /// Allow-list mode: a hash that is not in the manifest.
    #[error("this operation is not in the persisted-query list")]
    NotInList,
    /// Allow-list mode: text whose hash is not in the manifest.
    #[error("only persisted queries run on this server")]
    NotInSafelist,
    /// The extension is malformed, or the text does not have the hash.
    #[error("{0}")]
    Invalid(String),
}

impl PersistedError {
    /// The stable `extensions.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound => ErrorCode::PersistedQueryNotFound,
            Self::NotSupported => ErrorCode::PersistedQueryNotSupported,
            Self::NotInList => ErrorCode::PersistedQueryNotInList,
            Self::NotInSafelist => ErrorCode::QueryNotInSafelist,
            Self::Invalid(_) => ErrorCode::InvalidInput,
        }
        .as_str()
    }
}

/// The persisted queries of one process.
pub struct PersistedQueries {
    /// Texts learnt from clients (APQ), by hash; `None` when APQ is off.
    learnt: Option<moka::sync::Cache<String, Arc<str>>>,
    /// The manifest's operations, by hash.
    manifest: Arc<HashMap<String, Arc<str>>>,
    /// Only the manifest's operations run.
    only: bool,
    /// Longest text learnt (`KITH_MAX_QUERY_BYTES`: a longer one is refused anyway).
    max_text: usize,
}

impl PersistedQueries {
    /// As configured; `Err` says what is wrong with the manifest
    /// (`KITH_PERSISTED_QUERIES_FILE`).
    pub fn new(config: &Config) -> Result<Self, String> {
        let manifest = match &config.limits.persisted_manifest {
            None => HashMap::new(),
            Some(text) => parse_manifest(text)?,
        };
        if config.limits.persisted_only && manifest.is_empty() {
            let rule = crate::config::settings::find("KITH_PERSISTED_ONLY").and_then(|s| s.rule);
            return Err(format!(
                "KITH_PERSISTED_ONLY must be {}",
                rule.unwrap_or("`false` without operations")
            ));
        }
        Ok(Self {
            learnt: (config.limits.apq_cache_bytes > 0).then(|| {
                moka::sync::Cache::builder()
                    .max_capacity(config.limits.apq_cache_bytes)
                    .weigher(|hash: &String, text: &Arc<str>| {
                        u32::try_from(hash.len() + text.len()).unwrap_or(u32::MAX)
                    })
                    .build()
            }),
            manifest: Arc::new(manifest),
            only: config.limits.persisted_only,
            max_text: config.limits.max_query_bytes,
        })
    }

    /// The names of the manifest's operations.
    pub fn operation_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .manifest
            .values()
            .filter_map(|text| async_graphql::parser::parse_query(text).ok())
            .flat_map(|doc| {
                doc.operations
                    .iter()
                    .filter_map(|(name, _)| name.map(|n| n.to_string()))
                    .collect::<Vec<_>>()
            })
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Gives `request` its query text from the persisted queries it names,
    /// or refuses it (allow-list mode refuses any other).
    pub fn resolve(&self, request: &mut Request) -> Result<(), PersistedError> {
        let Some(hash) = requested_hash(request)? else {
            if self.only && !self.manifest.contains_key(&sha256_hex(&request.query)) {
                return Err(PersistedError::NotInSafelist);
            }
            return Ok(());
        };
        if request.query.is_empty() {
            let learnt = || {
                self.learnt
                    .as_ref()
                    .filter(|_| !self.only)
                    .and_then(|cache| cache.get(&hash))
            };
            let text = self.manifest.get(&hash).cloned().or_else(learnt);
            return match text {
                Some(text) => {
                    request.query = text.to_string();
                    Ok(())
                }
                None if self.only => Err(PersistedError::NotInList),
                None if self.learnt.is_none() => Err(PersistedError::NotSupported),
                None => Err(PersistedError::NotFound),
            };
        }
        if sha256_hex(&request.query) != hash {
            return Err(PersistedError::Invalid(
                "provided sha256Hash does not match the query".into(),
            ));
        }
        if self.only {
            if !self.manifest.contains_key(&hash) {
                return Err(PersistedError::NotInList);
            }
        } else if !self.manifest.contains_key(&hash)
            && request.query.len() <= self.max_text
            && let Some(cache) = &self.learnt
        {
            cache.insert(hash, Arc::from(request.query.as_str()));
        }
        Ok(())
    }
}

/// The lowercase hex SHA-256 of `text`.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// True when `extensions` name a persisted query (a request may then come
/// without its text).
pub(crate) fn names_persisted_query(
    extensions: &serde_json::Map<String, serde_json::Value>,
) -> bool {
    extensions.contains_key("persistedQuery")
}

/// The hash `extensions.persistedQuery` names, if any.
fn requested_hash(request: &Request) -> Result<Option<String>, PersistedError> {
    let Some(extension) = request.extensions.get("persistedQuery") else {
        return Ok(None);
    };
    let invalid = |m: &str| PersistedError::Invalid(m.to_owned());
    let async_graphql::Value::Object(fields) = extension else {
        return Err(invalid("`persistedQuery` must be an object"));
    };
    match fields.get("version") {
        Some(async_graphql::Value::Number(n)) if n.as_u64() == Some(1) => {}
        _ => return Err(invalid("`persistedQuery.version` must be 1")),
    }
    match fields.get("sha256Hash") {
        Some(async_graphql::Value::String(hash))
            if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Ok(Some(hash.to_ascii_lowercase()))
        }
        _ => Err(invalid(
            "`persistedQuery.sha256Hash` must be 64 hexadecimal digits",
        )),
    }
}

/// Reads a manifest: Apollo's persisted-query manifest
/// (`{"format": "apollo-persisted-query-manifest", "operations": [{"id", "body"}]}`)
/// or a plain object of hash → text. Every id must be the SHA-256 of its text.
pub(crate) fn parse_manifest(json: &str) -> Result<HashMap<String, Arc<str>>, String> {
    let value: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let pairs: Vec<(String, String)> = match value.get("operations") {
        Some(serde_json::Value::Array(operations)) => operations
            .iter()
            .map(|op| {
                let field = |name: &str| {
                    op.get(name)
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_owned)
                        .ok_or_else(|| format!("an operation without a string `{name}`"))
                };
                Ok((field("id")?, field("body")?))
            })
            .collect::<Result<_, String>>()?,
        Some(_) => return Err("`operations` must be an array".into()),
        None => value
            .as_object()
            .ok_or("the manifest must be a JSON object")?
            .iter()
            .map(|(id, body)| {
                body.as_str()
                    .map(|b| (id.clone(), b.to_owned()))
                    .ok_or_else(|| format!("the text of {id} is not a string"))
            })
            .collect::<Result<_, String>>()?,
    };
    pairs
        .into_iter()
        .map(|(id, body)| {
            let id = id.to_ascii_lowercase();
            if sha256_hex(&body) != id {
                return Err(format!("{id} is not the SHA-256 of its text"));
            }
            Ok((id, Arc::from(body)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_in_either_form_are_checked_against_their_hashes() {
        let query = "{ viewer { handle } }";
        let hash = sha256_hex(query);
        let apollo = serde_json::json!({
            "format": "apollo-persisted-query-manifest", "version": 1,
            "operations": [{ "id": hash, "name": "Me", "type": "query", "body": query }],
        });
        let parsed = parse_manifest(&apollo.to_string()).unwrap();
        assert_eq!(parsed[&hash].as_ref(), query);
        let plain = serde_json::json!({ hash.clone(): query });
        assert_eq!(parse_manifest(&plain.to_string()).unwrap().len(), 1);
        let wrong = serde_json::json!({ hash: "{ viewer { id } }" });
        assert!(parse_manifest(&wrong.to_string()).is_err());
    }
}
