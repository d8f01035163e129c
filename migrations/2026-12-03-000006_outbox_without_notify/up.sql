-- The outbox and the dead letters no longer NOTIFY: a notifying transaction
-- holds a database-wide lock from just before its commit to its end, which
-- made every follow commit one after another. Writers wake the relay
-- themselves after their commit (src/pipeline/wake.rs).
DROP TRIGGER outbox_notify ON outbox;
DROP TRIGGER dead_letter_notify ON dead_letter;
DROP FUNCTION kith_outbox_notify();
