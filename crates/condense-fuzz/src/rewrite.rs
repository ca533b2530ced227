//! Deterministic rewrites of a JSON or JSONL text into the non-canonical forms real files
//! have (issue 12 item 4): each keeps the JSON value and changes only bytes.

use crate::spans;

/// Python's `json.dumps` separators: `", "` and `": "` outside strings.
pub fn python_separators(text: &[u8]) -> Vec<u8> {
    let mut out = text.to_vec();
    for i in spans::outside_strings(text, 0, text.len())
        .into_iter()
        .rev()
    {
        if matches!(text[i], b',' | b':') && !matches!(text.get(i + 1), Some(b' ' | b'\n')) {
            out.insert(i + 1, b' ');
        }
    }
    out
}

/// CRLF line ends.
pub fn crlf(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + text.len() / 32);
    for (i, &b) in text.iter().enumerate() {
        if b == b'\n' && (i == 0 || text[i - 1] != b'\r') {
            out.push(b'\r');
        }
        out.push(b);
    }
    out
}

/// Every `/` inside a string escaped as `\/`.
pub fn escaped_slashes(text: &[u8]) -> Vec<u8> {
    let outside: std::collections::HashSet<usize> = spans::outside_strings(text, 0, text.len())
        .into_iter()
        .collect();
    let mut out = Vec::with_capacity(text.len());
    for (i, &b) in text.iter().enumerate() {
        if b == b'/' && !outside.contains(&i) {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// `\ud83d\ude00` (an emoji as a surrogate pair) and `\u00e9` at the start of every string
/// value longer than 40 bytes.
pub fn surrogate_escapes(text: &[u8]) -> Vec<u8> {
    let mut out = text.to_vec();
    let mut nodes: Vec<_> = spans::scan(text)
        .into_iter()
        .filter(|n| n.kind == spans::Kind::String && n.end - n.start > 40)
        .collect();
    nodes.sort_by_key(|n| std::cmp::Reverse(n.start));
    for n in nodes {
        out.splice(n.start + 1..n.start + 1, *b"\\ud83d\\ude00\\u00e9");
    }
    out
}

/// JSONL: a blank line after every line, and trailing spaces on every line.
pub fn blank_lines_and_trailing_spaces(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in text.split_inclusive(|&b| b == b'\n') {
        match line.strip_suffix(b"\n") {
            Some(body) => {
                out.extend_from_slice(body);
                out.extend_from_slice(b"  \n\n");
            }
            None => out.extend_from_slice(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_keep_strings_apart() {
        let t = br#"{"a":"x/y, z:w","b":[1,2]}"#;
        assert_eq!(python_separators(t), br#"{"a": "x/y, z:w", "b": [1, 2]}"#);
        assert_eq!(escaped_slashes(t), br#"{"a":"x\/y, z:w","b":[1,2]}"#);
        assert_eq!(crlf(b"a\nb\r\n"), b"a\r\nb\r\n");
        assert_eq!(
            blank_lines_and_trailing_spaces(b"a\nb\n"),
            b"a  \n\nb  \n\n"
        );
    }
}
