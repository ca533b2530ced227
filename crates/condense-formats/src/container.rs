//! The file around the conversations: reading a whole file into a [`Document`] and writing it back.
//!
//! Four layouts: one JSON value (its conversations taken out of it, the rest kept as the
//! wrapper), JSONL whose every line is such a JSON value (OpenHands output), and the sessions
//! whose lines are the messages: Claude Code and Codex. Around any of them: a byte order mark,
//! CRLF line ends and, for JSONL, an incomplete last line ([`crate::lines`]) are kept.
//!
//! Reading also records where each conversation and message is in the text ([`crate::scan`],
//! [`crate::source`]), so that writing ([`crate::writer`]) copies the bytes of whatever no stage
//! changed.

use crate::body::{self, MessageCodec};
use crate::error::Ctx;
use crate::frames::Member;
use crate::json::{Result, Style};
use crate::known;
use crate::lines::{self, Lines};
use crate::notes::Notes;
use crate::parallel::{is_root_list, parse_scanning, take_quick, ElementReader, Lookup, QuickList};
use crate::scan;
use crate::select::{self, Select, Slot, SlotKind};
use crate::source::Source;
use crate::{anthropic, claude_code, cline, codex, detect, openai, openhands, responses};
use crate::{Document, Format, FormatError, ReadOptions, ReportedUsage};
use condense_model::Conversation;
use serde_json::Value;
use std::ops::Range;
use std::sync::Arc;

/// How the conversations sit in the file.
#[derive(Debug, Clone)]
pub(crate) enum Layout {
    Json {
        root: Root,
        style: Style,
    },
    Lines {
        lines: Vec<Root>,
        style: Style,
        /// Where each line is in the text.
        spans: Vec<Range<usize>>,
    },
    ClaudeCode {
        style: Style,
        /// Where each line is in the text.
        spans: Vec<Range<usize>>,
    },
    Codex {
        style: Style,
        header: Option<codex::Header>,
        /// Where each line is in the text.
        spans: Vec<Range<usize>>,
    },
}

/// A JSON value with its conversations taken out (each slot holds `null` until written).
#[derive(Debug, Clone)]
pub(crate) struct Root {
    pub value: Value,
    pub slots: Vec<Placed>,
    /// Where the value is in the text (`None`: unknown, it is serialized whole).
    pub span: Option<Range<usize>>,
}

#[derive(Debug, Clone)]
pub(crate) struct Placed {
    pub pointer: String,
    /// For request bodies: the original key order.
    pub body_keys: Option<Vec<String>>,
    /// Where the conversation's value (body or list) is in the text.
    pub span: Option<Range<usize>>,
    /// Where its message array is (the list itself, or the body's `messages` / `input`).
    pub array: Option<Range<usize>>,
    /// Where the array's elements are.
    pub elements: Vec<Range<usize>>,
}

pub(crate) fn read(bytes: &[u8], source: &str, opts: &ReadOptions) -> Result<Document> {
    let (text, cut_char) = utf8(bytes, display_name(source))?;
    let mut doc = read_valid(text, cut_char, source, opts, (None, None))?;
    let start = if doc.bom { BOM.len() } else { 0 };
    let body = start..start + doc.source.body_len;
    // The text checked once: the body is a slice of it.
    doc.source.text = Arc::new(match text.get(body.clone()) {
        Some(body) => body.to_owned(),
        // Unreachable: the mark and the incomplete last line end and start on character
        // boundaries.
        None => String::from_utf8_lossy(&bytes[body]).into_owned(),
    });
    Ok(doc)
}

/// [`read`], keeping `bytes` as the document's text instead of a copy of them; with `known`,
/// leaving unread what an earlier read knew ([`crate::known`]).
pub(crate) fn read_owned(
    bytes: Vec<u8>,
    source: &str,
    opts: &ReadOptions,
    known: Option<Lookup<'_>>,
) -> Result<Document> {
    // Checked as UTF-8 once: all of it is, as a whole file mostly is.
    match crate::utf8::string(bytes) {
        Ok(text) => read_shared(Arc::new(text), source, opts, known),
        // Not UTF-8 (a character cut short at the very end of a file still being written,
        // or an error to name): read as borrowed bytes, which copies the body once.
        Err(bytes) => read(&bytes, source, opts),
    }
}

