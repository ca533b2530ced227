//! `cargo xtask tidy`: the project rules no compiler checks, checked on the source text so a
//! rule cannot drift out of the tree unnoticed. Each finding is printed as
//! `path:line: what is wrong`; any finding makes the task fail. The checks:
//!
//! - **module docs**: every `.rs` file under `crates/*/{src,tests}`, `plugins/*/{src,tests}`,
//!   `xtask/src` and each package's `build.rs` opens with a `//!` comment. Blank lines and
//!   one-line inner attributes (`#![...]`) may come first; nothing else may (not even `//`).
//! - **architecture**: docs/ARCHITECTURE.md names every package folder in `crates/` and
//!   `plugins/` (as a whole word: `-` counts as part of a name), and every task of
//!   `cargo xtask` on a line that mentions `xtask`. The tasks are read from the dispatch
//!   `match` in xtask/src/main.rs (its `"name" =>` arms), so a new task cannot be forgotten.
//! - **plugin dependencies**: each `plugins/*/Cargo.toml` `[dependencies]` table (and
//!   `[target.*.dependencies]`; dev-dependencies are free) names only crates in
//!   [`PLUGIN_DEPS`]; a refused crate is reported with the reason from [`REFUSED`].
//! - **plugin I/O**: no `std::fs`, `std::net`, `std::process`, `std::env::var`,
//!   `SystemTime::now` or `Instant::now` in `plugins/*/src`. Test code is excepted: files named
//!   `tests.rs` or under a `tests/` folder, and everything from a `#[cfg(test)]` line to the end
//!   of its file (test modules close the file here). Comment lines are skipped.
//! - **unwrap_or_default**: no `unwrap_or_default()` whose expression serializes or hashes: a
//!   failure there silently becomes empty bytes (an archive key hashed from nothing). The
//!   expression is the line up to the call, plus up to 3 lines before it while the chain
//!   continues (a line starting with `.`, or unbalanced parentheses). It is flagged when it
//!   holds a serializer call with arguments (`to_string(x)`, `to_vec(x)`, `to_string_pretty`,
//!   `to_value`, `to_writer`; not `.to_string()`), a `::from_str(`/`from_slice(`/`from_value(`/
//!   `from_reader(`/`try_from(` call in an expression that names `serde_json` or `toml`, or a
//!   call of a function whose name holds `hash`, `xxh3` or `digest`. Test code is checked too
//!   (tests unwrap instead).
//!
//! A line that must break a rule says why with a trailing `// tidy: <reason>` comment (plugin
//! I/O and `unwrap_or_default` checks).

use anyhow::{bail, Context, Result};
use std::fmt;
use std::path::{Path, PathBuf};

/// Crates a plugin may depend on, and why each is safe for a stage loaded into the host.
const PLUGIN_DEPS: &[(&str, &str)] = &[
    ("condense-abi", "the stage SDK and the plugin boundary"),
    ("condense-model", "the conversation model; no I/O"),
    (
        "condense-turns",
        "pure API-turn grouping shared with the host's summarizer",
    ),
    (
        "condense-budget",
        "pure budget and image arithmetic, no tokenizer",
    ),
    ("condense-text", "small pure text helpers"),
    ("condense-retain", "what must survive compression; pure"),
    (
        "condense-formats",
        "format knowledge, pure functions on the model",
    ),
    ("serde", "stage config and state types"),
    ("serde_json", "tool inputs and results are JSON"),
    ("regex", "pattern matching in text (no I/O)"),
    ("memchr", "fast byte and substring search in text (no I/O)"),
    ("twox-hash", "stable content hashes for store keys (xxh3)"),
    ("base64", "image and binary payloads in content"),
];

