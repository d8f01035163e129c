//! Blocks: a block ends the pair's follows both ways, as unfollows, and
//! refuses follows either way (`BLOCKED`) until lifted; only the viewer
//! learns of its own blocks; and a signed-in viewer's lists leave out the
//! accounts in a block with it, in full pages.

use kith::model::UserId;
use kith::testing::auth::Viewer;
use kith::testing::consistency::verify::Kind;
use serde_json::{Value, json};

use std::sync::Arc;

use kith::testing::pipeline::projector::ProjectorHooks;

use crate::helpers::{
    TestApp, assert_ok, error_code, eventually, settled, spawn_app, spawn_app_with,
};

fn gid(user: UserId) -> String {
    kith::testing::graph::ids::user_id(user).to_string()
}

/// `block` or `unblock` (`mutation` names which) of `target` by `actor`.
async fn block_mutation(t: &TestApp, mutation: &str, actor: UserId, target: UserId) -> Value {
    let query = format!(
        "mutation($id: ID!) {{ {mutation}(input: {{userId: $id, clientMutationId: \"m\"}}) {{
            changed clientMutationId
            user {{ handle }}
            viewerRelation {{ following followedBy blocking blockedBy }}
        }} }}"
    );
    t.execute(Viewer::User(actor), &query, json!({ "id": gid(target) }))
        .await
}

async fn block(t: &TestApp, actor: UserId, target: UserId) -> Value {
    block_mutation(t, "block", actor, target).await
}

async fn unblock(t: &TestApp, actor: UserId, target: UserId) -> Value {
    block_mutation(t, "unblock", actor, target).await
}

/// The handles of one page of `owner`'s followers as `viewer` sees it, with
/// its page info and total.
async fn followers_page(t: &TestApp, viewer: Viewer, owner: UserId, args: &str) -> Value {
    let query = format!(
        "query($id: ID!) {{ user(id: $id) {{ followers({args}) {{
            totalCount
            edges {{ node {{ handle }} }}
            pageInfo {{ hasNextPage hasPreviousPage startCursor endCursor }}
        }} }} }}"
    );
    let r = t.execute(viewer, &query, json!({ "id": gid(owner) })).await;
    assert_ok(&r);
    r["data"]["user"]["followers"].clone()
}

