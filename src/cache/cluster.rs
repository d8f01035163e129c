//! Redis Cluster: how `REDIS_URL` names one, and pipelines split per slot.
//!
//! `REDIS_URL=redis+cluster://host1:port1,host2:port2,…` (or
//! `rediss+cluster://` for TLS; `user:password@` before the first host
//! applies to every node) names a cluster by some of its nodes; Kith then
//! uses the `redis` crate's cluster client (slot map, `MOVED`/`ASK`,
//! reconnects, topology refresh). Any other URL is one server, as before.
//!
//! On a cluster, every script and multi-key command of Kith touches keys of
//! one slot (the `{user}` hash tags of [`super::keys`]; slots as the `redis`
//! crate computes them). The exceptions run only on a single server: the
//! members script asks the lists of many users in one call there
//! ([`super::lists::MembersCalls`]), and the cache writes store the counter
//! records and apply the edge states of many users in one call
//! ([`super::counters::queue_store`], [`super::lists::queue_apply`]); on a
//! cluster, one call per user. Start-up refuses a cluster node named by a
//! plain `redis://` URL (`INFO cluster`). A pipeline, though, often spans
//! users: the cluster client refuses such a pipeline, so [`split`] sends one
//! sub-pipeline per slot, all at once, and puts the answers back in order.
//! Commands without a key (`PUBLISH`, `SCRIPT LOAD`) go one by one, routed
//! by the client (`SCRIPT LOAD` to every primary).

use std::collections::HashMap;

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{Arg, Cmd, Pipeline, RedisResult, Value};

/// Where Redis is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// One server (any URL the `redis` crate reads).
    Single(String),
    /// A cluster, by the URLs of some of its nodes.
    Cluster(Vec<String>),
}

impl Target {
    /// Reads `REDIS_URL`.
    pub(crate) fn parse(url: &str) -> Self {
        let (scheme, rest) = if let Some(rest) = url.strip_prefix("redis+cluster://") {
            ("redis", rest)
        } else if let Some(rest) = url.strip_prefix("rediss+cluster://") {
            ("rediss", rest)
        } else {
            return Self::Single(url.to_owned());
        };
        let (auth, hosts) = match rest.rsplit_once('@') {
            Some((auth, hosts)) => (format!("{auth}@"), hosts),
            None => (String::new(), rest),
        };
        let hosts = hosts.trim_end_matches('/');
        Self::Cluster(
            hosts
                .split(',')
                .filter(|h| !h.is_empty())
                .map(|h| format!("{scheme}://{auth}{h}"))
                .collect(),
        )
    }

    /// One node's URL, for pub/sub: a cluster forwards every `PUBLISH` to
    /// all its nodes, so a subscriber on any node hears it. `attempt` counts
    /// subscriptions so far: each new one tries the next node named, so a
    /// node gone for good is left behind.
    pub(crate) fn pubsub_url(&self, attempt: usize) -> &str {
        match self {
            Self::Single(url) => url,
            Self::Cluster(nodes) if nodes.is_empty() => "",
            Self::Cluster(nodes) => &nodes[attempt % nodes.len()],
        }
    }
}

/// Subscribes to `channel` on the node `attempt` picks ([`Target::pubsub_url`]).
pub(crate) async fn subscribe(
    target: &Target,
    attempt: usize,
    channel: &str,
) -> RedisResult<redis::aio::PubSubStream> {
    let client = redis::Client::open(target.pubsub_url(attempt))?;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    Ok(pubsub.into_on_message())
}

/// The key a command is routed by, if it has one.
fn key_of(cmd: &Cmd) -> Option<Vec<u8>> {
    let args: Vec<&[u8]> = cmd
        .args_iter()
        .filter_map(|a| match a {
            Arg::Simple(bytes) => Some(bytes),
            _ => None,
        })
        .collect();
    let name = args.first()?.to_ascii_uppercase();
    match name.as_slice() {
        b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO" => {
            let keys: usize = std::str::from_utf8(args.get(2)?).ok()?.parse().ok()?;
            (keys > 0).then(|| args.get(3).map(|k| k.to_vec()))?
        }
        b"PUBLISH" | b"SPUBLISH" | b"SCRIPT" | b"PING" | b"INFO" | b"FLUSHALL" | b"FLUSHDB"
        | b"DBSIZE" | b"CONFIG" | b"TIME" => None,
        _ => args.get(1).map(|k| k.to_vec()),
    }
}

