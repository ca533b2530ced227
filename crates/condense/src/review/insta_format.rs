//! Snapshot files in insta's format, so `cargo insta review`, `accept` and `reject` work on
//! `condense snapshot`'s output unchanged.
//!
//! A file is insta's YAML header (`---`, `key: value` lines, `---`) and then the content, with
//! trailing whitespace trimmed and one final newline. The header is written as insta's own
//! emitter writes it (the same quoting rules and field order), so a snapshot cargo-insta
//! accepts (it re-writes the header) is byte for byte what `condense snapshot` wrote. Contents
//! are compared as insta compares them: trailing whitespace trimmed, `\r\n` read as `\n`.
//!
//! cargo-insta finds pending snapshots (`NAME.snap.new` beside `NAME.snap`) under the cargo
//! packages it is pointed at, so the snapshot folder gets a small `Cargo.toml` of its own
//! ([`ensure_manifest`]): `cargo insta review --manifest-path SNAPSHOTS/Cargo.toml` then
//! reviews exactly these snapshots.

use std::path::Path;

/// The header fields condense writes, in insta's order (source, description, expression,
/// input_file).
#[derive(Debug, Clone, Default)]
pub struct Header {
    /// What produced the snapshot (insta: the test's source file).
    pub source: String,
    /// One line for the reviewer: the stage's figures, or the retention.
    pub description: String,
    /// What the snapshot shows (insta: the asserted expression).
    pub expression: String,
    /// The transcript it was made from.
    pub input_file: String,
}

/// The file text: header, then `content` normalized as insta normalizes it.
pub fn file_text(header: &Header, content: &str) -> String {
    let mut out = String::from("---\n");
    for (key, value) in [
        ("source", &header.source),
        ("description", &header.description),
        ("expression", &header.expression),
        ("input_file", &header.input_file),
    ] {
        out.push_str(key);
        out.push_str(": ");
        out.push_str(&yaml_scalar(value));
        out.push('\n');
    }
    out.push_str("---\n");
    out.push_str(&normalize(content));
    out.push('\n');
    out
}

/// A snapshot file's content (what follows the header), normalized; `None` when `text` has no
/// insta header (a file written by condense before snapshots were insta's format: its whole
/// text is the content, so an old snapshot still compares, and differs, sensibly).
pub fn content_of(text: &str) -> String {
    let mut lines = text.split_inclusive('\n');
    let body = match lines.next() {
        Some(first) if first.trim_end() == "---" => {
            let mut offset = first.len();
            let mut found = false;
            for line in lines {
                offset += line.len();
                if line.trim_end() == "---" {
                    found = true;
                    break;
                }
            }
            if found {
                &text[offset..]
            } else {
                ""
            }
        }
        _ => text,
    };
    normalize(body)
}

/// insta's normalization of a file snapshot's content.
pub fn normalize(content: &str) -> String {
    content.trim_end().replace("\r\n", "\n")
}

/// Writes `dir/Cargo.toml` unless it exists: a package of no code that makes `dir` a place
/// cargo-insta looks for snapshots (its own workspace, so an enclosing one does not claim it).
pub fn ensure_manifest(dir: &Path) -> std::io::Result<()> {
    let path = dir.join("Cargo.toml");
    if path.exists() {
        return Ok(());
    }
    std::fs::write(path, MANIFEST)
}

const MANIFEST: &str = "\
# Written by `condense snapshot` so that cargo-insta reviews these snapshots:
#   cargo insta review --manifest-path THIS_FOLDER/Cargo.toml
# (accept, reject and pending-snapshots take the same flag). It holds no code; the lib path
# below does not need to exist.
[package]
name = \"condense-snapshots\"
version = \"0.0.0\"
edition = \"2021\"
publish = false

[lib]
path = \"condense-snapshots.rs\"

[workspace]
";

/// `value` as insta's YAML emitter writes a string: bare, or double-quoted when YAML would
/// read it as something else.
fn yaml_scalar(value: &str) -> String {
    if !needs_quotes(value) {
        return value.to_string();
    }
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\x0c' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\x7f' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// insta's (vendored yaml-rust's) `need_quotes`.
fn needs_quotes(s: &str) -> bool {
    s.is_empty()
        || s.starts_with(' ')
        || s.ends_with(' ')
        || s.starts_with(['&', '*', '?', '|', '-', '<', '>', '=', '!', '%', '@'])
        || s.contains(|c: char| {
            matches!(
                c,
                ':' | '{'
                    | '}'
                    | '['
                    | ']'
                    | ','
                    | '#'
                    | '`'
                    | '"'
                    | '\''
                    | '\\'
                    | '\0'..='\x06'
                    | '\t'
                    | '\n'
                    | '\r'
                    | '\x0e'..='\x1a'
                    | '\x1c'..='\x1f'
            )
        })
        || [
            "yes", "Yes", "YES", "no", "No", "NO", "True", "TRUE", "true", "False", "FALSE",
            "false", "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "~",
        ]
        .contains(&s)
        || s.starts_with('.')
        || s.starts_with("0x")
        || s.parse::<i64>().is_ok()
        || s.parse::<f64>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_quote_what_yaml_would_misread() {
        let h = Header {
            source: "condense snapshot".into(),
            description: "stage 1 `budget`: 1,200 -> 900 tokens".into(),
            expression: "01-budget".into(),
            input_file: "edge/a b.json".into(),
        };
        let text = file_text(&h, "line\n\n");
        assert_eq!(
            text,
            "---\nsource: condense snapshot\ndescription: \"stage 1 `budget`: 1,200 -> 900 tokens\"\nexpression: 01-budget\ninput_file: edge/a b.json\n---\nline\n"
        );
        assert_eq!(content_of(&text), "line");
        assert_eq!(yaml_scalar("12"), "\"12\"");
        assert_eq!(yaml_scalar("a\u{1b}b"), "a\u{1b}b");
        assert_eq!(yaml_scalar("a\u{1}\"b"), "\"a\\u0001\\\"b\"");
    }

    #[test]
    fn contents_compare_as_insta_compares_them() {
        assert_eq!(content_of("no header\r\nat all\n\n"), "no header\nat all");
        assert_eq!(content_of("---\nsource: x\n---\n---\nbody\n"), "---\nbody");
    }
}
