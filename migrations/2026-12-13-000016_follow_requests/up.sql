-- Locked accounts and follow requests. A follow of a locked account (one
-- it does not have already) is a pending request: a row of
-- `follow_request`, versioned like an edge, counted nowhere public, with
-- its `FollowRequested` event. Any other follow or unfollow of the pair
-- by the requester ends it (an unfollow cancels it; a follow of an account
-- unlocked meanwhile supersedes it); the
-- account accepts it (`kith_answer_request`: the request ends and the
-- follow is made exactly as any follow, events and counters) or rejects
-- it. A block drops the pair's requests both ways. A request, an answer
-- and a block take the pair's lock, as follows do, so they run one after
-- the other; a cancel is ordered by the request row's lock. A trigger notifies the users channel with
-- both ids, so every process drops its cached requests of the two.
-- `kith_accept_requests` accepts a batch of an unlocked account's pending
-- requests (an unlock accepts them all, batch by batch).

CREATE TABLE follow_request (
    from_user_id BIGINT NOT NULL REFERENCES users (id),
    to_user_id BIGINT NOT NULL REFERENCES users (id),
    active BOOLEAN NOT NULL,
    requested_at TIMESTAMPTZ NOT NULL CHECK (requested_at = date_trunc('milliseconds', requested_at)),
    version BIGINT NOT NULL CHECK (version > 0),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (from_user_id, to_user_id),
    CHECK (from_user_id <> to_user_id)
);