/// Runs `pipeline` on a cluster: one sub-pipeline per slot, concurrently;
/// commands without a key one by one. The answers come back in the
/// pipeline's order. A transaction (`MULTI`/`EXEC`) goes whole: its keys
/// share a slot.
pub(crate) async fn split(
    conn: &mut ClusterConnection,
    pipeline: &Pipeline,
    offset: usize,
    count: usize,
) -> RedisResult<Vec<Value>> {
    use redis::aio::ConnectionLike as _;
    if pipeline.is_transaction() {
        return conn.req_packed_commands(pipeline, offset, count).await;
    }
    let cmds: Vec<&Cmd> = pipeline.cmd_iter().collect();
    let mut by_slot: HashMap<Slot, Vec<usize>> = HashMap::new();
    let mut keyless = Vec::new();
    for (i, cmd) in cmds.iter().enumerate() {
        match key_of(cmd) {
            Some(key) => by_slot.entry(Slot::for_key(key)).or_default().push(i),
            None => keyless.push(i),
        }
    }
    if by_slot.len() <= 1 && keyless.is_empty() {
        // One slot (one user's keys): the pipeline goes as it is.
        return conn.req_packed_commands(pipeline, offset, count).await;
    }
    let mut parts = Vec::with_capacity(by_slot.len() + keyless.len());
    for (_, indices) in by_slot {
        let mut sub = redis::pipe();
        for &i in &indices {
            sub.add_command(cmds[i].clone());
        }
        let mut conn = conn.clone();
        parts.push(futures_util::future::Either::Left(async move {
            let n = indices.len();
            (indices, conn.req_packed_commands(&sub, 0, n).await)
        }));
    }
    for i in keyless {
        let mut conn = conn.clone();
        let cmd = cmds[i].clone();
        parts.push(futures_util::future::Either::Right(async move {
            (
                vec![i],
                conn.req_packed_command(&cmd).await.map(|v| vec![v]),
            )
        }));
    }
    let mut answers = vec![Value::Nil; cmds.len()];
    for (indices, result) in futures_util::future::join_all(parts).await {
        for (i, value) in indices.into_iter().zip(result?) {
            answers[i] = value;
        }
    }
    Ok(answers.into_iter().skip(offset).take(count).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls_name_their_nodes() {
        assert_eq!(
            Target::parse("redis://127.0.0.1:6379/0"),
            Target::Single("redis://127.0.0.1:6379/0".into())
        );
        assert_eq!(
            Target::parse("redis+cluster://u:p@10.0.0.1:7001,10.0.0.2:7002/"),
            Target::Cluster(vec![
                "redis://u:p@10.0.0.1:7001".into(),
                "redis://u:p@10.0.0.2:7002".into()
            ])
        );
        assert_eq!(
            Target::parse("rediss+cluster://h:7000").pubsub_url(0),
            "rediss://h:7000"
        );
        let two = Target::parse("redis+cluster://a:1,b:2");
        assert_eq!(two.pubsub_url(1), "redis://b:2");
        assert_eq!(two.pubsub_url(2), "redis://a:1");
    }

    #[test]
    fn scripts_route_by_their_first_key() {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg("abc").arg(2).arg("{7}:a").arg("{7}:b").arg("x");
        assert_eq!(key_of(&cmd), Some(b"{7}:a".to_vec()));
        let mut publish = redis::cmd("PUBLISH");
        publish.arg("kith:outbox").arg("");
        assert_eq!(key_of(&publish), None);
        let mut get = redis::cmd("GET");
        get.arg("k");
        assert_eq!(key_of(&get), Some(b"k".to_vec()));
    }
}
