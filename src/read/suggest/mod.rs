//! Follow suggestions ("people you may know"): computed online over the
//! cached lists, with bounded work, and kept per viewer in Redis for
//! `KITH_SUGGESTIONS_TTL_SECS` with the generation of the viewer's changes
//! they were computed at (the viewer's own follows, blocks, mutes, requests
//! and dismissals, and blocks of the viewer, move it on).
//!
//! One computation:
//! 1. the viewer's following and followers lists (the newest 1,000 and 200)
//!    — one Redis round trip;
//! 2. a sample of the followees (`KITH_SUGGESTIONS_SAMPLE`: half the newest,
//!    half drawn from the rest), their counters, and the newest
//!    `KITH_SUGGESTIONS_PER_FOLLOWEE` follows of each — two round trips,
//!    made at once with the reads of step 5's exclusions; the follows of
//!    those that hide their lists or are not active do not count;
//! 4. each account they follow scores, per followee, `w × a`: `w` =
//!    1 / (1 + ln(1 + followings / 100)), so a prolific follower counts
//!    less, and `a` = ½ + ½ × 2^(−age / 180 days), so a recent follow counts
//!    up to twice an old one (age discounts, never erases); an account that
//!    follows the viewer scores `a` more (`FOLLOWS_YOU`);
//! 5. excluded: the viewer, whom it follows (from the truth for the top
//!    candidates when its list is longer than the walk), whom it has asked
//!    to follow, blocks either way, mutes, dismissals, accounts not active;
//! 6. short of [`KEPT`], the most followed accounts fill in (`POPULAR`),
//!    read once per process and kept for 10 minutes.
//!
//! Lists missing from the cache are read from PostgreSQL and filled in the
//! background, as any read does.

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

mod score;

use score::{Followee, Inputs};

use super::batch::{self, Answer, Read};
use super::intersect;
use crate::app::App;
use crate::error::ApiError;
use crate::model::{UserId, UserStatus};
use crate::paging::{ListKey, Position};
use crate::store::suggestions as store;

/// Suggestions kept per viewer (the pages of `suggestedFollows`).
pub(crate) const KEPT: usize = 100;
/// The viewer's own following list read per computation.
const OWN_FOLLOWING: usize = 1000;
/// The viewer's own followers read per computation.
const OWN_FOLLOWERS: usize = 200;
/// Followers named in a reason.
const NAMED: usize = 3;
/// Most followed accounts read.
const POPULAR: i64 = 200;

/// Why an account is suggested.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReasonKind {
    /// Followed by accounts the viewer follows.
    FollowedByPeopleYouFollow,
    /// It follows the viewer, who does not follow it back.
    FollowsYou,
    /// One of the most followed accounts.
    Popular,
}

/// One suggestion, as kept.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Suggestion {
    /// The account.
    pub user: UserId,
    /// Its score: higher first.
    pub score: f64,
    /// Why.
    pub kind: ReasonKind,
    /// Up to three followees of the viewer's who follow it, strongest first.
    pub followed_by: Vec<UserId>,
    /// How many of the followees read follow it.
    pub followed_by_count: u32,
    /// True when every followee was read in full (the count is exact).
    pub exact: bool,
}

/// Suggestions as kept in Redis: the list and the generation of the
/// viewer's changes it was computed at.
#[derive(Serialize, Deserialize)]
struct Kept {
    generation: i64,
    list: Vec<Suggestion>,
}

/// The viewer's suggestions: kept ones when no change of the viewer's has
/// outdated them (one Redis round trip), else computed now and kept.
pub async fn for_viewer(app: &Arc<App>, viewer: UserId) -> Result<Arc<Vec<Suggestion>>, ApiError> {
    let [key, generation_key] = app.keys.suggestions(viewer);
    let mut generation = 0;
    if let Ok(mut redis) = app.redis.get().await {
        let read: redis::RedisResult<(Option<String>, Option<i64>)> = redis::cmd("MGET")
            .arg(&key)
            .arg(&generation_key)
            .query_async(&mut *redis)
            .await;
        if let Ok((kept, current)) = read {
            generation = current.unwrap_or(0);
            if let Some(kept) = kept.and_then(|k| serde_json::from_str::<Kept>(&k).ok())
                && kept.generation == generation
            {
                return Ok(Arc::new(kept.list));
            }
        }
    }
    let (list, _) = compute(app, viewer).await?;
    let kept = Kept { generation, list };
    if let (Ok(text), Ok(mut redis)) = (serde_json::to_string(&kept), app.redis.get().await) {
        let stored: redis::RedisResult<()> = redis::cmd("SET")
            .arg(&key)
            .arg(text)
            .arg("EX")
            .arg(app.config.suggestions.ttl_secs.max(1))
            .query_async(&mut *redis)
            .await;
        if let Err(error) = stored {
            tracing::debug!(%error, "suggestions not kept");
        }
    }
    Ok(Arc::new(kept.list))
}

