//! What a setting is — its variable, default, meaning and kind — and the
//! constructors the settings tables (`settings`, `settings_accounts`) are
//! written with.

/// How a setting is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One variable, read by [`super::Config::from_lookup`].
    Value,
    /// A family of variables by prefix (`KITH_KAFKA_<PROPERTY>`).
    Family,
    /// Read by something else than the configuration (`RUST_LOG`).
    External,
}

/// One setting.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// The environment variable.
    pub name: &'static str,
    /// Its default, as the variable would spell it; `None`: unset.
    pub default: Option<&'static str>,
    /// What it means (Markdown, one paragraph).
    pub doc: &'static str,
    /// How it is read.
    pub kind: Kind,
}

/// Settings under one heading.
#[derive(Clone, Copy, Debug)]
pub struct Section {
    /// The heading.
    pub title: &'static str,
    /// Its settings, in the order they are documented.
    pub settings: &'static [Setting],
}

pub(super) const fn value(name: &'static str, default: &'static str, doc: &'static str) -> Setting {
    Setting {
        name,
        default: Some(default),
        doc,
        kind: Kind::Value,
    }
}

pub(super) const fn unset(name: &'static str, doc: &'static str) -> Setting {
    Setting {
        name,
        default: None,
        doc,
        kind: Kind::Value,
    }
}