fn handles(connection: &Value) -> Vec<String> {
    connection["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["handle"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_block_ends_follows_both_ways_and_refuses_new_ones() {
    let t = spawn_app().await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    assert_ok(&t.follow(a, b).await);
    assert_ok(&t.follow(b, a).await);
    let before = t.outbox_payloads().await.len();

    let r = block(&t, a, b).await;
    assert_ok(&r);
    let payload = &r["data"]["block"];
    assert_eq!(payload["changed"], true);
    assert_eq!(payload["clientMutationId"], "m");
    assert_eq!(
        payload["viewerRelation"],
        json!({ "following": false, "followedBy": false, "blocking": true, "blockedBy": false })
    );
    assert_eq!(t.edge(a, b).await.map(|e| e.0), Some(false));
    assert_eq!(t.edge(b, a).await.map(|e| e.0), Some(false));
    assert_eq!(t.stats(a).await.0, 0, "a's followings");
    assert_eq!(t.stats(b).await.0, 0, "b's followings");
    // Two unfollows and the block, in one transaction.
    let events: Vec<Value> = t.outbox_payloads().await.split_off(before);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.len(), 3, "{events:?}");
    assert_eq!(types.iter().filter(|t| **t == "FollowCanceled").count(), 2);
    let created = events.iter().find(|e| e["type"] == "BlockCreated").unwrap();
    assert_eq!(
        (created["from"].as_i64(), created["to"].as_i64()),
        (Some(a.get()), Some(b.get()))
    );
    assert!(created["blockedAtMs"].as_i64().unwrap() > 0);

    // Neither can follow the other; nothing is written.
    let events = t.outbox_payloads().await.len();
    for (x, y) in [(a, b), (b, a)] {
        let refused = t.follow(x, y).await;
        assert_eq!(error_code(&refused), Some("BLOCKED"), "{refused}");
    }
    let many = t
        .execute(
            Viewer::User(b),
            "mutation($ids: [ID!]!) { followMany(input: {userIds: $ids}) {
                changedCount results { changed error { code } } } }",
            json!({ "ids": [gid(a), gid(c)] }),
        )
        .await;
    assert_ok(&many);
    assert_eq!(many["data"]["followMany"]["changedCount"], 1);
    assert_eq!(
        many["data"]["followMany"]["results"][0]["error"]["code"],
        "BLOCKED"
    );
    assert_eq!(many["data"]["followMany"]["results"][1]["changed"], true);
    assert_eq!(t.outbox_payloads().await.len(), events + 1, "only b → c");
    assert_eq!(t.edge(b, a).await.map(|e| e.0), Some(false));

    // Repeating the block changes nothing; unblocking restores no follow.
    let again = block(&t, a, b).await;
    assert_ok(&again);
    assert_eq!(again["data"]["block"]["changed"], false);
    let lifted = unblock(&t, a, b).await;
    assert_ok(&lifted);
    assert_eq!(lifted["data"]["unblock"]["changed"], true);
    assert_eq!(
        lifted["data"]["unblock"]["viewerRelation"]["blocking"],
        false
    );
    assert_eq!(t.edge(a, b).await.map(|e| e.0), Some(false));
    assert_ok(&t.follow(a, b).await);
    assert_eq!(t.edge(a, b).await.map(|e| e.0), Some(true));
    let last = t.outbox_payloads().await;
    assert!(last.iter().any(|e| e["type"] == "BlockRemoved"));
}

#[tokio::test]
async fn refusals_have_their_codes() {
    let t = spawn_app_with(|c| c.writes.max_blocks = 2).await;
    let me = t.user("me").await;
    let mut u = Vec::new();
    for i in 0..4 {
        u.push(t.user(&format!("u{i}")).await);
    }
    assert_ok(&block(&t, me, u[0]).await);
    assert_ok(&block(&t, me, u[1]).await);
    let refused = block(&t, me, u[2]).await;
    assert_eq!(error_code(&refused), Some("BLOCK_LIMIT"), "{refused}");
    // A repeat is no new block; an unblock makes room.
    assert_ok(&block(&t, me, u[1]).await);
    assert_ok(&unblock(&t, me, u[0]).await);
    assert_ok(&block(&t, me, u[2]).await);

    let own = block(&t, me, me).await;
    assert_eq!(error_code(&own), Some("INVALID_INPUT"), "{own}");
    let unknown = block(&t, me, UserId::new(987_654_321).unwrap()).await;
    assert_eq!(error_code(&unknown), Some("NOT_FOUND"), "{unknown}");
    let anonymous = t
        .execute(
            Viewer::Anonymous,
            "mutation($id: ID!) { block(input: {userId: $id}) { changed } }",
            json!({ "id": gid(u[3]) }),
        )
        .await;
    assert_eq!(
        error_code(&anonymous),
        Some("UNAUTHENTICATED"),
        "{anonymous}"
    );
}

#[tokio::test]
async fn blocks_cost_rate_limit_tokens() {
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 2;
        c.writes.rate_limit_per_sec = 0.001;
    })
    .await;
    let (me, x) = (t.user("me").await, t.user("x").await);
    assert_ok(&block(&t, me, x).await);
    assert_ok(&unblock(&t, me, x).await);
    let limited = block(&t, me, x).await;
    assert_eq!(error_code(&limited), Some("RATE_LIMITED"), "{limited}");
}

