//! Parsing a large JSON text and reading a long list of messages on every core.
//!
//! Parsing and turning parsed JSON into the model are most of a read, and each message is parsed
//! and read on its own:
//! - [`parse`]: the text's root is scanned once ([`scan::Finder`], which [`crate::container`]
//!   needs anyway to write back what no stage changed), then the elements of its long arrays
//!   (the message list) are parsed by serde_json in runs, one per core, and the root is put
//!   together around them. Anything unusual (no scan, a piece serde_json refuses, nesting near
//!   serde_json's limit) gives `None`, and the caller parses the whole text as before, so the
//!   value and any error are serde_json's own;
//! - [`read_all`]: a long list is cut into one run of consecutive messages per core, each run
//!   read on its own thread with its own [`Notes`], and the results and notes put back together
//!   in list order. The outcome is the sequential one: the same messages, the first error in
//!   list order, the same warnings.

use crate::error::Ctx;
use crate::json::{Map, Result};
use crate::notes::Notes;
use crate::scan::{self, Scanned};
use serde_json::Value;
use std::ops::Range;

/// Nesting the pieces may reach: serde_json refuses a text nested 128 deep, and a piece parsed
/// alone starts two levels down (the root, its array); well below, both parses agree.
const MAX_DEPTH: usize = 100;

/// The value of the whole `text`, as `serde_json::from_str` gives it, parsed on every core;
/// `None` when it cannot be done that way (see the module docs). `finder` holds the scan of the
/// text's root ([`scan::Finder::scan`]).
pub(crate) fn parse(text: &str, finder: &scan::Finder) -> Option<Value> {
    let (span, depth, parts) = finder.scanned()?;
    // The root must be all of the text but JSON whitespace: nothing trails it (JSONL).
    if span != scan::trimmed(text.as_bytes(), 0..text.len()) || depth > MAX_DEPTH {
        return None;
    }
    let piece = |span: &Range<usize>| serde_json::from_str::<Value>(text.get(span.clone())?).ok();
    // A long array's elements on every core; anything else as it is.
    let member = |span: &Range<usize>| match finder.known_elements(span.start) {
        Some(elements) if elements.len() >= PARALLEL_MIN_ITEMS => {
            parse_elements(text, elements).map(Value::Array)
        }
        _ => piece(span),
    };
    match parts {
        Scanned::Object(members) => {
            let mut map = Map::new();
            for (key, value) in members {
                let key: String = serde_json::from_str(text.get(key.clone())?).ok()?;
                // As serde_json does: a repeated key keeps its first place and its last value.
                map.insert(key, member(value)?);
            }
            Some(Value::Object(map))
        }
        Scanned::Array => member(&span),
    }
}

/// The values of the array elements at `spans`, parsed in one run per core.
fn parse_elements(text: &str, spans: &[Range<usize>]) -> Option<Vec<Value>> {
    let runs = split(spans.to_vec(), cores());
    // A run is parsed as one array (its elements and the separators between them, bracketed):
    // one serde_json parser per run reuses its string buffer, where one per element would grow
    // a new one for each.
    let parse_run = |run: Vec<Range<usize>>| -> Option<Vec<Value>> {
        let (first, last) = (run.first()?, run.last()?);
        let inner = text.get(first.start..last.end)?;
        let mut array = String::with_capacity(inner.len() + 2);
        array.push('[');
        array.push_str(inner);
        array.push(']');
        let values: Vec<Value> = serde_json::from_str(&array).ok()?;
        // The scan and the parse agree on where the elements are, or the scan is not trusted.
        (values.len() == run.len()).then_some(values)
    };
    let parsed: Vec<Option<Vec<Value>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = runs
            .into_iter()
            .map(|(_, run)| scope.spawn(move || parse_run(run)))
            .collect();
        // A panic in serde_json (a bug) gives up on the parallel parse: the caller parses again.
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    });
    let mut out = Vec::with_capacity(spans.len());
    for run in parsed {
        out.extend(run?);
    }
    Some(out)
}

/// The cores to use.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Lists shorter than this are read on the calling thread: starting a thread costs about what
/// reading a few dozen small messages does.
pub(crate) const PARALLEL_MIN_ITEMS: usize = 256;

