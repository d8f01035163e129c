//! Opaque global object ids (`base64url("User:42")`), as Relay expects.

use async_graphql::ID;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::error::ApiError;
use crate::model::UserId;

/// The kinds of object that have global ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeKind {
    /// A [`crate::model::User`].
    User,
}

impl NodeKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::User => "User",
        }
    }
}

/// The global id of a user.
pub fn user_id(id: UserId) -> ID {
    ID(URL_SAFE_NO_PAD.encode(format!("{}:{id}", NodeKind::User.as_str())))
}

/// The global id of an import job.
pub(crate) fn import_job_id(id: i64) -> ID {
    ID(URL_SAFE_NO_PAD.encode(format!("ImportJob:{id}")))
}

/// Decodes a global id that must name an import job.
pub(crate) fn decode_import_job(id: &ID) -> Result<i64, ApiError> {
    decode_numbered(id, "ImportJob:", "import job")
}

/// The global id of an account move.
pub(crate) fn account_move_id(id: i64) -> ID {
    ID(URL_SAFE_NO_PAD.encode(format!("AccountMove:{id}")))
}

/// Decodes a global id that must name an account move.
pub(crate) fn decode_account_move(id: &ID) -> Result<i64, ApiError> {
    decode_numbered(id, "AccountMove:", "account move")
}

/// Decodes a global id of `prefix` and a positive number (`what` names it
/// in the refusal).
fn decode_numbered(id: &ID, prefix: &str, what: &str) -> Result<i64, ApiError> {
    let malformed = || ApiError::invalid(format!("malformed {what} id {:?}", id.as_str()));
    let bytes = URL_SAFE_NO_PAD
        .decode(id.as_str())
        .map_err(|_| malformed())?;
    std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| text.strip_prefix(prefix))
        .and_then(|raw| raw.parse::<i64>().ok())
        .filter(|id| *id > 0)
        .ok_or_else(malformed)
}

/// Decodes any global id into its kind and database id.
pub(crate) fn decode(id: &ID) -> Result<(NodeKind, UserId), ApiError> {
    let malformed = || ApiError::invalid(format!("malformed id {:?}", id.as_str()));
    let bytes = URL_SAFE_NO_PAD
        .decode(id.as_str())
        .map_err(|_| malformed())?;
    let text = std::str::from_utf8(&bytes).map_err(|_| malformed())?;
    let (kind, raw) = text.split_once(':').ok_or_else(malformed)?;
    let kind = match kind {
        "User" => NodeKind::User,
        _ => return Err(malformed()),
    };
    Ok((kind, raw.parse().map_err(|()| malformed())?))
}

/// Decodes a global id that must name a user.
pub fn decode_user(id: &ID) -> Result<UserId, ApiError> {
    match decode(id)? {
        (NodeKind::User, user) => Ok(user),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects_garbage() {
        let id = UserId::new(42).unwrap();
        assert_eq!(decode_user(&user_id(id)).unwrap(), id);
        for bad in ["", "42", "VXNlcjo", "VXNlcjotMQ", "Rm9vOjE"] {
            let err = decode_user(&ID(bad.into())).unwrap_err();
            assert_eq!(err.code(), "INVALID_INPUT", "{bad}");
        }
    }
}
