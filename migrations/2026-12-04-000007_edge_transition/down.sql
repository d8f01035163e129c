DROP FUNCTION kith_change_edges(BIGINT, BIGINT[], UUID[], BOOLEAN);
DROP FUNCTION kith_remove_follower(BIGINT, BIGINT, UUID);

-- kith_change_edge as migration 000004 made it.
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
    v_stats user_stats%ROWTYPE;
    v_type TEXT := CASE WHEN p_follow THEN 'FollowCreated' ELSE 'FollowCanceled' END;
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

    IF p_follow THEN
        -- A re-follow sets followed_at again: the list shows the latest follow.
        INSERT INTO following AS f (from_user_id, to_user_id, active, followed_at, version, updated_at)
        VALUES (p_actor, p_target, TRUE, date_trunc('milliseconds', now()), 1, now())
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
         WHERE f.from_user_id = p_actor AND f.to_user_id = p_target AND f.active
        RETURNING f.version, f.followed_at INTO edge_version, edge_followed_at;
    END IF;

    IF edge_version IS NOT NULL THEN
        occurred_at := date_trunc('milliseconds', now());
        UPDATE user_stats AS s
           SET followings = s.followings + CASE WHEN p_follow THEN 1 ELSE -1 END,
               version = kith_next_version(s.version)
         WHERE s.user_id = p_actor
        RETURNING s.* INTO v_stats;
        IF NOT FOUND THEN
            -- Only for users created outside Kith or whose row was lost:
            -- counted from the truth, which already holds this change.
            IF kith_ensure_stats(p_actor) THEN
                SELECT * INTO v_stats FROM user_stats s WHERE s.user_id = p_actor;
            ELSE
                UPDATE user_stats AS s
                   SET followings = s.followings + CASE WHEN p_follow THEN 1 ELSE -1 END,
                       version = kith_next_version(s.version)
                 WHERE s.user_id = p_actor
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
        VALUES (p_event_id, v_type, p_actor::TEXT, jsonb_build_object(
            'schemaVersion', 1,
            'eventId', p_event_id,
            'type', v_type,
            'from', p_actor,
            'to', p_target,
            'version', edge_version,
            'followedAtMs', (extract(epoch FROM edge_followed_at) * 1000)::BIGINT,
            'occurredAtMs', (extract(epoch FROM occurred_at) * 1000)::BIGINT));
    ELSIF NOT p_follow THEN
        -- An unfollow of an edge hidden with a suspended account: its
        -- restore must not bring it back.
        DELETE FROM hidden_edge h WHERE h.from_user_id = p_actor AND h.to_user_id = p_target;
    END IF;

    SELECT max(f.followed_at) FILTER (WHERE f.from_user_id = p_actor),
           max(f.followed_at) FILTER (WHERE f.from_user_id = p_target)
      INTO a_follows_b, b_follows_a
      FROM following f
     WHERE f.active
       AND ((f.from_user_id = p_actor AND f.to_user_id = p_target)
         OR (f.from_user_id = p_target AND f.to_user_id = p_actor));
    outcome := 'ok';
    RETURN NEXT;
END
$$;

DROP FUNCTION kith_transition_edge(BIGINT, BIGINT, BOOLEAN, UUID);
DROP FUNCTION kith_pair_state(BIGINT, BIGINT);
DROP FUNCTION kith_count_followings(BIGINT, BIGINT);
DROP FUNCTION kith_edge_step(BIGINT, BIGINT, BOOLEAN, UUID);
