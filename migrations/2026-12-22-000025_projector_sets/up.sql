-- The projector's batch in a constant number of statements, whatever its
-- size: follower rows (lock, upsert) and follower counters (lock, one
-- update) are each one statement over the whole batch, no longer a
-- PL/pgSQL loop of statements per event or per user.

-- Applies a batch of follow events to `follower`: per edge, the newest
-- event of the batch wins, and only over an older row (the per-edge
-- version guard). One row per event, in the order given: `applied` for the
-- event that moved its edge (the others of the same edge, and stale ones,
-- are not), `was_active` the edge's state before the batch.
CREATE OR REPLACE FUNCTION kith_apply_followers(
    p_to BIGINT[], p_from BIGINT[], p_active BOOLEAN[], p_followed_at TIMESTAMPTZ[], p_version BIGINT[]
) RETURNS TABLE (ord INT, was_active BOOLEAN, applied BOOLEAN) LANGUAGE plpgsql
-- Plans built once per session (see kith_change_edges).
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    n INT := coalesce(cardinality(p_to), 0);
    v_was BOOLEAN[] := array_fill(FALSE, ARRAY[n]);
    v_seen BOOLEAN[] := array_fill(FALSE, ARRAY[n]);
    v_applied BOOLEAN[];
    v_raced BOOLEAN;
    r RECORD;
BEGIN
    IF n = 0 THEN
        RETURN;
    END IF;
    -- 1. The rows that exist, locked in key order: their state before.
    FOR r IN
        SELECT e.i, f.active
          FROM unnest(p_to, p_from) WITH ORDINALITY AS e(t, fr, i)
          JOIN follower f ON f.to_user_id = e.t AND f.from_user_id = e.fr
         ORDER BY f.to_user_id, f.from_user_id
           FOR UPDATE OF f
    LOOP
        v_was[r.i] := r.active;
        v_seen[r.i] := TRUE;
    END LOOP;
    -- 2. Each edge's newest event, written where it is newer. A row that
    -- was not there in step 1 but is now (`xmax` set: not inserted by this
    -- statement) was inserted concurrently, and its state before is not
    -- known: the whole transaction is run again.
    WITH e AS (
        SELECT x.i::INT AS i, x.t, x.fr, x.a, x.at, x.v,
               row_number() OVER (PARTITION BY x.t, x.fr ORDER BY x.v DESC, x.i) AS rn
          FROM unnest(p_to, p_from, p_active, p_followed_at, p_version)
               WITH ORDINALITY AS x(t, fr, a, at, v, i)),
    w AS (
        INSERT INTO follower AS fo (to_user_id, from_user_id, active, followed_at, version)
        SELECT e.t, e.fr, e.a, e.at, e.v FROM e WHERE e.rn = 1 ORDER BY e.t, e.fr
        ON CONFLICT (to_user_id, from_user_id) DO UPDATE
           SET active = EXCLUDED.active, followed_at = EXCLUDED.followed_at,
               version = EXCLUDED.version, updated_at = now()
         WHERE fo.version < EXCLUDED.version
        RETURNING fo.to_user_id, fo.from_user_id, fo.xmax::TEXT = '0' AS inserted)
    SELECT array_agg(w.to_user_id IS NOT NULL ORDER BY e.i),
           coalesce(bool_or(NOT w.inserted AND NOT v_seen[e.i]), FALSE)
      INTO v_applied, v_raced
      FROM e LEFT JOIN w ON e.rn = 1 AND w.to_user_id = e.t AND w.from_user_id = e.fr;
    IF v_raced THEN
        RAISE EXCEPTION USING ERRCODE = 'serialization_failure',
            MESSAGE = 'kith_apply_followers: a follower row was inserted concurrently';
    END IF;
    RETURN QUERY SELECT i, v_was[i], v_applied[i] FROM generate_subscripts(v_applied, 1) i ORDER BY i;
END
$$;

-- Applies a projector batch's counter changes in one transaction:
--  * every user named gets a counter row, locked in id order (a missing
--    row is made from the truth, which already includes this batch's
--    follower delta, so that delta is not added again);
--  * follower deltas per user in one statement;
--  * content events one at a time, in order, each claimed in the ledger and
--    checked against zero on its own — never netted with its neighbours, so
--    the outcome does not depend on how events are batched.
-- Returns one row per content event: 'applied', 'duplicate', 'below_zero' or
-- 'unknown_author' (the last two are not claimed, so a replay can apply them).
CREATE OR REPLACE FUNCTION kith_apply_counters(
    p_user BIGINT[], p_followers BIGINT[],
    p_event UUID[], p_author BIGINT[], p_posts BIGINT[], p_likes BIGINT[], p_favs BIGINT[]
) RETURNS TABLE (ord INT, outcome TEXT) LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    created BIGINT[] := '{}';
    v_missing BIGINT[];
    v_expected BIGINT;
    v_updated BIGINT;
BEGIN
    SELECT array_agg(d.u ORDER BY d.u) INTO v_missing
      FROM (SELECT DISTINCT x AS u FROM unnest(p_user || p_author) AS x) d
     WHERE EXISTS (SELECT 1 FROM users WHERE id = d.u)
       AND NOT EXISTS (SELECT 1 FROM user_stats s WHERE s.user_id = d.u);
    IF v_missing IS NOT NULL THEN
        SELECT coalesce(array_agg(u), '{}') INTO created
          FROM unnest(v_missing) AS u WHERE kith_ensure_stats(u);
    END IF;
    PERFORM 1 FROM user_stats s WHERE s.user_id = ANY (p_user || p_author)
      ORDER BY s.user_id FOR UPDATE;

    SELECT count(*) INTO v_expected
      FROM (SELECT x.u FROM unnest(p_user, p_followers) AS x(u, d)
             WHERE x.u <> ALL (created) GROUP BY x.u HAVING sum(x.d) <> 0) g;
    IF v_expected > 0 THEN
        UPDATE user_stats AS s
           SET followers = s.followers + g.delta, version = kith_next_version(s.version)
          FROM (SELECT x.u, sum(x.d) AS delta FROM unnest(p_user, p_followers) AS x(u, d)
                 WHERE x.u <> ALL (created) GROUP BY x.u HAVING sum(x.d) <> 0) g
         WHERE s.user_id = g.u;
        GET DIAGNOSTICS v_updated = ROW_COUNT;
        IF v_updated <> v_expected THEN
            RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
                MESSAGE = 'follow event for unknown user';
        END IF;
    END IF;

    FOR i IN 1 .. coalesce(array_length(p_event, 1), 0) LOOP
        ord := i;
        INSERT INTO content_event_ledger (event_id, author_id)
        VALUES (p_event[i], p_author[i])
        ON CONFLICT (event_id) DO NOTHING;
        IF NOT FOUND THEN
            outcome := 'duplicate';
        ELSE
            UPDATE user_stats
               SET posts = posts + p_posts[i],
                   likes_received = likes_received + p_likes[i],
                   favs_received = favs_received + p_favs[i],
                   version = kith_next_version(version)
             WHERE user_id = p_author[i]
               AND posts + p_posts[i] >= 0
               AND likes_received + p_likes[i] >= 0
               AND favs_received + p_favs[i] >= 0;
            IF FOUND THEN
                outcome := 'applied';
            ELSE
                DELETE FROM content_event_ledger WHERE event_id = p_event[i];
                outcome := CASE WHEN EXISTS (SELECT 1 FROM user_stats WHERE user_id = p_author[i])
                                THEN 'below_zero' ELSE 'unknown_author' END;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
