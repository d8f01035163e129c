-- One copy of each rule the edge functions share. The follow cap is one
-- function of the counts a follow would leave; the counters and the
-- target's columns are copied into a kith_edge_result by one function
-- each (kith_answer_request, kith_block, kith_mute, kith_remove_follower
-- and kith_transition_edge call them); kith_transition_edge returns a
-- kith_edge_result, which its callers complete. The two functions kept for processes of the release before
-- become wrappers of the group commit's kith_change_edges, translating
-- its per-item follow_limit into the error that release reads.

CREATE FUNCTION kith_past_follow_cap(p_followings BIGINT, p_followers BIGINT, p_max BIGINT,
                                     p_ratio DOUBLE PRECISION)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE AS $$
    SELECT p_max > 0 AND p_followings > p_max AND p_followings > p_ratio * p_followers
$$;
COMMENT ON FUNCTION kith_past_follow_cap(BIGINT, BIGINT, BIGINT, DOUBLE PRECISION) IS
  'The follow cap: whether an account that would follow p_followings accounts with p_followers followers is past it (p_max 0: no cap). The one statement of the rule; PostgreSQL inlines it into its callers.';

CREATE FUNCTION kith_edge_counters(p_row kith_edge_result, p_stats user_stats)
RETURNS kith_edge_result LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    p_row.followings := p_stats.followings;
    p_row.followers := p_stats.followers;
    p_row.posts := p_stats.posts;
    p_row.likes_received := p_stats.likes_received;
    p_row.favs_received := p_stats.favs_received;
    p_row.version := p_stats.version;
    RETURN p_row;
END
$$;
COMMENT ON FUNCTION kith_edge_counters(kith_edge_result, user_stats) IS
  'p_row with the counters of p_stats: where the edge functions fill a kith_edge_result''s counter columns (the group commit''s kith_change_edges selects them in its result query).';

CREATE FUNCTION kith_edge_target(p_row kith_edge_result, p_target users)
RETURNS kith_edge_result LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    p_row.target_handle := p_target.handle;
    p_row.target_display_name := p_target.display_name;
    p_row.target_status := p_target.status;
    p_row.target_locked := p_target.locked;
    p_row.target_hides_collections := p_target.hides_collections;
    RETURN p_row;
END
$$;
COMMENT ON FUNCTION kith_edge_target(kith_edge_result, users) IS
  'p_row with the columns of p_target a caller shows: where the edge functions fill a kith_edge_result''s target columns (the group commit''s kith_change_edges selects them in its result query).';

-- Its result was a table of its own; callers read it by column name
-- (`SELECT edge_version FROM kith_transition_edge(…)`), which a
-- kith_edge_result answers the same.
DROP FUNCTION kith_transition_edge(BIGINT, BIGINT, BOOLEAN, UUID);
CREATE FUNCTION kith_transition_edge(p_from BIGINT, p_to BIGINT, p_follow BOOLEAN, p_event_id UUID)
RETURNS kith_edge_result LANGUAGE plpgsql AS $$
DECLARE
    r kith_edge_result;
BEGIN
    SELECT * INTO r.edge_version, r.edge_followed_at, r.occurred_at
      FROM kith_edge_step(p_from, p_to, p_follow, p_event_id);
    IF r.edge_version IS NOT NULL THEN
        r := kith_edge_counters(r, kith_count_followings(p_from, CASE WHEN p_follow THEN 1 ELSE -1 END));
    END IF;
    SELECT * INTO r.a_follows_b, r.b_follows_a FROM kith_pair_state(p_from, p_to);
    RETURN r;
END
$$;
COMMENT ON FUNCTION kith_transition_edge(BIGINT, BIGINT, BOOLEAN, UUID) IS
  'One edge transition with its event, its counters and the pair''s state after it, as a kith_edge_result without outcome or target (the caller sets them), for writes whose checks are their own: kith_answer_request, kith_block, kith_remove_follower, and reconcile ending a follow across a block.';

