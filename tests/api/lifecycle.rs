//! Account lifecycle: a suspended or deleted account leaves every list and
//! count (through the pipeline, like unfollows), comes back in its old place
//! on restore, and never shows as a hole in a list meanwhile.

use std::sync::Arc;

use kith::model::{UserId, UserStatus};
use kith::testing::paging::ListKey;
use kith::testing::pipeline::projector::ProjectorHooks;
use kith::testing::write::lifecycle;
use serde_json::{Value, json};

use crate::helpers::{
    TestApp, assert_consistent, error_code, eventually, seed_followers, settled, spawn_app_with,
};

fn hooks() -> Arc<ProjectorHooks> {
    Arc::new(ProjectorHooks::default())
}

async fn followers_page(t: &TestApp, user: UserId, first: i64) -> Value {
    let id = kith::testing::graph::ids::user_id(user).to_string();
    let r = t
        .execute(
            kith::testing::auth::Viewer::Anonymous,
            "query($id: ID!, $n: Int!) { user(id: $id) { followers(first: $n) {
                totalCount edges { followedAt node { handle } } pageInfo { endCursor hasNextPage } } } }",
            json!({ "id": id, "n": first }),
        )
        .await;
    assert!(r["errors"].is_null(), "{r}");
    r["data"]["user"]["followers"].clone()
}

fn handles(page: &Value) -> Vec<String> {
    page["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["handle"].as_str().expect("no hole").to_owned())
        .collect()
}

#[tokio::test]
async fn suspend_takes_an_account_out_and_restore_brings_it_back_in_place() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let (alice, sus, bob, carol) = (
        t.user("alice").await,
        t.user("sus").await,
        t.user("bob").await,
        t.user("carol").await,
    );
    for user in [alice, sus, bob, carol] {
        t.cache_list(ListKey::Followers(user), &[]).await;
        t.cache_list(ListKey::Following(user), &[]).await;
    }
    let relay = t.start_relay();
    let projector = t.start_projector(hooks());
    t.follow(alice, sus).await;
    t.follow(carol, sus).await;
    t.follow(sus, bob).await;
    t.follow(alice, bob).await;
    settled(&t, &[alice, sus, bob, carol], 60).await;
    let before = handles(&followers_page(&t, bob, 10).await);
    assert_eq!(before, vec!["alice", "sus"]);
    let followed_at = followers_page(&t, bob, 10).await["edges"][1]["followedAt"].clone();

    let summary = lifecycle::set_status(&t.app, sus, UserStatus::Suspended)
        .await
        .unwrap();
    assert_eq!(
        (summary.previous, summary.hidden),
        (Some(UserStatus::Active), 3)
    );
    settled(&t, &[alice, sus, bob, carol], 60).await;
    assert_consistent(&t.verify(0).await);
    assert_eq!(handles(&followers_page(&t, bob, 10).await), vec!["alice"]);
    assert_eq!(followers_page(&t, bob, 10).await["totalCount"], 1);
    assert_eq!(t.full_stats(alice).await.followings, 1);
    assert_eq!(t.full_stats(sus).await.followers, 0);
    assert_eq!(
        t.cached_list(ListKey::Following(alice)).await,
        Some(vec![bob])
    );
    let refused = t.follow(bob, sus).await;
    assert_eq!(error_code(&refused), Some("INVALID_INPUT"), "{refused}");
    // Carol lets go while sus is away: her edge stays gone.
    assert_eq!(
        t.unfollow(carol, sus).await["data"]["unfollow"]["changed"],
        false
    );

    let summary = lifecycle::set_status(&t.app, sus, UserStatus::Active)
        .await
        .unwrap();
    assert_eq!(
        (summary.previous, summary.restored),
        (Some(UserStatus::Suspended), 2)
    );
    settled(&t, &[alice, sus, bob, carol], 60).await;
    assert_consistent(&t.verify(0).await);
    let page = followers_page(&t, bob, 10).await;
    assert_eq!(handles(&page), before, "back in the old place");
    assert_eq!(page["edges"][1]["followedAt"], followed_at);
    assert_eq!(
        t.full_stats(sus).await.followers,
        1,
        "alice again, not carol"
    );
    assert_eq!(t.full_stats(carol).await.followings, 0);
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();
}

