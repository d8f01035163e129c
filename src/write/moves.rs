//! Account moves: the aliases an account claims, the move itself, and one
//! batch of a move's job — the next followers of the old account follow
//! the new one (through the group commit's statement, so blocks, locks and
//! the follow cap hold as for any follow) and unfollow the old, with the
//! options of their follow, in one transaction with the job's progress.

use crate::app::App;
use crate::error::ApiError;
use crate::model::UserId;
use crate::store::failure;
use crate::store::following::{self, EdgeItem, FollowCap};
use crate::store::moves::{self, MoveRow, Progress};
use crate::store::{PgConn, aliases, users};

use super::follow::{EdgeChange, FollowOutcome, Refusal, outcome_of};
use super::import::RowError;

/// Most aliases one account may claim.
pub(crate) const MAX_ALIASES: i64 = 16;

/// `user` claims `alias` as one of its old accounts (a move from it to
/// `user` is allowed then); `user`'s aliases after.
pub(crate) async fn add_alias(
    app: &App,
    user: UserId,
    alias: UserId,
) -> Result<(bool, Vec<UserId>), ApiError> {
    if user == alias {
        return Err(ApiError::invalid("an account cannot be its own alias"));
    }
    super::take_tokens(app, user, 1).await?;
    let mut conn = app.pg.get().await?;
    active(&mut conn, user).await?;
    if users::find(&mut conn, alias).await?.is_none() {
        return Err(ApiError::NotFound("user"));
    }
    let added = failure::rerun!(aliases::add_alias(&mut conn, user, alias, MAX_ALIASES).await)?
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "an account has at most {MAX_ALIASES} aliases: remove one first"
            ))
        })?;
    Ok((added, aliases::aliases(&mut conn, user).await?))
}

/// `user` no longer claims `alias`; `user`'s aliases after. A move that
/// ran from it stays.
pub(crate) async fn remove_alias(
    app: &App,
    user: UserId,
    alias: UserId,
) -> Result<(bool, Vec<UserId>), ApiError> {
    super::take_tokens(app, user, 1).await?;
    let mut conn = app.pg.get().await?;
    active(&mut conn, user).await?;
    let removed = failure::rerun!(aliases::remove_alias(&mut conn, user, alias).await)?;
    Ok((removed, aliases::aliases(&mut conn, user).await?))
}

/// Refuses an account that cannot act.
async fn active(conn: &mut PgConn, user: UserId) -> Result<(), ApiError> {
    match users::status_of(conn, user).await? {
        Some(crate::model::UserStatus::Active) => Ok(()),
        Some(crate::model::UserStatus::Suspended) => {
            Err(ApiError::Forbidden("this account is suspended"))
        }
        _ => Err(ApiError::Unauthenticated("the token's user does not exist")),
    }
}

