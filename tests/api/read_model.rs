//! The read model: Relay connections from the list caches and PostgreSQL,
//! counters and relationships through DataLoaders, limits, round trips.

use std::collections::HashSet;
use std::sync::Arc;

use kith::model::UserId;
use kith::testing::auth::Viewer;
use kith::testing::paging::ListKey;
use kith::testing::paging::{PageRequest, Position};
use kith::testing::read::pages::{self, Source};
use serde_json::{Value, json};

use crate::helpers::{
    TestApp, assert_ok, error_code, eventually, seed_followers, spawn_app, spawn_app_with,
};

/// Walks a whole list through the read API; returns the items and where each page came from.
async fn walk(
    t: &TestApp,
    list: ListKey,
    forward: bool,
    n: usize,
) -> (Vec<Position>, HashSet<Source>) {
    let mut items = Vec::new();
    let mut sources = HashSet::new();
    let mut cursor = None;
    loop {
        let request = if forward {
            PageRequest::After(cursor, n)
        } else {
            PageRequest::Before(cursor, n)
        };
        let (page, source) = pages::page(&t.app, list, request, None).await.unwrap();
        sources.insert(source);
        if forward {
            items.extend(page.items.iter().copied());
            cursor = page.items.last().copied();
        } else {
            items.splice(0..0, page.items.iter().copied());
            cursor = page.items.first().copied();
        }
        if !page.more {
            return (items, sources);
        }
        assert!(items.len() <= 100_000, "walk does not end");
    }
}

async fn fill(t: &TestApp, list: ListKey) {
    assert!(
        pages::fill(&t.app, list, false).await.unwrap(),
        "fill granted"
    );
}

