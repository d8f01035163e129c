//! The viewer's lists as an export reads them: batches of `(id, handle)` in
//! member-id order after the last id sent, straight from the truth, with
//! accounts that are not active set aside (as the viewer's own lists do).

use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use diesel_async::RunQueryDsl;

use super::PgConn;
use crate::model::UserId;

/// Which list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExportList {
    /// Whom the owner follows.
    Following,
    /// Who follows the owner.
    Followers,
    /// Whom the owner blocks.
    Blocks,
    /// Whom the owner mutes (mutes past their end left out).
    Mutes,
}

/// One member of an exported list.
#[derive(diesel::QueryableByName, Debug)]
pub(crate) struct Member {
    /// The member's id (the batch's key).
    #[diesel(sql_type = BigInt)]
    pub id: i64,
    /// The member's handle.
    #[diesel(sql_type = Text)]
    pub handle: String,
    /// On `following`: the follow's options (the defaults on other lists).
    #[diesel(sql_type = Bool)]
    pub show_reposts: bool,
    /// See `show_reposts`.
    #[diesel(sql_type = Bool)]
    pub notify: bool,
    /// See `show_reposts`; `None`: every language.
    #[diesel(sql_type = Nullable<diesel::sql_types::Array<Text>>)]
    pub languages: Option<Vec<String>>,
}

/// Up to `limit` members of `owner`'s `list` with ids above `after`, by id.
/// Each list is read along its primary key or the incoming index, so a
/// batch costs the same at any depth: `u.id > $2` repeats the bound on the
/// users side, without which a merge join reads `users` from its first id
/// at every batch (a million-row export took 155 s, not 3.3).
pub(crate) async fn batch(
    conn: &mut PgConn,
    list: ExportList,
    owner: UserId,
    after: i64,
    limit: i64,
) -> diesel::QueryResult<Vec<Member>> {
    // A follow's options count for the follow they were set on; only the
    // follower's own list shows them.
    const OPTIONS: &str = "CASE WHEN r.options_at = r.followed_at THEN r.show_reposts ELSE TRUE END
                    AS show_reposts,
                CASE WHEN r.options_at = r.followed_at THEN r.notify ELSE FALSE END AS notify,
                CASE WHEN r.options_at = r.followed_at THEN r.languages END AS languages";
    const DEFAULTS: &str = "TRUE AS show_reposts, FALSE AS notify, NULL::TEXT[] AS languages";
    let (table, owner_col, member_col, live, options) = match list {
        ExportList::Following => ("following", "from_user_id", "to_user_id", "", OPTIONS),
        ExportList::Followers => ("following", "to_user_id", "from_user_id", "", DEFAULTS),
        ExportList::Blocks => ("block", "from_user_id", "to_user_id", "", DEFAULTS),
        ExportList::Mutes => (
            "mute",
            "from_user_id",
            "to_user_id",
            " AND (r.expires_at IS NULL OR r.expires_at > now())",
            DEFAULTS,
        ),
    };
    diesel::sql_query(format!(
        "SELECT r.{member_col} AS id, u.handle, {options}
           FROM {table} r JOIN users u ON u.id = r.{member_col} AND u.status = 'active'
                                      AND u.id > $2
          WHERE r.{owner_col} = $1 AND r.{member_col} > $2 AND r.active{live}
          ORDER BY r.{member_col}
          LIMIT $3"
    ))
    .bind::<BigInt, _>(owner.get())
    .bind::<BigInt, _>(after)
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}
