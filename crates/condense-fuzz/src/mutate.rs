//! The mutator: turns a shipped input into a nearby one, by operations a real file meets —
//! damaged bytes, cut files, repeated or lost lines, numbers and escapes written another way,
//! other whitespace — and the adversarial ones (deep nesting, huge strings).
//!
//! Structure-aware operations work on the spans of [`crate::spans`] and keep every other byte,
//! so most mutated inputs still parse and reach the readers' mapping and writing code; byte
//! operations test the rejection paths.

use crate::rng::Rng;
use crate::spans::{self, Kind, Node};

/// Numbers as files write them, canonical or not (issue 12 item 3).
const NUMBERS: &[&str] = &[
    "12345678901234567890123",
    "1e5",
    "-0",
    "1E2",
    "1.0",
    "0.1",
    "-1",
    "1e400",
    "18446744073709551616",
    "-9223372036854775809",
    "0.30000000000000004",
    "5e-324",
    "1.5E+10",
    "100000.0",
    "-0.0",
    "0",
];

/// Values a field may hold instead of the expected one.
const REPLACEMENTS: &[&str] = &[
    "null", "true", "false", "0", "\"\"", "{}", "[]", "\"x\"", "{ }", "[\n]", "-1",
];

/// Bytes that matter to a JSON reader.
const INTERESTING: &[u8] = b"\"\\{}[],:\n\r\t 0\x00\xff\xc3\xe2\x80";

/// One mutation of `input`; `others` are other inputs to splice from. Returns the bytes and
/// the names of the operations applied.
pub fn mutate(input: &[u8], others: &[&[u8]], rng: &mut Rng) -> (Vec<u8>, Vec<&'static str>) {
    mutate_within(input, others, rng, 3 << 20)
}

/// [`mutate`] with huge strings of at most `huge` bytes (the binary targets keep them smaller:
/// a debug build tokenizes a few MB slowly, and a process per case is the budget).
pub fn mutate_within(
    input: &[u8],
    others: &[&[u8]],
    rng: &mut Rng,
    huge: usize,
) -> (Vec<u8>, Vec<&'static str>) {
    let mut out = input.to_vec();
    let mut ops = Vec::new();
    let rounds = 1 + rng.below(3);
    for _ in 0..rounds {
        // Mostly operations that keep the text JSON, so the readers go past parsing.
        let op = if rng.chance(3, 4) {
            structural(&mut out, rng, huge)
        } else {
            None
        };
        let op = match op {
            Some(op) => op,
            None => {
                if rng.chance(1, 2) {
                    lines(&mut out, others, rng)
                } else {
                    bytes(&mut out, rng)
                }
            }
        };
        ops.push(op);
    }
    (out, ops)
}

fn replace(out: &mut Vec<u8>, start: usize, end: usize, with: &[u8]) {
    out.splice(start..end, with.iter().copied());
}

/// A structure-aware operation, or `None` when the text has no spans for it.
fn structural(out: &mut Vec<u8>, rng: &mut Rng, huge: usize) -> Option<&'static str> {
    let nodes = spans::scan(out);
    if nodes.is_empty() {
        return None;
    }
    let of = |kind: Kind| -> Vec<&Node> { nodes.iter().filter(|n| n.kind == kind).collect() };
    match rng.below(12) {
        0 | 1 => {
            let numbers = of(Kind::Number);
            if numbers.is_empty() {
                return None;
            }
            let n = *rng.pick(&numbers);
            replace(out, n.start, n.end, rng.pick(NUMBERS).as_bytes());
            Some("number")
        }
        2 | 3 => {
            let strings = of(Kind::String);
            if strings.is_empty() {
                return None;
            }
            let s = *rng.pick(&strings);
            escape(out, s.start, s.end, rng).then_some("escape")
        }
        4 => {
            let n = rng.pick(&nodes);
            let with = rng.pick(REPLACEMENTS).as_bytes().to_vec();
            replace(out, n.start, n.end, &with);
            Some("retype")
        }
        5 | 6 => {
            let containers: Vec<&Node> = nodes.iter().filter(|n| !n.children.is_empty()).collect();
            if containers.is_empty() {
                return None;
            }
            let c = *rng.pick(&containers);
            elements(out, c, rng)
        }
        7 => {
            // Python's json.dumps separators, in one value or the whole file.
            let n = if rng.chance(1, 2) {
                &nodes[0]
            } else {
                rng.pick(&nodes)
            };
            let at = spans::outside_strings(out, n.start, n.end);
            for &i in at.iter().rev() {
                if matches!(out[i], b',' | b':') {
                    out.insert(i + 1, b' ');
                }
            }
            Some("separators")
        }
        8 => {
            let n = rng.pick(&nodes);
            let depth = *rng.pick(&[16usize, 127, 128, 129, 500, 20_000]);
            let (open, close) = if rng.chance(1, 2) {
                (&b"["[..], &b"]"[..])
            } else {
                (&b"{\"a\":"[..], &b"}"[..])
            };
            let inner = out[n.start..n.end].to_vec();
            let mut with = open.repeat(depth);
            with.extend_from_slice(&inner);
            with.extend_from_slice(&close.repeat(depth));
            replace(out, n.start, n.end, &with);
            Some("nesting")
        }
        9 => {
            let strings = of(Kind::String);
            if strings.is_empty() {
                return None;
            }
            let s = *rng.pick(&strings);
            let size = (*rng.pick(&[70_000usize, 1 << 20, 3 << 20])).min(huge);
            let unit: &[u8] = rng.pick::<&[u8]>(&[
                &b"x"[..],
                "é".as_bytes(),
                b"\\n",
                b"\\u00e9",
                "😀".as_bytes(),
            ]);
            let mut with = b"\"".to_vec();
            with.extend_from_slice(&unit.repeat(size / unit.len()));
            with.push(b'"');
            replace(out, s.start, s.end, &with);
            Some("huge-string")
        }
        10 => {
            // Empty containers written with whitespace inside.
            let empty: Vec<&Node> = nodes
                .iter()
                .filter(|n| matches!(n.kind, Kind::Object | Kind::Array) && n.children.is_empty())
                .collect();
            if empty.is_empty() {
                return None;
            }
            let n = *rng.pick(&empty);
            let with = [out[n.start], b'\n', b' ', out[n.end - 1]];
            replace(out, n.start, n.end, &with);
            Some("empty-container")
        }
        _ => {
            // A key written twice.
            let objects: Vec<&Node> = nodes
                .iter()
                .filter(|n| n.kind == Kind::Object && !n.children.is_empty())
                .collect();
            if objects.is_empty() {
                return None;
            }
            let o = *rng.pick(&objects);
            let i = rng.below(o.children.len());
            let (s, e) = o.children[i];
            let mut member = out[s..e].to_vec();
            member.push(b',');
            out.splice(s..s, member);
            Some("duplicate-key")
        }
    }
}

