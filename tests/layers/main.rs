//! The layering of `src/`: which files name which, and the import circles
//! that result. A circle means no file in it can be understood, changed or
//! tested without the others; the only one allowed is the GraphQL resolver
//! types that name each other (`User` has `followers` and
//! `suggestedFollows`, whose edges are `User`s).
//!
//! `cargo test --test layers -- --nocapture` prints every circle and the
//! files each file names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The one circle allowed: the GraphQL types that name each other.
const RESOLVERS: [&str; 4] = [
    "graph::connection",
    "graph::relation",
    "graph::suggest",
    "graph::user",
];

/// The foundations every part builds on, and what each may name: the
/// configuration nothing of Kith; the domain types, paging types and the
/// shutdown signal only each other.
const FOUNDATIONS: [(&str, &[&str]); 4] = [
    ("config", &[]),
    ("model", &[]),
    ("paging", &["model"]),
    ("shutdown", &[]),
];

#[test]
fn the_foundations_name_nothing_above_them() {
    let graph = ModuleGraph::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").as_path());
    let mut reaching = Vec::new();
    for (module, names) in &graph.names {
        let Some((_, allowed)) = FOUNDATIONS
            .iter()
            .find(|(f, _)| module == f || module.starts_with(&format!("{f}::")))
        else {
            continue;
        };
        let top = |m: &str| m.split("::").next().unwrap_or_default().to_string();
        for named in names {
            if top(named) != top(module) && !allowed.contains(&top(named).as_str()) {
                reaching.push(format!("{module} names {named}"));
            }
        }
    }
    assert!(
        reaching.is_empty(),
        "foundations reaching up: {reaching:#?}"
    );
}

#[test]
fn no_layer_reaches_up() {
    let graph = ModuleGraph::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").as_path());
    let circles = graph.circles();
    for circle in &circles {
        println!("circle of {}: {}", circle.len(), circle.join(", "));
        for member in circle {
            let inside: Vec<&str> = graph.names[member]
                .iter()
                .filter(|n| circle.contains(n))
                .map(String::as_str)
                .collect();
            println!("  {member} -> {}", inside.join(", "));
        }
    }
    let bad: Vec<_> = circles
        .iter()
        .filter(|c| c.iter().any(|m| !RESOLVERS.contains(&m.as_str())))
        .collect();
    assert!(
        bad.is_empty(),
        "import circles beyond the GraphQL resolvers {RESOLVERS:?} (each file below names, \
         through `crate::`, `super::` or `self::`, another file of its circle): {bad:#?}"
    );
}

/// Files of `src/` by module path, and the modules each one names.
struct ModuleGraph {
    names: BTreeMap<String, BTreeSet<String>>,
}

impl ModuleGraph {
    fn read(src: &Path) -> Self {
        let mut files = Vec::new();
        collect(src, &mut files);
        let modules: BTreeMap<String, PathBuf> = files
            .into_iter()
            .filter_map(|f| module_of(src, &f).map(|m| (m, f)))
            .collect();
        let known: BTreeSet<&str> = modules.keys().map(String::as_str).collect();
        let mut names = BTreeMap::new();
        for (module, file) in &modules {
            let text = without_tests(&strip(
                &std::fs::read_to_string(file).expect("read a source file"),
            ));
            let mut named = BTreeSet::new();
            for path in paths(&text) {
                let Some(absolute) = absolute(module, &path) else {
                    continue;
                };
                // The longest prefix of the path that is a file of its own.
                let target = (1..=absolute.len())
                    .rev()
                    .map(|n| absolute[..n].join("::"))
                    .find(|m| known.contains(m.as_str()));
                if let Some(target) = target
                    && target != *module
                    && !target.is_empty()
                {
                    named.insert(target);
                }
            }
            names.insert(module.clone(), named);
        }
        Self { names }
    }

    /// Strongly connected components of more than one file (Tarjan).
    fn circles(&self) -> Vec<Vec<String>> {
        let nodes: Vec<&String> = self.names.keys().collect();
        let index_of: BTreeMap<&String, usize> =
            nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let edges: Vec<Vec<usize>> = nodes
            .iter()
            .map(|n| {
                self.names[*n]
                    .iter()
                    .filter_map(|t| index_of.get(t).copied())
                    .collect()
            })
            .collect();
        let mut tarjan = Tarjan {
            edges: &edges,
            index: vec![None; nodes.len()],
            low: vec![0; nodes.len()],
            on_stack: vec![false; nodes.len()],
            stack: Vec::new(),
            next: 0,
            components: Vec::new(),
        };
        for v in 0..nodes.len() {
            if tarjan.index[v].is_none() {
                tarjan.visit(v);
            }
        }
        let mut circles: Vec<Vec<String>> = tarjan
            .components
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|c| {
                let mut names: Vec<String> = c.into_iter().map(|i| nodes[i].clone()).collect();
                names.sort();
                names
            })
            .collect();
        circles.sort_by_key(|c| std::cmp::Reverse(c.len()));
        circles
    }
}

