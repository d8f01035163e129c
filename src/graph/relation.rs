//! `type Relationship`: how one user relates to another.

use async_graphql::{ComplexObject, Context, ErrorExtensions as _, SimpleObject};
use chrono::{DateTime, Utc};

use super::count::BoundedCount;
use super::loaders::Loaders;
use crate::error::GraphqlResultExt;
use crate::model::{Boundaries, FollowOptions, UserId};
use crate::store::following::PairState;

/// Complexity of `knownFollowersCount`: a walk of up to 1,000 edges and as
/// many probes, each row charged as an `offset` charges its rows.
pub(crate) const KNOWN_FOLLOWERS_COUNT_COST: usize =
    2 * super::loaders::KNOWN_FOLLOWERS_COUNT_WALK / super::page_args::OFFSET_ROWS_PER_UNIT;

/// What a follower asks of one follow. Only the follower reads them.
#[derive(SimpleObject, Clone, Debug)]
#[graphql(name = "FollowOptions")]
pub(crate) struct FollowOptionsNode {
    /// Be told when the account posts (Mastodon's `notify`).
    pub notify: bool,
    /// See the account's reposts in the timeline (Mastodon's `reblogs`).
    pub show_reposts: bool,
    /// Only the account's posts in these languages (ISO 639 codes); null:
    /// every language.
    pub languages: Option<Vec<String>>,
}

impl From<FollowOptions> for FollowOptionsNode {
    fn from(options: FollowOptions) -> Self {
        Self {
            notify: options.notify,
            show_reposts: options.show_reposts,
            languages: options.languages,
        }
    }
}

/// How a user (the subject) relates to another user (the other).
#[derive(Clone, Copy, Debug, SimpleObject)]
#[graphql(complex)]
pub(crate) struct Relationship {
    /// (subject, other).
    #[graphql(skip)]
    pub pair: (UserId, UserId),
    /// The subject follows the other user.
    pub following: bool,
    /// The other user follows the subject.
    pub followed_by: bool,
    /// Both follow each other.
    pub mutual: bool,
    /// When the subject followed the other user, if it does.
    pub followed_at: Option<DateTime<Utc>>,
    /// When the other user followed the subject, if it does.
    pub followed_by_at: Option<DateTime<Utc>>,
}

#[ComplexObject]
impl Relationship {
    /// How many followers of the other user the subject follows — on
    /// `viewerRelation`, the "followers you know" of a profile. Exact while
    /// the smaller of the two lists (whom the subject follows, who follows
    /// the other) has at most 1,000 edges; past that, only those 1,000 are
    /// looked at and the count is a lower bound (`exact: false`). Computed
    /// counts are kept in process for a while, and computed anew once
    /// either user's counters move: at once for a follow or unfollow by the
    /// subject, once the pipeline has applied it for a new follower of the
    /// other user. When either user hides its lists from the viewer: 0,
    /// not exact.
    #[graphql(complexity = "KNOWN_FOLLOWERS_COUNT_COST")]
    async fn known_followers_count(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<BoundedCount> {
        let (subject, other) = self.pair;
        let loaders = ctx.data_unchecked::<Loaders>();
        // The count is of members of both users' lists: nothing is told of
        // a list hidden from the viewer ("at least 0").
        let me = super::viewer(ctx).optional().gql()?;
        let users = loaders
            .users(&[subject, other])
            .await
            .map_err(|e| e.as_ref().extend())?;
        let hidden = users
            .values()
            .any(|u| u.hides_collections && me != Some(u.id));
        if hidden {
            return Ok(BoundedCount {
                count: super::count::Count(0),
                exact: false,
            });
        }
        loaders
            .known_followers_count(subject, other)
            .await
            .map_err(|e| e.as_ref().extend())
    }

    /// The subject blocks the other user. Told only on the signed-in
    /// viewer's own relations (the subject is the viewer); null elsewhere,
    /// so nobody learns who blocks whom.
    async fn blocking(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<bool>> {
        Ok(self
            .viewer_boundaries(ctx)
            .await?
            .map(|set| set.blocking.contains(&self.pair.1)))
    }

    /// The other user blocks the subject; told only as `blocking` is.
    async fn blocked_by(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<bool>> {
        Ok(self
            .viewer_boundaries(ctx)
            .await?
            .map(|set| set.blocked_by.contains(&self.pair.1)))
    }

    /// The subject asked to follow the other (locked) user and waits;
    /// told only as `blocking` is.
    async fn requested(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<bool>> {
        Ok(self
            .viewer_boundaries(ctx)
            .await?
            .map(|set| set.requested.contains(&self.pair.1)))
    }

    /// The other user asked to follow the subject and waits; told only as
    /// `blocking` is.
    async fn requested_by(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<bool>> {
        Ok(self
            .viewer_boundaries(ctx)
            .await?
            .map(|set| set.requested_by.contains(&self.pair.1)))
    }

    /// The subject mutes the other user (a mute past its end is none);
    /// told only as `blocking` is.
    async fn muting(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<bool>> {
        Ok(self
            .viewer_boundaries(ctx)
            .await?
            .map(|set| set.mutes(self.pair.1)))
    }

    /// The subject's options for its follow of the other user (null when
    /// it does not follow); told only as `blocking` is.
    async fn follow_options(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<FollowOptionsNode>> {
        let Some(followed_at) = self.followed_at else {
            return Ok(None);
        };
        Ok(self.viewer_boundaries(ctx).await?.map(|set| {
            set.options_for(self.pair.1, followed_at.timestamp_millis())
                .into()
        }))
    }

    /// The subject lists the other user among its close friends; told
    /// only as `blocking` is.
    async fn close_friend(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<bool>> {
        Ok(self
            .viewer_boundaries(ctx)
            .await?
            .map(|set| set.close_friends.contains(&self.pair.1)))
    }

    /// The other user lists the subject among its close friends: what it
    /// shares with close friends, the subject may see. Told only as
    /// `blocking` is, so an account learns its own place in others' lists
    /// and nobody else's.
    async fn in_their_close_friends(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<bool>> {
        Ok(self
            .viewer_boundaries(ctx)
            .await?
            .map(|set| set.close_friend_of.contains(&self.pair.1)))
    }
}

impl Relationship {
    /// The viewer's boundaries, when the subject is the signed-in viewer.
    async fn viewer_boundaries(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<std::sync::Arc<Boundaries>>> {
        let viewer = super::viewer(ctx).optional().gql()?;
        if viewer != Some(self.pair.0) {
            return Ok(None);
        }
        ctx.data_unchecked::<Loaders>()
            .boundaries(self.pair.0)
            .await
            .map(Some)
            .map_err(|e| e.as_ref().extend())
    }

    /// How `subject` relates to `other`, from their pair's state.
    pub(crate) fn between(subject: UserId, other: UserId, state: PairState) -> Self {
        // Follow times are shown to the millisecond wherever they are read
        // from (the list caches keep milliseconds, PostgreSQL microseconds).
        let ms = |t: Option<DateTime<Utc>>| {
            t.and_then(|t| DateTime::from_timestamp_millis(t.timestamp_millis()))
        };
        let state = PairState {
            a_follows_b: ms(state.a_follows_b),
            b_follows_a: ms(state.b_follows_a),
        };
        Self {
            pair: (subject, other),
            following: state.a_follows_b.is_some(),
            followed_by: state.b_follows_a.is_some(),
            mutual: state.a_follows_b.is_some() && state.b_follows_a.is_some(),
            followed_at: state.a_follows_b,
            followed_by_at: state.b_follows_a,
        }
    }
}
