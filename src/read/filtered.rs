//! Pages that leave some members out — for a signed-in viewer, the
//! accounts it blocks or that block it — and stay full: a page short of
//! its size after the filter is topped up from further along the list, so
//! a page ends short only at the end of the list. Cursors still mark list
//! positions, so paging never repeats or skips a member that is shown.

use std::sync::Arc;

use super::pages;
use crate::app::App;
use crate::error::ApiError;
use crate::model::UserId;
use crate::paging::{ListKey, Page, PageRequest, Position};

/// Most edges one page examines beyond its size. A page that meets more
/// hidden members than this ends short, with `more` set and its end at the
/// last edge examined ([`Filtered::end`]), so the next page goes on from
/// there: a viewer blocking thousands of a list's members still gets
/// bounded work per page.
pub(crate) const SCAN_BEYOND: usize = 1000;

/// A page with some members left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Filtered {
    /// The page: only shown members, `more` and `other` as for any page.
    pub page: Page,
    /// Where the examined part of the list ends, in the paging direction,
    /// when that is past the page's last shown member (the page ended short
    /// at [`SCAN_BEYOND`]): the page's end cursor must mark it.
    pub end: Option<Position>,
}

/// `first`, the page `request` asked of `list`, without the members
/// `hidden` names, topped up from further along the list.
pub(crate) async fn without(
    app: &Arc<App>,
    list: ListKey,
    request: PageRequest,
    total: Option<u64>,
    first: Page,
    hidden: impl Fn(UserId) -> bool,
) -> Result<Filtered, ApiError> {
    if !first.items.iter().any(|p| hidden(p.user)) {
        return Ok(Filtered {
            page: first,
            end: None,
        });
    }
    let n = request.size();
    let forward = !matches!(request, PageRequest::Before(..));
    let other = first.other;
    // In the paging direction: for `before`, newest last.
    let mut shown: Vec<Position> = Vec::with_capacity(n + 1);
    let mut scanned = 0;
    let mut last: Option<Position> = None;
    let mut page = first;
    let (more, end) = loop {
        let mut items = std::mem::take(&mut page.items);
        if !forward {
            items.reverse();
        }
        for position in items {
            scanned += 1;
            last = Some(position);
            if !hidden(position.user) {
                shown.push(position);
            }
            if shown.len() > n {
                break;
            }
        }
        if shown.len() > n {
            break (true, None);
        }
        if !page.more {
            break (false, None);
        }
        if scanned >= n + SCAN_BEYOND {
            break (true, last);
        }
        let wanted = (n + 1 - shown.len()).saturating_mul(2).clamp(8, 100);
        let next = if forward {
            PageRequest::After(last, wanted)
        } else {
            PageRequest::Before(last, wanted)
        };
        page = pages::page(app, list, next, total).await?.0;
    };
    shown.truncate(n);
    if !forward {
        shown.reverse();
    }
    Ok(Filtered {
        page: Page {
            items: shown,
            more,
            other,
        },
        end,
    })
}