async fn flush(t: &TestApp, list: ListKey) {
    // A fill still running would write the list back: wait for it first.
    t.fills_finished().await;
    let mut redis = t.app.redis.get().await.unwrap();
    let keys = t.app.keys.list(list);
    let _: () = redis::cmd("DEL")
        .arg(&keys[..])
        .query_async(&mut *redis)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_thousand_followers_in_few_milliseconds_page_exactly_from_cache_and_postgres() {
    let t = spawn_app_with(|c| c.caches.list_cache_size = 5000).await;
    let target = t.user("target").await;
    let expected = seed_followers(&t, target, "f", 1000, 100).await;
    let list = ListKey::Followers(target);

    // PostgreSQL only: the store's keyset queries.
    let mut conn = t.conn().await;
    let mut from_pg = Vec::new();
    let mut cursor = None;
    loop {
        let page =
            kith::testing::store::lists::page(&mut conn, list, PageRequest::After(cursor, 37))
                .await
                .unwrap();
        from_pg.extend(page.items.iter().copied());
        cursor = page.items.last().copied();
        if !page.more {
            break;
        }
    }
    drop(conn);
    assert_eq!(from_pg, expected, "PostgreSQL pages forward");

    // The read path with the cache filled: every page from Redis.
    flush(&t, list).await;
    fill(&t, list).await;
    let (forward, sources) = walk(&t, list, true, 37).await;
    assert_eq!(forward, expected, "cache pages forward");
    assert_eq!(sources, HashSet::from([Source::Cache]));
    let (backward, sources) = walk(&t, list, false, 41).await;
    assert_eq!(backward, expected, "cache pages backward");
    assert_eq!(sources, HashSet::from([Source::Cache]));

    // PostgreSQL backward.
    let mut conn = t.conn().await;
    let mut items = Vec::new();
    let mut cursor = None;
    loop {
        let page =
            kith::testing::store::lists::page(&mut conn, list, PageRequest::Before(cursor, 29))
                .await
                .unwrap();
        items.splice(0..0, page.items.iter().copied());
        cursor = page.items.first().copied();
        if !page.more {
            break;
        }
    }
    assert_eq!(items, expected, "PostgreSQL pages backward");
}

#[tokio::test]
async fn a_partial_cache_serves_its_window_and_postgres_the_rest() {
    let t = spawn_app_with(|c| c.caches.list_cache_size = 150).await;
    let target = t.user("target").await;
    let expected = seed_followers(&t, target, "f", 400, 7).await;
    let list = ListKey::Followers(target);
    fill(&t, list).await;
    let (forward, sources) = walk(&t, list, true, 50).await;
    assert_eq!(forward, expected);
    assert_eq!(sources, HashSet::from([Source::Cache, Source::Postgres]));
    let (backward, _) = walk(&t, list, false, 50).await;
    assert_eq!(backward, expected);

    // Offsets and cursors deep beyond the window.
    let (page, source) = pages::page(&t.app, list, PageRequest::Offset(300, 50), None)
        .await
        .unwrap();
    assert_eq!(source, Source::Postgres);
    assert_eq!(page.items, expected[300..350]);
    assert!(page.more && page.other);
    let (page, _) = pages::page(
        &t.app,
        list,
        PageRequest::After(Some(expected[349]), 100),
        None,
    )
    .await
    .unwrap();
    assert_eq!(page.items, expected[350..400]);
    assert!(!page.more && page.other);
    let (page, source) = pages::page(&t.app, list, PageRequest::Offset(100, 40), None)
        .await
        .unwrap();
    assert_eq!(source, Source::Cache);
    assert_eq!(page.items, expected[100..140]);
}

/// Unfollows wear a partly cached head down (a celebrity losing followers,
/// an account moving away). The first read it no longer covers is served
/// by PostgreSQL and fills the list afresh, so the reads after it come from
/// the cache again; a page deeper than a fill reads fills nothing.
#[tokio::test]
async fn a_cached_head_unfollows_wore_down_is_filled_again() {
    let t = spawn_app_with(|c| c.caches.list_cache_size = 30).await;
    let target = t.user("target").await;
    let expected = seed_followers(&t, target, "f", 60, 7).await;
    let list = ListKey::Followers(target);
    fill(&t, list).await;
    let first = PageRequest::After(None, 10);
    let app = &t.app;
    let read = |request| async move { pages::page(app, list, request, None).await.unwrap() };
    assert_eq!(read(first).await.1, Source::Cache);

    // A page past the 30 newest a fill reads: PostgreSQL's, and no refill
    // (which would drop a member PostgreSQL does not have).
    let [zset, ..] = t.app.keys.list(list);
    let stray = expected[0].user;
    let mut redis = t.app.redis.get().await.unwrap();
    let _: () = redis::cmd("ZREM")
        .arg(&zset)
        .arg(format!("{:019}", stray.get()))
        .query_async(&mut *redis)
        .await
        .unwrap();
    let deep = PageRequest::Offset(30, 10);
    let (page, source) = read(deep).await;
    assert_eq!(
        (source, page.items.as_slice()),
        (Source::Postgres, &expected[30..40])
    );
    t.fills_finished().await;
    assert_eq!(t.cached_list(list).await.map(|l| l.len()), Some(29));
    assert_eq!(
        read(first).await.0.items,
        expected[1..11],
        "nothing refilled"
    );
    assert!(pages::fill(&t.app, list, true).await.unwrap());

    // The 25 newest unfollow, through the pipeline: the cached head keeps
    // 5 of its 30. The newest one's follow, as it was, arrives late.
    let (_, version) = t.edge(stray, target).await.unwrap();
    let late = kith::testing::cache::lists::EdgeState {
        list,
        other: stray,
        active: true,
        followed_at_ms: expected[0].followed_at_ms,
        version,
    };
    let relay = t.start_relay();
    let projector = t.start_projector(Arc::new(Default::default()));
    for gone in &expected[..25] {
        assert_ok(&t.unfollow(gone.user, target).await);
    }
    eventually("the unfollows to be projected", 60, || async {
        (t.cached_list(list).await.map(|l| l.len()) == Some(5)).then_some(())
    })
    .await;
    // A read within the fill's reach but past its newest half fills
    // nothing: the head stays as it is.
    let (page, source) = read(PageRequest::Offset(15, 5)).await;
    assert_eq!(
        (source, page.items.as_slice()),
        (Source::Postgres, &expected[40..45])
    );
    t.fills_finished().await;
    assert_eq!(t.cached_list(list).await.map(|l| l.len()), Some(5));
    let (page, source) = read(first).await;
    assert_eq!(
        (source, page.items.as_slice()),
        (Source::Postgres, &expected[25..35])
    );
    t.fills_finished().await;
    t.write_through(&[], &[late]).await;
    for (request, at) in [(first, 25), (PageRequest::Offset(10, 10), 35)] {
        let (page, source) = read(request).await;
        assert_eq!(
            (source, page.items.as_slice()),
            (Source::Cache, &expected[at..at + 10])
        );
    }
    assert_eq!(t.cached_list(list).await.map(|l| l.len()), Some(30));
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();
}

#[tokio::test]
async fn an_expired_cache_is_never_read_as_the_whole_list() {
    let t = spawn_app().await;
    let (alice, target) = (t.user("alice").await, t.user("target").await);
    let expected = seed_followers(&t, target, "f", 30, 1).await;
    let list = ListKey::Followers(target);
    fill(&t, list).await;
    // The cache expires…
    flush(&t, list).await;
    // …and a new follower arrives through the pipeline.
    let relay = t.start_relay();
    let projector = t.start_projector(Arc::new(Default::default()));
    assert_eq!(
        t.follow(alice, target).await["data"]["follow"]["changed"],
        true
    );
    eventually("the follow to be projected", 60, || async {
        (t.full_stats(target).await.followers == 31).then_some(())
    })
    .await;
    assert_eq!(
        t.cached_list(list).await,
        None,
        "no partial list was created"
    );
    let (page, _) = pages::page(&t.app, list, PageRequest::After(None, 100), None)
        .await
        .unwrap();
    assert_eq!(page.items.len(), 31);
    assert_eq!(page.items[0].user, alice);
    assert_eq!(page.items[1..], expected[..]);
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();
}

#[tokio::test]
async fn paging_while_follows_arrive_skips_and_repeats_nothing() {
    use kith::testing::cache::lists::EdgeState;
    use kith::testing::store::follower::{self, EdgeEvent};

    let t = spawn_app_with(|c| c.caches.list_cache_size = 100).await;
    let target = t.user("target").await;
    let expected = seed_followers(&t, target, "f", 300, 3).await;
    let list = ListKey::Followers(target);
    fill(&t, list).await;

    // Between every two pages a new follower arrives, applied exactly as the
    // projector applies it: the projection row, then the cached list.
    let mut seen = Vec::new();
    let mut sources = HashSet::new();
    let mut cursor = None;
    for step in 0.. {
        let (page, source) = pages::page(&t.app, list, PageRequest::After(cursor, 10), None)
            .await
            .unwrap();
        sources.insert(source);
        seen.extend(page.items.iter().copied());
        cursor = page.items.last().copied();
        if !page.more {
            break;
        }
        let newcomer = t.user(&format!("new{step}")).await;
        let at = chrono::Utc::now().timestamp_millis();
        let event = EdgeEvent {
            from: newcomer,
            to: target,
            active: true,
            followed_at: chrono::DateTime::from_timestamp_millis(at).unwrap(),
            version: 1,
        };
        follower::apply_many(&mut *t.conn().await, &[event])
            .await
            .unwrap();
        let edge = EdgeState {
            list,
            other: newcomer,
            active: true,
            followed_at_ms: at,
            version: 1,
        };
        t.write_through(&[], &[edge]).await;
    }
    assert_eq!(
        seen, expected,
        "every edge present for the whole walk, once, in order"
    );
    assert_eq!(
        sources,
        HashSet::from([Source::Cache, Source::Postgres]),
        "the walk crossed the cached window"
    );
    let (page, _) = pages::page(&t.app, list, PageRequest::After(None, 5), None)
        .await
        .unwrap();
    assert!(
        page.items[0].user != expected[0].user,
        "the newcomers are at the top"
    );
}

const PROFILE: &str = "query($id: ID!, $n: Int!) {
  user(id: $id) {
    handle
    counters { followings followers posts likesReceived favsReceived }
    followers(first: $n) {
      totalCount
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
      edges { cursor followedAt node { handle counters { followers followings } viewerRelation { following followedBy mutual } } }
    }
  }
}";

async fn profile(t: &TestApp, viewer: UserId, target: UserId, n: i64) -> Value {
    let id = kith::testing::graph::ids::user_id(target).to_string();
    t.execute(Viewer::User(viewer), PROFILE, json!({ "id": id, "n": n }))
        .await
}

