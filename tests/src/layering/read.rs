//! Reading a crate's sources: its files as modules, and the paths their code names (`use`
//! trees expanded, comments, strings and test code left out).

use std::fs;
use std::path::{Path, PathBuf};

use super::ModulePath;

pub(super) fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    Ok(())
}

/// `region/shard/mod.rs` → `["region", "shard"]`; `None` for test files and binaries' trees.
pub(super) fn module_of(relative: &Path) -> Option<ModulePath> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.first().is_some_and(|p| p == "bin") || parts.iter().any(|p| p == "tests") {
        return None;
    }
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    Some(parts)
}

/// Drops `//` comments (doc links are not imports) and string literals' contents.
pub(super) fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_string = false;
        let mut prev = ' ';
        let mut kept = String::new();
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if !in_string && c == '/' && chars.get(i + 1) == Some(&'/') {
                break;
            }
            if c == '"' && prev != '\\' && prev != '\'' {
                in_string = !in_string;
            }
            if !in_string {
                kept.push(c);
            }
            prev = c;
            i += 1;
        }
        out.push_str(&kept);
        out.push('\n');
    }
    out
}

/// Cuts an inline `#[cfg(test)] mod tests { … }` (always the end of a file here) and test-only
/// `use` lines.
pub(super) fn strip_tests(code: &str) -> String {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if line == "#[cfg(test)]" {
            let next = lines.get(i + 1).map(|l| l.trim()).unwrap_or("");
            if next.starts_with("mod tests {") {
                break;
            }
            i += 2; // a test-only item of one line (`mod tests;`, a `use`)
            continue;
        }
        out.push_str(lines[i]);
        out.push('\n');
        i += 1;
    }
    out
}

/// Every path starting with `crate`, `super` or `self` in the code, with `use` groups expanded,
/// and whether it is a `pub use` re-export.
pub(super) fn paths_in(code: &str) -> Vec<(Vec<String>, bool)> {
    let tokens = tokenize(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        // `use child::Item` in a module is relative to it (a foreign crate's path resolves to
        // the module itself, which is no edge).
        let relative_use = t == "use"
            && tokens
                .get(i + 1)
                .is_some_and(|n| is_ident(n) && !matches!(n.as_str(), "crate" | "super" | "self"));
        if relative_use {
            let (paths, end) = use_tree(&tokens, i + 1, vec!["self".to_string()]);
            let is_reexport = is_pub(&tokens[..i]);
            out.extend(paths.into_iter().map(|p| (p, is_reexport)));
            i = end;
            continue;
        }
        let starts = matches!(t, "crate" | "super" | "self")
            && tokens.get(i + 1).is_some_and(|n| n == "::")
            && (i == 0 || tokens[i - 1] != "::");
        if !starts {
            i += 1;
            continue;
        }
        let is_reexport = i >= 2 && tokens[i - 1] == "use" && is_pub(&tokens[..i - 1]);
        let (paths, end) = use_tree(&tokens, i, Vec::new());
        for path in paths {
            out.push((path, is_reexport));
        }
        i = end.max(i + 1);
    }
    out
}

pub(super) fn is_pub(before: &[String]) -> bool {
    // `pub use`, `pub(crate) use`, `pub(super) use`
    let n = before.len();
    (n >= 1 && before[n - 1] == "pub") || (n >= 4 && before[n - 1] == ")" && before[n - 4] == "pub")
}

/// Parses a path or use tree starting at `i`, prefixed by `prefix`; returns the leaf paths and the
/// index after the tree.
pub(super) fn use_tree(
    tokens: &[String],
    mut i: usize,
    prefix: Vec<String>,
) -> (Vec<Vec<String>>, usize) {
    let mut path = prefix;
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("{") => {
                let mut out = Vec::new();
                i += 1;
                while i < tokens.len() && tokens[i] != "}" {
                    if tokens[i] == "," {
                        i += 1;
                        continue;
                    }
                    let (paths, end) = use_tree(tokens, i, path.clone());
                    out.extend(paths);
                    i = end;
                }
                return (out, i + 1);
            }
            Some(word) if is_ident(word) => {
                path.push(word.to_string());
                i += 1;
                if tokens.get(i).is_some_and(|t| t == "::") {
                    i += 1;
                    continue;
                }
                if tokens.get(i).is_some_and(|t| t == "as") {
                    i += 2;
                }
                return (vec![path], i);
            }
            _ => return (vec![path], i),
        }
    }
}

pub(super) fn is_ident(word: &str) -> bool {
    word.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && word.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Identifiers, `::`, and single punctuation characters.
pub(super) fn tokenize(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".to_string());
            i += 2;
        } else {
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
            i += 1;
        }
    }
    tokens
}

/// Resolves `super::`/`self::` against the module the path is written in; `None` for `*` globs
/// and bare `self`.
pub(super) fn absolute(module: &ModulePath, path: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = module.clone();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    let rest: Vec<String> = rest.iter().filter(|s| *s != "self").cloned().collect();
    if rest.is_empty() {
        return None;
    }
    base.extend(rest);
    Some(base)
}
