//! Where things are in JSON text: the byte spans of values, array elements and object members,
//! found without building values.
//!
//! The readers parse with serde_json, which forgets positions. To write back the exact bytes of
//! what no stage changed, the container finds the spans of the message lists and their elements
//! here: a byte scan that allocates nothing (strings are skipped, not decoded), much cheaper than
//! a parse. It runs on text serde_json already accepted, so it is lenient: anything unexpected
//! gives `None` and the writer falls back to serializing.

use crate::known::KnownList;
use crate::parallel::Lookup;
use condense_model::escape::next_escape;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ops::Range;

pub(crate) fn is_ws(b: u8) -> bool {
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
        // Most of a transcript is inside strings: skipped sixteen bytes at a time, to the next
        // quote, backslash or (not JSON, stepped over) control character.
        i = next_escape(text, i);
        match *text.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// The span of the value starting at the first non-whitespace byte from `at`.
pub(crate) fn value(text: &[u8], at: usize) -> Option<Range<usize>> {
    value_deep(text, at).map(|(span, _)| span)
}

/// [`value`], with how deep its arrays and objects nest (0 for a string, number or literal).
fn value_deep(text: &[u8], at: usize) -> Option<(Range<usize>, usize)> {
    let start = skip_ws(text, at);
    let first = *text.get(start)?;
    let mut deepest = 0;
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
                    b'{' | b'[' => {
                        depth += 1;
                        deepest = deepest.max(depth);
                    }
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
    (end > start).then_some((start..end, deepest))
}

/// The span of a value serde_json accepted at `span` (a JSON text, or a JSONL line): `span`
/// without the JSON whitespace around it. No scan: the parse already found exactly one value.
pub(crate) fn trimmed(text: &[u8], span: Range<usize>) -> Range<usize> {
    let start = skip_ws(text, span.start).min(span.end);
    let mut end = span.end;
    while end > start && is_ws(text[end - 1]) {
        end -= 1;
    }
    start..end
}

/// The spans of the elements of the array at `span`.
pub(crate) fn elements(text: &[u8], span: Range<usize>) -> Option<Vec<Range<usize>>> {
    array_at(text, span.start, None).map(|(elements, _, _)| elements)
}

/// Given the span of an array's first element, the spans of the first elements when they are
/// known from an earlier read ([`crate::known`]): the scan then steps over them.
pub(crate) type KnownElements<'r, 'k> =
    &'r mut (dyn FnMut(&Range<usize>) -> Option<Vec<Range<usize>>> + 'k);

/// The elements of the array starting at `start`, the array's end (just past its `]`) and how
/// deep it nests: one scan gives all three. With `known`, a known prefix of the elements is
/// not scanned; its nesting is not counted (it read before: it nests less than
/// `crate::parallel`'s limit, which is all the depth is asked about).
fn array_at(
    text: &[u8],
    start: usize,
    mut known: Option<KnownElements<'_, '_>>,
) -> Option<(Vec<Range<usize>>, usize, usize)> {
    if text.get(start) != Some(&b'[') {
        return None;
    }
    let mut out = Vec::new();
    let mut at = skip_ws(text, start + 1);
    if text.get(at) == Some(&b']') {
        return Some((out, at + 1, 1));
    }
    let mut deepest = 0;
    if let Some(known) = known.as_mut() {
        let first = value(text, at)?;
        if let Some(spans) = known(&first) {
            at = skip_ws(text, spans.last()?.end);
            out = spans;
            match text.get(at)? {
                b',' => at += 1,
                b']' => return Some((out, at + 1, deepest + 1)),
                _ => return None,
            }
        }
    }
    loop {
        let (elem, depth) = value_deep(text, at)?;
        deepest = deepest.max(depth);
        at = skip_ws(text, elem.end);
        out.push(elem);
        match text.get(at)? {
            b',' => at += 1,
            b']' => return Some((out, at + 1, deepest + 1)),
            _ => return None,
        }
    }
}

/// An object member: its key's span (with the quotes) and its value's.
pub(crate) type Member = (Range<usize>, Range<usize>);

/// The members of the object at `span`: the key's span (with its quotes) and the value's, in
/// order, duplicates included.
#[cfg(test)]
pub(crate) fn members(text: &[u8], span: Range<usize>) -> Option<Vec<Member>> {
    members_keeping_arrays(text, span, &mut HashMap::new())
}

