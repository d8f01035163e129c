-- The schema after every migration in migrations/ (pg_dump --schema-only).
-- Generated; do not edit. The migrations are the source: see tests/api/db_schema.rs.
--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: kith; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA kith;

--
-- Name: kith_edge_result; Type: TYPE; Schema: kith; Owner: -
--

CREATE TYPE kith.kith_edge_result AS (
	outcome text,
	target_handle text,
	target_display_name text,
	target_status text,
	edge_version bigint,
	edge_followed_at timestamp with time zone,
	occurred_at timestamp with time zone,
	followings bigint,
	followers bigint,
	posts bigint,
	likes_received bigint,
	favs_received bigint,
	version bigint,
	a_follows_b timestamp with time zone,
	b_follows_a timestamp with time zone,
	target_locked boolean,
	target_hides_collections boolean
);

--
-- Name: kith_accept_requests(bigint, integer, bigint, double precision); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_accept_requests(p_owner bigint, p_limit integer, p_max_followings bigint, p_followings_ratio double precision) RETURNS TABLE(requester bigint, outcome text)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_from BIGINT;
BEGIN
    -- A moved account accepts nothing: its requests go with its followers.
    IF NOT EXISTS (SELECT 1 FROM users u WHERE u.id = p_owner AND NOT u.locked AND u.status = 'active'
                                           AND u.moved_to IS NULL) THEN
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

--
-- Name: FUNCTION kith_accept_requests(p_owner bigint, p_limit integer, p_max_followings bigint, p_followings_ratio double precision); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_accept_requests(p_owner bigint, p_limit integer, p_max_followings bigint, p_followings_ratio double precision) IS 'Accepts the oldest p_limit pending follow requests of an account that unlocked, each as a follow with its events and counters, answered in requester order after taking every pair''s lock in the group commit''s order. A request that can never become a follow (a block, an inactive account, the requester''s follow cap) is dropped.';

--
-- Name: kith_actor_refusal(bigint); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_actor_refusal(p_actor bigint) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_status TEXT;
BEGIN
    -- PL/pgSQL, not SQL: its statement's plan is kept for the session,
    -- where a SQL function's would be planned again on every call.
    SELECT u.status INTO v_status FROM users u WHERE u.id = p_actor;
    IF v_status IS NULL OR v_status = 'deleted' THEN
        RETURN 'actor_unknown';
    ELSIF v_status = 'suspended' THEN
        RETURN 'actor_suspended';
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: FUNCTION kith_actor_refusal(p_actor bigint); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_actor_refusal(p_actor bigint) IS 'Why p_actor may not change edges now (actor_unknown, actor_suspended), or NULL when it may.';

--
-- Name: kith_answer_request(bigint, bigint, boolean, uuid, uuid, bigint, double precision); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_answer_request(p_owner bigint, p_requester bigint, p_accept boolean, p_event_id uuid, p_follow_event_id uuid, p_max_followings bigint, p_followings_ratio double precision) RETURNS SETOF kith.kith_edge_result
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
    -- A moved account takes no follows: its requests go to its new account
    -- with its followers (a rejection stays its own).
    IF p_accept AND EXISTS (SELECT 1 FROM users u WHERE u.id = p_owner AND u.moved_to IS NOT NULL) THEN
        r.outcome := 'actor_moved';
        RETURN NEXT r;
        RETURN;
    END IF;
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

--
-- Name: FUNCTION kith_answer_request(p_owner bigint, p_requester bigint, p_accept boolean, p_event_id uuid, p_follow_event_id uuid, p_max_followings bigint, p_followings_ratio double precision); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_answer_request(p_owner bigint, p_requester bigint, p_accept boolean, p_event_id uuid, p_follow_event_id uuid, p_max_followings bigint, p_followings_ratio double precision) IS 'The owner accepts (a follow, with its event and counters, within the requester''s follow cap) or rejects one pending follow request; returns a kith_edge_result row.';

--
-- Name: kith_apply_counters(bigint[], bigint[], uuid[], bigint[], bigint[], bigint[], bigint[]); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_apply_counters(p_user bigint[], p_followers bigint[], p_event uuid[], p_author bigint[], p_posts bigint[], p_likes bigint[], p_favs bigint[]) RETURNS TABLE(ord integer, outcome text)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
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

--
-- Name: FUNCTION kith_apply_counters(p_user bigint[], p_followers bigint[], p_event uuid[], p_author bigint[], p_posts bigint[], p_likes bigint[], p_favs bigint[]); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_apply_counters(p_user bigint[], p_followers bigint[], p_event uuid[], p_author bigint[], p_posts bigint[], p_likes bigint[], p_favs bigint[]) IS 'The projector''s counter writes for one batch: follower deltas of user_stats in one update (rows locked in id order), then content events each claimed once in content_event_ledger; one row per content event: applied, duplicate, below_zero or unknown_author.';

--
-- Name: kith_apply_follower(bigint, bigint, boolean, timestamp with time zone, bigint); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_apply_follower(p_to bigint, p_from bigint, p_active boolean, p_followed_at timestamp with time zone, p_version bigint, OUT was_active boolean, OUT applied boolean) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    cur_active  BOOLEAN;
    cur_version BIGINT;
BEGIN
    LOOP
        SELECT f.active, f.version INTO cur_active, cur_version
          FROM follower f
         WHERE f.to_user_id = p_to AND f.from_user_id = p_from
           FOR UPDATE;
        IF FOUND THEN
            was_active := cur_active;
            applied := cur_version < p_version;
            IF applied THEN
                UPDATE follower
                   SET active = p_active, followed_at = p_followed_at,
                       version = p_version, updated_at = now()
                 WHERE to_user_id = p_to AND from_user_id = p_from;
            END IF;
            RETURN;
        END IF;
        INSERT INTO follower (to_user_id, from_user_id, active, followed_at, version)
        VALUES (p_to, p_from, p_active, p_followed_at, p_version)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            was_active := FALSE;
            applied := TRUE;
            RETURN;
        END IF;
        -- A concurrent insert of the same edge won: loop to lock and compare.
    END LOOP;
END
$$;

--
-- Name: FUNCTION kith_apply_follower(p_to bigint, p_from bigint, p_active boolean, p_followed_at timestamp with time zone, p_version bigint, OUT was_active boolean, OUT applied boolean); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_apply_follower(p_to bigint, p_from bigint, p_active boolean, p_followed_at timestamp with time zone, p_version bigint, OUT was_active boolean, OUT applied boolean) IS 'Applies one follow event to the follower projection when its version is newer than the row''s, and says what the row held before. The projector and reconcile apply events with kith_apply_followers; this one stays for tests and for processes of an earlier release.';

--
-- Name: kith_apply_followers(bigint[], bigint[], boolean[], timestamp with time zone[], bigint[]); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_apply_followers(p_to bigint[], p_from bigint[], p_active boolean[], p_followed_at timestamp with time zone[], p_version bigint[]) RETURNS TABLE(ord integer, was_active boolean, applied boolean)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
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

--
-- Name: FUNCTION kith_apply_followers(p_to bigint[], p_from bigint[], p_active boolean[], p_followed_at timestamp with time zone[], p_version bigint[]); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_apply_followers(p_to bigint[], p_from bigint[], p_active boolean[], p_followed_at timestamp with time zone[], p_version bigint[]) IS 'The projector''s follower writes for one batch: locks the batch''s follower rows in one statement, upserts each edge''s newest event over an older row (the per-edge version guard), one row per event in the order given.';

--
-- Name: kith_block(bigint, bigint, boolean, uuid, uuid[], bigint); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_block(p_actor bigint, p_target bigint, p_block boolean, p_event_id uuid, p_unfollow_events uuid[], p_max_blocks bigint) RETURNS SETOF kith.kith_edge_result
    LANGUAGE plpgsql
    AS $$
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
        -- Neither stays in the other's close friends.
        PERFORM kith_close_friend_step(p_actor, p_target, FALSE, gen_random_uuid());
        PERFORM kith_close_friend_step(p_target, p_actor, FALSE, gen_random_uuid());
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

--
-- Name: FUNCTION kith_block(p_actor bigint, p_target bigint, p_block boolean, p_event_id uuid, p_unfollow_events uuid[], p_max_blocks bigint); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_block(p_actor bigint, p_target bigint, p_block boolean, p_event_id uuid, p_unfollow_events uuid[], p_max_blocks bigint) IS 'Blocks p_target as p_actor (the block row and its event; the follows between the pair end both ways as unfollows, with their events and counters, and pending follow requests and close-friend listings both ways are dropped; refused past p_max_blocks blocks), or unblocks it (the block row and its event).';

--
-- Name: kith_blocked(bigint, bigint); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_blocked(p_a bigint, p_b bigint) RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM block b
                    WHERE b.from_user_id = p_a AND b.to_user_id = p_b AND b.active)
        OR EXISTS (SELECT 1 FROM block b
                    WHERE b.from_user_id = p_b AND b.to_user_id = p_a AND b.active);
END
$$;

--
-- Name: FUNCTION kith_blocked(p_a bigint, p_b bigint); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_blocked(p_a bigint, p_b bigint) IS 'Whether either of the two accounts blocks the other.';

--
-- Name: kith_blocks_changed(); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_blocks_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    n BIGINT;
    ids TEXT;
