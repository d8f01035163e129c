-- The edge transition of `kith_change_edge` is split into parts that other
-- callers share, each applying exactly the same rules:
--
-- * `kith_edge_step`: the edge row's transition and its outbox event;
-- * `kith_count_followings`: a user's `followings` moved by a delta;
-- * `kith_pair_state`: the state of a pair in both directions.
--
-- Every caller locks in one order — the edge rows first (a batch: in
-- ascending target order), the actor's `user_stats` row last, once — the
-- order the lifecycle's bulk changes lock in too, so no two of them wait on
-- each other in a circle.
--
-- `kith_change_edge` (one follow or unfollow), `kith_remove_follower` (a
-- user makes a follower stop following them) and `kith_change_edges` (a
-- batch of one actor) are built from them.

-- Moves the edge `from -> to` to the asked state and appends its outbox
-- event; nothing (all nulls) when it was in that state already (an unfollow
-- of an edge hidden with a suspended account then forgets the hidden edge,
-- so that its restore does not bring it back). Checks no party.
CREATE FUNCTION kith_edge_step(p_from BIGINT, p_to BIGINT, p_follow BOOLEAN, p_event_id UUID,
    OUT edge_version BIGINT, OUT edge_followed_at TIMESTAMPTZ, OUT occurred_at TIMESTAMPTZ)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_type TEXT := CASE WHEN p_follow THEN 'FollowCreated' ELSE 'FollowCanceled' END;
BEGIN
    IF p_follow THEN
        -- A re-follow sets followed_at again: the list shows the latest follow.
        INSERT INTO following AS f (from_user_id, to_user_id, active, followed_at, version, updated_at)
        VALUES (p_from, p_to, TRUE, date_trunc('milliseconds', now()), 1, now())
        ON CONFLICT (from_user_id, to_user_id) DO UPDATE
           SET active = TRUE,
               followed_at = EXCLUDED.followed_at,
               version = f.version + 1,
               updated_at = now()
         WHERE NOT f.active
        RETURNING f.version, f.followed_at INTO edge_version, edge_followed_at;
    ELSE
        UPDATE following AS f
           SET active = FALSE, version = f.version + 1, updated_at = now()
         WHERE f.from_user_id = p_from AND f.to_user_id = p_to AND f.active
        RETURNING f.version, f.followed_at INTO edge_version, edge_followed_at;
    END IF;

    IF edge_version IS NOT NULL THEN
        occurred_at := date_trunc('milliseconds', now());
        -- The wire format of FollowEvent (src/pipeline/events.rs); a test
        -- decodes these rows with the Rust type.
        INSERT INTO outbox (event_id, event_type, partition_key, payload)
        VALUES (p_event_id, v_type, p_from::TEXT, jsonb_build_object(
            'schemaVersion', 1,
            'eventId', p_event_id,
            'type', v_type,
            'from', p_from,
            'to', p_to,
            'version', edge_version,
            'followedAtMs', (extract(epoch FROM edge_followed_at) * 1000)::BIGINT,
            'occurredAtMs', (extract(epoch FROM occurred_at) * 1000)::BIGINT));
    ELSIF NOT p_follow THEN
        -- An unfollow of an edge hidden with a suspended account: its
        -- restore must not bring it back.
        DELETE FROM hidden_edge h WHERE h.from_user_id = p_from AND h.to_user_id = p_to;
    END IF;
END
$$;

-- Adds `p_delta` to the user's `followings` (a new version) and returns the
-- row. A user without a row (created outside Kith, or whose row was lost)
-- gets one counted from the truth, which already holds the change.
CREATE FUNCTION kith_count_followings(p_user BIGINT, p_delta BIGINT) RETURNS user_stats
LANGUAGE plpgsql AS $$
DECLARE
    v_stats user_stats%ROWTYPE;
BEGIN
    UPDATE user_stats AS s
       SET followings = s.followings + p_delta,
           version = kith_next_version(s.version)
     WHERE s.user_id = p_user
    RETURNING s.* INTO v_stats;
    IF NOT FOUND THEN
        IF kith_ensure_stats(p_user) THEN
            SELECT * INTO v_stats FROM user_stats s WHERE s.user_id = p_user;
        ELSE
            UPDATE user_stats AS s
               SET followings = s.followings + p_delta,
                   version = kith_next_version(s.version)
             WHERE s.user_id = p_user
            RETURNING s.* INTO v_stats;
        END IF;
    END IF;
    RETURN v_stats;
