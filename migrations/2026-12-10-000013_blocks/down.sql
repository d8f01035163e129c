-- Back to migration 000012: follows that know no blocks, and no blocks.

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
    IF p_follow AND v_target.status <> 'active' THEN
        r.outcome := 'target_unfollowable';
        RETURN NEXT r;
        RETURN;
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
        IF p_follow AND v_target.status <> 'active' THEN
            r.outcome := 'target_unfollowable';
            v_rows := v_rows || r;
            CONTINUE;
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

DROP FUNCTION kith_block(BIGINT, BIGINT, BOOLEAN, UUID, UUID[], BIGINT);
DROP FUNCTION kith_blocked(BIGINT, BIGINT);
DROP FUNCTION kith_lock_pair(BIGINT, BIGINT);
DROP TABLE block;
DROP FUNCTION kith_blocks_changed();