/// [`read_owned`] of a text the caller shares: the document keeps it as its text. Only a
/// byte order mark or an incomplete last line (a JSONL file still being written) makes it
/// keep a copy without them.
pub(crate) fn read_shared(
    mut text: Arc<String>,
    source: &str,
    opts: &ReadOptions,
    known: Option<Lookup<'_>>,
) -> Result<Document> {
    // Readers keep pieces of the text (`shared`) only when the document will keep it whole:
    // with a byte order mark or an incomplete last line cut off below, the pieces would keep
    // the uncut text alive beside the document's copy.
    let whole = !text.starts_with(BOM) && text.ends_with('\n');
    let mut doc = read_valid(&text, &[], source, opts, (known, whole.then_some(&text)))?;
    let start = if doc.bom { BOM.len() } else { 0 };
    let end = start + doc.source.body_len;
    if start > 0 || end < text.len() {
        let body = Arc::make_mut(&mut text);
        body.truncate(end);
        body.drain(..start);
    }
    doc.source.text = text;
    Ok(doc)
}

pub(crate) const BOM: &str = "\u{feff}";

/// How errors name the input `source` (`-`: standard input).
fn display_name(source: &str) -> &str {
    if source == "-" {
        "<stdin>"
    } else {
        source
    }
}

/// A read of bytes already checked as UTF-8: `text`, then `cut_char`, the bytes of a UTF-8
/// character cut short at the very end (see [`utf8`]).
/// `shared`: the text as the caller shares it, when it does ([`read_shared`]): what a reader
/// keeps of it as it was (a Claude Code event's line) is then a piece of it, not a copy.
fn read_valid(
    text: &str,
    cut_char: &[u8],
    source: &str,
    opts: &ReadOptions,
    (known, shared): (Option<Lookup<'_>>, Option<&Arc<String>>),
) -> Result<Document> {
    let source = display_name(source);
    let notes = Notes::default();
    let ctx = Ctx::with_notes(source, &notes);
    let whole = text;
    let (text, bom) = match text.strip_prefix(BOM) {
        Some(rest) => (rest, true),
        None => (text, false),
    };
    if text.trim().is_empty() {
        return Err(ctx.detect("the input is empty"));
    }
    let select = opts
        .select
        .as_deref()
        .map(|s| Select::parse(s, &ctx))
        .transpose()?;
    let mut doc = match opts.format {
        Some(format @ (Format::ClaudeCode | Format::Codex)) => {
            if let Some(sel) = &opts.select {
                return Err(FormatError::Select {
                    at: ctx.at(""),
                    select: sel.clone(),
                    reason: format!(
                        "a {} session is the whole file; --select does not apply",
                        session_name(format)
                    ),
                });
            }
            if format == Format::ClaudeCode {
                claude_document(
                    lines::parse_with(text, &ctx, claude_code::parse_line)?,
                    shared,
                    &ctx,
                )?
            } else {
                codex_document(lines::parse(text, &ctx)?, &ctx)?
            }
        }
        _ => read_auto(text, select.as_ref(), opts.format, &ctx, (known, shared))?,
    };
    doc.bom = bom;
    if !cut_char.is_empty() {
        // Bytes of a character cut short: only the end of an incomplete last line may hold them.
        if doc.tail.is_empty() {
            return Err(not_utf8(whole.as_bytes(), whole.len(), source));
        }
        doc.tail.extend_from_slice(cut_char);
    }
    doc.noted_items = notes.noted_items();
    doc.warnings.extend(notes.into_warnings());
    Ok(doc)
}

pub(crate) fn one_conversation(format: Format) -> FormatError {
    FormatError::Write {
        at: "the session".into(),
        reason: format!(
            "a {} session holds exactly one conversation",
            session_name(format)
        ),
    }
}

fn session_name(format: Format) -> &'static str {
    if format == Format::Codex {
        "Codex"
    } else {
        "Claude Code"
    }
}