/// The members of the object at `span` (as the test-only `members` gives them), putting the
/// elements of each member that is an array into `arrays` by the array's start: scanning a
/// member's value to find its end finds its elements on the way, so a request body's message
/// array is scanned once, not once for the body and again for it.
fn members_keeping_arrays(
    text: &[u8],
    span: Range<usize>,
    arrays: &mut HashMap<usize, Vec<Range<usize>>>,
) -> Option<Vec<Member>> {
    object_at(text, span.start, arrays, None).map(|(members, _, _)| members)
}

/// [`members_keeping_arrays`] of the object starting at `start`, with the object's end (just
/// past its `}`) and how deep it nests; `known` is asked about the array of the member it names
/// (the message list: `messages`, or a Responses body's `input`).
pub(crate) fn object_at<'k>(
    text: &[u8],
    start: usize,
    arrays: &mut HashMap<usize, Vec<Range<usize>>>,
    mut known: Option<(&[u8], KnownElements<'_, 'k>)>,
) -> Option<(Vec<Member>, usize, usize)> {
    if text.get(start) != Some(&b'{') {
        return None;
    }
    let mut out = Vec::new();
    let mut at = skip_ws(text, start + 1);
    if text.get(at) == Some(&b'}') {
        return Some((out, at + 1, 1));
    }
    let mut deepest = 0;
    loop {
        let key = value(text, at)?;
        at = skip_ws(text, key.end);
        if text.get(at) != Some(&b':') {
            return None;
        }
        let start = skip_ws(text, at + 1);
        let (val, depth) = match text.get(start)? {
            b'[' => {
                // The key as written: one spelled with escapes is only not stepped over.
                let known = match known.as_mut() {
                    Some((list, k)) if text.get(key.start + 1..key.end - 1) == Some(list) => {
                        Some(&mut **k)
                    }
                    _ => None,
                };
                let (elements, end, depth) = array_at(text, start, known)?;
                arrays.insert(start, elements);
                (start..end, depth)
            }
            _ => value_deep(text, start)?,
        };
        deepest = deepest.max(depth);
        at = skip_ws(text, val.end);
        out.push((key, val));
        match text.get(at)? {
            b',' => at += 1,
            b'}' => return Some((out, at + 1, deepest + 1)),
            _ => return None,
        }
    }
}

/// Whether the quoted key at `span` is `name` (decoding it only when it holds escapes).
pub(crate) fn key_is(text: &str, span: Range<usize>, name: &str) -> bool {
    let inner = &text[span.start + 1..span.end - 1];
    if !inner.contains('\\') {
        return inner == name;
    }
    serde_json::from_str::<String>(&text[span]).is_ok_and(|k| k == name)
}

/// The known list ([`crate::known`]) the array whose first element is at `first` starts with,
/// found by that element's key and matched by hashing, not scanning, the text it covers (or the
/// match `lookup` holds for this text, taken again unless a longer list is known since).
pub(crate) fn known_prefix(
    text: &[u8],
    first: &Range<usize>,
    lookup: Lookup<'_>,
) -> Option<crate::known::Matched> {
    let format = crate::parallel::list_format(lookup.elements);
    let key = crate::known::list_key(format, text.get(first.clone())?);
    let lists = (lookup.lists)(key);
    match lookup.matched.and_then(std::cell::Cell::take) {
        Some(matched) => matched.again(text, first, key, lists),
        None => crate::known::Matched::find(text, first, key, lists),
    }
}

