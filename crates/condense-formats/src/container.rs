//! The file around the conversations: reading a whole file into a [`Document`] and writing it back.
//!
//! Four layouts: one JSON value (its conversations taken out of it, the rest kept as the
//! wrapper), JSONL whose every line is such a JSON value (OpenHands output), and the sessions
//! whose lines are the messages: Claude Code and Codex. Around any of them: a byte order mark,
//! CRLF line ends and, for JSONL, an incomplete last line ([`crate::lines`]) are kept.

use crate::body::{self, MessageCodec};
use crate::error::Ctx;
use crate::json::{Result, Style};
use crate::lines::{self, Lines};
use crate::notes::Notes;
use crate::select::{self, Select, Slot, SlotKind};
use crate::{anthropic, claude_code, cline, codex, detect, openai, openhands, responses};
use crate::{Document, Format, FormatError, ReadOptions};
use condense_model::Conversation;
use serde_json::Value;

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
    },
    ClaudeCode {
        style: Style,
    },
    Codex {
        style: Style,
        header: Option<codex::Header>,
    },
}

/// A JSON value with its conversations taken out (each slot holds `null` until written).
#[derive(Debug, Clone)]
pub(crate) struct Root {
    value: Value,
    slots: Vec<Placed>,
}

#[derive(Debug, Clone)]
struct Placed {
    pointer: String,
    /// For request bodies: the original key order.
    body_keys: Option<Vec<String>>,
}

pub(crate) fn read(bytes: &[u8], source: &str, opts: &ReadOptions) -> Result<Document> {
    let source = if source == "-" { "<stdin>" } else { source };
    let notes = Notes::default();
    let ctx = Ctx::with_notes(source, &notes);
    let (text, cut_char) = utf8(bytes, &ctx)?;
    let (text, bom) = match text.strip_prefix('\u{feff}') {
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
            session_document(format, lines::parse(text, &ctx)?, &ctx)?
        }
        _ => read_auto(text, select.as_ref(), opts.format, &ctx)?,
    };
    doc.bom = bom;
    if !cut_char.is_empty() {
        // Bytes of a character cut short: only the end of an incomplete last line may hold them.
        if doc.tail.is_empty() {
            return Err(not_utf8(bytes, bytes.len() - cut_char.len(), source));
        }
        doc.tail.extend_from_slice(cut_char);
    }
    doc.warnings.extend(notes.into_warnings());
    Ok(doc)
}

fn one_conversation(format: Format) -> FormatError {
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
) -> Result<Document> {
    let jsonl_name = [".jsonl", ".ndjson"]
        .iter()
        .any(|ext| ctx.source.to_ascii_lowercase().ends_with(ext));
    let guess = select.is_none() && format.is_none();
    let lines = if jsonl_name {
        match lines::parse(text, ctx) {
            Ok(lines) => lines,
            // A JSONL name on a pretty-printed JSON file: read it as JSON.
            Err(line_err) => match serde_json::from_str::<Value>(text) {
                Ok(root) => return json_document(root, text, select, format, ctx),
                Err(_) => return Err(line_err),
            },
        }
    } else {
        match serde_json::from_str::<Value>(text) {
            Ok(root) => {
                let session = match &root {
                    _ if !guess => None,
                    r if codex::is_line(r) => Some(Format::Codex),
                    r if claude_code::is_line(r) => Some(Format::ClaudeCode),
                    _ => None,
                };
                if let Some(session) = session {
                    let one = Lines {
                        values: vec![(1, root)],
                        body: text,
                        tail: "",
                    };
                    return session_document(session, one, ctx);
                }
                return json_document(root, text, select, format, ctx);
            }
            Err(e) if !lines::first_line_parses(text) => return Err(ctx.invalid_json(&e)),
            Err(_) => lines::parse(text, ctx)?,
        }
    };
    if guess && codex::looks_like(&lines.values) {
        return session_document(Format::Codex, lines, ctx);
    }
    if guess && claude_code::looks_like(&lines.values) {
        return session_document(Format::ClaudeCode, lines, ctx);
    }
    lines_document(lines, select, format, ctx)
}

