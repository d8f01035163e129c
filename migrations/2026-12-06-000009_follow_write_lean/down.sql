-- The follow write of migration 000007 and the default fillfactor.
ALTER TABLE user_stats RESET (fillfactor);

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