BEGIN
    SELECT count(*), string_agg(id::TEXT, ',')
      INTO n, ids
      FROM (SELECT DISTINCT id
              FROM (SELECT from_user_id AS id FROM changed
                    UNION ALL SELECT to_user_id FROM changed) c
             LIMIT 301) d;
    IF n > 300 THEN
        PERFORM pg_notify('kith_users_' || TG_TABLE_SCHEMA, '*');
    ELSIF n > 0 THEN
        PERFORM pg_notify('kith_users_' || TG_TABLE_SCHEMA, ids);
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: FUNCTION kith_blocks_changed(); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_blocks_changed() IS 'Trigger: notifies the processes on this schema''s channel that the blocks of the changed accounts changed.';

--
-- Name: kith_carry_request_options(bigint, bigint); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_carry_request_options(p_from bigint, p_to bigint) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    q follow_request%ROWTYPE;
BEGIN
    SELECT * INTO q FROM follow_request x WHERE x.from_user_id = p_from AND x.to_user_id = p_to;
    IF FOUND AND q.options_at = q.requested_at THEN
        PERFORM kith_follow_options_step(p_from, p_to, q.notify, q.show_reposts, q.languages,
                                         TRUE, gen_random_uuid());
    END IF;
END
$$;

--
-- Name: FUNCTION kith_carry_request_options(p_from bigint, p_to bigint); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_carry_request_options(p_from bigint, p_to bigint) IS 'Gives the follow p_from -> p_to that an accepted request just made the options asked with the request, with their event when they are not the defaults.';

--
-- Name: kith_change_edge(bigint, bigint, boolean, uuid, bigint, double precision); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_change_edge(p_actor bigint, p_target bigint, p_follow boolean, p_event_id uuid, p_max_followings bigint, p_followings_ratio double precision) RETURNS SETOF kith.kith_edge_result
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: FUNCTION kith_change_edge(p_actor bigint, p_target bigint, p_follow boolean, p_event_id uuid, p_max_followings bigint, p_followings_ratio double precision); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_change_edge(p_actor bigint, p_target bigint, p_follow boolean, p_event_id uuid, p_max_followings bigint, p_followings_ratio double precision) IS 'One follow or unfollow, through kith_change_edges; a follow past the cap raises ''kith: follow limit''. Kept for processes of the release before during a rolling deploy; drop it in the next.';

--
-- Name: kith_change_edges(bigint[], bigint[], boolean[], uuid[], bigint, double precision); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_change_edges(p_actors bigint[], p_targets bigint[], p_follows boolean[], p_events uuid[], p_max_followings bigint, p_followings_ratio double precision) RETURNS SETOF kith.kith_edge_result
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
                       version = q.version + 1, updated_at = now(),
                       -- The options of the request before are not this
                       -- one's, even in the same millisecond.
                       options_at = NULL
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

--
-- Name: FUNCTION kith_change_edges(p_actors bigint[], p_targets bigint[], p_follows boolean[], p_events uuid[], p_max_followings bigint, p_followings_ratio double precision); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_change_edges(p_actors bigint[], p_targets bigint[], p_follows boolean[], p_events uuid[], p_max_followings bigint, p_followings_ratio double precision) IS 'The group commit: many actors'' follows and unfollows in a constant number of set-based statements, locks taken in one order (pairs, hidden edges, edges, counters). Per-item outcomes, never raised: actor_unknown, actor_suspended, target_unknown, target_unfollowable, target_moved, blocked, follow_limit, a request for a locked account.';

--
-- Name: kith_change_edges(bigint, bigint[], uuid[], boolean, bigint, double precision); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_change_edges(p_actor bigint, p_targets bigint[], p_events uuid[], p_follow boolean, p_max_followings bigint, p_followings_ratio double precision) RETURNS SETOF kith.kith_edge_result
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: FUNCTION kith_change_edges(p_actor bigint, p_targets bigint[], p_events uuid[], p_follow boolean, p_max_followings bigint, p_followings_ratio double precision); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_change_edges(p_actor bigint, p_targets bigint[], p_events uuid[], p_follow boolean, p_max_followings bigint, p_followings_ratio double precision) IS 'One actor''s follows or unfollows of many targets, through kith_change_edges over arrays of actors; a follow past the cap raises ''kith: follow limit''. Kept for processes of the release before during a rolling deploy; drop it in the next.';

--
-- Name: kith_close_friend(bigint, bigint, boolean, uuid, bigint); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_close_friend(p_actor bigint, p_target bigint, p_add boolean, p_event_id uuid, p_max bigint) RETURNS SETOF kith.kith_edge_result
    LANGUAGE plpgsql
    AS $$
DECLARE
    r kith_edge_result;
    v_target users%ROWTYPE;
BEGIN
    r.outcome := kith_actor_refusal(p_actor);
    IF r.outcome IS NOT NULL THEN
        RETURN NEXT r;
        RETURN;
    END IF;
    SELECT * INTO v_target FROM users u WHERE u.id = p_target;
    IF NOT FOUND OR (p_add AND v_target.status = 'deleted') THEN
        r.outcome := 'target_unknown';
        RETURN NEXT r;
        RETURN;
    END IF;
    -- A block made meanwhile waits for this, or this for it.
    PERFORM kith_lock_pair(p_actor, p_target);
    IF p_add AND NOT EXISTS (
        SELECT 1 FROM close_friend c
         WHERE c.from_user_id = p_actor AND c.to_user_id = p_target AND c.active) THEN
        IF EXISTS (SELECT 1 FROM block b
                    WHERE b.active AND ((b.from_user_id = p_actor AND b.to_user_id = p_target)
                                     OR (b.from_user_id = p_target AND b.to_user_id = p_actor))) THEN
            r.outcome := 'blocked';
            RETURN NEXT kith_edge_target(r, v_target);
            RETURN;
        END IF;
        IF p_max > 0 THEN
            -- One owner's additions are counted one at a time.
            PERFORM 1 FROM users u WHERE u.id = p_actor FOR NO KEY UPDATE;
            IF (SELECT count(*) FROM close_friend c
                 WHERE c.from_user_id = p_actor AND c.active) >= p_max THEN
                r.outcome := 'close_friends_limit';
                RETURN NEXT kith_edge_target(r, v_target);
                RETURN;
            END IF;
        END IF;
    END IF;
    r := kith_close_friend_step(p_actor, p_target, p_add, p_event_id);
    r := kith_edge_target(r, v_target);
    SELECT * INTO r.a_follows_b, r.b_follows_a FROM kith_pair_state(p_actor, p_target);
    RETURN NEXT r;
END
$$;

--
-- Name: FUNCTION kith_close_friend(p_actor bigint, p_target bigint, p_add boolean, p_event_id uuid, p_max bigint); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_close_friend(p_actor bigint, p_target bigint, p_add boolean, p_event_id uuid, p_max bigint) IS 'Adds (p_add) or removes p_target in p_actor''s close friends: one kith_edge_result row, outcome ok (edge_version null when nothing changed) or a refusal (blocked, close_friends_limit past p_max, 0: no limit).';

--
-- Name: kith_close_friend_step(bigint, bigint, boolean, uuid); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_close_friend_step(p_owner bigint, p_friend bigint, p_add boolean, p_event_id uuid) RETURNS kith.kith_edge_result
    LANGUAGE plpgsql
    AS $$
DECLARE
    r kith_edge_result;
    v_type TEXT := CASE WHEN p_add THEN 'CloseFriendAdded' ELSE 'CloseFriendRemoved' END;
BEGIN
    IF p_add THEN
        INSERT INTO close_friend AS c (from_user_id, to_user_id, active, added_at, version, updated_at)
        VALUES (p_owner, p_friend, TRUE, date_trunc('milliseconds', now()), 1, now())
        ON CONFLICT (from_user_id, to_user_id) DO UPDATE
           SET active = TRUE,
               added_at = EXCLUDED.added_at,
               version = c.version + 1,
               updated_at = now()
         WHERE NOT c.active
        RETURNING c.version, c.added_at INTO r.edge_version, r.edge_followed_at;
    ELSE
        UPDATE close_friend AS c
           SET active = FALSE, version = c.version + 1, updated_at = now()
         WHERE c.from_user_id = p_owner AND c.to_user_id = p_friend AND c.active
        RETURNING c.version, c.added_at INTO r.edge_version, r.edge_followed_at;
    END IF;
    r.outcome := 'ok';
    IF r.edge_version IS NOT NULL THEN
        r.occurred_at := date_trunc('milliseconds', now());
        -- The wire format of CloseFriendEvent (src/events/close_friend.rs).
        INSERT INTO outbox (event_id, event_type, partition_key, payload)
        VALUES (p_event_id, v_type, p_owner::TEXT, jsonb_build_object(
            'schemaVersion', 1,
            'eventId', p_event_id,
            'type', v_type,
            'from', p_owner,
            'to', p_friend,
            'version', r.edge_version,
            'addedAtMs', (extract(epoch FROM r.edge_followed_at) * 1000)::BIGINT,
            'occurredAtMs', (extract(epoch FROM r.occurred_at) * 1000)::BIGINT));
    END IF;
    RETURN r;
END
$$;

--
-- Name: FUNCTION kith_close_friend_step(p_owner bigint, p_friend bigint, p_add boolean, p_event_id uuid); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_close_friend_step(p_owner bigint, p_friend bigint, p_add boolean, p_event_id uuid) IS 'Adds (p_add) or removes p_friend in p_owner''s close friends, with its event; edge_version null when the listing was in that state. No check: kith_close_friend and kith_block make them.';

