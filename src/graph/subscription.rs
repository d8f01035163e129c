//! `type Subscription`: a user's counters and follower events, live, over
//! WebSocket (`graphql-transport-ws`, served at `/graphql`).
//!
//! Every field needs a signed-in viewer — the token of the connection's
//! `connection_init` payload — and takes one of the connection's
//! subscription slots. `userCountersChanged` is public (counters are);
//! `followerEvents` is the account owner's alone. Updates come from the projectors' batches
//! ([`crate::live`]) and are sent after the change is visible to a query on
//! the same replica.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_graphql::{Context, Enum, ErrorExtensions as _, ID, Object, SimpleObject, Subscription};
use chrono::{DateTime, TimeZone as _, Utc};
use futures_util::Stream;
use tokio::sync::broadcast::error::RecvError;

use super::count::Count;
use super::count::Counters;
use super::user::UserNode;
use super::user::load_visible;
use super::{app, ids, viewer};
use crate::app::App;
use crate::cache::counters::CounterRecord;
use crate::error::{ApiError, GraphqlResultExt};
use crate::live::hub::{ConnectionGuard, FollowChange, LiveBatch};
use crate::model::UserId;
use crate::read::batch::{self, Answer, Read};

/// One WebSocket connection's share of the limits: its subscription slots,
/// and its place among its user's connections (freed when it closes).
pub(crate) struct LiveConnection {
    running: Arc<AtomicUsize>,
    max: usize,
    _place: ConnectionGuard,
}

impl LiveConnection {
    /// A connection holding `place`, allowed `max` subscriptions at once.
    pub(crate) fn new(place: ConnectionGuard, max: usize) -> Self {
        Self {
            running: Arc::default(),
            max,
            _place: place,
        }
    }

    fn take_slot(&self) -> Result<Slot, ApiError> {
        let taken = self.running.fetch_add(1, Ordering::SeqCst);
        let slot = Slot(self.running.clone());
        if taken >= self.max {
            return Err(ApiError::invalid(format!(
                "at most {} subscriptions per connection",
                self.max
            )));
        }
        Ok(slot)
    }
}

/// One running subscription; ending it frees the slot.
pub(super) struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A user's counters, as sent by `userCountersChanged`.
#[derive(SimpleObject)]
pub(crate) struct CountersChanged {
    /// The user.
    pub user_id: ID,
    /// The counters now.
    pub counters: Counters,
}

/// A follow or unfollow.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FollowerEventType {
    /// The follower started following the user.
    Followed,
    /// The follower stopped following the user.
    Unfollowed,
}

/// Someone followed or stopped following a user.
pub(crate) struct FollowerEvent(FollowChange);

/// Someone followed or stopped following a user.
#[Object]
impl FollowerEvent {
    /// Followed or unfollowed.
    #[graphql(name = "type")]
    async fn event_type(&self) -> FollowerEventType {
        if self.0.active {
            FollowerEventType::Followed
        } else {
            FollowerEventType::Unfollowed
        }
    }

    /// The followed user.
    async fn user_id(&self) -> ID {
        ids::user_id(self.0.to)
    }

    /// The follower's id.
    async fn follower_id(&self) -> ID {
        ids::user_id(self.0.from)
    }

