-- Mutes. A mute is a directed, versioned row like a block, with an
-- optional end (`expires_at`): a mute past it is no mute, wherever it is
-- read, so expiry needs no sweep and no sweep can race a read. Mutes
-- change no follow and filter no list; they are for feeds, which learn of
-- them from the events. A trigger notifies the users channel with both
-- ids, so every process drops its cached mutes of the muter.

CREATE TABLE mute (
    from_user_id BIGINT NOT NULL REFERENCES users (id),
    to_user_id BIGINT NOT NULL REFERENCES users (id),
    active BOOLEAN NOT NULL,
    muted_at TIMESTAMPTZ NOT NULL CHECK (muted_at = date_trunc('milliseconds', muted_at)),
    expires_at TIMESTAMPTZ CHECK (expires_at = date_trunc('milliseconds', expires_at)),
    version BIGINT NOT NULL CHECK (version > 0),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (from_user_id, to_user_id),
    CHECK (from_user_id <> to_user_id)
);

-- Whom a user mutes, newest first (the `muting` list).
CREATE INDEX mute_recent_idx ON mute (from_user_id, muted_at DESC, to_user_id DESC) WHERE active;

CREATE TRIGGER mute_inserted_notify AFTER INSERT ON mute
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith_blocks_changed();
CREATE TRIGGER mute_updated_notify AFTER UPDATE ON mute
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION kith_blocks_changed();

-- Mutes (`p_mute`, until `p_expires_in_secs` from now, or until unmuted
-- when null) or unmutes `p_target` as `p_actor`. One row: `outcome` 'ok'
-- (`edge_version`, `edge_followed_at`: the mute's new version and time,
-- null when nothing changed — a mute repeated with no end over one with
-- none, an unmute of no mute or an expired one), or a refusal as
-- `kith_block` answers them. A mute over a live one sets its end anew.
CREATE FUNCTION kith_mute(p_actor BIGINT, p_target BIGINT, p_mute BOOLEAN,
    p_expires_in_secs BIGINT, p_event_id UUID)
RETURNS SETOF kith_edge_result LANGUAGE plpgsql AS $$
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
    r.target_handle := v_target.handle;
    r.target_display_name := v_target.display_name;
    r.target_status := v_target.status;
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
