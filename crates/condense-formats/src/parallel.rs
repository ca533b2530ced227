//! Parsing a large JSON text and reading a long list of messages on every core.
//!
//! Parsing and turning parsed JSON into the model are most of a read, and each message is parsed
//! and read on its own:
//! - [`parse`]: the text's root is scanned once ([`scan::Finder`], which [`crate::container`]
//!   needs anyway to write back what no stage changed), then the elements of its long arrays
//!   (the message list) are parsed by serde_json in runs, one per core, and the root is put
//!   together around them. Anything unusual (no scan, a piece serde_json refuses, nesting near
//!   serde_json's limit) gives `None`, and the caller parses the whole text as before, so the
//!   value and any error are serde_json's own. The message list (the root's `messages`, or the
//!   root array) is read by [`crate::quick`] element by element, in the same runs: when every
//!   element is a message it reads, the list comes back as messages ([`QuickList`]) and the
//!   value holds stubs for the format detection; otherwise as the elements' values. A short
//!   message list is read so too, on the calling thread, when the read is given what an
//!   earlier one knew ([`parse_scanning`]): the messages it knew are left unread, and the rest
//!   go straight into the model rather than through a JSON tree (a proxied request of 130
//!   messages, 7.7 M instructions before, 4.2 M after);
//! - [`read_all`]: a long list is cut into one run of consecutive messages per core, each run
//!   read on rayon's pool with its own [`Notes`], and the results and notes put back together
//!   in list order. The outcome is the sequential one: the same messages, the first error in
//!   list order, the same warnings (a Claude Code session's lines, `crate::claude_code`);
//! - [`map_in_order`]: the same cut for work that cannot fail or note anything (a JSONL
//!   session's lines parsed, `crate::lines`), its results in list order.

use crate::error::Ctx;
use crate::frames::{self, FrameMemo, Member};
use crate::json::{Map, Result};
use crate::known::{self, KnownList};
use crate::notes::Notes;
use crate::quick;
use crate::scan::{self, Scanned};
use crate::select::{Slot, SlotKind};
use crate::Format;
use condense_model::Message;
use serde_json::Value;
use std::ops::Range;

/// Nesting the pieces may reach: serde_json refuses a text nested 128 deep, and a piece parsed
/// alone starts two levels down (the root, its array); well below, both parses agree.
const MAX_DEPTH: usize = 100;

/// A message list [`crate::quick`] read whole: the value holds its stubs ([`quick::stubs`]).
pub(crate) struct QuickList {
    /// The root member it is (`messages`), or `None` for the root itself.
    pub key: Option<String>,
    pub messages: Vec<Message>,
    /// The stubs the value holds, kept for a later read ([`crate::known::KnownList::stubs`]).
    pub stubs: Vec<Value>,
    /// The messages left unread, known from an earlier read ([`crate::known`]).
    pub unread: Option<Unread>,
    /// Members of the body's frame a read of the same bytes made before ([`crate::frames`]):
    /// the value holds stubs in their places.
    pub frame: Vec<Member>,
    /// An OpenAI Chat or Responses list ([`Lookup::elements`]): each element's value, `None`
    /// for one left unread; the format's reader makes the messages of them
    /// ([`crate::container`]), and `messages` is empty until then.
    pub elements: Option<Vec<Option<Value>>>,
}

/// Reads the element at an index of a message list into its message (its JSON pointer given).
pub(crate) type ElementReader = fn(Value, usize, &Ctx<'_>, &str) -> Result<Message>;

/// The messages of a list left unread ([`crate::known`]): placeholders in the list.
#[derive(Debug, Clone)]
pub(crate) struct Unread {
    /// Per message of the list: a placeholder.
    pub mask: Vec<bool>,
    /// The known fingerprint of each message of the prefix the earlier read covered.
    pub prints: Vec<u128>,
}

/// What a read knows of the lists an earlier read saw ([`crate::known`]): the lists known under
/// a first element's key ([`crate::known::first_key`]), and a match already made on this very
/// text ([`crate::known::Matched`]), taken once instead of asking and hashing again.
#[derive(Clone, Copy)]
pub(crate) struct Lookup<'a> {
    pub lists: &'a dyn Fn(u64) -> Vec<KnownList>,
    pub matched: Option<&'a std::cell::Cell<Option<crate::known::Matched>>>,
    /// The frame members read before ([`crate::frames`]), for a body read with its format
    /// said.
    pub frames: Option<&'a FrameMemo>,
    /// The format whose own reader the message list's elements are parsed for: an OpenAI Chat
    /// body's `messages` or a Responses body's `input` ([`crate::known::reads_elements`]; the
    /// format said, not detected; set by the reader, [`parse_scanning`]). Its known lists have
    /// keys of their own ([`crate::known::list_key`]). `None`: the list is read quick.
    pub elements: Option<Format>,
}

