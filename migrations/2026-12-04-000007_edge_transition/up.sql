-- The edge transition of `kith_change_edge` becomes a function of its own,
-- `kith_transition_edge`, so that other callers apply exactly the same
-- transition with their own party checks: `kith_remove_follower` (a user
-- makes a follower stop following them) and batch follows, which call
-- `kith_change_edge` once per target inside one statement.
--
-- `kith_transition_edge(from, to, follow, event_id)` moves the edge
-- `from → to` to the asked state: the edge's version, `from`'s counters and
-- the outbox event change together, or nothing changes (`edge_version` is
-- null when the edge was in the asked state already). It checks no party:
-- its callers do. `a_follows_b` / `b_follows_a` are the pair's state after
-- it, from `from`'s side.
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
        UPDATE user_stats AS s
           SET followings = s.followings + CASE WHEN p_follow THEN 1 ELSE -1 END,
               version = kith_next_version(s.version)
         WHERE s.user_id = p_from
        RETURNING s.* INTO v_stats;
        IF NOT FOUND THEN
            -- Only for users created outside Kith or whose row was lost:
            -- counted from the truth, which already holds this change.
            IF kith_ensure_stats(p_from) THEN
                SELECT * INTO v_stats FROM user_stats s WHERE s.user_id = p_from;
            ELSE
                UPDATE user_stats AS s
                   SET followings = s.followings + CASE WHEN p_follow THEN 1 ELSE -1 END,
                       version = kith_next_version(s.version)
                 WHERE s.user_id = p_from
                RETURNING s.* INTO v_stats;
            END IF;
        END IF;
        followings := v_stats.followings;
        followers := v_stats.followers;
        posts := v_stats.posts;
        likes_received := v_stats.likes_received;
        favs_received := v_stats.favs_received;
        version := v_stats.version;
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

    SELECT max(f.followed_at) FILTER (WHERE f.from_user_id = p_from),
           max(f.followed_at) FILTER (WHERE f.from_user_id = p_to)
      INTO a_follows_b, b_follows_a
      FROM following f
     WHERE f.active
       AND ((f.from_user_id = p_from AND f.to_user_id = p_to)
         OR (f.from_user_id = p_to AND f.to_user_id = p_from));
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