#[tokio::test]
async fn a_warm_profile_query_costs_no_statement_and_two_redis_round_trips() {
    let t = spawn_app().await;
    let (viewer, target) = (t.user("viewer").await, t.user("target").await);
    let expected = seed_followers(&t, target, "f", 60, 2).await;
    fill(&t, ListKey::Followers(target)).await;
    // Cold: users, counters and relations come from PostgreSQL, and the 61
    // following lists the relations needed are filled in the background,
    // together. Once that fill is done, everything is warm.
    t.users_cached().await;
    let cold = {
        let before = t.app.round_trips.snapshot();
        assert_ok(&profile(&t, viewer, target, 60).await);
        t.app.round_trips.snapshot().0 - before.0
    };
    assert!(cold > 0, "a cold read asks PostgreSQL");
    t.fills_finished().await;

    let mut costs = Vec::new();
    for n in [5, 20, 60] {
        let before = t.app.round_trips.snapshot();
        let r = profile(&t, viewer, target, n).await;
        let after = t.app.round_trips.snapshot();
        assert_ok(&r);
        assert_eq!(
            r["data"]["user"]["followers"]["edges"]
                .as_array()
                .unwrap()
                .len(),
            n as usize
        );
        costs.push((after.0 - before.0, after.1 - before.1));
    }
    assert!(
        costs.iter().all(|c| *c == costs[0]),
        "round trips grow with the page: {costs:?}"
    );
    let (postgres, redis) = costs[0];
    assert!(postgres == 0 && redis <= 2, "(postgres, redis) = {costs:?}");
    let r = profile(&t, viewer, target, 20).await;
    let first = &r["data"]["user"]["followers"]["edges"][0]["node"];
    let expected_handle = {
        let mut conn = t.conn().await;
        kith::testing::store::users::find(&mut conn, expected[0].user)
            .await
            .unwrap()
            .unwrap()
            .handle
    };
    assert_eq!(first["handle"], expected_handle);
    assert_eq!(r["data"]["user"]["followers"]["totalCount"], 60);
}

#[tokio::test]
async fn counters_and_relationships_are_right_for_every_kind_of_relation() {
    let t = spawn_app().await;
    let (me, mutual, fan, idol, stranger) = (
        t.user("me").await,
        t.user("mutual").await,
        t.user("fan").await,
        t.user("idol").await,
        t.user("stranger").await,
    );
    for (a, b) in [(me, mutual), (mutual, me), (fan, me), (me, idol)] {
        assert_ok(&t.follow(a, b).await);
    }
    let ids: Vec<String> = [mutual, fan, idol, stranger, me]
        .iter()
        .map(|u| kith::testing::graph::ids::user_id(*u).to_string())
        .collect();
    let ghost =
        kith::testing::graph::ids::user_id(UserId::new(me.get() + 999).unwrap()).to_string();
    let mut all = ids.clone();
    all.push(ghost);
    let r = t
        .execute(
            Viewer::User(me),
            "query($ids: [ID!]!, $idol: ID!) {
               relationships(ids: $ids) { following followedBy mutual }
               users(ids: $ids) { handle counters { followings followers } viewerRelation { following followedBy } relationTo(other: $idol) { following } }
             }",
            json!({ "ids": all, "idol": ids[2] }),
        )
        .await;
    assert_ok(&r);
    let rel = &r["data"]["relationships"];
    assert_eq!(
        rel[0],
        json!({"following": true, "followedBy": true, "mutual": true})
    );
    assert_eq!(
        rel[1],
        json!({"following": false, "followedBy": true, "mutual": false})
    );
    assert_eq!(
        rel[2],
        json!({"following": true, "followedBy": false, "mutual": false})
    );
    assert_eq!(
        rel[3],
        json!({"following": false, "followedBy": false, "mutual": false})
    );
    assert_eq!(
        rel[4],
        json!({"following": false, "followedBy": false, "mutual": false})
    );
    assert!(rel[5].is_null(), "unknown users are null");
    let users = &r["data"]["users"];
    assert_eq!(users[0]["handle"], "mutual");
    assert!(users[5].is_null());
    assert_eq!(
        users[4]["counters"],
        json!({"followings": 2, "followers": 0}),
        "the viewer's own writes"
    );
    assert_eq!(users[0]["relationTo"]["following"], false);
    assert_eq!(users[4]["relationTo"]["following"], true);
    assert_eq!(
        users[1]["viewerRelation"],
        json!({"following": false, "followedBy": true})
    );
}

#[tokio::test]
async fn a_missing_or_malformed_counter_record_is_rebuilt() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    assert_ok(&t.follow(alice, bob).await);
    let mut redis = t.app.redis.get().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg(t.app.keys.counter_record(alice))
        .arg("garbage")
        .query_async(&mut *redis)
        .await
        .unwrap();
    drop(redis);
    let id = kith::testing::graph::ids::user_id(alice).to_string();
    let r = t
        .execute(
            Viewer::Anonymous,
            "query($id: ID!) { user(id: $id) { counters { followings followers } } }",
            json!({ "id": id }),
        )
        .await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["user"]["counters"],
        json!({"followings": 1, "followers": 0})
    );
    assert_eq!(
        t.counter_record(alice).await.unwrap().followings,
        1,
        "rebuilt and stored"
    );
}

/// A record of the layout before the format byte (five counts and the
/// version, 28 bytes), even one claiming a version no write will reach,
/// reads as missing and is replaced by the next write.
#[tokio::test]
async fn a_record_of_an_older_format_is_replaced() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    let mut old = vec![0u8; 20];
    old[3] = 7; // followings = 7
    old.extend_from_slice(&u64::MAX.to_be_bytes());
    let mut redis = t.app.redis.get().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg(t.app.keys.counter_record(alice))
        .arg(&old[..])
        .query_async(&mut *redis)
        .await
        .unwrap();
    drop(redis);
    assert_eq!(t.counter_record(alice).await, None, "read as missing");
    assert_ok(&t.follow(alice, bob).await);
    let id = kith::testing::graph::ids::user_id(alice).to_string();
    let r = t
        .execute(
            Viewer::Anonymous,
            "query($id: ID!) { user(id: $id) { counters { followings } } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        r["data"]["user"]["counters"],
        json!({"followings": 1}),
        "{r}"
    );
    assert_eq!(
        t.counter_record(alice).await.map(|r| r.followings),
        Some(1),
        "the write replaced the old record"
    );
}