struct Tarjan<'a> {
    edges: &'a [Vec<usize>],
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    next: usize,
    components: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: usize) {
        self.index[v] = Some(self.next);
        self.low[v] = self.next;
        self.next += 1;
        self.stack.push(v);
        self.on_stack[v] = true;
        for &w in &self.edges[v] {
            match self.index[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(i) if self.on_stack[w] => self.low[v] = self.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut component = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`; `src/lib.rs` is the root
/// (""); the binary (`src/main.rs`) names the library as `kith::` and is left out.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    match parts.last().map(String::as_str) {
        Some("main") if parts.len() == 1 => return None,
        Some("lib") if parts.len() == 1 => return Some(String::new()),
        Some("mod") => {
            parts.pop();
        }
        _ => {}
    }
    Some(parts.join("::"))
}

/// The source without comments, string and character literals.
fn strip(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let hashes = rest[1..].chars().take_while(|c| *c == '#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            i += body
                + rest[body..]
                    .find(&close)
                    .map_or(rest.len() - body, |e| e + close.len());
            out.push_str("\"\"");
        } else if bytes[i] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            i = j + 1;
            out.push_str("\"\"");
        } else if bytes[i] == b'\''
            && rest.len() > 3
            && (rest.as_bytes()[2] == b'\'' || rest.as_bytes()[1] == b'\\')
        {
            // A character literal ('x' or '\n'), not a lifetime.
            let end = rest[1..].find('\'').map_or(1, |e| e + 2);
            i += end;
            out.push_str("' '");
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The text without its `#[cfg(test)] mod … { … }` blocks: a file's unit
/// tests may name what they like, and their `super::` is the file itself.
fn without_tests(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let is_module = after.trim_start().starts_with("mod ");
        match after.find('{').filter(|_| is_module) {
            Some(open) => {
                let mut depth = 0;
                let mut end = after.len();
                for (i, c) in after[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &after[end..];
            }
            None => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// Every path the text names from `crate`, `super` or `self`, with `use`
/// trees (`use crate::{a, b::{c, d}}`) expanded.
fn paths(text: &str) -> Vec<Vec<String>> {
    let tokens = tokenize(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == "use" {
            let end = tokens[i..]
                .iter()
                .position(|t| t == ";")
                .map_or(tokens.len(), |e| i + e);
            expand(&tokens[i + 1..end], &[], &mut out);
            i = end;
        } else if matches!(tokens[i].as_str(), "crate" | "super" | "self")
            && tokens.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || tokens[i - 1] != "::")
        {
            let mut path = vec![tokens[i].clone()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|t| t == "::")
                && tokens.get(j + 1).is_some_and(|t| is_ident(t))
            {
                path.push(tokens[j + 1].clone());
                j += 2;
            }
            out.push(path);
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Expands one `use` tree into its paths.
fn expand(tokens: &[String], prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        if t == "{" {
            // Split the group at top-level commas.
            let mut depth = 0;
            let mut start = i + 1;
            for j in i + 1..tokens.len() {
                match tokens[j].as_str() {
                    "{" => depth += 1,
                    "}" if depth == 0 => {
                        expand(&tokens[start..j], &path, out);
                        return;
                    }
                    "}" => depth -= 1,
                    "," if depth == 0 => {
                        expand(&tokens[start..j], &path, out);
                        start = j + 1;
                    }
                    _ => {}
                }
            }
            return;
        } else if t == "as" {
            break;
        } else if is_ident(t) {
            path.push(t.clone());
        }
        i += 1;
    }
    if !path.is_empty() {
        out.push(path);
    }
}

fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if d.is_alphanumeric() || d == '_' {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            tokens.push(text[i..end].to_string());
        } else if c == ':' && chars.peek().is_some_and(|&(_, d)| d == ':') {
            chars.next();
            tokens.push("::".to_string());
        } else if !c.is_whitespace() {
            tokens.push(c.to_string());
        }
    }
    tokens
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// A path made absolute from the module that names it; `None` for paths
/// that start elsewhere (`std::`, a dependency, a local name).
fn absolute(module: &str, path: &[String]) -> Option<Vec<String>> {
    let mut here: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(String::from).collect()
    };
    // `self` in `a/b.rs` and in `a/b/mod.rs` is `a::b`; `super` is `a`.
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            here.clear();
            rest = &rest[1..];
        }
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                here.pop()?;
                rest = &rest[1..];
            }
        }
        Some("self") => rest = &rest[1..],
        _ => return None,
    }
    here.extend(rest.iter().cloned());
    Some(here)
}

/// One file, one concern: a file of `src/` past this many lines holds more
/// than one (split it by what its parts do).
const LONGEST_FILE: usize = 500;

#[test]
fn no_file_holds_more_than_one_concern() {
    let mut files = Vec::new();
    collect(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src").as_path(),
        &mut files,
    );
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).ok()?.lines().count();
            (lines > LONGEST_FILE).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over {LONGEST_FILE} lines: {long:#?}"
    );
}
