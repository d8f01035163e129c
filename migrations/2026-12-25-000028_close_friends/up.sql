-- Close friends: an owner's private list of accounts, versioned rows like
-- blocks and mutes. Only the owner reads the list; an account learns of
-- its own place in another's list and of nobody else's. A block between
-- the two ends the listing both ways. The triggers notify the users
-- channel with both ids, so every process drops the boundaries it holds
-- of both.

CREATE TABLE close_friend (
    from_user_id BIGINT NOT NULL REFERENCES users (id),
    to_user_id BIGINT NOT NULL REFERENCES users (id),
    active BOOLEAN NOT NULL,
    added_at TIMESTAMPTZ NOT NULL CHECK (added_at = date_trunc('milliseconds', added_at)),
    version BIGINT NOT NULL CHECK (version > 0),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (from_user_id, to_user_id),
    CHECK (from_user_id <> to_user_id)
);

-- An owner's list, newest first (`closeFriends`).
CREATE INDEX close_friend_recent_idx ON close_friend (from_user_id, added_at DESC, to_user_id DESC) WHERE active;
-- The lists an account is in (its boundaries' `close_friend_of`).
CREATE INDEX close_friend_listed_idx ON close_friend (to_user_id) WHERE active;

CREATE TRIGGER close_friend_inserted_notify AFTER INSERT ON close_friend
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith_blocks_changed();
CREATE TRIGGER close_friend_updated_notify AFTER UPDATE ON close_friend
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith_blocks_changed();

CREATE FUNCTION kith_close_friend_step(p_owner BIGINT, p_friend BIGINT, p_add BOOLEAN,
    p_event_id UUID)
RETURNS kith_edge_result LANGUAGE plpgsql AS $$
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
COMMENT ON FUNCTION kith_close_friend_step(BIGINT, BIGINT, BOOLEAN, UUID) IS
  'Adds (p_add) or removes p_friend in p_owner''s close friends, with its event; edge_version null when the listing was in that state. No check: kith_close_friend and kith_block make them.';

CREATE FUNCTION kith_close_friend(p_actor BIGINT, p_target BIGINT, p_add BOOLEAN,
    p_event_id UUID, p_max BIGINT)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
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
COMMENT ON FUNCTION kith_close_friend(BIGINT, BIGINT, BOOLEAN, UUID, BIGINT) IS
  'Adds (p_add) or removes p_target in p_actor''s close friends: one kith_edge_result row, outcome ok (edge_version null when nothing changed) or a refusal (blocked, close_friends_limit past p_max, 0: no limit).';

-- A block ends close-friend listings both ways, as it ends follows.
CREATE OR REPLACE FUNCTION kith_block(p_actor bigint, p_target bigint, p_block boolean, p_event_id uuid, p_unfollow_events uuid[], p_max_blocks bigint) RETURNS SETOF kith_edge_result
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

COMMENT ON FUNCTION kith_block(BIGINT, BIGINT, BOOLEAN, UUID, UUID[], BIGINT) IS
  'Blocks p_target as p_actor (the block row and its event; the follows between the pair end both ways as unfollows, with their events and counters, and pending follow requests and close-friend listings both ways are dropped; refused past p_max_blocks blocks), or unblocks it (the block row and its event).';
