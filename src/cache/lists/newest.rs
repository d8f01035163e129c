//! The newest members of many cached lists, read with plain commands.
//!
//! A walk reads the head of many lists (the intersections' and the
//! suggestions' walks: a hundred lists of two hundred members). The page
//! script serves any page, but it copies every member it reads into Lua and
//! back, which costs Redis about twice a plain `ZRANGE` of the same members;
//! the head of a list needs none of the script's cursor logic. So each list
//! is read as `GET marker`, `ZRANGE … REV WITHSCORES`, `GET marker`, in one
//! pipeline (one list's keys share a slot, so on a Redis Cluster its three
//! commands go to one node, in order).
//!
//! The two reads of the marker stand in for a script's atomicity: the list
//! is taken as cached only when both say so and agree. Everything that
//! drops or refills a list changes its marker — a fill claims it
//! (`filling:…`) before it touches the ZSet and sets the coverage after —
//! and the ZSet expires exactly when its marker does (each script sets both
//! deadlines from one clock reading), so a ZSet read between two equal
//! markers is the ZSet those markers describe.

use super::{RedisKeys, member_bytes};
use crate::paging::{ListKey, Page, Position};

/// Queues the reads of the newest `limit` members of `list` on `pipe`:
/// three replies, read by [`parse_newest`].
pub(crate) fn queue_newest(
    pipe: &mut redis::Pipeline,
    keys: &RedisKeys,
    list: ListKey,
    limit: usize,
) {
    let [zset, _, coverage] = keys.list(list);
    pipe.cmd("GET").arg(&coverage);
    // One more than asked, to learn whether there are more.
    pipe.cmd("ZRANGE")
        .arg(&zset)
        .arg(0)
        .arg(limit)
        .arg("REV")
        .arg("WITHSCORES");
    pipe.cmd("GET").arg(&coverage);
}

/// The replies a list's reads take (see [`queue_newest`]).
pub(crate) const NEWEST_REPLIES: usize = 3;

/// The newest `limit` members of a list from the three replies of
/// [`queue_newest`]: a page as the page script serves `After(None, limit)`,
/// or why the cache cannot serve it.
pub(crate) fn parse_newest(
    replies: &[redis::Value],
    limit: usize,
) -> Result<Page, super::PageMiss> {
    use super::PageMiss::{NotCached, NotCovered};
    let [before, rows, after] = replies else {
        return Err(NotCached);
    };
    let marker = match (before, after) {
        (redis::Value::BulkString(a), redis::Value::BulkString(b)) if a == b => a.as_slice(),
        _ => return Err(NotCached),
    };
    if marker.starts_with(b"filling:") {
        return Err(NotCached);
    }
    let bound = if marker == b"all" {
        None
    } else {
        Some(parse_bound(marker).ok_or(NotCached)?)
    };
    let redis::Value::Array(rows) = rows else {
        return Err(NotCached);
    };
    // RESP2 answers member, score, member, …; RESP3 [member, score] pairs.
    let pairs: Vec<&[redis::Value]> = match rows.first() {
        Some(redis::Value::Array(_)) => rows
            .iter()
            .map(|pair| match pair {
                redis::Value::Array(pair) => pair.as_slice(),
                _ => &[],
            })
            .collect(),
        _ => rows.chunks_exact(2).collect(),
    };
    let want = limit + 1;
    let mut items = Vec::with_capacity(want.min(pairs.len()));
    for pair in pairs {
        let [member, score_value] = pair else {
            return Err(NotCached);
        };
        let (Some(user), Some(score)) = (member_bytes(member), score(score_value)) else {
            return Err(NotCached);
        };
        let position = Position {
            followed_at_ms: score,
            user,
        };
        if bound.is_some_and(|b| older(position, b)) {
            return Err(NotCovered);
        }
        items.push(position);
    }
    // A list cached only in part that ends before `want` goes on uncached.
    if items.len() < want && bound.is_some() {
        return Err(NotCovered);
    }
    let more = items.len() >= want;
    items.truncate(limit);
    Ok(Page {
        items,
        more,
        other: false,
    })
}

/// `a` comes after `b` newest first (ties: the larger member first).
fn older(a: Position, b: Position) -> bool {
    (a.followed_at_ms, a.user) < (b.followed_at_ms, b.user)
}

