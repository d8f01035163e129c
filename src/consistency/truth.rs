//! Repairs of the truth against itself, for `kith reconcile --full` and
//! `--user`: a follow across a block is ended as an unfollow, a pending
//! follow request beside a follow or across a block is cancelled, and a
//! close-friend listing across a block is removed — each under the pair's
//! lock, with its event. Kith's writes never leave
//! either (a block ends and drops them in its own transaction), so these
//! find faults, not lag; `kith verify` reports them. A follower that a
//! finished move left following the moved account (restored with its
//! follow after the move, or a fault) is brought along as the move's job
//! would have.

use crate::app::App;
use crate::error::PipelineError;
use crate::model::UserId;

/// One repair of the truth against itself.
pub(crate) enum Repair {
    /// A follow across a block, ended.
    FollowAcross(UserId, UserId),
    /// A stray follow request, cancelled.
    StrayRequest(UserId, UserId),
    /// A close-friend listing across a block, removed.
    ListingAcross(UserId, UserId),
    /// A follower a finished move left following the moved account:
    /// brought along, or left behind with the code it has now.
    Stranded(UserId, UserId, &'static str),
}

impl Repair {
    /// The users whose counters and caches it may have changed.
    pub(crate) fn users(&self) -> Option<[UserId; 2]> {
        match *self {
            Self::FollowAcross(a, b) | Self::Stranded(a, b, _) => Some([a, b]),
            Self::StrayRequest(..) | Self::ListingAcross(..) => None,
        }
    }
}

impl std::fmt::Display for Repair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::FollowAcross(a, b) => write!(f, "{a} → {b}: a follow across a block, ended"),
            Self::StrayRequest(a, b) => write!(f, "{a} → {b}: a stray follow request, cancelled"),
            Self::ListingAcross(a, b) => {
                write!(f, "{a} → {b}: a close friend across a block, removed")
            }
            Self::Stranded(a, b, "brought along") => {
                write!(
                    f,
                    "{a} → {b}: a follower a finished move left, brought along"
                )
            }
            Self::Stranded(a, b, code) => write!(
                f,
                "{a} → {b}: a follower a finished move left, left behind ({code})"
            ),
        }
    }
}

/// Every repair of the truth against itself (of `user`, if given).
pub(crate) async fn repair(app: &App, user: Option<UserId>) -> Result<Vec<Repair>, PipelineError> {
    let mut done: Vec<Repair> = end_follows_across(app, user)
        .await?
        .into_iter()
        .map(|(a, b)| Repair::FollowAcross(a, b))
        .collect();
    done.extend(
        cancel_stray_requests(app, user)
            .await?
            .into_iter()
            .map(|(a, b)| Repair::StrayRequest(a, b)),
    );
    done.extend(
        end_listings_across(app, user)
            .await?
            .into_iter()
            .map(|(a, b)| Repair::ListingAcross(a, b)),
    );
    done.extend(
        bring_stranded(app, user)
            .await?
            .into_iter()
            .map(|(a, b, outcome)| Repair::Stranded(a, b, outcome)),
    );
    Ok(done)
}

/// Ends every follow across a block (of `user`, if given).
pub(crate) async fn end_follows_across(
    app: &App,
    user: Option<UserId>,
) -> Result<Vec<(UserId, UserId)>, PipelineError> {
    let mut conn = app.pg.get().await?;
    let found = crate::store::blocks::follows_across(&mut conn, LIMIT).await?;
    let pairs = of_user(found.iter().map(|r| (r.from_user_id, r.to_user_id)), user);
    let mut ended = Vec::new();
    for (from, to) in pairs {
        let event = uuid::Uuid::new_v4();
        if crate::store::blocks::end_follow_across(&mut conn, from, to, event).await? {
            ended.push((from, to));
        }
    }
    Ok(ended)
}

/// Cancels every pending request beside a follow or across a block (of
/// `user`, if given).
pub(crate) async fn cancel_stray_requests(
    app: &App,
    user: Option<UserId>,
) -> Result<Vec<(UserId, UserId)>, PipelineError> {
    let mut conn = app.pg.get().await?;
    let found = crate::store::requests::strays(&mut conn, LIMIT).await?;
    let pairs = of_user(found.iter().map(|r| (r.from_user_id, r.to_user_id)), user);
    let mut cancelled = Vec::new();
    for (from, to) in pairs {
        if crate::store::requests::cancel(&mut conn, from, to).await? {
            cancelled.push((from, to));
        }
    }
    if !cancelled.is_empty() {
        let users: Vec<UserId> = cancelled.iter().flat_map(|(a, b)| [*a, *b]).collect();
        app.read.forget_users(&users);
    }
    Ok(cancelled)
}

/// Removes every close-friend listing across a block (of `user`, if given).
pub(crate) async fn end_listings_across(
    app: &App,
    user: Option<UserId>,
) -> Result<Vec<(UserId, UserId)>, PipelineError> {
    let mut conn = app.pg.get().await?;
    let found = crate::store::close_friends::across_blocks(&mut conn, LIMIT).await?;
    let pairs = of_user(found.iter().map(|r| (r.from_user_id, r.to_user_id)), user);
    let mut ended = Vec::new();
    for (owner, friend) in pairs {
        if crate::store::close_friends::end_across_block(&mut conn, owner, friend).await? {
            ended.push((owner, friend));
        }
    }
    if !ended.is_empty() {
        let users: Vec<UserId> = ended.iter().flat_map(|(a, b)| [*a, *b]).collect();
        app.read.forget_users(&users);
    }
    Ok(ended)
}

/// Brings along every follower a finished move left following the moved
/// account (of `user`, if given): `(follower, moved account, outcome)`,
/// the outcome `brought along` or the code that leaves it behind.
pub(crate) async fn bring_stranded(
    app: &App,
    user: Option<UserId>,
) -> Result<Vec<(UserId, UserId, &'static str)>, PipelineError> {
    crate::write::move_repair::bring_stranded(app, user, LIMIT)
        .await
        .map_err(|e| PipelineError::Repair(e.detail()))
}

/// Most faults one run repairs of each kind (the next run takes the rest).
const LIMIT: i64 = 10_000;

/// The pairs of users among `rows`, those of `user` only if given.
fn of_user(rows: impl Iterator<Item = (i64, i64)>, user: Option<UserId>) -> Vec<(UserId, UserId)> {
    rows.filter_map(|(from, to)| Some((UserId::new(from)?, UserId::new(to)?)))
        .filter(|(from, to)| user.is_none_or(|u| u == *from || u == *to))
        .collect()
}
