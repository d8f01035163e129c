-- Back to migration 000021: events carry no origin.

DROP INDEX follower_updated_idx;
ALTER TABLE dead_letter DROP COLUMN origin;
DROP TABLE event_origin;
DROP FUNCTION kith_database_identity();
