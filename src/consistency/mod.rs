//! The consistency tools: derived views may lag, but they are checked and
//! can always be rebuilt from the truth.
//!
//! - [`verify`]: compares every derived view with its source (read-only).
//! - [`reconcile`]: repairs the `follower` projection and `user_stats` from
//!   the truth, without racing the projector; also scheduled in `kith run`.
//! - [`rebuild`]: rebuilds the Redis caches from PostgreSQL.
//! - [`restore`]: after a restore to an earlier point (or a copy), the
//!   event origin, the projectors' positions and every derived view.
//! - [`sampled`]: the online check of counters as they are read.

pub(crate) mod progress;
pub(crate) mod rebuild;
pub(crate) mod reconcile;
pub(crate) mod restore;
pub(crate) mod sampled;
pub(crate) mod state;
pub(crate) mod truth;
pub(crate) mod verify;

use crate::app::App;
use crate::error::PipelineError;
use crate::model::UserId;
use crate::store::checks::{self, EdgeKey, EdgePair, EdgeScope};

/// A walk over the edges of a scope in pages: truth rows with their
/// projection rows, then projection rows with no truth row (orphans).
pub(crate) struct EdgeWalk {
    passes: Vec<checks::EdgePass>,
    orphans: bool,
    after: EdgeKey,
    batch: i64,
}

impl EdgeWalk {
    /// A walk over `scope` in pages of `batch`.
    pub(crate) fn new(scope: EdgeScope, batch: i64) -> Self {
        let mut passes = scope.passes();
        passes.reverse();
        Self {
            passes,
            orphans: false,
            after: EdgeKey::default(),
            batch,
        }
    }

    /// The next page, and whether it holds orphans; `None` at the end. No
    /// connection is held between pages.
    pub(crate) async fn next(
        &mut self,
        app: &App,
    ) -> Result<Option<(Vec<EdgePair>, bool)>, PipelineError> {
        while let Some(pass) = self.passes.last().copied() {
            let page = {
                let mut conn = app.pg.get().await?;
                if self.orphans {
                    checks::orphan_page(&mut conn, pass, self.after, self.batch).await?
                } else {
                    checks::truth_page(&mut conn, pass, self.after, self.batch).await?
                }
            };
            if let Some(last) = page.last() {
                self.after = last.key();
                return Ok(Some((page, self.orphans)));
            }
            self.after = EdgeKey::default();
            if self.orphans {
                self.passes.pop();
            }
            self.orphans = !self.orphans;
        }
        Ok(None)
    }
}

/// The next page of users after `after`: just `only` (once) when set.
pub(crate) async fn user_page(
    app: &App,
    only: Option<UserId>,
    after: i64,
    batch: i64,
) -> Result<Vec<UserId>, PipelineError> {
    Ok(match only {
        Some(user) if after == 0 => vec![user],
        Some(_) => Vec::new(),
        None => {
            let mut conn = app.pg.get().await?;
            checks::user_page(&mut conn, after, batch).await?
        }
    })
}