--
-- Name: kith_next_version(bigint); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_next_version(prev bigint) RETURNS bigint
    LANGUAGE sql
    AS $$
    SELECT greatest(prev + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT)
$$;

--
-- Name: FUNCTION kith_next_version(prev bigint); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_next_version(prev bigint) IS 'The next version of a user_stats row: microseconds of the clock, always above the previous one.';

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: user_stats; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.user_stats (
    user_id bigint NOT NULL,
    followings bigint DEFAULT 0 NOT NULL,
    followers bigint DEFAULT 0 NOT NULL,
    posts bigint DEFAULT 0 NOT NULL,
    likes_received bigint DEFAULT 0 NOT NULL,
    favs_received bigint DEFAULT 0 NOT NULL,
    version bigint DEFAULT kith.kith_next_version((0)::bigint) NOT NULL,
    CONSTRAINT user_stats_favs_received_check CHECK ((favs_received >= 0)),
    CONSTRAINT user_stats_followers_check CHECK ((followers >= 0)),
    CONSTRAINT user_stats_followings_check CHECK ((followings >= 0)),
    CONSTRAINT user_stats_likes_received_check CHECK ((likes_received >= 0)),
    CONSTRAINT user_stats_posts_check CHECK ((posts >= 0))
)
WITH (fillfactor='75');

--
-- Name: kith_count_followings(bigint, bigint); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_count_followings(p_user bigint, p_delta bigint) RETURNS kith.user_stats
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_stats user_stats%ROWTYPE;
BEGIN
    UPDATE user_stats AS s
       SET followings = s.followings + p_delta,
           version = kith_next_version(s.version)
     WHERE s.user_id = p_user
    RETURNING s.* INTO v_stats;
    IF NOT FOUND THEN
        IF kith_ensure_stats(p_user) THEN
            SELECT * INTO v_stats FROM user_stats s WHERE s.user_id = p_user;
        ELSE
            UPDATE user_stats AS s
               SET followings = s.followings + p_delta,
                   version = kith_next_version(s.version)
             WHERE s.user_id = p_user
            RETURNING s.* INTO v_stats;
        END IF;
    END IF;
    RETURN v_stats;
END
$$;

--
-- Name: FUNCTION kith_count_followings(p_user bigint, p_delta bigint); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_count_followings(p_user bigint, p_delta bigint) IS 'Adds p_delta to the user''s followings (a new version) and returns the row; a missing row is counted from the truth.';

--
-- Name: kith_database_identity(); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_database_identity() RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    system_id TEXT;
BEGIN
    BEGIN
        SELECT system_identifier::text INTO system_id FROM pg_control_system();
    EXCEPTION WHEN insufficient_privilege THEN
        system_id := NULL;
    END;
    RETURN coalesce(system_id, '?') || '/' || 'event_origin'::regclass::oid::text;
END
$$;

--
-- Name: FUNCTION kith_database_identity(); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_database_identity() IS 'Where this database lives now: its system identifier and the oid of event_origin, compared with the recorded origin to refuse a restored or copied database.';

--
-- Name: kith_edge_counters(kith.kith_edge_result, kith.user_stats); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_edge_counters(p_row kith.kith_edge_result, p_stats kith.user_stats) RETURNS kith.kith_edge_result
    LANGUAGE plpgsql IMMUTABLE
    AS $$
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

--
-- Name: FUNCTION kith_edge_counters(p_row kith.kith_edge_result, p_stats kith.user_stats); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_edge_counters(p_row kith.kith_edge_result, p_stats kith.user_stats) IS 'p_row with the counters of p_stats: where the edge functions fill a kith_edge_result''s counter columns (the group commit''s kith_change_edges selects them in its result query).';

--
-- Name: kith_edge_step(bigint, bigint, boolean, uuid); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_edge_step(p_from bigint, p_to bigint, p_follow boolean, p_event_id uuid, OUT edge_version bigint, OUT edge_followed_at timestamp with time zone, OUT occurred_at timestamp with time zone) RETURNS record
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    v_type TEXT := CASE WHEN p_follow THEN 'FollowCreated' ELSE 'FollowCanceled' END;
BEGIN
    -- An edge hidden with an account that is not active is forgotten, so
    -- that the account's restore does not bring it back: an unfollow ends
    -- it, and a follow (both parties are active) makes it anew. First: a
    -- restore locks the hidden edge, then the edge row; waiting here on a
    -- restore in flight, an unfollow then sees the edge it revived (the
    -- next statement has a new snapshot) and ends it. And no hidden edge is
    -- left behind an active edge, for a later suspension to collide with.
    DELETE FROM hidden_edge h WHERE h.from_user_id = p_from AND h.to_user_id = p_to;
    IF p_follow THEN
        -- A re-follow sets followed_at again: the list shows the latest follow.
        INSERT INTO following AS f (from_user_id, to_user_id, active, followed_at, version, updated_at)
        VALUES (p_from, p_to, TRUE, date_trunc('milliseconds', now()), 1, now())
        ON CONFLICT (from_user_id, to_user_id) DO UPDATE
           SET active = TRUE,
               followed_at = EXCLUDED.followed_at,
               version = f.version + 1,
               updated_at = now()
         WHERE NOT f.active
        RETURNING f.version, f.followed_at INTO edge_version, edge_followed_at;
    ELSE
        UPDATE following AS f
           SET active = FALSE, version = f.version + 1, updated_at = now()
         WHERE f.from_user_id = p_from AND f.to_user_id = p_to AND f.active
        RETURNING f.version, f.followed_at INTO edge_version, edge_followed_at;
    END IF;

    IF edge_version IS NOT NULL THEN
        occurred_at := date_trunc('milliseconds', now());
        -- The wire format of FollowEvent (src/pipeline/events.rs); a test
        -- decodes these rows with the Rust type.
        INSERT INTO outbox (event_id, event_type, partition_key, payload)
        VALUES (p_event_id, v_type, p_from::TEXT, jsonb_build_object(
            'schemaVersion', 1,
            'eventId', p_event_id,
            'type', v_type,
            'from', p_from,
            'to', p_to,
            'version', edge_version,
            'followedAtMs', (extract(epoch FROM edge_followed_at) * 1000)::BIGINT,
            'occurredAtMs', (extract(epoch FROM occurred_at) * 1000)::BIGINT));
    ELSIF NOT p_follow THEN
        -- And again after: a suspension that hid the edge while this
        -- unfollow waited for its row (it then found the edge inactive)
        -- committed its hidden edge since; a new snapshot sees it.
        DELETE FROM hidden_edge h WHERE h.from_user_id = p_from AND h.to_user_id = p_to;
    END IF;
END
$$;

--
-- Name: FUNCTION kith_edge_step(p_from bigint, p_to bigint, p_follow boolean, p_event_id uuid, OUT edge_version bigint, OUT edge_followed_at timestamp with time zone, OUT occurred_at timestamp with time zone); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_edge_step(p_from bigint, p_to bigint, p_follow boolean, p_event_id uuid, OUT edge_version bigint, OUT edge_followed_at timestamp with time zone, OUT occurred_at timestamp with time zone) IS 'The edge row and outbox event of one follow or unfollow, if it changes anything; counters are the caller''s.';

--
-- Name: users; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.users (
    id bigint NOT NULL,
    handle text NOT NULL,
    display_name text NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    locked boolean DEFAULT false NOT NULL,
    hides_collections boolean DEFAULT false NOT NULL,
    settings_version bigint DEFAULT 0 NOT NULL,
    moved_to bigint,
    moved_at timestamp with time zone,
    CONSTRAINT users_handle_check CHECK (((length(handle) >= 1) AND (length(handle) <= 64))),
    CONSTRAINT users_moved_to_check CHECK ((moved_to <> id)),
    CONSTRAINT users_status_check CHECK ((status = ANY (ARRAY['active'::text, 'suspended'::text, 'deleted'::text])))
);

--
-- Name: kith_edge_target(kith.kith_edge_result, kith.users); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_edge_target(p_row kith.kith_edge_result, p_target kith.users) RETURNS kith.kith_edge_result
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    p_row.target_handle := p_target.handle;
    p_row.target_display_name := p_target.display_name;
    p_row.target_status := p_target.status;
    p_row.target_locked := p_target.locked;
    p_row.target_hides_collections := p_target.hides_collections;
    RETURN p_row;
END
$$;

--
-- Name: FUNCTION kith_edge_target(p_row kith.kith_edge_result, p_target kith.users); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_edge_target(p_row kith.kith_edge_result, p_target kith.users) IS 'p_row with the columns of p_target a caller shows: where the edge functions fill a kith_edge_result''s target columns (the group commit''s kith_change_edges selects them in its result query).';

--
-- Name: kith_ensure_stats(bigint); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_ensure_stats(p_user bigint) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM 1 FROM user_stats WHERE user_id = p_user;
    IF FOUND THEN
        RETURN FALSE;
    END IF;
    INSERT INTO user_stats (user_id, followings, followers, version)
    VALUES (p_user,
            (SELECT count(*) FROM following WHERE from_user_id = p_user AND active),
            (SELECT count(*) FROM follower WHERE to_user_id = p_user AND active),
            kith_next_version(coalesce(
                (SELECT version FROM user_stats_tombstone WHERE user_id = p_user), 0)))
    ON CONFLICT (user_id) DO NOTHING;
    RETURN FOUND;