/// The text, and the bytes of a UTF-8 character cut short at the very end (a file still being
/// written), which are not part of it.
fn utf8<'b>(bytes: &'b [u8], ctx: &Ctx<'_>) -> Result<(&'b str, &'b [u8])> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok((text, &[])),
        Err(e) if e.error_len().is_none() => {
            let (good, cut) = bytes.split_at(e.valid_up_to());
            let text = std::str::from_utf8(good)
                .map_err(|_| not_utf8(bytes, e.valid_up_to(), ctx.source))?;
            Ok((text, cut))
        }
        Err(e) => Err(not_utf8(bytes, e.valid_up_to(), ctx.source)),
    }
}

fn not_utf8(bytes: &[u8], offset: usize, source: &str) -> FormatError {
    let line = bytes[..offset].iter().filter(|b| **b == b'\n').count() + 1;
    FormatError::NotUtf8 {
        at: format!("{source}:{line}"),
        message: format!("invalid byte at offset {offset}"),
    }
}

/// A session whose lines are the messages: Claude Code or Codex.
fn session_document(format: Format, lines: Lines<'_>, ctx: &Ctx<'_>) -> Result<Document> {
    if lines.values.is_empty() {
        return Err(ctx.detect("the input is empty"));
    }
    let style = Style::lines(lines.body);
    let (conv, usage, layout) = if format == Format::Codex {
        let rollout = codex::read(lines.values, ctx)?;
        let layout = Layout::Codex {
            style,
            header: rollout.header,
        };
        (rollout.conversation, rollout.usage, layout)
    } else {
        let (conv, usage) = claude_code::read(lines.values, ctx)?;
        (conv, usage, Layout::ClaudeCode { style })
    };
    let mut doc = Document::new(format, layout, vec![conv], vec![String::new()]);
    doc.usage = vec![usage];
    doc.crlf = lines::is_crlf(lines.body);
    doc.tail = lines.tail.as_bytes().to_vec();
    Ok(doc)
}

fn json_document(
    root: Value,
    text: &str,
    select: Option<&Select>,
    format: Option<Format>,
    ctx: &Ctx<'_>,
) -> Result<Document> {
    let slots = find_slots(&root, select, ctx)?;
    let format = format.unwrap_or_else(|| decide(&[(&root, &slots)]));
    let labels = slots.iter().map(|s| s.pointer.clone()).collect();
    let (root, conversations) = take_conversations(root, slots, format, ctx)?;
    let layout = Layout::Json {
        root,
        style: Style::detect(text),
    };
    let mut doc = Document::new(format, layout, conversations, labels);
    doc.crlf = lines::is_crlf(text);
    Ok(doc.with_single_label())
}

