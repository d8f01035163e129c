//! Portability: the viewer's follows, followers, blocks and mutes out as
//! CSV files ([`export`]) in Mastodon's formats, and in again as background
//! import jobs ([`import`]) that go through the same write statements as
//! every follow, block and mute. Accounts are named by address
//! ([`address`]): `handle@KITH_ACCOUNT_DOMAIN`.

pub(crate) mod address;
pub(crate) mod csv;
pub(crate) mod export;
pub(crate) mod import;
