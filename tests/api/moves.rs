//! Account moves: the new account claims the old, the old moves and takes
//! no follows, and its followers are brought along in the background —
//! blocks respected, a locked account asked, the follow cap honoured —
//! resumably, and a move back undoes the mark.

use std::sync::Arc;

use kith::model::UserId;
use kith::testing::auth::Viewer;
use kith::testing::pipeline::projector::ProjectorHooks;
use serde_json::{Value, json};

use crate::helpers::{
    TestApp, assert_consistent, assert_ok, error_code, eventually, replica, settled, spawn_app_with,
};

fn gid(user: UserId) -> String {
    kith::testing::graph::ids::user_id(user).to_string()
}

const MOVE: &str =
    "mutation($id: ID!) { moveAccount(input: {targetId: $id, clientMutationId: \"m\"}) {
    clientMutationId move { id state total from { handle } to { handle } } } }";

const WATCH: &str = "query($id: ID!) { accountMove(id: $id) {
    state total moved requested skipped failed failure
    errors(first: 10) { totalCount edges { node { user { handle } reason } } } } }";

async fn alias(t: &TestApp, user: UserId, old: UserId) -> Value {
    t.execute(
        Viewer::User(user),
        "mutation($id: ID!) { addAccountAlias(input: {userId: $id}) { changed aliases { handle } } }",
        json!({ "id": gid(old) }),
    )
    .await
}

async fn move_to(t: &TestApp, from: UserId, to: UserId) -> Value {
    t.execute(Viewer::User(from), MOVE, json!({ "id": gid(to) }))
        .await
}

/// Waits for move `id` to end, as `viewer` watches it; its last state.
async fn ended(t: &TestApp, viewer: UserId, id: &Value) -> Value {
    eventually("the move to end", 60, || async {
        let r = t
            .execute(Viewer::User(viewer), WATCH, json!({ "id": id }))
            .await;
        assert_ok(&r);
        let job = r["data"]["accountMove"].clone();
        (job["state"] != "RUNNING").then_some(job)
    })
    .await
}

async fn moved_to(t: &TestApp, user: UserId) -> Value {
    let r = t
        .execute(
            Viewer::Anonymous,
            "query($id: ID!) { user(id: $id) { movedTo { handle } } }",
            json!({ "id": gid(user) }),
        )
        .await;
    assert_ok(&r);
    r["data"]["user"]["movedTo"].clone()
}

async fn block(t: &TestApp, actor: UserId, target: UserId) {
    let r = t
        .execute(
            Viewer::User(actor),
            "mutation($id: ID!) { block(input: {userId: $id}) { changed } }",
            json!({ "id": gid(target) }),
        )
        .await;
    assert_ok(&r);
}

