//! The repair of a finished move's stranded followers, for `kith
//! reconcile`: followers still following the moved account, though the
//! move left none behind for a reason on record.

use crate::app::App;
use crate::error::ApiError;
use crate::model::UserId;
use crate::store::moves;

use super::moves::{Brought, Halt, after_batch, bring};

impl Brought {
    /// Each follower the batch brought (`brought along`) or left behind
    /// (with its code), in follower order.
    fn handled(&self) -> Vec<(UserId, &'static str)> {
        let mut handled: Vec<_> = self
            .brought
            .iter()
            .map(|&follower| (follower, "brought along"))
            .chain(
                self.failures
                    .iter()
                    .filter_map(|&(id, code)| Some((UserId::new(id)?, code))),
            )
            .collect();
        handled.sort_by_key(|(follower, _)| *follower);
        handled
    }
}

/// Brings along the followers a finished move of their account left
/// where no move leaves anyone: following the moved account, though not
/// among those the move left behind (a follower suspended during the move
/// and restored after it, whose restore brought its follow back; or a
/// fault). For `kith reconcile`: each pair brought along (or now left
/// behind, with its code), `(follower, old account, outcome)`.
pub(crate) async fn bring_stranded(
    app: &App,
    user: Option<UserId>,
    limit: i64,
) -> Result<Vec<(UserId, UserId, &'static str)>, ApiError> {
    use diesel_async::AsyncConnection as _;

    let stranded = {
        let mut conn = app.pg.get().await?;
        moves::stranded(&mut conn, user.map(UserId::get), limit).await?
    };
    let mut out = Vec::new();
    for group in stranded.chunk_by(|a, b| a.move_id == b.move_id) {
        let (Some(from), Some(to)) = (UserId::new(group[0].from_id), UserId::new(group[0].to_id))
        else {
            continue;
        };
        let followers: Vec<moves::Follower> = group.iter().map(|s| s.follower.clone()).collect();
        let mut conn = app.pg.get().await?;
        let brought = conn
            .transaction::<_, ApiError, _>(async |conn| {
                match bring(app, conn, (from, to), &followers).await? {
                    Ok(brought) => {
                        // Each was left behind once at most: the row (if
                        // any) of each the batch handled goes, and is
                        // written again if it is left behind again, counted
                        // once. One the batch did not handle (it no longer
                        // followed the old account) keeps its record.
                        let id = group[0].move_id;
                        let handled = brought.handled();
                        let ids: Vec<i64> = handled.iter().map(|(f, _)| f.get()).collect();
                        moves::forget_left_behind(conn, id, &ids).await?;
                        moves::advance(conn, id, brought.progress, &brought.failures).await?;
                        Ok(Some((brought.follows, handled)))
                    }
                    Err(Halt::Stopped(_) | Halt::Paused) => Ok(None),
                }
            })
            .await?;
        drop(conn);
        let Some((follows, handled)) = brought else {
            continue;
        };
        after_batch(app, &follows).await;
        // A follower that stopped following the old account meanwhile was
        // not stranded any more: nothing was done for it, so nothing is
        // reported.
        out.extend(
            handled
                .into_iter()
                .map(|(follower, outcome)| (follower, from, outcome)),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handled_are_those_brought_and_those_left_behind_in_follower_order() {
        let user = |n| UserId::new(n).unwrap();
        let brought = Brought {
            brought: vec![user(5), user(2)],
            failures: vec![(4, "BLOCKED"), (1, "FOLLOW_LIMIT")],
            ..Brought::default()
        };
        assert_eq!(
            brought.handled(),
            vec![
                (user(1), "FOLLOW_LIMIT"),
                (user(2), "brought along"),
                (user(4), "BLOCKED"),
                (user(5), "brought along"),
            ]
        );
    }
}