/// Why some crates are refused (any other crate not in [`PLUGIN_DEPS`] is refused too).
const REFUSED: &[(&str, &str)] = &[
    (
        "condense-tokens",
        "plugins count tokens only through the host (Host::count_tokens)",
    ),
    ("tiktoken-rs", "plugins count tokens only through the host"),
    ("bpe-openai", "plugins count tokens only through the host"),
    (
        "condense-host",
        "the host loads plugins; a plugin never links it",
    ),
    (
        "condense-store",
        "plugins reach the store only through the host",
    ),
    ("rusqlite", "plugins reach the store only through the host"),
    (
        "condense-summarize",
        "plugins summarize only through the host (Host::summarize)",
    ),
    ("ureq", "plugins do no networking"),
    ("tokio", "plugins do no I/O and run no runtime"),
    ("hyper", "plugins do no networking"),
    (
        "abi_stable",
        "only condense-abi names abi_stable (export_stage! hides it)",
    ),
];

/// Paths in plugin sources that mean I/O, a clock or the environment: the host provides them.
const PLUGIN_IO: &[(&str, &str)] = &[
    ("std::fs", "file I/O"),
    ("std::net", "networking"),
    ("std::process", "running processes"),
    ("std::env::var", "reading the environment"),
    (
        "SystemTime::now",
        "reading the clock (the host gives the time)",
    ),
    (
        "Instant::now",
        "reading the clock (the host gives the time)",
    ),
];

/// One rule broken at one place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Relative to the repository root, `/`-separated.
    pub path: String,
    /// 1-based.
    pub line: usize,
    pub what: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path, self.line, self.what)
    }
}

fn finding(path: &str, line: usize, what: impl Into<String>) -> Finding {
    Finding {
        path: path.to_string(),
        line,
        what: what.into(),
    }
}

/// `cargo xtask tidy`: prints every finding; fails when there is one.
pub fn tidy(root: &Path) -> Result<()> {
    let findings = check_tree(root)?;
    for f in &findings {
        println!("{f}");
    }
    if !findings.is_empty() {
        bail!("tidy: {} finding(s)", findings.len());
    }
    eprintln!("xtask: tidy found nothing");
    Ok(())
}

/// Every finding in the tree at `root`.
pub fn check_tree(root: &Path) -> Result<Vec<Finding>> {
    let mut findings = Vec::new();
    let crates = packages(&root.join("crates"))?;
    let plugins = packages(&root.join("plugins"))?;

    let mut sources = Vec::new();
    for pkg in crates.iter().chain(&plugins) {
        rust_files(&pkg.join("src"), &mut sources)?;
        rust_files(&pkg.join("tests"), &mut sources)?;
        let build = pkg.join("build.rs");
        if build.is_file() {
            sources.push(build);
        }
    }
    rust_files(&root.join("xtask/src"), &mut sources)?;
    sources.sort();
    for file in &sources {
        let text = read(file)?;
        let rel = relative(root, file);
        findings.extend(module_doc(&rel, &text));
        findings.extend(unwrap_or_default(&rel, &text));
        if rel.starts_with("plugins/") && rel.split('/').nth(2) == Some("src") {
            findings.extend(plugin_io(&rel, &text));
        }
    }

    let arch = read(&root.join("docs/ARCHITECTURE.md"))?;
    let names: Vec<(String, String)> = crates
        .iter()
        .chain(&plugins)
        .map(|p| {
            let rel = format!("{}/Cargo.toml", relative(root, p));
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            (rel, name.unwrap_or_default())
        })
        .collect();
    let main = read(&root.join("xtask/src/main.rs"))?;
    findings.extend(architecture(&arch, &names, "xtask/src/main.rs", &main));

    for pkg in &plugins {
        let manifest = pkg.join("Cargo.toml");
        let text = read(&manifest)?;
        findings.extend(plugin_deps(&relative(root, &manifest), &text)?);
    }
    Ok(findings)
}

/// Package folders (those holding a Cargo.toml) directly under `dir`, sorted.
fn packages(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.join("Cargo.toml").is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Every `.rs` file under `dir` (none when it does not exist).
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.to_string_lossy().replace('\\', "/")
}

/// The module-doc rule: the first line that is neither blank nor `#![...]` starts with `//!`.
pub fn module_doc(path: &str, text: &str) -> Option<Finding> {
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with("#![") {
            continue;
        }
        if t.starts_with("//!") {
            return None;
        }
        return Some(finding(
            path,
            i + 1,
            "module does not open with a `//!` comment saying what it is for",
        ));
    }
    Some(finding(
        path,
        1,
        "empty module: open it with a `//!` comment",
    ))
}

