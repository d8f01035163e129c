//! Boundaries: for each user, whom they block, who blocks them, whom they
//! mute, the follow requests pending both ways, the close-friend listings
//! both ways, and the options they set on their follows. Held in process beside the user's row
//! ([`crate::read::users::UserCache`]) and dropped by the same notices —
//! triggers on `block`, `mute`, `follow_request`, `close_friend` and on
//! the options of `following` name both users of every change as it
//! commits — so a set is never served
//! past a change by more than the notice's delivery time, and a change
//! made through this process is dropped here at once. What is not held is
//! read from the truth (five statements for every user asked) and kept. A
//! mute's end is kept as a moment of this host's monotonic clock, from the
//! time the database counted as left: it takes effect when due, with no
//! sweep.
//!
//! Reads use them to leave out of a signed-in viewer's lists the accounts
//! the viewer blocks or that block the viewer, and to answer `blocking`,
//! `blockedBy`, `muting`, `requested`, `requestedBy`, `closeFriend`,
//! `inTheirCloseFriends` and `followOptions` on the viewer's own relations
//! and following list.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::app::App;
use crate::error::ApiError;
use crate::model::{Boundaries, UserId};
use crate::store::{blocks, close_friends, follow_options, mutes, requests};

/// The boundaries of `users`: from the process, the rest from PostgreSQL.
pub(crate) async fn sets(
    app: &App,
    users: &[UserId],
) -> Result<HashMap<UserId, Arc<Boundaries>>, ApiError> {
    let cache = &app.read.users;
    let mut found = HashMap::with_capacity(users.len());
    let mut missing = Vec::new();
    for user in users {
        match cache.get_boundaries(*user) {
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
    let held = if cache.is_serving() {
        None
    } else {
        missing
            .iter()
            .map(|u| cache.held_boundaries(*u).map(|set| (*u, set)))
            .collect::<Option<Vec<_>>>()
    };
    let seen = cache.generation();
    let (read, fresh) = cache
        .or_held(&app.pg, held, async |conn| Ok(read(conn, &missing).await?))
        .await?;
    if fresh {
        cache.insert_boundaries(seen, &read);
    }
    found.extend(read);
    Ok(found)
}

/// The boundaries of `missing`, from the truth (five statements).
async fn read(
    conn: &mut crate::store::PgConn,
    missing: &[UserId],
) -> diesel::QueryResult<Vec<(UserId, Arc<Boundaries>)>> {
    let block_rows = blocks::involving(conn, missing).await?;
    let mute_rows = mutes::made_by(conn, missing).await?;
    let request_rows = requests::involving(conn, missing).await?;
    let listing_rows = close_friends::involving(conn, missing).await?;
    let option_rows = follow_options::set_by(conn, missing).await?;
    let read_at = Instant::now();
    let mut read: HashMap<UserId, Boundaries> = missing
        .iter()
        .map(|u| (*u, Boundaries::default()))
        .collect();
    for row in block_rows {
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
    for row in mute_rows {
        let (Some(from), Some(to)) = (UserId::new(row.from_user_id), UserId::new(row.to_user_id))
        else {
            continue;
        };
        let ends = row
            .remaining_ms
            .map(|ms| read_at + Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
        if let Some(set) = read.get_mut(&from) {
            set.muting.insert(to, ends);
        }
    }
    for row in request_rows {
        let (Some(from), Some(to)) = (UserId::new(row.from_user_id), UserId::new(row.to_user_id))
        else {
            continue;
        };
        if let Some(set) = read.get_mut(&from) {
            set.requested.insert(to);
        }
        if let Some(set) = read.get_mut(&to) {
            set.requested_by.insert(from);
        }
    }
    for row in listing_rows {
        let (Some(from), Some(to)) = (UserId::new(row.from_user_id), UserId::new(row.to_user_id))
        else {
            continue;
        };
        if let Some(set) = read.get_mut(&from) {
            set.close_friends.insert(to);
        }
        if let Some(set) = read.get_mut(&to) {
            set.close_friend_of.insert(from);
        }
    }
    for row in option_rows {
        let (Some(from), Some(to)) = (UserId::new(row.from_user_id), UserId::new(row.to_user_id))
        else {
            continue;
        };
        if let Some(set) = read.get_mut(&from) {
            set.follow_options
                .insert(to, (row.followed_at_ms, row.options()));
        }
    }
    Ok(read
        .into_iter()
        .map(|(u, set)| (u, Arc::new(set)))
        .collect())
}
