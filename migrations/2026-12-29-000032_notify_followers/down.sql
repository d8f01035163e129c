DROP TRIGGER following_notify_members_updated ON following;
DROP TRIGGER following_notify_members_inserted ON following;
DROP FUNCTION kith_notify_members_changed();
DROP INDEX following_notify_idx;
