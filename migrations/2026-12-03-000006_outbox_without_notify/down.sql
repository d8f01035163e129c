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

CREATE TRIGGER dead_letter_notify
    AFTER INSERT ON dead_letter
    FOR EACH STATEMENT EXECUTE FUNCTION kith_outbox_notify();
