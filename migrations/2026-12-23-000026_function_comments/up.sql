-- What each function is for, where PostgreSQL keeps it (`\df+`, `COMMENT`):
-- one place to read it, whatever migration last changed the body. A
-- function changed later keeps its comment (`CREATE OR REPLACE` does not
-- drop it); a new function gets one in its own migration.

COMMENT ON FUNCTION kith_accept_requests(bigint, integer, bigint, double precision) IS
  'Accepts the oldest p_limit pending follow requests of an account that unlocked, each as a follow with its events and counters, answered in requester order after taking every pair''s lock in the group commit''s order. A request that can never become a follow (a block, an inactive account, the requester''s follow cap) is dropped.';
COMMENT ON FUNCTION kith_actor_refusal(bigint) IS
  'Why p_actor may not change edges now (actor_unknown, actor_suspended), or NULL when it may.';
COMMENT ON FUNCTION kith_answer_request(bigint, bigint, boolean, uuid, uuid, bigint, double precision) IS
  'The owner accepts (a follow, with its event and counters, within the requester''s follow cap) or rejects one pending follow request; returns a kith_edge_result row.';
COMMENT ON FUNCTION kith_apply_counters(bigint[], bigint[], uuid[], bigint[], bigint[], bigint[], bigint[]) IS
  'The projector''s counter writes for one batch: follower deltas of user_stats in one update (rows locked in id order), then content events each claimed once in content_event_ledger; one row per content event: applied, duplicate, below_zero or unknown_author.';
COMMENT ON FUNCTION kith_apply_follower(bigint, bigint, boolean, timestamp with time zone, bigint) IS
  'Applies one follow event to the follower projection when its version is newer than the row''s, and says what the row held before. The projector and reconcile apply events with kith_apply_followers; this one stays for tests and for processes of an earlier release.';
COMMENT ON FUNCTION kith_apply_followers(bigint[], bigint[], boolean[], timestamp with time zone[], bigint[]) IS
  'The projector''s follower writes for one batch: locks the batch''s follower rows in one statement, upserts each edge''s newest event over an older row (the per-edge version guard), one row per event in the order given.';
COMMENT ON FUNCTION kith_block(bigint, bigint, boolean, uuid, uuid[], bigint) IS
  'Blocks p_target as p_actor (the block row and its event; the follows between the pair end both ways as unfollows, with their events and counters, and pending follow requests both ways are dropped; refused past p_max_blocks blocks), or unblocks it (the block row and its event).';
COMMENT ON FUNCTION kith_blocked(bigint, bigint) IS
  'Whether either of the two accounts blocks the other.';
COMMENT ON FUNCTION kith_blocks_changed() IS
  'Trigger: notifies the processes on this schema''s channel that the blocks of the changed accounts changed.';
COMMENT ON FUNCTION kith_change_edge(bigint, bigint, boolean, uuid, bigint, double precision) IS
  'One follow or unfollow with its event and counters. Kept for processes of an earlier release during a rolling deploy; this release calls kith_change_edges over arrays.';
COMMENT ON FUNCTION kith_change_edges(bigint, bigint[], uuid[], boolean, bigint, double precision) IS
  'One actor''s follows or unfollows of many targets. Kept for processes of an earlier release during a rolling deploy; this release calls kith_change_edges over arrays of actors.';
COMMENT ON FUNCTION kith_change_edges(bigint[], bigint[], boolean[], uuid[], bigint, double precision) IS
  'The group commit: many actors'' follows and unfollows in a constant number of set-based statements, locks taken in one order (pairs, hidden edges, edges, counters). Per-item outcomes, never raised: actor_unknown, actor_suspended, target_unknown, target_unfollowable, blocked, follow_limit, a request for a locked account.';
COMMENT ON FUNCTION kith_count_followings(bigint, bigint) IS
  'Adds p_delta to the user''s followings (a new version) and returns the row; a missing row is counted from the truth.';
COMMENT ON FUNCTION kith_database_identity() IS
  'Where this database lives now: its system identifier and the oid of event_origin, compared with the recorded origin to refuse a restored or copied database.';
COMMENT ON FUNCTION kith_edge_step(bigint, bigint, boolean, uuid) IS
  'The edge row and outbox event of one follow or unfollow, if it changes anything; counters are the caller''s.';
COMMENT ON FUNCTION kith_ensure_stats(bigint) IS
  'Creates the user_stats row of p_user from the truth and the projection when it is missing; true when it did.';
COMMENT ON FUNCTION kith_lock_pair(bigint, bigint) IS
  'Takes the transaction-scoped lock of the pair {a, b}, whatever their order.';
COMMENT ON FUNCTION kith_mute(bigint, bigint, boolean, bigint, uuid) IS
  'Mutes (for p_expires_in_secs, or for good) or unmutes p_target as p_actor, with its event.';
COMMENT ON FUNCTION kith_next_version(bigint) IS
  'The next version of a user_stats row: microseconds of the clock, always above the previous one.';
COMMENT ON FUNCTION kith_pair_state(bigint, bigint) IS
  'Since when each of the two accounts follows the other (NULL: it does not).';
COMMENT ON FUNCTION kith_past_follow_cap(user_stats, bigint, double precision) IS
  'Whether counters counted after a follow are past the follow cap (p_max 0: no cap); inlined into its callers. The group commit''s kith_change_edges applies the same rule set-wise: change both together.';
COMMENT ON FUNCTION kith_remove_follower(bigint, bigint, uuid) IS
  'The owner makes p_follower stop following it: the follower''s unfollow with its event and counters.';
COMMENT ON FUNCTION kith_request_step(bigint, bigint, boolean, uuid, text) IS
  'Makes or ends one follow request, with its event of type p_type, if it changes anything.';
COMMENT ON FUNCTION kith_stats_tombstone() IS
  'Trigger: keeps the version of a deleted user_stats row, so a row created again starts above it.';
COMMENT ON FUNCTION kith_transition_edge(bigint, bigint, boolean, uuid) IS
  'One edge transition with its counters and the pair''s state after it, for writes whose checks are their own: kith_answer_request, kith_block, kith_remove_follower, and reconcile ending a follow across a block.';
COMMENT ON FUNCTION kith_update_settings(bigint, boolean, boolean, uuid) IS
  'Sets locked and hides_collections (NULL: as they are) of an active account, with its event; no row for an unknown or inactive one.';
COMMENT ON FUNCTION kith_users_changed() IS
  'Trigger: notifies the processes on this schema''s channel of changed user rows (ids, or * for more than one notice can name).';
