DROP INDEX users_moved_idx;

-- The bodies from before.
CREATE OR REPLACE FUNCTION kith_move_account(p_from bigint, p_to bigint, p_event_id uuid, p_back_event_id uuid, OUT outcome text, OUT move_id bigint) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_from users%ROWTYPE;
    v_to users%ROWTYPE;
BEGIN
    PERFORM 1 FROM users u WHERE u.id IN (p_from, p_to) ORDER BY u.id FOR UPDATE;
    SELECT * INTO v_from FROM users u WHERE u.id = p_from;
    SELECT * INTO v_to FROM users u WHERE u.id = p_to;
    outcome := CASE
        WHEN v_from.id IS NULL OR v_from.status = 'deleted' THEN 'actor_unknown'
        WHEN v_from.status = 'suspended' THEN 'actor_suspended'
        WHEN p_from = p_to THEN 'self'
        WHEN v_to.id IS NULL OR v_to.status = 'deleted' THEN 'target_unknown'
        WHEN v_to.status <> 'active' THEN 'target_unfollowable'
        WHEN v_from.moved_to IS NOT NULL THEN 'moved'
        WHEN v_to.moved_to IS NOT NULL AND v_to.moved_to <> p_from THEN 'target_moved'
        WHEN NOT EXISTS (SELECT 1 FROM account_alias a
                          WHERE a.user_id = p_to AND a.alias_id = p_from) THEN 'no_alias'
        WHEN EXISTS (SELECT 1 FROM account_move m
                      WHERE m.from_id = p_from AND m.state = 'running') THEN 'move_running'
        ELSE 'ok'
    END;
    IF outcome <> 'ok' THEN
        RETURN;
    END IF;
    IF v_to.moved_to = p_from THEN
        UPDATE account_move SET state = 'superseded', finished_at = now(),
                                lease_token = NULL, lease_until = NULL
         WHERE from_id = p_to AND state = 'running';
        UPDATE users SET moved_to = NULL, moved_at = NULL,
                         settings_version = settings_version + 1, updated_at = now()
         WHERE id = p_to;
        PERFORM kith_move_event(p_to, p_back_event_id);
    END IF;
    UPDATE users SET moved_to = p_to, moved_at = now(),
                     settings_version = settings_version + 1, updated_at = now()
     WHERE id = p_from;
    PERFORM kith_move_event(p_from, p_event_id);
    -- Its followers, and those who asked to follow it.
    INSERT INTO account_move (from_id, to_id, state, total)
    SELECT p_from, p_to, 'running', count(*)::INT
      FROM (SELECT f.from_user_id FROM following f WHERE f.to_user_id = p_from AND f.active
            UNION
            SELECT q.from_user_id FROM follow_request q WHERE q.to_user_id = p_from AND q.active) c
    RETURNING id INTO move_id;
END
$$;
COMMENT ON FUNCTION kith_move_account(BIGINT, BIGINT, UUID, UUID) IS
    'Marks an account moved to another that claims it as an alias, and opens the move of its followers; a move to the account that moved to it is a move back. Outcomes, never raised: actor_unknown, actor_suspended, self, target_unknown, target_unfollowable, moved, target_moved, no_alias, move_running.';

CREATE OR REPLACE FUNCTION kith_answer_request(p_owner bigint, p_requester bigint, p_accept boolean, p_event_id uuid, p_follow_event_id uuid, p_max_followings bigint, p_followings_ratio double precision) RETURNS SETOF kith_edge_result
    LANGUAGE plpgsql
    AS $$
DECLARE
    r kith_edge_result;
    v_requester users%ROWTYPE;
    v_req RECORD;
    v_t kith_edge_result;
    v_stats user_stats%ROWTYPE;
