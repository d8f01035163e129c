//! One account's notify followers as a process holds them, and the
//! changes the notices carry.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

use crate::model::{IdHasher, UserId};
use crate::paging::{Page, PageRequest, Position};

/// One account's notify followers, by follow time and by follower.
#[derive(Default)]
pub(super) struct Members {
    /// Oldest first: `(followed_at_ms, follower)`.
    pub(super) order: BTreeSet<(i64, UserId)>,
    at: HashMap<UserId, i64, IdHasher>,
}

impl Members {
    /// The pair is now `member` (or not), followed at `at_ms`.
    pub(super) fn apply(&mut self, follower: UserId, member: bool, at_ms: i64) {
        if let Some(old) = self.at.remove(&follower) {
            self.order.remove(&(old, follower));
        }
        if member {
            self.at.insert(follower, at_ms);
            self.order.insert((at_ms, follower));
        }
    }

    /// The page `request` asks, newest first, as [`crate::paging::page_of`]
    /// would cut it from the whole list.
    pub(super) fn page(&self, request: PageRequest) -> Page {
        let key = |p: &Position| (p.followed_at_ms, p.user);
        let position = |&(followed_at_ms, user): &(i64, UserId)| Position {
            followed_at_ms,
            user,
        };
        let cut = |mut items: Vec<Position>, n: usize| {
            let more = items.len() > n;
            items.truncate(n);
            (items, more)
        };
        match request {
            PageRequest::After(cursor, n) => {
                let older: Vec<Position> = match cursor {
                    Some(c) => self
                        .order
                        .range(..key(&c))
                        .rev()
                        .take(n + 1)
                        .map(position)
                        .collect(),
                    None => self.order.iter().rev().take(n + 1).map(position).collect(),
                };
                let (items, more) = cut(older, n);
                let other = cursor.is_some_and(|c| self.order.range(key(&c)..).next().is_some());
                Page { items, more, other }
            }
            PageRequest::Before(cursor, n) => {
                let newer: Vec<Position> = match cursor {
                    Some(c) => self
                        .order
                        .range((Bound::Excluded(key(&c)), Bound::Unbounded))
                        .take(n + 1)
                        .map(position)
                        .collect(),
                    None => self.order.iter().take(n + 1).map(position).collect(),
                };
                let (mut items, more) = cut(newer, n);
                items.reverse();
                let other = cursor.is_some_and(|c| self.order.range(..=key(&c)).next().is_some());
                Page { items, more, other }
            }
            PageRequest::Offset(offset, n) => {
                let from: Vec<Position> = self
                    .order
                    .iter()
                    .rev()
                    .skip(offset)
                    .take(n + 1)
                    .map(position)
                    .collect();
                let (items, more) = cut(from, n);
                Page {
                    items,
                    more,
                    other: offset > 0 && !self.order.is_empty(),
                }
            }
        }
    }
}

/// One change a notice carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Change {
    pub(super) account: UserId,
    pub(super) follower: UserId,
    pub(super) member: bool,
    pub(super) at_ms: i64,
}

impl Change {
    /// `account,follower,member,followed_at_ms`.
    pub(super) fn parse(payload: &str) -> Option<Self> {
        let mut parts = payload.split(',');
        let mut id = || parts.next()?.trim().parse::<i64>().ok();
        let (account, follower, member, at_ms) = (id()?, id()?, id()?, id()?);
        Some(Self {
            account: UserId::new(account)?,
            follower: UserId::new(follower)?,
            member: member == 1,
            at_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paging::page_of;

    fn id(n: i64) -> UserId {
        UserId::new(n).unwrap()
    }

    #[test]
    fn pages_are_cut_as_from_the_whole_list() {
        let mut members = Members::default();
        for n in 1..=9 {
            members.apply(id(n), true, 1000 + (n / 2));
        }
        members.apply(id(4), false, 0);
        members.apply(id(7), true, 5000);
        let whole: Vec<Position> = members
            .order
            .iter()
            .rev()
            .map(|&(followed_at_ms, user)| Position {
                followed_at_ms,
                user,
            })
            .collect();
        assert_eq!(whole.len(), 8);
        assert_eq!(whole[0].user, id(7));
        let mut requests = vec![];
        for n in [1, 3, 8, 20] {
            requests.push(PageRequest::After(None, n));
            requests.push(PageRequest::Before(None, n));
            for offset in [0, 2, 7, 9] {
                requests.push(PageRequest::Offset(offset, n));
            }
            for c in &whole {
                requests.push(PageRequest::After(Some(*c), n));
                requests.push(PageRequest::Before(Some(*c), n));
            }
            // A cursor whose member has left the list since.
            let gone = Position {
                followed_at_ms: 1002,
                user: id(4),
            };
            requests.push(PageRequest::After(Some(gone), n));
            requests.push(PageRequest::Before(Some(gone), n));
        }
        for request in requests {
            assert_eq!(
                members.page(request),
                page_of(&whole, request),
                "{request:?}"
            );
        }
    }

    #[test]
    fn a_notice_says_what_the_pair_is_now() {
        assert_eq!(
            Change::parse("12,34,1,1700000000123"),
            Some(Change {
                account: id(12),
                follower: id(34),
                member: true,
                at_ms: 1_700_000_000_123,
            })
        );
        assert_eq!(Change::parse("12,34,0,5").map(|c| c.member), Some(false));
        assert_eq!(Change::parse("12,34"), None);
        assert_eq!(Change::parse("*"), None);
        let mut members = Members::default();
        members.apply(id(1), true, 10);
        members.apply(id(1), true, 10);
        members.apply(id(1), true, 20);
        assert_eq!(members.order.len(), 1);
        members.apply(id(1), false, 20);
        members.apply(id(1), false, 20);
        assert!(members.order.is_empty() && members.at.is_empty());
    }
}