#[tokio::test]
async fn only_the_viewer_learns_of_its_blocks() {
    let t = spawn_app().await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    assert_ok(&block(&t, a, b).await);
    let query = "query($a: ID!, $b: ID!) {
        a: user(id: $a) { viewerRelation { blocking blockedBy } relationTo(other: $b) { blocking blockedBy } }
        b: user(id: $b) { viewerRelation { blocking blockedBy } relationTo(other: $a) { blocking blockedBy } }
        relationships(ids: [$a, $b]) { blocking blockedBy }
    }";
    let vars = json!({ "a": gid(a), "b": gid(b) });
    let seen = |r: &Value| {
        assert_ok(r);
        r["data"].clone()
    };
    let by_a = seen(&t.execute(Viewer::User(a), query, vars.clone()).await);
    assert_eq!(
        by_a["b"]["viewerRelation"],
        json!({ "blocking": true, "blockedBy": false })
    );
    assert_eq!(
        by_a["a"]["relationTo"],
        json!({ "blocking": true, "blockedBy": false })
    );
    // b's relation to a, read by a: not a's own, so not told.
    assert_eq!(
        by_a["b"]["relationTo"],
        json!({ "blocking": null, "blockedBy": null })
    );
    assert_eq!(
        by_a["relationships"][1],
        json!({ "blocking": true, "blockedBy": false })
    );

    let by_b = seen(&t.execute(Viewer::User(b), query, vars.clone()).await);
    assert_eq!(
        by_b["a"]["viewerRelation"],
        json!({ "blocking": false, "blockedBy": true })
    );
    assert_eq!(
        by_b["b"]["relationTo"],
        json!({ "blocking": false, "blockedBy": true })
    );

    // A third party learns nothing, signed in or not.
    for viewer in [Viewer::User(c), Viewer::Anonymous] {
        let r = t
            .execute(
                viewer,
                "query($a: ID!, $b: ID!) { user(id: $a) { relationTo(other: $b) { following blocking blockedBy } } }",
                vars.clone(),
            )
            .await;
        assert_eq!(
            seen(&r)["user"]["relationTo"],
            json!({ "following": false, "blocking": null, "blockedBy": null })
        );
    }
}

/// `owner` has 30 followers, f00 newest … f29 oldest; the viewer blocks
/// every third of them and one of them blocks the viewer.
async fn crowd(t: &TestApp) -> (UserId, UserId, Vec<UserId>, Vec<String>) {
    let (owner, viewer) = (t.user("owner").await, t.user("viewer").await);
    let mut followers = Vec::new();
    for i in (0..30).rev() {
        let f = t.user(&format!("f{i:02}")).await;
        assert_ok(&t.follow(f, owner).await);
        followers.insert(0, f);
    }
    let mut hidden = Vec::new();
    for (i, f) in followers.iter().enumerate() {
        if i % 3 == 1 {
            assert_ok(&block(t, viewer, *f).await);
            hidden.push(format!("f{i:02}"));
        }
    }
    assert_ok(&block(t, followers[6], viewer).await);
    hidden.push("f06".to_owned());
    (owner, viewer, followers, hidden)
}

