-- Who asked to be told when an account posts: the active follows whose
-- `notify` option is on (set for this follow: `options_at` is its
-- `followed_at`), newest first, for `notifyFollowers`.
CREATE INDEX following_notify_idx ON following (to_user_id, followed_at DESC, from_user_id DESC)
    WHERE active AND notify AND options_at = followed_at;

-- Each change of who is among an account's notify followers, as it
-- commits, on `kith_notify_<schema>`: "account,follower,member (1 or 0),
-- followed at (ms)". The processes' caches of those lists apply it.
CREATE FUNCTION kith_notify_members_changed() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kith_notify_' || TG_TABLE_SCHEMA,
        NEW.to_user_id || ',' || NEW.from_user_id || ',' ||
        CASE WHEN NEW.active AND NEW.notify AND NEW.options_at = NEW.followed_at THEN 1 ELSE 0 END
        || ',' || (extract(epoch FROM NEW.followed_at) * 1000)::BIGINT);
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION kith_notify_members_changed() IS
    'Trigger: notifies the processes on this schema''s kith_notify_ channel that a follower joined or left an account''s notify followers ("account,follower,member,followed_at_ms").';

CREATE TRIGGER following_notify_members_inserted AFTER INSERT ON following
    FOR EACH ROW WHEN (NEW.active AND NEW.notify AND NEW.options_at = NEW.followed_at)
    EXECUTE FUNCTION kith_notify_members_changed();
CREATE TRIGGER following_notify_members_updated
    AFTER UPDATE OF active, notify, options_at, followed_at ON following
    FOR EACH ROW WHEN (
        coalesce(OLD.active AND OLD.notify AND OLD.options_at = OLD.followed_at, FALSE)
            IS DISTINCT FROM coalesce(NEW.active AND NEW.notify AND NEW.options_at = NEW.followed_at, FALSE)
        OR (coalesce(NEW.active AND NEW.notify AND NEW.options_at = NEW.followed_at, FALSE)
            AND OLD.followed_at IS DISTINCT FROM NEW.followed_at))
    EXECUTE FUNCTION kith_notify_members_changed();
