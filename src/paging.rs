//! Lists and their pages, as every layer sees them: which list
//! ([`ListKey`]), a position in it ([`Position`]), how a page is chosen
//! ([`PageRequest`]) and what it holds ([`Page`]).
//!
//! Every list is ordered newest first, ties broken by the larger user id,
//! in PostgreSQL (keyset queries), Redis (`lua/list_page.lua`) and memory
//! alike. [`page_of`] is the reference meaning of a page: the in-memory
//! paths (intersections, the hot lists) use it, and the paging property
//! test holds PostgreSQL and Redis to it.

use crate::model::UserId;

/// One user's list: whom they follow, or who follows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ListKey {
    /// Whom the user follows (`uf:flws:{uid}`), from the truth table.
    Following(UserId),
    /// Who follows the user (`uf:fans:{uid}`), from the projection.
    Followers(UserId),
}

impl ListKey {
    /// Whose list it is.
    pub fn owner(self) -> UserId {
        match self {
            Self::Following(owner) | Self::Followers(owner) => owner,
        }
    }
}

/// A list only its owner (or a service granted its scope) reads, served
/// from PostgreSQL by keyset: the viewer's own blocks, mutes, follow
/// requests and close friends, newest first by when each was made; and an
/// account's notify followers, which services read (held in process too,
/// [`crate::read::notify`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PrivateList {
    /// Whom the user blocks.
    Blocking(UserId),
    /// Whom the user mutes (mutes past their end left out).
    Muting(UserId),
    /// Who asked to follow the user and waits.
    FollowRequests(UserId),
    /// Whom the user asked to follow and waits for.
    SentFollowRequests(UserId),
    /// Whom the user lists among its close friends.
    CloseFriends(UserId),
    /// Who follows the user with `notify` on (services only).
    NotifyFollowers(UserId),
}

impl PrivateList {
    /// Whose list it is.
    pub(crate) fn owner(self) -> UserId {
        match self {
            Self::Blocking(owner)
            | Self::Muting(owner)
            | Self::FollowRequests(owner)
            | Self::SentFollowRequests(owner)
            | Self::CloseFriends(owner)
            | Self::NotifyFollowers(owner) => owner,
        }
    }
}

/// A position in a list: an edge's follow time and the other user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Position {
    /// Follow time, ms.
    pub followed_at_ms: i64,
    /// The member.
    pub user: UserId,
}

/// How a page is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PageRequest {
    /// The `limit` edges after (older than) the cursor, or the newest.
    After(Option<Position>, usize),
    /// The `limit` edges before (newer than) the cursor, or the oldest.
    Before(Option<Position>, usize),
    /// The `limit` edges from rank `offset` (0 = newest).
    Offset(usize, usize),
}

impl PageRequest {
    /// How many edges the page holds at most.
    pub fn size(self) -> usize {
        match self {
            Self::After(_, n) | Self::Before(_, n) | Self::Offset(_, n) => n,
        }
    }
}

/// One page, newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Page {
    /// The edges of the page.
    pub items: Vec<Position>,
    /// Edges exist beyond the page in the paging direction.
    pub more: bool,
    /// Edges exist on the other side of the cursor (or before the offset).
    pub other: bool,
}

/// The page `request` asks of `items` (newest first), with the same
/// meaning of `more` and `other` as a list page.
pub fn page_of(items: &[Position], request: PageRequest) -> Page {
    let key = |p: &Position| (p.followed_at_ms, p.user);
    match request {
        PageRequest::After(cursor, n) => {
            let start = cursor.map_or(0, |c| items.partition_point(|p| key(p) >= key(&c)));
            let end = (start + n).min(items.len());
            Page {
                items: items[start..end].to_vec(),
                more: end < items.len(),
                other: start > 0,
            }
        }
        PageRequest::Before(cursor, n) => {
            let end = cursor.map_or(items.len(), |c| items.partition_point(|p| key(p) > key(&c)));
            let start = end.saturating_sub(n);
            Page {
                items: items[start..end].to_vec(),
                more: start > 0,
                other: end < items.len(),
            }
        }
        PageRequest::Offset(offset, n) => {
            let start = offset.min(items.len());
            let end = (start + n).min(items.len());
            Page {
                items: items[start..end].to_vec(),
                more: end < items.len(),
                other: start > 0,
            }
        }
    }
}

