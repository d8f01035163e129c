-- A cheaper follow write, with the same rules and the same answers.
--
-- 1. `kith_change_edge` calls its parts by assignment (`v := f(...)`) instead
--    of `SELECT * FROM f(...)` and `RETURN QUERY ... FROM
--    kith_transition_edge(...)`: each of those ran a whole executor (and a
--    set-returning function materialised into a tuplestore) per follow. The
--    parts are the shared ones of migration 000007 (`kith_edge_step`,
--    `kith_count_followings`, `kith_pair_state`); `kith_transition_edge`'s
--    glue is spelled out here.
-- 2. `user_stats` leaves room on its pages, so the two updates of every
--    follow (followings here, followers in the projector) can stay HOT.
--
-- The foreign keys of `following` stay: their KEY SHARE locks on `users` cost
-- a little per new edge, but tools that read the schema (PostGraphile's
-- relations, for one) find the relation through them.

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

ALTER TABLE user_stats SET (fillfactor = 75);