#[tokio::test]
async fn a_move_brings_the_followers_along_and_leaves_those_it_may_not() {
    let t = spawn_app_with(|c| {
        c.writes.max_followings = 2;
        c.writes.followings_ratio = 0.0;
    })
    .await;
    t.users_cached().await;
    let (old, new, other) = (
        t.user("old").await,
        t.user("new").await,
        t.user("other").await,
    );
    let mut followers = Vec::new();
    for i in 0..5 {
        let f = t.user(&format!("f{i}")).await;
        assert_ok(&t.follow(f, old).await);
        followers.push(f);
    }
    // f0 asked to be told of old's posts; its follow of new says so too.
    let r = t
        .execute(
            Viewer::User(followers[0]),
            "mutation($id: ID!) { updateFollow(input: {userId: $id, notify: true}) { changed } }",
            json!({ "id": gid(old) }),
        )
        .await;
    assert_ok(&r);
    // new blocks f3; f4 follows as many as the cap allows, so its follow
    // of new passes the cap only until its unfollow of old; f5 is past
    // the cap already (it came later); new follows old itself.
    block(&t, new, followers[3]).await;
    assert_ok(&t.follow(new, old).await);
    assert_ok(&t.follow(followers[4], other).await);
    let f5 = t.user("f5").await;
    assert_ok(&t.follow(f5, old).await);
    t.sql(&format!(
        "UPDATE user_stats SET followings = 3 WHERE user_id = {f5}"
    ))
    .await;
    followers.push(f5);

    // Without new's claim, old may not move there.
    let refused = move_to(&t, old, new).await;
    assert_eq!(error_code(&refused), Some("FORBIDDEN"), "{refused}");
    assert_eq!(moved_to(&t, old).await, Value::Null);
    let r = alias(&t, new, old).await;
    assert_eq!(
        r["data"]["addAccountAlias"],
        json!({ "changed": true, "aliases": [{ "handle": "old" }] }),
        "{r}"
    );
    assert_eq!(
        error_code(&alias(&t, new, new).await),
        Some("INVALID_INPUT")
    );

    let r = move_to(&t, old, new).await;
    assert_ok(&r);
    let started = &r["data"]["moveAccount"];
    assert_eq!(started["clientMutationId"], "m");
    assert_eq!(started["move"]["total"], 7, "every follower counted: {r}");
    assert_eq!(started["move"]["from"]["handle"], "old");
    assert_eq!(started["move"]["to"]["handle"], "new");
    let id = started["move"]["id"].clone();
    assert_eq!(moved_to(&t, old).await, json!({ "handle": "new" }));
    let event = t
        .outbox_payloads()
        .await
        .into_iter()
        .rfind(|e| e["type"] == "AccountMoved")
        .expect("the move's event");
    assert_eq!(
        (event["from"].clone(), event["movedTo"].clone()),
        (json!(old.get()), json!(new.get()))
    );

    // A moved account takes no follows, alone or in a batch.
    let refused = t.follow(other, old).await;
    assert_eq!(error_code(&refused), Some("MOVED"), "{refused}");
    let r = t
        .execute(
            Viewer::User(other),
            "mutation($ids: [ID!]!) { followMany(input: {userIds: $ids}) {
                results { error { code } } } }",
            json!({ "ids": [gid(old)] }),
        )
        .await;
    assert_eq!(
        r["data"]["followMany"]["results"][0]["error"]["code"], "NOT_FOLLOWABLE",
        "{r}"
    );
    // Nor moves again.
    assert_eq!(error_code(&move_to(&t, old, other).await), Some("MOVED"));

    let runner = t.start_imports();
    let job = ended(&t, old, &id).await;
    runner.stop().await.unwrap();
    assert_eq!(
        (
            job["state"].clone(),
            job["moved"].clone(),
            job["requested"].clone(),
            job["skipped"].clone(),
            job["failed"].clone()
        ),
        (json!("DONE"), json!(4), json!(0), json!(0), json!(3)),
        "{job}"
    );
    assert_eq!(
        job["errors"]["edges"],
        json!([
            { "node": { "user": { "handle": "new" }, "reason": "SELF_TARGET" } },
            { "node": { "user": { "handle": "f3" }, "reason": "BLOCKED" } },
            { "node": { "user": { "handle": "f5" }, "reason": "FOLLOW_LIMIT" } },
        ])
    );
    assert_eq!(
        t.edge(new, old).await.map(|e| e.0),
        Some(true),
        "new's own follow stays"
    );
    for (i, &f) in followers.iter().enumerate() {
        let brought = i != 3 && i != 5;
        assert_eq!(
            t.edge(f, new).await.map(|e| e.0),
            brought.then_some(true),
            "f{i}"
        );
        assert_eq!(t.edge(f, old).await.map(|e| e.0), Some(!brought), "f{i}");
    }
    assert_eq!(
        t.count(&format!(
            "SELECT count(*) AS n FROM following WHERE from_user_id = {} AND to_user_id = {}
                AND notify AND options_at = followed_at",
            followers[0], new
        ))
        .await,
        1,
        "f0's options came along"
    );
    assert_eq!(
        t.count(&format!(
            "SELECT followings AS n FROM user_stats WHERE user_id = {}",
            followers[4]
        ))
        .await,
        2,
        "f4 follows new instead of old"
    );
    // The new account watches the move too; nobody else learns of it.
    let r = t
        .execute(Viewer::User(new), WATCH, json!({ "id": id }))
        .await;
    assert_eq!(r["data"]["accountMove"]["state"], "DONE", "{r}");
    let r = t
        .execute(Viewer::User(other), WATCH, json!({ "id": id }))
        .await;
    assert_eq!(r["data"]["accountMove"], Value::Null, "{r}");
}

