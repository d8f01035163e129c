//! One Redis round trip for everything a level of a query reads from the
//! caches: counter records, relations (membership in cached following
//! lists) and list pages, in one pipeline of single-key commands and
//! scripts. Under Redis Cluster it splits per node, never across a slot
//! (each members script then asks one owner's list); on one server one
//! members script asks every list. What the caches cannot answer is then
//! read from PostgreSQL, one statement per kind; with warm caches, none
//! (unless this process failed to update a cache after a change it made).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{counters, pages, relations};
use crate::app::App;
use crate::cache;
use crate::cache::counters::{self as records, CounterRecord};
use crate::cache::lists::{self, Member, MembersCalls, Membership, PageMiss};
use crate::error::ApiError;
use crate::model::UserId;
use crate::paging::ListKey;
use crate::paging::{Page, PageRequest};
use crate::store::following::PairState;

/// One thing a request reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Read {
    /// A user's counters.
    Counters(UserId),
    /// How the first user relates to the second.
    Relation(UserId, UserId),
    /// A page of a list, if the list cache covers it.
    Page(ListKey, PageRequest),
}

/// The answer to one [`Read`].
#[derive(Clone, Debug)]
pub(crate) enum Answer {
    /// The counters.
    Counters(CounterRecord),
    /// The relation.
    Relation(PairState),
    /// The page, or why the cache could not serve it (`None`: Redis failed).
    Page(Result<Arc<Page>, Option<PageMiss>>),
}

/// Answers `reads`: one Redis round trip, then PostgreSQL for what the
/// caches could not tell (counters and relations; a page the cache cannot
/// serve is left to [`pages::complete`]).
pub(crate) async fn load(
    app: &Arc<App>,
    reads: &[Read],
) -> Result<HashMap<Read, Answer>, ApiError> {
    let mut users = Vec::new();
    let mut pairs = Vec::new();
    let mut page_reads = Vec::new();
    for read in reads {
        match *read {
            Read::Counters(user) => users.push(user),
            Read::Relation(a, b) => pairs.push((a, b)),
            Read::Page(list, request) => page_reads.push((list, request)),
        }
    }
    // Each direction of each pair is a lookup in the follower's following list.
    let mut lookups: BTreeMap<UserId, Vec<UserId>> = BTreeMap::new();
    for (a, b) in &pairs {
        for (from, to) in [(*a, *b), (*b, *a)] {
            let members = lookups.entry(from).or_default();
            if !members.contains(&to) {
                members.push(to);
            }
        }
    }

    // A user whose counter record this process failed to update after a
    // change it made is not asked: the record may still be the one from
    // before the change, whose version an intersection computed earlier is
    // kept under. Rebuilt from the truth (and written back, as it is
    // newer), like a missing one.
    let (users, mut missing): (Vec<UserId>, Vec<UserId>) = users
        .into_iter()
        .partition(|user| !app.read.counters_unsynced(*user));
    let mut pipe = redis::pipe();
    records::queue_load(&mut pipe, &app.keys, &users);
    // A list this process failed to update is not asked: PostgreSQL answers.
    let mut unknown = Vec::new();
    lookups.retain(|owner, members| {
        let synced = !app.read.unsynced_following.contains_key(owner);
        if !synced {
            unknown.extend(members.iter().map(|m| (*owner, *m)));
        }
        synced
    });
    let asks: Vec<(ListKey, &[UserId])> = lookups
        .iter()
        .map(|(owner, members)| (ListKey::Following(*owner), members.as_slice()))
        .collect();
    // On a cluster, one call per list: its keys share a slot.
    let members_calls = MembersCalls::queue(&mut pipe, &app.keys, &asks, !app.redis.is_cluster());
    for (list, request) in &page_reads {
        lists::queue_page(&mut pipe, &app.keys, *list, *request);
    }
    let replies = query(app, &pipe).await;
    let cache_answered = replies.is_some();
    let mut replies = replies.as_deref().map(|r| r.iter());
    let mut next = || replies.as_mut().and_then(|r| r.next());

    let mut out = HashMap::with_capacity(reads.len());
    let unsynced = missing.len();
    for user in &users {
        match next().and_then(records::parse) {
            Some(record) => {
                out.insert(Read::Counters(*user), Answer::Counters(record));
            }
            None => missing.push(*user),
        }
    }
    let mut known: HashMap<(UserId, UserId), Option<DateTime<Utc>>> = HashMap::new();
    let mut uncached = Vec::new();
    let memberships = members_calls.parse(&mut next);
    for ((owner, members), membership) in lookups.iter().zip(memberships) {
        let answers = match membership {
            Membership::Known(answers) => answers,
            Membership::NotCached => {
                if cache_answered {
                    uncached.push(ListKey::Following(*owner));
                }
                vec![Member::Unknown; members.len()]
            }
        };
        for (member, answer) in members.iter().zip(answers) {
            let pair = (*owner, *member);
            match answer {
                Member::In(ms) => {
                    known.insert(pair, DateTime::from_timestamp_millis(ms));
                }
                Member::Absent => {
                    known.insert(pair, None);
                }
                Member::Unknown => unknown.push(pair),
            }
        }
    }
    // Read from PostgreSQL below this time; filled together for the next.
    pages::start_fills(app, uncached);
    for (list, request) in &page_reads {
        let page = match next() {
            Some(reply) => lists::parse_page(reply, request.size())
                .map(Arc::new)
                .map_err(Some),
            None => Err(None),
        };
        out.insert(Read::Page(*list, *request), Answer::Page(page));
    }

    app.metrics.cache_lookup(
        "counter_record",
        true,
        (users.len() + unsynced - missing.len()) as u64,
    );
    app.metrics
        .cache_lookup("counter_record", false, missing.len() as u64);
    // Answered by the caches so far: hits; the rest goes to the truth.
    app.metrics
        .cache_lookup("relation", true, known.len() as u64);
    app.metrics
        .cache_lookup("relation", false, unknown.len() as u64);
    let (rebuilt, truth) = tokio::try_join!(
        counters::rebuild(app, &missing, counters::RoundTrips::Counted),
        relations::from_truth(app, &unknown)
    )?;
    for (user, record) in rebuilt {
        out.insert(Read::Counters(user), Answer::Counters(record));
    }
    for pair in unknown {
        known.insert(pair, truth.get(&pair).copied());
    }
    let follows = |from: UserId, to: UserId| known.get(&(from, to)).copied().flatten();
    for (a, b) in pairs {
        let state = PairState {
            a_follows_b: follows(a, b),
            b_follows_a: follows(b, a),
        };
        out.insert(Read::Relation(a, b), Answer::Relation(state));
    }
    if !users.is_empty() {
        crate::consistency::sampled::counters_read(app, &users);
    }
    Ok(out)
}

/// Runs the batch; `None` (logged) when Redis failed, so that everything
/// is read from PostgreSQL instead.
pub(crate) async fn query(app: &App, pipe: &redis::Pipeline) -> Option<Vec<redis::Value>> {
    if pipe.is_empty() {
        return Some(Vec::new());
    }
    let result = async {
        let mut redis = app.redis.get().await.map_err(|e| e.to_string())?;
        app.round_trips.redis();
        cache::query_with_scripts(&mut *redis, pipe, &lists::read_scripts())
            .await
            .map_err(|e| e.to_string())
    };
    match result.await {
        Ok(replies) => Some(replies),
        Err(error) => {
            tracing::warn!(%error, "caches unreadable; reading PostgreSQL");
            None
        }
    }
}