#[tokio::test]
async fn paging_errors_have_codes() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    seed_followers(&t, alice, "f", 5, 1).await;
    seed_followers(&t, bob, "g", 5, 1).await;
    let q = |args: &str| {
        format!(
            "query($id: ID!) {{ user(id: $id) {{ followers({args}) {{ edges {{ cursor }} }} }} }}"
        )
    };
    let id = json!({ "id": kith::testing::graph::ids::user_id(alice).to_string() });
    let bob_id = json!({ "id": kith::testing::graph::ids::user_id(bob).to_string() });
    let r = t
        .execute(Viewer::Anonymous, &q("first: 2"), bob_id.clone())
        .await;
    let bobs_cursor = r["data"]["user"]["followers"]["edges"][0]["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = t
        .execute(Viewer::Anonymous, &q("first: 2"), id.clone())
        .await;
    let cursor = r["data"]["user"]["followers"]["edges"][0]["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut tampered = cursor.clone().into_bytes();
    tampered[10] = if tampered[10] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();

    for (args, code) in [
        (format!("first: 2, after: \"{bobs_cursor}\""), "BAD_CURSOR"),
        (format!("first: 2, after: \"{tampered}\""), "BAD_CURSOR"),
        ("first: 2, after: \"not a cursor\"".to_owned(), "BAD_CURSOR"),
        (format!("last: 2, before: \"{bobs_cursor}\""), "BAD_CURSOR"),
        ("first: 101".to_owned(), "INVALID_INPUT"),
        ("last: 101".to_owned(), "INVALID_INPUT"),
        ("first: -1".to_owned(), "INVALID_INPUT"),
        ("first: 2, last: 2".to_owned(), "INVALID_INPUT"),
        (format!("first: 2, before: \"{cursor}\""), "INVALID_INPUT"),
        ("offset: -5".to_owned(), "INVALID_INPUT"),
        (format!("offset: 5, after: \"{cursor}\""), "INVALID_INPUT"),
    ] {
        let r = t.execute(Viewer::Anonymous, &q(&args), id.clone()).await;
        assert_eq!(error_code(&r), Some(code), "{args}: {r}");
    }
    let r = t
        .execute(
            Viewer::Anonymous,
            &q(&format!("first: 2, after: \"{cursor}\"")),
            id.clone(),
        )
        .await;
    assert_ok(&r);

    let ids: Vec<String> = (0..101)
        .map(|_| kith::testing::graph::ids::user_id(alice).to_string())
        .collect();
    let r = t
        .execute(
            Viewer::Anonymous,
            "query($ids: [ID!]!) { users(ids: $ids) { handle } }",
            json!({ "ids": ids }),
        )
        .await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
}

#[tokio::test]
async fn deep_and_complex_queries_are_refused_before_running() {
    let t = spawn_app().await;
    let alice = t.user("alice").await;
    let id = json!({ "id": kith::testing::graph::ids::user_id(alice).to_string() });
    let mut deep = String::from("handle");
    for _ in 0..12 {
        deep = format!("followers(first: 1) {{ edges {{ node {{ {deep} }} }} }}");
    }
    let r = t
        .execute(
            Viewer::Anonymous,
            &format!("query($id: ID!) {{ user(id: $id) {{ {deep} }} }}"),
            id.clone(),
        )
        .await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    assert!(r["data"].is_null());

    let wide = "followers(first: 100) { edges { node { followers(first: 100) { edges { node { handle counters { followers } } } } } } }";
    let before = t.app.round_trips.snapshot();
    let r = t
        .execute(
            Viewer::Anonymous,
            &format!("query($id: ID!) {{ user(id: $id) {{ {wide} }} }}"),
            id,
        )
        .await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    assert!(
        r["errors"][0]["message"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("complex"),
        "{r}"
    );
    assert_eq!(t.app.round_trips.snapshot(), before, "nothing ran");
}

#[tokio::test]
async fn a_hundred_thousand_followers_page_one_and_deep() {
    // Deep offsets are an operator's choice: this deployment allows them.
    let t = spawn_app_with(|c| c.limits.max_offset = 100_000).await;
    let target = t.user("star").await;
    let expected = seed_followers(&t, target, "fan", 100_000, 50).await;
    let id = kith::testing::graph::ids::user_id(target).to_string();
    let query = "query($id: ID!, $after: String, $offset: Int) {
        user(id: $id) { followers(first: 50, after: $after, offset: $offset) {
            totalCount pageInfo { hasNextPage hasPreviousPage endCursor } edges { node { handle } followedAt } } } }";
    let handles: std::collections::HashMap<UserId, String> = {
        let mut conn = t.conn().await;
        let ids: Vec<UserId> = expected.iter().map(|p| p.user).collect();
        kith::testing::store::users::find_many(&mut conn, &ids)
            .await
            .unwrap()
            .into_iter()
            .map(|u| (u.id, u.handle))
            .collect()
    };
    let handle_of = |i: usize| handles[&expected[i].user].clone();

    let r = t
        .execute(Viewer::Anonymous, query, json!({ "id": id }))
        .await;
    assert_ok(&r);
    let page = &r["data"]["user"]["followers"];
    assert_eq!(page["totalCount"], 100_000);
    assert_eq!(page["edges"].as_array().unwrap().len(), 50);
    assert_eq!(page["edges"][0]["node"]["handle"], handle_of(0));
    assert_eq!(page["pageInfo"]["hasNextPage"], true);
    // Page one of a celebrity comes from process memory from now on.
    let (_, source) = pages::page(
        &t.app,
        ListKey::Followers(target),
        PageRequest::After(None, 50),
        Some(100_000),
    )
    .await
    .unwrap();
    assert_eq!(source, Source::Hot);

    let r = t
        .execute(
            Viewer::Anonymous,
            query,
            json!({ "id": id, "offset": 90_000 }),
        )
        .await;
    assert_ok(&r);
    let page = &r["data"]["user"]["followers"];
    assert_eq!(page["edges"][0]["node"]["handle"], handle_of(90_000));
    assert_eq!(page["edges"][49]["node"]["handle"], handle_of(90_049));
    let cursor = page["pageInfo"]["endCursor"].as_str().unwrap().to_owned();
    let r = t
        .execute(
            Viewer::Anonymous,
            query,
            json!({ "id": id, "after": cursor }),
        )
        .await;
    assert_ok(&r);
    let page = &r["data"]["user"]["followers"];
    assert_eq!(page["edges"][0]["node"]["handle"], handle_of(90_050));
    assert_eq!(page["pageInfo"]["hasPreviousPage"], true);
}

/// A hot list's loads come from Redis: the loader fills a list Redis does
/// not cache, as any read does, instead of reading PostgreSQL each time.
#[tokio::test]
async fn a_hot_list_not_cached_in_redis_is_filled_by_its_loader() {
    // Every list is hot.
    let t = spawn_app_with(|c| c.caches.hot_threshold = 1).await;
    let (fan, star) = (t.user("hot_fan").await, t.user("hot_star").await);
    assert_ok(&t.follow(fan, star).await);
    let list = ListKey::Following(fan);
    let head = PageRequest::After(None, 10);
    let (_, source) = pages::page(&t.app, list, head, Some(1)).await.unwrap();
    assert_eq!(source, Source::Hot);
    // Redis loses the list, and this process's own follow drops what it
    // holds: the next load reads PostgreSQL and fills the list cache.
    flush(&t, list).await;
    let next = t.user("hot_next").await;
    assert_ok(&t.follow(fan, next).await);
    let (page, source) = pages::page(&t.app, list, head, Some(2)).await.unwrap();
    assert_eq!(source, Source::Hot);
    assert_eq!(page.items[0].user, next);
    t.fills_finished().await;
    assert_eq!(t.cached_list(list).await, Some(vec![next, star]));
}

/// Walks a connection through GraphQL; returns the user ids in list order.
async fn walk_graphql(t: &TestApp, target: UserId, forward: bool, n: i64) -> Vec<UserId> {
    let id = kith::testing::graph::ids::user_id(target).to_string();
    let (args, info) = if forward {
        ("first: $n, after: $cursor", "hasNextPage endCursor")
    } else {
        ("last: $n, before: $cursor", "hasPreviousPage startCursor")
    };
    let query = format!(
        "query($id: ID!, $n: Int!, $cursor: String) {{ user(id: $id) {{ followers({args}) {{
            totalCount pageInfo {{ {info} }} edges {{ cursor node {{ id }} }} }} }} }}"
    );
    let mut ids = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let r = t
            .execute(
                Viewer::Anonymous,
                &query,
                json!({ "id": id, "n": n, "cursor": cursor }),
            )
            .await;
        assert_ok(&r);
        let connection = &r["data"]["user"]["followers"];
        let page: Vec<UserId> = connection["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let id = async_graphql::ID(e["node"]["id"].as_str().unwrap().to_owned());
                kith::testing::graph::ids::decode_user(&id).unwrap()
            })
            .collect();
        let info = &connection["pageInfo"];
        if forward {
            ids.extend(page);
            cursor = info["endCursor"].clone();
            if info["hasNextPage"] != true {
                return ids;
            }
        } else {
            ids.splice(0..0, page);
            cursor = info["startCursor"].clone();
            if info["hasPreviousPage"] != true {
                return ids;
            }
        }
    }
}