async fn set_locked(t: &TestApp, user: UserId, locked: bool) {
    let r = t
        .execute(
            Viewer::User(user),
            "mutation($l: Boolean) { updateAccountSettings(input: {locked: $l}) { user { locked } } }",
            json!({ "l": locked }),
        )
        .await;
    assert_ok(&r);
}

async fn pending(t: &TestApp, from: UserId, to: UserId) -> i64 {
    t.count(&format!(
        "SELECT count(*) AS n FROM follow_request
          WHERE from_user_id = {from} AND to_user_id = {to} AND active"
    ))
    .await
}

#[tokio::test]
async fn a_locked_account_is_asked_and_a_move_back_takes_follows_again() {
    let t = spawn_app_with(|_| {}).await;
    t.users_cached().await;
    let (old, new, f) = (t.user("old").await, t.user("new").await, t.user("f").await);
    let (g, q, h) = (t.user("g").await, t.user("q").await, t.user("h").await);
    assert_ok(&t.follow(f, old).await);
    assert_ok(&t.follow(g, old).await);
    assert_ok(&t.follow(g, new).await);
    // q asked to follow old, which is locked; new is locked too. f and q
    // asked to be told of old's posts, in German only; their requests of
    // new, and then their follows of old again, say so too.
    set_locked(&t, old, true).await;
    assert_ok(&t.follow(q, old).await);
    assert_eq!(pending(&t, q, old).await, 1);
    for asker in [f, q] {
        let r = t
            .execute(
                Viewer::User(asker),
                "mutation($id: ID!) { updateFollow(input: {userId: $id, notify: true, languages: [\"de\"]}) { changed } }",
                json!({ "id": gid(old) }),
            )
            .await;
        assert_ok(&r);
    }
    let options_of = |from: UserId, to: UserId| {
        let t = &t;
        async move {
            t.count(&format!(
                "SELECT count(*) AS n FROM (
                   SELECT notify, languages FROM following
                    WHERE from_user_id = {from} AND to_user_id = {to} AND active
                      AND options_at = followed_at
                   UNION ALL
                   SELECT notify, languages FROM follow_request
                    WHERE from_user_id = {from} AND to_user_id = {to} AND active
                      AND options_at = requested_at) o
                  WHERE notify AND languages = ARRAY['de']"
            ))
            .await
        }
    };
    assert_eq!((options_of(f, old).await, options_of(q, old).await), (1, 1));
    set_locked(&t, new, true).await;
    assert_ok(&alias(&t, new, old).await);
    let r = move_to(&t, old, new).await;
    assert_ok(&r);
    let id = r["data"]["moveAccount"]["move"]["id"].clone();
    assert_eq!(r["data"]["moveAccount"]["move"]["total"], 3, "{r}");
    // Moved, old answers no request with a follow of itself.
    let refused = t
        .execute(
            Viewer::User(old),
            "mutation($id: ID!) { acceptFollowRequest(input: {userId: $id}) { changed } }",
            json!({ "id": gid(q) }),
        )
        .await;
    assert_eq!(error_code(&refused), Some("MOVED"), "{refused}");
    let runner = t.start_imports();
    let job = ended(&t, old, &id).await;
    assert_eq!(
        (
            job["state"].clone(),
            job["moved"].clone(),
            job["requested"].clone(),
            job["skipped"].clone()
        ),
        (json!("DONE"), json!(0), json!(2), json!(1)),
        "{job}"
    );
    assert_eq!(t.edge(f, new).await, None, "a request, no follow");
    assert_eq!(pending(&t, f, new).await, 1);
    assert_eq!(t.edge(f, old).await.map(|e| e.0), Some(false));
    assert_eq!(pending(&t, q, new).await, 1, "q's request went along");
    assert_eq!(pending(&t, q, old).await, 0);
    assert_eq!(
        (options_of(f, new).await, options_of(q, new).await),
        (1, 1),
        "the requests keep the options"
    );

    // Moving back: old claims new, new moves to old (unlocked now).
    assert_eq!(error_code(&move_to(&t, new, old).await), Some("FORBIDDEN"));
    assert_ok(&alias(&t, old, new).await);
    set_locked(&t, old, false).await;
    let r = move_to(&t, new, old).await;
    assert_ok(&r);
    let back = r["data"]["moveAccount"]["move"]["id"].clone();
    assert_eq!(
        moved_to(&t, old).await,
        Value::Null,
        "old takes follows again"
    );
    assert_eq!(moved_to(&t, new).await, json!({ "handle": "old" }));
    let job = ended(&t, new, &back).await;
    runner.stop().await.unwrap();
    assert_eq!(job["state"], "DONE", "{job}");
    assert_eq!(job["moved"], 3, "g, and f and q who had asked: {job}");
    for follower in [f, g, q] {
        assert_eq!(t.edge(follower, old).await.map(|e| e.0), Some(true));
        assert_eq!(pending(&t, follower, new).await, 0);
    }
    assert_eq!(
        (options_of(f, old).await, options_of(q, old).await),
        (1, 1),
        "the follows made of the requests keep the options"
    );
    assert_eq!(t.edge(g, new).await.map(|e| e.0), Some(false));
    let r = t.follow(h, old).await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["follow"]["viewerRelation"]["following"], true,
        "{r}"
    );
    // old may not move again so soon: its followers are not moved back
    // and forth.
    let again = move_to(&t, old, new).await;
    assert_eq!(error_code(&again), Some("RATE_LIMITED"), "{again}");
    let wait = again["errors"][0]["extensions"]["retryAfterMs"]
        .as_u64()
        .unwrap_or(0);
    assert!(wait > 29 * 24 * 3600 * 1000, "{again}");
    assert_eq!(moved_to(&t, old).await, Value::Null);
    // The first move stays readable, done.
    let r = t
        .execute(Viewer::User(old), WATCH, json!({ "id": id }))
        .await;
    assert_eq!(r["data"]["accountMove"]["state"], "DONE", "{r}");
}