END
$$;

-- When `a` followed `b` and `b` followed `a`, where they do now.
CREATE FUNCTION kith_pair_state(p_a BIGINT, p_b BIGINT,
    OUT a_follows_b TIMESTAMPTZ, OUT b_follows_a TIMESTAMPTZ)
LANGUAGE sql STABLE AS $$
    SELECT max(f.followed_at) FILTER (WHERE f.from_user_id = p_a),
           max(f.followed_at) FILTER (WHERE f.from_user_id = p_b)
      FROM following f
     WHERE f.active
       AND ((f.from_user_id = p_a AND f.to_user_id = p_b)
         OR (f.from_user_id = p_b AND f.to_user_id = p_a))
$$;

-- One edge transition with the counters and the pair's state after it:
-- the row of `kith_change_edge` after its party checks (target columns and
-- outcome aside).
CREATE FUNCTION kith_transition_edge(p_from BIGINT, p_to BIGINT, p_follow BOOLEAN, p_event_id UUID)
RETURNS TABLE (
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
    v_stats user_stats%ROWTYPE;
BEGIN
    SELECT * INTO edge_version, edge_followed_at, occurred_at
      FROM kith_edge_step(p_from, p_to, p_follow, p_event_id);
    IF edge_version IS NOT NULL THEN
        v_stats := kith_count_followings(p_from, CASE WHEN p_follow THEN 1 ELSE -1 END);
        followings := v_stats.followings;
        followers := v_stats.followers;
        posts := v_stats.posts;
        likes_received := v_stats.likes_received;
        favs_received := v_stats.favs_received;
        version := v_stats.version;
    END IF;
    SELECT * INTO a_follows_b, b_follows_a FROM kith_pair_state(p_from, p_to);
    RETURN NEXT;
END
$$;

-- Unchanged rules (see migration 000004); the transition is now shared.
CREATE OR REPLACE FUNCTION kith_change_edge(p_actor BIGINT, p_target BIGINT, p_follow BOOLEAN, p_event_id UUID)
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
    IF p_follow AND v_target.status <> 'active' THEN
        outcome := 'target_unfollowable';
        target_handle := v_target.handle;
        target_display_name := v_target.display_name;
        target_status := v_target.status;
        RETURN NEXT;
        RETURN;
    END IF;
    RETURN QUERY
        SELECT 'ok'::TEXT, v_target.handle, v_target.display_name, v_target.status, t.*
          FROM kith_transition_edge(p_actor, p_target, p_follow, p_event_id) t;
END
$$;

-- `p_owner` makes `p_follower` stop following them: the same transition as
-- the follower's own unfollow (the follower's counters, the event from the
-- follower). The outcome names the parties as `kith_change_edge` does, the
-- owner being the actor: 'actor_unknown', 'actor_suspended', or
-- 'target_unknown' (no such follower, or deleted). The target columns
-- describe the follower; the pair columns are from the follower's side.
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
    IF NOT FOUND OR v_follower.status = 'deleted' THEN
        outcome := 'target_unknown';
        RETURN NEXT;
        RETURN;
    END IF;
    RETURN QUERY
        SELECT 'ok'::TEXT, v_follower.handle, v_follower.display_name, v_follower.status, t.*
          FROM kith_transition_edge(p_follower, p_owner, FALSE, p_event_id) t;
END
$$;

-- A batch of one actor's follows (`p_follow`) or unfollows, in one call:
-- targets in the order given (callers give them in ascending id order, so
-- edges are locked in that order), each checked and transitioned as
-- `kith_change_edge` would, then the actor's `followings` moved once by the
-- batch's net change. One row per target, in order, with the same outcomes;
-- every changed row carries the counters after the whole batch. An actor
-- that may not write gets its outcome on every row, and nothing changes.
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
        SELECT * INTO v_step FROM kith_edge_step(p_actor, p_targets[i], p_follow, p_events[i]);
        SELECT * INTO v_pair FROM kith_pair_state(p_actor, p_targets[i]);
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