/// The format a message list's member name and known-list keys are those of: the format whose
/// reader its elements are parsed for ([`Lookup::elements`]), else Anthropic's (a list read
/// quick).
pub(crate) fn list_format(elements: Option<Format>) -> Format {
    elements.unwrap_or(Format::Anthropic)
}

impl QuickList {
    /// Whether the value lacks JSON that the list stands for: unread messages, or frame
    /// members taken from the memo. Such a list cannot be put back ([`QuickList::restore`]);
    /// the text is read again whole instead.
    pub fn stands_for_unparsed(&self) -> bool {
        self.unread.is_some() || !self.frame.is_empty()
    }

    /// The messages of an OpenAI Chat or Responses list's elements
    /// ([`QuickList::elements`]), each read by `read` (the element at an index, its pointer;
    /// `ptr`: the list's pointer), each unread one a placeholder.
    pub fn read_elements(&mut self, read: ElementReader, ctx: &Ctx<'_>, ptr: &str) -> Result<()> {
        let Some(elements) = self.elements.take() else {
            return Ok(());
        };
        let reading = elements.iter().filter(|e| e.is_some()).count();
        self.messages = read_all_of(elements, reading, ctx, |element, i, ctx| match element {
            Some(value) => read(value, i, ctx, &crate::json::child_at(ptr, i)),
            None => Ok(known::placeholder(i)),
        })?;
        Ok(())
    }

    /// Puts the exact JSON of the messages back in place of their stubs in `root` (never for
    /// a list with unread messages or frame members: [`take_quick`] reads those again).
    pub fn restore(self, root: &mut Value) {
        let values = match self.elements {
            // Every element parsed (no unread one: `stands_for_unparsed`).
            Some(elements) => Value::Array(elements.into_iter().flatten().collect()),
            None => Value::Array(self.messages.into_iter().map(quick::to_value).collect()),
        };
        match self.key {
            None => *root = values,
            Some(key) => {
                if let Some(slot) = root.get_mut(key.as_str()) {
                    *slot = values;
                }
            }
        }
    }
}

/// The value of the whole `text`, as `serde_json::from_str` gives it, parsed on every core;
/// `None` when it cannot be done that way (see the module docs). `finder` holds the scan of the
/// text's root ([`scan::Finder::scan_knowing`]). With `quick`, a long message list (the root's
/// `messages`, or the root array) whose every element [`crate::quick`] reads is returned as
/// messages, its stubs in the value; then `frames` gives the root's `system` and `tools` when
/// their bytes were read before ([`crate::frames`]), and keeps them when not.
pub(crate) fn parse(
    text: &str,
    finder: &scan::Finder,
    quick: bool,
    (frames, elements): (Option<&FrameMemo>, Option<Format>),
) -> Option<(Value, Option<QuickList>)> {
    let (span, depth, parts) = finder.scanned()?;
    let for_reader = elements.is_some();
    let list_member = crate::body::list_member(list_format(elements));
    // The root must be all of the text but JSON whitespace: nothing trails it (JSONL).
    if span != scan::trimmed(text.as_bytes(), 0..text.len()) || depth > MAX_DEPTH {
        return None;
    }
    let piece = |span: &Range<usize>| serde_json::from_str::<Value>(text.get(span.clone())?).ok();
    // The message list as messages when they may be, however short (what an earlier read
    // knew of it is left unread); another long array's elements on every core; anything else
    // as it is.
    let member = |span: &Range<usize>, list: bool| match finder.known_elements(span.start) {
        Some(elements) if quick && list => {
            parse_messages(text, elements, finder.known_list(elements), for_reader)
        }
        Some(elements) if elements.len() >= PARALLEL_MIN_ITEMS => {
            Some((Value::Array(parse_elements(text, elements)?), None))
        }
        _ => Some((piece(span)?, None)),
    };
    match parts {
        Scanned::Object(members) => {
            let mut map = Map::new();
            let mut quick_list: Option<QuickList> = None;
            // The members a memo may give ([`crate::frames`]), read once the list is: they are
            // taken only beside a quick list. A repeated key keeps its last value.
            let mut deferred: Vec<(String, Range<usize>)> = Vec::new();
            for (key, value) in members {
                let key: String = serde_json::from_str(text.get(key.clone())?).ok()?;
                deferred.retain(|(k, _)| *k != key);
                if frames.is_some() && quick && frames::is_member(&key, value, elements) {
                    deferred.push((key.clone(), value.clone()));
                    // Its place (a repeated key keeps its first); its value below.
                    map.insert(key, Value::Null);
                    continue;
                }
                let is_list = key == list_member;
                let (value, messages) = member(value, is_list)?;
                if is_list {
                    // A repeated key keeps its last value: the list read last.
                    quick_list = messages.map(|list| QuickList {
                        key: Some(key.clone()),
                        ..list
                    });
                }
                // As serde_json does: a repeated key keeps its first place and its last value.
                map.insert(key, value);
            }
            if let Some(memo) = frames {
                let mut frame = Vec::new();
                for (key, span) in deferred {
                    let member_text = text.get(span)?;
                    let value = match quick_list {
                        Some(_) => match frames::take_or_keep(memo, &key, member_text) {
                            Ok(member) => {
                                let stub = member.stub();
                                frame.push(member);
                                stub
                            }
                            Err(parsed) => parsed?,
                        },
                        None => frames::parse_keeping(memo, &key, member_text)?,
                    };
                    map.insert(key, value);
                }
                if let Some(list) = &mut quick_list {
                    list.frame = frame;
                }
            }
            Some((Value::Object(map), quick_list))
        }
        Scanned::Array => {
            let (value, messages) = member(&span, true)?;
            Some((value, messages))
        }
    }
}

