//! Block sets: for each user, whom they block and who blocks them. Held
//! in process beside the user's row ([`crate::read::users::UserCache`]) and
//! dropped by the same notices — a trigger on `block` names both users of
//! every block and unblock as it commits — so a set is never served past
//! a change by more than the notice's delivery time, and a change made
//! through this process is dropped here at once. A set not held is read
//! from the truth (one statement for every user asked) and kept.
//!
//! Reads use them to leave out of a signed-in viewer's lists the accounts
//! the viewer blocks or that block the viewer, and to answer `blocking` /
//! `blockedBy` on the viewer's own relations.

use std::collections::HashMap;
use std::sync::Arc;

use crate::app::App;
use crate::error::ApiError;
use crate::model::{BlockSet, UserId};
use crate::store::blocks;

/// The block sets of `users`: from the process, the rest from PostgreSQL.
pub(crate) async fn sets(
    app: &App,
    users: &[UserId],
) -> Result<HashMap<UserId, Arc<BlockSet>>, ApiError> {
    let cache = &app.read.users;
    let mut found = HashMap::with_capacity(users.len());
    let mut missing = Vec::new();
    for user in users {
        match cache.get_blocks(*user) {
            Some(set) => {
                found.insert(*user, set);
            }
            None if !missing.contains(user) => missing.push(*user),
            None => {}
        }
    }
    if missing.is_empty() {
        return Ok(found);
    }
    let seen = cache.generation();
    let rows = {
        let mut conn = app.pg.get().await?;
        blocks::involving(&mut conn, &missing).await?
    };
    let mut read: HashMap<UserId, BlockSet> =
        missing.iter().map(|u| (*u, BlockSet::default())).collect();
    for row in rows {
        let (Some(from), Some(to)) = (UserId::new(row.from_user_id), UserId::new(row.to_user_id))
        else {
            continue;
        };
        if let Some(set) = read.get_mut(&from) {
            set.blocking.insert(to);
        }
        if let Some(set) = read.get_mut(&to) {
            set.blocked_by.insert(from);
        }
    }
    let read: Vec<(UserId, Arc<BlockSet>)> = read
        .into_iter()
        .map(|(u, set)| (u, Arc::new(set)))
        .collect();
    cache.insert_blocks(seen, &read);
    found.extend(read);
    Ok(found)
}
