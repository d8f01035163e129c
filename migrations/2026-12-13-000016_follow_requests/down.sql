-- Back to migration 000015: no follow requests.

CREATE OR REPLACE FUNCTION kith_change_edge(p_actor BIGINT, p_target BIGINT, p_follow BOOLEAN, p_event_id UUID,
    p_max_followings BIGINT, p_followings_ratio DOUBLE PRECISION)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
DECLARE
    r kith_edge_result;
    v_target users%ROWTYPE;
    v_step RECORD;
    v_pair RECORD;
    v_stats user_stats%ROWTYPE;
BEGIN
    r.outcome := kith_actor_refusal(p_actor);
    IF r.outcome IS NOT NULL THEN
        RETURN NEXT r;
        RETURN;
    END IF;
    SELECT * INTO v_target FROM users u WHERE u.id = p_target;
    IF NOT FOUND THEN
        r.outcome := 'target_unknown';
        RETURN NEXT r;
        RETURN;
    END IF;
    r.target_handle := v_target.handle;
    r.target_display_name := v_target.display_name;
    r.target_status := v_target.status;
    r.target_locked := v_target.locked;
    r.target_hides_collections := v_target.hides_collections;
    IF p_follow AND v_target.status <> 'active' THEN
        r.outcome := 'target_unfollowable';
        RETURN NEXT r;
        RETURN;
    END IF;
    IF p_follow THEN
        PERFORM kith_lock_pair(p_actor, p_target);
        IF kith_blocked(p_actor, p_target) THEN
            r.outcome := 'blocked';
            RETURN NEXT r;
            RETURN;
        END IF;
    END IF;
    r.outcome := 'ok';
    v_step := kith_edge_step(p_actor, p_target, p_follow, p_event_id);
    r.edge_version := v_step.edge_version;
    r.edge_followed_at := v_step.edge_followed_at;
    r.occurred_at := v_step.occurred_at;
    IF r.edge_version IS NOT NULL THEN
        v_stats := kith_count_followings(p_actor, CASE WHEN p_follow THEN 1 ELSE -1 END);
        IF p_follow AND kith_past_follow_cap(v_stats, p_max_followings, p_followings_ratio) THEN
            RAISE EXCEPTION 'kith: follow limit' USING ERRCODE = 'KF001';
        END IF;
        r.followings := v_stats.followings;
        r.followers := v_stats.followers;
        r.posts := v_stats.posts;
        r.likes_received := v_stats.likes_received;
        r.favs_received := v_stats.favs_received;
        r.version := v_stats.version;
    END IF;
    v_pair := kith_pair_state(p_actor, p_target);
    r.a_follows_b := v_pair.a_follows_b;
    r.b_follows_a := v_pair.b_follows_a;
    RETURN NEXT r;
END
$$;

CREATE OR REPLACE FUNCTION kith_change_edges(p_actor BIGINT, p_targets BIGINT[], p_events UUID[], p_follow BOOLEAN,
    p_max_followings BIGINT, p_followings_ratio DOUBLE PRECISION)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
DECLARE
    r kith_edge_result;
    v_refusal TEXT;
    v_target users%ROWTYPE;
    v_step RECORD;
    v_pair RECORD;
    v_stats user_stats%ROWTYPE;
    v_changed INT := 0;
    v_rows kith_edge_result[] := '{}';
    i INT;
BEGIN
    v_refusal := kith_actor_refusal(p_actor);
    IF v_refusal IS NOT NULL THEN
        r.outcome := v_refusal;
        FOR i IN 1 .. coalesce(array_length(p_targets, 1), 0) LOOP
            RETURN NEXT r;
        END LOOP;
        RETURN;
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_targets, 1), 0) LOOP
        r := NULL;
        SELECT * INTO v_target FROM users u WHERE u.id = p_targets[i];
        IF NOT FOUND THEN
            r.outcome := 'target_unknown';
            v_rows := v_rows || r;
            CONTINUE;
        END IF;
        r.target_handle := v_target.handle;
        r.target_display_name := v_target.display_name;
        r.target_status := v_target.status;
        r.target_locked := v_target.locked;
        r.target_hides_collections := v_target.hides_collections;
        IF p_follow AND v_target.status <> 'active' THEN
            r.outcome := 'target_unfollowable';
            v_rows := v_rows || r;
            CONTINUE;
        END IF;
        IF p_follow THEN
            PERFORM kith_lock_pair(p_actor, p_targets[i]);
            IF kith_blocked(p_actor, p_targets[i]) THEN
                r.outcome := 'blocked';
                v_rows := v_rows || r;
                CONTINUE;
            END IF;
        END IF;
        v_step := kith_edge_step(p_actor, p_targets[i], p_follow, p_events[i]);
        v_pair := kith_pair_state(p_actor, p_targets[i]);
        IF v_step.edge_version IS NOT NULL THEN
            v_changed := v_changed + 1;
        END IF;
        r.outcome := 'ok';
        r.edge_version := v_step.edge_version;
        r.edge_followed_at := v_step.edge_followed_at;
        r.occurred_at := v_step.occurred_at;
        r.a_follows_b := v_pair.a_follows_b;
        r.b_follows_a := v_pair.b_follows_a;
        v_rows := v_rows || r;
    END LOOP;
    IF v_changed > 0 THEN
        v_stats := kith_count_followings(p_actor, CASE WHEN p_follow THEN v_changed ELSE -v_changed END);
        IF p_follow AND kith_past_follow_cap(v_stats, p_max_followings, p_followings_ratio) THEN
            RAISE EXCEPTION 'kith: follow limit' USING ERRCODE = 'KF001';
        END IF;
    END IF;
    FOREACH r IN ARRAY v_rows LOOP
        IF r.edge_version IS NOT NULL THEN
            r.followings := v_stats.followings;
            r.followers := v_stats.followers;
            r.posts := v_stats.posts;
            r.likes_received := v_stats.likes_received;
            r.favs_received := v_stats.favs_received;
            r.version := v_stats.version;
        END IF;
        RETURN NEXT r;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION kith_block(p_actor BIGINT, p_target BIGINT, p_block BOOLEAN, p_event_id UUID,
    p_unfollow_events UUID[], p_max_blocks BIGINT)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
