// @generated automatically by Diesel CLI.

diesel::table! {
    account_alias (user_id, alias_id) {
        user_id -> Int8,
        alias_id -> Int8,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    account_move (id) {
        id -> Int8,
        from_id -> Int8,
        to_id -> Int8,
        state -> Text,
        total -> Int4,
        moved -> Int4,
        requested -> Int4,
        skipped -> Int4,
        failed -> Int4,
        after_id -> Int8,
        due_at -> Timestamptz,
        lease_token -> Nullable<Uuid>,
        lease_until -> Nullable<Timestamptz>,
        failure -> Nullable<Text>,
        created_at -> Timestamptz,
        finished_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    account_move_row (move_id, follower_id) {
        move_id -> Int8,
        follower_id -> Int8,
        outcome -> Text,
    }
}

diesel::table! {
    account_move_walk (move_id) {
        move_id -> Int8,
        first_batch_at -> Timestamptz,
    }
}

diesel::table! {
    account_transition (account_id) {
        account_id -> Int8,
        status -> Text,
        started_at -> Timestamptz,
    }
}

diesel::table! {
    block (from_user_id, to_user_id) {
        from_user_id -> Int8,
        to_user_id -> Int8,
        active -> Bool,
        blocked_at -> Timestamptz,
        version -> Int8,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    close_friend (from_user_id, to_user_id) {
        from_user_id -> Int8,
        to_user_id -> Int8,
        active -> Bool,
        added_at -> Timestamptz,
        version -> Int8,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    content_event_ledger (event_id) {
        event_id -> Uuid,
        author_id -> Int8,
        applied_at -> Timestamptz,
    }
}

diesel::table! {
    dead_letter (id) {
        id -> Int8,
        source_topic -> Text,
        source_partition -> Int4,
        source_offset -> Int8,
        message_key -> Nullable<Bytea>,
        payload -> Nullable<Bytea>,
        error -> Text,
        created_at -> Timestamptz,
        published_at -> Nullable<Timestamptz>,
        replayed_at -> Nullable<Timestamptz>,
        origin -> Nullable<Uuid>,
    }
}

diesel::table! {
    event_origin (singleton) {
        singleton -> Bool,
        origin -> Uuid,
        identity -> Text,
        made_at -> Timestamptz,
        retired -> Array<Nullable<Uuid>>,
    }
}

diesel::table! {
    follow_request (from_user_id, to_user_id) {
        from_user_id -> Int8,
        to_user_id -> Int8,
        active -> Bool,
        requested_at -> Timestamptz,
        version -> Int8,
        updated_at -> Timestamptz,
        notify -> Bool,
        show_reposts -> Bool,
        languages -> Nullable<Array<Nullable<Text>>>,
        options_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    follower (to_user_id, from_user_id) {
        to_user_id -> Int8,
        from_user_id -> Int8,
        active -> Bool,
        followed_at -> Timestamptz,
        version -> Int8,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    following (from_user_id, to_user_id) {
        from_user_id -> Int8,
        to_user_id -> Int8,
        active -> Bool,
        followed_at -> Timestamptz,
        version -> Int8,
        updated_at -> Timestamptz,
        notify -> Bool,
        show_reposts -> Bool,
        languages -> Nullable<Array<Nullable<Text>>>,
        options_at -> Nullable<Timestamptz>,
        options_version -> Int8,
    }
}

diesel::table! {
    hidden_edge (account_id, from_user_id, to_user_id) {
        account_id -> Int8,
        from_user_id -> Int8,
        to_user_id -> Int8,
        followed_at -> Timestamptz,
    }
}

diesel::table! {
    import_follow_budget (owner_id) {
        owner_id -> Int8,
        window_start -> Timestamptz,
        follows -> Int4,
    }
}

diesel::table! {
    import_job (id) {
        id -> Int8,
        owner_id -> Int8,
        kind -> Text,
        mode -> Text,
        state -> Text,
        total -> Int4,
        applied -> Int4,
        skipped -> Int4,
        failed -> Int4,
        removed -> Int4,
        removal_after -> Nullable<Int8>,
        lease_token -> Nullable<Uuid>,
        lease_until -> Nullable<Timestamptz>,
        failure -> Nullable<Text>,
        created_at -> Timestamptz,
        finished_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    import_row (job_id, ordinal) {
        job_id -> Int8,
        ordinal -> Int4,
        line -> Int4,
        address -> Text,
        target_id -> Nullable<Int8>,
        outcome -> Nullable<Text>,
        options -> Nullable<Jsonb>,
    }
}

diesel::table! {
    import_turn (job_id) {
        job_id -> Int8,
        due_at -> Timestamptz,
    }
}

diesel::table! {
    mute (from_user_id, to_user_id) {
        from_user_id -> Int8,
        to_user_id -> Int8,
        active -> Bool,
        muted_at -> Timestamptz,
        expires_at -> Nullable<Timestamptz>,
        version -> Int8,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    outbox (id) {
        id -> Int8,
        event_id -> Uuid,
        event_type -> Text,
        partition_key -> Text,
        payload -> Jsonb,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    projector_member (consumer_group, member) {
        consumer_group -> Text,
        member -> Uuid,
        heartbeat_at -> Timestamptz,
    }
}

diesel::table! {
    projector_partition (consumer_group, topic, partition) {
        consumer_group -> Text,
        topic -> Text,
        partition -> Int4,
        next_offset -> Nullable<Int8>,
        synced_offset -> Nullable<Int8>,
        owner -> Nullable<Uuid>,
        lease_until -> Nullable<Timestamptz>,
        epoch -> Int8,
    }
}

diesel::table! {
    reconcile_watermark (name) {
        name -> Text,
        watermark -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    suggestion_dismissal (user_id, target_id) {
        user_id -> Int8,
        target_id -> Int8,
        until -> Timestamptz,
    }
}

diesel::table! {
    user_stats (user_id) {
        user_id -> Int8,
        followings -> Int8,
        followers -> Int8,
        posts -> Int8,
        likes_received -> Int8,
        favs_received -> Int8,
        version -> Int8,
    }
}

diesel::table! {
    user_stats_tombstone (user_id) {
        user_id -> Int8,
        version -> Int8,
    }
}

diesel::table! {
    users (id) {
        id -> Int8,
        handle -> Text,
        display_name -> Text,
        status -> Text,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        locked -> Bool,
        hides_collections -> Bool,
        settings_version -> Int8,
        moved_to -> Nullable<Int8>,
        moved_at -> Nullable<Timestamptz>,
    }
}

diesel::joinable!(account_move_row -> account_move (move_id));

diesel::joinable!(account_move_walk -> account_move (move_id));

diesel::joinable!(import_follow_budget -> users (owner_id));

diesel::joinable!(import_job -> users (owner_id));

diesel::joinable!(import_row -> import_job (job_id));

diesel::joinable!(import_turn -> import_job (job_id));

diesel::joinable!(user_stats -> users (user_id));

diesel::allow_tables_to_appear_in_same_query!(
    account_alias,
    account_move,
    account_move_row,
    account_move_walk,
    account_transition,
    block,
    close_friend,
    content_event_ledger,
    dead_letter,
    event_origin,
    follow_request,
    follower,
    following,
    hidden_edge,
    import_follow_budget,
    import_job,
    import_row,
    import_turn,
    mute,
    outbox,
    projector_member,
    projector_partition,
    reconcile_watermark,
    suggestion_dismissal,
    user_stats,
    user_stats_tombstone,
    users,
);