-- The user_stats form had two callers; both now pass the counts.
DROP FUNCTION kith_past_follow_cap(user_stats, BIGINT, DOUBLE PRECISION);

CREATE OR REPLACE FUNCTION kith_answer_request(p_owner BIGINT, p_requester BIGINT, p_accept BOOLEAN,
    p_event_id UUID, p_follow_event_id UUID, p_max_followings BIGINT, p_followings_ratio DOUBLE PRECISION)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION kith_block(p_actor BIGINT, p_target BIGINT, p_block BOOLEAN, p_event_id UUID,
    p_unfollow_events UUID[], p_max_blocks BIGINT)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
DECLARE
    r kith_edge_result;
    e kith_edge_result;
    v_target users%ROWTYPE;
    v_type TEXT := CASE WHEN p_block THEN 'BlockCreated' ELSE 'BlockRemoved' END;
    v_dir RECORD;
    v_ends kith_edge_result[] := '{}';
BEGIN
    r.outcome := kith_actor_refusal(p_actor);
    IF r.outcome IS NOT NULL THEN
        RETURN NEXT r;
        RETURN;
    END IF;
    SELECT * INTO v_target FROM users u WHERE u.id = p_target;
    IF NOT FOUND OR (p_block AND v_target.status = 'deleted') THEN
        r.outcome := 'target_unknown';
        RETURN NEXT r;
        RETURN;
    END IF;
    r := kith_edge_target(r, v_target);
    PERFORM kith_lock_pair(p_actor, p_target);
    IF p_block THEN
        IF p_max_blocks > 0 AND NOT EXISTS (
            SELECT 1 FROM block b
             WHERE b.from_user_id = p_actor AND b.to_user_id = p_target AND b.active) THEN
            -- One actor's new blocks are counted one at a time.
            PERFORM 1 FROM users u WHERE u.id = p_actor FOR NO KEY UPDATE;
            IF (SELECT count(*) FROM block b WHERE b.from_user_id = p_actor AND b.active) >= p_max_blocks THEN
                r.outcome := 'block_limit';
                RETURN NEXT r;
                RETURN;
            END IF;
        END IF;
        INSERT INTO block AS b (from_user_id, to_user_id, active, blocked_at, version, updated_at)
        VALUES (p_actor, p_target, TRUE, date_trunc('milliseconds', now()), 1, now())
        ON CONFLICT (from_user_id, to_user_id) DO UPDATE
           SET active = TRUE,
               blocked_at = EXCLUDED.blocked_at,
               version = b.version + 1,
               updated_at = now()
         WHERE NOT b.active
        RETURNING b.version, b.blocked_at INTO r.edge_version, r.edge_followed_at;
        -- The follows both ways end, as unfollows do (hidden ones are
        -- forgotten), the lower follower's first: the order counters lock in.
        FOR v_dir IN
            SELECT * FROM (VALUES (p_actor, p_target, 'ended_out', p_unfollow_events[1]),
                                  (p_target, p_actor, 'ended_in', p_unfollow_events[2]))
                       AS d(f, t, o, ev)
             ORDER BY f
        LOOP
            e := kith_transition_edge(v_dir.f, v_dir.t, FALSE, v_dir.ev);
            CONTINUE WHEN e.edge_version IS NULL;
            e.outcome := v_dir.o;
            -- The pair's state is the block's row's to say.
            e.a_follows_b := NULL;
            e.b_follows_a := NULL;
            v_ends := v_ends || e;
        END LOOP;
        -- Pending follow requests both ways are dropped.
        PERFORM kith_request_step(p_actor, p_target, FALSE, gen_random_uuid(), 'FollowRequestCanceled');
        PERFORM kith_request_step(p_target, p_actor, FALSE, gen_random_uuid(), 'FollowRequestCanceled');
    ELSE
        UPDATE block AS b
           SET active = FALSE, version = b.version + 1, updated_at = now()
         WHERE b.from_user_id = p_actor AND b.to_user_id = p_target AND b.active
        RETURNING b.version, b.blocked_at INTO r.edge_version, r.edge_followed_at;
    END IF;
    r.outcome := 'ok';
    IF r.edge_version IS NOT NULL THEN
        r.occurred_at := date_trunc('milliseconds', now());
        -- The wire format of BlockEvent (src/events/block.rs).
        INSERT INTO outbox (event_id, event_type, partition_key, payload)
        VALUES (p_event_id, v_type, p_actor::TEXT, jsonb_build_object(
            'schemaVersion', 1,
            'eventId', p_event_id,
            'type', v_type,
            'from', p_actor,
            'to', p_target,
            'version', r.edge_version,
            'blockedAtMs', (extract(epoch FROM r.edge_followed_at) * 1000)::BIGINT,
            'occurredAtMs', (extract(epoch FROM r.occurred_at) * 1000)::BIGINT));
    END IF;
    SELECT * INTO r.a_follows_b, r.b_follows_a FROM kith_pair_state(p_actor, p_target);
    RETURN NEXT r;
    FOREACH e IN ARRAY v_ends LOOP
        RETURN NEXT e;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION kith_remove_follower(p_owner BIGINT, p_follower BIGINT, p_event_id UUID)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