END
$$;

--
-- Name: FUNCTION kith_ensure_stats(p_user bigint); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_ensure_stats(p_user bigint) IS 'Creates the user_stats row of p_user from the truth and the projection when it is missing; true when it did.';

--
-- Name: kith_follow_options_changed(); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_follow_options_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('kith_users_' || TG_TABLE_SCHEMA, NEW.from_user_id || ',' || NEW.to_user_id);
    RETURN NULL;
END
$$;

--
-- Name: FUNCTION kith_follow_options_changed(); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_follow_options_changed() IS 'Trigger: notifies the processes on this schema''s channel that the follow options of the changed row''s follower changed.';

--
-- Name: kith_follow_options_step(bigint, bigint, boolean, boolean, text[], boolean, uuid); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_follow_options_step(p_from bigint, p_to bigint, p_notify boolean, p_show_reposts boolean, p_languages text[], p_set_languages boolean, p_event_id uuid, OUT changed boolean, OUT notify boolean, OUT show_reposts boolean, OUT languages text[], OUT followed_at timestamp with time zone) RETURNS record
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    f following%ROWTYPE;
    v_version BIGINT;
BEGIN
    SELECT * INTO f FROM following x
     WHERE x.from_user_id = p_from AND x.to_user_id = p_to AND x.active
       FOR UPDATE;
    IF NOT FOUND THEN
        changed := NULL;
        RETURN;
    END IF;
    followed_at := f.followed_at;
    IF f.options_at IS DISTINCT FROM f.followed_at THEN
        f.notify := FALSE;
        f.show_reposts := TRUE;
        f.languages := NULL;
    END IF;
    notify := coalesce(p_notify, f.notify);
    show_reposts := coalesce(p_show_reposts, f.show_reposts);
    languages := CASE WHEN p_set_languages THEN p_languages ELSE f.languages END;
    changed := (notify, show_reposts, languages) IS DISTINCT FROM (f.notify, f.show_reposts, f.languages);
    IF NOT changed THEN
        RETURN;
    END IF;
    UPDATE following x
       SET notify = kith_follow_options_step.notify,
           show_reposts = kith_follow_options_step.show_reposts,
           languages = kith_follow_options_step.languages,
           options_at = f.followed_at,
           options_version = x.options_version + 1,
           updated_at = now()
     WHERE x.from_user_id = p_from AND x.to_user_id = p_to
    RETURNING x.options_version INTO v_version;
    -- The wire format of FollowOptionsEvent (src/events/follow_options.rs).
    INSERT INTO outbox (event_id, event_type, partition_key, payload)
    VALUES (p_event_id, 'FollowOptionsChanged', p_from::TEXT, jsonb_build_object(
        'schemaVersion', 1,
        'eventId', p_event_id,
        'type', 'FollowOptionsChanged',
        'from', p_from,
        'to', p_to,
        'version', v_version,
        'followedAtMs', (extract(epoch FROM f.followed_at) * 1000)::BIGINT,
        'notify', notify,
        'showReposts', show_reposts,
        'languages', to_jsonb(languages),
        'occurredAtMs', (extract(epoch FROM date_trunc('milliseconds', now())) * 1000)::BIGINT));
END
$$;

--
-- Name: FUNCTION kith_follow_options_step(p_from bigint, p_to bigint, p_notify boolean, p_show_reposts boolean, p_languages text[], p_set_languages boolean, p_event_id uuid, OUT changed boolean, OUT notify boolean, OUT show_reposts boolean, OUT languages text[], OUT followed_at timestamp with time zone); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_follow_options_step(p_from bigint, p_to bigint, p_notify boolean, p_show_reposts boolean, p_languages text[], p_set_languages boolean, p_event_id uuid, OUT changed boolean, OUT notify boolean, OUT show_reposts boolean, OUT languages text[], OUT followed_at timestamp with time zone) IS 'Sets the options of the active follow p_from -> p_to (null p_notify or p_show_reposts: as they are; p_languages only when p_set_languages, null: all), with a FollowOptionsChanged event when they change; changed null when there is no active follow. No check and no pair lock: its callers take them.';

--
-- Name: kith_lock_pair(bigint, bigint); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_lock_pair(p_a bigint, p_b bigint) RETURNS void
    LANGUAGE sql
    AS $$
    SELECT pg_advisory_xact_lock(hashint8(least(p_a, p_b)), hashint8(greatest(p_a, p_b)))
$$;

--
-- Name: FUNCTION kith_lock_pair(p_a bigint, p_b bigint); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_lock_pair(p_a bigint, p_b bigint) IS 'Takes the transaction-scoped lock of the pair {a, b}, whatever their order.';

--
-- Name: kith_move_account(bigint, bigint, uuid, uuid); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_move_account(p_from bigint, p_to bigint, p_event_id uuid, p_back_event_id uuid, OUT outcome text, OUT move_id bigint) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_from users%ROWTYPE;
    v_to users%ROWTYPE;
BEGIN
    -- The moves that run from either account first, as a batch of one
    -- holds its move's row before anything else; then both accounts'
    -- rows, in id order, FOR NO KEY UPDATE (a batch's inserts check their
    -- foreign keys against these rows and must not wait on them).
    PERFORM 1 FROM account_move m
      WHERE m.from_id IN (p_from, p_to) AND m.state = 'running'
      ORDER BY m.id FOR UPDATE;
    PERFORM 1 FROM users u WHERE u.id IN (p_from, p_to) ORDER BY u.id FOR NO KEY UPDATE;
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
        -- Followers still on their way to it would be stranded.
        WHEN EXISTS (SELECT 1 FROM account_move m
                      WHERE m.to_id = p_from AND m.from_id <> p_to AND m.state = 'running')
            THEN 'move_incoming'
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

--
-- Name: FUNCTION kith_move_account(p_from bigint, p_to bigint, p_event_id uuid, p_back_event_id uuid, OUT outcome text, OUT move_id bigint); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_move_account(p_from bigint, p_to bigint, p_event_id uuid, p_back_event_id uuid, OUT outcome text, OUT move_id bigint) IS 'Marks an account moved to another that claims it as an alias, and opens the move of its followers; a move to the account that moved to it is a move back. Outcomes, never raised: actor_unknown, actor_suspended, self, target_unknown, target_unfollowable, moved, target_moved, no_alias, move_incoming.';

--
-- Name: kith_move_event(bigint, uuid); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_move_event(p_user bigint, p_event_id uuid) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- The wire format of MoveEvent (src/events/moved.rs).
    INSERT INTO outbox (event_id, event_type, partition_key, payload)
    SELECT p_event_id, 'AccountMoved', u.id::TEXT, jsonb_build_object(
               'schemaVersion', 1, 'eventId', p_event_id, 'type', 'AccountMoved',
               'from', u.id, 'version', u.settings_version, 'movedTo', u.moved_to,
               'occurredAtMs', (extract(epoch FROM now()) * 1000)::BIGINT)
      FROM users u WHERE u.id = p_user;
END
$$;

--
-- Name: FUNCTION kith_move_event(p_user bigint, p_event_id uuid); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_move_event(p_user bigint, p_event_id uuid) IS 'Writes an account''s AccountMoved event from its users row, after its move or its move back.';

--
-- Name: kith_mute(bigint, bigint, boolean, bigint, uuid); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_mute(p_actor bigint, p_target bigint, p_mute boolean, p_expires_in_secs bigint, p_event_id uuid) RETURNS SETOF kith.kith_edge_result
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

--
-- Name: FUNCTION kith_mute(p_actor bigint, p_target bigint, p_mute boolean, p_expires_in_secs bigint, p_event_id uuid); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_mute(p_actor bigint, p_target bigint, p_mute boolean, p_expires_in_secs bigint, p_event_id uuid) IS 'Mutes (for p_expires_in_secs, or for good) or unmutes p_target as p_actor, with its event.';

--
-- Name: kith_notify_members_changed(); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_notify_members_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('kith_notify_' || TG_TABLE_SCHEMA,
        NEW.to_user_id || ',' || NEW.from_user_id || ',' ||
        CASE WHEN NEW.active AND NEW.notify AND NEW.options_at = NEW.followed_at THEN 1 ELSE 0 END
        || ',' || (extract(epoch FROM NEW.followed_at) * 1000)::BIGINT);
    RETURN NULL;
END
$$;

--
-- Name: FUNCTION kith_notify_members_changed(); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_notify_members_changed() IS 'Trigger: notifies the processes on this schema''s kith_notify_ channel that a follower joined or left an account''s notify followers ("account,follower,member,followed_at_ms").';

--
-- Name: kith_pair_state(bigint, bigint); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_pair_state(p_a bigint, p_b bigint, OUT a_follows_b timestamp with time zone, OUT b_follows_a timestamp with time zone) RETURNS record
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    SELECT f.followed_at INTO a_follows_b FROM following f
     WHERE f.from_user_id = p_a AND f.to_user_id = p_b AND f.active;
    SELECT f.followed_at INTO b_follows_a FROM following f
     WHERE f.from_user_id = p_b AND f.to_user_id = p_a AND f.active;
END
$$;

