-- Back to migration 000022: one runner runs a job to its end.

DROP TABLE import_follow_budget;
DROP INDEX import_job_finished_idx;
DROP INDEX import_row_deferred_idx;
DROP TABLE import_turn;
DELETE FROM import_job WHERE state = 'canceled';
ALTER TABLE import_job DROP CONSTRAINT import_job_state_check;
ALTER TABLE import_job ADD CONSTRAINT import_job_state_check
    CHECK (state IN ('queued', 'running', 'done', 'failed'));
