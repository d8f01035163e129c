-- Back to migration 000016: settings change with no event.

DROP FUNCTION kith_update_settings(BIGINT, BOOLEAN, BOOLEAN, UUID);
ALTER TABLE users DROP COLUMN settings_version;
