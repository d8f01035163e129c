//! Per-follow options (Mastodon's `notify`, `reblogs`, `languages`):
//! `updateFollow` sets them on a follow, or on a pending request for the
//! follow its acceptance makes; a `follow` that names them makes the follow
//! and sets them in one transaction, outside the group commit, so that a
//! follow is never acknowledged, nor committed, without the options asked
//! with it.

use crate::app::App;
use crate::error::ApiError;
use crate::model::{FollowOptions, UserId};
use crate::store::failure;
use crate::store::follow_options::{self, OptionsChange};
use crate::store::following::{self, EdgeItem, FollowCap};

use super::follow::{Edge, EdgeChange, FollowOutcome, Refusal, after_change, outcome};

/// Most languages one follow may name.
pub(crate) const MAX_LANGUAGES: usize = 16;

/// Refuses languages that are no ISO 639 code (two or three lowercase
/// letters), more than [`MAX_LANGUAGES`] of them, repeats, or an empty
/// list (which would show nothing: null means every language).
pub(crate) fn check(change: &OptionsChange) -> Result<(), ApiError> {
    let Some(Some(languages)) = &change.languages else {
        return Ok(());
    };
    if languages.is_empty() {
        return Err(ApiError::invalid(
            "`languages` is empty: name at least one, or null for every language",
        ));
    }
    if languages.len() > MAX_LANGUAGES {
        return Err(ApiError::invalid(format!(
            "`languages` names at most {MAX_LANGUAGES} languages"
        )));
    }
    for (i, code) in languages.iter().enumerate() {
        if !(2..=3).contains(&code.len()) || !code.bytes().all(|b| b.is_ascii_lowercase()) {
            return Err(ApiError::invalid(format!(
                "`languages`: {code:?} is no ISO 639 code (two or three lowercase letters)"
            )));
        }
        if languages[..i].contains(code) {
            return Err(ApiError::invalid(format!(
                "`languages` names {code:?} twice"
            )));
        }
    }
    Ok(())
}

/// What `updateFollow` did.
#[derive(Clone, Debug)]
pub(crate) struct OptionsOutcome {
    /// False when the options were as asked already.
    pub changed: bool,
    /// The options are a pending request's (they apply once it is accepted).
    pub requested: bool,
    /// The options after the call.
    pub options: FollowOptions,
}

/// Sets `actor`'s options for its follow of `target` (or its pending
/// request): validates, takes a rate-limit token, then one statement.
/// `NOT_FOUND` when `actor` neither follows `target` nor asked to.
pub(crate) async fn update_follow(
    app: &App,
    actor: UserId,
    target: UserId,
    change: &OptionsChange,
) -> Result<OptionsOutcome, ApiError> {
    if actor == target {
        return Err(ApiError::invalid("a user does not follow themselves"));
    }
    check(change)?;
    super::take_tokens(app, actor, 1).await?;
    let event_id = uuid::Uuid::new_v4();
    let row = {
        let mut conn = app.pg.get().await?;
        failure::rerun!({ follow_options::set(&mut conn, actor, target, change, event_id).await })?
    };
    let requested = match row.outcome.as_str() {
        "ok" => false,
        "requested" => true,
        "not_following" => return Err(ApiError::NotFound("follow")),
        other => return Err(Refusal::of(other).into()),
    };
    let changed = row.changed == Some(true);
    if changed {
        app.read.forget_users(&[actor, target]);
        if !requested {
            super::after_commit(app, &[], &[]).await;
        }
    }
    Ok(OptionsOutcome {
        changed,
        requested,
        options: row.options(),
    })
}

/// Makes `actor` follow `target` with the options of `change` (a request,
/// with them, when `target` is locked), in one transaction; a follow that
/// stands already gets the options. `changed` when the edge, the request or
/// the options changed.
pub(crate) async fn follow_with(
    app: &App,
    actor: UserId,
    target: UserId,
    change: &OptionsChange,
) -> Result<FollowOutcome, ApiError> {
    use diesel_async::AsyncConnection as _;

    if actor == target {
        return Err(ApiError::invalid(
            "a user cannot follow or unfollow themselves",
        ));
    }
    check(change)?;
    super::take_tokens(app, actor, 1).await?;
    let item = EdgeItem {
        actor,
        target,
        follow: true,
        event_id: uuid::Uuid::new_v4(),
    };
    let cap = FollowCap::of(&app.config);
    let options_event = uuid::Uuid::new_v4();
    let (row, options) = {
        let mut conn = app.pg.get().await?;
        failure::rerun!({
            conn.transaction::<_, diesel::result::Error, _>(async |conn| {
                let row = following::change_set(conn, std::slice::from_ref(&item), cap)
                    .await?
                    .pop()
                    .ok_or(diesel::result::Error::NotFound)?;
                if Refusal::check(&row.outcome).is_err() {
                    return Ok((row, None));
                }
                let options =
                    follow_options::set(conn, actor, target, change, options_event).await?;
                Ok((row, Some(options)))
            })
            .await
        })?
    };
    let edge = Edge {
        from: actor,
        to: target,
        change: EdgeChange::Follow,
        event_id: item.event_id,
    };
    let mut outcome = outcome(row, edge, target)?;
    let options_changed = options.is_some_and(|o| o.changed == Some(true));
    after_change(app, &outcome, actor, target).await;
    if options_changed {
        app.read.forget_users(&[actor, target]);
        if !outcome.changed {
            // Only the options' event waits in the outbox: wake the relays
            // (a changed edge or request woke them already).
            super::after_commit(app, &[], &[]).await;
        }
        outcome.changed = true;
    }
    Ok(outcome)
}
