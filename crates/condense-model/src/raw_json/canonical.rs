//! Whether a JSON text is already its own compact form: exactly what [`super::compact::write`]
//! gives for the value it parses to.
//!
//! A reader that keeps a whole JSON object as [`super::RawJson`] (a Claude Code line as its
//! event's envelope) parses it into a tree and writes the tree back as text. Most such text was
//! written compact in the first place, by a serializer that spells JSON as serde_json does; for
//! that text the check here (a few instructions a byte, no allocation) lets the reader copy it
//! instead, with the very bytes it would have written.
//!
//! The rules are serde_json's: no whitespace between tokens; strings escaped as
//! [`super::compact`] escapes them (`\"`, `\\`, `\b \t \n \f \r` by name, other control
//! characters as `\u00xx` in lowercase hex, nothing else); integers only, as written. A number
//! with a fraction or an exponent, more than 18 digits or `-0` (serde_json may spell those
//! another way), a key twice in one object (parsing keeps one), more than [`MAX_KEYS`] keys in
//! an object or a nesting deeper than [`MAX_DEPTH`] make the text "not canonical": the caller
//! then goes through the tree as before, so the check never decides what a text means, only
//! whether the slow way can be skipped.

use crate::escape::next_escape;
use std::ops::Range;

/// Objects with more keys are not checked for repeated keys (the check is quadratic): their
/// text is "not canonical".
const MAX_KEYS: usize = 64;

/// serde_json refuses deeper nesting (its recursion limit is 128).
const MAX_DEPTH: usize = 127;

/// The members of a top-level JSON object (the span of each key, quotes included, and of its
/// value), when `text` is canonical; `None` otherwise, or when it is not an object.
pub(crate) fn object_members(text: &str) -> Option<Vec<(Range<usize>, Range<usize>)>> {
    let mut check = Check {
        bytes: text.as_bytes(),
        at: 0,
        keys: Vec::new(),
        members: Some(Vec::new()),
    };
    let whole = check.bytes.first() == Some(&b'{') && check.value(0) && check.at == text.len();
    whole.then(|| check.members.unwrap_or_default())
}

/// Whether `text` is canonical (any JSON value).
pub(crate) fn is_canonical(text: &str) -> bool {
    let mut check = Check {
        bytes: text.as_bytes(),
        at: 0,
        keys: Vec::new(),
        members: None,
    };
    check.value(0) && check.at == text.len()
}

struct Check<'t> {
    bytes: &'t [u8],
    at: usize,
    /// The keys of the objects being read, innermost last (to find a key twice).
    keys: Vec<Range<usize>>,
    /// The top-level object's members, when wanted.
    members: Option<Vec<(Range<usize>, Range<usize>)>>,
}

impl Check<'_> {
    fn value(&mut self, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        match self.bytes.get(self.at) {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.integer(),
            _ => false,
        }
    }

    fn object(&mut self, depth: usize) -> bool {
        self.at += 1;
        if self.eat(b'}') {
            return true;
        }
        let base = self.keys.len();
        loop {
            let key_start = self.at;
            if !self.string() {
                return false;
            }
            let key = key_start..self.at;
            let seen = &self.keys[base..];
            if seen.len() >= MAX_KEYS
                || seen
                    .iter()
                    .any(|k| self.bytes[k.clone()] == self.bytes[key.clone()])
            {
                return false;
            }
            self.keys.push(key.clone());
            if !self.eat(b':') {
                return false;
            }
            let value_start = self.at;
            if !self.value(depth + 1) {
                return false;
            }
            if depth == 0 {
                if let Some(members) = &mut self.members {
                    members.push((key, value_start..self.at));
                }
            }
            if self.eat(b',') {
                continue;
            }
            self.keys.truncate(base);
            return self.eat(b'}');
        }
    }

    fn array(&mut self, depth: usize) -> bool {
        self.at += 1;
        if self.eat(b']') {
            return true;
        }
        loop {
            if !self.value(depth + 1) {
                return false;
            }
            if !self.eat(b',') {
                return self.eat(b']');
            }
        }
    }

    /// A string escaped exactly as serde_json escapes it.
    fn string(&mut self) -> bool {
        if !self.eat(b'"') {
            return false;
        }
        loop {
            // The next byte serde_json would escape: a quote, a backslash (an escape here) or
            // a raw control character (never canonical).
            self.at = next_escape(self.bytes, self.at);
            match self.bytes.get(self.at) {
                Some(b'"') => {
                    self.at += 1;
                    return true;
                }
                Some(b'\\') => {
                    let escape = self.bytes.get(self.at + 1..).unwrap_or_default();
                    let len = match escape {
                        [b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't', ..] => 2,
                        [b'u', b'0', b'0', high @ (b'0' | b'1'), low, ..] => {
                            let Some(low) = lower_hex(*low) else {
                                return false;
                            };
                            // The five with a name are written by it.
                            if matches!((high - b'0') * 16 + low, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d)
                            {
                                return false;
                            }
                            6
                        }
                        _ => return false,
                    };
                    self.at += len;
                }
                // A raw control character (not JSON), or the text ends inside the string.
                _ => return false,
            }
        }
    }

    /// An integer as serde_json writes it back: no leading zero, no `-0`, at most 18 digits
    /// (every such integer is read as an `i64` or `u64`), no fraction or exponent.
    fn integer(&mut self) -> bool {
        let negative = self.eat(b'-');
        let digits = self.at;
        while matches!(self.bytes.get(self.at), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        let count = self.at - digits;
        let leading_zero = self.bytes.get(digits) == Some(&b'0') && (count > 1 || negative);
        (1..=18).contains(&count)
            && !leading_zero
            && !matches!(self.bytes.get(self.at), Some(b'.' | b'e' | b'E'))
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        let found = self.bytes.get(self.at..self.at + word.len()) == Some(word);
        if found {
            self.at += word.len();
        }
        found
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.bytes.get(self.at) == Some(&byte);
        if found {
            self.at += 1;
        }
        found
    }
}

