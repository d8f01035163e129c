//! The event pipeline against the real broker: relay, projector, replays,
//! reorders, crashes, outages and poison messages.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kith::model::UserId;
use kith::testing::events::follow::{FollowEvent, FollowEventType};
use kith::testing::paging::ListKey;
use kith::testing::pipeline::PipelineError;
use kith::testing::pipeline::projector::ProjectorHooks;
use rdkafka::Message;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Headers;
use serde_json::json;
use uuid::Uuid;

use crate::helpers::{TestApp, eventually, settled, spawn_app, spawn_app_with};

fn hooks() -> Arc<ProjectorHooks> {
    Arc::new(ProjectorHooks::default())
}

#[tokio::test]
async fn a_follow_reaches_every_derived_view() {
    let t = spawn_app().await;
    let (alice, bob, carol) = (
        t.user("alice").await,
        t.user("bob").await,
        t.user("carol").await,
    );
    t.cache_list(ListKey::Following(alice), &[]).await;
    t.cache_list(ListKey::Followers(bob), &[]).await;
    let relay = t.start_relay();
    let projector = t.start_projector(hooks());

    assert_eq!(
        t.follow(alice, bob).await["data"]["follow"]["changed"],
        true
    );
    assert_eq!(
        t.follow(carol, bob).await["data"]["follow"]["changed"],
        true
    );
    settled(&t, &[alice, bob, carol], 60).await;

    assert_eq!(t.projected(alice, bob).await, Some((true, 1)));
    let stats = t.full_stats(bob).await;
    assert_eq!(stats.followers, 2);
    let record = t.counter_record(bob).await.unwrap();
    assert_eq!((record.followers, record.followings), (2, 0));
    assert_eq!(t.counter_record(alice).await.unwrap().followings, 1);
    let fans = t.cached_list(ListKey::Followers(bob)).await.unwrap();
    assert_eq!(fans.len(), 2);
    assert!(fans.contains(&alice) && fans.contains(&carol));
    assert_eq!(
        t.cached_list(ListKey::Following(alice)).await,
        Some(vec![bob])
    );
    assert_eq!(
        t.cached_list(ListKey::Following(carol)).await,
        None,
        "an uncached list is not created by an event"
    );

    assert_eq!(
        t.unfollow(alice, bob).await["data"]["unfollow"]["changed"],
        true
    );
    settled(&t, &[alice, bob, carol], 60).await;
    assert_eq!(t.projected(alice, bob).await, Some((false, 2)));
    assert_eq!(t.full_stats(bob).await.followers, 1);
    assert_eq!(t.counter_record(bob).await.unwrap().followers, 1);
    assert_eq!(
        t.cached_list(ListKey::Followers(bob)).await,
        Some(vec![carol])
    );
    assert_eq!(t.cached_list(ListKey::Following(alice)).await, Some(vec![]));

    let metrics = t.app.metrics.render(&Default::default());
    assert!(
        metrics.contains("kith_events_relayed_total 3\n"),
        "{metrics}"
    );
    assert!(t.app.metrics.lag_observations() >= 3);
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();
}

#[tokio::test]
async fn the_actor_reads_its_own_writes_before_the_pipeline_runs() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    t.cache_list(ListKey::Following(alice), &[]).await;

    assert_eq!(
        t.follow(alice, bob).await["data"]["follow"]["changed"],
        true
    );
    assert_eq!(t.counter_record(alice).await.unwrap().followings, 1);
    assert_eq!(
        t.cached_list(ListKey::Following(alice)).await,
        Some(vec![bob])
    );
    assert_eq!(
        t.counter_record(bob).await,
        None,
        "the target's side is the projector's job"
    );

    assert_eq!(
        t.unfollow(alice, bob).await["data"]["unfollow"]["changed"],
        true
    );
    let record = t.counter_record(alice).await.unwrap();
    let stats = t.full_stats(alice).await;
    assert_eq!(
        (record.followings, record.version),
        (0, stats.version as u64)
    );
    assert_eq!(t.cached_list(ListKey::Following(alice)).await, Some(vec![]));
}

