-- The comments go back to what they were; the functions stay as they are.

COMMENT ON FUNCTION kith_accept_requests(bigint, integer, bigint, double precision) IS NULL;
COMMENT ON FUNCTION kith_actor_refusal(bigint) IS NULL;
COMMENT ON FUNCTION kith_answer_request(bigint, bigint, boolean, uuid, uuid, bigint, double precision) IS NULL;
COMMENT ON FUNCTION kith_apply_counters(bigint[], bigint[], uuid[], bigint[], bigint[], bigint[], bigint[]) IS NULL;
COMMENT ON FUNCTION kith_apply_follower(bigint, bigint, boolean, timestamp with time zone, bigint) IS NULL;
COMMENT ON FUNCTION kith_apply_followers(bigint[], bigint[], boolean[], timestamp with time zone[], bigint[]) IS NULL;
COMMENT ON FUNCTION kith_block(bigint, bigint, boolean, uuid, uuid[], bigint) IS NULL;
COMMENT ON FUNCTION kith_blocked(bigint, bigint) IS NULL;
COMMENT ON FUNCTION kith_blocks_changed() IS NULL;
COMMENT ON FUNCTION kith_change_edge(bigint, bigint, boolean, uuid, bigint, double precision) IS NULL;
COMMENT ON FUNCTION kith_change_edges(bigint, bigint[], uuid[], boolean, bigint, double precision) IS NULL;
-- This one had a comment already: it gets it back.
COMMENT ON FUNCTION kith_change_edges(bigint[], bigint[], boolean[], uuid[], bigint, double precision) IS
    'Follows and unfollows of many actors in one transaction, a constant number of statements per call; one kith_edge_result per item, in order.';
COMMENT ON FUNCTION kith_count_followings(bigint, bigint) IS NULL;
COMMENT ON FUNCTION kith_database_identity() IS NULL;
COMMENT ON FUNCTION kith_edge_step(bigint, bigint, boolean, uuid) IS NULL;
COMMENT ON FUNCTION kith_ensure_stats(bigint) IS NULL;
COMMENT ON FUNCTION kith_lock_pair(bigint, bigint) IS NULL;
COMMENT ON FUNCTION kith_mute(bigint, bigint, boolean, bigint, uuid) IS NULL;
COMMENT ON FUNCTION kith_next_version(bigint) IS NULL;
COMMENT ON FUNCTION kith_pair_state(bigint, bigint) IS NULL;
COMMENT ON FUNCTION kith_past_follow_cap(user_stats, bigint, double precision) IS NULL;
COMMENT ON FUNCTION kith_remove_follower(bigint, bigint, uuid) IS NULL;
COMMENT ON FUNCTION kith_request_step(bigint, bigint, boolean, uuid, text) IS NULL;
COMMENT ON FUNCTION kith_stats_tombstone() IS NULL;
COMMENT ON FUNCTION kith_transition_edge(bigint, bigint, boolean, uuid) IS NULL;
COMMENT ON FUNCTION kith_update_settings(bigint, boolean, boolean, uuid) IS NULL;
COMMENT ON FUNCTION kith_users_changed() IS NULL;