/// Moves `from` to `to`, which must claim `from` as an alias: `from` is
/// marked moved and takes no follows from now, and its followers are
/// brought to `to` in the background. A move to the account that moved to
/// `from` is a move back.
pub(crate) async fn start(app: &App, from: UserId, to: UserId) -> Result<MoveRow, ApiError> {
    super::take_tokens(app, from, 1).await?;
    let events = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()];
    let mut conn = app.pg.get().await?;
    // One move in a cooldown: followers are not moved back and forth.
    let cooldown = app
        .config
        .portability
        .move_cooldown_secs
        .saturating_mul(1000);
    if let Some(since) = moves::since_last_move(&mut conn, from).await? {
        let since = u64::try_from(since).unwrap_or(0);
        if since < cooldown {
            return Err(ApiError::RateLimited {
                retry_after_ms: cooldown - since,
            });
        }
    }
    let opened = failure::rerun!(moves::open(&mut conn, from, to, events).await)?;
    let id = match (opened.outcome.as_str(), opened.move_id) {
        ("ok", Some(id)) => id,
        ("actor_unknown", _) => {
            return Err(ApiError::Unauthenticated("the token's user does not exist"));
        }
        ("actor_suspended", _) => return Err(ApiError::Forbidden("this account is suspended")),
        ("self", _) => return Err(ApiError::invalid("an account cannot move to itself")),
        ("target_unknown", _) => return Err(ApiError::NotFound("user")),
        ("target_unfollowable", _) => {
            return Err(ApiError::invalid("this user cannot be followed"));
        }
        ("moved", _) => {
            return Err(ApiError::Moved(
                "this account has moved already; the account it moved to can move back to it",
            ));
        }
        ("target_moved", _) => {
            return Err(ApiError::Moved(
                "that account has moved itself: move to the account its movedTo names",
            ));
        }
        ("no_alias", _) => {
            return Err(ApiError::Forbidden(
                "the new account must first claim this one as an alias (addAccountAlias)",
            ));
        }
        ("move_running", _) => return Err(ApiError::Moved("a move of this account is running")),
        ("move_incoming", _) => {
            return Err(ApiError::Moved(
                "a move to this account is still bringing its followers: move once it has ended",
            ));
        }
        (other, _) => {
            return Err(ApiError::internal(anyhow::anyhow!(
                "kith_move_account answered {other:?}"
            )));
        }
    };
    let row = moves::get(&mut conn, id)
        .await?
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("move {id} vanished")))?;
    drop(conn);
    app.read.forget_users(&[from, to]);
    app.wakes.relay.notify_one();
    app.wakes.moves.notify_one();
    Ok(row)
}

/// What a batch did, for the caches once it commits.
pub(crate) struct Batch {
    /// The follows and unfollows it made.
    pub follows: Vec<FollowOutcome>,
    /// Whether every follower is handled.
    pub done: bool,
}