#[tokio::test]
async fn a_viewers_lists_leave_out_its_blocks_in_full_pages() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let (owner, viewer, _, hidden) = crowd(&t).await;
    let all: Vec<String> = (0..30).map(|i| format!("f{i:02}")).collect();
    let shown: Vec<String> = all
        .iter()
        .filter(|h| !hidden.contains(h))
        .cloned()
        .collect();
    assert_eq!(shown.len(), 19);
    // The followers lists come from the projection: the pipeline carries
    // the block events through (none is a dead letter).
    let _relay = t.start_relay();
    let _projector = t.start_projector(Arc::new(ProjectorHooks::default()));
    settled(&t, &[owner], 60).await;
    assert_eq!(t.dead_letter_count().await, 0);

    // Anonymous: everyone.
    let page = followers_page(&t, Viewer::Anonymous, owner, "first: 30").await;
    assert_eq!(handles(&page), all);

    // The viewer, forward by cursor in pages of 4: every page full but the
    // last, nothing repeated or skipped, the public count.
    let mut seen = Vec::new();
    let mut after = String::new();
    loop {
        let page =
            followers_page(&t, Viewer::User(viewer), owner, &format!("first: 4{after}")).await;
        assert_eq!(page["totalCount"], 30);
        let got = handles(&page);
        let more = page["pageInfo"]["hasNextPage"].as_bool().unwrap();
        if more {
            assert_eq!(got.len(), 4, "a short page before the end: {page}");
        }
        seen.extend(got);
        if !more {
            break;
        }
        after = format!(
            ", after: \"{}\"",
            page["pageInfo"]["endCursor"].as_str().unwrap()
        );
    }
    assert_eq!(seen, shown);

    // Backward from the end, and by offset.
    let mut seen_back = Vec::new();
    let mut before = String::new();
    loop {
        let page =
            followers_page(&t, Viewer::User(viewer), owner, &format!("last: 5{before}")).await;
        let got = handles(&page);
        let more = page["pageInfo"]["hasPreviousPage"].as_bool().unwrap();
        if more {
            assert_eq!(got.len(), 5, "a short page before the start: {page}");
        }
        seen_back.splice(0..0, got);
        if !more {
            break;
        }
        before = format!(
            ", before: \"{}\"",
            page["pageInfo"]["startCursor"].as_str().unwrap()
        );
    }
    assert_eq!(seen_back, shown);
    let page = followers_page(&t, Viewer::User(viewer), owner, "first: 3, offset: 1").await;
    assert_eq!(handles(&page), ["f02", "f03", "f05"]);
}

#[tokio::test]
async fn intersections_leave_out_the_viewers_blocks() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let (a, b, viewer) = (t.user("a").await, t.user("b").await, t.user("viewer").await);
    let mut shared = Vec::new();
    for i in 0..6 {
        let s = t.user(&format!("s{i}")).await;
        assert_ok(&t.follow(a, s).await);
        assert_ok(&t.follow(b, s).await);
        shared.push(s);
    }
    assert_ok(&block(&t, viewer, shared[1]).await);
    assert_ok(&block(&t, shared[4], viewer).await);
    let query = "query($a: ID!, $b: ID!) { user(id: $a) {
        commonFollowing(with: $b, first: 3) { totalCount edges { node { handle } } pageInfo { hasNextPage } } } }";
    let vars = json!({ "a": gid(a), "b": gid(b) });
    let r = t.execute(Viewer::User(viewer), query, vars.clone()).await;
    assert_ok(&r);
    let common = &r["data"]["user"]["commonFollowing"];
    assert_eq!(handles(common), ["s5", "s3", "s2"]);
    assert_eq!(common["pageInfo"]["hasNextPage"], true);
    assert_eq!(common["totalCount"], 6, "the public count");
    let r = t.execute(Viewer::Anonymous, query, vars).await;
    assert_eq!(
        handles(&r["data"]["user"]["commonFollowing"]),
        ["s5", "s4", "s3"]
    );
}

#[tokio::test]
async fn a_block_made_elsewhere_reaches_this_process_lists() {
    let t = spawn_app().await;
    t.users_cached().await;
    let (owner, viewer, x) = (
        t.user("owner").await,
        t.user("viewer").await,
        t.user("x").await,
    );
    assert_ok(&t.follow(owner, x).await);
    let following = async || {
        let r = t
            .execute(
                Viewer::User(viewer),
                "query($id: ID!) { user(id: $id) { following(first: 5) { edges { node { handle } } } } }",
                json!({ "id": gid(owner) }),
            )
            .await;
        assert_ok(&r);
        handles(&r["data"]["user"]["following"])
    };
    assert_eq!(following().await, ["x"]);
    // The viewer's (empty) block set is now held in process; another
    // process blocks.
    t.sql_elsewhere(&format!(
        "SELECT * FROM kith_block({viewer}, {x}, TRUE, gen_random_uuid(),
                ARRAY[gen_random_uuid(), gen_random_uuid()], 0)"
    ))
    .await;
    eventually("the block shows in this process", 5, || async {
        following().await.is_empty().then_some(())
    })
    .await;
}

