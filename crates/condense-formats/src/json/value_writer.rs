//! A [`Value`] written through a serde_json [`Formatter`], as serde_json's own serializer
//! writes it, with strings scanned for what needs escaping sixteen bytes at a time
//! ([`condense_model::escape::quoted_pieces`]).
//!
//! The writer serializes every message a stage changed (at 1M tokens, 183 of them a turn).
//! serde_json looks up every byte of every string in its escape table, one byte per step, and
//! hands every run between two escapes to the formatter.
//!
//! The output is serde_json's, byte for byte: the formatter is called in the order serde_json's
//! `Serializer` calls it (an empty array or object is `begin` then `end`; every element and
//! entry is wrapped in its `begin_*`/`end_*` pair), and a string is cut into the same fragments
//! at the same escapes. The tests hold the two to each other on every shipped session and on
//! strings of every escape.

use condense_model::escape::{quoted_pieces, Piece};
use serde_json::ser::Formatter;
use serde_json::Value;
use std::io;

/// Writes `value` onto `out` through `fmt`: the bytes `serde_json::Serializer::with_formatter`
/// writes for it, `fmt` being [`super::Ascii`] (whose own `ascii` is `ascii`) around serde_json's
/// compact or pretty formatter.
pub(crate) fn write_value<F: Formatter>(
    value: &Value,
    out: &mut Vec<u8>,
    fmt: &mut F,
    ascii: bool,
) -> io::Result<()> {
    match value {
        Value::Null => fmt.write_null(out),
        Value::Bool(b) => fmt.write_bool(out, *b),
        Value::Number(n) => write_number(n, out, fmt),
        Value::String(s) => write_str(s, out, ascii),
        Value::Array(items) => {
            fmt.begin_array(out)?;
            for (i, item) in items.iter().enumerate() {
                fmt.begin_array_value(out, i == 0)?;
                write_value(item, out, fmt, ascii)?;
                fmt.end_array_value(out)?;
            }
            fmt.end_array(out)
        }
        Value::Object(map) => {
            fmt.begin_object(out)?;
            for (i, (key, item)) in map.iter().enumerate() {
                fmt.begin_object_key(out, i == 0)?;
                write_str(key, out, ascii)?;
                fmt.end_object_key(out)?;
                fmt.begin_object_value(out)?;
                write_value(item, out, fmt, ascii)?;
                fmt.end_object_value(out)?;
            }
            fmt.end_object(out)
        }
    }
}

/// A number as serde_json's `Number` serializes itself: an unsigned or a negative integer as
/// such, a float as `write_f64` (a `Value` holds finite floats only; anything else is `null`,
/// as serde_json writes it).
fn write_number<F: Formatter>(
    n: &serde_json::Number,
    out: &mut Vec<u8>,
    fmt: &mut F,
) -> io::Result<()> {
    if let Some(u) = n.as_u64() {
        fmt.write_u64(out, u)
    } else if let Some(i) = n.as_i64() {
        fmt.write_i64(out, i)
    } else {
        match n.as_f64() {
            Some(f) if f.is_finite() => fmt.write_f64(out, f),
            _ => fmt.write_null(out),
        }
    }
}

/// A quoted, escaped string, as serde_json's serializer writes it through [`super::Ascii`] (the
/// only formatter that writes strings its own way): each run between two escapes as it is, or
/// with every non-ASCII character as `\uXXXX` when `ascii` (the runs are those serde_json hands
/// its formatter's `write_string_fragment`); each escape as serde_json spells it (the quote,
/// the backslash and the bytes below 0x20). Written here rather than through the formatter,
/// whose calls cost more than the bytes of a run between two line ends.
fn write_str(s: &str, out: &mut Vec<u8>, ascii: bool) -> io::Result<()> {
    quoted_pieces(s, |piece| match piece {
        Piece::Run(run) if ascii => super::write_ascii_escaped(out, run),
        Piece::Run(run) => {
            out.extend_from_slice(run.as_bytes());
            Ok(())
        }
        Piece::Spelled(spelled) => {
            out.extend_from_slice(spelled.as_bytes());
            Ok(())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::ser::{CompactFormatter, PrettyFormatter};

    fn serde_json_bytes<F: Formatter>(value: &Value, fmt: F) -> Vec<u8> {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
        serde::Serialize::serialize(value, &mut ser).unwrap();
        out
    }

    fn ours<F: Formatter>(value: &Value, mut fmt: F, ascii: bool) -> Vec<u8> {
        let mut out = Vec::new();
        write_value(value, &mut out, &mut fmt, ascii).unwrap();
        out
    }

    fn assert_same(value: &Value) {
        assert_eq!(
            String::from_utf8(ours(value, CompactFormatter, false)).unwrap(),
            String::from_utf8(serde_json_bytes(value, CompactFormatter)).unwrap()
        );
        assert_eq!(
            ours(value, PrettyFormatter::with_indent(b"\t"), false),
            serde_json_bytes(value, PrettyFormatter::with_indent(b"\t"))
        );
        // The style's own formatter: non-ASCII escaped, Python's spaced separators.
        let ascii = || super::super::Ascii {
            inner: CompactFormatter,
            ascii: true,
            colon: true,
            comma: true,
        };
        assert_eq!(ours(value, ascii(), true), serde_json_bytes(value, ascii()));
    }

    #[test]
    fn every_byte_that_needs_escaping_is_escaped_as_serde_json_does_at_every_offset() {
        // Each escapable byte (and some that are not: DEL, '/', non-ASCII) at every offset
        // within and across words, so the word scan meets it in every lane.
        let specials: Vec<char> = (0u8..0x20)
            .map(char::from)
            .chain(['"', '\\', '/', '\x7f', 'é', '€', '😀'])
            .collect();
        for special in specials {
            for at in 0..20 {
                let mut s = "a".repeat(at);
                s.push(special);
                s.push_str(&"b".repeat(19 - at));
                assert_same(&Value::String(s.clone()));
                // Two in a row, and one as an object key.
                s.push(special);
                assert_same(&serde_json::json!({ s.clone(): [s] }));
            }
        }
    }

    #[test]
    fn structures_and_numbers_are_written_as_serde_json_writes_them() {
        let value = serde_json::json!({
            "empty_array": [],
            "empty_object": {},
            "nested": [[], {}, [1, [2, {"a": null}]], {"b": {"c": []}}],
            "numbers": [0, 1, -1, u64::MAX, i64::MIN, 1.5, -0.0, 1e300, 2.5e-8, 100000.0],
            "bools": [true, false],
            "text": "line one\nline \"two\"\ttabbed\\",
        });
        assert_same(&value);
        assert_same(&Value::Array(Vec::new()));
        assert_same(&Value::Null);
    }

    #[test]
    fn every_value_of_every_shipped_session_is_written_as_serde_json_writes_it() {
        let mut count = 0;
        for file in crate::tests::support::fixture_files() {
            let text = std::fs::read_to_string(&file).unwrap();
            // The whole file as JSON, else each line (JSONL); what does not parse (the edge
            // fixtures that are not JSON by design) is left out.
            let docs: Vec<Value> = match serde_json::from_str(&text) {
                Ok(doc) => vec![doc],
                Err(_) => text
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect(),
            };
            for doc in docs {
                assert_same(&doc);
                count += 1;
            }
        }
        assert!(count > 1_000, "only {count} values");
    }
}