#[tokio::test]
async fn graphql_connections_walk_a_thousand_followers_both_ways() {
    let t = spawn_app_with(|c| c.caches.list_cache_size = 300).await;
    let target = t.user("target").await;
    let expected: Vec<UserId> = seed_followers(&t, target, "f", 1000, 250)
        .await
        .iter()
        .map(|p| p.user)
        .collect();
    assert_eq!(walk_graphql(&t, target, true, 100).await, expected);
    assert_eq!(walk_graphql(&t, target, false, 100).await, expected);
    assert_eq!(walk_graphql(&t, target, true, 33).await, expected);
}

#[tokio::test]
async fn concurrent_misses_fill_a_list_once() {
    let t = Arc::new(spawn_app().await);
    let target = t.user("target").await;
    seed_followers(&t, target, "f", 50, 1).await;
    let list = ListKey::Followers(target);
    let mut fills = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let t = t.clone();
        fills.spawn(async move { pages::fill(&t.app, list, false).await.unwrap() });
    }
    let mut granted = 0;
    while let Some(done) = fills.join_next().await {
        granted += i32::from(done.unwrap());
    }
    assert_eq!(granted, 1, "one filler");
    assert_eq!(t.cached_list(list).await.unwrap().len(), 50);
}

#[tokio::test]
async fn the_following_list_reads_the_truth() {
    let t = spawn_app().await;
    let (me, a, b, c) = (
        t.user("me").await,
        t.user("a").await,
        t.user("b").await,
        t.user("c").await,
    );
    for other in [a, b, c] {
        assert_ok(&t.follow(me, other).await);
    }
    assert_ok(&t.unfollow(me, b).await);
    let r = t
        .execute(
            Viewer::User(me),
            "query($id: ID!) { user(id: $id) { following(first: 10) { totalCount edges { node { handle } } } } }",
            json!({ "id": kith::testing::graph::ids::user_id(me).to_string() }),
        )
        .await;
    assert_ok(&r);
    let following = &r["data"]["user"]["following"];
    assert_eq!(following["totalCount"], 2);
    let handles: Vec<&str> = following["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["handle"].as_str().unwrap())
        .collect();
    assert_eq!(handles, ["c", "a"], "newest first, without the unfollowed");
}

#[tokio::test]
async fn reads_survive_a_redis_outage_and_writes_fail_closed() {
    let t = spawn_app().await;
    let (viewer, target) = (t.user("viewer").await, t.user("target").await);
    let expected = seed_followers(&t, target, "f", 30, 2).await;
    let app = t.without_redis();
    let schema = kith::testing::graph::schema(app.clone());
    let run = |query: &'static str| {
        let (app, schema) = (app.clone(), schema.clone());
        let variables = json!({ "id": kith::testing::graph::ids::user_id(target).to_string() });
        async move {
            let request = async_graphql::Request::new(query)
                .variables(async_graphql::Variables::from_json(variables));
            serde_json::to_value(
                kith::testing::graph::run::run(
                    &schema,
                    &app,
                    request,
                    Viewer::User(viewer),
                    kith::testing::graph::run::QueryText::Unresolved,
                )
                .await
                .response,
            )
            .unwrap()
        }
    };
    let r = run("query($id: ID!) { user(id: $id) { counters { followers } followers(first: 10) { edges { node { id } } } } }").await;
    assert_ok(&r);
    assert_eq!(r["data"]["user"]["counters"]["followers"], 30);
    let first = r["data"]["user"]["followers"]["edges"][0]["node"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        first,
        kith::testing::graph::ids::user_id(expected[0].user).to_string()
    );

    let before = t.snapshot().await;
    let r = run("mutation($id: ID!) { follow(input: {userId: $id}) { changed } }").await;
    assert_eq!(error_code(&r), Some("UNAVAILABLE"), "{r}");
    assert_eq!(
        t.snapshot().await,
        before,
        "nothing written without the rate limiter"
    );
}

