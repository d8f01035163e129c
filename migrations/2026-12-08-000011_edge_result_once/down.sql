-- Back to the functions of migrations 000009 and 000010, each returning
-- its own fifteen columns.

DROP FUNCTION kith_remove_follower(BIGINT, BIGINT, UUID);
DROP FUNCTION kith_change_edges(BIGINT, BIGINT[], UUID[], BOOLEAN);
DROP FUNCTION kith_change_edge(BIGINT, BIGINT, BOOLEAN, UUID);
DROP FUNCTION kith_actor_refusal(BIGINT);
DROP TYPE kith_edge_result;

CREATE FUNCTION kith_change_edge(p_actor BIGINT, p_target BIGINT, p_follow BOOLEAN, p_event_id UUID)
RETURNS TABLE (
    outcome TEXT,
    target_handle TEXT,
    target_display_name TEXT,
    target_status TEXT,
    edge_version BIGINT,
    edge_followed_at TIMESTAMPTZ,
    occurred_at TIMESTAMPTZ,
    followings BIGINT,
    followers BIGINT,
    posts BIGINT,
    likes_received BIGINT,
    favs_received BIGINT,
    version BIGINT,
    a_follows_b TIMESTAMPTZ,
    b_follows_a TIMESTAMPTZ
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_actor_status TEXT;
    v_target users%ROWTYPE;
    v_step RECORD;
    v_pair RECORD;
    v_stats user_stats%ROWTYPE;
BEGIN
    SELECT u.status INTO v_actor_status FROM users u WHERE u.id = p_actor;
    IF v_actor_status IS NULL OR v_actor_status = 'deleted' THEN
        outcome := 'actor_unknown';
        RETURN NEXT;
        RETURN;
    ELSIF v_actor_status = 'suspended' THEN
        outcome := 'actor_suspended';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT * INTO v_target FROM users u WHERE u.id = p_target;
    IF NOT FOUND THEN
        outcome := 'target_unknown';
        RETURN NEXT;
        RETURN;
    END IF;
    target_handle := v_target.handle;
    target_display_name := v_target.display_name;
    target_status := v_target.status;
    IF p_follow AND v_target.status <> 'active' THEN
        outcome := 'target_unfollowable';
        RETURN NEXT;
        RETURN;
    END IF;
    outcome := 'ok';
    v_step := kith_edge_step(p_actor, p_target, p_follow, p_event_id);
    edge_version := v_step.edge_version;
    edge_followed_at := v_step.edge_followed_at;
    occurred_at := v_step.occurred_at;
    IF edge_version IS NOT NULL THEN
        v_stats := kith_count_followings(p_actor, CASE WHEN p_follow THEN 1 ELSE -1 END);
        followings := v_stats.followings;
        followers := v_stats.followers;
        posts := v_stats.posts;
        likes_received := v_stats.likes_received;
        favs_received := v_stats.favs_received;
        version := v_stats.version;
    END IF;
    v_pair := kith_pair_state(p_actor, p_target);
    a_follows_b := v_pair.a_follows_b;
    b_follows_a := v_pair.b_follows_a;
    RETURN NEXT;
END
$$;

CREATE FUNCTION kith_change_edges(p_actor BIGINT, p_targets BIGINT[], p_events UUID[], p_follow BOOLEAN)
RETURNS TABLE (
    outcome TEXT,
    target_handle TEXT,
    target_display_name TEXT,
    target_status TEXT,
    edge_version BIGINT,
    edge_followed_at TIMESTAMPTZ,
    occurred_at TIMESTAMPTZ,
    followings BIGINT,
    followers BIGINT,
    posts BIGINT,
    likes_received BIGINT,
    favs_received BIGINT,
    version BIGINT,
    a_follows_b TIMESTAMPTZ,
    b_follows_a TIMESTAMPTZ
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_actor_status TEXT;
    v_target users%ROWTYPE;
    v_step RECORD;
    v_pair RECORD;
    v_stats user_stats%ROWTYPE;
    v_changed INT := 0;
    v_rows JSONB[] := '{}';
    v_row JSONB;
    i INT;
BEGIN
    SELECT u.status INTO v_actor_status FROM users u WHERE u.id = p_actor;
    IF v_actor_status IS NULL OR v_actor_status = 'deleted' OR v_actor_status = 'suspended' THEN
        FOR i IN 1 .. coalesce(array_length(p_targets, 1), 0) LOOP
            outcome := CASE WHEN v_actor_status = 'suspended' THEN 'actor_suspended' ELSE 'actor_unknown' END;
            RETURN NEXT;
        END LOOP;
        RETURN;
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_targets, 1), 0) LOOP
        SELECT * INTO v_target FROM users u WHERE u.id = p_targets[i];
        IF NOT FOUND THEN
            v_rows := v_rows || jsonb_build_object('outcome', 'target_unknown');
            CONTINUE;
        END IF;
        IF p_follow AND v_target.status <> 'active' THEN
            v_rows := v_rows || jsonb_build_object('outcome', 'target_unfollowable',
                'handle', v_target.handle, 'display_name', v_target.display_name,
                'status', v_target.status);
            CONTINUE;
        END IF;
        v_step := kith_edge_step(p_actor, p_targets[i], p_follow, p_events[i]);
        v_pair := kith_pair_state(p_actor, p_targets[i]);
        IF v_step.edge_version IS NOT NULL THEN
            v_changed := v_changed + 1;
        END IF;
        v_rows := v_rows || jsonb_build_object('outcome', 'ok',
            'handle', v_target.handle, 'display_name', v_target.display_name,
            'status', v_target.status, 'version', v_step.edge_version,
            'followed_at', v_step.edge_followed_at, 'occurred_at', v_step.occurred_at,
            'a_follows_b', v_pair.a_follows_b, 'b_follows_a', v_pair.b_follows_a);
    END LOOP;
    IF v_changed > 0 THEN
        v_stats := kith_count_followings(p_actor, CASE WHEN p_follow THEN v_changed ELSE -v_changed END);
    END IF;
    FOREACH v_row IN ARRAY v_rows LOOP
        outcome := v_row->>'outcome';
        target_handle := v_row->>'handle';
        target_display_name := v_row->>'display_name';
        target_status := v_row->>'status';
        edge_version := (v_row->>'version')::BIGINT;
        edge_followed_at := (v_row->>'followed_at')::TIMESTAMPTZ;
        occurred_at := (v_row->>'occurred_at')::TIMESTAMPTZ;
        a_follows_b := (v_row->>'a_follows_b')::TIMESTAMPTZ;
        b_follows_a := (v_row->>'b_follows_a')::TIMESTAMPTZ;
        IF edge_version IS NOT NULL THEN
            followings := v_stats.followings;
            followers := v_stats.followers;
            posts := v_stats.posts;
            likes_received := v_stats.likes_received;
            favs_received := v_stats.favs_received;
            version := v_stats.version;
        ELSE
            followings := NULL; followers := NULL; posts := NULL;
            likes_received := NULL; favs_received := NULL; version := NULL;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