/// JSON or JSONL, decided by the file name (`.jsonl`, `.ndjson`) and by what parses.
fn read_auto(
    text: &str,
    select: Option<&Select>,
    format: Option<Format>,
    ctx: &Ctx<'_>,
    (known, shared): (Option<Lookup<'_>>, Option<&Arc<String>>),
) -> Result<Document> {
    let jsonl_name = [".jsonl", ".ndjson"]
        .iter()
        .any(|ext| ctx.source.to_ascii_lowercase().ends_with(ext));
    let guess = select.is_none() && format.is_none();
    let lines = if jsonl_name {
        if guess && claude_code::sniff(text) {
            // The lines an earlier read knew are left unread when they are still the same.
            if let Some(known) = &known {
                if let Some(doc) = claude_code::known::read(text, known, shared, ctx)? {
                    return Ok(doc);
                }
            }
            return claude_document(
                lines::parse_with(text, ctx, claude_code::parse_line)?,
                shared,
                ctx,
            );
        }
        match lines::parse(text, ctx) {
            Ok(lines) => lines,
            // A JSONL name on a pretty-printed JSON file: read it as JSON.
            Err(line_err) => match serde_json::from_str::<Value>(text) {
                Ok(root) => {
                    let finder = scan::Finder::default();
                    let document = json_document((root, None), finder, text, select, format, ctx)?;
                    // Without a quick list nothing is unread, so there is a document.
                    return document.ok_or_else(|| ctx.detect("the input could not be read"));
                }
                Err(_) => return Err(line_err),
            },
        }
    } else {
        // Messages read without a JSON tree only where the wrappers are found without
        // `--select` (a pointer may lead into the messages).
        let known = known.filter(|_| select.is_none());
        let elements = elements_format(format, select);
        let (parsed, finder, quick) = parse_scanning(text, select.is_none(), (known, elements));
        match parsed {
            Ok(mut root) => {
                let session = match &root {
                    _ if !guess => None,
                    r if codex::is_line(r) => Some(Format::Codex),
                    r if claude_code::is_line(r) => Some(Format::ClaudeCode),
                    _ => None,
                };
                if let Some(session) = session {
                    if quick.as_ref().is_some_and(QuickList::stands_for_unparsed) {
                        // Unread messages have no JSON to put back: read it all.
                        return read_auto(text, select, format, ctx, (None, shared));
                    }
                    if let Some(list) = quick {
                        list.restore(&mut root);
                    }
                    let start = text.len() - text.trim_start().len();
                    let one = Lines {
                        values: vec![(1, root)],
                        spans: std::iter::once(start..text.trim_end().len()).collect(),
                        body: text,
                        tail: "",
                    };
                    return match session {
                        Format::Codex => codex_document(one, ctx),
                        _ => claude_document(one.map(claude_code::Line::Tree), shared, ctx),
                    };
                }
                let document = json_document((root, quick), finder, text, select, format, ctx)?;
                return match document {
                    Some(doc) => Ok(doc),
                    None => read_auto(text, select, format, ctx, (None, shared)),
                };
            }
            Err(e) if !lines::first_line_parses(text) => return Err(ctx.invalid_json(&e)),
            Err(_) if guess && claude_code::sniff(text) => {
                let lines = lines::parse_with(text, ctx, claude_code::parse_line)?;
                return claude_document(lines, shared, ctx);
            }
            Err(_) => lines::parse(text, ctx)?,
        }
    };
    if guess && codex::looks_like(&lines.values) {
        return codex_document(lines, ctx);
    }
    if guess && claude_code::looks_like(&lines.values) {
        return claude_document(lines.map(claude_code::Line::Tree), shared, ctx);
    }
    lines_document(lines, select, format, ctx)
}

/// The text, and the bytes of a UTF-8 character cut short at the very end (a file still being
/// written), which are not part of it.
fn utf8<'b>(bytes: &'b [u8], source: &str) -> Result<(&'b str, &'b [u8])> {
    if let Some(text) = crate::utf8::str_of(bytes) {
        return Ok((text, &[]));
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok((text, &[])),
        Err(e) if e.error_len().is_none() => {
            let (good, cut) = bytes.split_at(e.valid_up_to());
            let text =
                std::str::from_utf8(good).map_err(|_| not_utf8(bytes, e.valid_up_to(), source))?;
            Ok((text, cut))
        }
        Err(e) => Err(not_utf8(bytes, e.valid_up_to(), source)),
    }
}

fn not_utf8(bytes: &[u8], offset: usize, source: &str) -> FormatError {
    let line = bytes[..offset].iter().filter(|b| **b == b'\n').count() + 1;
    FormatError::NotUtf8 {
        at: format!("{source}:{line}"),
        message: format!("invalid byte at offset {offset}"),
    }
}

