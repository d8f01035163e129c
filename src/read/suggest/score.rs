//! Suggestion scoring, apart from its I/O: what [`super::compute`] read
//! goes in, ranked suggestions come out (steps 4–6 of the module's list).

use std::collections::{HashMap, HashSet};

use super::{KEPT, NAMED, ReasonKind, Suggestion};
use crate::model::UserId;
use crate::paging::Position;

/// Half-life of the recent half of a follow's weight, days.
const HALF_LIFE_DAYS: f64 = 180.0;

/// A sampled followee of the viewer whose follows count.
pub(super) struct Followee<'a> {
    /// The account.
    pub id: UserId,
    /// How many accounts it follows (its counter; what was read if none).
    pub followings: f64,
    /// Its newest follows read, newest first.
    pub members: &'a [Position],
    /// True when `members` is its whole list.
    pub complete: bool,
}

/// What the scoring reads.
pub(super) struct Inputs<'a> {
    viewer: UserId,
    /// The viewer's followees read, newest first.
    following: &'a [Position],
    /// Whom the viewer follows, of those read.
    followed: HashSet<UserId>,
    /// Whether the viewer's list was read whole and every followee sampled.
    following_whole: bool,
    /// The viewer's followers read, newest first.
    fans: &'a [Position],
    /// The sampled followees whose follows count.
    followees: Vec<Followee<'a>>,
    /// Never suggested: blocks either way, mutes, requests, dismissals.
    excluded: &'a HashSet<UserId>,
}

impl<'a> Inputs<'a> {
    pub(super) fn new(
        viewer: UserId,
        following: &'a [Position],
        following_whole: bool,
        fans: &'a [Position],
        followees: Vec<Followee<'a>>,
        excluded: &'a HashSet<UserId>,
    ) -> Self {
        Self {
            viewer,
            following,
            followed: following.iter().map(|p| p.user).collect(),
            following_whole,
            fans,
            followees,
            excluded,
        }
    }

    /// Whether `user` may never be suggested: the viewer, whom it follows,
    /// and the excluded.
    pub(super) fn ruled_out(&self, user: UserId) -> bool {
        user == self.viewer || self.followed.contains(&user) || self.excluded.contains(&user)
    }
}

/// A candidate while scoring.
#[derive(Default)]
struct Candidate {
    score: f64,
    follows_you: bool,
    /// How many followees read follow it.
    count: u32,
    /// The strongest of them: (contribution, followee), strongest first.
    top: Vec<(f64, UserId)>,
}

impl Candidate {
    /// Counts `followee`'s follow of the candidate, worth `contribution`.
    fn followed_by(&mut self, contribution: f64, followee: UserId) {
        self.score += contribution;
        self.count += 1;
        let stronger = |a: &(f64, UserId)| {
            a.0.total_cmp(&contribution)
                .then(followee.cmp(&a.1))
                .is_gt()
        };
        let at = self.top.iter().take_while(|a| stronger(a)).count();
        if at < NAMED {
            self.top.insert(at, (contribution, followee));
            self.top.truncate(NAMED);
        }
    }
}

/// How much a follow made at `at` counts, ages measured from `newest` (a
/// time of the database's clock, as follow times are): ½ + ½ × 2^(−age /
/// 180 days), so a recent follow counts up to twice an old one.
fn decay(newest: i64, at: i64) -> f64 {
    let days = (newest - at).max(0) as f64 / 86_400_000.0;
    0.5 + 0.5 * 0.5_f64.powf(days / HALF_LIFE_DAYS)
}

/// How much a followee following `followings` accounts counts: 1 / (1 +
/// ln(1 + followings / 100)), so a prolific follower counts less.
fn weight(followings: f64) -> f64 {
    1.0 / (1.0 + (1.0 + followings / 100.0).ln())
}