/// Follows and blocks of the same pairs at once, each follow's commit made
/// to hold its locks a while: whichever comes first, no follow survives
/// across a block.
#[tokio::test]
async fn a_follow_racing_a_block_never_leaves_a_follow_across_it() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let mut pairs = Vec::new();
    for i in 0..6 {
        pairs.push((
            t.user(&format!("a{i}")).await,
            t.user(&format!("b{i}")).await,
        ));
    }
    t.delay_edge_commits(0.2).await;
    let races = pairs.iter().enumerate().map(|(i, (a, b))| {
        let t = &t;
        async move {
            // Half the blocks by the follower, half by the followed.
            let blocker = if i % 2 == 0 { (*b, *a) } else { (*a, *b) };
            let (follow, blocked) = tokio::join!(t.follow(*a, *b), block(t, blocker.0, blocker.1));
            assert_ok(&blocked);
            assert!(
                error_code(&follow).is_none() || error_code(&follow) == Some("BLOCKED"),
                "{follow}"
            );
        }
    });
    futures::future::join_all(races).await;
    for (a, b) in &pairs {
        assert_ne!(t.edge(*a, *b).await.map(|e| e.0), Some(true), "{a} → {b}");
    }
    let report = t.verify(0).await;
    assert_eq!(
        report.counts.get(&Kind::FollowAcrossBlock),
        None,
        "{report}"
    );
}

#[tokio::test]
async fn verify_reports_a_follow_across_a_block() {
    let t = spawn_app().await;
    let (a, b) = (t.user("a").await, t.user("b").await);
    assert_ok(&t.follow(a, b).await);
    // Written past every guard, as a bug or an operator might.
    t.sql(&format!(
        "INSERT INTO block (from_user_id, to_user_id, active, blocked_at, version)
         VALUES ({b}, {a}, TRUE, date_trunc('milliseconds', now()), 1)"
    ))
    .await;
    let report = t.verify(0).await;
    assert_eq!(
        report.counts.get(&Kind::FollowAcrossBlock),
        Some(&1),
        "{report}"
    );
    // Reconcile ends it as an unfollow, with its event and counters.
    let summary = kith::testing::consistency::reconcile::reconcile(
        &t.app,
        kith::testing::consistency::reconcile::Scope::Full,
        100,
        false,
    )
    .await
    .unwrap();
    assert_eq!(summary.follows_across_ended, 1, "{summary}");
    assert_eq!(t.edge(a, b).await.map(|e| e.0), Some(false));
    assert_eq!(t.stats(a).await.0, 0);
    assert_eq!(
        t.outbox().await.last().map(|e| (e.from, e.to)),
        Some((a, b))
    );
    let report = t.verify(0).await;
    assert_eq!(
        report.counts.get(&Kind::FollowAcrossBlock),
        None,
        "{report}"
    );
}

/// A suspended account's follows are hidden, not ended; a block meanwhile
/// forgets them, so the account's restore brings none of them back.
#[tokio::test]
async fn a_restore_brings_back_no_follow_a_block_ended() {
    use kith::model::UserStatus;
    use kith::testing::write::lifecycle::set_status;

    let t = spawn_app().await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    assert_ok(&t.follow(a, b).await);
    assert_ok(&t.follow(b, a).await);
    assert_ok(&t.follow(c, b).await);
    set_status(&t.app, b, UserStatus::Suspended).await.unwrap();
    assert_eq!(t.edge(a, b).await.map(|e| e.0), Some(false), "hidden");
    // A suspended account can be blocked; the block outlives the suspension.
    assert_ok(&block(&t, a, b).await);
    set_status(&t.app, b, UserStatus::Active).await.unwrap();
    assert_eq!(t.edge(a, b).await.map(|e| e.0), Some(false));
    assert_eq!(t.edge(b, a).await.map(|e| e.0), Some(false));
    assert_eq!(
        t.edge(c, b).await.map(|e| e.0),
        Some(true),
        "others come back"
    );
    let refused = t.follow(b, a).await;
    assert_eq!(error_code(&refused), Some("BLOCKED"), "{refused}");
    let report = t.verify(0).await;
    assert_eq!(
        report.counts.get(&Kind::FollowAcrossBlock),
        None,
        "{report}"
    );
}