#[tokio::test]
async fn an_edge_between_two_suspended_accounts_waits_for_both() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let (a, b) = (t.user("a").await, t.user("b").await);
    t.follow(a, b).await;
    lifecycle::set_status(&t.app, a, UserStatus::Suspended)
        .await
        .unwrap();
    lifecycle::set_status(&t.app, b, UserStatus::Deleted)
        .await
        .unwrap();
    let summary = lifecycle::set_status(&t.app, a, UserStatus::Active)
        .await
        .unwrap();
    assert_eq!(summary.restored, 0, "b is still deleted");
    assert_eq!(t.edge(a, b).await.map(|e| e.0), Some(false));
    let summary = lifecycle::set_status(&t.app, b, UserStatus::Active)
        .await
        .unwrap();
    assert_eq!(summary.restored, 1);
    assert_eq!(t.edge(a, b).await, Some((true, 3)));
    assert_eq!(t.full_stats(a).await.followings, 1);
}

#[tokio::test]
async fn a_deleted_celebrity_leaves_in_batches_and_lists_never_show_holes() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let star = t.user("star").await;
    seed_followers(&t, star, "fan", 1200, 7).await;
    let fan = t.user("lastfan").await;
    let watcher = t.user("watcher").await;
    let relay = t.start_relay();
    let projector = t.start_projector(hooks());
    t.follow(fan, watcher).await;
    t.follow(star, watcher).await;
    settled(&t, &[star, watcher], 60).await;
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();

    // Before the edges are taken out, a list holding the account leaves it
    // out instead of showing a hole.
    let mut conn = t.conn().await;
    kith::testing::store::users::set_status(&mut conn, star, UserStatus::Deleted)
        .await
        .unwrap();
    drop(conn);
    t.user_change_seen(star).await;
    assert_eq!(
        handles(&followers_page(&t, watcher, 10).await),
        vec!["lastfan"]
    );
    let page = followers_page(&t, watcher, 1).await;
    assert!(page["edges"].as_array().unwrap().is_empty(), "{page}");
    assert!(
        page["pageInfo"]["endCursor"].is_string(),
        "paging goes on past it: {page}"
    );

    // The sweeper finishes what the status change started, in batches.
    let moved = lifecycle::sweep(&t.app).await.unwrap();
    assert_eq!(moved, 1201);
    assert_eq!(
        kith::testing::store::outbox::backlog(&mut *t.conn().await)
            .await
            .unwrap(),
        1201,
        "one event per edge"
    );
    let relay = t.start_relay();
    let projector = t.start_projector(hooks());
    eventually("the pipeline to take the star out", 120, || async {
        let stats = t.full_stats(star).await;
        (stats.followers == 0 && stats.followings == 0).then_some(())
    })
    .await;
    settled(&t, &[star, watcher], 120).await;
    assert_consistent(&t.verify(0).await);
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();
}

#[tokio::test]
async fn suspending_sets_followers_counts_from_the_truth_even_after_drift() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let (fan, sus) = (t.user("fan").await, t.user("sus").await);
    // An edge the fan's count never saw (drifted low: 0 while the truth has 1).
    t.sql(&format!(
        "INSERT INTO following (from_user_id, to_user_id, active, followed_at, version)
         VALUES ({fan}, {sus}, TRUE, date_trunc('milliseconds', now()), 1)"
    ))
    .await;
    assert_eq!(t.full_stats(fan).await.followings, 0);
    let summary = lifecycle::set_status(&t.app, sus, UserStatus::Suspended)
        .await
        .expect("no count goes below zero");
    assert_eq!(summary.hidden, 1);
    assert_eq!(
        t.full_stats(fan).await.followings,
        0,
        "counted, not decremented"
    );
    let summary = lifecycle::set_status(&t.app, sus, UserStatus::Active)
        .await
        .unwrap();
    assert_eq!(summary.restored, 1);
    assert_eq!(t.full_stats(fan).await.followings, 1);
}