/// Whether `word` occurs in `text` as a whole name (bounded by anything but `[A-Za-z0-9_-]`).
fn names(text: &str, word: &str) -> bool {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_name) && !after.is_some_and(is_name)
    })
}

/// The tasks of xtask's dispatch `match task { "name" => ... }`, with their 1-based lines.
pub fn xtask_tasks(main_rs: &str) -> Vec<(usize, String)> {
    let mut tasks = Vec::new();
    let mut inside = false;
    for (i, line) in main_rs.lines().enumerate() {
        let t = line.trim();
        if t.starts_with("match task") {
            inside = true;
        } else if inside && t.starts_with("_ =>") {
            break;
        } else if inside {
            let Some(rest) = t.strip_prefix('"') else {
                continue;
            };
            if let Some((name, arm)) = rest.split_once('"') {
                if arm.trim_start().starts_with("=>") {
                    tasks.push((i + 1, name.to_string()));
                }
            }
        }
    }
    tasks
}

/// The architecture rule. `packages` holds (manifest path, folder name) pairs; `main_rs` is
/// xtask's main.rs at `main_path`.
pub fn architecture(
    arch: &str,
    packages: &[(String, String)],
    main_path: &str,
    main_rs: &str,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for (manifest, name) in packages {
        if !names(arch, name) {
            out.push(finding(
                manifest,
                1,
                format!("`{name}` is not named in docs/ARCHITECTURE.md"),
            ));
        }
    }
    let tasks = xtask_tasks(main_rs);
    if tasks.is_empty() {
        out.push(finding(
            main_path,
            1,
            "no `match task { \"name\" => ... }` dispatch found: tidy reads the task names there",
        ));
    }
    let xtask_lines: Vec<&str> = arch.lines().filter(|l| l.contains("xtask")).collect();
    for (line, task) in tasks {
        if !xtask_lines.iter().any(|l| names(l, &task)) {
            out.push(finding(
                main_path,
                line,
                format!(
                    "task `{task}` is not named in docs/ARCHITECTURE.md (on a line mentioning xtask)"
                ),
            ));
        }
    }
    out
}

/// The plugin dependency allowlist, on one plugin's Cargo.toml.
pub fn plugin_deps(path: &str, manifest: &str) -> Result<Vec<Finding>> {
    let doc: toml::Table = toml::from_str(manifest).with_context(|| format!("parsing {path}"))?;
    let mut tables = Vec::new();
    if let Some(deps) = doc.get("dependencies").and_then(toml::Value::as_table) {
        tables.push(deps);
    }
    if let Some(targets) = doc.get("target").and_then(toml::Value::as_table) {
        for target in targets.values() {
            if let Some(deps) = target.get("dependencies").and_then(toml::Value::as_table) {
                tables.push(deps);
            }
        }
    }
    let mut out = Vec::new();
    for deps in tables {
        for (key, spec) in deps {
            // `alias = { package = "real" }`: the real crate is what counts.
            let krate = spec
                .get("package")
                .and_then(toml::Value::as_str)
                .unwrap_or(key);
            if PLUGIN_DEPS.iter().any(|(name, _)| *name == krate) {
                continue;
            }
            let why = REFUSED.iter().find(|(name, _)| *name == krate).map_or(
                "not on the plugin allowlist (PLUGIN_DEPS in xtask/src/tidy.rs)",
                |(_, why)| why,
            );
            out.push(finding(
                path,
                dependency_line(manifest, key),
                format!("plugin depends on `{krate}`: {why}"),
            ));
        }
    }
    Ok(out)
}

/// The 1-based line declaring dependency `key` (`key = ..`, `key.workspace = ..`,
/// `[dependencies.key]`), or 1.
fn dependency_line(manifest: &str, key: &str) -> usize {
    manifest
        .lines()
        .position(|l| {
            let t = l.trim_start();
            t.strip_prefix(key)
                .is_some_and(|rest| rest.starts_with([' ', '=', '.', '\t']))
                || (t.starts_with('[') && t.contains(&format!("dependencies.{key}]")))
        })
        .map_or(1, |i| i + 1)
}

