CREATE OR REPLACE FUNCTION kith_change_edges(p_actors bigint[], p_targets bigint[], p_follows boolean[], p_events uuid[], p_max_followings bigint, p_followings_ratio double precision) RETURNS SETOF kith_edge_result
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    n INT := coalesce(cardinality(p_actors), 0);
    -- Per item: NULL while it may apply, else its refusal or `requested`.
    v_outcome TEXT[];
    v_active BOOLEAN[];
    v_pending BOOLEAN[];
    v_hidden BOOLEAN[];
    v_no_stats BOOLEAN;
    -- Per item: the edge's (or the request's) new version and time.
    v_version BIGINT[] := array_fill(NULL::BIGINT, ARRAY[n]);
    v_at TIMESTAMPTZ[] := array_fill(NULL::TIMESTAMPTZ, ARRAY[n]);
    v_canceled BIGINT[] := array_fill(NULL::BIGINT, ARRAY[n]);
    v_canceled_at TIMESTAMPTZ[] := array_fill(NULL::TIMESTAMPTZ, ARRAY[n]);
    v_now TIMESTAMPTZ := date_trunc('milliseconds', now());
    r RECORD;
BEGIN
    IF n = 0 THEN
        RETURN;
    END IF;
    IF cardinality(p_targets) <> n OR cardinality(p_follows) <> n OR cardinality(p_events) <> n THEN
        RAISE EXCEPTION 'kith_change_edges: arrays of different lengths';
    END IF;

    -- 1. The pairs, in one order: a block or an answered request of the
    -- same pair waits, and what follows reads after it.
    PERFORM pg_advisory_xact_lock(hashint8(p.lo), hashint8(p.hi))
       FROM (SELECT DISTINCT least(x.a, x.t) AS lo, greatest(x.a, x.t) AS hi
               FROM unnest(p_actors, p_targets) AS x(a, t)
              ORDER BY 1, 2) p;

    -- 2. What each item may do, read after the pairs are held.
    SELECT array_agg(CASE
               WHEN ua.status IS NULL OR ua.status = 'deleted' THEN 'actor_unknown'
               WHEN ua.status = 'suspended' THEN 'actor_suspended'
               WHEN ut.id IS NULL THEN 'target_unknown'
               WHEN x.f AND ut.status <> 'active' THEN 'target_unfollowable'
               -- A moved account takes no follows (nor requests).
               WHEN x.f AND ut.moved_to IS NOT NULL THEN 'target_moved'
               WHEN x.f AND (EXISTS (SELECT 1 FROM block b
                                      WHERE b.from_user_id = x.a AND b.to_user_id = x.t AND b.active)
                          OR EXISTS (SELECT 1 FROM block b
                                      WHERE b.from_user_id = x.t AND b.to_user_id = x.a AND b.active))
                   THEN 'blocked'
               -- A follow of a locked account is a request, unless it
               -- follows already.
               WHEN x.f AND ut.locked AND NOT coalesce(f.active, FALSE) THEN 'requested'
           END ORDER BY x.i),
           array_agg(coalesce(f.active, FALSE) ORDER BY x.i),
           array_agg(EXISTS (SELECT 1 FROM follow_request q
                              WHERE q.from_user_id = x.a AND q.to_user_id = x.t AND q.active)
                     ORDER BY x.i),
           array_agg(EXISTS (SELECT 1 FROM hidden_edge h
                              WHERE h.from_user_id = x.a AND h.to_user_id = x.t)
                     ORDER BY x.i),
           bool_or(NOT EXISTS (SELECT 1 FROM user_stats s WHERE s.user_id = x.a))
      INTO v_outcome, v_active, v_pending, v_hidden, v_no_stats
      FROM unnest(p_actors, p_targets, p_follows) WITH ORDINALITY AS x(a, t, f, i)
      LEFT JOIN users ua ON ua.id = x.a
      LEFT JOIN users ut ON ut.id = x.t
      LEFT JOIN following f ON f.from_user_id = x.a AND f.to_user_id = x.t;

    -- 3. An edge hidden with an account that is not active is forgotten,
    -- so that the account's restore does not bring it back: an unfollow
    -- ends it, a follow makes the edge anew. Locked here, before the edge
    -- rows (a restore locks the hidden edge, then the edge row); deleted
    -- once the follow cap has kept or refused each item.
    IF true = ANY (v_hidden) THEN
        PERFORM 1 FROM hidden_edge h
           JOIN unnest(p_actors, p_targets, v_outcome, v_hidden) AS x(a, t, o, hid)
             ON h.from_user_id = x.a AND h.to_user_id = x.t
          WHERE x.o IS NULL AND x.hid
          ORDER BY h.from_user_id, h.to_user_id
            FOR UPDATE OF h;
    END IF;

    -- 4. The edge rows that exist, then the actors' counters (a counter
    -- row missing is made from the truth first), each in key order; the
    -- follow cap, from counters no one else can change now.
    PERFORM 1 FROM following f
       JOIN unnest(p_actors, p_targets, v_outcome) AS x(a, t, o)
         ON f.from_user_id = x.a AND f.to_user_id = x.t
      WHERE x.o IS NULL
      ORDER BY f.from_user_id, f.to_user_id
        FOR UPDATE OF f;
    IF v_no_stats THEN
        PERFORM kith_ensure_stats(a.id)
           FROM (SELECT DISTINCT x.a AS id FROM unnest(p_actors, v_outcome) AS x(a, o)
                  WHERE x.o IS NULL ORDER BY 1) a;
    END IF;
    -- Every acting actor's counters, locked in id order (all of them,
    -- whatever the cap says), and each follow checked against the cap.
    FOR r IN
        SELECT item.i,
               item.adds AND kith_past_follow_cap(s.followings - item.ends + item.rank, s.followers,
                                                  p_max_followings, p_followings_ratio) AS capped
          FROM (SELECT x.i, x.a, x.f AND NOT x.act AS adds,
                       count(*) FILTER (WHERE NOT x.f AND x.act) OVER (PARTITION BY x.a) AS ends,
                       count(*) FILTER (WHERE x.f AND NOT x.act)
                           OVER (PARTITION BY x.a ORDER BY x.i) AS rank
                  FROM unnest(p_actors, p_follows, v_active, v_outcome)
                       WITH ORDINALITY AS x(a, f, act, o, i)
                 WHERE x.o IS NULL) item
          JOIN user_stats s ON s.user_id = item.a
         ORDER BY s.user_id
           FOR UPDATE OF s
    LOOP
        IF r.capped THEN
            v_outcome[r.i] := 'follow_limit';
        END IF;
    END LOOP;
    IF true = ANY (v_hidden) THEN
        DELETE FROM hidden_edge h
         USING unnest(p_actors, p_targets, v_outcome, v_hidden) AS x(a, t, o, hid)
         WHERE x.o IS NULL AND x.hid AND h.from_user_id = x.a AND h.to_user_id = x.t;
    END IF;

    -- 5. Requests made (follows of locked accounts) and requests ended
    -- (any other follow or unfollow ends the pair's pending request).
    IF 'requested' = ANY (v_outcome) THEN
        FOR r IN
            WITH x AS (
                SELECT x.i, x.a, x.t, x.e
                  FROM unnest(p_actors, p_targets, p_events, v_outcome)
                       WITH ORDINALITY AS x(a, t, e, o, i)
                 WHERE x.o = 'requested'),
            q AS (
                INSERT INTO follow_request AS q (from_user_id, to_user_id, active, requested_at, version, updated_at)
                SELECT x.a, x.t, TRUE, v_now, 1, now() FROM x ORDER BY x.a, x.t
                ON CONFLICT (from_user_id, to_user_id) DO UPDATE
                   SET active = TRUE, requested_at = EXCLUDED.requested_at,
                       version = q.version + 1, updated_at = now()
                 WHERE NOT q.active
                RETURNING q.from_user_id, q.to_user_id, q.version, q.requested_at),
            made AS (
                SELECT x.i, x.a, x.t, x.e, q.version, q.requested_at FROM q
                  JOIN x ON x.a = q.from_user_id AND x.t = q.to_user_id),
            o AS (
                -- The wire format of RequestEvent (src/events/request.rs).
                INSERT INTO outbox (event_id, event_type, partition_key, payload)
                SELECT m.e, 'FollowRequested', m.a::TEXT, jsonb_build_object(
                    'schemaVersion', 1, 'eventId', m.e, 'type', 'FollowRequested',
                    'from', m.a, 'to', m.t, 'version', m.version,
                    'requestedAtMs', (extract(epoch FROM m.requested_at) * 1000)::BIGINT,
                    'occurredAtMs', (extract(epoch FROM v_now) * 1000)::BIGINT)
                  FROM made m ORDER BY m.i)
            SELECT made.i, made.version, made.requested_at FROM made
        LOOP
            v_version[r.i] := r.version;
            v_at[r.i] := r.requested_at;
        END LOOP;
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(v_outcome, v_pending) AS x(o, pending)
                WHERE x.o IS NULL AND x.pending) THEN
        FOR r IN
            WITH x AS (
                SELECT x.i, x.a, x.t
                  FROM unnest(p_actors, p_targets, v_outcome, v_pending)
                       WITH ORDINALITY AS x(a, t, o, pending, i)
                 WHERE x.o IS NULL AND x.pending),
            q AS (
                UPDATE follow_request AS q
                   SET active = FALSE, version = q.version + 1, updated_at = now()
                  FROM x
                 WHERE q.from_user_id = x.a AND q.to_user_id = x.t AND q.active
                RETURNING x.i, x.a, x.t, q.version, q.requested_at, gen_random_uuid() AS e),
            o AS (
                INSERT INTO outbox (event_id, event_type, partition_key, payload)
                SELECT q.e, 'FollowRequestCanceled', q.a::TEXT, jsonb_build_object(
                    'schemaVersion', 1, 'eventId', q.e, 'type', 'FollowRequestCanceled',
                    'from', q.a, 'to', q.t, 'version', q.version,
                    'requestedAtMs', (extract(epoch FROM q.requested_at) * 1000)::BIGINT,
                    'occurredAtMs', (extract(epoch FROM v_now) * 1000)::BIGINT)
                  FROM q ORDER BY q.i)
            SELECT q.i, q.version, q.requested_at FROM q
        LOOP
            v_canceled[r.i] := r.version;
            v_canceled_at[r.i] := r.requested_at;
        END LOOP;
    END IF;

    -- 6. The edges and their events. A re-follow sets followed_at again:
    -- the list shows the latest follow, with the default options.
    FOR r IN
        WITH x AS (
            SELECT x.i, x.a, x.t, x.f, x.e
              FROM unnest(p_actors, p_targets, p_follows, p_events, v_outcome)
                   WITH ORDINALITY AS x(a, t, f, e, o, i)
             WHERE x.o IS NULL),
        made AS (
            INSERT INTO following AS f (from_user_id, to_user_id, active, followed_at, version, updated_at)
            SELECT x.a, x.t, TRUE, v_now, 1, now() FROM x WHERE x.f ORDER BY x.a, x.t
            ON CONFLICT (from_user_id, to_user_id) DO UPDATE
               SET active = TRUE, followed_at = EXCLUDED.followed_at,
                   version = f.version + 1, updated_at = now(),
                   -- The options of the follow before are not this one's,
                   -- even in the same millisecond.
                   options_at = NULL
             WHERE NOT f.active
            RETURNING f.from_user_id, f.to_user_id, f.version, f.followed_at),
        ended AS (
            UPDATE following AS f
               SET active = FALSE, version = f.version + 1, updated_at = now()
              FROM x
             WHERE NOT x.f AND f.from_user_id = x.a AND f.to_user_id = x.t AND f.active
            RETURNING f.from_user_id, f.to_user_id, f.version, f.followed_at),
        changed AS (
            SELECT x.i, x.a, x.t, x.f, x.e, c.version, c.followed_at
              FROM (SELECT * FROM made UNION ALL SELECT * FROM ended) c
              JOIN x ON x.a = c.from_user_id AND x.t = c.to_user_id),
        o AS (
            -- The wire format of FollowEvent (src/events/follow.rs); a test
            -- decodes these rows with the Rust type.
            INSERT INTO outbox (event_id, event_type, partition_key, payload)
            SELECT c.e, CASE WHEN c.f THEN 'FollowCreated' ELSE 'FollowCanceled' END, c.a::TEXT,
                   jsonb_build_object(
                       'schemaVersion', 1, 'eventId', c.e,
                       'type', CASE WHEN c.f THEN 'FollowCreated' ELSE 'FollowCanceled' END,
                       'from', c.a, 'to', c.t, 'version', c.version,
                       'followedAtMs', (extract(epoch FROM c.followed_at) * 1000)::BIGINT,
                       'occurredAtMs', (extract(epoch FROM v_now) * 1000)::BIGINT)
              FROM changed c ORDER BY c.i)
        SELECT changed.i, changed.version, changed.followed_at FROM changed
    LOOP
        v_version[r.i] := r.version;
        v_at[r.i] := r.followed_at;
    END LOOP;

    -- 7. An unfollow that found its edge inactive may have waited on a
    -- suspension that hid the edge meanwhile: forget that hidden edge too.
    IF EXISTS (SELECT 1 FROM unnest(p_follows, v_outcome, v_version) AS x(f, o, v)
                WHERE x.o IS NULL AND NOT x.f AND x.v IS NULL) THEN
        DELETE FROM hidden_edge h
         USING unnest(p_actors, p_targets, p_follows, v_outcome, v_version) AS x(a, t, f, o, v)
         WHERE x.o IS NULL AND NOT x.f AND x.v IS NULL
           AND h.from_user_id = x.a AND h.to_user_id = x.t;
    END IF;

    -- 8. The actors' followings, once each.
    UPDATE user_stats AS s
       SET followings = s.followings + d.delta, version = kith_next_version(s.version)
      FROM (SELECT x.a, sum(CASE WHEN x.f THEN 1 ELSE -1 END) AS delta
              FROM unnest(p_actors, p_follows, v_outcome, v_version) AS x(a, f, o, v)
             WHERE x.o IS NULL AND x.v IS NOT NULL
             GROUP BY x.a) d
     WHERE s.user_id = d.a;

    -- 9. One row per item, in the order given.
    RETURN QUERY
    SELECT CASE
               WHEN x.o IS NOT NULL THEN x.o
               WHEN x.v IS NULL AND x.cv IS NOT NULL THEN 'request_canceled'
               ELSE 'ok'
           END,
           ut.handle, ut.display_name, ut.status,
           coalesce(x.v, x.cv),
           coalesce(x.at, x.cat),
           CASE WHEN coalesce(x.v, x.cv) IS NOT NULL THEN v_now END,
           s.followings, s.followers, s.posts, s.likes_received, s.favs_received, s.version,
           ab.followed_at, ba.followed_at,
           ut.locked, ut.hides_collections
      FROM unnest(p_actors, p_targets, v_outcome, v_version, v_at, v_canceled, v_canceled_at)
           WITH ORDINALITY AS x(a, t, o, v, at, cv, cat, i)
      LEFT JOIN users ut ON ut.id = x.t AND x.o IS DISTINCT FROM 'actor_unknown'
                         AND x.o IS DISTINCT FROM 'actor_suspended'
      LEFT JOIN user_stats s ON s.user_id = x.a AND x.o IS NULL AND x.v IS NOT NULL
      LEFT JOIN following ab ON (x.o IS NULL OR x.o = 'requested')
                             AND ab.from_user_id = x.a AND ab.to_user_id = x.t AND ab.active
      LEFT JOIN following ba ON (x.o IS NULL OR x.o = 'requested')
                             AND ba.from_user_id = x.t AND ba.to_user_id = x.a AND ba.active
     ORDER BY x.i;
END
$$;

CREATE OR REPLACE FUNCTION kith_request_step(p_from bigint, p_to bigint, p_request boolean, p_event_id uuid, p_type text, OUT version bigint, OUT requested_at timestamp with time zone, OUT occurred_at timestamp with time zone) RETURNS record
    LANGUAGE plpgsql
    AS $$
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
