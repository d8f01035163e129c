-- Suggestions an account dismissed: left out of its suggestions until
-- `until` (KITH_SUGGESTION_DISMISS_SECS after the dismissal). A
-- preference of the account's own, read only when its suggestions are
-- computed; no other account or service depends on it.

CREATE TABLE suggestion_dismissal (
    user_id BIGINT NOT NULL REFERENCES users (id),
    target_id BIGINT NOT NULL REFERENCES users (id),
    until TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_id, target_id)
);
