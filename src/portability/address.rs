//! Account addresses, as Mastodon's CSV files name accounts: `handle@domain`.
//! Kith serves one domain (`KITH_ACCOUNT_DOMAIN`); an address of another
//! domain names an account Kith does not have.

/// The address of the account with `handle`.
pub(crate) fn format(handle: &str, domain: &str) -> String {
    format!("{handle}@{domain}")
}

/// The handle an address names on `domain`: `handle`, `@handle`,
/// `handle@domain` and `@handle@domain` (the domain in any case) all name
/// `handle`. An address an export guarded against formula injection
/// (`'` before one of [`super::FORMULA_STARTS`]) is read as the export
/// wrote it, guard taken off, so a handle beginning with `@` or a tab comes
/// back whole. `None` for an empty handle or another domain.
pub(crate) fn parse<'a>(address: &'a str, domain: &str) -> Option<&'a str> {
    let address = match address.trim().strip_prefix('\'') {
        Some(guarded) if guarded.starts_with(super::FORMULA_STARTS) => guarded,
        _ => {
            let address = address.trim();
            address.strip_prefix('@').unwrap_or(address)
        }
    };
    let handle = match address.rsplit_once('@') {
        Some((handle, at)) if at.eq_ignore_ascii_case(domain) => handle,
        Some(_) => return None,
        None => address,
    };
    (!handle.is_empty()).then_some(handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_name_handles_of_this_domain_only() {
        assert_eq!(format("alice", "kith.example"), "alice@kith.example");
        for named in [
            "alice",
            "@alice",
            "alice@kith.example",
            "@alice@Kith.Example",
            " alice@kith.example ",
        ] {
            assert_eq!(parse(named, "kith.example"), Some("alice"), "{named}");
        }
        for other in ["alice@mastodon.social", "", "@", "@@kith.example"] {
            assert_eq!(parse(other, "kith.example"), None, "{other}");
        }
        // A handle may hold an '@' of its own: the domain is after the last.
        assert_eq!(parse("a@b@kith.example", "kith.example"), Some("a@b"));
        // An exported address behind its formula guard comes back whole.
        assert_eq!(parse("'@sum@kith.example", "kith.example"), Some("@sum"));
        assert_eq!(parse("'\tpad@kith.example", "kith.example"), Some("\tpad"));
        assert_eq!(parse("'=1+1", "kith.example"), Some("=1+1"));
        assert_eq!(parse("'plain", "kith.example"), Some("'plain"));
    }
}