#[tokio::test]
async fn a_move_resumes_where_its_last_batch_left_it() {
    let t = spawn_app_with(|c| c.portability.move_followers_per_sec = 2).await;
    let (old, new) = (t.user("old").await, t.user("new").await);
    let mut followers = Vec::new();
    for i in 0..7 {
        let f = t.user(&format!("f{i}")).await;
        assert_ok(&t.follow(f, old).await);
        followers.push(f);
    }
    assert_ok(&alias(&t, new, old).await);
    let r = move_to(&t, old, new).await;
    assert_ok(&r);
    let id = r["data"]["moveAccount"]["move"]["id"].clone();
    // One runner handles a batch or two, and stops; another goes on.
    let first = t.start_imports();
    eventually("a first batch", 30, || async {
        let r = t
            .execute(Viewer::User(old), WATCH, json!({ "id": id }))
            .await;
        (r["data"]["accountMove"]["moved"].as_i64() >= Some(2)).then_some(())
    })
    .await;
    first.stop().await.unwrap();
    let second = t.start_imports();
    let job = ended(&t, old, &id).await;
    second.stop().await.unwrap();
    assert_eq!(
        (
            job["state"].clone(),
            job["moved"].clone(),
            job["failed"].clone()
        ),
        (json!("DONE"), json!(7), json!(0)),
        "no follower twice, none left: {job}"
    );
    for &f in &followers {
        assert_eq!(t.edge(f, new).await.map(|e| e.0), Some(true));
        assert_eq!(t.edge(f, old).await.map(|e| e.0), Some(false));
    }
    // Once relayed and projected, the counts are right and nothing
    // disagrees with the truth.
    let _relay = t.start_relay();
    let _projector = t.start_projector(Arc::new(ProjectorHooks::default()));
    settled(&t, &[old, new], 60).await;
    let r = t
        .execute(
            Viewer::Anonymous,
            "query($a: ID!, $b: ID!) { old: user(id: $a) { counters { followers } }
                new: user(id: $b) { counters { followers } } }",
            json!({ "a": gid(old), "b": gid(new) }),
        )
        .await;
    assert_eq!(
        (
            r["data"]["old"]["counters"]["followers"].clone(),
            r["data"]["new"]["counters"]["followers"].clone()
        ),
        (json!(0), json!(7)),
        "{r}"
    );
    assert_consistent(&t.verify(0).await);
}