/// `read(item, index, ctx)` of every item, in order; on several threads when the list is long.
pub(crate) fn read_all<T: Send, R: Send>(
    items: Vec<T>,
    ctx: &Ctx<'_>,
    read: impl Fn(T, usize, &Ctx<'_>) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let threads = cores();
    if threads < 2 || items.len() < PARALLEL_MIN_ITEMS {
        return items
            .into_iter()
            .enumerate()
            .map(|(i, item)| read(item, i, ctx))
            .collect();
    }
    let mut runs = split(items, threads);
    let first = runs.remove(0);
    let read = &read;
    let place = ctx.place();
    let (head, rest) = std::thread::scope(|scope| {
        let handles: Vec<_> = runs
            .into_iter()
            .map(|(offset, run)| {
                scope.spawn(move || {
                    let notes = Notes::default();
                    let out = read_run(run, offset, &place.noting_into(&notes), read);
                    (out, notes)
                })
            })
            .collect();
        let head = read_run(first.1, first.0, ctx, read);
        let rest: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        (head, rest)
    });
    let mut out = head?;
    for joined in rest {
        // A panic in a reader is a bug: carried on to the caller as if it happened here.
        let (run, notes) = joined.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        out.extend(run?);
        ctx.absorb(notes);
    }
    Ok(out)
}

fn read_run<T, R>(
    run: Vec<T>,
    offset: usize,
    ctx: &Ctx<'_>,
    read: &(impl Fn(T, usize, &Ctx<'_>) -> Result<R> + Sync),
) -> Result<Vec<R>> {
    run.into_iter()
        .enumerate()
        .map(|(i, item)| read(item, offset + i, ctx))
        .collect()
}

/// `items` cut into `n` runs of consecutive items (the last ones shorter), each with the index
/// of its first item.
fn split<T>(mut items: Vec<T>, n: usize) -> Vec<(usize, Vec<T>)> {
    let size = items.len().div_ceil(n);
    let mut runs = Vec::with_capacity(n);
    let mut starts: Vec<usize> = (0..items.len()).step_by(size.max(1)).collect();
    while let Some(start) = starts.pop() {
        runs.push((start, items.split_off(start)));
    }
    runs.reverse();
    runs
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::FormatError;

    #[test]
    fn a_long_list_reads_as_it_would_in_order_with_its_notes_and_first_error() {
        let notes = Notes::default();
        let ctx = Ctx::with_notes("x", &notes);
        let items: Vec<usize> = (0..1000).collect();
        let read = |item: usize, i: usize, ctx: &Ctx<'_>| {
            assert_eq!(item, i, "each item gets its own index");
            if i % 300 == 7 {
                ctx.note_unknown(format!("role `r{}`", i / 300 % 2));
                ctx.warn(format!("item {i}"));
            }
            Ok(item * 2)
        };
        let out = read_all(items.clone(), &ctx, read).unwrap();
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert_eq!(
            notes.into_warnings(),
            [
                "item 7",
                "item 307",
                "item 607",
                "item 907",
                "4 messages or items condense does not understand are kept verbatim and \
                 counted as their JSON: role `r0` (2), role `r1` (2)"
            ]
        );

        let failing = |item: usize, _: usize, ctx: &Ctx<'_>| match item {
            400 | 900 => Err(ctx.missing(&format!("/{item}"), "x")),
            _ => Ok(item),
        };
        let err = read_all(items, &Ctx::new("x"), failing).unwrap_err();
        assert!(matches!(err, FormatError::Unexpected { at, .. } if at == "x: /400"));
    }

    /// `parse` of `text` after its scan, as the container does it.
    fn parse_scanned(text: &str) -> Option<Value> {
        let mut finder = scan::Finder::default();
        finder.scan(text, scan::trimmed(text.as_bytes(), 0..text.len()));
        parse(text, &finder)
    }

    #[test]
    fn a_large_text_parses_to_serde_jsons_value_or_not_at_all() {
        let element = |i: usize| {
            format!(
                r#"{{"role": "user", "n": [{i}, -0, 1E2, 1.5e-7, 12345678901234567890],
                "content": "line \"{i}\"\n\u00e9\ud83d\ude00 [x] {{y}}", "role": "tool"}}"#
            )
        };
        let list: Vec<String> = (0..600).map(element).collect();
        let body = format!(
            " \n{{\"model\": \"m\", \"messages\": [\n  {}\n],\r\n \"meta\": {{\"a\": [[1], []]}},              \"model\": \"last\", \"short\": [1, 2]}}\n",
            list.join(",\n  ")
        );
        let expected: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(parse_scanned(&body), Some(expected));
        assert_eq!(
            parse_scanned(&body)
                .unwrap()
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["model", "messages", "meta", "short"],
            "a repeated key keeps its first place"
        );
        let list = format!("[{}]", list.join(","));
        assert_eq!(parse_scanned(&list), serde_json::from_str(&list).ok());
        assert!(body.len() >= crate::container::PARALLEL_FROM);
        let doc = crate::read(body.as_bytes(), "big.json", &Default::default()).unwrap();
        let messages = &doc.conversations()[0].messages;
        assert_eq!(messages.len(), 600);
        assert_eq!(
            messages[599].content.text(),
            "line \"599\"\n\u{e9}\u{1f600} [x] {y}"
        );
        assert_eq!(
            doc.write().unwrap(),
            body.as_bytes(),
            "written back byte for byte"
        );

        // Not one JSON value, or not one serde_json takes: left to serde_json's own parse.
        let two_lines = format!("{}\n{}", element(0), element(1));
        assert_eq!(parse_scanned(&two_lines), None);
        let bad_escape = list.replacen("\\n", "\\q", 1);
        assert_eq!(parse_scanned(&bad_escape), None);
        let deep = format!(
            "[{}{}, {}]",
            "[".repeat(120),
            "]".repeat(120),
            &list[1..list.len() - 1]
        );
        assert!(serde_json::from_str::<Value>(&deep).is_ok());
        assert_eq!(parse_scanned(&deep), None, "nested near serde_json's limit");
    }

    #[test]
    fn runs_cover_every_item_once_in_order() {
        for (len, n) in [(0, 2), (1, 2), (5, 2), (1000, 3), (7, 8)] {
            let runs = split((0..len).collect::<Vec<usize>>(), n);
            assert!(runs.len() <= n);
            let joined: Vec<usize> = runs
                .iter()
                .flat_map(|(start, run)| {
                    assert_eq!(run.first().copied().unwrap_or(*start), *start);
                    run.iter().copied()
                })
                .collect();
            assert_eq!(joined, (0..len).collect::<Vec<_>>());
        }
    }
}
