DROP TABLE content_event_ledger;
DROP TRIGGER outbox_notify ON outbox;
DROP FUNCTION kith_outbox_notify();