/// Why a move's job cannot go on: it ends `failed` with this.
#[derive(Debug)]
pub(crate) struct Stopped(pub &'static str);

/// Why [`bring`] brought nobody.
pub(super) enum Halt {
    /// The move cannot go on: it ends `failed`.
    Stopped(Stopped),
    /// The new account cannot be followed for now (suspended): the move
    /// waits, its followers where they are. A deleted one ends the move.
    Paused,
}

/// How long a move whose new account cannot be followed for now waits.
const PAUSE_MS: i64 = 60_000;

/// How long a move that found no follower left, while a transaction older
/// than its first batch is open, waits before it looks again.
const QUIET_CHECK_MS: i64 = 1_000;

/// One batch of `job` (fenced by the caller, in `conn`'s transaction): up
/// to `size` followers, then the job due again in `size / rate` seconds.
/// Past the last follower, a sweep from the first brings any follow that
/// raced the move's start (it read the account before it moved); the move
/// is done once a sweep finds none and no transaction that began before
/// the move's first batch is open ([`moves::quiet`]).
pub(crate) async fn batch(
    app: &App,
    conn: &mut PgConn,
    job: &MoveRow,
    size: i64,
) -> Result<Result<Batch, Stopped>, ApiError> {
    let (Some(from), Some(to)) = (UserId::new(job.from_id), UserId::new(job.to_id)) else {
        return Ok(Err(Stopped("the move names no account")));
    };
    let mut followers =
        moves::followers_after(conn, job.from_id, job.after_id, size, job.id).await?;
    let mut after_id = followers.last().map(|last| last.id);
    if followers.is_empty() {
        // Past the last follower: the sweep (which keeps the cursor where
        // the walk ended), asked after whether a follow that read the
        // account before it moved may still commit.
        let quiet = moves::quiet(conn, job.id).await?;
        followers = moves::followers_after(conn, job.from_id, 0, size, job.id).await?;
        after_id = None;
        if followers.is_empty() {
            if !quiet {
                let progress = Progress {
                    pace_ms: Some(QUIET_CHECK_MS),
                    ..Progress::default()
                };
                moves::advance(conn, job.id, progress, &[]).await?;
            }
            return Ok(Ok(Batch {
                follows: Vec::new(),
                done: quiet,
            }));
        }
    }
    let (progress, brought) = match bring(app, conn, (from, to), &followers).await? {
        Ok(brought) => (
            Progress {
                after_id,
                pace_ms: Some(pace_ms(app, followers.len())),
                ..brought.progress
            },
            brought,
        ),
        Err(Halt::Stopped(stopped)) => return Ok(Err(stopped)),
        Err(Halt::Paused) => (
            Progress {
                pace_ms: Some(PAUSE_MS),
                ..Progress::default()
            },
            Brought::default(),
        ),
    };
    moves::advance(conn, job.id, progress, &brought.failures).await?;
    Ok(Ok(Batch {
        follows: brought.follows,
        done: false,
    }))
}

/// What [`bring`] did.
#[derive(Default)]
pub(crate) struct Brought {
    /// The counts of its followers by how they ended.
    pub progress: Progress,
    /// The followers left behind, with their codes.
    pub failures: Vec<(i64, &'static str)>,
    /// The follows and unfollows it made, for the caches.
    pub follows: Vec<FollowOutcome>,
    /// The followers it brought to the new account (a follow made, one
    /// there already, or a request): not those left behind, nor those that
    /// no longer followed the old account when it looked, nor those at the
    /// follow cap whose new account changed meanwhile (left for the sweep).
    pub brought: Vec<UserId>,
}

/// Brings `followers` of `from` to `to` in `conn`'s transaction: each
/// follows `to` and, unless refused, unfollows `from`. Every pair of
/// theirs with either account is locked first, in one pass, and who still
/// follows `from` is read after: an unfollow that came between is not
/// made a follow of `to`.
pub(super) async fn bring(
    app: &App,
    conn: &mut PgConn,
    (from, to): (UserId, UserId),
    followers: &[moves::Follower],
) -> Result<Result<Brought, Halt>, ApiError> {
    let cap = FollowCap::of(&app.config);
    let ids: Vec<i64> = followers.iter().map(|f| f.id).collect();
    moves::lock_pairs(conn, &ids, [from.get(), to.get()]).await?;
    let followers = moves::followers_among(conn, from.get(), &ids).await?;
    let mut progress = Progress::default();
    let mut failures = Vec::new();
    // The new account's own follow of the old one stays as it is.
    let (itself, followers): (Vec<&moves::Follower>, Vec<&moves::Follower>) =
        followers.iter().partition(|f| f.id == to.get());
    for follower in itself {
        progress.failed += 1;
        failures.push((follower.id, RowError::SelfTarget.as_str()));
    }
    let items: Vec<EdgeItem> = followers
        .iter()
        .filter_map(|f| UserId::new(f.id))
        .map(|actor| EdgeItem {
            actor,
            target: to,
            follow: true,
            event_id: uuid::Uuid::new_v4(),
        })
        .collect();
    let rows = following::change_set(conn, &items, cap).await?;
    let mut follows = Vec::new();
    let mut leaving = Vec::new();
    let mut at_cap = Vec::new();
    for ((item, row), follower) in items.iter().zip(rows).zip(&followers) {
        let made = row.edge_version.is_some();
        match Refusal::check(&row.outcome) {
            Ok(requested) => {
                if requested {
                    progress.requested += 1;
                } else if made {
                    progress.moved += 1;
                } else {
                    progress.skipped += 1;
                }
                // A follow made, or a request made of a locked account,
                // takes the options of the follow (or request) it replaces.
                if made {
                    super::move_cap::carry_options(conn, item.actor, to, follower).await?;
                }
                if made
                    && let Ok(outcome) =
                        outcome_of(row, item.actor, to, EdgeChange::Follow, item.event_id)
                {
                    follows.push(outcome);
                }
                leaving.push(item.actor);
            }
            Err(Refusal::TargetUnknown) => {
                return Ok(Err(Halt::Stopped(Stopped(
                    "the new account no longer exists",
                ))));
            }
            // Suspended, the move waits for its restore; deleted, it ends.
            Err(Refusal::TargetUnfollowable) => {
                return Ok(Err(match users::status_of(conn, to).await? {
                    Some(crate::model::UserStatus::Deleted) | None => {
                        Halt::Stopped(Stopped("the new account was deleted"))
                    }
                    _ => Halt::Paused,
                }));
            }
            Err(Refusal::TargetMoved) => {
                return Ok(Err(Halt::Stopped(Stopped(
                    "the new account has moved itself",
                ))));
            }
            // Its unfollow of the old account nets it out: tried below.
            Err(Refusal::FollowLimit) => at_cap.push((item.actor, *follower)),
            Err(refusal) => {
                let code = match refusal {
                    Refusal::Blocked => RowError::Blocked,
                    // The follower itself cannot act (suspended meanwhile).
                    _ => RowError::NotFollowable,
                };
                progress.failed += 1;
                failures.push((item.actor.get(), code.as_str()));
            }
        }
    }
    // The old account loses those that follow (or asked to follow) the new.
    let unfollows: Vec<EdgeItem> = leaving
        .iter()
        .map(|&actor| EdgeItem {
            actor,
            target: from,
            follow: false,
            event_id: uuid::Uuid::new_v4(),
        })
        .collect();
    let ended = following::change_set(conn, &unfollows, cap).await?;
    for (item, row) in unfollows.iter().zip(ended) {
        if row.edge_version.is_some()
            && let Ok(outcome) =
                outcome_of(row, item.actor, from, EdgeChange::Unfollow, item.event_id)
        {
            follows.push(outcome);
        }
    }
    for (actor, follower) in at_cap {
        match super::move_cap::bring(conn, cap, (from, to), actor, follower).await? {
            Ok(brought) => {
                if brought.requested {
                    progress.requested += 1;
                } else {
                    progress.moved += 1;
                }
                follows.extend(brought.follows);
                leaving.push(actor);
            }
            // The new account changed since the batch began: the
            // follower stays where it is, unrecorded, for the sweep.
            Err(Some(
                Refusal::TargetUnknown | Refusal::TargetUnfollowable | Refusal::TargetMoved,
            )) => {}
            Err(refusal) => {
                let code = match refusal {
                    Some(Refusal::Blocked) => RowError::Blocked,
                    Some(Refusal::FollowLimit) | None => RowError::FollowLimit,
                    // The follower itself cannot act (suspended meanwhile).
                    Some(_) => RowError::NotFollowable,
                };
                progress.failed += 1;
                failures.push((actor.get(), code.as_str()));
            }
        }
    }
    Ok(Ok(Brought {
        progress,
        failures,
        follows,
        brought: leaving,
    }))
}

/// How long after a batch of `n` followers its job is due again.
fn pace_ms(app: &App, n: usize) -> i64 {
    let rate = f64::from(app.config.portability.move_followers_per_sec.max(1));
    (n as f64 / rate * 1000.0) as i64
}

/// After a batch committed: the relays are woken, and the kept
/// suggestions of its followers (whom they follow changed) are outdated.
/// Its follows are nobody's own write, waiting to read itself: the
/// projector brings them to the caches, once, rather than this and then
/// the projector again (half of what a move costs Redis, on the core the
/// reads need). Every process is told of them meanwhile
/// ([`crate::live::announce`]).
pub(crate) async fn after_batch(app: &App, follows: &[FollowOutcome]) {
    if follows.is_empty() {
        return;
    }
    let followers: Vec<UserId> = follows
        .iter()
        .filter_map(|f| f.event.as_ref().map(|e| e.from))
        .collect();
    super::after_commit_for(app, &[], &[], &followers).await;
    // Every process loads the rows its readers of the first pages the
    // batch changes are about to see (and the counter records of those
    // rising into them), while the pipeline brings it to the caches (one
    // round trip, against the relay's, the broker's and the projector's).
    let coming = follows
        .iter()
        .filter_map(|f| f.event.as_ref().map(crate::live::hub::FollowChange::from))
        .collect();
    crate::live::announce(app, coming).await;
}