#[tokio::test]
async fn replaying_the_whole_topic_changes_nothing() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let mut users = Vec::new();
    for i in 0..5 {
        users.push(t.user(&format!("u{i}")).await);
    }
    for user in &users {
        t.cache_list(ListKey::Followers(*user), &[]).await;
        t.cache_list(ListKey::Following(*user), &[]).await;
    }
    let relay = t.start_relay();
    let projector = t.start_projector(hooks());
    for (i, a) in users.iter().enumerate() {
        for b in users.iter().skip(i + 1) {
            t.follow(*a, *b).await;
            t.follow(*b, *a).await;
        }
    }
    for pair in users.windows(2) {
        t.unfollow(pair[0], pair[1]).await;
    }
    for (i, author) in users.iter().enumerate() {
        let event = json!({"eventId": Uuid::new_v4(), "type": "PostPublished", "authorId": author, "occurredAtMs": i});
        t.produce(
            &t.app.config.pipeline.content_topic,
            &author.to_string(),
            event.to_string().as_bytes(),
        )
        .await;
    }
    settled(&t, &users, 60).await;
    eventually("content events", 30, || async {
        (t.full_stats(users[4]).await.posts == 1 && t.counter_record(users[4]).await?.posts == 1)
            .then_some(())
    })
    .await;
    let before = t.derived_state(&users).await;
    let total = t.app.metrics.events_relayed.get() + users.len() as u64;
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();

    let mut config = t.app.config.clone();
    config.pipeline.consumer_group = format!("{}-replay", config.pipeline.consumer_group);
    let replay_app = kith::app::App::start(config).await.unwrap();
    let replay = t.start_projector_for(replay_app.clone(), hooks());
    eventually("the replay to finish", 60, || async {
        (replay_app.metrics.events_applied.get() >= total).then_some(())
    })
    .await;
    replay.stop().await.unwrap();
    assert_eq!(t.derived_state(&users).await, before);
}

fn follow_event(
    kind: FollowEventType,
    from: UserId,
    to: UserId,
    version: i64,
    at_ms: i64,
) -> Vec<u8> {
    let event = FollowEvent {
        schema_version: 1,
        event_id: Uuid::new_v4(),
        event_type: kind,
        from,
        to,
        version,
        followed_at_ms: at_ms,
        occurred_at_ms: at_ms + version,
    };
    serde_json::to_vec(&event).unwrap()
}

#[tokio::test]
async fn an_unfollow_delivered_before_its_follow_wins() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    t.cache_list(ListKey::Followers(bob), &[]).await;
    let projector = t.start_projector(hooks());
    let topic = t.app.config.pipeline.follow_topic.clone();
    let key = alice.to_string();
    let at = chrono::Utc::now().timestamp_millis();
    let canceled = follow_event(FollowEventType::FollowCanceled, alice, bob, 2, at);
    let created = follow_event(FollowEventType::FollowCreated, alice, bob, 1, at);
    t.produce(&topic, &key, &canceled).await;
    t.produce(&topic, &key, &created).await;
    t.produce(&topic, &key, &canceled).await;
    t.produce(&topic, &key, &created).await;
    eventually("four events applied", 60, || async {
        (t.app.metrics.events_applied.get() >= 4).then_some(())
    })
    .await;
    assert_eq!(t.projected(alice, bob).await, Some((false, 2)));
    assert_eq!(t.full_stats(bob).await.followers, 0);
    assert_eq!(t.cached_list(ListKey::Followers(bob)).await, Some(vec![]));
    projector.stop().await.unwrap();
}

