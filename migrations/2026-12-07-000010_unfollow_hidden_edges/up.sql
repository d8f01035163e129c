-- Unfollows and restores that overlap, and followers removed while their
-- account is not active.
--
-- 1. `kith_edge_step` forgets the pair's hidden edge *before* it looks at
--    the edge, for a follow as for an unfollow (and after an unfollow that
--    found the edge inactive, as before), in the order an account's restore
--    locks them (hidden edges, then edges). Before, an unfollow of an edge a
--    restore was bringing back saw it inactive, did nothing, and the restore
--    then revived it: the unfollow was lost. A follow forgets it too, so no
--    hidden edge stays behind an active edge (a restore cut short by a new
--    suspension could leave one, for that suspension's insert to wait on an
--    unfollow's delete in a circle).
-- 2. `kith_remove_follower` takes a deleted follower too: its follow is
--    hidden (the account is not active), and removing it forgets the hidden
--    edge, so that restoring the account does not bring the follow back.

CREATE OR REPLACE FUNCTION kith_edge_step(p_from BIGINT, p_to BIGINT, p_follow BOOLEAN, p_event_id UUID,
    OUT edge_version BIGINT, OUT edge_followed_at TIMESTAMPTZ, OUT occurred_at TIMESTAMPTZ)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_type TEXT := CASE WHEN p_follow THEN 'FollowCreated' ELSE 'FollowCanceled' END;
BEGIN
    -- An edge hidden with an account that is not active is forgotten, so
    -- that the account's restore does not bring it back: an unfollow ends
    -- it, and a follow (both parties are active) makes it anew. First: a
    -- restore locks the hidden edge, then the edge row; waiting here on a
    -- restore in flight, an unfollow then sees the edge it revived (the
    -- next statement has a new snapshot) and ends it. And no hidden edge is
    -- left behind an active edge, for a later suspension to collide with.
    DELETE FROM hidden_edge h WHERE h.from_user_id = p_from AND h.to_user_id = p_to;
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
        -- And again after: a suspension that hid the edge while this
        -- unfollow waited for its row (it then found the edge inactive)
        -- committed its hidden edge since; a new snapshot sees it.
        DELETE FROM hidden_edge h WHERE h.from_user_id = p_from AND h.to_user_id = p_to;
    END IF;
END
$$;

-- Unchanged but for the deleted follower, which is now removed like any other.
CREATE OR REPLACE FUNCTION kith_remove_follower(p_owner BIGINT, p_follower BIGINT, p_event_id UUID)
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