/// Whether a line opts out of a rule with a trailing `// tidy: <reason>`.
fn opted_out(line: &str) -> bool {
    line.split_once("// tidy:")
        .is_some_and(|(_, reason)| !reason.trim().is_empty())
}

/// The plugin I/O rule, on one file under plugins/*/src.
pub fn plugin_io(path: &str, text: &str) -> Vec<Finding> {
    if path.ends_with("/tests.rs") || path.contains("/tests/") {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            break;
        }
        if t.starts_with("//") || opted_out(line) {
            continue;
        }
        for (pattern, what) in PLUGIN_IO {
            if line.contains(pattern) {
                out.push(finding(
                    path,
                    i + 1,
                    format!(
                        "plugin uses `{pattern}` ({what}): plugins do no I/O, the host provides it"
                    ),
                ));
            }
        }
    }
    out
}

const UNWRAP_OR_DEFAULT: &str = ".unwrap_or_default()";

/// The `unwrap_or_default` rule, on one Rust file.
pub fn unwrap_or_default(path: &str, text: &str) -> Vec<Finding> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = line.rfind(UNWRAP_OR_DEFAULT) else {
            continue;
        };
        if line.trim_start().starts_with("//") || opted_out(line) {
            continue;
        }
        // With its dot: a line that starts with it continues the line above.
        let mut expr = line[..=at].to_string();
        let mut first = i;
        while first > 0 && i - first < 3 && continues(&expr) {
            first -= 1;
            expr = format!("{}\n{expr}", lines[first]);
        }
        if let Some(why) = serializes_or_hashes(&expr) {
            out.push(finding(
                path,
                i + 1,
                format!(
                    "`unwrap_or_default()` on {why}: a failure would silently become empty data; \
                     return the error (or say why it cannot fail with `// tidy: <reason>`)"
                ),
            ));
        }
    }
    out
}

/// Whether the chain ending in `expr` starts on an earlier line: its first line continues a
/// method chain, or it closes more parentheses than it opens.
fn continues(expr: &str) -> bool {
    let opens = expr.matches('(').count();
    let closes = expr.matches(')').count();
    expr.trim_start().starts_with('.') || closes > opens
}

/// What in `expr` serializes or hashes, if anything.
fn serializes_or_hashes(expr: &str) -> Option<&'static str> {
    const SERIALIZERS: &[&str] = &[
        "to_string",
        "to_string_pretty",
        "to_vec",
        "to_vec_pretty",
        "to_value",
        "to_writer",
        "to_writer_pretty",
    ];
    const DESERIALIZERS: &[&str] = &[
        "from_str",
        "from_slice",
        "from_value",
        "from_reader",
        "try_from",
    ];
    let serde = expr.contains("serde_json") || expr.contains("toml::");
    for (start, ident) in calls(expr) {
        let args = expr[start + ident.len() + 1..].trim_start();
        if SERIALIZERS.contains(&ident) && !args.starts_with(')') {
            return Some("a serialization");
        }
        if DESERIALIZERS.contains(&ident) && serde && expr[..start].ends_with("::") {
            return Some("a deserialization");
        }
        let lower = ident.to_ascii_lowercase();
        if ["hash", "xxh3", "digest"].iter().any(|h| lower.contains(h)) {
            return Some("a hash");
        }
    }
    None
}

/// Every function call `ident(` in `expr`: the identifier's byte offset and the identifier.
fn calls(expr: &str) -> Vec<(usize, &str)> {
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = expr.as_bytes();
    let mut out = Vec::new();
    for (paren, _) in expr.match_indices('(') {
        let mut start = paren;
        while start > 0 && is_ident(bytes[start - 1]) {
            start -= 1;
        }
        if start < paren {
            out.push((start, &expr[start..paren]));
        }
    }
    out
}

#[cfg(test)]
mod tests;
