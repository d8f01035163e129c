DROP TABLE account_move_walk;