/// Where the first pages of the two accounts' followers were read, a
/// move's batch has the rows they are about to show loaded before the
/// pipeline brings it to the caches (none runs here once the move starts):
/// the newcomer at the head of the new account's list, and the follower
/// rising into the old account's page as another leaves it — with that
/// one's counter record, which the pipeline does not write (its edges do
/// not change).
#[tokio::test]
async fn a_moves_batch_loads_the_rows_its_first_pages_are_about_to_show() {
    let t = spawn_app_with(|c| c.portability.move_followers_per_sec = 1).await;
    t.users_cached().await;
    let (old, new) = (t.user("old").await, t.user("new").await);
    let mut fans = Vec::new();
    for i in 0..4 {
        let f = t.user(&format!("fan{i}")).await;
        assert_ok(&t.follow(f, old).await);
        fans.push(f);
    }
    assert_ok(&alias(&t, new, old).await);
    {
        let _relay = t.start_relay();
        let _projector = t.start_projector(Arc::new(ProjectorHooks::default()));
        settled(&t, &[old], 60).await;
    }
    let first_page = "query($id: ID!) { user(id: $id) {
        followers(first: 2) { edges { node { handle } } } } }";
    let handles = |r: &Value| -> Vec<Value> {
        r["data"]["user"]["followers"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["node"]["handle"].clone())
            .collect()
    };
    for user in [old, new] {
        assert_ok(
            &t.execute(Viewer::Anonymous, first_page, json!({ "id": gid(user) }))
                .await,
        );
    }
    t.fills_finished().await;
    let r = t
        .execute(Viewer::Anonymous, first_page, json!({ "id": gid(old) }))
        .await;
    assert_eq!(handles(&r), vec![json!("fan3"), json!("fan2")], "{r}");
    assert!(
        t.cached_list(kith::testing::paging::ListKey::Followers(old))
            .await
            .is_some()
    );
    t.app.read.forget_users(&fans);
    {
        let mut redis = t.app.redis.get().await.unwrap();
        for fan in &fans {
            let _: () = redis::cmd("DEL")
                .arg(t.app.keys.counter_record(*fan))
                .query_async(&mut *redis)
                .await
                .unwrap();
        }
    }
    let _listener = replica(&t, t.app.clone(), false).await;
    assert_ok(&move_to(&t, old, new).await);
    // Followers go in id order, one a second: the first batch brings fan0
    // to the new account's head, and leaves the old account's head to be
    // read a member deeper, down to fan1.
    let _runner = t.start_imports();
    eventually("the coming rows held", 30, || async {
        let users = t.app.read.users();
        [fans[0], fans[1]]
            .iter()
            .all(|f| users.get(*f).is_some())
            .then_some(())
    })
    .await;
    assert!(
        t.app.read.users().get(fans[3]).is_some(),
        "the old account's head as it was is loaded with it"
    );
    let record = eventually("the riser's counter record rebuilt", 30, || async {
        t.counter_record(fans[1]).await
    })
    .await;
    assert_eq!(record.followings, 1, "from the truth");
}

#[tokio::test]
async fn moves_that_cannot_be_are_refused_with_a_reason() {
    let t = spawn_app_with(|_| {}).await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    assert_eq!(error_code(&move_to(&t, a, a).await), Some("INVALID_INPUT"));
    let ghost = UserId::new(9_999_999).unwrap();
    assert_eq!(error_code(&move_to(&t, a, ghost).await), Some("NOT_FOUND"));
    assert_eq!(
        error_code(
            &t.execute(Viewer::Anonymous, MOVE, json!({ "id": gid(b) }))
                .await
        ),
        Some("UNAUTHENTICATED")
    );
    // b moves to c; a may not move to b then, though b claims it.
    assert_ok(&alias(&t, c, b).await);
    assert_ok(&move_to(&t, b, c).await);
    assert_ok(&alias(&t, b, a).await);
    let refused = move_to(&t, a, b).await;
    assert_eq!(error_code(&refused), Some("MOVED"), "{refused}");
    let r = t
        .execute(
            Viewer::User(c),
            "mutation($id: ID!) { removeAccountAlias(input: {userId: $id}) { changed aliases { handle } } }",
            json!({ "id": gid(b) }),
        )
        .await;
    assert_eq!(
        r["data"]["removeAccountAlias"],
        json!({ "changed": true, "aliases": [] }),
        "{r}"
    );
    let r = t
        .execute(Viewer::User(a), WATCH, json!({ "id": "not-a-move" }))
        .await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
}

