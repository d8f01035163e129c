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
    /// The smallest value accepted, for a number.
    pub min: Option<f64>,
    /// The largest value accepted, for a number.
    pub max: Option<f64>,
    /// What is accepted beyond the range, in words: a rule of the value
    /// alone that a range cannot say, or one that ties it to other
    /// settings ([`super::Config::validate`] checks it, and refuses with
    /// these words).
    pub rule: Option<&'static str>,
}

impl Setting {
    /// The same setting, accepting numbers from `min` to `max`.
    pub(super) const fn within(self, min: f64, max: f64) -> Self {
        Self {
            min: Some(min),
            max: Some(max),
            ..self
        }
    }

    /// The same setting, accepting numbers from `min` up.
    pub(super) const fn at_least(self, min: f64) -> Self {
        Self {
            min: Some(min),
            ..self
        }
    }

    /// The same setting, with `rule` (see [`Self::rule`]).
    pub(super) const fn rule(self, rule: &'static str) -> Self {
        Self {
            rule: Some(rule),
            ..self
        }
    }

    /// What is accepted — the range, then the rule — as the reference says
    /// it (`None`: anything the type reads).
    pub fn accepted(&self) -> Option<String> {
        match (self.range(), self.rule) {
            (Some(range), Some(rule)) => Some(format!("{range}; {rule}")),
            (range, rule) => range.or(rule.map(str::to_owned)),
        }
    }

    /// The range, as the reference and refusals say it (`None`: any).
    pub fn range(&self) -> Option<String> {
        match (self.min, self.max) {
            (Some(min), Some(max)) => Some(format!("from {min} to {max}")),
            (Some(min), None) => Some(format!("at least {min}")),
            (None, Some(max)) => Some(format!("at most {max}")),
            (None, None) => None,
        }
    }

    /// Why `value` (already read as this setting's type) is out of its
    /// range, if it is.
    pub fn refuses(&self, value: &str) -> Option<String> {
        let range = self.range()?;
        let Ok(number) = value.trim().parse::<f64>() else {
            return Some(format!("must be a number {range}"));
        };
        let below = self.min.is_some_and(|min| number < min);
        let above = self.max.is_some_and(|max| number > max);
        (!number.is_finite() || below || above).then(|| format!("must be {range}"))
    }
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
        min: None,
        max: None,
        rule: None,
    }
}

pub(super) const fn unset(name: &'static str, doc: &'static str) -> Setting {
    Setting {
        name,
        default: None,
        doc,
        kind: Kind::Value,
        min: None,
        max: None,
        rule: None,
    }
}