DECLARE
    r kith_edge_result;
    v_follower users%ROWTYPE;
BEGIN
    r.outcome := kith_actor_refusal(p_owner);
    IF r.outcome IS NOT NULL THEN
        RETURN NEXT r;
        RETURN;
    END IF;
    SELECT * INTO v_follower FROM users u WHERE u.id = p_follower;
    IF NOT FOUND THEN
        r.outcome := 'target_unknown';
        RETURN NEXT r;
        RETURN;
    END IF;
    r := kith_edge_target(kith_transition_edge(p_follower, p_owner, FALSE, p_event_id), v_follower);
    r.outcome := 'ok';
    RETURN NEXT r;
END
$$;

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
    -- the list shows the latest follow.
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
                   version = f.version + 1, updated_at = now()
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

CREATE OR REPLACE FUNCTION kith_mute(p_actor bigint, p_target bigint, p_mute boolean, p_expires_in_secs bigint, p_event_id uuid) RETURNS SETOF kith_edge_result
    LANGUAGE plpgsql
    AS $$
DECLARE
    r kith_edge_result;
    v_target users%ROWTYPE;
    v_type TEXT := CASE WHEN p_mute THEN 'MuteCreated' ELSE 'MuteRemoved' END;
    v_now TIMESTAMPTZ := date_trunc('milliseconds', now());
    v_expires TIMESTAMPTZ;