/// A Codex rollout: its lines are the messages.
fn codex_document(lines: Lines<'_>, ctx: &Ctx<'_>) -> Result<Document> {
    let (style, mut source) = session_start(&lines, ctx)?;
    let spans = lines.spans;
    let rollout = codex::read(lines.values, ctx)?;
    let mut first = 0;
    for (span, &count) in spans.iter().zip(&rollout.counts) {
        if count > 0 {
            source.add_unit(0, first, count, span.clone());
        }
        first += count;
    }
    let layout = Layout::Codex {
        style,
        header: rollout.header,
        spans,
    };
    let parts = (rollout.conversation, rollout.usage, layout, source);
    Ok(session_document(
        Format::Codex,
        parts,
        lines.body,
        lines.tail,
    ))
}

/// A Claude Code session: its lines are the messages.
pub(crate) fn claude_document(
    lines: Lines<'_, claude_code::Line>,
    shared: Option<&Arc<String>>,
    ctx: &Ctx<'_>,
) -> Result<Document> {
    let (style, mut source) = session_start(&lines, ctx)?;
    let spans = lines.spans;
    let texts: Vec<&str> = spans.iter().map(|s| &lines.body[s.clone()]).collect();
    let (conv, usage, known) = claude_code::read(lines.values, (&texts, shared), ctx)?;
    for (i, span) in spans.iter().enumerate() {
        source.add_unit(0, i, 1, span.clone());
    }
    let layout = Layout::ClaudeCode { style, spans };
    let parts = (conv, usage, layout, source);
    let mut doc = session_document(Format::ClaudeCode, parts, lines.body, lines.tail);
    doc.claude_lines = Some(known);
    Ok(doc)
}

/// A session's lines: refused when there are none, else their style and an empty source.
fn session_start<T>(lines: &Lines<'_, T>, ctx: &Ctx<'_>) -> Result<(Style, Source)> {
    if lines.values.is_empty() {
        return Err(ctx.detect("the input is empty"));
    }
    Ok((Style::lines(lines.body), Source::of_len(lines.body.len())))
}

/// The document of a session read (`parts`: its conversation, reported usage, layout and
/// source) from `body`, with the incomplete last line `tail`.
fn session_document(
    format: Format,
    (conv, usage, layout, source): (Conversation, Option<ReportedUsage>, Layout, Source),
    body: &str,
    tail: &str,
) -> Document {
    let mut doc = Document::new(format, layout, vec![conv], vec![String::new()]);
    doc.source = source;
    doc.usage = vec![usage];
    doc.crlf = lines::is_crlf(body);
    doc.tail = tail.as_bytes().to_vec();
    doc
}

/// Texts from this size are parsed on every core ([`crate::parallel::parse`]); below it, starting
/// threads costs more than it saves.
pub(crate) const PARALLEL_FROM: usize = 64 * 1024;

/// The document of a JSON text; `None` when its quick list has unread messages but is not the
/// conversation found (the text is then read again whole).
fn json_document(
    (mut root, quick): (Value, Option<QuickList>),
    mut finder: scan::Finder,
    text: &str,
    select: Option<&Select>,
    format: Option<Format>,
    ctx: &Ctx<'_>,
) -> Result<Option<Document>> {
    let slots = find_slots(&root, select, ctx)?;
    // An OpenAI Chat or Responses body's list (the format said), read whole or not, is known
    // next time ([`crate::known`]) when it is the document's only list: a body's at the root,
    // or the root.
    let listed = elements_format(format, select).is_some() && is_root_list(&slots);
    let format = format.unwrap_or_else(|| decide(&[(&root, &slots)]));
    let labels = slots.iter().map(|s| s.pointer.clone()).collect();
    let Ok(mut quick) = take_quick(quick, &mut root, &slots, format) else {
        return Ok(None);
    };
    if let (Some(list), Some(read)) = (&mut quick, element_reader(format)) {
        let ptr = list.key.as_ref().map_or(String::new(), |k| format!("/{k}"));
        list.read_elements(read, ctx, &ptr)?;
    }
    let (messages, quick) = match quick {
        Some(list) => (
            (Some(list.messages), list.frame),
            Some((list.stubs, list.unread)),
        ),
        None => ((None, Vec::new()), None),
    };
    let (mut root, conversations) = take_conversations(root, slots, format, messages, ctx)?;
    let mut source = Source::of_len(text.len());
    place(
        &mut root,
        &mut finder,
        (text, 0..text.len()),
        format,
        0,
        &conversations,
        &mut source,
    );
    let layout = Layout::Json {
        root,
        style: Style::detect(text),
    };
    let mut doc = Document::new(format, layout, conversations, labels);
    doc.crlf = lines::is_crlf(text);
    if let Some((stubs, unread)) = quick {
        source.unread = unread;
        doc.quick_stubs = Some(stubs);
        doc.known_hashed = finder.take_known_hashed();
    } else if listed {
        // Detection never reads a said format's stubs.
        doc.quick_stubs = Some(Vec::new());
    }
    doc.source = source;
    Ok(Some(doc.with_single_label()))
}

