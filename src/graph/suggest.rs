//! `User.suggestedFollows` and `dismissSuggestion`: accounts the viewer may
//! want to follow, each with its reason ([`crate::read::suggest`]).

use async_graphql::{Context, Enum, ID, InputObject, Object, SimpleObject};

use super::connection::PageInfo;
use super::count::{BoundedCount, Count};
use super::user::UserNode;
use super::{app, ids, page_args, viewer};
use crate::error::{ApiError, GraphqlResultExt};
use crate::model::{User, UserId, UserStatus};
use crate::read::boundaries;
use crate::read::suggest::{self, ReasonKind, Suggestion};

/// Why an account is suggested.
#[derive(Enum, Copy, Clone, Eq, PartialEq)]
pub(crate) enum SuggestionReasonKind {
    /// Accounts the viewer follows follow it (`followedBy`).
    FollowedByPeopleYouFollow,
    /// It follows the viewer, who does not follow it back.
    FollowsYou,
    /// One of the most followed accounts (for a viewer who follows few).
    Popular,
}

/// The reason of one suggestion.
#[derive(SimpleObject)]
pub(crate) struct SuggestionReason {
    /// The strongest reason.
    pub kind: SuggestionReasonKind,
    /// Up to three accounts the viewer follows that follow the suggestion
    /// ("followed by A, B and 12 others"); never an account whose lists are
    /// hidden.
    pub followed_by: Vec<UserNode>,
    /// How many accounts the viewer follows follow it — among those read
    /// (`exact: false` when not every followee was read in full).
    pub followed_by_count: BoundedCount,
}

/// One suggestion.
#[derive(SimpleObject)]
#[graphql(shareable)]
pub(crate) struct SuggestionEdge {
    /// Where the next page starts.
    pub cursor: String,
    /// The suggested account.
    pub node: UserNode,
    /// Its score; the list is in descending order of it.
    pub score: f64,
    /// Why it is suggested.
    pub reason: SuggestionReason,
}

/// Suggestions, best first.
#[derive(SimpleObject)]
#[graphql(shareable)]
pub(crate) struct SuggestionConnection {
    /// The suggestions of this page.
    pub edges: Vec<SuggestionEdge>,
    /// Paging.
    pub page_info: PageInfo,
    /// Suggestions kept for the viewer (at most 100).
    pub total_count: i32,
}

/// The page of `owner`'s suggestions after `after`, for the viewer.
pub(crate) async fn resolve(
    ctx: &Context<'_>,
    owner: UserId,
    first: Option<i32>,
    after: Option<String>,
) -> async_graphql::Result<SuggestionConnection> {
    let me = viewer(ctx).require().gql()?;
    if me != owner {
        return Err(ApiError::Forbidden("suggestions are the account's own")).gql();
    }
    let n = page_args::first_size(first).gql()?;
    let start = match after {
        None => 0,
        Some(cursor) => cursor
            .strip_prefix("s:")
            .and_then(|i| i.parse::<usize>().ok())
            .and_then(|i| i.checked_add(1))
            .ok_or(ApiError::BadCursor)
            .gql()?,
    };
    let app = app(ctx);
    let kept = suggest::for_viewer(app, me).await.gql()?;
    // What was kept is checked again as it is read: a block either way, a
    // mute, a request or an account no longer active since the list was
    // computed leaves it out at once; a followee that hides its lists now
    // is no longer named.
    let mut wanted: Vec<UserId> = Vec::new();
    for s in kept.iter() {
        wanted.push(s.user);
        wanted.extend(&s.followed_by);
    }
    wanted.sort_unstable();
    wanted.dedup();
    let users: Vec<User> = app.read.users().by_ids(&app.pg, &wanted).await.gql()?;
    let boundaries = boundaries::sets(app, &[me]).await.gql()?;
    let mine = boundaries.get(&me);
    let clear = |id: UserId| mine.is_none_or(|b| !b.separates(id));
    let user = |id: UserId| {
        users
            .iter()
            .find(|u| {
                u.id == id && u.status == UserStatus::Active && u.moved_to.is_none() && clear(id)
            })
            .cloned()
    };
    let shown: Vec<(&Suggestion, User)> = kept
        .iter()
        .filter(|s| mine.is_none_or(|b| !b.mutes(s.user) && !b.requested.contains(&s.user)))
        .filter_map(|s| Some((s, user(s.user)?)))
        .collect();
    let edges: Vec<SuggestionEdge> = shown
        .iter()
        .enumerate()
        .skip(start)
        .take(n)
        .map(|(i, (s, node))| SuggestionEdge {
            cursor: format!("s:{i}"),
            node: UserNode(node.clone()),
            score: s.score,
            reason: SuggestionReason {
                kind: match s.kind {
                    ReasonKind::FollowedByPeopleYouFollow => {
                        SuggestionReasonKind::FollowedByPeopleYouFollow
                    }
                    ReasonKind::FollowsYou => SuggestionReasonKind::FollowsYou,
                    ReasonKind::Popular => SuggestionReasonKind::Popular,
                },
                followed_by: s
                    .followed_by
                    .iter()
                    .filter_map(|f| user(*f))
                    .filter(|u| !u.hides_collections)
                    .map(UserNode)
                    .collect(),
                followed_by_count: BoundedCount {
                    count: Count(u64::from(s.followed_by_count)),
                    exact: s.exact,
                },
            },
        })
        .collect();
    let last = start + edges.len();
    Ok(SuggestionConnection {
        page_info: PageInfo {
            has_next_page: last < shown.len(),
            has_previous_page: start > 0,
            start_cursor: edges.first().map(|e| e.cursor.clone()),
            end_cursor: edges.last().map(|e| e.cursor.clone()),
        },
        edges,
        total_count: shown.len() as i32,
    })
}

/// Input of `dismissSuggestion`.
#[derive(InputObject)]
pub(crate) struct DismissSuggestionInput {
    /// Global id of the account not to suggest.
    pub user_id: ID,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Result of `dismissSuggestion`.
#[derive(SimpleObject)]
pub(crate) struct DismissSuggestionPayload {
    /// The account left out.
    pub user_id: ID,
    /// The input's `clientMutationId`.
    pub client_mutation_id: Option<String>,
}

/// `dismissSuggestion`.
#[derive(Default)]
pub(crate) struct SuggestionMutation;

#[Object]
impl SuggestionMutation {
    /// Leaves an account out of the viewer's suggestions for
    /// `KITH_SUGGESTION_DISMISS_SECS` (90 days); the kept suggestions are
    /// computed again. Takes a rate-limit token.
    async fn dismiss_suggestion(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: DismissSuggestionInput,
    ) -> async_graphql::Result<DismissSuggestionPayload> {
        let me = viewer(ctx).require().gql()?;
        let target = ids::decode_user(&input.user_id).gql()?;
        crate::write::suggestions::dismiss(app(ctx), me, target)
            .await
            .gql()?;
        Ok(DismissSuggestionPayload {
            user_id: input.user_id,
            client_mutation_id: input.client_mutation_id,
        })
    }
}
