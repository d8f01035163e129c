-- Recovery and repair: partition ownership and consumed positions of the
-- projector live in PostgreSQL, dead letters are recorded with them, counter
-- versions never restart, and content events are checked one at a time.

-- Which projector owns which partition, and how far it got. Kept here rather
-- than in the broker's consumer group: a lease moves within seconds of its
-- owner dying, whatever the broker's group coordinator does, and the consumed
-- position is written in the same transaction as the projection, so every
-- batch is applied exactly once (the "offsets stored outside Kafka" pattern).
CREATE TABLE projector_partition (
    consumer_group TEXT   NOT NULL,
    topic          TEXT   NOT NULL,
    partition      INT    NOT NULL CHECK (partition >= 0),
    -- First offset whose PostgreSQL effects are not applied; NULL: from the start.
    next_offset    BIGINT CHECK (next_offset >= 0),
    -- First offset whose Redis effects are not known to be written (<= next_offset).
    synced_offset  BIGINT CHECK (synced_offset >= 0),
    -- The member holding the lease, if any, and until when (PostgreSQL's clock).
    owner          UUID,
    lease_until    TIMESTAMPTZ,
    -- Bumped at every claim: a batch commits only under the epoch it was read in.
    epoch          BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer_group, topic, partition)
);

-- The live projectors of a group, so that the partitions can be shared out.
CREATE TABLE projector_member (
    consumer_group TEXT        NOT NULL,
    member         UUID        NOT NULL,
    heartbeat_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (consumer_group, member)
);

-- Messages the projector could not decode or apply, written in the same
-- transaction that moves the consumed position past them, so none is lost or
-- recorded twice. The outbox relay mirrors them to the dead-letter topic.
CREATE TABLE dead_letter (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_topic     TEXT        NOT NULL,
    source_partition INT         NOT NULL,
    source_offset    BIGINT      NOT NULL,
    message_key      BYTEA,
    payload          BYTEA,
    error            TEXT        NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    published_at     TIMESTAMPTZ,
    replayed_at      TIMESTAMPTZ,
    UNIQUE (source_topic, source_partition, source_offset)
);

CREATE INDEX dead_letter_unpublished_idx ON dead_letter (id) WHERE published_at IS NULL;

CREATE TRIGGER dead_letter_notify
    AFTER INSERT ON dead_letter
    FOR EACH STATEMENT EXECUTE FUNCTION kith_outbox_notify();

-- Who follows a user, read from the truth: what `kith verify`, reconciliation
-- and the sampled counter check compare the `follower` projection and the
-- `followers` counters with, and how an account's incoming edges are found
-- when it is deleted.
-- Inactive edges are in it too: a projection row still active for an edge the
-- truth holds inactive is exactly what a check must find.
CREATE INDEX following_incoming_idx ON following (to_user_id, from_user_id) INCLUDE (active);

-- Edges changed since a time, in a stable order for keyset pages.
CREATE INDEX following_updated_idx ON following (updated_at, from_user_id, to_user_id);

