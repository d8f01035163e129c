//! Diesel table definitions, kept in step with `migrations/` by hand.

diesel::table! {
    users (id) {
        id -> Int8,
        handle -> Text,
        display_name -> Text,
        status -> Text,
        created_at -> Timestamptz,
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

diesel::joinable!(user_stats -> users (user_id));

diesel::allow_tables_to_appear_in_same_query!(users, following, follower, outbox, user_stats);

diesel::table! {
    hidden_edge (account_id, from_user_id, to_user_id) {
        account_id -> Int8,
        from_user_id -> Int8,
        to_user_id -> Int8,
        followed_at -> Timestamptz,
    }
}