/// The page `request` asks of a list whose newest edges are `head` (a page
/// from the top: all of the list unless `head.more`), when it lies within
/// the head; `None` when it could reach past it. The hot lists serve
/// their first pages this way.
pub fn page_of_head(head: &Page, request: PageRequest) -> Option<Page> {
    let mut page = page_of(&head.items, request);
    if !head.more {
        return Some(page);
    }
    let len = head.items.len();
    let key = |p: &Position| (p.followed_at_ms, p.user);
    let within = match request {
        PageRequest::After(cursor, n) => {
            cursor.map_or(0, |c| head.items.partition_point(|p| key(p) >= key(&c))) + n <= len
        }
        PageRequest::Before(cursor, _) => {
            cursor.is_some_and(|c| head.items.partition_point(|p| key(p) > key(&c)) < len)
        }
        PageRequest::Offset(offset, n) => offset + n <= len,
    };
    if !within {
        return None;
    }
    match request {
        PageRequest::After(..) | PageRequest::Offset(..) => page.more = true,
        PageRequest::Before(..) => page.other = true,
    }
    Some(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64, user: i64) -> Position {
        Position {
            followed_at_ms: ms,
            user: UserId::new(user).unwrap(),
        }
    }

    #[test]
    fn pages_of_a_sorted_list_never_skip_or_repeat() {
        // Newest first; ties broken by the larger id first.
        let items = vec![at(9, 1), at(7, 5), at(7, 3), at(4, 2), at(1, 8)];
        let first = page_of(&items, PageRequest::After(None, 2));
        assert_eq!(first.items, items[..2]);
        assert!(first.more && !first.other);
        let second = page_of(&items, PageRequest::After(Some(items[1]), 2));
        assert_eq!(second.items, items[2..4]);
        assert!(second.more && second.other);
        let last = page_of(&items, PageRequest::After(Some(items[3]), 2));
        assert_eq!(last.items, items[4..]);
        assert!(!last.more && last.other);

        let back = page_of(&items, PageRequest::Before(Some(items[2]), 5));
        assert_eq!(back.items, items[..2]);
        assert!(!back.more && back.other);
        let oldest = page_of(&items, PageRequest::Before(None, 2));
        assert_eq!(oldest.items, items[3..]);
        assert!(oldest.more && !oldest.other);

        // A cursor whose edge left the list still marks the same place.
        let gone = at(7, 4);
        let after_gone = page_of(&items, PageRequest::After(Some(gone), 1));
        assert_eq!(after_gone.items, vec![items[2]]);
        let before_gone = page_of(&items, PageRequest::Before(Some(gone), 1));
        assert_eq!(before_gone.items, vec![items[1]]);
    }

    #[test]
    fn a_head_answers_what_lies_within_it_as_the_whole_list_would() {
        let list = vec![at(9, 1), at(7, 5), at(7, 3), at(4, 2), at(1, 8)];
        let head = page_of(&list, PageRequest::After(None, 3));
        let requests = [
            PageRequest::After(None, 2),
            PageRequest::After(None, 3),
            PageRequest::After(Some(list[0]), 2),
            PageRequest::Before(Some(list[2]), 2),
            PageRequest::Offset(1, 2),
            PageRequest::Offset(0, 0),
        ];
        for request in requests {
            assert_eq!(
                page_of_head(&head, request),
                Some(page_of(&list, request)),
                "{request:?}"
            );
        }
        for beyond in [
            PageRequest::After(None, 4),
            PageRequest::After(Some(list[1]), 2),
            PageRequest::Before(None, 1),
            PageRequest::Offset(2, 2),
        ] {
            assert_eq!(page_of_head(&head, beyond), None, "{beyond:?}");
        }
        let whole = page_of(&list, PageRequest::After(None, 10));
        assert_eq!(
            page_of_head(&whole, PageRequest::Before(None, 2)),
            Some(page_of(&list, PageRequest::Before(None, 2)))
        );
    }
}
