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
