//! How users relate, for many pairs at once: one query over the truth
//! (`following`) in both directions. `followedBy` reads the truth too, never
//! the lagging projection.

use std::collections::HashMap;

use crate::app::App;
use crate::error::ApiError;
use crate::model::UserId;
use crate::store::following::{self, PairState};

/// The state of each `(subject, other)` pair.
pub async fn load(
    app: &App,
    pairs: &[(UserId, UserId)],
) -> Result<HashMap<(UserId, UserId), PairState>, ApiError> {
    let mut directed: Vec<(UserId, UserId)> = Vec::with_capacity(pairs.len() * 2);
    for (a, b) in pairs {
        directed.push((*a, *b));
        directed.push((*b, *a));
    }
    let mut conn = app.pg.get().await?;
    let rows = following::rows(&mut conn, &directed).await?;
    let mut active = HashMap::new();
    for row in rows.iter().filter(|r| r.active) {
        if let (Some(from), Some(to)) = (UserId::new(row.from_user_id), UserId::new(row.to_user_id))
        {
            active.insert((from, to), row.followed_at);
        }
    }
    Ok(pairs
        .iter()
        .map(|(a, b)| {
            let state = PairState {
                a_follows_b: active.get(&(*a, *b)).copied(),
                b_follows_a: active.get(&(*b, *a)).copied(),
            };
            ((*a, *b), state)
        })
        .collect())
}