#[tokio::test]
async fn a_crash_between_postgres_and_redis_is_repaired_by_replay() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    t.cache_list(ListKey::Followers(bob), &[]).await;
    let crashing = Arc::new(ProjectorHooks::default());
    crashing.crash_after_pg_commit.store(true, Ordering::SeqCst);
    let relay = t.start_relay();
    let projector = t.start_projector(crashing);

    assert_eq!(
        t.follow(alice, bob).await["data"]["follow"]["changed"],
        true
    );
    let result = projector.join(60).await;
    assert!(
        matches!(
            result,
            Err(kith::jobs::JobError::Pipeline(
                PipelineError::SimulatedCrash
            ))
        ),
        "{result:?}"
    );
    // PostgreSQL has the change; Redis and the offsets do not.
    assert_eq!(t.projected(alice, bob).await, Some((true, 1)));
    let after_crash = t.full_stats(bob).await;
    assert_eq!(after_crash.followers, 1);
    assert_eq!(t.counter_record(bob).await, None);
    assert_eq!(t.cached_list(ListKey::Followers(bob)).await, Some(vec![]));

    let projector = t.start_projector(hooks());
    eventually("the replay to repair Redis", 60, || async {
        let record = t.counter_record(bob).await?;
        (record.followers == 1 && t.cached_list(ListKey::Followers(bob)).await? == vec![alice])
            .then_some(())
    })
    .await;
    assert_eq!(
        t.full_stats(bob).await,
        after_crash,
        "the replay counted nothing twice"
    );
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();
}

#[tokio::test]
async fn duplicate_content_events_count_once_and_poison_is_dead_lettered() {
    let t = spawn_app().await;
    let alice = t.user("alice").await;
    let projector = t.start_projector(hooks());
    let topic = t.app.config.pipeline.content_topic.clone();
    let key = alice.to_string();
    let event =
        |id: Uuid, kind: &str| json!({"eventId": id, "type": kind, "authorId": alice}).to_string();
    let ids: Vec<Uuid> = (0..8).map(|_| Uuid::new_v4()).collect();
    let messages = [
        event(ids[0], "PostPublished"),
        event(ids[0], "PostPublished"),
        event(ids[1], "PostLiked"),
        event(ids[1], "PostLiked"),
        event(ids[2], "PostFavorited"),
        event(ids[3], "PostLiked"),
        event(ids[4], "PostUnliked"),
        "{not json".to_owned(),
        event(ids[5], "PostShared"),
        event(ids[6], "PostUnfavorited"),
        // Would take favsReceived below zero: rejected, dead-lettered, not clamped.
        event(ids[7], "PostUnfavorited"),
        event(Uuid::new_v4(), "PostPublished"),
    ];
    for message in &messages {
        t.produce(&topic, &key, message.as_bytes()).await;
    }
    t.produce(
        &t.app.config.pipeline.follow_topic,
        &key,
        b"\x00\x01garbage",
    )
    .await;

    eventually("every message handled", 60, || async {
        let stats = t.full_stats(alice).await;
        let dead = t.app.metrics.events_dead_lettered.get();
        (dead == 4
            && stats.posts == 2
            && t.counter_record(alice).await?.version == stats.version as u64)
            .then_some(())
    })
    .await;
    let stats = t.full_stats(alice).await;
    assert_eq!(
        (stats.posts, stats.likes_received, stats.favs_received),
        (2, 1, 0)
    );
    let record = t.counter_record(alice).await.unwrap();
    assert_eq!(
        (record.posts, record.likes_received, record.favs_received),
        (2, 1, 0)
    );
    projector.stop().await.unwrap();

    let recorded = kith::testing::store::dead_letters::list(&mut *t.conn().await, 0, 100, false)
        .await
        .unwrap();
    assert_eq!(recorded.len(), 4, "{recorded:#?}");
    assert!(
        recorded.iter().any(|l| l.error.contains("below zero")
            && l.payload.as_deref() == Some(messages[10].as_bytes()))
    );

    // The relay mirrors them to the dead-letter topic.
    let relay = t.start_relay();
    let consumer: StreamConsumer = kith::testing::pipeline::kafka::client_config(&t.app.config)
        .set(
            "group.id",
            format!("{}-dlq-reader", t.app.config.pipeline.consumer_group),
        )
        .create()
        .unwrap();
    let mut partitions = rdkafka::TopicPartitionList::new();
    for partition in 0..t.app.config.pipeline.topic_partitions {
        partitions
            .add_partition_offset(
                &t.app.config.pipeline.dead_letter_topic,
                partition,
                rdkafka::Offset::Beginning,
            )
            .unwrap();
    }
    consumer.assign(&partitions).unwrap();
    let mut dead = Vec::new();
    while dead.len() < 4 {
        let message = tokio::time::timeout(std::time::Duration::from_secs(30), consumer.recv())
            .await
            .expect("dead letters arrive")
            .unwrap();
        let headers = message.headers().expect("dead letters carry headers");
        let header = |name: &str| {
            headers
                .iter()
                .find(|h| h.key == name)
                .and_then(|h| h.value)
                .map(|v| String::from_utf8_lossy(v).into_owned())
        };
        assert!(header("kith-error").is_some());
        dead.push((
            header("kith-source-topic").unwrap(),
            message.payload().unwrap().to_vec(),
        ));
    }
    dead.sort();
    assert!(dead.iter().any(
        |(topic, payload)| topic == &t.app.config.pipeline.follow_topic
            && payload == b"\x00\x01garbage"
    ));
    assert!(
        dead.iter()
            .any(|(_, payload)| payload == messages[10].as_bytes())
    );
    assert!(
        dead.iter()
            .any(|(_, payload)| payload == messages[7].as_bytes())
    );
    relay.stop().await.unwrap();
}

