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
        v_t.outcome := r.outcome;
        r := kith_edge_target(v_t, v_requester);
    END IF;
    SELECT * INTO r.a_follows_b, r.b_follows_a FROM kith_pair_state(p_owner, p_requester);
    RETURN NEXT r;
END
$$;

DROP FUNCTION kith_carry_request_options(BIGINT, BIGINT);
DROP FUNCTION kith_set_follow_options(BIGINT, BIGINT, BOOLEAN, BOOLEAN, TEXT[], BOOLEAN, UUID);
DROP FUNCTION kith_follow_options_step(BIGINT, BIGINT, BOOLEAN, BOOLEAN, TEXT[], BOOLEAN, UUID);
DROP TRIGGER following_options_notify ON following;
DROP INDEX following_options_idx;
DROP FUNCTION kith_follow_options_changed();
ALTER TABLE follow_request DROP COLUMN notify, DROP COLUMN show_reposts, DROP COLUMN languages, DROP COLUMN options_at;
ALTER TABLE following DROP COLUMN notify, DROP COLUMN show_reposts, DROP COLUMN languages, DROP COLUMN options_at, DROP COLUMN options_version;
ALTER TABLE import_row DROP COLUMN options;