fn lower_hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::Value;

    /// What the check must say: the text parses, and its value's compact form is the text.
    fn oracle(text: &str) -> bool {
        serde_json::from_str::<Value>(text).is_ok_and(|v| {
            let mut out = String::new();
            super::super::compact::write(&v, &mut out);
            out == text
        })
    }

    /// Numbers the check leaves to the slow way on purpose: fractions, exponents, `-0`, 19
    /// digits and more.
    fn has_number_left_out(v: &Value) -> bool {
        match v {
            Value::Number(n) => {
                n.is_f64()
                    || n.as_i64()
                        .is_some_and(|i| i.unsigned_abs() >= 10u64.pow(18))
                    || n.as_u64().is_some_and(|u| u >= 10u64.pow(18))
            }
            Value::Array(items) => items.iter().any(has_number_left_out),
            Value::Object(map) => map.values().any(has_number_left_out),
            _ => false,
        }
    }

    /// Never "canonical" when it is not (the caller would copy the wrong text); "canonical"
    /// whenever it is, but for the numbers left out.
    fn agrees(text: &str) -> bool {
        let canonical = oracle(text);
        let left_out = serde_json::from_str::<Value>(text).is_ok_and(|v| has_number_left_out(&v));
        let expected = canonical && !left_out;
        assert_eq!(is_canonical(text), expected, "{text:?}");
        if text.starts_with('{') {
            assert_eq!(object_members(text).is_some(), expected, "{text:?}");
        }
        expected
    }

    #[test]
    fn compact_text_is_canonical_and_every_other_spelling_is_not() {
        for text in [
            r#"{"type":"user","n":12,"neg":-3,"z":0,"t":true,"f":false,"x":null,"a":[1,[],{}]}"#,
            r#"{"s":"tab\tline\nquote\"slash\\ctl\u001f\u0000 del é 日本 / ok"}"#,
            "[]",
            "{}",
            r#""""#,
            "123456789012345678",
            // Not canonical: whitespace, other escapes, numbers serde_json spells otherwise,
            // a key twice, not JSON at all.
            r#"{"a": 1}"#,
            r#" {"a":1}"#,
            r#"{"a":1} "#,
            r#"{"a":"\/"}"#,
            r#"{"a":"\u00e9"}"#,
            r#"{"a":"\u001F"}"#,
            r#"{"a":"\u0009"}"#,
            r#"{"a":"\ud83d\ude00"}"#,
            r#"{"a":1.0}"#,
            r#"{"a":1e5}"#,
            r#"{"a":-0}"#,
            r#"{"a":01}"#,
            "1234567890123456789",
            r#"{"a":1,"a":2}"#,
            r#"{"a":{"b":1,"b":1}}"#,
            r#"{"a":1,}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":"x"#,
            "tru",
            "",
        ] {
            agrees(text);
        }
        let text = r#"{"type":"user","message":{"role":"user","content":"hi"},"uuid":"u1"}"#;
        let members = object_members(text).unwrap();
        let named: Vec<(&str, &str)> = members
            .iter()
            .map(|(k, v)| (&text[k.clone()], &text[v.clone()]))
            .collect();
        assert_eq!(
            named,
            [
                (r#""type""#, r#""user""#),
                (r#""message""#, r#"{"role":"user","content":"hi"}"#),
                (r#""uuid""#, r#""u1""#)
            ]
        );
        assert!(object_members("[1]").is_none());
    }

    /// Generated values written compact, then changed a byte at a time: the check agrees
    /// with the oracle on every one.
    #[test]
    fn agrees_with_parse_and_write_on_generated_texts() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let pieces = [
            "{", "}", "[", "]", ",", ":", "\"", "\\", "\\n", "\\u0001", "\\u00e9", "\\/", "1", "0",
            "-", ".5", "e3", "true", "null", " ", "\n", "a", "é", "\"k\":", "\"k\":1",
        ];
        let mut canonical = 0;
        for _ in 0..20_000 {
            let mut text = String::new();
            for _ in 0..next(12) {
                text.push_str(pieces[next(pieces.len() as u64) as usize]);
            }
            // Alone, and inside a valid object, where most of them are strings or values.
            for text in [
                text.clone(),
                format!("{{\"a\":{text}}}"),
                format!("{{\"a\":\"{text}\"}}"),
            ] {
                canonical += usize::from(agrees(&text));
            }
        }
        // Both answers were given many times.
        assert!(
            (2_000..58_000).contains(&canonical),
            "{canonical} canonical"
        );
    }
}