#[tokio::test]
async fn one_relay_is_active_and_a_standby_takes_over() {
    let t = spawn_app().await;
    let (alice, bob, carol) = (
        t.user("alice").await,
        t.user("bob").await,
        t.user("carol").await,
    );
    let standby_app = kith::app::App::start(t.app.config.clone()).await.unwrap();
    let projector = t.start_projector(hooks());
    let active = t.start_relay();
    // Let the first relay take the lock before the second starts.
    eventually("the first relay to publish", 60, || async {
        t.follow(alice, bob).await;
        (t.app.metrics.events_relayed.get() == 1).then_some(())
    })
    .await;
    let (standby_trigger, standby_shutdown) = kith::testing::shutdown::Shutdown::new();
    let standby = tokio::spawn(kith::testing::pipeline::relay::run(
        standby_app.clone(),
        standby_shutdown,
    ));

    t.follow(carol, bob).await;
    eventually("the active relay to publish", 60, || async {
        (t.app.metrics.events_relayed.get() == 2).then_some(())
    })
    .await;
    assert_eq!(
        standby_app.metrics.events_relayed.get(),
        0,
        "the standby stays idle"
    );

    active.stop().await.unwrap();
    t.follow(alice, carol).await;
    eventually("the standby to take over", 60, || async {
        (standby_app.metrics.events_relayed.get() == 1).then_some(())
    })
    .await;
    settled(&t, &[alice, bob, carol], 60).await;
    assert_eq!(t.full_stats(bob).await.followers, 2);
    standby_trigger.trigger();
    standby.await.unwrap().unwrap();
    projector.stop().await.unwrap();
}

/// Content events of `author`, as items of one batch.
fn content_items(
    t: &TestApp,
    author: UserId,
    kinds: &[&str],
    first_offset: i64,
) -> Vec<kith::testing::pipeline::projector::batch::Item> {
    use kith::testing::pipeline::projector::batch::{Action, Event, Item};
    kinds
        .iter()
        .enumerate()
        .map(|(i, kind)| {
            let payload =
                json!({"eventId": Uuid::new_v4(), "type": kind, "authorId": author}).to_string();
            let message = rdkafka::message::OwnedMessage::new(
                Some(payload.clone().into_bytes()),
                None,
                t.app.config.pipeline.content_topic.clone(),
                rdkafka::Timestamp::NotAvailable,
                0,
                first_offset + i as i64,
                None,
            );
            Item {
                partition: kith::testing::store::partitions::TopicPartition {
                    topic: t.app.config.pipeline.content_topic.clone(),
                    partition: 0,
                },
                offset: first_offset + i as i64,
                message,
                action: Action::Apply(Event::Content(serde_json::from_str(&payload).unwrap())),
            }
        })
        .collect()
}

