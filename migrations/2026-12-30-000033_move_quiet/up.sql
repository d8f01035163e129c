-- When a move's job ran its first batch: every follow that read the
-- account before it moved began before then, and the move is done only
-- once no transaction that began before it is still open. A table of its
-- own: `account_move` has as many columns as the store's diesel tables take.
CREATE TABLE account_move_walk (
    move_id BIGINT PRIMARY KEY REFERENCES account_move (id) ON DELETE CASCADE,
    first_batch_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
COMMENT ON TABLE account_move_walk IS
    'When each move''s job ran its first batch: the move is done once a sweep finds no follower left and no transaction begun before this is open (or ten minutes on).';