BEGIN
    r.outcome := kith_actor_refusal(p_actor);
    IF r.outcome IS NOT NULL THEN
        RETURN NEXT r;
        RETURN;
    END IF;
    SELECT * INTO v_target FROM users u WHERE u.id = p_target;
    IF NOT FOUND OR (p_mute AND v_target.status = 'deleted') THEN
        r.outcome := 'target_unknown';
        RETURN NEXT r;
        RETURN;
    END IF;
    r := kith_edge_target(r, v_target);
    IF p_mute THEN
        v_expires := v_now + make_interval(secs => p_expires_in_secs);
        INSERT INTO mute AS m (from_user_id, to_user_id, active, muted_at, expires_at, version, updated_at)
        VALUES (p_actor, p_target, TRUE, v_now, v_expires, 1, now())
        ON CONFLICT (from_user_id, to_user_id) DO UPDATE
           SET active = TRUE,
               muted_at = CASE WHEN m.active AND (m.expires_at IS NULL OR m.expires_at > v_now)
                               THEN m.muted_at ELSE EXCLUDED.muted_at END,
               expires_at = EXCLUDED.expires_at,
               version = m.version + 1,
               updated_at = now()
         WHERE NOT (m.active AND m.expires_at IS NULL AND EXCLUDED.expires_at IS NULL)
        RETURNING m.version, m.muted_at INTO r.edge_version, r.edge_followed_at;
    ELSE
        UPDATE mute AS m
           SET active = FALSE, version = m.version + 1, updated_at = now()
         WHERE m.from_user_id = p_actor AND m.to_user_id = p_target AND m.active
           AND (m.expires_at IS NULL OR m.expires_at > v_now)
        RETURNING m.version, m.muted_at, m.expires_at INTO r.edge_version, r.edge_followed_at, v_expires;
    END IF;
    r.outcome := 'ok';
    IF r.edge_version IS NOT NULL THEN
        r.occurred_at := v_now;
        -- The wire format of MuteEvent (src/events/mute.rs).
        INSERT INTO outbox (event_id, event_type, partition_key, payload)
        VALUES (p_event_id, v_type, p_actor::TEXT, jsonb_build_object(
            'schemaVersion', 1,
            'eventId', p_event_id,
            'type', v_type,
            'from', p_actor,
            'to', p_target,
            'version', r.edge_version,
            'mutedAtMs', (extract(epoch FROM r.edge_followed_at) * 1000)::BIGINT,
            'expiresAtMs', CASE WHEN p_mute THEN (extract(epoch FROM v_expires) * 1000)::BIGINT END,
            'occurredAtMs', (extract(epoch FROM r.occurred_at) * 1000)::BIGINT));
    END IF;
    SELECT * INTO r.a_follows_b, r.b_follows_a FROM kith_pair_state(p_actor, p_target);
    RETURN NEXT r;
END
$$;

-- The release before reads a follow past the cap as this error, raised
-- after the follow's writes: the whole statement rolls back, as it did.
CREATE OR REPLACE FUNCTION kith_change_edge(p_actor BIGINT, p_target BIGINT, p_follow BOOLEAN, p_event_id UUID,
    p_max_followings BIGINT, p_followings_ratio DOUBLE PRECISION)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
DECLARE
    r kith_edge_result;
BEGIN
    FOR r IN SELECT * FROM kith_change_edges(ARRAY[p_actor], ARRAY[p_target], ARRAY[p_follow],
                                             ARRAY[p_event_id], p_max_followings, p_followings_ratio)
    LOOP
        IF r.outcome = 'follow_limit' THEN
            RAISE EXCEPTION 'kith: follow limit' USING ERRCODE = 'KF001';
        END IF;
        RETURN NEXT r;
    END LOOP;
END
$$;
COMMENT ON FUNCTION kith_change_edge(BIGINT, BIGINT, BOOLEAN, UUID, BIGINT, DOUBLE PRECISION) IS
  'One follow or unfollow, through kith_change_edges; a follow past the cap raises ''kith: follow limit''. Kept for processes of the release before during a rolling deploy; drop it in the next.';

CREATE OR REPLACE FUNCTION kith_change_edges(p_actor BIGINT, p_targets BIGINT[], p_events UUID[], p_follow BOOLEAN,
    p_max_followings BIGINT, p_followings_ratio DOUBLE PRECISION)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
DECLARE
    n INT := coalesce(cardinality(p_targets), 0);
    r kith_edge_result;
BEGIN
    FOR r IN SELECT * FROM kith_change_edges(array_fill(p_actor, ARRAY[n]), p_targets,
                                             array_fill(p_follow, ARRAY[n]), p_events,
                                             p_max_followings, p_followings_ratio)
    LOOP
        IF r.outcome = 'follow_limit' THEN
            RAISE EXCEPTION 'kith: follow limit' USING ERRCODE = 'KF001';
        END IF;
        RETURN NEXT r;
    END LOOP;
END
$$;
COMMENT ON FUNCTION kith_change_edges(BIGINT, BIGINT[], UUID[], BOOLEAN, BIGINT, DOUBLE PRECISION) IS
  'One actor''s follows or unfollows of many targets, through kith_change_edges over arrays of actors; a follow past the cap raises ''kith: follow limit''. Kept for processes of the release before during a rolling deploy; drop it in the next.';