#[tokio::test]
async fn content_outcomes_do_not_depend_on_batching() {
    use diesel_async::AsyncConnection as _;
    use kith::testing::pipeline::projector::apply::apply_items;
    let t = spawn_app().await;
    let (together, apart) = (t.user("together").await, t.user("apart").await);
    let kinds = [
        "PostDeleted",
        "PostPublished",
        "PostUnliked",
        "PostLiked",
        "PostLiked",
    ];

    let batch = content_items(&t, together, &kinds, 0);
    let mut conn = t.conn().await;
    let one = conn
        .transaction::<_, PipelineError, _>(async |conn| {
            apply_items(conn, &batch.iter().collect::<Vec<_>>()).await
        })
        .await
        .unwrap();
    let mut dead_apart = 0;
    for item in content_items(&t, apart, &kinds, 100) {
        let one_by_one = conn
            .transaction::<_, PipelineError, _>(async |conn| apply_items(conn, &[&item]).await)
            .await
            .unwrap();
        dead_apart += one_by_one.dead_lettered;
    }
    drop(conn);
    let (a, b) = (t.full_stats(together).await, t.full_stats(apart).await);
    assert_eq!((a.posts, a.likes_received), (1, 2));
    assert_eq!((a.posts, a.likes_received), (b.posts, b.likes_received));
    assert_eq!(one.dead_lettered, 2, "the delete and the unlike below zero");
    assert_eq!(one.dead_lettered, dead_apart);
}

#[tokio::test]
async fn dead_letters_replay_once_the_cause_is_fixed_and_the_ledger_is_pruned() {
    let t = spawn_app().await;
    let alice = t.user("alice").await;
    let projector = t.start_projector(hooks());
    let topic = t.app.config.pipeline.content_topic.clone();
    let key = alice.to_string();
    let unfavorite =
        json!({"eventId": Uuid::new_v4(), "type": "PostUnfavorited", "authorId": alice})
            .to_string();
    t.produce(&topic, &key, unfavorite.as_bytes()).await;
    eventually("the dead letter", 60, || async {
        (t.app.metrics.events_dead_lettered.get() == 1).then_some(())
    })
    .await;
    // Nothing to take back yet: the replay leaves it dead.
    let report = kith::testing::pipeline::dead_letters::replay(&t.app, None)
        .await
        .unwrap();
    assert_eq!((report.replayed.len(), report.still_dead.len()), (0, 1));

    // The favourite it withdrew arrives late; now the withdrawal applies, once.
    let favorite =
        json!({"eventId": Uuid::new_v4(), "type": "PostFavorited", "authorId": alice}).to_string();
    t.produce(&topic, &key, favorite.as_bytes()).await;
    eventually("the favourite", 60, || async {
        (t.full_stats(alice).await.favs_received == 1).then_some(())
    })
    .await;
    let report = kith::testing::pipeline::dead_letters::replay(&t.app, None)
        .await
        .unwrap();
    assert_eq!((report.replayed.len(), report.still_dead.len()), (1, 0));
    assert_eq!(t.full_stats(alice).await.favs_received, 0);
    assert_eq!(
        t.counter_record(alice).await.unwrap().favs_received,
        0,
        "the replay re-syncs Redis"
    );
    let report = kith::testing::pipeline::dead_letters::replay(&t.app, None)
        .await
        .unwrap();
    assert_eq!(
        (report.replayed.len(), report.still_dead.len()),
        (0, 0),
        "replayed once"
    );
    projector.stop().await.unwrap();

    // Retention: entries older than the cut are forgotten, newer ones kept.
    t.sql("UPDATE content_event_ledger SET applied_at = now() - interval '40 days' WHERE author_id IN (SELECT author_id FROM content_event_ledger LIMIT 1)").await;
    let pruned =
        kith::testing::store::content::prune(&mut *t.conn().await, chrono::Duration::days(30), 10)
            .await
            .unwrap();
    assert_eq!(pruned, 2, "both of alice's counted events were old");
}