/// One element of a message list, read by [`crate::quick`], parsed, or left unread
/// ([`crate::known`]).
enum Element {
    Quick(Message),
    Parsed(Value),
    Unread(Message),
}

/// The elements at `spans` as messages when every one is quick and none may be a Cline result
/// (the value then holds their stubs), else as their values; in one run per core. With
/// `known` (the scan found the list starts with its text), the messages it covers are left
/// unread but for its first few ([`crate::known`]); a list that is then not quick is
/// `None` (the caller parses the text whole). The list comes back as the root's (no `key`).
/// A list read for its format's own reader (`for_reader`: OpenAI Chat or Responses) is never
/// read quick: its elements come back parsed, but for those left unread
/// ([`QuickList::elements`]).
fn parse_messages(
    text: &str,
    spans: &[Range<usize>],
    known: Option<&KnownList>,
    for_reader: bool,
) -> Option<(Value, Option<QuickList>)> {
    let skip = known.and_then(|list| Some((list, known::unread_mask(list, spans.len())?)));
    let unread = skip.as_ref().map(|(_, mask)| mask.as_slice());
    let read_run = |(offset, run): (usize, Vec<Range<usize>>)| -> Option<Vec<Element>> {
        let mut out = Vec::with_capacity(run.len());
        // Once one element is not quick the list is returned as values anyway: the rest of the
        // run is parsed straight to values, not read quick first and parsed again.
        let mut try_quick = !for_reader;
        for (i, span) in run.into_iter().enumerate() {
            let index = offset + i;
            if unread.is_some_and(|u| u[index]) {
                out.push(Element::Unread(known::placeholder(index)));
                continue;
            }
            let element = text.get(span)?;
            let quick = if try_quick {
                quick::message(element, index)
                    .ok()?
                    .or_else(|| quick::message_any_order(element, index))
            } else {
                None
            };
            out.push(match quick {
                Some(message) => Element::Quick(message),
                None => {
                    try_quick = false;
                    Element::Parsed(serde_json::from_str(element).ok()?)
                }
            });
        }
        Some(out)
    };
    // Only the elements read are work: a list whose known prefix is left unread is read on
    // the calling thread unless what remains is long (handing a few new messages to the pool
    // cost more than reading them).
    let reading = unread.map_or(spans.len(), |u| u.iter().filter(|left| !**left).count());
    let elements = if reading < PARALLEL_MIN_ITEMS || cores() < 2 {
        read_run((0, spans.to_vec()))?
    } else {
        let mut elements = Vec::with_capacity(spans.len());
        for run in on_pool(split(spans.to_vec(), cores()), read_run) {
            elements.extend(run.ok().flatten()?);
        }
        elements
    };
    // An OpenAI Chat or Responses list that starts with a known one: the elements read for
    // that format's reader. Without one it comes back as values (below), as any list that is
    // not quick.
    if let (true, Some((list, mask))) = (for_reader, skip.as_ref()) {
        let unread = Some(Unread {
            mask: mask.clone(),
            prints: list.prints.clone(),
        });
        let elements = elements
            .into_iter()
            .map(|e| match e {
                Element::Parsed(value) => Some(Some(value)),
                Element::Unread(_) => Some(None),
                // Not tried: `try_quick` is off.
                Element::Quick(_) => None,
            })
            .collect::<Option<Vec<_>>>()?;
        return Some((
            Value::Array(Vec::new()),
            Some(QuickList {
                key: None,
                messages: Vec::new(),
                stubs: Vec::new(),
                unread,
                frame: Vec::new(),
                elements: Some(elements),
            }),
        ));
    }
    let keep = elements.iter().all(|e| match e {
        Element::Quick(message) => !quick::may_be_cline(message),
        // Known quick and not Cline: the earlier read kept its list quick.
        Element::Unread(_) => true,
        Element::Parsed(_) => false,
    });
    if keep {
        let mut stubs = quick::stubs(elements.iter().filter_map(|e| match e {
            Element::Quick(message) => Some(message),
            _ => None,
        }));
        let messages: Vec<Message> = elements
            .into_iter()
            .filter_map(|e| match e {
                Element::Quick(message) | Element::Unread(message) => Some(message),
                Element::Parsed(_) => None,
            })
            .collect();
        let unread = skip.map(|(list, mask)| {
            // Detection asks only whether some message has a role or block type: the unread
            // messages' stubs are the earlier read's, each kept once. Appended as they were,
            // the list kept for the next read held this read's stubs and all the earlier
            // ones again, so it grew every turn (a few stubs a request, parsed and copied at
            // every read after).
            for stub in &list.stubs {
                if !stubs.contains(stub) {
                    stubs.push(stub.clone());
                }
            }
            Unread {
                mask,
                prints: list.prints.clone(),
            }
        });
        let value = Value::Array(stubs.clone());
        return Some((
            value,
            Some(QuickList {
                key: None,
                messages,
                stubs,
                unread,
                frame: Vec::new(),
                elements: None,
            }),
        ));
    }
    if skip.is_some() {
        return None;
    }
    let values = elements
        .into_iter()
        .map(|e| match e {
            Element::Quick(message) | Element::Unread(message) => quick::to_value(message),
            Element::Parsed(value) => value,
        })
        .collect();
    Some((Value::Array(values), None))
}