#[tokio::test]
async fn a_change_during_a_fill_survives_and_a_lapsed_fill_cannot_commit() {
    use kith::testing::cache::lists::{EdgeState, FillClaim, ListEntry, begin_fill, commit_fill};
    let t = spawn_app().await;
    let target = t.user("target").await;
    let list = ListKey::Followers(target);
    let seeded = seed_followers(&t, target, "w", 3, 1).await;
    let ttl = std::time::Duration::from_secs(60);
    let mut redis = t.app.redis.get().await.unwrap();

    // The filler claims the list and reads PostgreSQL…
    let claim = begin_fill(&mut *redis, &t.app.keys, list, "a", false)
        .await
        .unwrap();
    assert_eq!(claim, FillClaim::Granted);
    let read: Vec<ListEntry> = seeded
        .iter()
        .map(|p| ListEntry {
            user: p.user,
            followed_at_ms: p.followed_at_ms,
            version: 1,
        })
        .collect();
    // …then the newest follower unfollows (version 2) before the fill commits.
    let gone = seeded[0];
    t.write_through(
        &[],
        &[EdgeState {
            list,
            other: gone.user,
            active: false,
            followed_at_ms: gone.followed_at_ms,
            version: 2,
        }],
    )
    .await;
    assert!(
        commit_fill(&mut *redis, &t.app.keys, list, "a", ttl, &read, true)
            .await
            .unwrap()
    );
    assert_eq!(
        t.cached_list(list).await.unwrap(),
        vec![seeded[1].user, seeded[2].user],
        "the unfollow that landed during the fill survives it"
    );

    // A filler whose claim lapsed (and was taken over) writes nothing.
    let rebuild = begin_fill(&mut *redis, &t.app.keys, list, "b", true)
        .await
        .unwrap();
    assert_eq!(rebuild, FillClaim::Granted);
    let [_, _, coverage] = t.app.keys.list(list);
    let _: () = redis::cmd("PEXPIRE")
        .arg(&coverage)
        .arg(1)
        .query_async(&mut *redis)
        .await
        .unwrap();
    eventually("the claim to lapse", 5, || async {
        let mut redis = t.app.redis.get().await.unwrap();
        let exists: bool = redis::cmd("EXISTS")
            .arg(&coverage)
            .query_async(&mut *redis)
            .await
            .unwrap();
        (!exists).then_some(())
    })
    .await;
    let taken = begin_fill(&mut *redis, &t.app.keys, list, "c", false)
        .await
        .unwrap();
    assert_eq!(taken, FillClaim::Granted);
    assert!(
        !commit_fill(&mut *redis, &t.app.keys, list, "b", ttl, &read, true)
            .await
            .unwrap(),
        "a lapsed claim cannot commit"
    );
    assert!(
        commit_fill(&mut *redis, &t.app.keys, list, "c", ttl, &read[1..], true)
            .await
            .unwrap()
    );
    assert_eq!(
        t.cached_list(list).await.unwrap(),
        vec![seeded[1].user, seeded[2].user]
    );
}

#[tokio::test]
async fn a_refill_never_brings_back_an_edge_a_late_update_names() {
    use kith::testing::cache::lists::{
        EdgeState, FillClaim, begin_fill, commit_fill, commit_fills,
    };
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    let list = ListKey::Following(alice);
    assert!(pages::fill(&t.app, list, false).await.unwrap());
    t.follow(alice, bob).await;
    let (_, version) = t.edge(alice, bob).await.unwrap();
    // The follow's update to alice's list, as the write path sent it — to
    // arrive late, after the unfollow and a refill began.
    let late = EdgeState {
        list,
        other: bob,
        active: true,
        followed_at_ms: chrono::Utc::now().timestamp_millis(),
        version,
    };
    t.unfollow(alice, bob).await;
    assert_eq!(t.cached_list(list).await.unwrap(), Vec::<UserId>::new());
    let ttl = std::time::Duration::from_secs(60);
    let mut redis = t.app.redis.get().await.unwrap();

    // The list expires (its marker and its ZSet; the member versions
    // outlive it), a read refills it, and the late update lands meanwhile;
    // the filler commits what it read (bob's edge is not active).
    let [zset, _, coverage] = t.app.keys.list(list);
    let _: () = redis::cmd("DEL")
        .arg(&zset)
        .arg(&coverage)
        .query_async(&mut *redis)
        .await
        .unwrap();
    let claim = begin_fill(&mut *redis, &t.app.keys, list, "refill", false)
        .await
        .unwrap();
    assert_eq!(claim, FillClaim::Granted);
    t.write_through(&[], &[late]).await;
    assert!(
        commit_fill(&mut *redis, &t.app.keys, list, "refill", ttl, &[], true)
            .await
            .unwrap()
    );
    assert_eq!(
        t.cached_list(list).await.unwrap(),
        Vec::<UserId>::new(),
        "the unfollow's tombstone outlives the expiry and the refill"
    );

    // A repair starts from no versions at all (they could be what it
    // repairs): the late update lands during it; the fill names the member
    // it did not read, and the filler sets it from the truth.
    let claim = begin_fill(&mut *redis, &t.app.keys, list, "repair", true)
        .await
        .unwrap();
    assert_eq!(claim, FillClaim::Granted);
    t.write_through(&[], &[late]).await;
    let fill = kith::testing::cache::lists::Fill {
        list,
        entries: &[],
        complete: true,
    };
    let unread = commit_fills(&mut *redis, &t.app.keys, "repair", ttl, &[fill])
        .await
        .unwrap();
    assert_eq!(unread, vec![Some(vec![bob])]);
    drop(redis);
    pages::recheck(&t.app, &[(list, bob)]).await.unwrap();
    assert_eq!(t.cached_list(list).await.unwrap(), Vec::<UserId>::new());
}

