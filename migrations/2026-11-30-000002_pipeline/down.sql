DROP FUNCTION kith_add_stats(BIGINT[], BIGINT[], BIGINT[], BIGINT[], BIGINT[]);
DROP FUNCTION kith_apply_followers(BIGINT[], BIGINT[], BOOLEAN[], TIMESTAMPTZ[], BIGINT[]);
DROP FUNCTION kith_apply_follower(BIGINT, BIGINT, BOOLEAN, TIMESTAMPTZ, BIGINT);
DROP TABLE content_event_ledger;
DROP TRIGGER outbox_notify ON outbox;
DROP FUNCTION kith_outbox_notify();