#[tokio::test]
async fn a_commit_whose_answer_is_lost_is_taken_as_done_and_the_partition_goes_on() {
    let t = spawn_app().await;
    let target = t.user("target").await;
    let mut fans = Vec::new();
    for i in 0..6 {
        fans.push(t.user(&format!("fan{i}")).await);
    }
    let losing = Arc::new(ProjectorHooks::default());
    losing.lose_next_commit_answer.store(true, Ordering::SeqCst);
    let relay = t.start_relay();
    let projector = t.start_projector(losing.clone());
    t.follow(fans[0], target).await;
    eventually("the first follow", 60, || async {
        (t.full_stats(target).await.followers == 1).then_some(())
    })
    .await;
    assert!(
        !losing.lose_next_commit_answer.load(Ordering::SeqCst),
        "the hook fired"
    );
    // Its retry found the position moved under its own lease: it goes on
    // from there instead of dropping the partition or counting twice.
    for fan in &fans[1..] {
        t.follow(*fan, target).await;
    }
    settled(&t, &[target], 60).await;
    assert_eq!(t.full_stats(target).await.followers, 6);
    assert_eq!(t.counter_record(target).await.unwrap().followers, 6);
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();
}

/// An app whose relay's fallback poll is far longer than any test: only
/// wake-ups can move events.
async fn app_without_relay_poll() -> TestApp {
    spawn_app_with(|c| {
        c.pipeline.relay_poll_ms = 600_000;
        c.writes.rate_limit_capacity = 1000;
    })
    .await
}

/// Messages on the follow topic: the sum of its partitions' high watermarks.
async fn messages_on_follow_topic(t: &TestApp) -> i64 {
    let config = t.app.config.clone();
    tokio::task::spawn_blocking(move || {
        let client: rdkafka::consumer::BaseConsumer =
            kith::testing::pipeline::kafka::client_config(&config)
                .create()
                .expect("client");
        (0..config.pipeline.topic_partitions)
            .map(|p| {
                client
                    .fetch_watermarks(&config.pipeline.follow_topic, p, Duration::from_secs(10))
                    .expect("watermarks")
                    .1
            })
            .sum()
    })
    .await
    .unwrap()
}

/// Commits at every point of a running relay's loop (while it reads, while
/// it publishes, while it waits), then lone commits on an idle relay: each
/// must be relayed within seconds, which only a wake-up can do — and once:
/// a relay deletes what the broker acknowledged before it reads again.
async fn each_commit_is_relayed_by_a_wake_up(t: &TestApp) {
    let target = t.user("target").await;
    let mut fans = Vec::new();
    for i in 0..40 {
        fans.push(t.user(&format!("fan{i}")).await);
    }
    let mut rng = crate::rng::Rng(7);
    for fan in &fans {
        tokio::time::sleep(Duration::from_millis(rng.below(30))).await;
        t.follow(*fan, target).await;
    }
    eventually(
        "every commit relayed without the fallback poll",
        10,
        || async { (crate::helpers::backlog(t).await == 0).then_some(()) },
    )
    .await;
    for fan in fans.iter().take(5) {
        // The relay goes idle between them.
        tokio::time::sleep(Duration::from_millis(200)).await;
        t.unfollow(*fan, target).await;
        eventually("a lone commit relayed", 3, || async {
            (crate::helpers::backlog(t).await == 0).then_some(())
        })
        .await;
    }
    // 45 commits so far, then a 46th: the relay works round after round, so
    // once the 46th is on the topic, any row of an earlier round sent again
    // (an acknowledged row read again) is there too.
    t.unfollow(fans[10], target).await;
    let on_topic = eventually("the 46th commit on the topic", 10, || async {
        let n = messages_on_follow_topic(t).await;
        (n >= 46).then_some(n)
    })
    .await;
    assert_eq!(on_topic, 46, "every commit on the topic once");
}

