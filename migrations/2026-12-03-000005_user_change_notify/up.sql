-- Every change to `users` rows tells the Kith processes which cached user
-- rows to drop: NOTIFY on channel `kith_users_<schema>` at commit (one
-- channel per schema, as ids repeat across tenants and tests), with the
-- changed ids comma-separated, or '*' (drop everything) for a statement that changed
-- more rows than one notification can name (payloads stop at 8000 bytes).
-- Inserts need no notice: a process never caches the absence of a user.
CREATE FUNCTION kith_users_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    ids text;
BEGIN
    SELECT count(*), string_agg(id::text, ',')
      INTO n, ids
      FROM (SELECT id FROM changed LIMIT 301) c;
    IF n > 300 THEN
        PERFORM pg_notify('kith_users_' || TG_TABLE_SCHEMA, '*');
    ELSIF n > 0 THEN
        PERFORM pg_notify('kith_users_' || TG_TABLE_SCHEMA, ids);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER users_updated_notify
    AFTER UPDATE ON users REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION kith_users_changed();

CREATE TRIGGER users_deleted_notify
    AFTER DELETE ON users REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION kith_users_changed();
