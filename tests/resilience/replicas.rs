//! Two replicas, each a real `kith run` process (API, relay, projector) on
//! one stack: writes spread over both, rate limits shared, hot lists of one
//! converging after writes on the other, and one replica killed with
//! `kill -9` mid-run — every event applied exactly once all the same.

use std::collections::BTreeSet;

use kith::model::UserId;
use kith::testing::graph::ids;
use kith::testing::store::partitions;
use serde_json::{Value, json};

use crate::helpers::{KithProcess, TestApp, eventually, settled, spawn_app_with};
use crate::http_client;

const FOLLOW: &str = "mutation($id: ID!) { follow(input: {userId: $id}) { changed } }";
const FOLLOWERS: &str =
    "query($id: ID!) { user(id: $id) { followers(first: 50) { edges { node { handle } } } } }";

async fn follow(t: &TestApp, port: u16, actor: UserId, target: UserId) -> Value {
    http_client::graphql(
        port,
        &t.token(actor),
        FOLLOW,
        json!({ "id": ids::user_id(target).to_string() }),
    )
    .await
    .unwrap()
}

async fn follower_handles(t: &TestApp, port: u16, viewer: UserId, user: UserId) -> Vec<String> {
    let r = http_client::graphql(
        port,
        &t.token(viewer),
        FOLLOWERS,
        json!({ "id": ids::user_id(user).to_string() }),
    )
    .await
    .unwrap();
    let mut handles: Vec<String> = r["data"]["user"]["followers"]["edges"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .filter_map(|e| e["node"]["handle"].as_str().map(str::to_owned))
        .collect();
    handles.sort();
    handles
}

#[tokio::test]
async fn two_replicas_share_the_work_and_survive_one_killed() {
    let t = spawn_app_with(|c| c.pipeline.topic_partitions = 4).await;
    let group = t.app.config.pipeline.consumer_group.clone();
    let star = t.user("star").await;
    let limited = t.user("limited").await;
    let mut fans = Vec::new();
    for i in 0..16 {
        fans.push(t.user(&format!("fan{i}")).await);
    }
    let (port_a, port_b) = (http_client::free_port(), http_client::free_port());
    let env = |port: u16| {
        vec![
            ("KITH_HTTP_ADDR", format!("127.0.0.1:{port}")),
            ("KITH_RATE_LIMIT_CAPACITY", "4".to_owned()),
            ("KITH_RATE_LIMIT_PER_SEC", "0.01".to_owned()),
            // Every list counts as hot: first pages are held in process,
            // for a minute — only the live updates can refresh them sooner.
            ("KITH_HOT_FOLLOWERS", "1".to_owned()),
            ("KITH_HOT_PAGE_TTL_MS", "60000".to_owned()),
        ]
    };
    let _a = KithProcess::start(&t, "run", &env(port_a));
    let mut b = KithProcess::start(&t, "run", &env(port_b));
    // Both projectors hold a share of the partitions.
    eventually("both projectors to hold partitions", 60, || async {
        let rows = partitions::list(&mut *t.conn().await, &group)
            .await
            .unwrap();
        let owners: BTreeSet<_> = rows.iter().filter_map(|r| r.owner).collect();
        (rows.len() == 8 && rows.iter().all(|r| r.owner.is_some()) && owners.len() == 2)
            .then_some(())
    })
    .await;

    // A user's bucket is one, whichever replica takes the request.
    for (i, fan) in fans[..4].iter().enumerate() {
        let port = if i % 2 == 0 { port_a } else { port_b };
        let r = follow(&t, port, limited, *fan).await;
        assert_eq!(r["data"]["follow"]["changed"], true, "{r}");
    }
    for port in [port_a, port_b] {
        let r = follow(&t, port, limited, fans[4]).await;
        assert_eq!(
            r["errors"][0]["extensions"]["code"], "RATE_LIMITED",
            "the fifth follow is refused on either replica: {r}"
        );
    }

    // Replica A holds the star's first followers page in process (the star
    // has a follower, so its list counts as hot); a follow made on B shows
    // there once applied, though the page would live a minute: the batch's
    // live update drops it.
    let early = t.user("early").await;
    assert_eq!(
        follow(&t, port_a, early, star).await["data"]["follow"]["changed"],
        true
    );
    settled(&t, &[early, star], 60).await;
    assert_eq!(follower_handles(&t, port_a, star, star).await, ["early"]);
    assert_eq!(
        follow(&t, port_b, fans[0], star).await["data"]["follow"]["changed"],
        true
    );
    eventually("replica A to show the follow made on B", 10, || async {
        (follower_handles(&t, port_a, star, star).await == ["early", "fan0"]).then_some(())
    })
    .await;

    // Writes over both, then B dies mid-run; the rest go to A.
    for (i, fan) in fans[1..8].iter().enumerate() {
        let port = if i % 2 == 0 { port_a } else { port_b };
        assert_eq!(
            follow(&t, port, *fan, star).await["data"]["follow"]["changed"],
            true
        );
    }
    b.kill();
    for fan in &fans[8..] {
        assert_eq!(
            follow(&t, port_a, *fan, star).await["data"]["follow"]["changed"],
            true
        );
    }

    // Every event applied exactly once: the projection is the truth, the
    // counters count it, and A's lists show it.
    let mut everyone = fans.clone();
    everyone.extend([star, limited, early]);
    settled(&t, &everyone, 60).await;
    assert_eq!(t.full_stats(star).await.followers, 17);
    assert_eq!(t.full_stats(limited).await.followings, 4);
    for fan in &fans[..4] {
        assert_eq!(t.full_stats(*fan).await.followers, 1);
    }
    let expected: Vec<String> = {
        let mut handles: Vec<String> = (0..16).map(|i| format!("fan{i}")).collect();
        handles.push("early".to_owned());
        handles.sort();
        handles
    };
    eventually("replica A's list to show every follower", 20, || async {
        (follower_handles(&t, port_a, star, star).await == expected).then_some(())
    })
    .await;
}
