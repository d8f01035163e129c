DROP TRIGGER users_deleted_notify ON users;
DROP TRIGGER users_updated_notify ON users;
DROP FUNCTION kith_users_changed();