fn lines_document(
    lines: Lines<'_>,
    select: Option<&Select>,
    format: Option<Format>,
    ctx: &Ctx<'_>,
) -> Result<Document> {
    let mut found = Vec::with_capacity(lines.values.len());
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
    for (n, root, slots) in found {
        let many = slots.len() > 1;
        for slot in &slots {
            labels.push(if many {
                format!("line {n}:{}", slot.pointer)
            } else {
                format!("line {n}")
            });
        }
        let (root, convs) = take_conversations(root, slots, format, &ctx.at_line(n))?;
        roots.push(root);
        conversations.extend(convs);
    }
    let layout = Layout::Lines {
        lines: roots,
        style: Style::lines(lines.body),
    };
    let mut doc = Document::new(format, layout, conversations, labels);
    doc.crlf = lines::is_crlf(lines.body);
    doc.tail = lines.tail.as_bytes().to_vec();
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

/// How a chat format's messages are read and written (Cline's are Anthropic's, lifted).
fn codec(format: Format) -> Option<MessageCodec> {
    match format {
        Format::Anthropic | Format::Cline => Some(anthropic::CODEC),
        Format::OpenAi => Some(openai::CODEC),
        Format::ClaudeCode | Format::OpenHands | Format::Codex | Format::Responses => None,
    }
}

/// Takes each slot's value out of the root and reads it as a conversation.
fn take_conversations(
    mut value: Value,
    slots: Vec<Slot>,
    format: Format,
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
                let (conv, keys) = responses::read_body(map, ctx, ptr)?;
                (conv, Some(keys))
            }
            (SlotKind::List, Value::Array(items), Format::Responses, _) => {
                (responses::read_list(items, ctx, ptr)?, None)
            }
            (SlotKind::List, Value::Array(items), Format::OpenHands, _) => {
                (openhands::read_list(items, ctx, ptr)?, None)
            }
            (SlotKind::Body, Value::Object(map), _, Some(codec)) => {
                let (conv, keys) = body::read_body(map, codec, ctx, ptr)?;
                (conv, Some(keys))
            }
            (SlotKind::List, Value::Array(items), _, Some(codec)) => {
                (body::read_list(items, codec, ctx, ptr)?, None)
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
        });
    }
    Ok((
        Root {
            value,
            slots: placed,
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
        }
    }

    /// A document with one conversation labels it "".
    fn with_single_label(mut self) -> Self {
        if self.conversations.len() == 1 {
            self.labels = vec![String::new()];
        }
        self
    }

    pub(crate) fn write_bytes(&self) -> Result<Vec<u8>> {
        let mut out = self.write_layout()?;
        if self.crlf {
            out = lines::to_crlf(&out);
        }
        out.extend_from_slice(&self.tail);
        if self.bom {
            out.splice(0..0, "\u{feff}".bytes());
        }
        Ok(out)
    }

    fn write_layout(&self) -> Result<Vec<u8>> {
        let mut next = 0;
        match &self.layout {
            Layout::ClaudeCode { style } => match self.conversations.as_slice() {
                [conv] => claude_code::write(conv, style),
                _ => Err(one_conversation(self.format)),
            },
            Layout::Codex { style, header } => match self.conversations.as_slice() {
                [conv] => codex::write(conv, header.as_ref(), style),
                _ => Err(one_conversation(self.format)),
            },
            Layout::Json { root, style } => {
                let mut out = Vec::new();
                style.write(&self.fill(root, &mut next)?, &mut out)?;
                if style.trailing_newline {
                    out.push(b'\n');
                }
                Ok(out)
            }
            Layout::Lines { lines, style } => {
                let mut out = Vec::new();
                for (i, root) in lines.iter().enumerate() {
                    if i > 0 {
                        out.push(b'\n');
                    }
                    style.write(&self.fill(root, &mut next)?, &mut out)?;
                }
                if style.trailing_newline && !lines.is_empty() {
                    out.push(b'\n');
                }
                Ok(out)
            }
        }
    }

    /// The root with its slots filled from the conversations from index `next` on.
    fn fill(&self, root: &Root, next: &mut usize) -> Result<Value> {
        let mut value = root.value.clone();
        for placed in &root.slots {
            let (Some(conv), Some(label)) = (self.conversations.get(*next), self.labels.get(*next))
            else {
                return Err(FormatError::Write {
                    at: "the document".into(),
                    reason: "fewer conversations than places to put them".into(),
                });
            };
            *next += 1;
            let lowered;
            let conv = if self.format == Format::Cline {
                lowered = cline::lower(conv);
                &lowered
            } else {
                conv
            };
            let written = match (self.format, codec(self.format), &placed.body_keys) {
                (Format::Responses, _, Some(keys)) => responses::write_body(conv, keys, label)?,
                (Format::Responses, _, None) => responses::write_list(conv, label)?,
                (_, Some(codec), Some(keys)) => body::write_body(conv, keys, codec, label)?,
                (_, Some(codec), None) => body::write_list(conv, codec, label)?,
                (_, None, _) => openhands::write_list(conv, label)?,
            };
            match value.pointer_mut(&placed.pointer) {
                Some(slot) => *slot = written,
                None => {
                    return Err(FormatError::Write {
                        at: body::conversation_name(label),
                        reason: format!("its place {} is gone from the wrapper", placed.pointer),
                    })
                }
            }
        }
        Ok(value)
    }
}
