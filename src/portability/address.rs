//! Account addresses, as Mastodon's CSV files name accounts: `handle@domain`.
//! Kith serves one domain (`KITH_ACCOUNT_DOMAIN`); an address of another
//! domain names an account Kith does not have.

/// The address of the account with `handle`.
pub(crate) fn format(handle: &str, domain: &str) -> String {
    format!("{handle}@{domain}")
}

/// The handle an address names on `domain`: `handle`, `@handle`,
/// `handle@domain` and `@handle@domain` (the domain in any case) all name
/// `handle`. `None` for an empty handle or another domain.
pub(crate) fn parse<'a>(address: &'a str, domain: &str) -> Option<&'a str> {
    let address = address.trim();
    let address = address.strip_prefix('@').unwrap_or(address);
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
    }
}
