//! One definition of a page, four implementations: for random lists with
//! many follows in one millisecond, random cursors (at, around and far from
//! the coverage bound, present or not) and every paging mode, a page served
//! by the Redis list cache (`lua/list_page.lua`), a page cut from the whole
//! list in memory (`paging::page_of`, which pages the intersections) and one
//! cut from its newest edges (`paging::page_of_head`, which pages the hot
//! lists) must equal the page PostgreSQL serves for the same request —
//! items, `more` and `other` (which become `hasNextPage` /
//! `hasPreviousPage`).

use kith::model::UserId;
use kith::testing::cache::lists::{self, FillClaim, ListEntry};
use kith::testing::paging::{ListKey, PageRequest, Position};
use kith::testing::store::lists as store_lists;
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_ok, seed_followers, spawn_app};
use crate::rng::Rng;

/// Caches the newest `k` edges of `list` (the whole list when it has fewer).
async fn cache_newest(t: &TestApp, list: ListKey, k: usize) -> bool {
    let rows = store_lists::newest(&mut *t.conn().await, list, k)
        .await
        .unwrap();
    let entries: Vec<ListEntry> = rows
        .iter()
        .map(|r| ListEntry {
            user: UserId::new(r.member).unwrap(),
            followed_at_ms: r.followed_at.timestamp_millis(),
            version: r.version,
        })
        .collect();
    let mut redis = t.app.redis.get().await.unwrap();
    let [zset, versions, coverage] = t.app.keys.list(list);
    let _: () = redis::cmd("DEL")
        .arg(&[zset, versions, coverage])
        .query_async(&mut *redis)
        .await
        .unwrap();
    let claim = lists::begin_fill(&mut *redis, &t.app.keys, list, "p", false)
        .await
        .unwrap();
    assert_eq!(claim, FillClaim::Granted);
    let complete = rows.len() < k;
    lists::commit_fill(
        &mut *redis,
        &t.app.keys,
        list,
        "p",
        std::time::Duration::from_secs(600),
        &entries,
        complete,
    )
    .await
    .unwrap();
    complete
}

/// Cursors worth trying: every kind of position near the interesting places.
fn cursor(rng: &mut Rng, items: &[Position], bound: Option<usize>) -> Position {
    let pick = |i: usize| items[i.min(items.len().saturating_sub(1))];
    let base = match (rng.below(4), bound, items.is_empty()) {
        (_, _, true) => Position {
            followed_at_ms: 1_700_000_000_000,
            user: UserId::new(1).unwrap(),
        },
        (0, Some(b), _) => pick((b + rng.below(3) as usize).saturating_sub(1)),
        _ => pick(rng.below(items.len() as u64) as usize),
    };
    // At the position, or just beside it (same millisecond, other id; or another millisecond).
    match rng.below(6) {
        0 => Position {
            user: UserId::new((base.user.get() + 1).max(1)).unwrap(),
            ..base
        },
        1 => Position {
            user: UserId::new((base.user.get() - 1).max(1)).unwrap(),
            ..base
        },
        2 => Position {
            followed_at_ms: base.followed_at_ms + 1,
            ..base
        },
        3 => Position {
            followed_at_ms: base.followed_at_ms - 1,
            ..base
        },
        _ => base,
    }
}

/// Makes `owner` follow `n` new users, `per_ms` of them in each millisecond,
/// directly in the truth; returns the list newest first.
async fn seed_following(
    t: &TestApp,
    owner: UserId,
    prefix: &str,
    n: i64,
    per_ms: i64,
) -> Vec<Position> {
    use diesel::sql_types::{BigInt, Text};
    use diesel_async::RunQueryDsl as _;
    let mut conn = t.conn().await;
    kith::testing::store::users::seed(&mut conn, prefix, n)
        .await
        .unwrap();
    diesel::sql_query(
        "INSERT INTO following (from_user_id, to_user_id, active, followed_at, version)
         SELECT $1, id, TRUE,
                'epoch'::timestamptz
                  + (1700000000000 + (row_number() OVER (ORDER BY id) - 1) / $2) * interval '1 millisecond', 1
           FROM users WHERE handle LIKE $3 || '%'",
    )
    .bind::<BigInt, _>(owner.get())
    .bind::<BigInt, _>(per_ms)
    .bind::<Text, _>(prefix)
    .execute(&mut conn)
    .await
    .unwrap();
    store_lists::newest(&mut conn, ListKey::Following(owner), n as usize + 1)
        .await
        .unwrap()
        .iter()
        .map(|r| Position {
            followed_at_ms: r.followed_at.timestamp_millis(),
            user: UserId::new(r.member).unwrap(),
        })
        .collect()
}

