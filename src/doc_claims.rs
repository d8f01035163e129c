//! The documents against the code: every default a document quotes next to
//! its setting, and every number of the code the prose names, must be the
//! code's own. `docs/configuration.md` is generated and checked on its own
//! (`config::tests`); the decision records keep the figures of their day.

use std::path::PathBuf;

use crate::config::settings;

/// The documents written by hand: the README and `docs/*.md`.
fn documents() -> Vec<(String, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut paths = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("a docs/ entry").path();
        let generated = path.file_name().is_some_and(|n| n == "configuration.md");
        if path.extension().is_some_and(|e| e == "md") && !generated {
            paths.push(path);
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a readable document");
            // Line breaks and indentation are the prose's, not the claim's.
            let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let name = path
                .strip_prefix(&root)
                .unwrap_or(&path)
                .display()
                .to_string();
            (name, flat)
        })
        .collect()
}

/// Seconds per unit of a quoted duration (`None`: not a duration unit).
fn seconds_per(unit: &str) -> Option<f64> {
    Some(match unit {
        "ms" => 0.001,
        "s" | "second" | "seconds" => 1.0,
        "min" | "minute" | "minutes" => 60.0,
        "h" | "hour" | "hours" => 3_600.0,
        "day" | "days" => 86_400.0,
        _ => return None,
    })
}

/// Seconds per unit of a setting, from its name's suffix (`None`: not a
/// duration).
fn setting_seconds_per(name: &str) -> Option<f64> {
    [("_MS", 0.001), ("_SECS", 1.0), ("_HOURS", 3_600.0)]
        .into_iter()
        .find(|(suffix, _)| name.ends_with(suffix))
        .map(|(_, seconds)| seconds)
}

/// What a document quotes as the default of `name` after "`NAME` (", when
/// it is a number: "20,000", "default 7,500", "5 min", "7 days", "30 s".
/// `Ok(None)`: the parenthesis says something else ("three quarters of…").
fn quoted_default(name: &str, quoted: &str) -> Result<Option<f64>, String> {
    let quoted = quoted.strip_prefix("default ").unwrap_or(quoted);
    let number: String = quoted
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
        .collect();
    let number = number.trim_end_matches([',', '.']);
    if number.is_empty() {
        return Ok(None);
    }
    let value: f64 = number
        .replace(',', "")
        .parse()
        .map_err(|_| format!("`{name}` ({quoted}: not a number"))?;
    let unit: String = quoted[number.len()..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    Ok(Some(
        match (seconds_per(&unit), setting_seconds_per(name)) {
            (Some(quoted), Some(setting)) => value * quoted / setting,
            _ => value,
        },
    ))
}

#[test]
fn the_documents_quote_each_setting_s_default_as_it_is() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (file, text) in documents() {
        for (at, _) in text.match_indices("`KITH_") {
            let after = &text[at + 1..];
            let Some(end) = after.find('`') else { continue };
            let name = &after[..end];
            let Some(quoted) = after[end + 1..].strip_prefix(" (") else {
                continue;
            };
            let Some(default) = settings::default_of(name) else {
                continue;
            };
            let Ok(default) = default.parse::<f64>() else {
                continue;
            };
            match quoted_default(name, quoted) {
                Ok(Some(value)) if (value - default).abs() <= default.abs() * 1e-9 => checked += 1,
                Ok(Some(value)) => wrong.push(format!(
                    "{file}: `{name}` ({}…) is {value}, the default is {default}",
                    &quoted[..quoted.len().min(24)]
                )),
                Ok(None) => {}
                Err(e) => wrong.push(format!("{file}: {e}")),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "defaults the documents misquote:\n{}",
        wrong.join("\n")
    );
    assert!(
        checked > 10,
        "only {checked} quoted defaults found: is the pattern still right?"
    );
}

/// Numbers of the code the prose names, each as the text must read with
/// the code's value in place of `{}`.
fn claims() -> Vec<(&'static str, String)> {
    let thousands = |n: usize| {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    vec![
        (
            "docs/architecture.md",
            format!(
                "in round trips of at most {} KiB of commands, one after the other,",
                crate::cache::TRIP_BYTES / 1024
            ),
        ),
        (
            "docs/architecture.md",
            format!(
                "at most {} records or {} edge states a call",
                crate::cache::counters::RECORDS_PER_CALL,
                crate::cache::lists::EDGES_PER_CALL
            ),
        ),
        (
            "docs/api.md",
            format!(
                "Each such field costs {} complexity points besides its page.",
                thousands(crate::graph::page_args::INTERSECTION_COST)
            ),
        ),
        (
            "docs/architecture.md",
            format!(
                "It mirrors up to {} dead letters a round",
                crate::pipeline::relay::DEAD_LETTERS_PER_ROUND
            ),
        ),
        (
            "docs/api.md",
            format!(
                "`_entities` takes at most {} representations",
                crate::graph::limits::MAX_ENTITIES
            ),
        ),
        (
            "docs/clients.md",
            format!(
                "at most {} representations a call",
                crate::graph::limits::MAX_ENTITIES
            ),
        ),
    ]
}

#[test]
fn the_prose_names_the_code_s_numbers() {
    let documents = documents();
    let missing: Vec<String> = claims()
        .into_iter()
        .filter(|(file, claim)| {
            !documents
                .iter()
                .any(|(name, text)| name == file && text.contains(claim.as_str()))
        })
        .map(|(file, claim)| format!("{file}: \"{claim}\""))
        .collect();
    assert!(
        missing.is_empty(),
        "claims the documents no longer make as the code has them:\n{}",
        missing.join("\n")
    );
}