/// The best `2 × KEPT` candidates, best first (ties: smaller id first).
pub(super) fn rank(inputs: &Inputs<'_>) -> Vec<Suggestion> {
    let newest = inputs
        .followees
        .iter()
        .flat_map(|f| f.members.iter())
        .chain(inputs.following)
        .chain(inputs.fans)
        .map(|p| p.followed_at_ms)
        .max()
        .unwrap_or(0);
    let mut candidates: HashMap<UserId, Candidate> = HashMap::new();
    let mut every_list_whole = inputs.following_whole;
    for followee in &inputs.followees {
        every_list_whole &= followee.complete;
        let weight = weight(followee.followings);
        for member in followee.members {
            if inputs.ruled_out(member.user) {
                continue;
            }
            candidates
                .entry(member.user)
                .or_default()
                .followed_by(weight * decay(newest, member.followed_at_ms), followee.id);
        }
    }
    for fan in inputs.fans {
        if !inputs.ruled_out(fan.user) {
            let candidate = candidates.entry(fan.user).or_default();
            candidate.score += decay(newest, fan.followed_at_ms);
            candidate.follows_you = true;
        }
    }

    let mut ranked: Vec<(UserId, Candidate)> = candidates.into_iter().collect();
    let by_score = |a: &(UserId, Candidate), b: &(UserId, Candidate)| {
        b.1.score.total_cmp(&a.1.score).then(a.0.cmp(&b.0))
    };
    if ranked.len() > KEPT * 2 {
        ranked.select_nth_unstable_by(KEPT * 2, by_score);
        ranked.truncate(KEPT * 2);
    }
    ranked.sort_by(by_score);
    ranked
        .into_iter()
        .map(|(user, c)| Suggestion {
            user,
            score: c.score,
            kind: if c.follows_you {
                ReasonKind::FollowsYou
            } else {
                ReasonKind::FollowedByPeopleYouFollow
            },
            followed_by: c.top.iter().map(|(_, f)| *f).collect(),
            followed_by_count: c.count,
            exact: every_list_whole,
        })
        .collect()
}

