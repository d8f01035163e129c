//! The options of follows (`following.notify`, `show_reposts`,
//! `languages`), which count for the follow they were set on
//! (`options_at` = its `followed_at`). `kith_set_follow_options` writes
//! them and their event in one statement.

use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Bool, Nullable, Text};
use diesel_async::RunQueryDsl;

use super::PgConn;
use crate::model::{FollowOptions, UserId};

/// A change of a follow's options: `None` leaves an option as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct OptionsChange {
    /// Be told when the account posts.
    pub notify: Option<bool>,
    /// See the account's reposts.
    pub show_reposts: Option<bool>,
    /// Only posts in these languages (`Some(None)`: all).
    pub languages: Option<Option<Vec<String>>>,
}

impl From<&FollowOptions> for OptionsChange {
    /// A change to exactly `options`.
    fn from(options: &FollowOptions) -> Self {
        Self {
            notify: Some(options.notify),
            show_reposts: Some(options.show_reposts),
            languages: Some(options.languages.clone()),
        }
    }
}

impl OptionsChange {
    /// Whether it changes nothing.
    pub(crate) fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What `kith_set_follow_options` answers.
#[derive(Debug, QueryableByName)]
pub(crate) struct OptionsRow {
    /// `ok` (the follow's), `requested` (a pending request's),
    /// `not_following`, or the actor's refusal.
    #[diesel(sql_type = Text)]
    pub outcome: String,
    /// Whether the options changed.
    #[diesel(sql_type = Nullable<Bool>)]
    pub changed: Option<bool>,
    #[diesel(sql_type = Nullable<Bool>)]
    notify: Option<bool>,
    #[diesel(sql_type = Nullable<Bool>)]
    show_reposts: Option<bool>,
    #[diesel(sql_type = Nullable<Array<Text>>)]
    languages: Option<Vec<String>>,
}

impl OptionsRow {
    /// The options after the call.
    pub(crate) fn options(&self) -> FollowOptions {
        let defaults = FollowOptions::default();
        FollowOptions {
            notify: self.notify.unwrap_or(defaults.notify),
            show_reposts: self.show_reposts.unwrap_or(defaults.show_reposts),
            languages: self.languages.clone(),
        }
    }
}

/// Applies `change` to `actor`'s follow of `target` (or to its pending
/// request), under the pair's lock, in one statement; the event, if any,
/// gets `event_id`.
pub(crate) async fn set(
    conn: &mut PgConn,
    actor: UserId,
    target: UserId,
    change: &OptionsChange,
    event_id: uuid::Uuid,
) -> diesel::QueryResult<OptionsRow> {
    let rows: Vec<OptionsRow> =
        diesel::sql_query("SELECT * FROM kith_set_follow_options($1, $2, $3, $4, $5, $6, $7)")
            .bind::<BigInt, _>(actor.get())
            .bind::<BigInt, _>(target.get())
            .bind::<Nullable<Bool>, _>(change.notify)
            .bind::<Nullable<Bool>, _>(change.show_reposts)
            .bind::<Nullable<Array<Text>>, _>(change.languages.clone().flatten())
            .bind::<Bool, _>(change.languages.is_some())
            .bind::<diesel::sql_types::Uuid, _>(event_id)
            .load(conn)
            .await?;
    super::committed(rows).ok_or(diesel::result::Error::NotFound)
}

/// One follow's options that are not the defaults.
#[derive(Debug, QueryableByName)]
pub(crate) struct HeldRow {
    /// The follower.
    #[diesel(sql_type = BigInt)]
    pub from_user_id: i64,
    /// The account followed.
    #[diesel(sql_type = BigInt)]
    pub to_user_id: i64,
    #[diesel(sql_type = Bool)]
    notify: bool,
    #[diesel(sql_type = Bool)]
    show_reposts: bool,
    #[diesel(sql_type = Nullable<Array<Text>>)]
    languages: Option<Vec<String>>,
    /// The follow they were set on (ms).
    #[diesel(sql_type = BigInt)]
    pub followed_at_ms: i64,
}

impl HeldRow {
    /// The options.
    pub(crate) fn options(&self) -> FollowOptions {
        FollowOptions {
            notify: self.notify,
            show_reposts: self.show_reposts,
            languages: self.languages.clone(),
        }
    }
}

/// The options of the active follows of any of `users` that are not the
/// defaults, in one statement (an index holds only follows whose options
/// were ever set).
pub(crate) async fn set_by(
    conn: &mut PgConn,
    users: &[UserId],
) -> diesel::QueryResult<Vec<HeldRow>> {
    if users.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = users.iter().map(|u| u.get()).collect();
    diesel::sql_query(
        "SELECT from_user_id, to_user_id, notify, show_reposts, languages,
                (extract(epoch FROM followed_at) * 1000)::BIGINT AS followed_at_ms
           FROM following
          WHERE from_user_id = ANY($1) AND options_at IS NOT NULL AND active
            AND options_at = followed_at
            AND (notify OR NOT show_reposts OR languages IS NOT NULL)",
    )
    .bind::<Array<BigInt>, _>(ids)
    .load(conn)
    .await
}