-- Where incremental reconciliation got to.
CREATE TABLE reconcile_watermark (
    name       TEXT PRIMARY KEY,
    watermark  TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Edges deactivated because an account at one end was suspended or deleted,
-- with their follow time, so that restoring the account brings them back in
-- their old place. An unfollow of such an edge while it is hidden drops it.
CREATE TABLE hidden_edge (
    account_id   BIGINT      NOT NULL,
    from_user_id BIGINT      NOT NULL,
    to_user_id   BIGINT      NOT NULL,
    followed_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (account_id, from_user_id, to_user_id)
);

CREATE INDEX hidden_edge_pair_idx ON hidden_edge (from_user_id, to_user_id);

-- Status changes whose edges are not all carried along yet (the sweeper
-- finishes them if the process doing it dies).
CREATE TABLE account_transition (
    account_id BIGINT      PRIMARY KEY,
    status     TEXT        NOT NULL,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Accounts that are not active: what the lifecycle sweeper looks at.
CREATE INDEX users_inactive_idx ON users (id) WHERE status <> 'active';

-- Retention of the content-event ledger deletes by age.
CREATE INDEX content_event_ledger_applied_idx ON content_event_ledger (applied_at);

-- Versions of user_stats rows: microseconds of the clock, and always above the
-- row's previous version. A row deleted and created again starts above every
-- version it ever had, so "only if newer" caches never freeze on it.
CREATE FUNCTION kith_next_version(prev BIGINT) RETURNS BIGINT LANGUAGE sql VOLATILE AS $$
    SELECT greatest(prev + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT)
$$;

ALTER TABLE user_stats ALTER COLUMN version SET DEFAULT kith_next_version(0);

-- The last version of every deleted user_stats row: a row created again
-- starts above it even if the clock stepped back meanwhile.
CREATE TABLE user_stats_tombstone (
    user_id BIGINT PRIMARY KEY,
    version BIGINT NOT NULL
);

CREATE FUNCTION kith_stats_tombstone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO user_stats_tombstone (user_id, version) VALUES (OLD.user_id, OLD.version)
    ON CONFLICT (user_id) DO UPDATE
        SET version = greatest(user_stats_tombstone.version, EXCLUDED.version);
    RETURN OLD;
END
$$;

CREATE TRIGGER user_stats_deleted
    AFTER DELETE ON user_stats
    FOR EACH ROW EXECUTE FUNCTION kith_stats_tombstone();

-- The user_stats row of `p_user`, created from the truth (`following`) and the
-- projection (`follower`) as they stand when it is missing. Returns true when
-- it created the row. Content counters of a lost row cannot be recovered.
CREATE FUNCTION kith_ensure_stats(p_user BIGINT) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
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

-- A projector batch's counter changes, in one round trip:
--  * every row the batch changes is locked first, in user-id order, so
--    concurrent batches never deadlock; a missing row is created from the
--    truth and the projection (which already hold this batch's follows, so its
--    follower delta is not added again);
--  * follower deltas per user (the batch's follow events, already applied to
--    `follower` by the same transaction);
--  * content events one at a time, in order, each claimed in the ledger and
--    checked against zero on its own — never netted with its neighbours, so
--    the outcome does not depend on how events are batched.
-- Returns one row per content event: 'applied', 'duplicate', 'below_zero' or
-- 'unknown_author' (the last two are not claimed, so a replay can apply them).
CREATE FUNCTION kith_apply_counters(
    p_user BIGINT[], p_followers BIGINT[],
    p_event UUID[], p_author BIGINT[], p_posts BIGINT[], p_likes BIGINT[], p_favs BIGINT[]
) RETURNS TABLE (ord INT, outcome TEXT) LANGUAGE plpgsql AS $$
DECLARE
    created BIGINT[] := '{}';
    u BIGINT;
BEGIN
    FOR u IN SELECT DISTINCT x FROM unnest(p_user || p_author) AS x ORDER BY x LOOP
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM users WHERE id = u);
        PERFORM 1 FROM user_stats WHERE user_id = u FOR UPDATE;
        IF NOT FOUND THEN
            IF kith_ensure_stats(u) THEN
                created := created || u;
            END IF;
            PERFORM 1 FROM user_stats WHERE user_id = u FOR UPDATE;
        END IF;
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(p_user, 1), 0) LOOP
        CONTINUE WHEN p_user[i] = ANY (created) OR p_followers[i] = 0;
        UPDATE user_stats
           SET followers = followers + p_followers[i], version = kith_next_version(version)
         WHERE user_id = p_user[i];
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
                MESSAGE = format('follow event for unknown user %s', p_user[i]);
        END IF;
    END LOOP;
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

DROP FUNCTION kith_add_stats(BIGINT[], BIGINT[], BIGINT[], BIGINT[], BIGINT[]);
