-- Back to migration 000013's SQL kith_blocked and migration 000008's
-- kith_pair_state.

CREATE OR REPLACE FUNCTION kith_blocked(p_a BIGINT, p_b BIGINT) RETURNS BOOLEAN LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM block b
                    WHERE b.active
                      AND ((b.from_user_id = p_a AND b.to_user_id = p_b)
                        OR (b.from_user_id = p_b AND b.to_user_id = p_a)))
$$;

CREATE OR REPLACE FUNCTION kith_pair_state(p_a BIGINT, p_b BIGINT,
    OUT a_follows_b TIMESTAMPTZ, OUT b_follows_a TIMESTAMPTZ)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    SELECT max(f.followed_at) FILTER (WHERE f.from_user_id = p_a),
           max(f.followed_at) FILTER (WHERE f.from_user_id = p_b)
      INTO a_follows_b, b_follows_a
      FROM following f
     WHERE f.active
       AND ((f.from_user_id = p_a AND f.to_user_id = p_b)
         OR (f.from_user_id = p_b AND f.to_user_id = p_a));
END
$$;
