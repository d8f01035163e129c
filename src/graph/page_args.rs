//! The paging arguments of a connection field (`first`, `after`, `last`,
//! `before`, `offset`), what a page costs in complexity, and how the
//! arguments become a [`PageRequest`].

use super::cursor::{CursorKeys, CursorScope};
use crate::error::ApiError;
use crate::paging::PageRequest;

/// Largest page a client may ask for.
pub(crate) const MAX_PAGE: i32 = 100;
/// Page size when neither `first` nor `last` is given.
pub(crate) const DEFAULT_PAGE: i32 = 20;
/// Rows an `offset` may skip for one unit of complexity: skipping is cheap
/// per row (an index walk), but a deep offset still reads every row it skips.
pub(crate) const OFFSET_ROWS_PER_UNIT: usize = 10;

/// The complexity of a page: its size times the cost of one edge, plus the
/// rows its `offset` skips.
pub(crate) fn page_cost(
    first: Option<i32>,
    last: Option<i32>,
    offset: Option<i32>,
    child: usize,
) -> usize {
    let n = first.or(last).unwrap_or(DEFAULT_PAGE).clamp(0, MAX_PAGE) as usize;
    let skipped = offset.unwrap_or(0).max(0) as usize;
    n.max(1) * child + 1 + skipped.div_ceil(OFFSET_ROWS_PER_UNIT)
}

/// Complexity of computing an intersection of two lists, besides its page:
/// a walk of up to `KITH_INTERSECTION_WALK_MAX` (at most
/// [`crate::config::MAX_INTERSECTION_WALK`]) edges and as many probes, each
/// row charged as an `offset` charges its rows.
pub(crate) const INTERSECTION_COST: usize =
    2 * crate::config::MAX_INTERSECTION_WALK / OFFSET_ROWS_PER_UNIT;

/// The complexity of a page of an intersection.
pub(crate) fn intersection_cost(first: Option<i32>, last: Option<i32>, child: usize) -> usize {
    page_cost(first, last, None, child) + INTERSECTION_COST
}

/// The paging arguments of a connection field.
pub(crate) struct PageArgs {
    /// Edges after the cursor (older).
    pub first: Option<i32>,
    /// Cursor to page forward from.
    pub after: Option<String>,
    /// Edges before the cursor (newer).
    pub last: Option<i32>,
    /// Cursor to page backward from.
    pub before: Option<String>,
    /// Rank to start from (with `first`).
    pub offset: Option<i32>,
}

fn size(name: &str, n: i32) -> Result<usize, ApiError> {
    if !(0..=MAX_PAGE).contains(&n) {
        return Err(ApiError::invalid(format!(
            "`{name}` must be between 0 and {MAX_PAGE}"
        )));
    }
    Ok(n as usize)
}

/// The size a connection paged by `first` alone asks for (`DEFAULT_PAGE`
/// when unset), or `INVALID_INPUT`.
pub(crate) fn first_size(first: Option<i32>) -> Result<usize, ApiError> {
    size("first", first.unwrap_or(DEFAULT_PAGE))
}

impl PageArgs {
    /// The arguments as a field received them.
    pub(crate) fn new(
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
        offset: Option<i32>,
    ) -> Self {
        Self {
            first,
            after,
            last,
            before,
            offset,
        }
    }

    /// Checks the arguments' shape (which go together, page sizes, the
    /// offset's bound) without reading a cursor: also what a hidden list,
    /// which pages nothing, checks.
    pub(crate) fn shape(&self, max_offset: i32) -> Result<Shape, ApiError> {
        let invalid = |m: &str| Err(ApiError::invalid(m));
        if self.first.is_some() && self.last.is_some() {
            return invalid("use `first` or `last`, not both");
        }
        if self.after.is_some() && self.before.is_some() {
            return invalid("use `after` or `before`, not both");
        }
        if self.first.is_some() && self.before.is_some()
            || self.last.is_some() && self.after.is_some()
        {
            return invalid("page forward with `first`/`after`, backward with `last`/`before`");
        }
        if let Some(offset) = self.offset {
            if self.after.is_some() || self.before.is_some() || self.last.is_some() {
                return invalid("`offset` goes with `first` only");
            }
            if !(0..=max_offset).contains(&offset) {
                return Err(ApiError::invalid(format!(
                    "`offset` must be between 0 and {max_offset}; page deeper with `after` cursors"
                )));
            }
            let n = size("first", self.first.unwrap_or(DEFAULT_PAGE))?;
            return Ok(Shape::Offset(offset as usize, n));
        }
        if self.last.is_some() || self.before.is_some() {
            return Ok(Shape::Before(size(
                "last",
                self.last.unwrap_or(DEFAULT_PAGE),
            )?));
        }
        Ok(Shape::After(size(
            "first",
            self.first.unwrap_or(DEFAULT_PAGE),
        )?))
    }

    pub(crate) fn request(
        &self,
        keys: &CursorKeys,
        scope: CursorScope,
        max_offset: i32,
    ) -> Result<(PageRequest, bool), ApiError> {
        let decode =
            |cursor: &Option<String>| cursor.as_deref().map(|c| keys.decode(scope, c)).transpose();
        Ok(match self.shape(max_offset)? {
            Shape::Offset(offset, n) => (PageRequest::Offset(offset, n), true),
            Shape::Before(n) => (PageRequest::Before(decode(&self.before)?, n), false),
            Shape::After(n) => (PageRequest::After(decode(&self.after)?, n), true),
        })
    }
}

/// Which way a page goes and how long it is.
pub(crate) enum Shape {
    /// `first` edges from rank `offset`.
    Offset(usize, usize),
    /// `last` edges before a cursor.
    Before(usize),
    /// `first` edges after a cursor.
    After(usize),
}