/// The oldest position a coverage marker `<score>:<member>` names.
fn parse_bound(marker: &[u8]) -> Option<Position> {
    let text = std::str::from_utf8(marker).ok()?;
    let (score, member) = text.split_once(':')?;
    Some(Position {
        followed_at_ms: parse_score(score)?,
        user: super::parse_member(member)?,
    })
}

/// A ZSet score as the follow time in ms it holds.
fn score(value: &redis::Value) -> Option<i64> {
    match value {
        redis::Value::BulkString(bytes) => parse_score(std::str::from_utf8(bytes).ok()?),
        redis::Value::Double(d) => Some(*d as i64),
        redis::Value::Int(i) => Some(*i),
        _ => None,
    }
}

/// A score's text: an integer, or a float for scores Redis prints so.
fn parse_score(text: &str) -> Option<i64> {
    text.parse::<i64>()
        .ok()
        .or_else(|| text.parse::<f64>().ok().map(|f| f as i64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::UserId;
    use redis::Value;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn rows(items: &[(i64, i64)]) -> Value {
        Value::Array(
            items
                .iter()
                .flat_map(|(score, user)| [bulk(&format!("{user:019}")), bulk(&score.to_string())])
                .collect(),
        )
    }

    fn at(score: i64, user: i64) -> Position {
        Position {
            followed_at_ms: score,
            user: UserId::new(user).unwrap(),
        }
    }

    #[test]
    fn a_whole_list_serves_its_head() {
        let page = parse_newest(
            &[bulk("all"), rows(&[(30, 3), (20, 2), (10, 1)]), bulk("all")],
            2,
        )
        .unwrap();
        assert_eq!(page.items, vec![at(30, 3), at(20, 2)]);
        assert!(page.more);
        let page = parse_newest(&[bulk("all"), rows(&[(30, 3)]), bulk("all")], 2).unwrap();
        assert_eq!(page.items, vec![at(30, 3)]);
        assert!(!page.more);
    }

    #[test]
    fn a_partial_list_serves_only_what_it_covers() {
        let bound = format!("20:{:019}", 2);
        let marker = bulk(&bound);
        let page = parse_newest(
            &[marker.clone(), rows(&[(30, 3), (20, 2)]), marker.clone()],
            1,
        )
        .unwrap();
        assert_eq!(page.items, vec![at(30, 3)]);
        assert!(page.more);
        // Reaches past the bound, or ends before the page is full.
        let past = rows(&[(30, 3), (20, 2), (10, 1)]);
        assert_eq!(
            parse_newest(&[marker.clone(), past, marker.clone()], 2),
            Err(super::super::PageMiss::NotCovered)
        );
        assert_eq!(
            parse_newest(&[marker.clone(), rows(&[(30, 3)]), marker.clone()], 2),
            Err(super::super::PageMiss::NotCovered)
        );
    }

    #[test]
    fn resp3_pairs_read_as_resp2_rows() {
        let pairs = Value::Array(vec![
            Value::Array(vec![bulk(&format!("{:019}", 3)), Value::Double(30.0)]),
            Value::Array(vec![bulk(&format!("{:019}", 2)), Value::Double(20.0)]),
        ]);
        let page = parse_newest(&[bulk("all"), pairs, bulk("all")], 5).unwrap();
        assert_eq!(page.items, vec![at(30, 3), at(20, 2)]);
        assert!(!page.more);
    }

    #[test]
    fn markers_that_differ_or_claim_a_fill_are_misses() {
        let miss = Err(super::super::PageMiss::NotCached);
        assert_eq!(parse_newest(&[Value::Nil, rows(&[]), bulk("all")], 2), miss);
        assert_eq!(parse_newest(&[bulk("all"), rows(&[]), Value::Nil], 2), miss);
        assert_eq!(
            parse_newest(&[bulk("filling:x"), rows(&[]), bulk("filling:x")], 2),
            miss
        );
        let bound = bulk(&format!("20:{:019}", 2));
        assert_eq!(
            parse_newest(&[bound, rows(&[(30, 3)]), bulk("all")], 2),
            miss
        );
    }
}