/// Computes `viewer`'s suggestions now (nothing kept), and how many list
/// entries the computation read.
pub async fn compute(app: &Arc<App>, viewer: UserId) -> Result<(Vec<Suggestion>, usize), ApiError> {
    let config = &app.config;
    let own = intersect::walk_each(
        app,
        &[
            (ListKey::Following(viewer), OWN_FOLLOWING),
            (ListKey::Followers(viewer), OWN_FOLLOWERS),
        ],
    )
    .await?;
    let (following, following_complete) = own
        .get(&ListKey::Following(viewer))
        .cloned()
        .unwrap_or_default();
    let fans: Vec<Position> = own
        .get(&ListKey::Followers(viewer))
        .map(|(f, _)| f.clone())
        .unwrap_or_default();

    // The sampled followees' rows, counters and lists, and what is never
    // suggested, read at once.
    let sampled = sample(&following, config.suggestions.sample as usize, viewer);
    let reads: Vec<Read> = sampled.iter().map(|u| Read::Counters(*u)).collect();
    let lists: Vec<ListKey> = sampled.iter().map(|u| ListKey::Following(*u)).collect();
    let per = config.suggestions.per_followee as usize;
    let (rows, counters, walked, excluded) = tokio::try_join!(
        app.read.users.by_ids(&app.pg, &sampled),
        batch::load(app, &reads),
        intersect::walk_many(app, &lists, per),
        exclusions(app, viewer),
    )?;
    // A reason never names an account whose lists are hidden, nor one not
    // active: their follows do not count.
    let readable: Vec<UserId> = rows
        .iter()
        .filter(|u| u.status == UserStatus::Active && !u.hides_collections)
        .map(|u| u.id)
        .collect();
    let read_lists: Vec<&(Vec<Position>, bool)> = readable
        .iter()
        .filter_map(|u| walked.get(&ListKey::Following(*u)))
        .collect();
    let entries = following.len()
        + fans.len()
        + read_lists
            .iter()
            .map(|(members, _)| members.len())
            .sum::<usize>();

    let followees: Vec<Followee<'_>> = readable
        .iter()
        .filter_map(|u| {
            let (members, complete) = walked.get(&ListKey::Following(*u))?;
            let followings = match counters.get(&Read::Counters(*u)) {
                Some(Answer::Counters(record)) => f64::from(record.followings),
                _ => members.len() as f64,
            };
            Some(Followee {
                id: *u,
                followings,
                members,
                complete: *complete,
            })
        })
        .collect();
    let inputs = Inputs::new(
        viewer,
        &following,
        following_complete && sampled.len() == following.len(),
        &fans,
        followees,
        &excluded,
    );
    let mut out = score::rank(&inputs);
    if out.len() < KEPT {
        score::fill_with_popular(&inputs, &mut out, &popular(app).await?);
    }
    // What the walk of the viewer's list could not rule out, the truth
    // does; and only active accounts, as any list shows them, that take
    // follows (a moved one does not).
    let asked: Vec<UserId> = out.iter().map(|s| s.user).collect();
    let (followed, users) = tokio::try_join!(
        async {
            if following_complete || asked.is_empty() {
                return Ok(Vec::new());
            }
            let mut conn = app.pg.get().await?;
            Ok::<_, ApiError>(store::followed_of(&mut conn, viewer, &asked).await?)
        },
        app.read.users.by_ids(&app.pg, &asked),
    )?;
    let followed: HashSet<UserId> = followed.into_iter().collect();
    let active: HashSet<UserId> = users
        .into_iter()
        .filter(|u| u.status == UserStatus::Active && u.moved_to.is_none())
        .map(|u| u.id)
        .collect();
    out.retain(|s| active.contains(&s.user) && !followed.contains(&s.user));
    out.truncate(KEPT);
    Ok((out, entries))
}

/// Up to `n` of `following` (newest first): the newest half, then the rest
/// drawn evenly from the others with a seed of the viewer and the hour, so
/// a recomputation within the hour reads the same lists.
fn sample(following: &[Position], n: usize, viewer: UserId) -> Vec<UserId> {
    if following.len() <= n {
        return following.iter().map(|p| p.user).collect();
    }
    let newest = n / 2;
    let mut out: Vec<UserId> = following[..newest].iter().map(|p| p.user).collect();
    let rest = &following[newest..];
    let hour = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 3600)
        .unwrap_or(0);
    let mut state = (viewer.get() as u64) ^ hour.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut picked: HashSet<usize> = HashSet::new();
    while out.len() < n && picked.len() < rest.len() {
        // splitmix64
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let i = (z % rest.len() as u64) as usize;
        if picked.insert(i) {
            out.push(rest[i].user);
        }
    }
    out
}

/// Who is never suggested to `viewer`: accounts in a block with it either
/// way, accounts it mutes or has asked to follow, and its dismissals.
async fn exclusions(app: &App, viewer: UserId) -> Result<HashSet<UserId>, ApiError> {
    let sets = super::boundaries::sets(app, &[viewer]).await?;
    let mut out: HashSet<UserId> = HashSet::new();
    if let Some(b) = sets.get(&viewer) {
        out.extend(b.blocking.iter().copied());
        out.extend(b.blocked_by.iter().copied());
        out.extend(b.requested.iter().copied());
        out.extend(b.muting.keys().copied().filter(|m| b.mutes(*m)));
    }
    let mut conn = app.pg.get().await?;
    out.extend(store::dismissed(&mut conn, viewer).await?);
    Ok(out)
}

/// The most followed active accounts, read once per process and kept for
/// 10 minutes (`read::state`).
async fn popular(app: &App) -> Result<Arc<Vec<UserId>>, ApiError> {
    app.read
        .popular
        .try_get_with((), async {
            let mut conn = app.pg.get().await?;
            Ok::<_, ApiError>(Arc::new(store::most_followed(&mut conn, POPULAR).await?))
        })
        .await
        .map_err(|e| ApiError::shared(&e))
}