/// Rewrites one character of the string at `start..end` (quotes included) as an escape, or
/// inserts an escaped emoji. False when the string has nothing to rewrite.
fn escape(out: &mut Vec<u8>, start: usize, end: usize, rng: &mut Rng) -> bool {
    let Ok(inner) = std::str::from_utf8(&out[start + 1..end - 1]) else {
        return false;
    };
    // Character positions outside escape sequences.
    let mut plain = Vec::new();
    let mut chars = inner.char_indices();
    while let Some((i, c)) = chars.next() {
        if c == '\\' {
            if chars.next().is_some_and(|(_, c)| c == 'u') {
                for _ in 0..4 {
                    chars.next();
                }
            }
        } else {
            plain.push((i, c));
        }
    }
    let base = start + 1;
    if plain.is_empty() || rng.chance(1, 4) {
        let at = plain
            .get(rng.below(plain.len() + 1))
            .map_or(inner.len(), |p| p.0);
        let with: &[u8] = rng.pick::<&[u8]>(&[
            &b"\\ud83d\\ude00"[..],
            b"\\/",
            b"\\u00e9",
            b"\\ud800",
            b"\\t",
        ]);
        out.splice(base + at..base + at, with.iter().copied());
        return true;
    }
    let (i, c) = *rng.pick(&plain);
    let with = if c == '/' && rng.chance(1, 2) {
        "\\/".to_string()
    } else {
        let mut units = [0u16; 2];
        c.encode_utf16(&mut units)
            .iter()
            .map(|u| format!("\\u{u:04x}"))
            .collect()
    };
    replace(out, base + i, base + i + c.len_utf8(), with.as_bytes());
    true
}

/// Deletes, duplicates or swaps elements (members) of a container.
fn elements(out: &mut Vec<u8>, c: &Node, rng: &mut Rng) -> Option<&'static str> {
    let kids = &c.children;
    let i = rng.below(kids.len());
    match rng.below(3) {
        0 => {
            // Delete element i with one separating comma.
            let (s, e) = if i + 1 < kids.len() {
                (kids[i].0, kids[i + 1].0)
            } else if i > 0 {
                (kids[i - 1].1, kids[i].1)
            } else {
                kids[i]
            };
            replace(out, s, e, b"");
            Some("delete-element")
        }
        1 => {
            let (s, e) = kids[i];
            let mut copy = out[s..e].to_vec();
            copy.push(b',');
            out.splice(s..s, copy);
            Some("duplicate-element")
        }
        _ => {
            let j = rng.below(kids.len());
            if i == j {
                return None;
            }
            let (a, b) = if i < j {
                (kids[i], kids[j])
            } else {
                (kids[j], kids[i])
            };
            let (ta, tb) = (out[a.0..a.1].to_vec(), out[b.0..b.1].to_vec());
            replace(out, b.0, b.1, &ta);
            replace(out, a.0, a.1, &tb);
            Some("swap-elements")
        }
    }
}

