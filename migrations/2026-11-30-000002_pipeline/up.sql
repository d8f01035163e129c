-- Wake the outbox relay as soon as an event commits (NOTIFY is delivered at
-- commit, never for a rolled-back transaction). The relay also polls slowly,
-- so a missed notification only delays, never loses, an event.
CREATE FUNCTION kith_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- One channel per schema, so relays of other schemas (tenants, tests) sleep on.
    PERFORM pg_notify('kith_outbox_' || TG_TABLE_SCHEMA, '');
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_notify
    AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION kith_outbox_notify();

-- Content events (posts, likes, favourites) already counted, by event id, so a
-- redelivered event counts once.
CREATE TABLE content_event_ledger (
    event_id   UUID PRIMARY KEY,
    author_id  BIGINT      NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Applies one follow event to the projection if its version is newer than the
-- row's, and says what the row held before. The row lock is taken before the
-- comparison, so two appliers of one edge (a consumer and a zombie during a
-- rebalance) serialise, and each computes its counter change from the state
-- it really replaced.
CREATE FUNCTION kith_apply_follower(
    p_to BIGINT, p_from BIGINT, p_active BOOLEAN, p_followed_at TIMESTAMPTZ, p_version BIGINT,
    OUT was_active BOOLEAN, OUT applied BOOLEAN
) LANGUAGE plpgsql AS $$
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

-- A whole batch of follow events in one round trip, applied in order.
CREATE FUNCTION kith_apply_followers(
    p_to BIGINT[], p_from BIGINT[], p_active BOOLEAN[], p_followed_at TIMESTAMPTZ[], p_version BIGINT[]
) RETURNS TABLE (ord INT, was_active BOOLEAN, applied BOOLEAN) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_to, 1), 0) LOOP
        ord := i;
        SELECT r.was_active, r.applied INTO was_active, applied
          FROM kith_apply_follower(p_to[i], p_from[i], p_active[i], p_followed_at[i], p_version[i]) r;
        RETURN NEXT;
    END LOOP;
END
$$;

-- Adds a batch's counter deltas, one user at a time in the order given (the
-- caller sorts by user id, so concurrent batches lock rows in one order),
-- bumping each row's version; returns the new rows.
CREATE FUNCTION kith_add_stats(
    p_user BIGINT[], p_followers BIGINT[], p_posts BIGINT[], p_likes BIGINT[], p_favs BIGINT[]
) RETURNS SETOF user_stats LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO user_stats (user_id) SELECT unnest(p_user) ON CONFLICT DO NOTHING;
    FOR i IN 1 .. coalesce(array_length(p_user, 1), 0) LOOP
        RETURN QUERY
        UPDATE user_stats
           SET followers = followers + p_followers[i],
               posts = posts + p_posts[i],
               likes_received = likes_received + p_likes[i],
               favs_received = favs_received + p_favs[i],
               version = version + 1
         WHERE user_id = p_user[i]
        RETURNING *;
    END LOOP;
END
$$;