/// Finds values by JSON pointer in one text, remembering the arrays and objects it has scanned:
/// the conversations of a file (`/0/traj`, `/1/traj`, ...) share their ancestors, which are then
/// scanned once, not once per conversation.
#[derive(Default)]
pub(crate) struct Finder {
    elements: HashMap<usize, Vec<Range<usize>>>,
    members: HashMap<usize, Vec<Member>>,
    /// What [`Finder::scan_knowing`] found: the value's span and how deep it nests.
    scanned: Option<(Range<usize>, usize)>,
    /// The message list a scan found known from an earlier read ([`crate::known`]), by the
    /// array's start, with the hash of the text it matched on.
    known: Option<(usize, KnownList, crate::known::Hashed)>,
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
                b'{' => self.member(text, at, &token)?,
                _ => return None,
            };
        }
        Some(at)
    }

    /// Scans the object or array at `span` for its members or elements (and an object's arrays'
    /// elements), so that later lookups in it cost nothing.
    #[cfg(test)]
    pub fn scan(&mut self, text: &str, span: Range<usize>) {
        self.scan_knowing(text, span, None);
    }

    /// Scans the object or array at `span` as `scan` does (test-only), stepping over the known prefix of the message list (the root's
    /// `messages`, a Responses body's `input`, or the root array) when `lookup` knows its text
    /// ([`crate::known`]).
    pub fn scan_knowing(&mut self, text: &str, span: Range<usize>, lookup: Option<Lookup<'_>>) {
        let bytes = text.as_bytes();
        let mut found: Option<(usize, KnownList, crate::known::Hashed)> = None;
        let mut step = |first: &Range<usize>| {
            let (list, spans, hashed) = known_prefix(bytes, first, lookup?)?.into_parts();
            // Known by its first element's start, which `known_list` is asked with.
            found = Some((first.start, list, hashed));
            Some(spans)
        };
        let list = crate::body::list_member(crate::parallel::list_format(
            lookup.and_then(|l| l.elements),
        ));
        let known: Option<KnownElements<'_, '_>> = lookup.is_some().then_some(&mut step);
        self.scanned = match bytes.get(span.start) {
            Some(b'{') => object_at(
                bytes,
                span.start,
                &mut self.elements,
                known.map(|k| (list.as_bytes(), k)),
            )
            .map(|(members, end, depth)| {
                self.members.insert(span.start, members);
                (span.start..end, depth)
            }),
            Some(b'[') => array_at(bytes, span.start, known).map(|(elements, end, depth)| {
                self.elements.insert(span.start, elements);
                (span.start..end, depth)
            }),
            _ => None,
        };
        self.known = found;
    }

    /// The known list ([`Finder::scan_knowing`]) of the array whose elements are `elements`.
    pub fn known_list(&self, elements: &[Range<usize>]) -> Option<&KnownList> {
        let first = elements.first()?.start;
        self.known
            .as_ref()
            .filter(|(at, ..)| *at == first)
            .map(|(_, list, _)| list)
    }

    /// The hash of the text the known list matched on ([`crate::known::prefix_of`] goes on
    /// from it), taken out.
    pub fn take_known_hashed(&mut self) -> Option<crate::known::Hashed> {
        self.known.take().map(|(.., hashed)| hashed)
    }

    /// The value [`Finder::scan_knowing`] found (its span, how deep it nests), with its members (an
    /// object) or elements (an array).
    pub fn scanned(&self) -> Option<(Range<usize>, usize, Scanned<'_>)> {
        let (span, depth) = self.scanned.clone()?;
        let parts = match (
            self.members.get(&span.start),
            self.elements.get(&span.start),
        ) {
            (Some(members), _) => Scanned::Object(members),
            (None, Some(_)) => Scanned::Array,
            (None, None) => return None,
        };
        Some((span, depth, parts))
    }

    /// The elements of the array at `start`, if a scan found them.
    pub fn known_elements(&self, start: usize) -> Option<&[Range<usize>]> {
        self.elements.get(&start).map(Vec::as_slice)
    }

    /// The span of the value of `key` in the object at `span`: the last one when the key repeats
    /// (serde_json keeps the last value, so that is what the readers saw). The object's members
    /// and the elements of its arrays are remembered.
    pub fn member(&mut self, text: &str, span: Range<usize>, key: &str) -> Option<Range<usize>> {
        let list = match self.members.entry(span.start) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(members_keeping_arrays(
                text.as_bytes(),
                span,
                &mut self.elements,
            )?),
        };
        let found = list
            .iter()
            .rev()
            .find(|(k, _)| key_is(text, k.clone(), key));
        Some(found?.1.clone())
    }

    /// [`elements`], remembered.
    pub fn elements(&mut self, text: &str, span: Range<usize>) -> Option<Vec<Range<usize>>> {
        match self.elements.entry(span.start) {
            Entry::Occupied(e) => Some(e.get().clone()),
            Entry::Vacant(e) => Some(e.insert(elements(text.as_bytes(), span)?).clone()),
        }
    }
}

/// The parts of a scanned value.
pub(crate) enum Scanned<'f> {
    Object(&'f [Member]),
    /// Its elements: [`Finder::known_elements`].
    Array,
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

    #[test]
    fn a_string_ends_at_its_closing_quote_wherever_its_escapes_fall() {
        // An escaped quote or backslash at every offset of an 8-byte word, then more words.
        for pad in 0..17 {
            for escape in [r#"\""#, r"\\", r"\n"] {
                let s = format!(r#""{}{escape}{}é""#, "a".repeat(pad), "b".repeat(pad));
                let text = format!("[{s}, 1]");
                assert_eq!(
                    elements(text.as_bytes(), 0..text.len()).unwrap()[0],
                    1..1 + s.len()
                );
            }
        }
    }
}
