-- Imports that share the runners fairly, can be canceled, spend a daily
-- follow budget of their own, and keep only what their report needs.
ALTER TABLE import_job DROP CONSTRAINT import_job_state_check;
ALTER TABLE import_job ADD CONSTRAINT import_job_state_check
    CHECK (state IN ('queued', 'running', 'done', 'failed', 'canceled'));

-- Runners take the open jobs of all accounts in turn, a batch each: the
-- job due first goes next. A batch makes its job due again at once (so
-- behind every other due job), or later when its account's pace or daily
-- follow budget holds it back. One row per open job.
CREATE TABLE import_turn (
    job_id BIGINT PRIMARY KEY REFERENCES import_job (id) ON DELETE CASCADE,
    due_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX import_turn_due_idx ON import_turn (due_at, job_id);
INSERT INTO import_turn (job_id, due_at)
SELECT id, created_at FROM import_job WHERE state IN ('queued', 'running');

-- Rows waiting for the next day's follow budget, counted per job.
CREATE INDEX import_row_deferred_idx ON import_row (job_id) WHERE outcome = 'FOLLOW_BUDGET';

-- Finished jobs, oldest first, for their deletion after the retention.
CREATE INDEX import_job_finished_idx ON import_job (finished_at) WHERE finished_at IS NOT NULL;

-- The follows an account's imports made in its current day (a window that
-- opens with its first follow and lasts a day).
CREATE TABLE import_follow_budget (
    owner_id BIGINT PRIMARY KEY REFERENCES users (id),
    window_start TIMESTAMPTZ NOT NULL,
    follows INT NOT NULL CHECK (follows >= 0)
);