/// The list is not cached when the unfollow is made, so no cached list
/// holds the removal; its tombstone must still meet the follow's update
/// that arrives late, during the list's first fill.
#[tokio::test]
async fn a_removal_from_an_uncached_list_leaves_a_tombstone_a_fill_keeps() {
    use kith::testing::cache::lists::{EdgeState, FillClaim, begin_fill, commit_fill};
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    let list = ListKey::Following(alice);
    assert_ok(&t.follow(alice, bob).await);
    let (_, version) = t.edge(alice, bob).await.unwrap();
    let late = EdgeState {
        list,
        other: bob,
        active: true,
        followed_at_ms: chrono::Utc::now().timestamp_millis(),
        version,
    };
    let [zset, versions, coverage] = t.app.keys.list(list);
    let mut redis = t.app.redis.get().await.unwrap();
    let exists = |key: &str| redis::cmd("EXISTS").arg(key).clone();
    let cached: bool = exists(&coverage).query_async(&mut *redis).await.unwrap();
    assert!(!cached, "nothing filled alice's list");
    assert_ok(&t.unfollow(alice, bob).await);
    // No list is made; only the tombstone is kept, for a while.
    let listed: bool = exists(&zset).query_async(&mut *redis).await.unwrap();
    assert!(!listed);
    let kept: i64 = redis::cmd("PTTL")
        .arg(&versions)
        .query_async(&mut *redis)
        .await
        .unwrap();
    assert!((1..=120_000).contains(&kept), "tombstone kept {kept} ms");

    let claim = begin_fill(&mut *redis, &t.app.keys, list, "first", false)
        .await
        .unwrap();
    assert_eq!(claim, FillClaim::Granted);
    t.write_through(&[], &[late]).await;
    let ttl = std::time::Duration::from_secs(60);
    assert!(
        commit_fill(&mut *redis, &t.app.keys, list, "first", ttl, &[], true)
            .await
            .unwrap()
    );
    assert_eq!(
        t.cached_list(list).await.unwrap(),
        Vec::<UserId>::new(),
        "the late follow does not come back"
    );
}

#[tokio::test]
async fn a_heavy_viewers_relations_come_from_the_cache_alone() {
    // Lists cache their 10 newest edges, following lists whole (up to
    // `following_cache_size`): the viewer follows 40, and the 5 a page shows
    // were followed first, so a window of the newest 10 would miss them.
    let t = spawn_app_with(|c| {
        c.caches.list_cache_size = 10;
        c.writes.rate_limit_capacity = 1000;
    })
    .await;
    let (viewer, target) = (t.user("viewer").await, t.user("target").await);
    let followers = seed_followers(&t, target, "f", 60, 2).await;
    for position in &followers[..40] {
        assert_ok(&t.follow(viewer, position.user).await);
    }
    fill(&t, ListKey::Followers(target)).await;
    t.users_cached().await;
    assert_ok(&profile(&t, viewer, target, 5).await);
    t.fills_finished().await;
    let before = t.app.round_trips.snapshot().0;
    let warm = profile(&t, viewer, target, 5).await;
    assert_ok(&warm);
    assert_eq!(
        t.app.round_trips.snapshot().0,
        before,
        "a warm read asked PostgreSQL"
    );
    for edge in warm["data"]["user"]["followers"]["edges"]
        .as_array()
        .unwrap()
    {
        assert_eq!(edge["node"]["viewerRelation"]["following"], true, "{edge}");
    }
}

const RELATIONSHIPS: &str =
    "query($ids: [ID!]!) { relationships(ids: $ids) { following followedBy mutual } }";

#[tokio::test]
async fn relations_read_from_a_partly_cached_following_list_agree_with_the_truth() {
    // Lists cache their 10 newest edges: the viewer's list of 30 is cached in part.
    let t = spawn_app_with(|c| {
        c.caches.list_cache_size = 10;
        c.caches.following_cache_size = 10;
        c.writes.rate_limit_capacity = 1000;
    })
    .await;
    let viewer = t.user("viewer").await;
    let mut followed = Vec::new();
    for i in 0..30 {
        let user = t.user(&format!("f{i}")).await;
        assert_ok(&t.follow(viewer, user).await);
        followed.push(user);
    }
    for user in followed.iter().step_by(3) {
        assert_ok(&t.follow(*user, viewer).await);
    }
    let mut strangers = Vec::new();
    for i in 0..5 {
        strangers.push(t.user(&format!("s{i}")).await);
    }
    let everyone: Vec<UserId> = followed.iter().chain(&strangers).copied().collect();
    let ids: Vec<String> = everyone
        .iter()
        .map(|u| kith::testing::graph::ids::user_id(*u).to_string())
        .collect();
    let ask = || t.execute(Viewer::User(viewer), RELATIONSHIPS, json!({ "ids": ids }));

    // Cold, then once the fills are done: the same answers, the truth's.
    let cold = ask().await;
    assert_ok(&cold);
    t.fills_finished().await;
    let coverage = {
        let mut redis = t.app.redis.get().await.unwrap();
        kith::testing::cache::lists::coverages(
            &mut *redis,
            &t.app.keys,
            &[ListKey::Following(viewer)],
        )
        .await
        .unwrap()
    };
    assert!(
        matches!(coverage[0], kith::testing::cache::lists::Coverage::Down(_)),
        "the viewer's list is cached in part: {coverage:?}"
    );
    let warm = ask().await;
    assert_eq!(warm, cold);
    for (i, user) in everyone.iter().enumerate() {
        let answer = &warm["data"]["relationships"][i];
        let following = followed.contains(user);
        let followed_by = followed.iter().step_by(3).any(|u| u == user);
        assert_eq!(answer["following"], following, "{user}: {answer}");
        assert_eq!(answer["followedBy"], followed_by, "{user}: {answer}");
        assert_eq!(
            answer["mutual"],
            following && followed_by,
            "{user}: {answer}"
        );
    }
    // An unfollow shows at once, in the cached part and below it.
    for user in [followed[29], followed[0]] {
        assert_ok(&t.unfollow(viewer, user).await);
    }
    let after = ask().await;
    assert_eq!(after["data"]["relationships"][29]["following"], false);
    assert_eq!(after["data"]["relationships"][0]["following"], false);
    assert_eq!(after["data"]["relationships"][1]["following"], true);
}