BEGIN
    r.outcome := kith_actor_refusal(p_owner);
    IF r.outcome IS NOT NULL THEN
        RETURN NEXT r;
        RETURN;
    END IF;
    SELECT * INTO v_requester FROM users u WHERE u.id = p_requester;
    IF NOT FOUND THEN
        r.outcome := 'target_unknown';
        RETURN NEXT r;
        RETURN;
    END IF;
    r := kith_edge_target(r, v_requester);
    PERFORM kith_lock_pair(p_owner, p_requester);
    IF p_accept AND EXISTS (SELECT 1 FROM follow_request q
                             WHERE q.from_user_id = p_requester AND q.to_user_id = p_owner AND q.active) THEN
        IF v_requester.status <> 'active' THEN
            r.outcome := 'target_unfollowable';
        ELSIF kith_blocked(p_owner, p_requester) THEN
            r.outcome := 'blocked';
        ELSIF NOT EXISTS (SELECT 1 FROM following f WHERE f.from_user_id = p_requester
                                AND f.to_user_id = p_owner AND f.active) THEN
            -- The follow it would make, held to the requester's follow cap
            -- as any follow is (counted as the follow would count it).
            SELECT * INTO v_stats FROM user_stats s WHERE s.user_id = p_requester;
            IF kith_past_follow_cap(v_stats.followings + 1, v_stats.followers,
                                    p_max_followings, p_followings_ratio) THEN
                r.outcome := 'follow_limit';
            END IF;
        END IF;
        IF r.outcome IS NOT NULL THEN
            RETURN NEXT r;
            RETURN;
        END IF;
    END IF;
    v_req := kith_request_step(p_requester, p_owner, FALSE, p_event_id,
        CASE WHEN p_accept THEN 'FollowRequestAccepted' ELSE 'FollowRequestRejected' END);
    r.outcome := CASE WHEN v_req.version IS NULL THEN 'ok' ELSE 'answered' END;
    IF v_req.version IS NOT NULL AND p_accept THEN
        v_t := kith_transition_edge(p_requester, p_owner, TRUE, p_follow_event_id);
        IF v_t.edge_version IS NOT NULL THEN
            PERFORM kith_carry_request_options(p_requester, p_owner);
        END IF;
        v_t.outcome := r.outcome;
        r := kith_edge_target(v_t, v_requester);
    END IF;
    SELECT * INTO r.a_follows_b, r.b_follows_a FROM kith_pair_state(p_owner, p_requester);
    RETURN NEXT r;
END
$$;

CREATE OR REPLACE FUNCTION kith_accept_requests(p_owner bigint, p_limit integer, p_max_followings bigint, p_followings_ratio double precision) RETURNS TABLE(requester bigint, outcome text)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_from BIGINT;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM users u WHERE u.id = p_owner AND NOT u.locked AND u.status = 'active') THEN
        RETURN;
    END IF;
    -- The pairs first, all of them, in the order kith_change_edges takes
    -- pairs in: a group commit holding one of them and waiting for a
    -- requester's counters never waits on this batch's counters.
    PERFORM pg_advisory_xact_lock(hashint8(p.lo), hashint8(p.hi))
       FROM (SELECT least(p_owner, o.from_user_id) AS lo, greatest(p_owner, o.from_user_id) AS hi
               FROM (SELECT q.from_user_id FROM follow_request q
                      WHERE q.to_user_id = p_owner AND q.active
                      ORDER BY q.requested_at, q.from_user_id
                      LIMIT p_limit) o
              ORDER BY 1, 2) p;
    -- The oldest requests, answered in requester order: the order every
    -- write locks counters in, so a batch never deadlocks with another.
    FOR v_from IN
        SELECT o.from_user_id FROM (
            SELECT q.from_user_id FROM follow_request q
             WHERE q.to_user_id = p_owner AND q.active
             ORDER BY q.requested_at, q.from_user_id
             LIMIT p_limit) o
         ORDER BY o.from_user_id
    LOOP
        requester := v_from;
        SELECT a.outcome INTO outcome
          FROM kith_answer_request(p_owner, v_from, TRUE, gen_random_uuid(), gen_random_uuid(),
                                   p_max_followings, p_followings_ratio) a;
        IF outcome IN ('blocked', 'target_unfollowable', 'follow_limit') THEN
            -- It can never become a follow now: dropped, so batches end.
            PERFORM kith_answer_request(p_owner, v_from, FALSE, gen_random_uuid(), NULL,
                                        p_max_followings, p_followings_ratio);
            outcome := 'dropped';
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
