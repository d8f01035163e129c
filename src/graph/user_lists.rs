//! `User`'s access rules: whether the viewer may see a user's lists, and
//! the page of a list the viewer asked for.

use async_graphql::{Context, ErrorExtensions as _};

use super::connection::{self, FollowConnection};
use super::loaders::Loaders;
use super::page_args::PageArgs;
use super::user::UserNode;
use super::viewer;
use crate::error::GraphqlResultExt;
use crate::model::UserId;
use crate::paging::ListKey;

impl UserNode {
    /// A page of this user's `list` (`following` or `followers`), or an
    /// empty, `hidden` one when the viewer may not see it. Boxed, as are
    /// the other list and intersection fields: inline, their futures would
    /// set the size of every field's future of every user, each of which
    /// async-graphql moves to the heap.
    pub(super) async fn list(
        &self,
        ctx: &Context<'_>,
        list: ListKey,
        args: PageArgs,
    ) -> async_graphql::Result<FollowConnection> {
        Box::pin(async move {
            let me = viewer(ctx).optional().gql()?;
            if self.blocks(ctx, me).await? {
                connection::report_blocked(ctx);
                return connection::hidden_list(ctx, list, &args).await;
            }
            if !self.shows_lists_to(me) {
                return connection::hidden_list(ctx, list, &args).await;
            }
            connection::resolve(ctx, list, args).await
        })
        .await
    }

    /// Whether this user blocks `viewer` (never itself, nor an anonymous
    /// viewer): then a blocked viewer sees nothing of its graph, as on X and
    /// Bluesky. From the viewer's boundaries, which the process keeps.
    pub(crate) async fn blocks(
        &self,
        ctx: &Context<'_>,
        viewer: Option<UserId>,
    ) -> async_graphql::Result<bool> {
        let Some(me) = viewer.filter(|me| *me != self.0.id) else {
            return Ok(false);
        };
        let boundaries = ctx
            .data_unchecked::<Loaders>()
            .boundaries(me)
            .await
            .map_err(|e| e.as_ref().extend())?;
        Ok(boundaries.blocked_by.contains(&self.0.id))
    }

    /// Whether `viewer` may see this user's lists (and what derives from
    /// them): unless the user hides them, and always the user itself.
    pub(crate) fn shows_lists_to(&self, viewer: Option<UserId>) -> bool {
        !self.0.hides_collections || viewer == Some(self.0.id)
    }
}