--
-- Name: FUNCTION kith_pair_state(p_a bigint, p_b bigint, OUT a_follows_b timestamp with time zone, OUT b_follows_a timestamp with time zone); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_pair_state(p_a bigint, p_b bigint, OUT a_follows_b timestamp with time zone, OUT b_follows_a timestamp with time zone) IS 'Since when each of the two accounts follows the other (NULL: it does not).';

--
-- Name: kith_past_follow_cap(bigint, bigint, bigint, double precision); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_past_follow_cap(p_followings bigint, p_followers bigint, p_max bigint, p_ratio double precision) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT p_max > 0 AND p_followings > p_max AND p_followings > p_ratio * p_followers
$$;

--
-- Name: FUNCTION kith_past_follow_cap(p_followings bigint, p_followers bigint, p_max bigint, p_ratio double precision); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_past_follow_cap(p_followings bigint, p_followers bigint, p_max bigint, p_ratio double precision) IS 'The follow cap: whether an account that would follow p_followings accounts with p_followers followers is past it (p_max 0: no cap). The one statement of the rule; PostgreSQL inlines it into its callers.';

--
-- Name: kith_remove_follower(bigint, bigint, uuid); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_remove_follower(p_owner bigint, p_follower bigint, p_event_id uuid) RETURNS SETOF kith.kith_edge_result
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: FUNCTION kith_remove_follower(p_owner bigint, p_follower bigint, p_event_id uuid); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_remove_follower(p_owner bigint, p_follower bigint, p_event_id uuid) IS 'The owner makes p_follower stop following it: the follower''s unfollow with its event and counters.';

--
-- Name: kith_request_step(bigint, bigint, boolean, uuid, text); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_request_step(p_from bigint, p_to bigint, p_request boolean, p_event_id uuid, p_type text, OUT version bigint, OUT requested_at timestamp with time zone, OUT occurred_at timestamp with time zone) RETURNS record
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
BEGIN
    IF p_request THEN
        INSERT INTO follow_request AS q (from_user_id, to_user_id, active, requested_at, version, updated_at)
        VALUES (p_from, p_to, TRUE, date_trunc('milliseconds', now()), 1, now())
        ON CONFLICT (from_user_id, to_user_id) DO UPDATE
           SET active = TRUE, requested_at = EXCLUDED.requested_at,
               version = q.version + 1, updated_at = now(),
               -- The options of the request before are not this one's,
               -- even in the same millisecond.
               options_at = NULL
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

--
-- Name: FUNCTION kith_request_step(p_from bigint, p_to bigint, p_request boolean, p_event_id uuid, p_type text, OUT version bigint, OUT requested_at timestamp with time zone, OUT occurred_at timestamp with time zone); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_request_step(p_from bigint, p_to bigint, p_request boolean, p_event_id uuid, p_type text, OUT version bigint, OUT requested_at timestamp with time zone, OUT occurred_at timestamp with time zone) IS 'Makes or ends one follow request, with its event of type p_type, if it changes anything.';

