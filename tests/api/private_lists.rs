//! The viewer's own lists — `blocking`, `muting`, `followRequests`,
//! `sentFollowRequests` — page like any list, and no one else reads them.

use kith::model::UserId;
use kith::testing::auth::Viewer;
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_ok, error_code, spawn_app};

fn gid(user: UserId) -> String {
    kith::testing::graph::ids::user_id(user).to_string()
}

async fn act(t: &TestApp, actor: UserId, mutation: &str, target: UserId, extra: &str) {
    let r = t
        .execute(
            Viewer::User(actor),
            &format!(
                "mutation($id: ID!) {{ {mutation}(input: {{userId: $id{extra}}}) {{ changed }} }}"
            ),
            json!({ "id": gid(target) }),
        )
        .await;
    assert_ok(&r);
}

async fn private(t: &TestApp, viewer: Viewer, owner: UserId, field: &str, args: &str) -> Value {
    t.execute(
        viewer,
        &format!(
            "query($id: ID!) {{ user(id: $id) {{ {field}({args}) {{
                totalCount edges {{ node {{ handle }} }} pageInfo {{ hasNextPage endCursor }} }} }} }}"
        ),
        json!({ "id": gid(owner) }),
    )
    .await
}

fn handles(r: &Value, field: &str) -> Vec<String> {
    r["data"]["user"][field]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["handle"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_viewers_own_lists_page_newest_first() {
    let t = spawn_app().await;
    let me = t.user("me").await;
    let u: Vec<UserId> = {
        let mut u = Vec::new();
        for h in ["x", "y", "z", "w", "fan1", "fan2", "idol"] {
            u.push(t.user(h).await);
        }
        u
    };
    let (x, y, z, w, fan1, fan2, idol) = (u[0], u[1], u[2], u[3], u[4], u[5], u[6]);
    // Made in the reverse order of their ids, so that newest first is not
    // the ids' order (which breaks ties of equal times).
    act(&t, me, "block", y, "").await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    act(&t, me, "block", x, "").await;
    act(&t, me, "mute", z, "").await;
    act(&t, me, "mute", w, ", durationSecs: 1").await;
    for (user, locked) in [(me, true), (idol, true)] {
        let r = t
            .execute(
                Viewer::User(user),
                "mutation($l: Boolean) { updateAccountSettings(input: {locked: $l}) { user { locked } } }",
                json!({ "l": locked }),
            )
            .await;
        assert_ok(&r);
    }
    act(&t, fan2, "follow", me, "").await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    act(&t, fan1, "follow", me, "").await;
    act(&t, me, "follow", idol, "").await;

    // Newest first, by cursor, with the whole count.
    let first = private(&t, Viewer::User(me), me, "blocking", "first: 1").await;
    assert_ok(&first);
    assert_eq!(handles(&first, "blocking"), ["x"]);
    assert_eq!(first["data"]["user"]["blocking"]["totalCount"], 2);
    let cursor = first["data"]["user"]["blocking"]["pageInfo"]["endCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let next = private(
        &t,
        Viewer::User(me),
        me,
        "blocking",
        &format!("first: 1, after: \"{cursor}\""),
    )
    .await;
    assert_eq!(handles(&next, "blocking"), ["y"]);
    assert_eq!(
        next["data"]["user"]["blocking"]["pageInfo"]["hasNextPage"],
        false
    );
    // A cursor of one list is no cursor of another.
    let other = private(
        &t,
        Viewer::User(me),
        me,
        "muting",
        &format!("first: 1, after: \"{cursor}\""),
    )
    .await;
    assert_eq!(error_code(&other), Some("BAD_CURSOR"));

    let muting = private(&t, Viewer::User(me), me, "muting", "first: 5").await;
    assert_eq!(handles(&muting, "muting"), ["w", "z"]);
    // The mute with an end reaches it (no waiting for the clock).
    t.sql(&format!(
        "UPDATE mute SET expires_at = date_trunc('milliseconds', now()) - interval '1 second'
          WHERE to_user_id = {w}"
    ))
    .await;
    let muting = private(&t, Viewer::User(me), me, "muting", "first: 5").await;
    assert_eq!(handles(&muting, "muting"), ["z"], "an ended mute is gone");
    assert_eq!(muting["data"]["user"]["muting"]["totalCount"], 1);

    let incoming = private(&t, Viewer::User(me), me, "followRequests", "first: 5").await;
    assert_eq!(handles(&incoming, "followRequests"), ["fan1", "fan2"]);
    let sent = private(&t, Viewer::User(me), me, "sentFollowRequests", "first: 5").await;
    assert_eq!(handles(&sent, "sentFollowRequests"), ["idol"]);

    // A requester that is not active is set aside: not listed, not counted.
    kith::testing::write::lifecycle::set_status(&t.app, fan2, kith::model::UserStatus::Suspended)
        .await
        .unwrap();
    let incoming = private(&t, Viewer::User(me), me, "followRequests", "first: 1").await;
    assert_eq!(handles(&incoming, "followRequests"), ["fan1"], "{incoming}");
    assert_eq!(incoming["data"]["user"]["followRequests"]["totalCount"], 1);
    assert_eq!(
        incoming["data"]["user"]["followRequests"]["pageInfo"]["hasNextPage"],
        false
    );

    // Nobody else reads them.
    for field in ["blocking", "muting", "followRequests", "sentFollowRequests"] {
        for viewer in [Viewer::User(x), Viewer::Anonymous] {
            let r = private(&t, viewer, me, field, "first: 5").await;
            assert_eq!(error_code(&r), Some("FORBIDDEN"), "{field}: {r}");
        }
    }
}