/// serde_json's value of a whole JSON text, and a [`scan::Finder`] holding its root's members (or
/// elements): the spans [`crate::container`] looks up then cost nothing more. A large text, or
/// any text read with `known` (an earlier read's lists), is scanned first and its long arrays
/// parsed on every core, its message list (however short) read into messages when `quick`
/// allows and every message is one [`crate::quick`] reads (the value then holds their stubs),
/// or, for an OpenAI Chat or Responses body (`elements`: the format said) whose list starts
/// with a known one, parsed for that format's reader ([`QuickList::elements`]);
/// when that cannot be done (a text that does not parse, or nests too deep), serde_json parses
/// the whole text as usual.
pub(crate) fn parse_scanning(
    text: &str,
    quick: bool,
    (known, elements): (Option<Lookup<'_>>, Option<Format>),
) -> (serde_json::Result<Value>, scan::Finder, Option<QuickList>) {
    let mut finder = scan::Finder::default();
    // With what an earlier read knew, even a short text on one core gains: the known messages
    // are not parsed.
    if known.is_none() && (text.len() < crate::container::PARALLEL_FROM || cores() < 2) {
        return (serde_json::from_str(text), finder, None);
    }
    let known = known.map(|k| Lookup { elements, ..k });
    finder.scan_knowing(text, scan::trimmed(text.as_bytes(), 0..text.len()), known);
    let given = (known.and_then(|k| k.frames), elements);
    match parse(text, &finder, quick, given) {
        Some((root, list)) => (Ok(root), finder, list),
        None => (serde_json::from_str(text), finder, None),
    }
}

/// Whether `slots` are one list at the root: a request body's at the root (its `messages`, or
/// a Responses body's `input`), or the root list itself.
pub(crate) fn is_root_list(slots: &[Slot]) -> bool {
    matches!(slots, [slot] if slot.pointer.is_empty()
        && matches!(slot.kind, SlotKind::Body | SlotKind::Input | SlotKind::List))
}

/// A quick list with unread messages that the conversation found is not (another format or
/// wrapper was decided): the text must be read again whole.
#[derive(Debug)]
pub(crate) struct ReadWhole;

/// The quick list when the conversation found is that list (a request body at the root with it
/// as `messages`, or the root list itself) and its format reads messages as Anthropic does;
/// otherwise the list's JSON is put back in `root` and `None` returned, or [`ReadWhole`] when
/// the list has unread messages (they have no JSON to put back).
pub(crate) fn take_quick(
    list: Option<QuickList>,
    root: &mut Value,
    slots: &[Slot],
    format: Format,
) -> std::result::Result<Option<QuickList>, ReadWhole> {
    let Some(list) = list else {
        return Ok(None);
    };
    let anthropic = matches!(format, Format::Anthropic | Format::Cline);
    // A list read for the OpenAI Chat or Responses reader is taken only by that reader (the
    // format said is the format decided), a quick one by Anthropic's.
    let reader = match list.elements {
        Some(_) => known::reads_elements(format),
        None => anthropic,
    };
    let fits = match (slots, list.key.as_deref()) {
        ([slot], Some(key)) if key == crate::body::list_member(format) => {
            let body = match format {
                Format::Responses => SlotKind::Input,
                _ => SlotKind::Body,
            };
            slot.kind == body && slot.pointer.is_empty()
        }
        ([slot], None) => slot.kind == SlotKind::List && slot.pointer.is_empty(),
        _ => false,
    };
    if reader && fits {
        return Ok(Some(list));
    }
    if list.stands_for_unparsed() {
        return Err(ReadWhole);
    }
    list.restore(root);
    Ok(None)
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
    let mut out = Vec::with_capacity(spans.len());
    // A panic in serde_json (a bug) gives up on the parallel parse: the caller parses again.
    for run in on_pool(runs, |(_, run)| parse_run(run)) {
        out.extend(run.ok().flatten()?);
    }
    Some(out)
}

/// The cores to use, asked once per process: the answer reads cgroup files (a quarter of a
/// millisecond), and `condense serve` reads a body at every request.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `work` of every run, in order, on rayon's pool; a run that panicked is `Err` (its panic).
///
/// The pool's threads live as long as the process: `condense serve` reads a body at every
/// request and starts no thread for it (a new thread per run cost a spawn, its stack's first
/// pages and its exit, each time). A process's first parallel read starts the pool instead.
fn on_pool<T: Send, R: Send>(
    runs: Vec<T>,
    work: impl Fn(T) -> R + Sync,
) -> Vec<std::thread::Result<R>> {
    use rayon::prelude::*;
    runs.into_par_iter()
        .map(|run| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(run))))
        .collect()
}

