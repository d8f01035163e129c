//! Reading a list cache whole, for checks and tools: its members, its
//! coverage marker, everything at once.

use redis::aio::ConnectionLike;

use super::parse_member;
use crate::cache::RedisKeys;
use crate::model::UserId;
use crate::paging::ListKey;
use crate::paging::Position;

/// The members of a cached list, newest first (for checks and tools), or
/// `None` when the list is not cached.
pub async fn cached_members(
    conn: &mut impl ConnectionLike,
    keys: &RedisKeys,
    list: ListKey,
) -> redis::RedisResult<Option<Vec<(UserId, i64)>>> {
    let [zset, _, coverage] = keys.list(list);
    let (marker, members): (Option<String>, Vec<(String, i64)>) = redis::pipe()
        .get(&coverage)
        .zrevrange_withscores(&zset, 0, -1)
        .query_async(conn)
        .await?;
    match marker {
        Some(m) if !m.starts_with("filling:") => Ok(Some(
            members
                .into_iter()
                .filter_map(|(m, score)| Some((parse_member(&m)?, score)))
                .collect(),
        )),
        _ => Ok(None),
    }
}

/// What a list's coverage marker says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Coverage {
    /// Not cached.
    Absent,
    /// A fill is running.
    Filling,
    /// The whole list is cached.
    All,
    /// Every edge from the newest down to this position is cached.
    Down(Position),
    /// Not a marker Kith writes.
    Malformed(String),
}

impl Coverage {
    /// Parses a marker as `lua/list_page.lua` reads it.
    pub fn parse(marker: Option<&str>) -> Self {
        let Some(marker) = marker else {
            return Self::Absent;
        };
        if marker.starts_with("filling:") {
            return Self::Filling;
        }
        if marker == "all" {
            return Self::All;
        }
        let parsed = marker.split_once(':').and_then(|(score, m)| {
            Some(Position {
                followed_at_ms: score.parse().ok()?,
                user: parse_member(m)?,
            })
        });
        parsed.map_or_else(|| Self::Malformed(marker.to_owned()), Self::Down)
    }

    /// True when reads treat the list as cached.
    pub fn is_cached(&self) -> bool {
        matches!(self, Self::All | Self::Down(_))
    }
}

/// The coverage markers of many lists, in one round trip (a pipeline of
/// single-key `GET`s: the lists live in different hash slots).
pub async fn coverages(
    conn: &mut impl ConnectionLike,
    keys: &RedisKeys,
    lists: &[ListKey],
) -> redis::RedisResult<Vec<Coverage>> {
    if lists.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for list in lists {
        let [_, _, coverage] = keys.list(*list);
        pipe.cmd("GET").arg(coverage);
    }
    let markers: Vec<Option<String>> = pipe.query_async(conn).await?;
    Ok(markers
        .iter()
        .map(|m| Coverage::parse(m.as_deref()))
        .collect())
}

/// Everything one cached list holds, for checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ListSnapshot {
    /// The coverage marker.
    pub coverage: Coverage,
    /// Members newest first, with their scores (raw member strings kept, so
    /// a malformed member is visible).
    pub members: Vec<(String, i64)>,
    /// Member → edge version last applied.
    pub versions: std::collections::HashMap<String, i64>,
}

/// Reads a whole list cache (ZSet, versions, coverage) atomically.
pub(crate) async fn snapshot(
    conn: &mut impl ConnectionLike,
    keys: &RedisKeys,
    list: ListKey,
) -> redis::RedisResult<ListSnapshot> {
    let [zset, versions, coverage] = keys.list(list);
    type Raw = (
        Option<String>,
        Vec<(String, i64)>,
        std::collections::HashMap<String, i64>,
    );
    let (marker, members, versions): Raw = redis::pipe()
        .atomic()
        .get(&coverage)
        .zrevrange_withscores(&zset, 0, -1)
        .hgetall(&versions)
        .query_async(conn)
        .await?;
    Ok(ListSnapshot {
        coverage: Coverage::parse(marker.as_deref()),
        members,
        versions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_markers_parse_as_the_page_script_reads_them() {
        assert_eq!(Coverage::parse(None), Coverage::Absent);
        assert_eq!(Coverage::parse(Some("filling:abc")), Coverage::Filling);
        assert_eq!(Coverage::parse(Some("all")), Coverage::All);
        assert_eq!(
            Coverage::parse(Some("1700000000000:0000000000000000042")),
            Coverage::Down(Position {
                followed_at_ms: 1_700_000_000_000,
                user: UserId::new(42).unwrap()
            })
        );
        assert!(matches!(
            Coverage::parse(Some("x:y")),
            Coverage::Malformed(_)
        ));
    }
}