--
-- Name: kith_set_follow_options(bigint, bigint, boolean, boolean, text[], boolean, uuid); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_set_follow_options(p_actor bigint, p_target bigint, p_notify boolean, p_show_reposts boolean, p_languages text[], p_set_languages boolean, p_event_id uuid) RETURNS TABLE(outcome text, changed boolean, notify boolean, show_reposts boolean, languages text[], followed_at timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    s RECORD;
    q follow_request%ROWTYPE;
BEGIN
    outcome := kith_actor_refusal(p_actor);
    IF outcome IS NOT NULL THEN
        RETURN NEXT;
        RETURN;
    END IF;
    PERFORM kith_lock_pair(p_actor, p_target);
    SELECT * INTO s FROM kith_follow_options_step(p_actor, p_target, p_notify, p_show_reposts,
                                                  p_languages, p_set_languages, p_event_id);
    IF s.changed IS NOT NULL THEN
        outcome := 'ok';
        changed := s.changed;
        notify := s.notify;
        show_reposts := s.show_reposts;
        languages := s.languages;
        followed_at := s.followed_at;
        RETURN NEXT;
        RETURN;
    END IF;
    -- A pending request keeps them for the follow its acceptance makes.
    SELECT * INTO q FROM follow_request x
     WHERE x.from_user_id = p_actor AND x.to_user_id = p_target AND x.active
       FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'not_following';
        RETURN NEXT;
        RETURN;
    END IF;
    IF q.options_at IS DISTINCT FROM q.requested_at THEN
        q.notify := FALSE;
        q.show_reposts := TRUE;
        q.languages := NULL;
    END IF;
    notify := coalesce(p_notify, q.notify);
    show_reposts := coalesce(p_show_reposts, q.show_reposts);
    languages := CASE WHEN p_set_languages THEN p_languages ELSE q.languages END;
    changed := (notify, show_reposts, languages) IS DISTINCT FROM (q.notify, q.show_reposts, q.languages);
    IF changed THEN
        UPDATE follow_request x
           SET notify = kith_set_follow_options.notify,
               show_reposts = kith_set_follow_options.show_reposts,
               languages = kith_set_follow_options.languages,
               options_at = q.requested_at
         WHERE x.from_user_id = p_actor AND x.to_user_id = p_target;
    END IF;
    outcome := 'requested';
    RETURN NEXT;
END
$$;

--
-- Name: FUNCTION kith_set_follow_options(p_actor bigint, p_target bigint, p_notify boolean, p_show_reposts boolean, p_languages text[], p_set_languages boolean, p_event_id uuid); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_set_follow_options(p_actor bigint, p_target bigint, p_notify boolean, p_show_reposts boolean, p_languages text[], p_set_languages boolean, p_event_id uuid) IS 'Sets p_actor''s options for its follow of p_target under the pair''s lock (outcome ok), or for its pending request (requested: they apply to the follow its acceptance makes), or answers not_following; changed, and the options after the call.';

--
-- Name: kith_stats_tombstone(); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_stats_tombstone() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO user_stats_tombstone (user_id, version) VALUES (OLD.user_id, OLD.version)
    ON CONFLICT (user_id) DO UPDATE
        SET version = greatest(user_stats_tombstone.version, EXCLUDED.version);
    RETURN OLD;
END
$$;

--
-- Name: FUNCTION kith_stats_tombstone(); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_stats_tombstone() IS 'Trigger: keeps the version of a deleted user_stats row, so a row created again starts above it.';

--
-- Name: kith_transition_edge(bigint, bigint, boolean, uuid); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_transition_edge(p_from bigint, p_to bigint, p_follow boolean, p_event_id uuid) RETURNS kith.kith_edge_result
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: FUNCTION kith_transition_edge(p_from bigint, p_to bigint, p_follow boolean, p_event_id uuid); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_transition_edge(p_from bigint, p_to bigint, p_follow boolean, p_event_id uuid) IS 'One edge transition with its event, its counters and the pair''s state after it, as a kith_edge_result without outcome or target (the caller sets them), for writes whose checks are their own: kith_answer_request, kith_block, kith_remove_follower, and reconcile ending a follow across a block.';

--
-- Name: kith_update_settings(bigint, boolean, boolean, uuid); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_update_settings(p_user bigint, p_locked boolean, p_hides_collections boolean, p_event_id uuid) RETURNS SETOF kith.users
    LANGUAGE plpgsql
    AS $$
DECLARE
    v users%ROWTYPE;
BEGIN
    SELECT * INTO v FROM users u WHERE u.id = p_user AND u.status = 'active' FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF coalesce(p_locked, v.locked) = v.locked
        AND coalesce(p_hides_collections, v.hides_collections) = v.hides_collections THEN
        RETURN NEXT v;
        RETURN;
    END IF;
    UPDATE users u
       SET locked = coalesce(p_locked, u.locked),
           hides_collections = coalesce(p_hides_collections, u.hides_collections),
           settings_version = u.settings_version + 1,
           updated_at = now()
     WHERE u.id = p_user
    RETURNING * INTO v;
    -- The wire format of SettingsEvent (src/events/settings.rs).
    INSERT INTO outbox (event_id, event_type, partition_key, payload)
    VALUES (p_event_id, 'AccountSettingsChanged', p_user::TEXT, jsonb_build_object(
        'schemaVersion', 1,
        'eventId', p_event_id,
        'type', 'AccountSettingsChanged',
        'from', p_user,
        'version', v.settings_version,
        'locked', v.locked,
        'hidesCollections', v.hides_collections,
        'occurredAtMs', (extract(epoch FROM now()) * 1000)::BIGINT));
    RETURN NEXT v;
END
$$;

--
-- Name: FUNCTION kith_update_settings(p_user bigint, p_locked boolean, p_hides_collections boolean, p_event_id uuid); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_update_settings(p_user bigint, p_locked boolean, p_hides_collections boolean, p_event_id uuid) IS 'Sets locked and hides_collections (NULL: as they are) of an active account, with its event; no row for an unknown or inactive one.';

--
-- Name: kith_users_changed(); Type: FUNCTION; Schema: kith; Owner: -
--

CREATE FUNCTION kith.kith_users_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    n bigint;
    ids text;
BEGIN
    SELECT count(*), string_agg(id::text, ',')
      INTO n, ids
      FROM (SELECT id FROM changed LIMIT 301) c;
    IF n > 300 THEN
        PERFORM pg_notify('kith_users_' || TG_TABLE_SCHEMA, '*');
    ELSIF n > 0 THEN
        PERFORM pg_notify('kith_users_' || TG_TABLE_SCHEMA, ids);
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: FUNCTION kith_users_changed(); Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON FUNCTION kith.kith_users_changed() IS 'Trigger: notifies the processes on this schema''s channel of changed user rows (ids, or * for more than one notice can name).';

--
-- Name: account_alias; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.account_alias (
    user_id bigint NOT NULL,
    alias_id bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT account_alias_check CHECK ((user_id <> alias_id))
);

--
-- Name: account_move; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.account_move (
    id bigint NOT NULL,
    from_id bigint NOT NULL,
    to_id bigint NOT NULL,
    state text NOT NULL,
    total integer NOT NULL,
    moved integer DEFAULT 0 NOT NULL,
    requested integer DEFAULT 0 NOT NULL,
    skipped integer DEFAULT 0 NOT NULL,
    failed integer DEFAULT 0 NOT NULL,
    after_id bigint DEFAULT 0 NOT NULL,
    due_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_token uuid,
    lease_until timestamp with time zone,
    failure text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT account_move_state_check CHECK ((state = ANY (ARRAY['running'::text, 'done'::text, 'superseded'::text, 'failed'::text]))),
    CONSTRAINT account_move_total_check CHECK ((total >= 0))
);

--
-- Name: account_move_id_seq; Type: SEQUENCE; Schema: kith; Owner: -
--

CREATE SEQUENCE kith.account_move_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: account_move_id_seq; Type: SEQUENCE OWNED BY; Schema: kith; Owner: -
--

ALTER SEQUENCE kith.account_move_id_seq OWNED BY kith.account_move.id;

--
-- Name: account_move_row; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.account_move_row (
    move_id bigint NOT NULL,
    follower_id bigint NOT NULL,
    outcome text NOT NULL
);

--
-- Name: account_move_walk; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.account_move_walk (
    move_id bigint NOT NULL,
    first_batch_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: TABLE account_move_walk; Type: COMMENT; Schema: kith; Owner: -
--

COMMENT ON TABLE kith.account_move_walk IS 'When each move''s job ran its first batch: the move is done once a sweep finds no follower left and no transaction begun before this is open (or ten minutes on).';

--
-- Name: account_transition; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.account_transition (
    account_id bigint NOT NULL,
    status text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: block; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.block (
    from_user_id bigint NOT NULL,
    to_user_id bigint NOT NULL,
    active boolean NOT NULL,
    blocked_at timestamp with time zone NOT NULL,
    version bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT block_blocked_at_check CHECK ((blocked_at = date_trunc('milliseconds'::text, blocked_at))),
    CONSTRAINT block_check CHECK ((from_user_id <> to_user_id)),
    CONSTRAINT block_version_check CHECK ((version > 0))
);

--
-- Name: close_friend; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.close_friend (
    from_user_id bigint NOT NULL,
    to_user_id bigint NOT NULL,
    active boolean NOT NULL,
    added_at timestamp with time zone NOT NULL,
    version bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT close_friend_added_at_check CHECK ((added_at = date_trunc('milliseconds'::text, added_at))),
    CONSTRAINT close_friend_check CHECK ((from_user_id <> to_user_id)),
    CONSTRAINT close_friend_version_check CHECK ((version > 0))
);

--
-- Name: content_event_ledger; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.content_event_ledger (
    event_id uuid NOT NULL,
    author_id bigint NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: dead_letter; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.dead_letter (
    id bigint NOT NULL,
    source_topic text NOT NULL,
    source_partition integer NOT NULL,
    source_offset bigint NOT NULL,
    message_key bytea,
    payload bytea,
    error text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    published_at timestamp with time zone,
    replayed_at timestamp with time zone,
    origin uuid
);

--
-- Name: dead_letter_id_seq; Type: SEQUENCE; Schema: kith; Owner: -
--

ALTER TABLE kith.dead_letter ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME kith.dead_letter_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: event_origin; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.event_origin (
    singleton boolean DEFAULT true NOT NULL,
    origin uuid NOT NULL,
    identity text NOT NULL,
    made_at timestamp with time zone DEFAULT now() NOT NULL,
    retired uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    CONSTRAINT event_origin_singleton_check CHECK (singleton)
);

--
-- Name: follow_request; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.follow_request (
    from_user_id bigint NOT NULL,
    to_user_id bigint NOT NULL,
    active boolean NOT NULL,
    requested_at timestamp with time zone NOT NULL,
    version bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    notify boolean DEFAULT false NOT NULL,
    show_reposts boolean DEFAULT true NOT NULL,
    languages text[],
    options_at timestamp with time zone,
    CONSTRAINT follow_request_check CHECK ((from_user_id <> to_user_id)),
    CONSTRAINT follow_request_requested_at_check CHECK ((requested_at = date_trunc('milliseconds'::text, requested_at))),
    CONSTRAINT follow_request_version_check CHECK ((version > 0))
);

--
-- Name: follower; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.follower (
    to_user_id bigint NOT NULL,
    from_user_id bigint NOT NULL,
    active boolean NOT NULL,
    followed_at timestamp with time zone NOT NULL,
    version bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT follower_check CHECK ((from_user_id <> to_user_id)),
    CONSTRAINT follower_followed_at_check CHECK ((followed_at = date_trunc('milliseconds'::text, followed_at))),
    CONSTRAINT follower_version_check CHECK ((version > 0))
);

--
-- Name: following; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.following (
    from_user_id bigint NOT NULL,
    to_user_id bigint NOT NULL,
    active boolean NOT NULL,
    followed_at timestamp with time zone NOT NULL,
    version bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    notify boolean DEFAULT false NOT NULL,
    show_reposts boolean DEFAULT true NOT NULL,
    languages text[],
    options_at timestamp with time zone,
    options_version bigint DEFAULT 0 NOT NULL,
    CONSTRAINT following_check CHECK ((from_user_id <> to_user_id)),
    CONSTRAINT following_followed_at_check CHECK ((followed_at = date_trunc('milliseconds'::text, followed_at))),
    CONSTRAINT following_version_check CHECK ((version > 0))
);

--
-- Name: hidden_edge; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.hidden_edge (
    account_id bigint NOT NULL,
    from_user_id bigint NOT NULL,
    to_user_id bigint NOT NULL,
    followed_at timestamp with time zone NOT NULL
);

--
-- Name: import_follow_budget; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.import_follow_budget (
    owner_id bigint NOT NULL,
    window_start timestamp with time zone NOT NULL,
    follows integer NOT NULL,
    CONSTRAINT import_follow_budget_follows_check CHECK ((follows >= 0))
);

--
-- Name: import_job; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.import_job (
    id bigint NOT NULL,
    owner_id bigint NOT NULL,
    kind text NOT NULL,
    mode text NOT NULL,
    state text NOT NULL,
    total integer NOT NULL,
    applied integer DEFAULT 0 NOT NULL,
    skipped integer DEFAULT 0 NOT NULL,
    failed integer DEFAULT 0 NOT NULL,
    removed integer DEFAULT 0 NOT NULL,
    removal_after bigint,
    lease_token uuid,
    lease_until timestamp with time zone,
    failure text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT import_job_kind_check CHECK ((kind = ANY (ARRAY['following'::text, 'blocks'::text, 'mutes'::text]))),
    CONSTRAINT import_job_mode_check CHECK ((mode = ANY (ARRAY['merge'::text, 'overwrite'::text]))),
    CONSTRAINT import_job_state_check CHECK ((state = ANY (ARRAY['queued'::text, 'running'::text, 'done'::text, 'failed'::text, 'canceled'::text]))),
    CONSTRAINT import_job_total_check CHECK ((total >= 0))
);

--
-- Name: import_job_id_seq; Type: SEQUENCE; Schema: kith; Owner: -
--

CREATE SEQUENCE kith.import_job_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: import_job_id_seq; Type: SEQUENCE OWNED BY; Schema: kith; Owner: -
--

ALTER SEQUENCE kith.import_job_id_seq OWNED BY kith.import_job.id;

--
-- Name: import_row; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.import_row (
    job_id bigint NOT NULL,
    ordinal integer NOT NULL,
    line integer NOT NULL,
    address text NOT NULL,
    target_id bigint,
    outcome text,
    options jsonb
);

--
-- Name: import_turn; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.import_turn (
    job_id bigint NOT NULL,
    due_at timestamp with time zone NOT NULL
);

--
-- Name: mute; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.mute (
    from_user_id bigint NOT NULL,
    to_user_id bigint NOT NULL,
    active boolean NOT NULL,
    muted_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone,
    version bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT mute_check CHECK ((from_user_id <> to_user_id)),
    CONSTRAINT mute_expires_at_check CHECK ((expires_at = date_trunc('milliseconds'::text, expires_at))),
    CONSTRAINT mute_muted_at_check CHECK ((muted_at = date_trunc('milliseconds'::text, muted_at))),
    CONSTRAINT mute_version_check CHECK ((version > 0))
);

--
-- Name: outbox; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.outbox (
    id bigint NOT NULL,
    event_id uuid NOT NULL,
    event_type text NOT NULL,
    partition_key text NOT NULL,
    payload jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: outbox_id_seq; Type: SEQUENCE; Schema: kith; Owner: -
--

ALTER TABLE kith.outbox ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME kith.outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: projector_member; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.projector_member (
    consumer_group text NOT NULL,
    member uuid NOT NULL,
    heartbeat_at timestamp with time zone NOT NULL
);

--
-- Name: projector_partition; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.projector_partition (
    consumer_group text NOT NULL,
    topic text NOT NULL,
    partition integer NOT NULL,
    next_offset bigint,
    synced_offset bigint,
    owner uuid,
    lease_until timestamp with time zone,
    epoch bigint DEFAULT 0 NOT NULL,
    CONSTRAINT projector_partition_next_offset_check CHECK ((next_offset >= 0)),
    CONSTRAINT projector_partition_partition_check CHECK ((partition >= 0)),
    CONSTRAINT projector_partition_synced_offset_check CHECK ((synced_offset >= 0))
);

--
-- Name: reconcile_watermark; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.reconcile_watermark (
    name text NOT NULL,
    watermark timestamp with time zone NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: suggestion_dismissal; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.suggestion_dismissal (
    user_id bigint NOT NULL,
    target_id bigint NOT NULL,
    until timestamp with time zone NOT NULL
);

--
-- Name: user_stats_tombstone; Type: TABLE; Schema: kith; Owner: -
--

CREATE TABLE kith.user_stats_tombstone (
    user_id bigint NOT NULL,
    version bigint NOT NULL
);

--
-- Name: users_id_seq; Type: SEQUENCE; Schema: kith; Owner: -
--

ALTER TABLE kith.users ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME kith.users_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: account_move id; Type: DEFAULT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.account_move ALTER COLUMN id SET DEFAULT nextval('kith.account_move_id_seq'::regclass);

--
-- Name: import_job id; Type: DEFAULT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.import_job ALTER COLUMN id SET DEFAULT nextval('kith.import_job_id_seq'::regclass);

--
-- Name: account_alias account_alias_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.account_alias
    ADD CONSTRAINT account_alias_pkey PRIMARY KEY (user_id, alias_id);

--
-- Name: account_move account_move_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.account_move
    ADD CONSTRAINT account_move_pkey PRIMARY KEY (id);

--
-- Name: account_move_row account_move_row_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.account_move_row
    ADD CONSTRAINT account_move_row_pkey PRIMARY KEY (move_id, follower_id);

--
-- Name: account_move_walk account_move_walk_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.account_move_walk
    ADD CONSTRAINT account_move_walk_pkey PRIMARY KEY (move_id);

--
-- Name: account_transition account_transition_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.account_transition
    ADD CONSTRAINT account_transition_pkey PRIMARY KEY (account_id);

--
-- Name: block block_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.block
    ADD CONSTRAINT block_pkey PRIMARY KEY (from_user_id, to_user_id);

--
-- Name: close_friend close_friend_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.close_friend
    ADD CONSTRAINT close_friend_pkey PRIMARY KEY (from_user_id, to_user_id);

--
-- Name: content_event_ledger content_event_ledger_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.content_event_ledger
    ADD CONSTRAINT content_event_ledger_pkey PRIMARY KEY (event_id);

--
-- Name: dead_letter dead_letter_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.dead_letter
    ADD CONSTRAINT dead_letter_pkey PRIMARY KEY (id);

--
-- Name: dead_letter dead_letter_source_topic_source_partition_source_offset_key; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.dead_letter
    ADD CONSTRAINT dead_letter_source_topic_source_partition_source_offset_key UNIQUE (source_topic, source_partition, source_offset);

--
-- Name: event_origin event_origin_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.event_origin
    ADD CONSTRAINT event_origin_pkey PRIMARY KEY (singleton);

--
-- Name: follow_request follow_request_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.follow_request
    ADD CONSTRAINT follow_request_pkey PRIMARY KEY (from_user_id, to_user_id);

--
-- Name: follower follower_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.follower
    ADD CONSTRAINT follower_pkey PRIMARY KEY (to_user_id, from_user_id);

--
-- Name: following following_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.following
    ADD CONSTRAINT following_pkey PRIMARY KEY (from_user_id, to_user_id);

--
-- Name: hidden_edge hidden_edge_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.hidden_edge
    ADD CONSTRAINT hidden_edge_pkey PRIMARY KEY (account_id, from_user_id, to_user_id);

--
-- Name: import_follow_budget import_follow_budget_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.import_follow_budget
    ADD CONSTRAINT import_follow_budget_pkey PRIMARY KEY (owner_id);

--
-- Name: import_job import_job_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.import_job
    ADD CONSTRAINT import_job_pkey PRIMARY KEY (id);

--
-- Name: import_row import_row_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.import_row
    ADD CONSTRAINT import_row_pkey PRIMARY KEY (job_id, ordinal);

--
-- Name: import_turn import_turn_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.import_turn
    ADD CONSTRAINT import_turn_pkey PRIMARY KEY (job_id);

--
-- Name: mute mute_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.mute
    ADD CONSTRAINT mute_pkey PRIMARY KEY (from_user_id, to_user_id);

--
-- Name: outbox outbox_event_id_key; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.outbox
    ADD CONSTRAINT outbox_event_id_key UNIQUE (event_id);

--
-- Name: outbox outbox_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.outbox
    ADD CONSTRAINT outbox_pkey PRIMARY KEY (id);

--
-- Name: projector_member projector_member_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.projector_member
    ADD CONSTRAINT projector_member_pkey PRIMARY KEY (consumer_group, member);

--
-- Name: projector_partition projector_partition_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.projector_partition
    ADD CONSTRAINT projector_partition_pkey PRIMARY KEY (consumer_group, topic, partition);

--
-- Name: reconcile_watermark reconcile_watermark_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.reconcile_watermark
    ADD CONSTRAINT reconcile_watermark_pkey PRIMARY KEY (name);

--
-- Name: suggestion_dismissal suggestion_dismissal_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.suggestion_dismissal
    ADD CONSTRAINT suggestion_dismissal_pkey PRIMARY KEY (user_id, target_id);

--
-- Name: user_stats user_stats_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.user_stats
    ADD CONSTRAINT user_stats_pkey PRIMARY KEY (user_id);

--
-- Name: user_stats_tombstone user_stats_tombstone_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.user_stats_tombstone
    ADD CONSTRAINT user_stats_tombstone_pkey PRIMARY KEY (user_id);

--
-- Name: users users_handle_key; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.users
    ADD CONSTRAINT users_handle_key UNIQUE (handle);

--
-- Name: users users_pkey; Type: CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);

--
-- Name: account_move_due_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX account_move_due_idx ON kith.account_move USING btree (due_at, id) WHERE (state = 'running'::text);

--
-- Name: account_move_open_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE UNIQUE INDEX account_move_open_idx ON kith.account_move USING btree (from_id) WHERE (state = 'running'::text);

--
-- Name: block_incoming_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX block_incoming_idx ON kith.block USING btree (to_user_id, from_user_id) WHERE active;

--
-- Name: block_recent_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX block_recent_idx ON kith.block USING btree (from_user_id, blocked_at DESC, to_user_id DESC) WHERE active;

--
-- Name: close_friend_listed_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX close_friend_listed_idx ON kith.close_friend USING btree (to_user_id) WHERE active;

--
-- Name: close_friend_recent_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX close_friend_recent_idx ON kith.close_friend USING btree (from_user_id, added_at DESC, to_user_id DESC) WHERE active;

--
-- Name: content_event_ledger_applied_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX content_event_ledger_applied_idx ON kith.content_event_ledger USING btree (applied_at);

--
-- Name: dead_letter_unpublished_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX dead_letter_unpublished_idx ON kith.dead_letter USING btree (id) WHERE (published_at IS NULL);

--
-- Name: follow_request_incoming_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX follow_request_incoming_idx ON kith.follow_request USING btree (to_user_id, requested_at DESC, from_user_id DESC) WHERE active;

--
-- Name: follow_request_outgoing_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX follow_request_outgoing_idx ON kith.follow_request USING btree (from_user_id, requested_at DESC, to_user_id DESC) WHERE active;

--
-- Name: follower_recent_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX follower_recent_idx ON kith.follower USING btree (to_user_id, followed_at DESC, from_user_id DESC) WHERE active;

--
-- Name: follower_updated_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX follower_updated_idx ON kith.follower USING btree (updated_at);

--
-- Name: following_incoming_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX following_incoming_idx ON kith.following USING btree (to_user_id, from_user_id) INCLUDE (active);

--
-- Name: following_notify_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX following_notify_idx ON kith.following USING btree (to_user_id, followed_at DESC, from_user_id DESC) WHERE (active AND notify AND (options_at = followed_at));

--
-- Name: following_options_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX following_options_idx ON kith.following USING btree (from_user_id) WHERE (options_at IS NOT NULL);

--
-- Name: following_recent_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX following_recent_idx ON kith.following USING btree (from_user_id, followed_at DESC, to_user_id DESC) WHERE active;

--
-- Name: following_updated_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX following_updated_idx ON kith.following USING btree (updated_at, from_user_id, to_user_id);

--
-- Name: hidden_edge_pair_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX hidden_edge_pair_idx ON kith.hidden_edge USING btree (from_user_id, to_user_id);

--
-- Name: import_job_finished_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX import_job_finished_idx ON kith.import_job USING btree (finished_at) WHERE (finished_at IS NOT NULL);

--
-- Name: import_job_open_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE UNIQUE INDEX import_job_open_idx ON kith.import_job USING btree (owner_id) WHERE (state = ANY (ARRAY['queued'::text, 'running'::text]));

--
-- Name: import_job_owner_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX import_job_owner_idx ON kith.import_job USING btree (owner_id, id DESC);

--
-- Name: import_job_pending_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX import_job_pending_idx ON kith.import_job USING btree (id) WHERE (state = ANY (ARRAY['queued'::text, 'running'::text]));

--
-- Name: import_row_deferred_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX import_row_deferred_idx ON kith.import_row USING btree (job_id) WHERE (outcome = 'FOLLOW_BUDGET'::text);

--
-- Name: import_row_pending_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX import_row_pending_idx ON kith.import_row USING btree (job_id, ordinal) WHERE (outcome IS NULL);

--
-- Name: import_row_target_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX import_row_target_idx ON kith.import_row USING btree (job_id, target_id) WHERE (target_id IS NOT NULL);

--
-- Name: import_turn_due_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX import_turn_due_idx ON kith.import_turn USING btree (due_at, job_id);

--
-- Name: mute_recent_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX mute_recent_idx ON kith.mute USING btree (from_user_id, muted_at DESC, to_user_id DESC) WHERE active;

--
-- Name: users_inactive_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX users_inactive_idx ON kith.users USING btree (id) WHERE (status <> 'active'::text);

--
-- Name: users_moved_idx; Type: INDEX; Schema: kith; Owner: -
--

CREATE INDEX users_moved_idx ON kith.users USING btree (id) WHERE (moved_to IS NOT NULL);

--
-- Name: block block_inserted_notify; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER block_inserted_notify AFTER INSERT ON kith.block REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith.kith_blocks_changed();

--
-- Name: block block_updated_notify; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER block_updated_notify AFTER UPDATE ON kith.block REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith.kith_blocks_changed();

--
-- Name: close_friend close_friend_inserted_notify; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER close_friend_inserted_notify AFTER INSERT ON kith.close_friend REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith.kith_blocks_changed();

--
-- Name: close_friend close_friend_updated_notify; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER close_friend_updated_notify AFTER UPDATE ON kith.close_friend REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith.kith_blocks_changed();

--
-- Name: follow_request follow_request_inserted_notify; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER follow_request_inserted_notify AFTER INSERT ON kith.follow_request REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith.kith_blocks_changed();

--
-- Name: follow_request follow_request_updated_notify; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER follow_request_updated_notify AFTER UPDATE ON kith.follow_request REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith.kith_blocks_changed();

--
-- Name: following following_notify_members_inserted; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER following_notify_members_inserted AFTER INSERT ON kith.following FOR EACH ROW WHEN ((new.active AND new.notify AND (new.options_at = new.followed_at))) EXECUTE FUNCTION kith.kith_notify_members_changed();

--
-- Name: following following_notify_members_updated; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER following_notify_members_updated AFTER UPDATE OF active, notify, options_at, followed_at ON kith.following FOR EACH ROW WHEN (((COALESCE((old.active AND old.notify AND (old.options_at = old.followed_at)), false) IS DISTINCT FROM COALESCE((new.active AND new.notify AND (new.options_at = new.followed_at)), false)) OR (COALESCE((new.active AND new.notify AND (new.options_at = new.followed_at)), false) AND (old.followed_at IS DISTINCT FROM new.followed_at)))) EXECUTE FUNCTION kith.kith_notify_members_changed();

--
-- Name: following following_options_notify; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER following_options_notify AFTER UPDATE OF active, followed_at, notify, show_reposts, languages, options_at ON kith.following FOR EACH ROW WHEN (((new.options_at IS NOT NULL) OR (old.options_at IS NOT NULL))) EXECUTE FUNCTION kith.kith_follow_options_changed();

--
-- Name: mute mute_inserted_notify; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER mute_inserted_notify AFTER INSERT ON kith.mute REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith.kith_blocks_changed();

--
-- Name: mute mute_updated_notify; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER mute_updated_notify AFTER UPDATE ON kith.mute REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith.kith_blocks_changed();

--
-- Name: user_stats user_stats_deleted; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER user_stats_deleted AFTER DELETE ON kith.user_stats FOR EACH ROW EXECUTE FUNCTION kith.kith_stats_tombstone();

--
-- Name: users users_deleted_notify; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER users_deleted_notify AFTER DELETE ON kith.users REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith.kith_users_changed();

--
-- Name: users users_updated_notify; Type: TRIGGER; Schema: kith; Owner: -
--

CREATE TRIGGER users_updated_notify AFTER UPDATE ON kith.users REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith.kith_users_changed();

--
-- Name: account_alias account_alias_alias_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.account_alias
    ADD CONSTRAINT account_alias_alias_id_fkey FOREIGN KEY (alias_id) REFERENCES kith.users(id);

--
-- Name: account_alias account_alias_user_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.account_alias
    ADD CONSTRAINT account_alias_user_id_fkey FOREIGN KEY (user_id) REFERENCES kith.users(id);

--
-- Name: account_move account_move_from_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.account_move
    ADD CONSTRAINT account_move_from_id_fkey FOREIGN KEY (from_id) REFERENCES kith.users(id);

--
-- Name: account_move_row account_move_row_move_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.account_move_row
    ADD CONSTRAINT account_move_row_move_id_fkey FOREIGN KEY (move_id) REFERENCES kith.account_move(id) ON DELETE CASCADE;

--
-- Name: account_move account_move_to_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.account_move
    ADD CONSTRAINT account_move_to_id_fkey FOREIGN KEY (to_id) REFERENCES kith.users(id);

--
-- Name: account_move_walk account_move_walk_move_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.account_move_walk
    ADD CONSTRAINT account_move_walk_move_id_fkey FOREIGN KEY (move_id) REFERENCES kith.account_move(id) ON DELETE CASCADE;

--
-- Name: block block_from_user_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.block
    ADD CONSTRAINT block_from_user_id_fkey FOREIGN KEY (from_user_id) REFERENCES kith.users(id);

--
-- Name: block block_to_user_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.block
    ADD CONSTRAINT block_to_user_id_fkey FOREIGN KEY (to_user_id) REFERENCES kith.users(id);

--
-- Name: close_friend close_friend_from_user_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.close_friend
    ADD CONSTRAINT close_friend_from_user_id_fkey FOREIGN KEY (from_user_id) REFERENCES kith.users(id);

--
-- Name: close_friend close_friend_to_user_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.close_friend
    ADD CONSTRAINT close_friend_to_user_id_fkey FOREIGN KEY (to_user_id) REFERENCES kith.users(id);

--
-- Name: follow_request follow_request_from_user_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.follow_request
    ADD CONSTRAINT follow_request_from_user_id_fkey FOREIGN KEY (from_user_id) REFERENCES kith.users(id);

--
-- Name: follow_request follow_request_to_user_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.follow_request
    ADD CONSTRAINT follow_request_to_user_id_fkey FOREIGN KEY (to_user_id) REFERENCES kith.users(id);

--
-- Name: following following_from_user_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.following
    ADD CONSTRAINT following_from_user_id_fkey FOREIGN KEY (from_user_id) REFERENCES kith.users(id);

--
-- Name: following following_to_user_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.following
    ADD CONSTRAINT following_to_user_id_fkey FOREIGN KEY (to_user_id) REFERENCES kith.users(id);

--
-- Name: import_follow_budget import_follow_budget_owner_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.import_follow_budget
    ADD CONSTRAINT import_follow_budget_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES kith.users(id);

--
-- Name: import_job import_job_owner_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.import_job
    ADD CONSTRAINT import_job_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES kith.users(id);

--
-- Name: import_row import_row_job_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.import_row
    ADD CONSTRAINT import_row_job_id_fkey FOREIGN KEY (job_id) REFERENCES kith.import_job(id) ON DELETE CASCADE;

--
-- Name: import_turn import_turn_job_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.import_turn
    ADD CONSTRAINT import_turn_job_id_fkey FOREIGN KEY (job_id) REFERENCES kith.import_job(id) ON DELETE CASCADE;

--
-- Name: mute mute_from_user_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.mute
    ADD CONSTRAINT mute_from_user_id_fkey FOREIGN KEY (from_user_id) REFERENCES kith.users(id);

--
-- Name: mute mute_to_user_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.mute
    ADD CONSTRAINT mute_to_user_id_fkey FOREIGN KEY (to_user_id) REFERENCES kith.users(id);

--
-- Name: suggestion_dismissal suggestion_dismissal_target_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.suggestion_dismissal
    ADD CONSTRAINT suggestion_dismissal_target_id_fkey FOREIGN KEY (target_id) REFERENCES kith.users(id);

--
-- Name: suggestion_dismissal suggestion_dismissal_user_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.suggestion_dismissal
    ADD CONSTRAINT suggestion_dismissal_user_id_fkey FOREIGN KEY (user_id) REFERENCES kith.users(id);

--
-- Name: user_stats user_stats_user_id_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.user_stats
    ADD CONSTRAINT user_stats_user_id_fkey FOREIGN KEY (user_id) REFERENCES kith.users(id);

--
-- Name: users users_moved_to_fkey; Type: FK CONSTRAINT; Schema: kith; Owner: -
--

ALTER TABLE ONLY kith.users
    ADD CONSTRAINT users_moved_to_fkey FOREIGN KEY (moved_to) REFERENCES kith.users(id);

--
-- PostgreSQL database dump complete
--