DECLARE
    r kith_edge_result;
    e kith_edge_result;
    v_target users%ROWTYPE;
    v_type TEXT := CASE WHEN p_block THEN 'BlockCreated' ELSE 'BlockRemoved' END;
    v_dir RECORD;
    v_ended RECORD;
    v_ends kith_edge_result[] := '{}';
BEGIN
    r.outcome := kith_actor_refusal(p_actor);
    IF r.outcome IS NOT NULL THEN
        RETURN NEXT r;
        RETURN;
    END IF;
    SELECT * INTO v_target FROM users u WHERE u.id = p_target;
    IF NOT FOUND OR (p_block AND v_target.status = 'deleted') THEN
        r.outcome := 'target_unknown';
        RETURN NEXT r;
        RETURN;
    END IF;
    r.target_handle := v_target.handle;
    r.target_display_name := v_target.display_name;
    r.target_status := v_target.status;
    r.target_locked := v_target.locked;
    r.target_hides_collections := v_target.hides_collections;
    PERFORM kith_lock_pair(p_actor, p_target);
    IF p_block THEN
        IF p_max_blocks > 0 AND NOT EXISTS (
            SELECT 1 FROM block b
             WHERE b.from_user_id = p_actor AND b.to_user_id = p_target AND b.active) THEN
            -- One actor's new blocks are counted one at a time.
            PERFORM 1 FROM users u WHERE u.id = p_actor FOR NO KEY UPDATE;
            IF (SELECT count(*) FROM block b WHERE b.from_user_id = p_actor AND b.active) >= p_max_blocks THEN
                r.outcome := 'block_limit';
                RETURN NEXT r;
                RETURN;
            END IF;
        END IF;
        INSERT INTO block AS b (from_user_id, to_user_id, active, blocked_at, version, updated_at)
        VALUES (p_actor, p_target, TRUE, date_trunc('milliseconds', now()), 1, now())
        ON CONFLICT (from_user_id, to_user_id) DO UPDATE
           SET active = TRUE,
               blocked_at = EXCLUDED.blocked_at,
               version = b.version + 1,
               updated_at = now()
         WHERE NOT b.active
        RETURNING b.version, b.blocked_at INTO r.edge_version, r.edge_followed_at;
        -- The follows both ways end, as unfollows do (hidden ones are
        -- forgotten), the lower follower's first: the order counters lock in.
        FOR v_dir IN
            SELECT * FROM (VALUES (p_actor, p_target, 'ended_out', p_unfollow_events[1]),
                                  (p_target, p_actor, 'ended_in', p_unfollow_events[2]))
                       AS d(f, t, o, ev)
             ORDER BY f
        LOOP
            SELECT * INTO v_ended FROM kith_transition_edge(v_dir.f, v_dir.t, FALSE, v_dir.ev);
            CONTINUE WHEN v_ended.edge_version IS NULL;
            e := NULL;
            e.outcome := v_dir.o;
            e.edge_version := v_ended.edge_version;
            e.edge_followed_at := v_ended.edge_followed_at;
            e.occurred_at := v_ended.occurred_at;
            e.followings := v_ended.followings;
            e.followers := v_ended.followers;
            e.posts := v_ended.posts;
            e.likes_received := v_ended.likes_received;
            e.favs_received := v_ended.favs_received;
            e.version := v_ended.version;
            v_ends := v_ends || e;
        END LOOP;
    ELSE
        UPDATE block AS b
           SET active = FALSE, version = b.version + 1, updated_at = now()
         WHERE b.from_user_id = p_actor AND b.to_user_id = p_target AND b.active
        RETURNING b.version, b.blocked_at INTO r.edge_version, r.edge_followed_at;
    END IF;
    r.outcome := 'ok';
    IF r.edge_version IS NOT NULL THEN
        r.occurred_at := date_trunc('milliseconds', now());
        -- The wire format of BlockEvent (src/events/block.rs).
        INSERT INTO outbox (event_id, event_type, partition_key, payload)
        VALUES (p_event_id, v_type, p_actor::TEXT, jsonb_build_object(
            'schemaVersion', 1,
            'eventId', p_event_id,
            'type', v_type,
            'from', p_actor,
            'to', p_target,
            'version', r.edge_version,
            'blockedAtMs', (extract(epoch FROM r.edge_followed_at) * 1000)::BIGINT,
            'occurredAtMs', (extract(epoch FROM r.occurred_at) * 1000)::BIGINT));
    END IF;
    SELECT * INTO r.a_follows_b, r.b_follows_a FROM kith_pair_state(p_actor, p_target);
    RETURN NEXT r;
    FOREACH e IN ARRAY v_ends LOOP
        RETURN NEXT e;
    END LOOP;
END
$$;

DROP FUNCTION kith_accept_requests(BIGINT, INT);
DROP FUNCTION kith_answer_request(BIGINT, BIGINT, BOOLEAN, UUID, UUID);
DROP FUNCTION kith_request_step(BIGINT, BIGINT, BOOLEAN, UUID, TEXT);
DROP TABLE follow_request;
