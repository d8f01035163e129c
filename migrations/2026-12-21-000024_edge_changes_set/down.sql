-- Back to migration 000023: edge changes of one actor per call.
DROP FUNCTION kith_change_edges(BIGINT[], BIGINT[], BOOLEAN[], UUID[], BIGINT, DOUBLE PRECISION);

CREATE OR REPLACE FUNCTION kith_accept_requests(p_owner BIGINT, p_limit INT, p_max_followings BIGINT,
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
