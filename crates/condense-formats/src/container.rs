//! The file around the conversations: reading a whole file into a [`Document`] and writing it back.
//!
//! Three layouts: one JSON value (its conversations taken out of it, the rest kept as the
//! wrapper), JSONL whose every line is such a JSON value (OpenHands output), and a Claude Code
//! session (the lines are the messages).

use crate::body::{self, MessageCodec};
use crate::error::Ctx;
use crate::json::{Result, Style};
use crate::select::{self, Select, Slot, SlotKind};
use crate::{anthropic, claude_code, detect, openai, openhands};
use crate::{Document, Format, FormatError, ReadOptions};
use condense_model::Conversation;
use serde_json::Value;

/// How the conversations sit in the file.
#[derive(Debug, Clone)]
pub(crate) enum Layout {
    Json { root: Root, style: Style },
    Lines { lines: Vec<Root>, style: Style },
    ClaudeCode { style: Style },
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
    let ctx = Ctx::new(source);
    let text = utf8(bytes, &ctx)?;
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
    let mut doc = if opts.format == Some(Format::ClaudeCode) {
        if let Some(sel) = &opts.select {
            return Err(FormatError::Select {
                at: ctx.at(""),
                select: sel.clone(),
                reason: "a Claude Code session is the whole file; --select does not apply".into(),
            });
        }
        claude_code_document(parse_lines(text, &ctx)?, &ctx, Style::lines(text))?
    } else {
        read_auto(text, select.as_ref(), opts.format, &ctx)?
    };
    doc.bom = bom;
    Ok(doc)
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
    let lines = if jsonl_name {
        match parse_lines(text, ctx) {
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
                if select.is_none() && format.is_none() && claude_code::is_line(&root) {
                    return claude_code_document(vec![(1, root)], ctx, Style::lines(text));
                }
                return json_document(root, text, select, format, ctx);
            }
            Err(e) if !first_line_parses(text) => return Err(ctx.invalid_json(&e)),
            Err(_) => parse_lines(text, ctx)?,
        }
    };
    if select.is_none() && format.is_none() && claude_code::looks_like(&lines) {
        return claude_code_document(lines, ctx, Style::lines(text));
    }
    lines_document(lines, select, format, ctx, Style::lines(text))
}

fn utf8<'b>(bytes: &'b [u8], ctx: &Ctx<'_>) -> Result<&'b str> {
    std::str::from_utf8(bytes).map_err(|e| {
        let good = &bytes[..e.valid_up_to()];
        let line = good.iter().filter(|b| **b == b'\n').count() + 1;
        FormatError::NotUtf8 {
            at: format!("{}:{line}", ctx.source),
            message: format!("invalid byte at offset {}", e.valid_up_to()),
        }
    })
}

/// Whether the first non-empty line is a JSON value of its own (the file is JSONL).
fn first_line_parses(text: &str) -> bool {
    let multi = text.trim().contains('\n');
    let first = text.lines().find(|l| !l.trim().is_empty());
    multi && first.is_some_and(|l| serde_json::from_str::<Value>(l).is_ok())
}

/// Parses every non-empty line, numbered from 1.
fn parse_lines(text: &str, ctx: &Ctx<'_>) -> Result<Vec<(usize, Value)>> {
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let value = serde_json::from_str(line).map_err(|e| ctx.at_line(i + 1).invalid_json(&e))?;
        out.push((i + 1, value));
    }
    Ok(out)
}

fn claude_code_document(
    lines: Vec<(usize, Value)>,
    ctx: &Ctx<'_>,
    style: Style,
) -> Result<Document> {
    if lines.is_empty() {
        return Err(ctx.detect("the input is empty"));
    }
    let conv = claude_code::read(lines, ctx)?;
    Ok(Document {
        format: Format::ClaudeCode,
        layout: Layout::ClaudeCode { style },
        conversations: vec![conv],
        labels: vec![String::new()],
        bom: false,
        usage: Vec::new(),
        warnings: Vec::new(),
    })
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
    Ok(Document {
        format,
        layout: Layout::Json {
            root,
            style: Style::detect(text),
        },
        conversations,
        labels,
        bom: false,
        usage: Vec::new(),
        warnings: Vec::new(),
    }
    .with_single_label())
}

fn lines_document(
    lines: Vec<(usize, Value)>,
    select: Option<&Select>,
    format: Option<Format>,
    ctx: &Ctx<'_>,
    style: Style,
) -> Result<Document> {
    let mut found = Vec::with_capacity(lines.len());
    for (n, root) in lines {
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
    Ok(Document {
        format,
        layout: Layout::Lines {
            lines: roots,
            style,
        },
        conversations,
        labels,
        bom: false,
        usage: Vec::new(),
        warnings: Vec::new(),
    }
    .with_single_label())
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

fn codec(format: Format) -> Option<MessageCodec> {
    match format {
        Format::Anthropic => Some(anthropic::CODEC),
        Format::OpenAi => Some(openai::CODEC),
        Format::ClaudeCode | Format::OpenHands => None,
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
        let (conv, body_keys) = match (slot.kind, target, codec(format)) {
            (SlotKind::Body, Value::Object(map), Some(codec)) => {
                let (conv, keys) = body::read_body(map, codec, ctx, ptr)?;
                (conv, Some(keys))
            }
            (SlotKind::List, Value::Array(items), Some(codec)) => {
                (body::read_list(items, codec, ctx, ptr)?, None)
            }
            (SlotKind::List, Value::Array(items), None) if format == Format::OpenHands => {
                (openhands::read_list(items, ctx, ptr)?, None)
            }
            (_, other, _) => {
                let expected = match format {
                    Format::OpenHands => "an OpenHands event list (an array)",
                    Format::ClaudeCode => "a Claude Code session (JSONL lines)",
                    _ => "a message list or a request body",
                };
                return Err(ctx.unexpected(ptr, expected, &other));
            }
        };
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
    /// A document with one conversation labels it "".
    fn with_single_label(mut self) -> Self {
        if self.conversations.len() == 1 {
            self.labels = vec![String::new()];
        }
        self
    }

    pub(crate) fn write_bytes(&self) -> Result<Vec<u8>> {
        let mut out = self.write_layout()?;
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
                _ => Err(FormatError::Write {
                    at: "the session".into(),
                    reason: "a Claude Code session holds exactly one conversation".into(),
                }),
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
            let written = match (codec(self.format), &placed.body_keys) {
                (Some(codec), Some(keys)) => body::write_body(conv, keys, codec, label)?,
                (Some(codec), None) => body::write_list(conv, codec, label)?,
                (None, _) => openhands::write_list(conv, label)?,
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