/// Line operations: the JSONL damage of copies, merges and editors.
fn lines(out: &mut Vec<u8>, others: &[&[u8]], rng: &mut Rng) -> &'static str {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            out.iter()
                .enumerate()
                .filter(|(_, &b)| b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .filter(|&s| s < out.len())
        .collect();
    let line = |i: usize| -> (usize, usize) {
        let s = starts[i];
        let e = starts.get(i + 1).copied().unwrap_or(out.len());
        (s, e)
    };
    if starts.is_empty() {
        out.extend_from_slice(b"\n");
        return "blank-line";
    }
    let i = rng.below(starts.len());
    let (s, e) = line(i);
    match rng.below(8) {
        0 => {
            let mut copy = out[s..e].to_vec();
            if !copy.ends_with(b"\n") {
                copy.insert(0, b'\n');
            }
            let at = if rng.chance(1, 2) {
                e
            } else {
                line(rng.below(starts.len())).0
            };
            out.splice(at..at, copy);
            "duplicate-line"
        }
        1 => {
            replace(out, s, e, b"");
            "delete-line"
        }
        2 => {
            let (s2, e2) = line(rng.below(starts.len()));
            if (s2, e2) == (s, e) || !out[s..e].ends_with(b"\n") || !out[s2..e2].ends_with(b"\n") {
                return "swap-lines-noop";
            }
            let (a, b) = if s < s2 {
                ((s, e), (s2, e2))
            } else {
                ((s2, e2), (s, e))
            };
            let (ta, tb) = (out[a.0..a.1].to_vec(), out[b.0..b.1].to_vec());
            replace(out, b.0, b.1, &ta);
            replace(out, a.0, a.1, &tb);
            "swap-lines"
        }
        3 => {
            // CRLF everywhere.
            let mut crlf = Vec::with_capacity(out.len() + starts.len());
            for (k, &b) in out.iter().enumerate() {
                if b == b'\n' && (k == 0 || out[k - 1] != b'\r') {
                    crlf.push(b'\r');
                }
                crlf.push(b);
            }
            *out = crlf;
            "crlf"
        }
        4 => {
            let end = if out[s..e].ends_with(b"\n") { e - 1 } else { e };
            let pad: &[u8] = rng.pick::<&[u8]>(&[&b" "[..], b"  ", b"\t", b" \r"]);
            out.splice(end..end, pad.iter().copied());
            "trailing-space"
        }
        5 => {
            let blank: &[u8] = rng.pick::<&[u8]>(&[&b"\n"[..], b"\n\n", b"   \n", b"\r\n"]);
            out.splice(s..s, blank.iter().copied());
            "blank-line"
        }
        6 if !others.is_empty() => {
            // A line of another input.
            let other = *rng.pick(others);
            let count = other.iter().filter(|&&b| b == b'\n').count().max(1);
            let k = rng.below(count);
            let line: Vec<u8> = other.split(|&b| b == b'\n').nth(k).unwrap_or(b"").to_vec();
            let mut with = line;
            with.push(b'\n');
            out.splice(s..s, with);
            "splice-line"
        }
        _ => {
            let cut = s + rng.below(e - s + 1);
            out.truncate(cut);
            "truncate-in-line"
        }
    }
}

/// Byte damage.
fn bytes(out: &mut Vec<u8>, rng: &mut Rng) -> &'static str {
    if out.is_empty() {
        out.push(*rng.pick(INTERESTING));
        return "insert-byte";
    }
    let at = rng.below(out.len());
    match rng.below(6) {
        0 => {
            out[at] ^= 1 << rng.below(8);
            "bit-flip"
        }
        1 => {
            out[at] = *rng.pick(INTERESTING);
            "set-byte"
        }
        2 => {
            out.truncate(at);
            "truncate"
        }
        3 => {
            let end = (at + 1 + rng.below(64)).min(out.len());
            out.drain(at..end);
            "delete-bytes"
        }
        4 => {
            out.insert(at, *rng.pick(INTERESTING));
            "insert-byte"
        }
        _ => {
            if out.starts_with(b"\xef\xbb\xbf") {
                out.drain(..3);
            } else {
                out.splice(0..0, *b"\xef\xbb\xbf");
            }
            "byte-order-mark"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutation_is_deterministic_and_changes_the_input() {
        let input = br#"{"messages":[{"role":"user","content":"a/b"},{"role":"assistant","content":"ok","n":1}]}"#;
        let mut changed = 0;
        for case in 0..200 {
            let (a, ops) = mutate(input, &[], &mut Rng::for_case(7, case));
            let (b, _) = mutate(input, &[], &mut Rng::for_case(7, case));
            assert_eq!(a, b);
            assert!(!ops.is_empty());
            changed += usize::from(a != input);
        }
        assert!(changed > 150, "{changed}");
    }
}
