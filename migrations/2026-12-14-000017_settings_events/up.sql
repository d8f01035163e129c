-- A change of account settings is an event like every other write:
-- `kith_update_settings` changes the row and writes `AccountSettingsChanged`
-- to the outbox in one statement, keyed by the account, with the
-- settings' own version (`users.settings_version`, one more per real
-- change), so consumers can tell a stale copy from a newer one. A call
-- that changes nothing writes nothing.

ALTER TABLE users ADD COLUMN settings_version BIGINT NOT NULL DEFAULT 0;

-- Sets `locked` and `hides_collections` (null: left as they are) on the
-- active account `p_user` and returns its row; no row when the account
-- is unknown or not active.
CREATE FUNCTION kith_update_settings(p_user BIGINT, p_locked BOOLEAN, p_hides_collections BOOLEAN,
    p_event_id UUID)
RETURNS SETOF users LANGUAGE plpgsql AS $$
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
