-- Back to migration 000024: the projector's functions loop per event and per user.

CREATE OR REPLACE FUNCTION kith_apply_followers(
    p_to BIGINT[], p_from BIGINT[], p_active BOOLEAN[], p_followed_at TIMESTAMPTZ[], p_version BIGINT[]
) RETURNS TABLE (ord INT, was_active BOOLEAN, applied BOOLEAN) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_to, 1), 0) LOOP
        ord := i;
        SELECT r.was_active, r.applied INTO was_active, applied
          FROM kith_apply_follower(p_to[i], p_from[i], p_active[i], p_followed_at[i], p_version[i]) r;
        RETURN NEXT;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION kith_apply_counters(
    p_user BIGINT[], p_followers BIGINT[],
    p_event UUID[], p_author BIGINT[], p_posts BIGINT[], p_likes BIGINT[], p_favs BIGINT[]
) RETURNS TABLE (ord INT, outcome TEXT) LANGUAGE plpgsql AS $$
DECLARE
    created BIGINT[] := '{}';
    u BIGINT;
BEGIN
    FOR u IN SELECT DISTINCT x FROM unnest(p_user || p_author) AS x ORDER BY x LOOP
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM users WHERE id = u);
        PERFORM 1 FROM user_stats WHERE user_id = u FOR UPDATE;
        IF NOT FOUND THEN
            IF kith_ensure_stats(u) THEN
                created := created || u;
            END IF;
            PERFORM 1 FROM user_stats WHERE user_id = u FOR UPDATE;
        END IF;
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(p_user, 1), 0) LOOP
        CONTINUE WHEN p_user[i] = ANY (created) OR p_followers[i] = 0;
        UPDATE user_stats
           SET followers = followers + p_followers[i], version = kith_next_version(version)
         WHERE user_id = p_user[i];
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
                MESSAGE = format('follow event for unknown user %s', p_user[i]);
        END IF;
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(p_event, 1), 0) LOOP
        ord := i;
        INSERT INTO content_event_ledger (event_id, author_id)
        VALUES (p_event[i], p_author[i])
        ON CONFLICT (event_id) DO NOTHING;
        IF NOT FOUND THEN
            outcome := 'duplicate';
        ELSE
            UPDATE user_stats
               SET posts = posts + p_posts[i],
                   likes_received = likes_received + p_likes[i],
                   favs_received = favs_received + p_favs[i],
                   version = kith_next_version(version)
             WHERE user_id = p_author[i]
               AND posts + p_posts[i] >= 0
               AND likes_received + p_likes[i] >= 0
               AND favs_received + p_favs[i] >= 0;
            IF FOUND THEN
                outcome := 'applied';
            ELSE
                DELETE FROM content_event_ledger WHERE event_id = p_event[i];
                outcome := CASE WHEN EXISTS (SELECT 1 FROM user_stats WHERE user_id = p_author[i])
                                THEN 'below_zero' ELSE 'unknown_author' END;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