fn lines_document(
    lines: Lines<'_>,
    select: Option<&Select>,
    format: Option<Format>,
    ctx: &Ctx<'_>,
) -> Result<Document> {
    let mut found = Vec::with_capacity(lines.values.len());
    let spans = lines.spans;
    for (n, root) in lines.values {
        let slots = find_slots(&root, select, &ctx.at_line(n))?;
        found.push((n, root, slots));
    }
    let format = format.unwrap_or_else(|| {
        let views: Vec<(&Value, &Vec<Slot>)> = found.iter().map(|(_, r, s)| (r, s)).collect();
        decide(&views)
    });
    let mut roots = Vec::with_capacity(found.len());
    let mut conversations = Vec::new();
    let mut labels = Vec::new();
    let mut source = Source::of_len(lines.body.len());
    for ((n, root, slots), span) in found.into_iter().zip(&spans) {
        let many = slots.len() > 1;
        for slot in &slots {
            labels.push(if many {
                format!("line {n}:{}", slot.pointer)
            } else {
                format!("line {n}")
            });
        }
        let (mut root, convs) =
            take_conversations(root, slots, format, (None, Vec::new()), &ctx.at_line(n))?;
        let first = conversations.len();
        place(
            &mut root,
            &mut scan::Finder::default(),
            (lines.body, span.clone()),
            format,
            first,
            &convs,
            &mut source,
        );
        roots.push(root);
        conversations.extend(convs);
    }
    let layout = Layout::Lines {
        lines: roots,
        style: Style::lines(lines.body),
        spans,
    };
    let mut doc = Document::new(format, layout, conversations, labels);
    doc.crlf = lines::is_crlf(lines.body);
    doc.tail = lines.tail.as_bytes().to_vec();
    doc.source = source;
    Ok(doc.with_single_label())
}

fn find_slots(root: &Value, select: Option<&Select>, ctx: &Ctx<'_>) -> Result<Vec<Slot>> {
    match select {
        Some(sel) => sel.slots(root, ctx),
        None => select::autodetect(root, ctx),
    }
}

fn decide(roots: &[(&Value, &Vec<Slot>)]) -> Format {
    detect::decide(roots.iter().flat_map(|(root, slots)| {
        slots
            .iter()
            .filter_map(|s| root.pointer(&s.pointer).map(|v| (v, s.kind)))
    }))
}

/// The format an OpenAI Chat or Responses body's list is read for, element by element, by
/// that format's reader ([`known::reads_elements`]): where the format is said, and no
/// `--select` leads elsewhere.
fn elements_format(format: Option<Format>, select: Option<&Select>) -> Option<Format> {
    format.filter(|f| known::reads_elements(*f) && select.is_none())
}

/// How the elements of a list read for its format's own reader ([`known::reads_elements`]) are
/// read into messages.
fn element_reader(format: Format) -> Option<ElementReader> {
    match format {
        Format::Responses => Some(responses::read_element),
        _ => codec(format).map(|c| c.read),
    }
}

/// How a chat format's messages are read and written (Cline's are Anthropic's, lifted).
pub(crate) fn codec(format: Format) -> Option<MessageCodec> {
    match format {
        Format::Anthropic | Format::Cline => Some(anthropic::CODEC),
        Format::OpenAi => Some(openai::CODEC),
        Format::ClaudeCode | Format::OpenHands | Format::Codex | Format::Responses => None,
    }
}

