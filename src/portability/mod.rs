//! Portability: the viewer's follows, followers, blocks and mutes out as
//! CSV files ([`export`]) in Mastodon's formats, and in again as background
//! import jobs ([`import`]) that go through the same write statements as
//! every follow, block and mute. Accounts are named by address
//! ([`address`]): `handle@KITH_ACCOUNT_DOMAIN`.

pub(crate) mod address;
pub(crate) mod csv;
pub(crate) mod export;
pub(crate) mod follow_columns;
pub(crate) mod import;

/// What a spreadsheet takes a cell that begins with for a formula (OWASP's
/// CSV injection list): an export writes such a cell behind a `'`, and an
/// import takes it off again, so a round trip is exact.
pub(crate) const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// `cell` as an export writes it: behind a `'` when a spreadsheet would take
/// it for a formula ([`FORMULA_STARTS`]), as OWASP advises.
pub(crate) fn guard_formula(cell: &str) -> std::borrow::Cow<'_, str> {
    if cell.starts_with(FORMULA_STARTS) {
        std::borrow::Cow::Owned(format!("'{cell}"))
    } else {
        std::borrow::Cow::Borrowed(cell)
    }
}