/// Lists shorter than this are read on the calling thread: starting a thread costs about what
/// reading a few dozen small messages does.
pub(crate) const PARALLEL_MIN_ITEMS: usize = 256;

/// `work` of every item, in order; in one run per core when the list is long. A panic in
/// `work` is carried on to the caller as if it happened here.
pub(crate) fn map_in_order<T: Send, R: Send>(
    items: Vec<T>,
    work: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    if items.len() < PARALLEL_MIN_ITEMS || cores() < 2 {
        return items.into_iter().map(work).collect();
    }
    let work = &work;
    let mut out = Vec::with_capacity(items.len());
    for run in on_pool(split(items, cores()), |(_, run)| {
        run.into_iter().map(work).collect::<Vec<R>>()
    }) {
        out.extend(run.unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
    }
    out
}

/// `read(item, index, ctx)` of every item, in order; on several threads when the list is long.
pub(crate) fn read_all<T: Send, R: Send>(
    items: Vec<T>,
    ctx: &Ctx<'_>,
    read: impl Fn(T, usize, &Ctx<'_>) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let work = items.len();
    read_all_of(items, work, ctx, read)
}

/// [`read_all`] of items of which `work` are read (the others cost next to nothing: a
/// placeholder for a message left unread): on several threads when those are many.
fn read_all_of<T: Send, R: Send>(
    items: Vec<T>,
    work: usize,
    ctx: &Ctx<'_>,
    read: impl Fn(T, usize, &Ctx<'_>) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    // The count first: a short list never asks for the cores.
    if work < PARALLEL_MIN_ITEMS || cores() < 2 {
        return items
            .into_iter()
            .enumerate()
            .map(|(i, item)| read(item, i, ctx))
            .collect();
    }
    let read = &read;
    let place = ctx.place();
    let runs = on_pool(split(items, cores()), |(offset, run)| {
        let notes = Notes::default();
        let out = read_run(run, offset, &place.noting_into(&notes), read);
        (out, notes)
    });
    let mut out = Vec::new();
    for joined in runs {
        // A panic in a reader is a bug: carried on to the caller as if it happened here.
        let (run, notes) = joined.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        // Up to the first error, as a sequential read stops there with the notes it made.
        ctx.absorb(notes);
        out.extend(run?);
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
        parse(text, &finder, false, (None, None)).map(|(value, _)| value)
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
