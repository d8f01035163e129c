-- Import jobs: an account's CSV file of follows, blocks or mutes, applied
-- in the background in batches through the same statements as the
-- mutations. Each batch commits its writes, its rows' outcomes and the
-- job's progress together, under the job's lease (`lease_token`): a runner
-- that dies leaves the job to the next after `lease_until`, which resumes
-- where the last commit left it, so nothing is applied twice.

CREATE TABLE import_job (
    id BIGSERIAL PRIMARY KEY,
    owner_id BIGINT NOT NULL REFERENCES users (id),
    kind TEXT NOT NULL CHECK (kind IN ('following', 'blocks', 'mutes')),
    mode TEXT NOT NULL CHECK (mode IN ('merge', 'overwrite')),
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    total INT NOT NULL CHECK (total >= 0),
    applied INT NOT NULL DEFAULT 0,
    skipped INT NOT NULL DEFAULT 0,
    failed INT NOT NULL DEFAULT 0,
    -- An overwrite's removals of what the file does not name.
    removed INT NOT NULL DEFAULT 0,
    -- An overwrite's walk of the list once every row is applied: the last
    -- member id it looked at (null: not started).
    removal_after BIGINT,
    lease_token UUID,
    lease_until TIMESTAMPTZ,
    failure TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at TIMESTAMPTZ
);

-- One open job per account.
CREATE UNIQUE INDEX import_job_open_idx ON import_job (owner_id) WHERE state IN ('queued', 'running');
-- The open jobs, for runners looking for one whose lease lapsed.
CREATE INDEX import_job_pending_idx ON import_job (id) WHERE state IN ('queued', 'running');
-- An account's jobs, newest first.
CREATE INDEX import_job_owner_idx ON import_job (owner_id, id DESC);

-- The rows of a job's file, in file order: the address as written and the
-- line it is on; once applied, the account it named (when it named one)
-- and how it ended ('applied', 'skipped' or an error code; a malformed
-- line is 'MALFORMED' from the start).
CREATE TABLE import_row (
    job_id BIGINT NOT NULL REFERENCES import_job (id) ON DELETE CASCADE,
    ordinal INT NOT NULL,
    line INT NOT NULL,
    address TEXT NOT NULL,
    target_id BIGINT,
    outcome TEXT,
    PRIMARY KEY (job_id, ordinal)
);

-- The rows still to apply, in file order: each batch takes the first.
CREATE INDEX import_row_pending_idx ON import_row (job_id, ordinal) WHERE outcome IS NULL;
-- An overwrite asks which members the file named.
CREATE INDEX import_row_target_idx ON import_row (job_id, target_id) WHERE target_id IS NOT NULL;