#[tokio::test]
async fn a_follower_restored_after_a_move_is_reported_and_brought_along() {
    use kith::model::UserStatus;
    use kith::testing::consistency::reconcile::{Scope, reconcile};
    use kith::testing::consistency::verify::Kind;
    use kith::testing::write::lifecycle;

    let t = spawn_app_with(|_| {}).await;
    let (old, new) = (t.user("old").await, t.user("new").await);
    let (f, g) = (t.user("f").await, t.user("g").await);
    assert_ok(&t.follow(f, old).await);
    assert_ok(&t.follow(g, old).await);
    // f is suspended while old moves: its follow is hidden, and the move
    // does not see it.
    lifecycle::set_status(&t.app, f, UserStatus::Suspended)
        .await
        .unwrap();
    assert_ok(&alias(&t, new, old).await);
    let r = move_to(&t, old, new).await;
    assert_ok(&r);
    let id = r["data"]["moveAccount"]["move"]["id"].clone();
    let runner = t.start_imports();
    let job = ended(&t, old, &id).await;
    runner.stop().await.unwrap();
    assert_eq!(
        (job["moved"].clone(), job["total"].clone()),
        (json!(1), json!(1))
    );
    // Restored, f follows the moved account again.
    lifecycle::set_status(&t.app, f, UserStatus::Active)
        .await
        .unwrap();
    assert_eq!(t.edge(f, old).await.map(|e| e.0), Some(true));
    let report = t.verify(0).await;
    assert_eq!(
        report.counts.get(&Kind::StrandedByMove),
        Some(&1),
        "{report}"
    );
    let summary = reconcile(&t.app, Scope::User(f), 100, false).await.unwrap();
    assert_eq!(
        (
            summary.stranded_followers_moved,
            summary.stranded_followers_left
        ),
        (1, 0),
        "{summary}"
    );
    assert_eq!(t.edge(f, new).await.map(|e| e.0), Some(true));
    assert_eq!(t.edge(f, old).await.map(|e| e.0), Some(false));
    let r = t
        .execute(Viewer::User(old), WATCH, json!({ "id": id }))
        .await;
    assert_eq!(
        r["data"]["accountMove"]["moved"], 2,
        "the move counts it: {r}"
    );
    assert_eq!(t.verify(0).await.counts.get(&Kind::StrandedByMove), None);
    // A second run finds no follower to move: it reports no repair it did
    // not make (no projector runs here, so it brings the projection on).
    let again = reconcile(&t.app, Scope::Full, 100, false).await.unwrap();
    assert_eq!(again.stranded_followers_moved, 0, "{again}");
}