#[tokio::test]
async fn each_commit_is_relayed_at_once_without_the_fallback_poll() {
    let t = app_without_relay_poll().await;
    let relay = t.start_relay();
    each_commit_is_relayed_by_a_wake_up(&t).await;
    relay.stop().await.unwrap();
}

#[tokio::test]
async fn a_relay_in_another_process_is_woken_by_each_commit() {
    // A real `kith relay` process: nothing shared with the writer but
    // PostgreSQL and Redis, so only the writer's Redis wake-up reaches it.
    let t = app_without_relay_poll().await;
    let _relay = crate::helpers::KithProcess::start(&t, "relay", &[]);
    each_commit_is_relayed_by_a_wake_up(&t).await;
}

/// An app whose idle projector looks at the broker only when woken (or
/// after `idle_poll_ms`).
async fn app_with_idle_poll(idle_poll_ms: u64) -> TestApp {
    spawn_app_with(|c| {
        c.pipeline.projector_idle_poll_ms = idle_poll_ms;
        c.writes.rate_limit_capacity = 1000;
    })
    .await
}

/// Waits until the projector has parked (stopped fetching) again since `after`.
async fn parked_since(t: &TestApp, after: u64) -> u64 {
    eventually("the idle projector parks", 10, || async {
        let parks = t.app.metrics.projector_parks.get();
        (parks > after).then_some(parks)
    })
    .await
}

/// Lone follows on a parked projector: each is applied within seconds,
/// which only the relay's wake-up can do (the idle look is 10 minutes away).
async fn each_follow_wakes_the_parked_projector(t: &TestApp) {
    let target = t.user("idol").await;
    let mut parks = parked_since(t, 0).await;
    for i in 0..4 {
        let fan = t.user(&format!("idle-fan{i}")).await;
        t.follow(fan, target).await;
        // The first wait also covers a relay process starting up (a debug
        // build, on a loaded machine); the idle look is minutes away, so
        // only a wake-up can apply the follow either way.
        let secs = if i == 0 { 30 } else { 5 };
        eventually("a follow applied by a parked projector", secs, || async {
            t.projected(fan, target).await.filter(|(active, _)| *active)
        })
        .await;
        parks = parked_since(t, parks).await;
    }
}

#[tokio::test]
async fn a_parked_projector_is_woken_by_its_processs_relay() {
    let t = app_with_idle_poll(600_000).await;
    let relay = t.start_relay();
    let projector = t.start_projector(hooks());
    each_follow_wakes_the_parked_projector(&t).await;
    // The relay's own Notify, not only its Redis message, ended parks.
    assert!(t.app.metrics.projector_wakeups_by("local") > 0);
    projector.stop().await.unwrap();
    relay.stop().await.unwrap();
}

#[tokio::test]
async fn a_parked_projector_is_woken_by_a_relay_in_another_process() {
    // A real `kith relay` process: only its Redis wake-up reaches the
    // projector here.
    let t = app_with_idle_poll(600_000).await;
    let _relay = crate::helpers::KithProcess::start(&t, "relay", &[]);
    let projector = t.start_projector(hooks());
    each_follow_wakes_the_parked_projector(&t).await;
    assert!(t.app.metrics.projector_wakeups_by("redis") > 0);
    assert_eq!(t.app.metrics.projector_wakeups_by("local"), 0);
    projector.stop().await.unwrap();
}

