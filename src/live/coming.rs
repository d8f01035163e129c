//! The rows of users a move's batch is about to show at the heads of lists
//! read here lately, loaded as the batch is told ([`super::announce`]),
//! before the pipeline brings it to the caches ([`crate::read::heads`]);
//! and the counter records of those who rise into a head as others leave
//! it, which the pipeline does not write (their own edges did not change).

use std::collections::HashSet;
use std::sync::Arc;

use super::hub::FollowChange;
use crate::app::App;
use crate::cache::{counters, lists};
use crate::model::UserId;
use crate::paging::ListKey;
use crate::read::heads::Coming;

/// Loads, in the background, the rows of the members that `coming` is
/// about to bring into the first pages read here lately, unless they are
/// held, the user cache cannot serve now, or a load runs already (best
/// effort: a read loads what this did not); and rebuilds the counter
/// records Redis lacks of the members rising into them.
pub(super) fn load(app: &Arc<App>, coming: &[FollowChange]) {
    let users = app.read.users();
    if !users.is_serving() {
        return;
    }
    let changes = coming.iter().flat_map(|c| {
        [
            (ListKey::Followers(c.to), c.from, c.followed_at_ms, c.active),
            (ListKey::Following(c.from), c.to, c.followed_at_ms, c.active),
        ]
    });
    let Coming {
        mut arriving,
        thinning,
    } = app.read.heads().coming(changes);
    arriving.retain(|id| users.get(*id).is_none());
    if arriving.is_empty() && thinning.is_empty() {
        return;
    }
    let Some(permit) = app.read.heads().loading() else {
        return;
    };
    // The batch's own members: the pipeline writes their records.
    let changed: HashSet<UserId> = coming.iter().flat_map(|c| [c.from, c.to]).collect();
    let app = app.clone();
    tokio::spawn(async move {
        let _permit = permit;
        let heads = rising(&app, &thinning).await;
        let users = app.read.users();
        let mut missing = arriving;
        missing.extend(heads.iter().filter(|id| users.get(**id).is_none()));
        missing.sort_unstable();
        missing.dedup();
        // One statement at a time on the shared pool, as the reads'.
        rows(&app, missing).await;
        let risers: Vec<UserId> = heads
            .into_iter()
            .filter(|id| !changed.contains(id))
            .collect();
        records(&app, &risers).await;
    });
}

/// Loads the rows of `missing` into the user cache.
async fn rows(app: &App, mut missing: Vec<UserId>) {
    // A change to any user noticed while the rows were read keeps them
    // all out of the cache (`UserCache::insert`): read again, once.
    for _ in 0..2 {
        if missing.is_empty() {
            return;
        }
        let users = app.read.users();
        let seen = users.generation();
        if let Err(error) = users.by_ids(&app.pg, &missing).await {
            tracing::debug!(%error, "rows coming to list heads read here not loaded");
            return;
        }
        missing.retain(|id| users.get(*id).is_none());
        if users.generation() == seen {
            return;
        }
    }
}

/// Rebuilds the counter records Redis lacks of `risers` (from
/// `user_stats`, written back only if newer), so that the read showing
/// one does not. The pipeline writes the records of a batch's own
/// members; a member rising into a head as they leave it is one whose
/// edges did not change, and whose record nobody may have read lately.
/// Records are shared: every process that read the list lately looks, and
/// processes that look at the same moment may rebuild the same record (a
/// statement each).
async fn records(app: &App, risers: &[UserId]) {
    if risers.is_empty() {
        return;
    }
    let read = async {
        let mut redis = app.redis.get().await.map_err(|e| e.to_string())?;
        counters::load_many(&mut *redis, &app.keys, risers)
            .await
            .map_err(|e| e.to_string())
    };
    let lacking: Vec<UserId> = match read.await {
        Ok(records) => risers
            .iter()
            .zip(&records)
            .filter(|(_, record)| record.is_none())
            .map(|(user, _)| *user)
            .collect(),
        Err(error) => {
            tracing::debug!(%error, "counter records rising to list heads read here not read");
            return;
        }
    };
    let counted = crate::read::counters::RoundTrips::Uncounted;
    if let Err(error) = crate::read::counters::rebuild(app, &lacking, counted).await {
        tracing::debug!(%error, "counter records rising to list heads read here not rebuilt");
    }
}

/// Of each list's cached head as deep as asked, the members (none of a
/// list not cached that deep): those on its first page now, those about
/// to leave it, and those rising into it.
async fn rising(app: &App, thinning: &[(ListKey, usize)]) -> Vec<UserId> {
    if thinning.is_empty() {
        return Vec::new();
    }
    let mut pipe = redis::pipe();
    for &(list, depth) in thinning {
        lists::queue_newest(&mut pipe, &app.keys, list, depth);
    }
    let read = async {
        let mut redis = app.redis.get().await.map_err(|e| e.to_string())?;
        pipe.query_async::<Vec<redis::Value>>(&mut *redis)
            .await
            .map_err(|e| e.to_string())
    };
    let replies = match read.await {
        Ok(replies) => replies,
        Err(error) => {
            tracing::debug!(%error, "heads of lists losing members not read");
            return Vec::new();
        }
    };
    let mut members: Vec<UserId> = thinning
        .iter()
        .zip(replies.chunks_exact(lists::NEWEST_REPLIES))
        .filter_map(|(&(_, depth), replies)| lists::parse_newest(replies, depth).ok())
        .flat_map(|page| page.items)
        .map(|position| position.user)
        .collect();
    members.sort_unstable();
    members.dedup();
    members
}