/// Runs `sql` (one statement, `$1` the old account's id) on `t`'s schema.
async fn on_move(t: &TestApp, old: UserId, sql: &str) {
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(sql).bind::<diesel::sql_types::BigInt, _>(old.get()),
        &mut *t.conn().await,
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_move_waits_out_a_suspended_new_account_and_sweeps_behind_its_cursor() {
    use kith::model::UserStatus;
    use kith::testing::write::lifecycle;

    let t = spawn_app_with(|_| {}).await;
    let (old, new, newer) = (
        t.user("old").await,
        t.user("new").await,
        t.user("newer").await,
    );
    let mut followers = Vec::new();
    for i in 0..4 {
        let f = t.user(&format!("f{i}")).await;
        assert_ok(&t.follow(f, old).await);
        followers.push(f);
    }
    assert_ok(&alias(&t, new, old).await);
    let r = move_to(&t, old, new).await;
    assert_ok(&r);
    let id = r["data"]["moveAccount"]["move"]["id"].clone();
    // While old's followers are on their way, new may not move on: they
    // would be left on the way.
    assert_ok(&alias(&t, newer, new).await);
    let refused = move_to(&t, new, newer).await;
    assert_eq!(error_code(&refused), Some("MOVED"), "{refused}");
    assert_eq!(moved_to(&t, new).await, Value::Null);

    // f0 and f1 are behind the job's cursor, as a follow that raced the
    // move's start would be; new is suspended.
    on_move(
        &t,
        old,
        &format!(
            "UPDATE account_move SET after_id = {} WHERE from_id = $1",
            followers[1].get()
        ),
    )
    .await;
    lifecycle::set_status(&t.app, new, UserStatus::Suspended)
        .await
        .unwrap();
    let runner = t.start_imports();
    // The job finds it cannot follow new now and waits, the followers
    // where they were.
    eventually("the move to wait", 30, || async {
        let waits: Waiting = diesel_async::RunQueryDsl::get_result(
            diesel::sql_query(
                "SELECT count(*) AS n FROM account_move
                  WHERE from_id = $1 AND state = 'running' AND due_at > now() + interval '30 s'",
            )
            .bind::<diesel::sql_types::BigInt, _>(old.get()),
            &mut *t.conn().await,
        )
        .await
        .unwrap();
        (waits.n == 1).then_some(())
    })
    .await;
    let r = t
        .execute(Viewer::User(old), WATCH, json!({ "id": id }))
        .await;
    assert_eq!(r["data"]["accountMove"]["state"], "RUNNING", "{r}");
    for &f in &followers {
        assert_eq!(t.edge(f, old).await.map(|e| e.0), Some(true));
    }

    // Restored, new takes the followers: those after the cursor, then,
    // in the sweep that ends the move, those behind it.
    lifecycle::set_status(&t.app, new, UserStatus::Active)
        .await
        .unwrap();
    on_move(
        &t,
        old,
        "UPDATE account_move SET due_at = now() WHERE from_id = $1",
    )
    .await;
    let job = ended(&t, old, &id).await;
    runner.stop().await.unwrap();
    assert_eq!(
        (
            job["state"].clone(),
            job["moved"].clone(),
            job["failed"].clone()
        ),
        (json!("DONE"), json!(4), json!(0)),
        "{job}"
    );
    for &f in &followers {
        assert_eq!(t.edge(f, new).await.map(|e| e.0), Some(true));
        assert_eq!(t.edge(f, old).await.map(|e| e.0), Some(false));
    }
    // Its move over, new may move on.
    assert_ok(&move_to(&t, new, newer).await);
}

/// How many moves wait.
#[derive(diesel::QueryableByName)]
struct Waiting {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

#[tokio::test]
async fn a_follower_left_behind_as_not_followable_is_brought_along_once_it_can() {
    use kith::testing::consistency::reconcile::{Scope, reconcile};
    use kith::testing::consistency::verify::Kind;

    let t = spawn_app_with(|_| {}).await;
    let (old, new) = (t.user("old").await, t.user("new").await);
    let (f, g, h) = (t.user("f").await, t.user("g").await, t.user("h").await);
    for follower in [f, g, h] {
        assert_ok(&t.follow(follower, old).await);
    }
    assert_ok(&alias(&t, new, old).await);
    let r = move_to(&t, old, new).await;
    assert_ok(&r);
    let id = r["data"]["moveAccount"]["move"]["id"].clone();
    // The job leaves f and h behind as accounts that could not act then
    // (as one suspended between the job's read and its follow would be).
    on_move(
        &t,
        old,
        &format!(
            "WITH m AS (UPDATE account_move SET failed = failed + 2 WHERE from_id = $1 RETURNING id)
             INSERT INTO account_move_row (move_id, follower_id, outcome)
             SELECT id, unnest(ARRAY[{}, {}]::BIGINT[]), 'NOT_FOLLOWABLE' FROM m",
            f.get(),
            h.get()
        ),
    )
    .await;
    let runner = t.start_imports();
    let job = ended(&t, old, &id).await;
    runner.stop().await.unwrap();
    assert_eq!(
        (job["moved"].clone(), job["failed"].clone()),
        (json!(1), json!(2)),
        "{job}"
    );
    assert_eq!(t.edge(f, old).await.map(|e| e.0), Some(true));
    // f can act: verify reports it, and reconcile brings it along; the
    // move no longer lists it among those left behind. h is blocked by new
    // meanwhile: left behind again, as BLOCKED, and counted once.
    block(&t, new, h).await;
    let report = t.verify(0).await;
    assert_eq!(
        report.counts.get(&Kind::StrandedByMove),
        Some(&2),
        "{report}"
    );
    let summary = reconcile(&t.app, Scope::Full, 100, false).await.unwrap();
    assert_eq!(
        (
            summary.stranded_followers_moved,
            summary.stranded_followers_left
        ),
        (1, 1),
        "f brought along, h left behind again: {summary}"
    );
    assert_eq!(t.edge(f, new).await.map(|e| e.0), Some(true));
    assert_eq!(t.edge(f, old).await.map(|e| e.0), Some(false));
    let r = t
        .execute(Viewer::User(old), WATCH, json!({ "id": id }))
        .await;
    let job = &r["data"]["accountMove"];
    assert_eq!(
        (
            job["moved"].clone(),
            job["failed"].clone(),
            job["errors"]["totalCount"].clone()
        ),
        (json!(2), json!(1), json!(1)),
        "{r}"
    );
    assert_eq!(
        job["errors"]["edges"][0]["node"],
        json!({ "user": { "handle": "h" }, "reason": "BLOCKED" }),
        "{r}"
    );
    assert_eq!(t.verify(0).await.counts.get(&Kind::StrandedByMove), None);
}

#[tokio::test]
async fn a_move_to_an_account_deleted_meanwhile_fails_and_leaves_the_followers() {
    use kith::model::UserStatus;
    use kith::testing::write::lifecycle;

    let t = spawn_app_with(|_| {}).await;
    let (old, new, f) = (t.user("old").await, t.user("new").await, t.user("f").await);
    assert_ok(&t.follow(f, old).await);
    assert_ok(&alias(&t, new, old).await);
    let r = move_to(&t, old, new).await;
    assert_ok(&r);
    let id = r["data"]["moveAccount"]["move"]["id"].clone();
    lifecycle::set_status(&t.app, new, UserStatus::Deleted)
        .await
        .unwrap();
    let runner = t.start_imports();
    // Unlike a suspension, a deletion is not waited out: the move ends.
    let job = ended(&t, old, &id).await;
    runner.stop().await.unwrap();
    assert_eq!(
        (job["state"].clone(), job["failure"].clone()),
        (json!("FAILED"), json!("the new account was deleted")),
        "{job}"
    );
    assert_eq!(t.edge(f, old).await.map(|e| e.0), Some(true));
    assert_eq!(t.edge(f, new).await, None);
}

#[tokio::test]
async fn a_move_ends_only_once_transactions_older_than_it_have() {
    let t = spawn_app_with(|_| {}).await;
    let (old, new, f) = (t.user("old").await, t.user("new").await, t.user("f").await);
    assert_ok(&t.follow(f, old).await);
    assert_ok(&alias(&t, new, old).await);
    // A transaction open since before the move (as one whose follow read
    // the account before it moved, and has not committed yet).
    let mut open = t.conn().await;
    for sql in ["BEGIN", "SELECT 1"] {
        diesel_async::RunQueryDsl::execute(diesel::sql_query(sql), &mut *open)
            .await
            .unwrap();
    }
    let r = move_to(&t, old, new).await;
    assert_ok(&r);
    let id = r["data"]["moveAccount"]["move"]["id"].clone();
    let runner = t.start_imports();
    eventually("f to be brought along", 30, || async {
        (t.edge(f, new).await.map(|e| e.0) == Some(true)).then_some(())
    })
    .await;
    // Every follower is brought along, but a follow may still commit: the
    // move goes on.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let r = t
        .execute(Viewer::User(old), WATCH, json!({ "id": id }))
        .await;
    assert_eq!(r["data"]["accountMove"]["state"], "RUNNING", "{r}");
    diesel_async::RunQueryDsl::execute(diesel::sql_query("ROLLBACK"), &mut *open)
        .await
        .unwrap();
    drop(open);
    let job = ended(&t, old, &id).await;
    runner.stop().await.unwrap();
    assert_eq!(
        (job["state"].clone(), job["moved"].clone()),
        (json!("DONE"), json!(1)),
        "{job}"
    );
}