/// Events no relay announces (content events from other services) wait at
/// most the idle look's interval on a parked projector.
#[tokio::test]
async fn a_parked_projector_still_reads_unannounced_events() {
    let t = app_with_idle_poll(1_000).await;
    let author = t.user("quiet-author").await;
    let projector = t.start_projector(hooks());
    let parks = parked_since(&t, 0).await;
    let event = json!({"eventId": Uuid::new_v4(), "type": "PostPublished", "authorId": author});
    t.produce(
        &t.app.config.pipeline.content_topic,
        &author.to_string(),
        event.to_string().as_bytes(),
    )
    .await;
    eventually("an unannounced event applied", 5, || async {
        (t.full_stats(author).await.posts == 1).then_some(())
    })
    .await;
    parked_since(&t, parks).await;
    projector.stop().await.unwrap();
}

/// `KITH_KAFKA_*` properties reach every Kafka client: a bad one makes the
/// producer refuse to start, a good one is taken, and Kith's delivery
/// guarantees still win over a property that would weaken them.
#[tokio::test]
async fn kafka_properties_reach_the_clients() {
    let t = crate::helpers::spawn_app().await;
    let mut config = t.app.config.clone();
    config.pipeline.kafka_properties = vec![("socket.timeout.ms".into(), "not-a-number".into())];
    assert!(kith::testing::pipeline::kafka::producer(&config).is_err());
    config.pipeline.kafka_properties = vec![
        ("client.id".into(), "kith-test".into()),
        ("acks".into(), "0".into()),
    ];
    let _producer = kith::testing::pipeline::kafka::producer(&config).unwrap();
    let producer = kith::testing::pipeline::kafka::producer_config(&config);
    assert_eq!(producer.get("client.id"), Some("kith-test"));
    assert_eq!(
        producer.get("acks"),
        Some("all"),
        "acks=all is not negotiable"
    );
}

/// Two databases on one set of topics (staging beside production, a
/// restored backup): a projector applies only what its own database wrote.
/// Each refused event becomes a dead letter, is counted, and stays dead
/// through a replay.
#[tokio::test]
async fn events_another_database_wrote_are_refused_never_applied() {
    let t = spawn_app().await;
    let (alice, bob, carol) = (
        t.user("alice").await,
        t.user("bob").await,
        t.user("carol").await,
    );
    t.cache_list(ListKey::Followers(bob), &[]).await;
    let projector = t.start_projector(hooks());
    let topic = t.app.config.pipeline.follow_topic.clone();
    let at = chrono::Utc::now().timestamp_millis();
    let foreign = follow_event(FollowEventType::FollowCreated, alice, bob, 1, at);
    t.produce_from(Some(Uuid::new_v4()), &topic, &alice.to_string(), &foreign)
        .await;
    t.produce_from(None, &topic, &alice.to_string(), &foreign)
        .await;
    // Our own, after them on the same partition: once it is applied, the
    // two before it were handled.
    let own = follow_event(FollowEventType::FollowCreated, carol, bob, 1, at);
    t.produce(&topic, &alice.to_string(), &own).await;
    eventually("our own event applied", 60, || async {
        (t.projected(carol, bob).await == Some((true, 1))).then_some(())
    })
    .await;
    projector.stop().await.unwrap();

    assert_eq!(t.projected(alice, bob).await, None);
    assert_eq!(t.full_stats(bob).await.followers, 1);
    assert_eq!(t.counter_record(bob).await.unwrap().followers, 1);
    assert_eq!(
        t.cached_list(ListKey::Followers(bob)).await,
        Some(vec![carol])
    );
    assert_eq!(t.app.metrics.events_foreign.get(), 2);
    let letters = kith::testing::store::dead_letters::list(&mut *t.conn().await, 0, 100, false)
        .await
        .unwrap();
    assert_eq!(letters.len(), 2, "{letters:#?}");
    assert!(
        letters[0].error.contains("another database"),
        "{letters:#?}"
    );
    assert!(letters[1].error.contains("no kith-origin"), "{letters:#?}");

    let replay = kith::testing::pipeline::dead_letters::replay(&t.app, None)
        .await
        .unwrap();
    assert_eq!((replay.replayed.len(), replay.still_dead.len()), (0, 2));
    assert_eq!(t.projected(alice, bob).await, None);
}
