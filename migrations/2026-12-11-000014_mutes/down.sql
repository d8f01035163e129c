-- Back to migration 000013: no mutes.

DROP FUNCTION kith_mute(BIGINT, BIGINT, BOOLEAN, BIGINT, UUID);
DROP TABLE mute;