CREATE FUNCTION kith_remove_follower(p_owner BIGINT, p_follower BIGINT, p_event_id UUID)
RETURNS TABLE (
    outcome TEXT,
    target_handle TEXT,
    target_display_name TEXT,
    target_status TEXT,
    edge_version BIGINT,
    edge_followed_at TIMESTAMPTZ,
    occurred_at TIMESTAMPTZ,
    followings BIGINT,
    followers BIGINT,
    posts BIGINT,
    likes_received BIGINT,
    favs_received BIGINT,
    version BIGINT,
    a_follows_b TIMESTAMPTZ,
    b_follows_a TIMESTAMPTZ
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_owner_status TEXT;
    v_follower users%ROWTYPE;
BEGIN
    SELECT u.status INTO v_owner_status FROM users u WHERE u.id = p_owner;
    IF v_owner_status IS NULL OR v_owner_status = 'deleted' THEN
        outcome := 'actor_unknown';
        RETURN NEXT;
        RETURN;
    ELSIF v_owner_status = 'suspended' THEN
        outcome := 'actor_suspended';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT * INTO v_follower FROM users u WHERE u.id = p_follower;
    IF NOT FOUND THEN
        outcome := 'target_unknown';
        RETURN NEXT;
        RETURN;
    END IF;
    RETURN QUERY
        SELECT 'ok'::TEXT, v_follower.handle, v_follower.display_name, v_follower.status, t.*
          FROM kith_transition_edge(p_follower, p_owner, FALSE, p_event_id) t;
END
$$;