    /// The follower; null once the account is deleted.
    async fn follower(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<UserNode>> {
        load_visible(ctx, self.0.from).await
    }

    /// When the (latest) follow happened.
    async fn followed_at(&self) -> DateTime<Utc> {
        millis(self.0.followed_at_ms)
    }

    /// When this follow or unfollow happened.
    async fn occurred_at(&self) -> DateTime<Utc> {
        millis(self.0.occurred_at_ms)
    }

    /// The edge's version after it: higher is newer.
    async fn version(&self) -> Count {
        Count(self.0.version.max(0).unsigned_abs())
    }
}

fn millis(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// Live updates.
#[derive(Default)]
pub(crate) struct LiveSubscription;

#[Subscription]
impl LiveSubscription {
    /// The user's counters: first as they are now, then each time they
    /// change — at most one update per `KITH_LIVE_COUNTERS_INTERVAL_MS`
    /// (250 ms), changes in between coalesced into the next.
    async fn user_counters_changed(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Global id of the user.")] user_id: ID,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<CountersChanged>> + use<>>
    {
        let (app, user, slot) = start(ctx, &user_id).await?;
        let state = CountersState {
            receiver: app.live.subscribe(user),
            interval: Duration::from_millis(app.config.live.counters_interval_ms),
            app,
            user,
            last: None,
            _slot: slot,
        };
        Ok(futures_util::stream::unfold(
            state,
            |mut state| async move {
                let record = state.next_change().await?;
                let update = record.map(|record| CountersChanged {
                    user_id: ids::user_id(state.user),
                    counters: record.into(),
                });
                Some((update.map_err(|e| e.extend()), state))
            },
        ))
    }

    /// Follows and unfollows of the signed-in user's own account, as the
    /// projector applies them (`FORBIDDEN` for anyone else's: they tell when
    /// and how often someone followed and unfollowed). A subscription that
    /// falls far behind gets an `UNAVAILABLE` error and ends: re-query the
    /// list, then subscribe again.
    async fn follower_events(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Global id of the signed-in user's own account.")] user_id: ID,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<FollowerEvent>> + use<>>
    {
        let me = viewer(ctx).require().gql()?;
        if ids::decode_user(&user_id).gql()? != me {
            return Err(ApiError::Forbidden(
                "follower events are for the account's owner only",
            ))
            .gql();
        }
        let (app, user, slot) = start(ctx, &user_id).await?;
        let state = EventsState {
            receiver: app.live.subscribe(user),
            user,
            pending: VecDeque::new(),
            ended: false,
            _slot: slot,
        };
        Ok(futures_util::stream::unfold(
            state,
            |mut state| async move {
                let event = state.next_event().await?;
                Some((event.map(FollowerEvent).map_err(|e| e.extend()), state))
            },
        ))
    }
}

/// The checks every subscription makes: a signed-in viewer, a user that
/// exists (`NOT_FOUND` otherwise), a free slot on the connection.
async fn start(ctx: &Context<'_>, user_id: &ID) -> async_graphql::Result<(Arc<App>, UserId, Slot)> {
    viewer(ctx).require().gql()?;
    let user = ids::decode_user(user_id).gql()?;
    if load_visible(ctx, user).await?.is_none() {
        return Err(ApiError::NotFound("user")).gql();
    }
    Ok((app(ctx).clone(), user, slot(ctx)?))
}

/// One of the connection's subscription slots, held while the subscription runs.
pub(super) fn slot(ctx: &Context<'_>) -> async_graphql::Result<Slot> {
    match ctx.data_opt::<LiveConnection>() {
        Some(connection) => connection.take_slot().gql(),
        None => Err(ApiError::invalid(
            "subscriptions are served over WebSocket (graphql-transport-ws) at /graphql",
        ))
        .gql(),
    }
}

struct CountersState {
    app: Arc<App>,
    receiver: tokio::sync::broadcast::Receiver<Arc<LiveBatch>>,
    interval: Duration,
    user: UserId,
    last: Option<(CounterRecord, tokio::time::Instant)>,
    _slot: Slot,
}

impl CountersState {
    /// The counters when they differ from the last sent; `None` when the
    /// hub is gone (the process is stopping).
    async fn next_change(&mut self) -> Option<Result<CounterRecord, ApiError>> {
        loop {
            if let Some((_, sent_at)) = self.last {
                self.changed().await?;
                // Coalesce: whatever changes until then is read at once.
                tokio::time::sleep_until(sent_at + self.interval).await;
            }
            let record = match batch::load(&self.app, &[Read::Counters(self.user)]).await {
                Ok(answers) => match answers.get(&Read::Counters(self.user)) {
                    Some(Answer::Counters(record)) => *record,
                    _ => CounterRecord::default(),
                },
                Err(e) => return Some(Err(e)),
            };
            if self.last.is_some_and(|(last, _)| last == record) {
                continue;
            }
            self.last = Some((record, tokio::time::Instant::now()));
            return Some(Ok(record));
        }
    }

    /// Waits for a batch that set this user's counters (or for having
    /// missed some, which may have).
    async fn changed(&mut self) -> Option<()> {
        loop {
            match self.receiver.recv().await {
                Ok(batch) if batch.counters.contains(&self.user) => return Some(()),
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => return Some(()),
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

struct EventsState {
    receiver: tokio::sync::broadcast::Receiver<Arc<LiveBatch>>,
    user: UserId,
    pending: VecDeque<FollowChange>,
    ended: bool,
    _slot: Slot,
}

impl EventsState {
    async fn next_event(&mut self) -> Option<Result<FollowChange, ApiError>> {
        if self.ended {
            return None;
        }
        loop {
            if let Some(change) = self.pending.pop_front() {
                return Some(Ok(change));
            }
            match self.receiver.recv().await {
                Ok(batch) => self
                    .pending
                    .extend(batch.follows.iter().filter(|change| change.to == self.user)),
                Err(RecvError::Lagged(missed)) => {
                    self.ended = true;
                    return Some(Err(ApiError::Unavailable(anyhow::anyhow!(
                        "this subscription fell {missed} batches behind and missed events"
                    ))));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }
}