#[tokio::test]
async fn a_deleted_follower_can_be_removed_and_stays_removed_on_restore() {
    let t = spawn_app_with(|_| {}).await;
    let (me, gone) = (t.user("me").await, t.user("gone").await);
    t.follow(gone, me).await;
    lifecycle::set_status(&t.app, gone, UserStatus::Deleted)
        .await
        .unwrap();
    let remove = "mutation($id: ID!) { removeFollower(input: {userId: $id}) { changed } }";
    let r = t
        .execute(
            kith::testing::auth::Viewer::User(me),
            remove,
            json!({ "id": kith::testing::graph::ids::user_id(gone).to_string() }),
        )
        .await;
    assert!(r["errors"].is_null(), "{r}");
    let summary = lifecycle::set_status(&t.app, gone, UserStatus::Active)
        .await
        .unwrap();
    assert_eq!(summary.restored, 0, "{summary}");
    assert_eq!(
        t.edge(gone, me).await.map(|(active, _)| active),
        Some(false)
    );
}

#[tokio::test]
async fn an_unfollow_during_a_restore_is_not_lost() {
    use diesel_async::{AsyncConnection as _, RunQueryDsl as _};
    let t = spawn_app_with(|_| {}).await;
    let (fan, sus) = (t.user("fan").await, t.user("sus").await);
    t.follow(fan, sus).await;
    lifecycle::set_status(&t.app, sus, UserStatus::Suspended)
        .await
        .unwrap();
    assert_eq!(
        t.edge(fan, sus).await.map(|(active, _)| active),
        Some(false)
    );

    // A restore in flight, as `lifecycle` runs one batch: the account's
    // hidden edges locked, then its edges revived — not committed yet.
    let mut restore = diesel_async::AsyncPgConnection::establish(t.app.config.session_url())
        .await
        .unwrap();
    for statement in [
        "BEGIN".to_owned(),
        format!(
            "UPDATE users SET status = 'active' WHERE id = {}",
            sus.get()
        ),
        format!(
            "SELECT 1 FROM hidden_edge WHERE account_id = {} FOR UPDATE",
            sus.get()
        ),
        format!(
            "UPDATE following SET active = TRUE, version = version + 1, updated_at = now()
              WHERE from_user_id = {} AND to_user_id = {}",
            fan.get(),
            sus.get()
        ),
        format!(
            "UPDATE user_stats SET followings = followings + 1,
                    version = kith_next_version(version) WHERE user_id = {}",
            fan.get()
        ),
        format!("DELETE FROM hidden_edge WHERE account_id = {}", sus.get()),
    ] {
        diesel::sql_query(statement)
            .execute(&mut restore)
            .await
            .unwrap();
    }
    // The fan unfollows meanwhile; the restore commits a moment later.
    let t = Arc::new(t);
    let unfollow = {
        let t = t.clone();
        tokio::spawn(async move { t.unfollow(fan, sus).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    diesel::sql_query("COMMIT")
        .execute(&mut restore)
        .await
        .unwrap();
    let r = unfollow.await.unwrap();
    assert!(r["errors"].is_null(), "{r}");
    assert_eq!(
        t.edge(fan, sus).await.map(|(active, _)| active),
        Some(false),
        "the unfollow made while the restore ran was lost"
    );
    assert_eq!(t.stats(fan).await.0, 0, "the fan follows no one: {r}");
}

#[tokio::test]
async fn an_unfollow_during_a_suspension_is_not_undone_by_the_restore() {
    use diesel_async::{AsyncConnection as _, RunQueryDsl as _};
    let t = spawn_app_with(|_| {}).await;
    let (fan, sus) = (t.user("fan").await, t.user("sus").await);
    t.follow(fan, sus).await;

    // A suspension in flight, as `lifecycle` runs one batch: the account's
    // edges locked and made inactive, remembered as hidden — not committed.
    let mut hide = diesel_async::AsyncPgConnection::establish(t.app.config.session_url())
        .await
        .unwrap();
    let (fan_id, sus_id) = (fan.get(), sus.get());
    for statement in [
        "BEGIN".to_owned(),
        format!("UPDATE users SET status = 'suspended' WHERE id = {sus_id}"),
        format!("SELECT 1 FROM following WHERE to_user_id = {sus_id} AND active FOR UPDATE"),
        format!(
            "UPDATE following SET active = FALSE, version = version + 1, updated_at = now()
              WHERE from_user_id = {fan_id} AND to_user_id = {sus_id}"
        ),
        format!(
            "UPDATE user_stats SET followings = followings - 1,
                    version = kith_next_version(version) WHERE user_id = {fan_id}"
        ),
        format!(
            "INSERT INTO hidden_edge (account_id, from_user_id, to_user_id, followed_at)
             VALUES ({sus_id}, {fan_id}, {sus_id}, now())"
        ),
    ] {
        diesel::sql_query(statement)
            .execute(&mut hide)
            .await
            .unwrap();
    }
    // The fan unfollows meanwhile (and waits for the edge); the suspension
    // commits a moment later.
    let t = Arc::new(t);
    let unfollow = {
        let t = t.clone();
        tokio::spawn(async move { t.unfollow(fan, sus).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    diesel::sql_query("COMMIT")
        .execute(&mut hide)
        .await
        .unwrap();
    let r = unfollow.await.unwrap();
    assert!(r["errors"].is_null(), "{r}");
    // Restoring the account must not bring back the follow the fan ended.
    let summary = lifecycle::set_status(&t.app, sus, UserStatus::Active)
        .await
        .unwrap();
    assert_eq!(summary.restored, 0, "{summary}");
    assert_eq!(
        t.edge(fan, sus).await.map(|(active, _)| active),
        Some(false)
    );
}

/// Every query reads a deleted account as null; the payloads of the
/// mutations that still reach one (an unfollow, unblock, unmute, a removal,
/// an answer to its request) do too.
#[tokio::test]
async fn mutation_payloads_show_a_deleted_account_as_null() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 100).await;
    let (me, gone) = (t.user("me").await, t.user("gone").await);
    let id = kith::testing::graph::ids::user_id(gone).to_string();
    let viewer = kith::testing::auth::Viewer::User(me);
    let run = async |query: &str| {
        let r = t.execute(viewer, query, json!({ "id": id })).await;
        assert!(r["errors"].is_null(), "{query}: {r}");
        r
    };
    t.follow(me, gone).await;
    t.follow(gone, me).await;
    run("mutation($id: ID!) { mute(input: {userId: $id}) { changed } }").await;
    lifecycle::set_status(&t.app, gone, UserStatus::Deleted)
        .await
        .unwrap();
    let user = "user { id handle displayName }";
    for (field, input) in [
        ("unfollow", "{userId: $id}"),
        ("removeFollower", "{userId: $id}"),
        ("unmute", "{userId: $id}"),
        ("unblock", "{userId: $id}"),
        ("rejectFollowRequest", "{userId: $id}"),
    ] {
        let r = run(&format!(
            "mutation($id: ID!) {{ {field}(input: {input}) {{ changed {user} }} }}"
        ))
        .await;
        assert_eq!(r["data"][field]["user"], Value::Null, "{field}: {r}");
    }
    let r = run(&format!(
        "mutation($id: ID!) {{ unfollowMany(input: {{userIds: [$id]}}) {{ results {{ changed {user} }} }} }}"
    ))
    .await;
    assert_eq!(
        r["data"]["unfollowMany"]["results"][0]["user"],
        Value::Null,
        "{r}"
    );
    let r = run("query($id: ID!) { user(id: $id) { handle } }").await;
    assert_eq!(r["data"]["user"], Value::Null, "{r}");
}