#[tokio::test]
async fn redis_and_postgres_serve_identical_pages() {
    let seed = std::env::var("KITH_PROPERTY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9E37_79B9_7F4A_7C15_u64);
    let mut rng = Rng(seed);
    let t = spawn_app().await;
    let (mut served, mut from_heads, mut compared) = (0, 0, 0);
    // Both kinds of list: followers come from the projection, following
    // from the truth, each with its own index.
    for round in 0..10 {
        let target = t.user(&format!("target{round}")).await;
        let n = [0, 1, 7, 60, 150, 240, 3, 40, 120, 200][round] as i64;
        let per_ms = 1 + rng.below(25) as i64;
        let (list, items) = if round < 6 {
            let list = ListKey::Followers(target);
            if n == 0 {
                (list, Vec::new())
            } else {
                (
                    list,
                    seed_followers(&t, target, &format!("r{round}x"), n, per_ms).await,
                )
            }
        } else {
            let list = ListKey::Following(target);
            (
                list,
                seed_following(&t, target, &format!("r{round}y"), n, per_ms).await,
            )
        };
        let k = 1 + rng.below(n as u64 + 20) as usize;
        let complete = cache_newest(&t, list, k).await;
        let bound = (!complete).then(|| k.min(items.len()).saturating_sub(1));
        for _ in 0..120 {
            let size = 1 + rng.below(30) as usize;
            let request = match rng.below(5) {
                0 => PageRequest::After(None, size),
                1 => PageRequest::Before(None, size),
                2 => PageRequest::After(Some(cursor(&mut rng, &items, bound)), size),
                3 => PageRequest::Before(Some(cursor(&mut rng, &items, bound)), size),
                _ => PageRequest::Offset(rng.below(n as u64 + 10) as usize, size),
            };
            compared += 1;
            let truth = store_lists::page(&mut *t.conn().await, list, request)
                .await
                .unwrap();
            assert_eq!(
                kith::testing::paging::page_of(&items, request),
                truth,
                "in memory: seed {seed:#x}, round {round} (n={n}, {per_ms}/ms): {request:?}"
            );
            let head = kith::testing::paging::page_of(&items, PageRequest::After(None, k));
            if let Some(from_head) = kith::testing::paging::page_of_head(&head, request) {
                from_heads += 1;
                assert_eq!(
                    from_head, truth,
                    "from the newest {k}: seed {seed:#x}, round {round}: {request:?}"
                );
            }
            let from_redis = {
                let mut redis = t.app.redis.get().await.unwrap();
                lists::read_page(&mut *redis, &t.app.keys, list, request)
                    .await
                    .unwrap()
            };
            let Ok(cached) = from_redis else { continue };
            served += 1;
            assert_eq!(
                cached, truth,
                "seed {seed:#x}, round {round} (n={n}, {per_ms}/ms, cached {k}, complete {complete}): {request:?}"
            );
        }
    }
    // The comparison must really run: most requests fall inside the caches.
    assert!(
        served * 2 > compared,
        "only {served} of {compared} requests were served from Redis"
    );
    assert!(
        from_heads * 5 > compared,
        "only {from_heads} of {compared} requests were cut from a list's head"
    );
}

async fn uncache(t: &TestApp, list: ListKey) {
    let mut redis = t.app.redis.get().await.unwrap();
    let _: () = redis::cmd("DEL")
        .arg(&t.app.keys.list(list)[..])
        .query_async(&mut *redis)
        .await
        .unwrap();
}

/// `pageInfo` of a whole-list request through GraphQL.
async fn fetch_page_info(t: &TestApp, target: UserId, args: &str) -> Value {
    let id = kith::testing::graph::ids::user_id(target).to_string();
    let query = format!(
        "query($id: ID!) {{ user(id: $id) {{ followers({args}) {{
            pageInfo {{ hasNextPage hasPreviousPage startCursor endCursor }} edges {{ cursor }} }} }} }}"
    );
    let r = t
        .execute(
            kith::testing::auth::Viewer::Anonymous,
            &query,
            json!({ "id": id }),
        )
        .await;
    assert_ok(&r);
    r["data"]["user"]["followers"].clone()
}

#[tokio::test]
async fn page_info_says_false_at_both_ends_from_either_store() {
    let t = spawn_app().await;
    let target = t.user("target").await;
    seed_followers(&t, target, "e", 5, 2).await;
    let list = ListKey::Followers(target);
    for cached in [false, true] {
        if cached {
            cache_newest(&t, list, 100).await;
        }
        let page_info = async |args: &str| {
            // Each read is served by the store this pass is about: no fill
            // left over from the last read, and the cache there or not.
            t.fills_finished().await;
            if !cached {
                uncache(&t, list).await;
            }
            let mut redis = t.app.redis.get().await.unwrap();
            let probe =
                lists::read_page(&mut *redis, &t.app.keys, list, PageRequest::After(None, 1))
                    .await
                    .unwrap();
            assert_eq!(
                probe.is_ok(),
                cached,
                "the pass reads the store it means to"
            );
            drop(redis);
            fetch_page_info(&t, target, args).await
        };
        let whole = page_info("first: 10").await;
        assert_eq!(whole["pageInfo"]["hasNextPage"], false, "cached={cached}");
        assert_eq!(
            whole["pageInfo"]["hasPreviousPage"], false,
            "cached={cached}"
        );
        let first = page_info("first: 2").await;
        assert_eq!(first["pageInfo"]["hasNextPage"], true);
        assert_eq!(first["pageInfo"]["hasPreviousPage"], false);
        let end = first["edges"][1]["cursor"].as_str().unwrap().to_owned();
        let rest = page_info(&format!("first: 3, after: \"{end}\"")).await;
        assert_eq!(rest["edges"].as_array().unwrap().len(), 3);
        assert_eq!(rest["pageInfo"]["hasNextPage"], false, "cached={cached}");
        assert_eq!(rest["pageInfo"]["hasPreviousPage"], true, "cached={cached}");
        let last = page_info("last: 2").await;
        assert_eq!(last["pageInfo"]["hasNextPage"], false, "cached={cached}");
        assert_eq!(last["pageInfo"]["hasPreviousPage"], true);
        let start = last["edges"][0]["cursor"].as_str().unwrap().to_owned();
        let before = page_info(&format!("last: 3, before: \"{start}\"")).await;
        assert_eq!(
            before["pageInfo"]["hasPreviousPage"], false,
            "cached={cached}"
        );
        assert_eq!(before["pageInfo"]["hasNextPage"], true, "cached={cached}");
    }
}
