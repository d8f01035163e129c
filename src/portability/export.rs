//! Exports of the viewer's own lists in Mastodon's CSV formats, streamed:
//! a batch of [`BATCH`] members per statement, a PostgreSQL connection held
//! only while its statement runs, and nothing kept once a batch is sent —
//! a list of a million members costs the memory of one batch.
//!
//! | file | columns |
//! |---|---|
//! | `following.csv` | `Account address,Show boosts,Notify on new posts,Languages` (a header, then each follow with its options: `address,true,false,en, de`; no languages: every one) |
//! | `followers.csv` | the same columns, with the defaults (`address,true,false,`): a follower's options are its own |
//! | `blocks.csv` | the address alone, no header (as Mastodon's `blocked_accounts.csv`) |
//! | `mutes.csv` | `Account address` (a header), then the address |
//!
//! An address a spreadsheet would take for a formula (it begins with `=`,
//! `+`, `-`, `@`, a tab or a CR) is written behind a `'`, which an import
//! takes off again.

use std::sync::Arc;

use futures_util::Stream;

use super::{address, csv};
use crate::app::App;
use crate::error::ApiError;
use crate::model::UserId;
use crate::store::export::{self as store, ExportList};

/// Members read per statement.
pub(crate) const BATCH: i64 = 1000;

/// Rate-limit tokens an export takes from the account's bucket.
pub(crate) const COST: usize = 5;

/// The export a file name asks for.
pub(crate) fn by_file_name(name: &str) -> Option<ExportList> {
    Some(match name {
        "following.csv" => ExportList::Following,
        "followers.csv" => ExportList::Followers,
        "blocks.csv" => ExportList::Blocks,
        "mutes.csv" => ExportList::Mutes,
        _ => return None,
    })
}

/// The header row of `list`'s file, if it has one.
fn header(list: ExportList) -> Option<&'static [&'static str]> {
    match list {
        ExportList::Following | ExportList::Followers => Some(&[
            "Account address",
            "Show boosts",
            "Notify on new posts",
            "Languages",
        ]),
        ExportList::Blocks => None,
        ExportList::Mutes => Some(&["Account address"]),
    }
}

/// Takes the export's tokens from `owner`'s bucket (`RATE_LIMITED` when
/// empty), then streams `owner`'s `list` as CSV text, chunk by chunk. A
/// failure past the first chunk ends the stream with it: the client sees a
/// transfer cut short, never a file that looks whole.
pub(crate) async fn start(
    app: Arc<App>,
    list: ExportList,
    owner: UserId,
) -> Result<impl Stream<Item = Result<String, ApiError>> + Send + 'static, ApiError> {
    crate::write::take_tokens(&app, owner, COST).await?;
    // The first batch is read before anything is sent, so a database that
    // cannot serve is a clear refusal, not a cut transfer.
    let (chunk, after) = next_chunk(&app, list, owner, 0, true).await?;
    Ok(futures_util::stream::unfold(
        Some(Step::Send(chunk, after)),
        move |step| {
            let app = app.clone();
            async move {
                let (chunk, after) = match step? {
                    Step::Send(chunk, after) => (chunk, after),
                    Step::Read(after) => match next_chunk(&app, list, owner, after, false).await {
                        Ok(next) => next,
                        Err(e) => return Some((Err(e), None)),
                    },
                };
                Some((Ok(chunk), after.map(Step::Read)))
            }
        },
    ))
}

fn bool_text(value: bool) -> &'static str {
    if value { "true" } else { "false" }
}

/// What an export stream does next.
enum Step {
    /// Send this chunk, then read after this id (if any).
    Send(String, Option<i64>),
    /// Read the batch after this member id.
    Read(i64),
}

/// The CSV text of the batch after member id `after` (with the header when
/// `first`), and the id to read after next, `None` at the end.
async fn next_chunk(
    app: &App,
    list: ExportList,
    owner: UserId,
    after: i64,
    first: bool,
) -> Result<(String, Option<i64>), ApiError> {
    let members = {
        let mut conn = app.pg.get().await?;
        store::batch(&mut conn, list, owner, after, BATCH).await?
    };
    let mut chunk = String::with_capacity(members.len() * 48);
    if first && let Some(header) = header(list) {
        csv::write_record(&mut chunk, header);
    }
    let domain = &app.config.portability.account_domain;
    for member in &members {
        let address = address::format(&member.handle, domain);
        // A handle is the account's own choice: never a formula.
        let address = super::guard_formula(&address);
        match list {
            ExportList::Following | ExportList::Followers => {
                let languages = member.languages.as_deref().unwrap_or_default().join(", ");
                csv::write_record(
                    &mut chunk,
                    &[
                        &address,
                        bool_text(member.show_reposts),
                        bool_text(member.notify),
                        &languages,
                    ],
                );
            }
            ExportList::Blocks | ExportList::Mutes => csv::write_record(&mut chunk, &[&address]),
        }
    }
    let next = (members.len() as i64 == BATCH).then(|| members.last().map(|m| m.id));
    Ok((chunk, next.flatten()))
}