#[tokio::test]
async fn a_page_of_a_hundred_needing_more_lists_than_one_fill_takes_still_warms() {
    let t = spawn_app().await;
    let (viewer, target) = (t.user("viewer").await, t.user("target").await);
    seed_followers(&t, target, "f", 100, 1).await;
    fill(&t, ListKey::Followers(target)).await;
    t.users_cached().await;
    // 101 following lists to fill: more than one background fill takes on.
    let mut statements = Vec::new();
    for _ in 0..3 {
        let before = t.app.round_trips.snapshot().0;
        assert_ok(&profile(&t, viewer, target, 100).await);
        statements.push(t.app.round_trips.snapshot().0 - before);
        t.fills_finished().await;
    }
    assert_eq!(statements[2], 0, "statements per read: {statements:?}");
}

/// A batch's states of one list go to Redis as a few calls, each applying
/// many states in order: a later state of a member wins, a stale one is
/// ignored, and a list that is not cached keeps only its tombstones.
#[tokio::test]
async fn a_batch_of_states_for_one_list_applies_in_order() {
    use kith::testing::cache::lists::EdgeState;
    let t = spawn_app().await;
    let target = t.user("target").await;
    let list = ListKey::Followers(target);
    fill(&t, list).await;
    let uncached = ListKey::Following(t.user("other").await);
    let at = chrono::Utc::now().timestamp_millis();
    let state = |list, id: i64, active, version| EdgeState {
        list,
        other: UserId::new(id).unwrap(),
        active,
        followed_at_ms: at + id,
        version,
    };
    let mut edges: Vec<EdgeState> = (1_000..1_150).map(|id| state(list, id, true, 1)).collect();
    edges.extend([
        state(list, 7, true, 1),
        state(uncached, 7, false, 3),
        state(list, 7, false, 2),
        state(list, 8, true, 2),
        state(list, 8, false, 1),
    ]);
    let mut redis = t.app.redis.get().await.unwrap();
    t.write_through(&[], &edges).await;
    let held: HashSet<UserId> = t.cached_list(list).await.unwrap().into_iter().collect();
    let expected: HashSet<UserId> = (1_000..1_150)
        .chain([8])
        .map(|id| UserId::new(id).unwrap())
        .collect();
    assert_eq!(
        held, expected,
        "7 removed after its add; 8's stale removal ignored"
    );
    let [zset, versions, _] = t.app.keys.list(uncached);
    let listed: bool = redis::cmd("EXISTS")
        .arg(&zset)
        .query_async(&mut *redis)
        .await
        .unwrap();
    assert!(!listed, "no list is made for a list not cached");
    let tombstone: Option<i64> = redis::cmd("HGET")
        .arg(&versions)
        .arg(format!("{:019}", 7))
        .query_async(&mut *redis)
        .await
        .unwrap();
    assert_eq!(tombstone, Some(3), "the removal's tombstone is kept");
}

/// On one Redis server a script call writes the records and lists of many
/// users (on a cluster, one user's a call): each is written as it would
/// be alone — a list only where cached (a removal from one that is not
/// leaves its tombstone), a record only where newer.
#[tokio::test]
async fn one_call_writes_each_list_and_record_as_alone() {
    use kith::testing::cache::counters::CounterRecord;
    use kith::testing::cache::lists::EdgeState;
    let t = spawn_app().await;
    let [alice, bob, carol, dave] = [
        t.user("alice").await,
        t.user("bob").await,
        t.user("carol").await,
        t.user("dave").await,
    ];
    let (cached, uncached) = (ListKey::Following(alice), ListKey::Following(bob));
    assert!(pages::fill(&t.app, cached, false).await.unwrap());
    let record = |followers, version| CounterRecord {
        followings: 0,
        followers,
        posts: 0,
        likes_received: 0,
        favs_received: 0,
        version,
    };
    let edge = |list, other, active, version, followed_at_ms| EdgeState {
        list,
        other,
        active,
        followed_at_ms,
        version,
    };
    t.write_through(&[(dave, record(7, 7))], &[]).await;
    t.write_through(
        // The newer record last: a call that stopped after its first key
        // would leave it out.
        &[(dave, record(6, 6)), (carol, record(5, 5))],
        &[
            edge(cached, carol, true, 1, 1_000),
            edge(uncached, dave, false, 2, 2_000),
            edge(cached, dave, true, 1, 3_000),
            // Older than the state just applied: left alone.
            edge(cached, carol, false, 1, 1_000),
        ],
    )
    .await;
    assert_eq!(t.cached_list(cached).await.unwrap(), vec![dave, carol]);
    assert_eq!(t.cached_list(uncached).await, None, "not cached, still");
    let mut redis = t.app.redis.get().await.unwrap();
    let versions: Option<i64> = redis::cmd("HGET")
        .arg(&t.app.keys.list(uncached)[1])
        .arg(format!("{:019}", dave.get()))
        .query_async(&mut *redis)
        .await
        .unwrap();
    assert_eq!(versions, Some(2), "the removal's tombstone");
    // Only a list that is not cached gives its tombstones a life of their own.
    let life: i64 = redis::cmd("PTTL")
        .arg(&t.app.keys.list(uncached)[1])
        .query_async(&mut *redis)
        .await
        .unwrap();
    assert!(life > 0, "the tombstone expires: {life}");
    assert_eq!(t.counter_record(carol).await, Some(record(5, 5)), "stored");
    assert_eq!(
        t.counter_record(dave).await,
        Some(record(7, 7)),
        "newer kept"
    );
}
