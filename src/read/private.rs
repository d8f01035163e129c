//! The viewer's own lists — whom it blocks and mutes, the follow requests
//! it received and sent — read from PostgreSQL by keyset (one statement
//! for the page, one for the count): only their owner reads them, and
//! rarely, so no cache holds them.

use crate::app::App;
use crate::error::ApiError;
use crate::paging::{Page, PageRequest, PrivateList};
use crate::store::lists;

/// One page of `list` and how many rows the whole list has.
pub(crate) async fn page(
    app: &App,
    list: PrivateList,
    request: PageRequest,
) -> Result<(Page, u64), ApiError> {
    let mut conn = app.pg.get().await?;
    let page = lists::private_page(&mut conn, list, request).await?;
    let total = lists::private_count(&mut conn, list).await?;
    Ok((page, total))
}
