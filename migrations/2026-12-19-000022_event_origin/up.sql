-- The identity of this database as the writer of its events.
--
-- Every event the relay publishes carries `origin` (the `kith-origin`
-- header), and a projector applies only events of its own database's
-- origin: a second database on the same topics (staging sharing a Kafka
-- cluster, a restored backup, a new region) cannot change this one's
-- views. `kith origin renew` gives the database a new origin (a copy that
-- is to live beside the original); `kith after-restore` does so too, after
-- a restore to an earlier point, so that what the lost timeline published
-- is foreign from then on.
--
-- `identity` is where the origin was made: the cluster's system identifier
-- and this table's own oid. A physical copy (a standby promoted by a
-- failover) keeps both; a logical restore or copy (pg_dump and pg_restore,
-- psql) makes the table anew and so gets another oid. Relays and
-- projectors refuse to start while the two disagree, until an operator
-- says what the database is (`kith after-restore`, `kith origin renew`, or
-- `kith origin adopt` for a database moved or upgraded with nothing lost).

CREATE TABLE event_origin (
    singleton BOOLEAN PRIMARY KEY DEFAULT true CHECK (singleton),
    origin UUID NOT NULL,
    identity TEXT NOT NULL,
    made_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Earlier origins of this database, newest first: their events are
    -- refused as this database's own past, not another's.
    retired UUID[] NOT NULL DEFAULT '{}'
);

-- Where this database lives now: the system identifier ('?' where the
-- role may not read it) and the oid of `event_origin`.
CREATE FUNCTION kith_database_identity() RETURNS TEXT
LANGUAGE plpgsql STABLE AS $$
DECLARE
    system_id TEXT;
BEGIN
    BEGIN
        SELECT system_identifier::text INTO system_id FROM pg_control_system();
    EXCEPTION WHEN insufficient_privilege THEN
        system_id := NULL;
    END;
    RETURN coalesce(system_id, '?') || '/' || 'event_origin'::regclass::oid::text;
END
$$;

INSERT INTO event_origin (origin, identity) VALUES (gen_random_uuid(), kith_database_identity());

-- A dead letter keeps the origin its message carried, so that a replay
-- refuses a foreign one as the projector did.
ALTER TABLE dead_letter ADD COLUMN origin UUID;

-- Incremental reconciliation walks projection rows changed since its
-- watermark, to find those with no truth row.
CREATE INDEX follower_updated_idx ON follower (updated_at);