-- Requests an account has received, newest first (`followRequests`,
-- the unlock's batches).
CREATE INDEX follow_request_incoming_idx
    ON follow_request (to_user_id, requested_at DESC, from_user_id DESC) WHERE active;
-- Requests an account has sent, newest first (`sentFollowRequests`).
CREATE INDEX follow_request_outgoing_idx
    ON follow_request (from_user_id, requested_at DESC, to_user_id DESC) WHERE active;

CREATE TRIGGER follow_request_inserted_notify AFTER INSERT ON follow_request
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith_blocks_changed();
CREATE TRIGGER follow_request_updated_notify AFTER UPDATE ON follow_request
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith_blocks_changed();

-- Makes the request `p_from` → `p_to` pending (`p_request`) or ends it,
-- and appends its event of type `p_type` when it changed (keyed by the
-- requester). `version` is null when it was in that state already.
CREATE FUNCTION kith_request_step(p_from BIGINT, p_to BIGINT, p_request BOOLEAN, p_event_id UUID, p_type TEXT,
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

-- `p_owner` accepts (`p_accept`) or rejects the pending request of
-- `p_requester`. One row: `outcome` 'answered' (the request ended; when
-- accepted, `edge_*` and the counters are those of the follow made, the
-- requester's), 'ok' (no request was pending: nothing changed),
-- 'blocked' / 'target_unfollowable' (an accept while a block stands, or
-- of a requester that is not active: nothing changed), or a refusal as
-- `kith_block` answers them. The pair columns are from the owner's side.
CREATE FUNCTION kith_answer_request(p_owner BIGINT, p_requester BIGINT, p_accept BOOLEAN,
    p_event_id UUID, p_follow_event_id UUID)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
DECLARE
    r kith_edge_result;
    v_requester users%ROWTYPE;
    v_req RECORD;
    v_t RECORD;
    v_pair RECORD;
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

-- Accepts up to `p_limit` of the pending requests `p_owner` has received,
-- oldest first, if the account is not locked (an unlock's batch). One row
-- per request looked at: the requester and the outcome ('answered':
-- accepted; 'dropped': it could not become a follow — a block, a
-- requester not active — and was rejected, so that batches end).
CREATE FUNCTION kith_accept_requests(p_owner BIGINT, p_limit INT)
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
          FROM kith_answer_request(p_owner, v_from, TRUE, gen_random_uuid(), gen_random_uuid()) a;
        IF outcome IN ('blocked', 'target_unfollowable') THEN
            -- It can never become a follow now: dropped, so batches end.
            PERFORM kith_answer_request(p_owner, v_from, FALSE, gen_random_uuid(), NULL);
            outcome := 'dropped';
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION kith_change_edge(p_actor BIGINT, p_target BIGINT, p_follow BOOLEAN, p_event_id UUID,
    p_max_followings BIGINT, p_followings_ratio DOUBLE PRECISION)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
DECLARE
    r kith_edge_result;
    v_target users%ROWTYPE;
    v_step RECORD;
    v_pair RECORD;
    v_stats user_stats%ROWTYPE;
    v_req RECORD;
BEGIN
    r.outcome := kith_actor_refusal(p_actor);
    IF r.outcome IS NOT NULL THEN
        RETURN NEXT r;
        RETURN;
    END IF;
    SELECT * INTO v_target FROM users u WHERE u.id = p_target;
    IF NOT FOUND THEN
        r.outcome := 'target_unknown';
        RETURN NEXT r;
        RETURN;
    END IF;
    r.target_handle := v_target.handle;
    r.target_display_name := v_target.display_name;
    r.target_status := v_target.status;
    r.target_locked := v_target.locked;
    r.target_hides_collections := v_target.hides_collections;
    IF p_follow AND v_target.status <> 'active' THEN
        r.outcome := 'target_unfollowable';
        RETURN NEXT r;
        RETURN;
    END IF;
    IF p_follow THEN
        PERFORM kith_lock_pair(p_actor, p_target);
        IF kith_blocked(p_actor, p_target) THEN
            r.outcome := 'blocked';
            RETURN NEXT r;
            RETURN;
        END IF;
    END IF;
    -- A follow of a locked account is a request (unless it follows
    -- already).
    IF p_follow AND v_target.locked AND NOT EXISTS (
        SELECT 1 FROM following f
         WHERE f.from_user_id = p_actor AND f.to_user_id = p_target AND f.active) THEN
        v_req := kith_request_step(p_actor, p_target, TRUE, p_event_id, 'FollowRequested');
        r.outcome := 'requested';
        r.edge_version := v_req.version;
        r.edge_followed_at := v_req.requested_at;
        r.occurred_at := v_req.occurred_at;
        v_pair := kith_pair_state(p_actor, p_target);
        r.a_follows_b := v_pair.a_follows_b;
        r.b_follows_a := v_pair.b_follows_a;
        RETURN NEXT r;
        RETURN;
    END IF;
    -- Any other follow or unfollow ends a pending request: an unfollow
    -- cancels it, a follow of an account unlocked meanwhile supersedes it.
    v_req := kith_request_step(p_actor, p_target, FALSE, gen_random_uuid(), 'FollowRequestCanceled');
    r.outcome := 'ok';
    v_step := kith_edge_step(p_actor, p_target, p_follow, p_event_id);
    r.edge_version := v_step.edge_version;
    r.edge_followed_at := v_step.edge_followed_at;
    r.occurred_at := v_step.occurred_at;
    IF r.edge_version IS NOT NULL THEN
        v_stats := kith_count_followings(p_actor, CASE WHEN p_follow THEN 1 ELSE -1 END);
        IF p_follow AND kith_past_follow_cap(v_stats, p_max_followings, p_followings_ratio) THEN
            RAISE EXCEPTION 'kith: follow limit' USING ERRCODE = 'KF001';
        END IF;
        r.followings := v_stats.followings;
        r.followers := v_stats.followers;
        r.posts := v_stats.posts;
        r.likes_received := v_stats.likes_received;
        r.favs_received := v_stats.favs_received;
        r.version := v_stats.version;
    ELSIF v_req.version IS NOT NULL THEN
        -- Only the request changed.
        r.outcome := 'request_canceled';
        r.edge_version := v_req.version;
        r.edge_followed_at := v_req.requested_at;
        r.occurred_at := v_req.occurred_at;
    END IF;
    v_pair := kith_pair_state(p_actor, p_target);
    r.a_follows_b := v_pair.a_follows_b;
    r.b_follows_a := v_pair.b_follows_a;
    RETURN NEXT r;
END
$$;

CREATE OR REPLACE FUNCTION kith_change_edges(p_actor BIGINT, p_targets BIGINT[], p_events UUID[], p_follow BOOLEAN,
    p_max_followings BIGINT, p_followings_ratio DOUBLE PRECISION)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
DECLARE
    r kith_edge_result;
    v_refusal TEXT;
    v_target users%ROWTYPE;
    v_step RECORD;
    v_pair RECORD;
    v_stats user_stats%ROWTYPE;
    v_changed INT := 0;
    v_rows kith_edge_result[] := '{}';
    v_req RECORD;
    i INT;
BEGIN
    v_refusal := kith_actor_refusal(p_actor);
    IF v_refusal IS NOT NULL THEN
        r.outcome := v_refusal;
        FOR i IN 1 .. coalesce(array_length(p_targets, 1), 0) LOOP
            RETURN NEXT r;
        END LOOP;
        RETURN;
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_targets, 1), 0) LOOP
        r := NULL;
        SELECT * INTO v_target FROM users u WHERE u.id = p_targets[i];
        IF NOT FOUND THEN
            r.outcome := 'target_unknown';
            v_rows := v_rows || r;
            CONTINUE;
        END IF;
        r.target_handle := v_target.handle;
        r.target_display_name := v_target.display_name;
        r.target_status := v_target.status;
        r.target_locked := v_target.locked;
        r.target_hides_collections := v_target.hides_collections;
        IF p_follow AND v_target.status <> 'active' THEN
            r.outcome := 'target_unfollowable';
            v_rows := v_rows || r;
            CONTINUE;
        END IF;
        IF p_follow THEN
            PERFORM kith_lock_pair(p_actor, p_targets[i]);
            IF kith_blocked(p_actor, p_targets[i]) THEN
                r.outcome := 'blocked';
                v_rows := v_rows || r;
                CONTINUE;
            END IF;
        END IF;
        IF p_follow AND v_target.locked AND NOT EXISTS (
            SELECT 1 FROM following f
             WHERE f.from_user_id = p_actor AND f.to_user_id = p_targets[i] AND f.active) THEN
            v_req := kith_request_step(p_actor, p_targets[i], TRUE, p_events[i], 'FollowRequested');
            v_pair := kith_pair_state(p_actor, p_targets[i]);
            r.outcome := 'requested';
            r.edge_version := v_req.version;
            r.edge_followed_at := v_req.requested_at;
            r.occurred_at := v_req.occurred_at;
            r.a_follows_b := v_pair.a_follows_b;
            r.b_follows_a := v_pair.b_follows_a;
            v_rows := v_rows || r;
            CONTINUE;
        END IF;
        -- Any other follow or unfollow ends a pending request.
        v_req := kith_request_step(p_actor, p_targets[i], FALSE, gen_random_uuid(), 'FollowRequestCanceled');
        v_step := kith_edge_step(p_actor, p_targets[i], p_follow, p_events[i]);
        v_pair := kith_pair_state(p_actor, p_targets[i]);
        IF v_step.edge_version IS NOT NULL THEN
            v_changed := v_changed + 1;
        END IF;
        r.outcome := 'ok';
        r.edge_version := v_step.edge_version;
        r.edge_followed_at := v_step.edge_followed_at;
        r.occurred_at := v_step.occurred_at;
        IF v_step.edge_version IS NULL AND v_req.version IS NOT NULL THEN
            -- Only the request changed.
            r.outcome := 'request_canceled';
            r.edge_version := v_req.version;
            r.edge_followed_at := v_req.requested_at;
            r.occurred_at := v_req.occurred_at;
        END IF;
        r.a_follows_b := v_pair.a_follows_b;
        r.b_follows_a := v_pair.b_follows_a;
        v_rows := v_rows || r;
    END LOOP;
    IF v_changed > 0 THEN
        v_stats := kith_count_followings(p_actor, CASE WHEN p_follow THEN v_changed ELSE -v_changed END);
        IF p_follow AND kith_past_follow_cap(v_stats, p_max_followings, p_followings_ratio) THEN
            RAISE EXCEPTION 'kith: follow limit' USING ERRCODE = 'KF001';
        END IF;
    END IF;
    FOREACH r IN ARRAY v_rows LOOP
        IF r.outcome = 'ok' AND r.edge_version IS NOT NULL THEN
            r.followings := v_stats.followings;
            r.followers := v_stats.followers;
            r.posts := v_stats.posts;
            r.likes_received := v_stats.likes_received;
            r.favs_received := v_stats.favs_received;
            r.version := v_stats.version;
        END IF;
        RETURN NEXT r;
    END LOOP;
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
    v_ended RECORD;
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
    r.target_handle := v_target.handle;
    r.target_display_name := v_target.display_name;
    r.target_status := v_target.status;
    r.target_locked := v_target.locked;
    r.target_hides_collections := v_target.hides_collections;
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
            SELECT * INTO v_ended FROM kith_transition_edge(v_dir.f, v_dir.t, FALSE, v_dir.ev);
            CONTINUE WHEN v_ended.edge_version IS NULL;
            e := NULL;
            e.outcome := v_dir.o;
            e.edge_version := v_ended.edge_version;
            e.edge_followed_at := v_ended.edge_followed_at;
            e.occurred_at := v_ended.occurred_at;
            e.followings := v_ended.followings;
            e.followers := v_ended.followers;
            e.posts := v_ended.posts;
            e.likes_received := v_ended.likes_received;
            e.favs_received := v_ended.favs_received;
            e.version := v_ended.version;
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