/// Fields of one document run in order; each answer shows the state after
/// its own write, not what an earlier field of the request loaded.
#[tokio::test]
async fn each_field_of_one_document_sees_its_own_write() {
    let t = spawn_app().await;
    let (a, b) = (t.user("a").await, t.user("b").await);
    let r = t
        .execute(
            Viewer::User(a),
            "mutation($id: ID!) {
                on: block(input: {userId: $id}) { viewerRelation { blocking } }
                off: unblock(input: {userId: $id}) { viewerRelation { blocking } }
            }",
            json!({ "id": gid(b) }),
        )
        .await;
    assert_ok(&r);
    assert_eq!(r["data"]["on"]["viewerRelation"]["blocking"], true);
    assert_eq!(r["data"]["off"]["viewerRelation"]["blocking"], false, "{r}");
}

/// A viewer an account blocks sees nothing of that account's graph, as on X
/// and Bluesky: its lists, the follows in common and "followers you know"
/// come back empty with a `BLOCKED` error, while its counts stay public and
/// the rest of the answer stands.
#[tokio::test]
async fn a_blocked_viewer_reads_nothing_of_the_blockers_lists() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 100).await;
    let (owner, viewer, friend, other) = (
        t.user("owner").await,
        t.user("viewer").await,
        t.user("friend").await,
        t.user("other").await,
    );
    for (from, to) in [
        (friend, owner),
        (owner, friend),
        (viewer, friend),
        (other, owner),
    ] {
        t.follow(from, to).await;
    }
    assert_eq!(
        block(&t, owner, viewer).await["data"]["block"]["changed"],
        true
    );
    let query = "query($id: ID!, $me: ID!) { user(id: $id) {
        handle
        counters { followers followings }
        followers(first: 10) { totalCount hidden edges { node { handle } } }
        following(first: 10) { totalCount hidden edges { node { handle } } }
        commonFollowing(with: $me, first: 10) { totalCount edges { node { handle } } }
        knownFollowers(first: 10) { totalCount edges { node { handle } } }
    } }";
    let vars = json!({ "id": gid(owner), "me": gid(viewer) });
    let r = t.execute(Viewer::User(viewer), query, vars.clone()).await;
    let user = &r["data"]["user"];
    assert_eq!(user["handle"], "owner", "{r}");
    assert_eq!(user["counters"]["followings"], 1, "{r}");
    for field in [
        "followers",
        "following",
        "commonFollowing",
        "knownFollowers",
    ] {
        assert_eq!(user[field]["edges"], json!([]), "{field}: {r}");
    }
    assert_eq!(user["following"]["totalCount"], 1, "{r}");
    assert_eq!(user["following"]["hidden"], true, "{r}");
    let errors = r["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 4, "{r}");
    for error in errors {
        assert_eq!(error["extensions"]["code"], "BLOCKED", "{r}");
    }
    let paths: Vec<&Value> = errors.iter().map(|e| &e["path"][1]).collect();
    for field in [
        "followers",
        "following",
        "commonFollowing",
        "knownFollowers",
    ] {
        assert!(paths.contains(&&json!(field)), "{field}: {r}");
    }
    // Viewed from the other side, or by anyone else, nothing is withheld.
    let r = t
        .execute(
            Viewer::User(other),
            query,
            json!({ "id": gid(owner), "me": gid(other) }),
        )
        .await;
    assert!(r["errors"].is_null(), "{r}");
    assert_eq!(
        r["data"]["user"]["following"]["edges"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "{r}"
    );
    let r = t
        .execute(
            Viewer::User(owner),
            query,
            json!({ "id": gid(owner), "me": gid(owner) }),
        )
        .await;
    assert!(r["errors"].is_null(), "{r}");
    // Lifted, the lists come back.
    unblock(&t, owner, viewer).await;
    let r = t.execute(Viewer::User(viewer), query, vars).await;
    assert!(r["errors"].is_null(), "{r}");
    assert_eq!(
        r["data"]["user"]["following"]["edges"],
        json!([{ "node": { "handle": "friend" } }]),
        "{r}"
    );
}

/// A block PostgreSQL rolls back to break a deadlock runs again: its caller
/// sees the block made, not the deadlock ([`deadlocked_block`]).
#[tokio::test]
async fn a_block_rolled_back_to_break_a_deadlock_runs_again() {
    let t = Arc::new(spawn_app().await);
    for attempt in 0..3 {
        let (a, b) = (
            t.user(&format!("a{attempt}")).await,
            t.user(&format!("b{attempt}")).await,
        );
        let Some(r) = deadlocked_block(&t, a, b).await else {
            continue;
        };
        assert_ok(&r);
        assert_eq!(r["data"]["block"]["changed"], true, "{r}");
        assert_eq!(
            r["data"]["block"]["viewerRelation"]["blocking"], true,
            "{r}"
        );
        return;
    }
    panic!("PostgreSQL broke each deadlock by rolling back the holder, not the block");
}

/// Runs `a`'s block of `b` into a deadlock. A transaction (the holder)
/// holds `a`'s row, which a new block locks to count it; once the block
/// waits for the holder, with the pair's lock taken, the holder asks for
/// that lock. PostgreSQL breaks the circle by rolling back the session
/// whose wait began first and reached `deadlock_timeout`: the block. The
/// holder then gets the pair's lock while it still holds the row, which
/// only a block rolled back can have let go of. The block's answer; `None`
/// when PostgreSQL rolled back the holder instead (its wait began too
/// late for the block's check).
async fn deadlocked_block(t: &Arc<TestApp>, a: UserId, b: UserId) -> Option<Value> {
    use diesel_async::{AsyncConnection as _, RunQueryDsl as _};

    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    #[derive(diesel::QueryableByName)]
    struct Pid {
        #[diesel(sql_type = diesel::sql_types::Integer)]
        pid: i32,
    }
    let mut watch = t.conn().await;
    let mut holder = t.conn().await;
    let held = holder
        .transaction::<_, diesel::result::Error, _>(async |conn| {
            let me: Pid = diesel::sql_query("SELECT pg_backend_pid() AS pid")
                .get_result(conn)
                .await?;
            diesel::sql_query(format!(
                "SELECT 1 FROM users WHERE id = {a} FOR NO KEY UPDATE"
            ))
            .execute(conn)
            .await?;
            let blocking = {
                let t = t.clone();
                tokio::spawn(async move { block(&t, a, b).await })
            };
            let waiting = format!(
                "SELECT count(*) AS n FROM pg_stat_activity s
                  WHERE {} = ANY(pg_blocking_pids(s.pid))
                    AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = s.pid
                                 AND l.locktype = 'advisory' AND l.granted)",
                me.pid
            );
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                let found: Count = diesel::sql_query(waiting.as_str())
                    .get_result(&mut *watch)
                    .await?;
                if found.n == 1 {
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the block never waited for the holder"
                );
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            diesel::sql_query(format!("SELECT kith_lock_pair({a}, {b})"))
                .execute(conn)
                .await?;
            Ok(blocking)
        })
        .await;
    match held {
        Ok(blocking) => Some(blocking.await.unwrap()),
        Err(e) if e.to_string().contains("deadlock detected") => None,
        Err(e) => panic!("the holder failed: {e}"),
    }
}
