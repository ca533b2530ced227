//! Where things are in JSON text: the byte spans of values, array elements and object members,
//! found without building values.
//!
//! The readers parse with serde_json, which forgets positions. To write back the exact bytes of
//! what no stage changed, the container finds the spans of the message lists and their elements
//! here: a byte scan that allocates nothing (strings are skipped, not decoded), much cheaper than
//! a parse. It runs on text serde_json already accepted, so it is lenient: anything unexpected
//! gives `None` and the writer falls back to serializing.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ops::Range;

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The first non-whitespace position at or after `at`.
pub(crate) fn skip_ws(text: &[u8], mut at: usize) -> usize {
    while at < text.len() && is_ws(text[at]) {
        at += 1;
    }
    at
}

/// The end of the string whose opening quote is at `at` (just past the closing quote).
fn string_end(text: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        i = skip_plain(text, i);
        match *text.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// Skips string bytes that are neither `"` nor `\`, eight at a time: most of a transcript is
/// inside strings, and this keeps the scan a small fraction of a parse.
fn skip_plain(text: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Nonzero when some byte of `word` is `byte` (the classic SWAR zero-byte test).
    let has = |word: u64, byte: u8| {
        let x = word ^ (ONES * u64::from(byte));
        x.wrapping_sub(ONES) & !x & HIGH
    };
    while let Some(chunk) = text.get(i..i + 8) {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(chunk);
        let word = u64::from_le_bytes(bytes);
        if has(word, b'"') | has(word, b'\\') != 0 {
            break;
        }
        i += 8;
    }
    i
}

/// The span of the value starting at the first non-whitespace byte from `at`.
pub(crate) fn value(text: &[u8], at: usize) -> Option<Range<usize>> {
    let start = skip_ws(text, at);
    let first = *text.get(start)?;
    let end = match first {
        b'"' => string_end(text, start)?,
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            loop {
                match *text.get(i)? {
                    b'"' => {
                        i = string_end(text, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            break i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let mut i = start;
            while i < text.len() && !is_ws(text[i]) && !matches!(text[i], b',' | b']' | b'}') {
                i += 1;
            }
            i
        }
    };
    (end > start).then_some(start..end)
}

/// The spans of the elements of the array at `span`.
pub(crate) fn elements(text: &[u8], span: Range<usize>) -> Option<Vec<Range<usize>>> {
    if text.get(span.start) != Some(&b'[') {
        return None;
    }
    let mut out = Vec::new();
    let mut at = skip_ws(text, span.start + 1);
    if text.get(at) == Some(&b']') {
        return Some(out);
    }
    loop {
        let elem = value(text, at)?;
        at = skip_ws(text, elem.end);
        out.push(elem);
        match text.get(at)? {
            b',' => at += 1,
            b']' => return Some(out),
            _ => return None,
        }
    }
}

/// An object member: its key's span (with the quotes) and its value's.
pub(crate) type Member = (Range<usize>, Range<usize>);

/// The members of the object at `span`: the key's span (with its quotes) and the value's, in
/// order, duplicates included.
pub(crate) fn members(text: &[u8], span: Range<usize>) -> Option<Vec<Member>> {
    if text.get(span.start) != Some(&b'{') {
        return None;
    }
    let mut out = Vec::new();
    let mut at = skip_ws(text, span.start + 1);
    if text.get(at) == Some(&b'}') {
        return Some(out);
    }
    loop {
        let key = value(text, at)?;
        at = skip_ws(text, key.end);
        if text.get(at) != Some(&b':') {
            return None;
        }
        let val = value(text, at + 1)?;
        at = skip_ws(text, val.end);
        out.push((key, val));
        match text.get(at)? {
            b',' => at += 1,
            b'}' => return Some(out),
            _ => return None,
        }
    }
}

/// Whether the quoted key at `span` is `name` (decoding it only when it holds escapes).
fn key_is(text: &str, span: Range<usize>, name: &str) -> bool {
    let inner = &text[span.start + 1..span.end - 1];
    if !inner.contains('\\') {
        return inner == name;
    }
    serde_json::from_str::<String>(&text[span]).is_ok_and(|k| k == name)
}

/// The span of the value of `key` in the object at `span`: the last one when the key repeats
/// (serde_json keeps the last value, so that is what the readers saw).
pub(crate) fn member(text: &str, span: Range<usize>, key: &str) -> Option<Range<usize>> {
    members(text.as_bytes(), span)?
        .into_iter()
        .rev()
        .find(|(k, _)| key_is(text, k.clone(), key))
        .map(|(_, v)| v)
}

/// Finds values by JSON pointer in one text, remembering the arrays and objects it has scanned:
/// the conversations of a file (`/0/traj`, `/1/traj`, ...) share their ancestors, which are then
/// scanned once, not once per conversation.
#[derive(Default)]
pub(crate) struct Finder {
    elements: HashMap<usize, Vec<Range<usize>>>,
    members: HashMap<usize, Vec<Member>>,
}

impl Finder {
    /// The span of the value at a JSON pointer (RFC 6901, no wildcards) inside the value at
    /// `span`; for a repeated key, the last one's value.
    pub fn pointer(
        &mut self,
        text: &str,
        span: Range<usize>,
        pointer: &str,
    ) -> Option<Range<usize>> {
        let mut at = span;
        if pointer.is_empty() {
            return Some(at);
        }
        for token in pointer.strip_prefix('/')?.split('/') {
            let token = token.replace("~1", "/").replace("~0", "~");
            at = match text.as_bytes().get(at.start)? {
                b'[' => {
                    let i: usize = token.parse().ok()?;
                    let list = match self.elements.entry(at.start) {
                        Entry::Occupied(e) => e.into_mut(),
                        Entry::Vacant(e) => e.insert(elements(text.as_bytes(), at)?),
                    };
                    list.get(i)?.clone()
                }
                b'{' => {
                    let list = match self.members.entry(at.start) {
                        Entry::Occupied(e) => e.into_mut(),
                        Entry::Vacant(e) => e.insert(members(text.as_bytes(), at)?),
                    };
                    let found = list
                        .iter()
                        .rev()
                        .find(|(k, _)| key_is(text, k.clone(), &token));
                    found?.1.clone()
                }
                _ => return None,
            };
        }
        Some(at)
    }
}

/// [`Finder::pointer`] once.
#[cfg(test)]
pub(crate) fn pointer(text: &str, span: Range<usize>, pointer: &str) -> Option<Range<usize>> {
    Finder::default().pointer(text, span, pointer)
}

/// The whitespace that starts the line `at` is on, when only whitespace precedes `at` on it
/// (pretty-printed text); `None` when something else does (compact text).
pub(crate) fn line_indent(text: &str, at: usize) -> Option<&str> {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[line_start..at];
    before
        .bytes()
        .all(|b| b == b' ' || b == b'\t')
        .then_some(before)
}

/// The spans of the number literals outside strings, in order.
pub(crate) fn numbers(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => match string_end(bytes, i) {
                Some(end) => i = end,
                None => break,
            },
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                out.push(start..i);
            }
            _ => i += 1,
        }
    }
    out
}

/// Python-style separators: whether the first `:` and the first `,` outside strings are
/// followed by a space (`json.dumps` writes `", "` and `": "` unless told otherwise).
pub(crate) fn spaced_separators(text: &str) -> (bool, bool) {
    let bytes = text.as_bytes();
    let (mut colon, mut comma) = (None, None);
    let mut i = 0;
    while i < bytes.len() && (colon.is_none() || comma.is_none()) {
        match bytes[i] {
            b'"' => match string_end(bytes, i) {
                Some(end) => {
                    i = end;
                    continue;
                }
                None => break,
            },
            b':' if colon.is_none() => colon = Some(bytes.get(i + 1) == Some(&b' ')),
            b',' if comma.is_none() => comma = Some(bytes.get(i + 1) == Some(&b' ')),
            _ => {}
        }
        i += 1;
    }
    (colon.unwrap_or(false), comma.unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_of_values_elements_and_members() {
        let text = r#" { "a" : [1, "x\"]", {"b":[]} ] , "a": 2, "c\u0064": -0 } "#;
        let root = value(text.as_bytes(), 0).unwrap();
        assert_eq!(&text[root.clone()], text.trim());
        let a = pointer(text, root.clone(), "/a").unwrap();
        assert_eq!(&text[a], "2", "the last of a repeated key");
        let m = members(text.as_bytes(), root.clone()).unwrap();
        let first = m[0].1.clone();
        let elems = elements(text.as_bytes(), first).unwrap();
        let texts: Vec<&str> = elems.iter().map(|r| &text[r.clone()]).collect();
        assert_eq!(texts, ["1", r#""x\"]""#, r#"{"b":[]}"#]);
        assert_eq!(&text[pointer(text, root, "/cd").unwrap()], "-0");
        assert_eq!(spaced_separators(r#"{"a": 1, "b": "x,y"}"#), (true, true));
        assert_eq!(spaced_separators(r#"{"a":"b: c","d":1}"#), (false, false));
        assert_eq!(line_indent("[\n    {}", 6), Some("    "));
        assert_eq!(line_indent("[{}", 1), None);
    }
}
