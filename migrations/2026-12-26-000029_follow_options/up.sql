-- Per-follow options (Mastodon's notify, reblogs and languages): whether
-- the follower wants to be told of the account's posts, to see its
-- reposts, and in which languages (null: all). They live on the follow's
-- row and count for the follow they were set on: `options_at` is that
-- follow's `followed_at`, so a new follow (an unfollow, then a follow)
-- starts from the defaults and a restore keeps them, with no function
-- that makes follows knowing of options. A follow request carries the
-- options asked with it (`options_at` = its `requested_at`) to the follow
-- its acceptance makes. Each change is a `FollowOptionsChanged` event,
-- `options_version` one more each time.

ALTER TABLE following
    ADD COLUMN notify BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN show_reposts BOOLEAN NOT NULL DEFAULT TRUE,
    ADD COLUMN languages TEXT[],
    ADD COLUMN options_at TIMESTAMPTZ,
    ADD COLUMN options_version BIGINT NOT NULL DEFAULT 0;
-- An imported follow's options, as its file gave them (null: none given).
ALTER TABLE import_row ADD COLUMN options JSONB;
ALTER TABLE follow_request
    ADD COLUMN notify BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN show_reposts BOOLEAN NOT NULL DEFAULT TRUE,
    ADD COLUMN languages TEXT[],
    ADD COLUMN options_at TIMESTAMPTZ;

-- The follows whose options were ever set: what a process reads of a
-- follower's options (most follows have none).
CREATE INDEX following_options_idx ON following (from_user_id) WHERE options_at IS NOT NULL;

-- Every process drops what it holds of the follower when its options
-- change, or when a follow that ever had options changes (a restore
-- brings its options back with its follow time): fires for no row
-- whose options were never set.
CREATE FUNCTION kith_follow_options_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kith_users_' || TG_TABLE_SCHEMA, NEW.from_user_id || ',' || NEW.to_user_id);
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION kith_follow_options_changed() IS
  'Trigger: notifies the processes on this schema''s channel that the follow options of the changed row''s follower changed.';
CREATE TRIGGER following_options_notify
    AFTER UPDATE OF active, followed_at, notify, show_reposts, languages, options_at ON following
    FOR EACH ROW WHEN (NEW.options_at IS NOT NULL) EXECUTE FUNCTION kith_follow_options_changed();

CREATE FUNCTION kith_follow_options_step(p_from BIGINT, p_to BIGINT, p_notify BOOLEAN,
    p_show_reposts BOOLEAN, p_languages TEXT[], p_set_languages BOOLEAN, p_event_id UUID,
    OUT changed BOOLEAN, OUT notify BOOLEAN, OUT show_reposts BOOLEAN, OUT languages TEXT[],
    OUT followed_at TIMESTAMPTZ)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    f following%ROWTYPE;
    v_version BIGINT;
BEGIN
    SELECT * INTO f FROM following x
     WHERE x.from_user_id = p_from AND x.to_user_id = p_to AND x.active
       FOR UPDATE;
    IF NOT FOUND THEN
        changed := NULL;
        RETURN;
    END IF;
    followed_at := f.followed_at;
    IF f.options_at IS DISTINCT FROM f.followed_at THEN
        f.notify := FALSE;
        f.show_reposts := TRUE;
        f.languages := NULL;
    END IF;
    notify := coalesce(p_notify, f.notify);
    show_reposts := coalesce(p_show_reposts, f.show_reposts);
    languages := CASE WHEN p_set_languages THEN p_languages ELSE f.languages END;
    changed := (notify, show_reposts, languages) IS DISTINCT FROM (f.notify, f.show_reposts, f.languages);
    IF NOT changed THEN
        RETURN;
    END IF;
    UPDATE following x
       SET notify = kith_follow_options_step.notify,
           show_reposts = kith_follow_options_step.show_reposts,
           languages = kith_follow_options_step.languages,
           options_at = f.followed_at,
           options_version = x.options_version + 1,
           updated_at = now()
     WHERE x.from_user_id = p_from AND x.to_user_id = p_to
    RETURNING x.options_version INTO v_version;
    -- The wire format of FollowOptionsEvent (src/events/follow_options.rs).
    INSERT INTO outbox (event_id, event_type, partition_key, payload)
    VALUES (p_event_id, 'FollowOptionsChanged', p_from::TEXT, jsonb_build_object(
        'schemaVersion', 1,
        'eventId', p_event_id,
        'type', 'FollowOptionsChanged',
        'from', p_from,
        'to', p_to,
        'version', v_version,
        'followedAtMs', (extract(epoch FROM f.followed_at) * 1000)::BIGINT,
        'notify', notify,
        'showReposts', show_reposts,
        'languages', to_jsonb(languages),
        'occurredAtMs', (extract(epoch FROM date_trunc('milliseconds', now())) * 1000)::BIGINT));
END
$$;
COMMENT ON FUNCTION kith_follow_options_step(BIGINT, BIGINT, BOOLEAN, BOOLEAN, TEXT[], BOOLEAN, UUID) IS
  'Sets the options of the active follow p_from -> p_to (null p_notify or p_show_reposts: as they are; p_languages only when p_set_languages, null: all), with a FollowOptionsChanged event when they change; changed null when there is no active follow. No check and no pair lock: its callers take them.';

CREATE FUNCTION kith_set_follow_options(p_actor BIGINT, p_target BIGINT, p_notify BOOLEAN,
    p_show_reposts BOOLEAN, p_languages TEXT[], p_set_languages BOOLEAN, p_event_id UUID)
RETURNS TABLE (outcome TEXT, changed BOOLEAN, notify BOOLEAN, show_reposts BOOLEAN,
               languages TEXT[], followed_at TIMESTAMPTZ)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    s RECORD;
    q follow_request%ROWTYPE;
BEGIN
    outcome := kith_actor_refusal(p_actor);
    IF outcome IS NOT NULL THEN
        RETURN NEXT;
        RETURN;
    END IF;
    PERFORM kith_lock_pair(p_actor, p_target);
    SELECT * INTO s FROM kith_follow_options_step(p_actor, p_target, p_notify, p_show_reposts,
                                                  p_languages, p_set_languages, p_event_id);
    IF s.changed IS NOT NULL THEN
        outcome := 'ok';
        changed := s.changed;
        notify := s.notify;
        show_reposts := s.show_reposts;
        languages := s.languages;
        followed_at := s.followed_at;
        RETURN NEXT;
        RETURN;
    END IF;
    -- A pending request keeps them for the follow its acceptance makes.
    SELECT * INTO q FROM follow_request x
     WHERE x.from_user_id = p_actor AND x.to_user_id = p_target AND x.active
       FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'not_following';
        RETURN NEXT;
        RETURN;
    END IF;
    IF q.options_at IS DISTINCT FROM q.requested_at THEN
        q.notify := FALSE;
        q.show_reposts := TRUE;
        q.languages := NULL;
    END IF;
    notify := coalesce(p_notify, q.notify);
    show_reposts := coalesce(p_show_reposts, q.show_reposts);
    languages := CASE WHEN p_set_languages THEN p_languages ELSE q.languages END;
    changed := (notify, show_reposts, languages) IS DISTINCT FROM (q.notify, q.show_reposts, q.languages);
    IF changed THEN
        UPDATE follow_request x
           SET notify = kith_set_follow_options.notify,
               show_reposts = kith_set_follow_options.show_reposts,
               languages = kith_set_follow_options.languages,
               options_at = q.requested_at
         WHERE x.from_user_id = p_actor AND x.to_user_id = p_target;
    END IF;
    outcome := 'requested';
    RETURN NEXT;
END
$$;
COMMENT ON FUNCTION kith_set_follow_options(BIGINT, BIGINT, BOOLEAN, BOOLEAN, TEXT[], BOOLEAN, UUID) IS
  'Sets p_actor''s options for its follow of p_target under the pair''s lock (outcome ok), or for its pending request (requested: they apply to the follow its acceptance makes), or answers not_following; changed, and the options after the call.';

CREATE FUNCTION kith_carry_request_options(p_from BIGINT, p_to BIGINT) RETURNS VOID
LANGUAGE plpgsql AS $$
DECLARE
    q follow_request%ROWTYPE;
BEGIN
    SELECT * INTO q FROM follow_request x WHERE x.from_user_id = p_from AND x.to_user_id = p_to;
    IF FOUND AND q.options_at = q.requested_at THEN
        PERFORM kith_follow_options_step(p_from, p_to, q.notify, q.show_reposts, q.languages,
                                         TRUE, gen_random_uuid());
    END IF;
END
$$;
COMMENT ON FUNCTION kith_carry_request_options(BIGINT, BIGINT) IS
  'Gives the follow p_from -> p_to that an accepted request just made the options asked with the request, with their event when they are not the defaults.';

-- An accepted request's follow gets the options asked with the request.
CREATE OR REPLACE FUNCTION kith_answer_request(p_owner bigint, p_requester bigint, p_accept boolean, p_event_id uuid, p_follow_event_id uuid, p_max_followings bigint, p_followings_ratio double precision) RETURNS SETOF kith_edge_result
    LANGUAGE plpgsql
    AS $$
DECLARE
    r kith_edge_result;
    v_requester users%ROWTYPE;
    v_req RECORD;
    v_t kith_edge_result;
    v_stats user_stats%ROWTYPE;
BEGIN
    r.outcome := kith_actor_refusal(p_owner);
    IF r.outcome IS NOT NULL THEN
        RETURN NEXT r;
        RETURN;
    END IF;
    SELECT * INTO v_requester FROM users u WHERE u.id = p_requester;
    IF NOT FOUND THEN
        r.outcome := 'target_unknown';
        RETURN NEXT r;
        RETURN;
    END IF;
    r := kith_edge_target(r, v_requester);
    PERFORM kith_lock_pair(p_owner, p_requester);
    IF p_accept AND EXISTS (SELECT 1 FROM follow_request q
                             WHERE q.from_user_id = p_requester AND q.to_user_id = p_owner AND q.active) THEN
        IF v_requester.status <> 'active' THEN
            r.outcome := 'target_unfollowable';
        ELSIF kith_blocked(p_owner, p_requester) THEN
            r.outcome := 'blocked';
        ELSIF NOT EXISTS (SELECT 1 FROM following f WHERE f.from_user_id = p_requester
                                AND f.to_user_id = p_owner AND f.active) THEN
            -- The follow it would make, held to the requester's follow cap
            -- as any follow is (counted as the follow would count it).
            SELECT * INTO v_stats FROM user_stats s WHERE s.user_id = p_requester;
            IF kith_past_follow_cap(v_stats.followings + 1, v_stats.followers,
                                    p_max_followings, p_followings_ratio) THEN
                r.outcome := 'follow_limit';
            END IF;
        END IF;
        IF r.outcome IS NOT NULL THEN
            RETURN NEXT r;
            RETURN;
        END IF;
    END IF;
    v_req := kith_request_step(p_requester, p_owner, FALSE, p_event_id,
        CASE WHEN p_accept THEN 'FollowRequestAccepted' ELSE 'FollowRequestRejected' END);
    r.outcome := CASE WHEN v_req.version IS NULL THEN 'ok' ELSE 'answered' END;
    IF v_req.version IS NOT NULL AND p_accept THEN
        v_t := kith_transition_edge(p_requester, p_owner, TRUE, p_follow_event_id);
        IF v_t.edge_version IS NOT NULL THEN
            PERFORM kith_carry_request_options(p_requester, p_owner);
        END IF;
        v_t.outcome := r.outcome;
        r := kith_edge_target(v_t, v_requester);
    END IF;
    SELECT * INTO r.a_follows_b, r.b_follows_a FROM kith_pair_state(p_owner, p_requester);
    RETURN NEXT r;
END
$$;

