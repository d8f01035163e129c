//! The option columns of Mastodon's `following_accounts.csv` after the
//! address: `Show boosts`, `Notify on new posts`, `Languages` (a
//! comma-separated list; empty: every language). A row with only its
//! address gives no options.

use crate::model::FollowOptions;

/// The options a follow's CSV record gives after its address; `Err` when
/// a column holds something else than the format allows.
pub(crate) fn parse(fields: &[String]) -> Result<Option<FollowOptions>, ()> {
    if fields.len() < 2 {
        return Ok(None);
    }
    let defaults = FollowOptions::default();
    let flag = |i: usize, default: bool| match fields.get(i).map(|f| f.trim()) {
        None | Some("") => Ok(default),
        Some(f) if f.eq_ignore_ascii_case("true") => Ok(true),
        Some(f) if f.eq_ignore_ascii_case("false") => Ok(false),
        Some(_) => Err(()),
    };
    let languages: Vec<String> = fields
        .get(3)
        .map(|f| {
            f.split(',')
                .map(|l| l.trim().to_owned())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let options = FollowOptions {
        show_reposts: flag(1, defaults.show_reposts)?,
        notify: flag(2, defaults.notify)?,
        languages: (!languages.is_empty()).then_some(languages),
    };
    let change = crate::store::follow_options::OptionsChange::from(&options);
    crate::write::follow_options::check(&change).map_err(|_| ())?;
    Ok(Some(options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(line: &[&str]) -> Vec<String> {
        line.iter().map(|f| (*f).to_owned()).collect()
    }

    #[test]
    fn columns_read_as_mastodon_writes_them() {
        assert_eq!(parse(&fields(&["a@x"])), Ok(None));
        assert_eq!(
            parse(&fields(&["a@x", "true", "false", ""])),
            Ok(Some(FollowOptions::default()))
        );
        assert_eq!(
            parse(&fields(&["a@x", "FALSE", "True", "en, de"])),
            Ok(Some(FollowOptions {
                notify: true,
                show_reposts: false,
                languages: Some(vec!["en".to_owned(), "de".to_owned()]),
            }))
        );
        assert_eq!(parse(&fields(&["a@x", "yes"])), Err(()));
        assert_eq!(
            parse(&fields(&["a@x", "true", "false", "English"])),
            Err(())
        );
    }
}
