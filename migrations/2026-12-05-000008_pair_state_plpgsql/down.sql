CREATE OR REPLACE FUNCTION kith_pair_state(p_a BIGINT, p_b BIGINT,
    OUT a_follows_b TIMESTAMPTZ, OUT b_follows_a TIMESTAMPTZ)
LANGUAGE sql STABLE AS $$
    SELECT max(f.followed_at) FILTER (WHERE f.from_user_id = p_a),
           max(f.followed_at) FILTER (WHERE f.from_user_id = p_b)
      FROM following f
     WHERE f.active
       AND ((f.from_user_id = p_a AND f.to_user_id = p_b)
         OR (f.from_user_id = p_b AND f.to_user_id = p_a))
$$;
