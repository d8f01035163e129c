//! How users relate, for many pairs at once. Both directions come from the
//! truth: the cached *following* lists (kept by the write path and the
//! projector from `following`, never from the lagging `follower` projection)
//! where they can tell, else one query over `following` for the rest.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use crate::app::App;
use crate::error::ApiError;
use crate::model::UserId;
use crate::store::following;

/// Active edges among the directed `(from, to)` pairs, with their follow
/// times, read from `following` in one statement.
pub(crate) async fn from_truth(
    app: &App,
    directed: &[(UserId, UserId)],
) -> Result<HashMap<(UserId, UserId), DateTime<Utc>>, ApiError> {
    if directed.is_empty() {
        return Ok(HashMap::new());
    }
    let mut conn = app.pg.get().await?;
    let rows = following::rows(&mut conn, directed).await?;
    Ok(rows
        .iter()
        .filter(|r| r.active)
        .filter_map(|row| {
            Some((
                (UserId::new(row.from_user_id)?, UserId::new(row.to_user_id)?),
                row.followed_at,
            ))
        })
        .collect())
}
