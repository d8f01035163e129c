//! Deleting every key that matches some patterns, on one server or on every
//! primary of a cluster: how a restore forgets the derived state Redis held
//! of a timeline PostgreSQL no longer has (`kith after-restore`).

use redis::RedisResult;
use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};

/// Keys asked for per `SCAN` call.
const SCAN_COUNT: usize = 1000;

/// Deletes the keys matching `patterns` on one server; returns how many.
pub(super) async fn single(
    conn: &mut MultiplexedConnection,
    patterns: &[String],
) -> RedisResult<u64> {
    let mut deleted = 0;
    for pattern in patterns {
        let mut cursor = 0_u64;
        loop {
            let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query_async(conn)
                .await?;
            if !keys.is_empty() {
                let n: u64 = redis::cmd("UNLINK").arg(&keys).query_async(conn).await?;
                deleted += n;
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(deleted)
}

/// Deletes the keys matching `patterns` on every primary of a cluster;
/// returns how many.
pub(super) async fn cluster(conn: &mut ClusterConnection, patterns: &[String]) -> RedisResult<u64> {
    let nodes: String = redis::from_redis_value(
        conn.route_command(
            redis::cmd("CLUSTER").arg("NODES").clone(),
            RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
        )
        .await?,
    )?;
    let mut deleted = 0;
    for (host, port) in primaries(&nodes) {
        let node = || {
            RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                host: host.clone(),
                port,
            })
        };
        for pattern in patterns {
            let mut cursor = 0_u64;
            loop {
                let mut scan = redis::cmd("SCAN");
                scan.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(SCAN_COUNT);
                let (next, keys): (u64, Vec<Vec<u8>>) =
                    redis::from_redis_value(conn.route_command(scan, node()).await?)?;
                deleted += unlink_each(conn, keys).await?;
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
    }
    Ok(deleted)
}

/// Deletes `keys` from a cluster, one `UNLINK` each, split by slot as
/// every pipeline on a cluster is (a cluster refuses a command, or a
/// pipeline, of keys in several slots); returns how many.
async fn unlink_each(conn: &mut ClusterConnection, keys: Vec<Vec<u8>>) -> RedisResult<u64> {
    if keys.is_empty() {
        return Ok(0);
    }
    let mut pipe = redis::pipe();
    for key in &keys {
        pipe.cmd("UNLINK").arg(key);
    }
    let answers = super::cluster::split(conn, &pipe, 0, keys.len()).await?;
    Ok(answers
        .iter()
        .filter_map(|v| redis::from_redis_value_ref::<u64>(v).ok())
        .sum())
}

/// The primaries in a `CLUSTER NODES` answer, as (host, port).
fn primaries(nodes: &str) -> Vec<(String, u16)> {
    nodes
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let flags = fields.get(2)?;
            if !flags.split(',').any(|f| f == "master") || flags.contains("fail") {
                return None;
            }
            // host:port@cport[,hostname]
            let address = fields.get(1)?.split('@').next()?;
            let (host, port) = address.rsplit_once(':')?;
            Some((host.to_owned(), port.parse().ok()?))
        })
        .collect()
}

/// A `SCAN` pattern that matches `text` literally, then anything.
pub(crate) fn prefix_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 1);
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('*');
    pattern
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primaries_come_from_cluster_nodes() {
        let nodes = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:7102@17102 master - 0 1426238317239 2 connected 5461-10922
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:7101@17101 myself,master - 0 0 1 connected 0-5460
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:7104@17104 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238316232 1 connected
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:7105@17105 master,fail - 0 0 3 disconnected
";
        assert_eq!(
            primaries(nodes),
            vec![("127.0.0.1".into(), 7102), ("127.0.0.1".into(), 7101)]
        );
    }

    #[test]
    fn patterns_match_prefixes_literally() {
        assert_eq!(prefix_pattern("t:ucnt:"), "t:ucnt:*");
        assert_eq!(prefix_pattern("a*b[1]:"), "a\\*b\\[1\\]:*");
    }
}
