-- Two mends of follow requests.
--
-- An accepted request makes a follow, so it is held to the requester's
-- follow cap as a follow is: `kith_answer_request` and
-- `kith_accept_requests` take the cap's settings; an accept past it
-- answers 'follow_limit' and changes nothing (an unlock's batch rejects
-- such a request, so that batches end).
--
-- Most follows and unfollows end no request: `kith_request_step` probes
-- for a pending one before it updates, instead of an UPDATE that matched
-- no row yet ran the table's statement trigger on every follow.

CREATE OR REPLACE FUNCTION kith_request_step(p_from BIGINT, p_to BIGINT, p_request BOOLEAN, p_event_id UUID, p_type TEXT,
    OUT version BIGINT, OUT requested_at TIMESTAMPTZ, OUT occurred_at TIMESTAMPTZ)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    IF p_request THEN
        INSERT INTO follow_request AS q (from_user_id, to_user_id, active, requested_at, version, updated_at)
        VALUES (p_from, p_to, TRUE, date_trunc('milliseconds', now()), 1, now())
        ON CONFLICT (from_user_id, to_user_id) DO UPDATE
           SET active = TRUE, requested_at = EXCLUDED.requested_at,
               version = q.version + 1, updated_at = now()
         WHERE NOT q.active
        RETURNING q.version, q.requested_at INTO version, requested_at;
    ELSE
        -- Most follows and unfollows end no request: an index probe, not
        -- an UPDATE (whose statement trigger would run for no row).
        PERFORM 1 FROM follow_request q
         WHERE q.from_user_id = p_from AND q.to_user_id = p_to AND q.active;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        UPDATE follow_request AS q
           SET active = FALSE, version = q.version + 1, updated_at = now()
         WHERE q.from_user_id = p_from AND q.to_user_id = p_to AND q.active
        RETURNING q.version, q.requested_at INTO version, requested_at;
    END IF;
    IF version IS NOT NULL THEN
        occurred_at := date_trunc('milliseconds', now());
        -- The wire format of RequestEvent (src/events/request.rs).
        INSERT INTO outbox (event_id, event_type, partition_key, payload)
        VALUES (p_event_id, p_type, p_from::TEXT, jsonb_build_object(
            'schemaVersion', 1,
            'eventId', p_event_id,
            'type', p_type,
            'from', p_from,
            'to', p_to,
            'version', version,
            'requestedAtMs', (extract(epoch FROM requested_at) * 1000)::BIGINT,
            'occurredAtMs', (extract(epoch FROM occurred_at) * 1000)::BIGINT));
    END IF;
END
$$;


DROP FUNCTION kith_accept_requests(BIGINT, INT);
DROP FUNCTION kith_answer_request(BIGINT, BIGINT, BOOLEAN, UUID, UUID);

CREATE FUNCTION kith_answer_request(p_owner BIGINT, p_requester BIGINT, p_accept BOOLEAN,
    p_event_id UUID, p_follow_event_id UUID, p_max_followings BIGINT, p_followings_ratio DOUBLE PRECISION)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
DECLARE
    r kith_edge_result;
    v_requester users%ROWTYPE;
    v_req RECORD;
    v_t RECORD;
    v_pair RECORD;
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
    r.target_handle := v_requester.handle;
    r.target_display_name := v_requester.display_name;
    r.target_status := v_requester.status;
    r.target_locked := v_requester.locked;
    r.target_hides_collections := v_requester.hides_collections;
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
            v_stats.followings := v_stats.followings + 1;
            IF kith_past_follow_cap(v_stats, p_max_followings, p_followings_ratio) THEN
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
        SELECT * INTO v_t FROM kith_transition_edge(p_requester, p_owner, TRUE, p_follow_event_id);
        r.edge_version := v_t.edge_version;
        r.edge_followed_at := v_t.edge_followed_at;
        r.occurred_at := v_t.occurred_at;
        r.followings := v_t.followings;
        r.followers := v_t.followers;
        r.posts := v_t.posts;
        r.likes_received := v_t.likes_received;
        r.favs_received := v_t.favs_received;
        r.version := v_t.version;
    END IF;
    v_pair := kith_pair_state(p_owner, p_requester);
    r.a_follows_b := v_pair.a_follows_b;
    r.b_follows_a := v_pair.b_follows_a;
    RETURN NEXT r;
END
$$;


CREATE FUNCTION kith_accept_requests(p_owner BIGINT, p_limit INT, p_max_followings BIGINT,
    p_followings_ratio DOUBLE PRECISION)
RETURNS TABLE (requester BIGINT, outcome TEXT) LANGUAGE plpgsql AS $$
DECLARE
    v_from BIGINT;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM users u WHERE u.id = p_owner AND NOT u.locked AND u.status = 'active') THEN
        RETURN;
    END IF;
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
