CREATE FUNCTION kith_add_stats(
    p_user BIGINT[], p_followers BIGINT[], p_posts BIGINT[], p_likes BIGINT[], p_favs BIGINT[]
) RETURNS SETOF user_stats LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO user_stats (user_id) SELECT unnest(p_user) ON CONFLICT DO NOTHING;
    FOR i IN 1 .. coalesce(array_length(p_user, 1), 0) LOOP
        RETURN QUERY
        UPDATE user_stats
           SET followers = followers + p_followers[i],
               posts = posts + p_posts[i],
               likes_received = likes_received + p_likes[i],
               favs_received = favs_received + p_favs[i],
               version = version + 1
         WHERE user_id = p_user[i]
        RETURNING *;
    END LOOP;
END
$$;
DROP FUNCTION kith_apply_counters(BIGINT[], BIGINT[], UUID[], BIGINT[], BIGINT[], BIGINT[], BIGINT[]);
DROP FUNCTION kith_ensure_stats(BIGINT);
DROP TRIGGER user_stats_deleted ON user_stats;
DROP FUNCTION kith_stats_tombstone();
DROP TABLE user_stats_tombstone;
ALTER TABLE user_stats ALTER COLUMN version SET DEFAULT 0;
DROP FUNCTION kith_next_version(BIGINT);
DROP INDEX content_event_ledger_applied_idx;
DROP TABLE reconcile_watermark;
DROP INDEX users_inactive_idx;
DROP TABLE account_transition;
DROP TABLE hidden_edge;
DROP INDEX following_updated_idx;
DROP INDEX following_incoming_idx;
DROP TABLE dead_letter;
DROP TABLE projector_member;
DROP TABLE projector_partition;