/// Short of [`KEPT`], fills `out` up to `2 × KEPT` with `popular` accounts
/// (most followed first) not ruled out nor in `out` already.
pub(super) fn fill_with_popular(
    inputs: &Inputs<'_>,
    out: &mut Vec<Suggestion>,
    popular: &[UserId],
) {
    if out.len() >= KEPT {
        return;
    }
    let mut seen: HashSet<UserId> = out.iter().map(|s| s.user).collect();
    for user in popular {
        if out.len() >= KEPT * 2 {
            break;
        }
        if inputs.ruled_out(*user) || !seen.insert(*user) {
            continue;
        }
        out.push(Suggestion {
            user: *user,
            score: 0.0,
            kind: ReasonKind::Popular,
            followed_by: Vec::new(),
            followed_by_count: 0,
            exact: true,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_MS: i64 = 86_400_000;
    const NOW: i64 = 1_000 * DAY_MS;

    fn id(n: i64) -> UserId {
        UserId::new(n).expect("a positive id")
    }

    fn at(user: i64, days_ago: i64) -> Position {
        Position {
            followed_at_ms: NOW - days_ago * DAY_MS,
            user: id(user),
        }
    }

    fn followee(user: i64, followings: f64, members: &[Position]) -> Followee<'_> {
        Followee {
            id: id(user),
            followings,
            members,
            complete: true,
        }
    }

    fn users(out: &[Suggestion]) -> Vec<i64> {
        out.iter().map(|s| s.user.get()).collect()
    }

    /// The inputs of viewer 9 whose own list was read whole.
    fn inputs<'a>(
        following: &'a [Position],
        fans: &'a [Position],
        followees: Vec<Followee<'a>>,
        excluded: &'a HashSet<UserId>,
    ) -> Inputs<'a> {
        Inputs::new(id(9), following, true, fans, followees, excluded)
    }

    #[test]
    fn an_account_followed_by_more_followees_ranks_first() {
        let a = [at(100, 0), at(101, 0)];
        let b = [at(100, 0)];
        let following = [at(1, 0), at(2, 0)];
        let none = HashSet::new();
        let inputs = inputs(
            &following,
            &[],
            vec![followee(1, 10.0, &a), followee(2, 10.0, &b)],
            &none,
        );
        let out = rank(&inputs);
        assert_eq!(users(&out), [100, 101]);
        assert_eq!(out[0].followed_by_count, 2);
        assert_eq!(out[0].kind, ReasonKind::FollowedByPeopleYouFollow);
        assert!(out[0].exact);
    }

    #[test]
    fn a_prolific_follower_counts_less_and_is_named_after() {
        let modest = [at(100, 0)];
        let prolific = [at(100, 0), at(101, 0)];
        let following = [at(1, 0), at(2, 0)];
        let none = HashSet::new();
        let inputs = inputs(
            &following,
            &[],
            vec![followee(2, 5_000.0, &prolific), followee(1, 10.0, &modest)],
            &none,
        );
        let out = rank(&inputs);
        // 101 has only the prolific follower's weight; 100 has both.
        assert_eq!(users(&out), [100, 101]);
        assert!(out[1].score < weight(10.0));
        assert_eq!(out[0].followed_by, [id(1), id(2)], "strongest first");
        assert!((out[0].score - weight(10.0) - weight(5_000.0)).abs() < 1e-12);
    }

    #[test]
    fn a_recent_follow_counts_up_to_twice_an_old_one_and_never_nothing() {
        assert_eq!(decay(NOW, NOW), 1.0);
        assert!((decay(NOW, NOW - 180 * DAY_MS) - 0.75).abs() < 1e-12);
        assert!(decay(NOW, 0) > 0.5);
        let members = [at(100, 3_000), at(101, 0)];
        let following = [at(1, 0)];
        let none = HashSet::new();
        let inputs = inputs(&following, &[], vec![followee(1, 0.0, &members)], &none);
        assert_eq!(users(&rank(&inputs)), [101, 100]);
    }

    #[test]
    fn who_follows_the_viewer_scores_more_and_says_so() {
        let members = [at(100, 0), at(101, 0)];
        let fans = [at(101, 0)];
        let following = [at(1, 0)];
        let none = HashSet::new();
        let inputs = inputs(&following, &fans, vec![followee(1, 0.0, &members)], &none);
        let out = rank(&inputs);
        assert_eq!(users(&out), [101, 100]);
        assert_eq!(out[0].kind, ReasonKind::FollowsYou);
        assert!((out[0].score - 2.0).abs() < 1e-12);
    }

    #[test]
    fn the_viewer_its_followees_and_the_excluded_are_never_suggested() {
        let members = [at(9, 0), at(2, 0), at(100, 0), at(101, 0)];
        let fans = [at(102, 0), at(2, 0)];
        let following = [at(1, 0), at(2, 0)];
        let excluded: HashSet<UserId> = [id(101), id(102)].into();
        let inputs = inputs(
            &following,
            &fans,
            vec![followee(1, 0.0, &members)],
            &excluded,
        );
        let mut out = rank(&inputs);
        assert_eq!(users(&out), [100]);
        fill_with_popular(
            &inputs,
            &mut out,
            &[id(9), id(1), id(100), id(101), id(103)],
        );
        assert_eq!(users(&out), [100, 103]);
        assert_eq!(out[1].kind, ReasonKind::Popular);
    }

    #[test]
    fn counts_are_exact_only_when_every_list_was_read_whole() {
        let members = [at(100, 0)];
        let following = [at(1, 0)];
        let none = HashSet::new();
        let mut part = followee(1, 0.0, &members);
        part.complete = false;
        let inputs = inputs(&following, &[], vec![part], &none);
        assert!(!rank(&inputs)[0].exact);
        let inputs = Inputs::new(
            id(9),
            &following,
            false,
            &[],
            vec![followee(1, 0.0, &members)],
            &none,
        );
        assert!(!rank(&inputs)[0].exact);
    }

    #[test]
    fn ties_rank_the_smaller_id_first_and_at_most_twice_kept_are_ranked() {
        let members: Vec<Position> = (0..(KEPT as i64 * 3)).map(|i| at(1_000 - i, 0)).collect();
        let following = [at(1, 0)];
        let none = HashSet::new();
        let inputs = inputs(&following, &[], vec![followee(1, 0.0, &members)], &none);
        let out = rank(&inputs);
        assert_eq!(out.len(), KEPT * 2);
        let ids = users(&out);
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "ascending ids on equal scores"
        );
        assert_eq!(ids[0], 1_000 - KEPT as i64 * 3 + 1);
    }
}
