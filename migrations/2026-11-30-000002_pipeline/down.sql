DROP FUNCTION kith_apply_follower(BIGINT, BIGINT, BOOLEAN, TIMESTAMPTZ, BIGINT);
DROP TABLE content_event_ledger;
DROP TRIGGER outbox_notify ON outbox;
DROP FUNCTION kith_outbox_notify();