/// Takes each slot's value out of the root and reads it as a conversation; `quick`: the
/// messages of the only slot, already read ([`take_quick`]), and the members of its frame
/// taken from the memo ([`crate::frames`]).
fn take_conversations(
    mut value: Value,
    slots: Vec<Slot>,
    format: Format,
    (mut quick, mut frame): (Option<Vec<condense_model::Message>>, Vec<Member>),
    ctx: &Ctx<'_>,
) -> Result<(Root, Vec<Conversation>)> {
    let mut placed = Vec::with_capacity(slots.len());
    let mut conversations = Vec::with_capacity(slots.len());
    for slot in slots {
        let target = value
            .pointer_mut(&slot.pointer)
            .map(Value::take)
            .unwrap_or_default();
        let ptr = slot.pointer.as_str();
        let (mut conv, body_keys) = match (slot.kind, target, format, codec(format)) {
            (SlotKind::Input, Value::Object(map), Format::Responses, _) => {
                let quick = (quick.take(), std::mem::take(&mut frame));
                let (conv, keys) = responses::read_body(map, ctx, ptr, quick)?;
                (conv, Some(keys))
            }
            (SlotKind::List, Value::Array(items), Format::Responses, _) => {
                (responses::read_list(items, ctx, ptr, quick.take())?, None)
            }
            (SlotKind::List, Value::Array(items), Format::OpenHands, _) => {
                (openhands::read_list(items, ctx, ptr)?, None)
            }
            (SlotKind::Body, Value::Object(map), _, Some(codec)) => {
                let quick = (quick.take(), std::mem::take(&mut frame));
                let (conv, keys) = body::read_body(map, codec, ctx, ptr, quick)?;
                (conv, Some(keys))
            }
            (SlotKind::List, Value::Array(items), _, Some(codec)) => {
                (body::read_list(items, codec, ctx, ptr, quick.take())?, None)
            }
            (_, other, _, _) => {
                let expected = match format {
                    Format::OpenHands => "an OpenHands event list (an array)",
                    Format::ClaudeCode => "a Claude Code session (JSONL lines)",
                    Format::Codex => "a Codex rollout (JSONL lines)",
                    Format::Responses => {
                        "a Responses request body (an object with `input`) or an item list"
                    }
                    _ => "a message list or a request body",
                };
                return Err(ctx.unexpected(ptr, expected, &other));
            }
        };
        if format == Format::Cline {
            cline::lift(&mut conv, ctx);
        }
        conversations.push(conv);
        placed.push(Placed {
            pointer: slot.pointer,
            body_keys,
            span: None,
            array: None,
            elements: Vec::new(),
        });
    }
    Ok((
        Root {
            value,
            slots: placed,
            span: None,
        },
        conversations,
    ))
}

impl Document {
    /// A document read from a file with nothing around it (no byte order mark, LF line ends, no
    /// incomplete last line), no usage and no warnings yet.
    fn new(
        format: Format,
        layout: Layout,
        conversations: Vec<Conversation>,
        labels: Vec<String>,
    ) -> Document {
        Document {
            format,
            layout,
            conversations,
            labels,
            bom: false,
            crlf: false,
            tail: Vec::new(),
            usage: Vec::new(),
            warnings: Vec::new(),
            noted_items: false,
            source: Source::default(),
            quick_stubs: None,
            known_hashed: None,
            vouched: Vec::new(),
            claude_lines: None,
        }
    }

    /// A document with one conversation labels it "".
    fn with_single_label(mut self) -> Self {
        if self.conversations.len() == 1 {
            self.labels = vec![String::new()];
        }
        self
    }
}

/// Finds where a root and its conversations' messages are in `text` (the root at `span`), and
/// adds each message's element as a unit of its conversation (conversations from `first` on).
/// Anything not found leaves the spans unknown: the writer serializes that part. `finder` may
/// hold a scan of the text already ([`parse_scanning`]).
fn place(
    root: &mut Root,
    finder: &mut scan::Finder,
    (text, span): (&str, Range<usize>),
    format: Format,
    first: usize,
    conversations: &[Conversation],
    source: &mut Source,
) {
    // serde_json accepted exactly one value there: no need to scan for its end.
    let span = scan::trimmed(text.as_bytes(), span);
    if span.is_empty() {
        return;
    }
    for (k, placed) in root.slots.iter_mut().enumerate() {
        placed.span = finder.pointer(text, span.clone(), &placed.pointer);
        placed.array = placed.span.clone().and_then(|at| match placed.body_keys {
            None => Some(at),
            Some(_) => finder
                .member(text, at, body::list_member(format))
                .filter(|a| text.as_bytes()[a.start] == b'['),
        });
        placed.elements = placed
            .array
            .clone()
            .and_then(|a| finder.elements(text, a))
            .unwrap_or_default();
        let Some(conv) = conversations.get(k) else {
            continue;
        };
        // Each element was read into one message (the readers of every JSON format are 1:1).
        if placed.elements.len() == conv.messages.len() {
            for (i, elem) in placed.elements.iter().enumerate() {
                source.add_unit(first + k, i, 1, elem.clone());
            }
        }
    }
    root.span = Some(span);
}
