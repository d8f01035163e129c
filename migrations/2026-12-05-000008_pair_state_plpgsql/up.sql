-- `kith_pair_state` in PL/pgSQL: a SQL-language function called from
-- PL/pgSQL (`SELECT * FROM kith_pair_state(...)`) is not inlined, and
-- PostgreSQL plans its body again on every call, while PL/pgSQL keeps the
-- plan for the session. Measured in a loop of `kith_change_edge` calls:
-- 138 µs a call before, 77 µs after. The rule is unchanged.
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
