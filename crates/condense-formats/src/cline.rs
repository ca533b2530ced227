//! Cline / Roo Code `api_conversation_history.json`: Anthropic messages whose tool calls are XML
//! in the assistant's text and whose tool results are user text blocks.
//!
//! ```text
//! assistant: "I'll look at it.\n\n<read_file>\n<path>src/a.ts</path>\n</read_file>"
//! user:      "[read_file for 'src/a.ts'] Result:", "export const a = 1;\n", "<environment_details>"
//! ```
//!
//! Read as Anthropic, then [`lift`]ed: each `[tool …] Result:` marker block and the result after
//! it (one text block and its images; or the rest of the marker's own block) become a
//! [`ToolResult`], answering a [`ToolUse`] cut out of the `<tool>…</tool>` XML of the assistant
//! message before it. Ids are synthetic and stable: `cline-<message index>-<call number>`. The
//! tool use's input is its parameters as a JSON object (`{"path":"src/a.ts"}`), or, when that
//! would be longer than the XML (escaped file contents), the XML between the tool's tags as is,
//! so it never counts more than the text it stands for. The exact XML and marker are kept in
//! `condense:` hints, and [`lower`] puts everything back as it was before writing.

use crate::error::Ctx;
use crate::json::{has_hint, set_hint, take_hint, Map};
use condense_model::{
    Block, Content, Conversation, Message, RawJson, Role, TextBlock, ToolResult, ToolUse,
};
use serde_json::Value;

/// Hint on the text parts and tool uses cut from one text block: that block's index.
const HINT_TEXT: &str = "cline_text";
/// Hint on a tool use: the exact XML of the call.
const HINT_XML: &str = "cline_xml";
/// Hint on a tool result: the exact marker text (`[read_file for 'a'] Result:`), with the
/// whitespace after it when the result shares its block.
const HINT_MARKER: &str = "cline_marker";
/// Hint on a tool result: the result was in the marker's own text block.
const HINT_INLINE: &str = "cline_inline";

/// Parameters whose value may hold their own closing tag: Cline takes the last one.
const FREE_TEXT_PARAMS: [&str; 3] = ["content", "diff", "result"];

/// A result marker at the start of a text block.
struct Marker<'t> {
    name: &'t str,
    /// The marker line and the whitespace after it.
    head: &'t str,
    /// What follows in the same block (empty: the result is in the next blocks).
    rest: &'t str,
}

/// `[name] Result:` or `[name for '…'] Result:` as the first line of `text`.
fn marker(text: &str) -> Option<Marker<'_>> {
    // What the first line must start with, checked before looking for its end.
    if !text.starts_with('[') {
        return None;
    }
    let line_end = text.find('\n').unwrap_or(text.len());
    let line = text[..line_end].trim_end();
    let inner = line.strip_prefix('[')?.strip_suffix("] Result:")?;
    let name_end = inner
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(inner.len());
    let (name, after) = inner.split_at(name_end);
    if name.is_empty() || !(after.is_empty() || after.starts_with(" for ")) {
        return None;
    }
    let rest = text[line.len()..].trim_start();
    let head = &text[..text.len() - rest.len()];
    Some(Marker { name, head, rest })
}

/// Whether `text` starts with a result marker (`[name] Result:` or `[name for '…'] Result:`):
/// without one in a user message, a list is not a Cline history ([`is_history`]).
pub(crate) fn has_marker(text: &str) -> bool {
    marker(text).is_some()
}

/// Whether a message list (JSON, before reading) is a Cline history: some user message has a
/// result marker for a tool whose `<tool>…</tool>` call is in the message before it.
pub(crate) fn is_history(messages: &[Value]) -> bool {
    messages.windows(2).any(|pair| {
        let (call, result) = (&pair[0], &pair[1]);
        if call.get("role").and_then(Value::as_str) != Some("assistant")
            || result.get("role").and_then(Value::as_str) != Some("user")
        {
            return false;
        }
        // The markers first: most user messages have none, and then the call's texts are not
        // joined.
        let names: Vec<&str> = texts_of(result)
            .filter_map(marker)
            .map(|m| m.name)
            .collect();
        if names.is_empty() {
            return false;
        }
        let said = texts_of(call).collect::<Vec<_>>().join("\n");
        names
            .iter()
            .any(|name| said.contains(&format!("<{name}>")) && said.contains(&format!("</{name}>")))
    })
}

/// The texts of a message's content (a string, or its text blocks).
fn texts_of(message: &Value) -> impl Iterator<Item = &str> {
    let content = message.get("content");
    let whole = content.and_then(Value::as_str);
    let blocks = content.and_then(Value::as_array).into_iter().flatten();
    whole.into_iter().chain(blocks.filter_map(|b| {
        (b.get("type").and_then(Value::as_str) == Some("text"))
            .then(|| b.get("text").and_then(Value::as_str))
            .flatten()
    }))
}

/// Turns the XML calls and their result markers into tool uses and results.
pub(crate) fn lift(conv: &mut Conversation, ctx: &Ctx<'_>) {
    let mut unpaired = 0;
    let mut previous_chat: Option<usize> = None;
    for i in 0..conv.messages.len() {
        if !conv.messages[i].is_chat() {
            continue;
        }
        let call_at = previous_chat.replace(i);
        let Some(call_at) = call_at else { continue };
        if conv.messages[i].role != Role::User || conv.messages[call_at].role != Role::Assistant {
            continue;
        }
        let names: Vec<String> = conv.messages[i]
            .content
            .blocks
            .iter()
            .filter_map(plain_marker)
            .map(|m| m.name.to_string())
            .collect();
        if names.is_empty() {
            continue;
        }
        let ids = cut_calls(&mut conv.messages[call_at], &names, call_at);
        unpaired += ids.iter().filter(|id| id.is_none()).count();
        attach_results(&mut conv.messages[i], &ids);
    }
    if unpaired > 0 {
        ctx.warn(format!(
            "{unpaired} Cline tool result marker{} no `<tool>` call in the assistant message \
             before {}: kept as text",
            if unpaired == 1 { " has" } else { "s have" },
            if unpaired == 1 { "it" } else { "them" },
        ));
    }
}

/// The marker of a text block that has no extra fields.
fn plain_marker(block: &Block) -> Option<Marker<'_>> {
    match block {
        Block::Text(t) if t.extra.is_empty() => marker(&t.text),
        _ => None,
    }
}

/// Cuts the calls named (in order) out of the assistant's text blocks; returns the id of each,
/// `None` for a call not found.
fn cut_calls(msg: &mut Message, names: &[String], at: usize) -> Vec<Option<String>> {
    let mut ids = vec![None; names.len()];
    let mut next = 0;
    let mut blocks = Vec::with_capacity(msg.content.blocks.len() + names.len() * 2);
    for (k, block) in std::mem::take(&mut msg.content.blocks)
        .into_iter()
        .enumerate()
    {
        let Block::Text(text) = block else {
            blocks.push(block);
            continue;
        };
        let mut cursor = 0;
        let mut parts = Vec::new();
        while let Some((start, end)) = names
            .get(next)
            .and_then(|name| find_call(&text.text, name, cursor))
        {
            let name = &names[next];
            let id = format!("cline-{at}-{next}");
            parts.push(Part::Text(&text.text[cursor..start]));
            parts.push(Part::Call(name, &text.text[start..end], id.clone()));
            ids[next] = Some(id);
            next += 1;
            cursor = end;
        }
        if parts.is_empty() {
            blocks.push(Block::Text(text));
            continue;
        }
        parts.push(Part::Text(&text.text[cursor..]));
        blocks.extend(parts_to_blocks(parts, k, &text.extra));
    }
    msg.content.blocks = blocks;
    ids
}

enum Part<'t> {
    Text(&'t str),
    Call(&'t str, &'t str, String),
}

fn parts_to_blocks(parts: Vec<Part<'_>>, k: usize, extra: &RawJson) -> Vec<Block> {
    let group = Value::from(k);
    let mut out = Vec::with_capacity(parts.len());
    for (i, part) in parts.into_iter().enumerate() {
        match part {
            Part::Text(text) => {
                // The first part carries the block's own fields; empty parts are only kept to
                // carry them.
                let mut map = if i == 0 {
                    extra.to_map().unwrap_or_default()
                } else {
                    Map::new()
                };
                if text.is_empty() && map.is_empty() {
                    continue;
                }
                set_hint(&mut map, HINT_TEXT, group.clone());
                out.push(Block::Text(TextBlock {
                    text: text.to_string(),
                    extra: RawJson::from_map(map),
                }));
            }
            Part::Call(name, xml, id) => {
                let mut map = Map::new();
                set_hint(&mut map, HINT_TEXT, group.clone());
                set_hint(&mut map, HINT_XML, Value::String(xml.to_string()));
                out.push(Block::ToolUse(ToolUse {
                    id,
                    name: name.to_string(),
                    input: call_input(name, xml),
                    extra: RawJson::from_map(map),
                }));
            }
        }
    }
    out
}

/// The byte range of the first `<name>…</name>` at or after `from`.
fn find_call(text: &str, name: &str, from: usize) -> Option<(usize, usize)> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = from + text.get(from..)?.find(&open)?;
    let end = start + text[start..].find(&close)? + close.len();
    Some((start, end))
}

/// The input of a call: its parameters as a JSON object, unless that is longer than the XML
/// between the tool's tags (then that XML, verbatim).
fn call_input(name: &str, xml: &str) -> RawJson {
    let inner = &xml[name.len() + 2..xml.len() - name.len() - 3];
    match parameters(inner).and_then(|p| serde_json::to_string(&p).ok()) {
        Some(json) if json.len() <= inner.len() => RawJson::from_string_unchecked(json),
        _ => RawJson::from_string_unchecked(inner.to_string()),
    }
}

/// `<p>v</p>` pairs separated by whitespace, values trimmed as Cline reads them.
fn parameters(inner: &str) -> Option<Map> {
    let mut params = Map::new();
    let mut rest = inner.trim_start();
    while !rest.is_empty() {
        let open_end = rest.strip_prefix('<')?.find('>')? + 1;
        let param = &rest[1..open_end];
        if param.is_empty() || !param.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        let close = format!("</{param}>");
        let body = &rest[open_end + 1..];
        let end = if FREE_TEXT_PARAMS.contains(&param) {
            body.rfind(&close)?
        } else {
            body.find(&close)?
        };
        params.insert(
            param.to_string(),
            Value::String(body[..end].trim().to_string()),
        );
        rest = body[end + close.len()..].trim_start();
    }
    Some(params)
}

/// Replaces each marker (and the result after it) whose call was found by a tool result.
fn attach_results(msg: &mut Message, ids: &[Option<String>]) {
    let old = std::mem::take(&mut msg.content.blocks);
    let mut blocks = Vec::with_capacity(old.len());
    let mut ids = ids.iter();
    let mut iter = old.into_iter().peekable();
    while let Some(block) = iter.next() {
        let Some(m) = plain_marker(&block) else {
            blocks.push(block);
            continue;
        };
        let Some(Some(id)) = ids.next() else {
            blocks.push(block);
            continue;
        };
        let mut hints = Map::new();
        set_hint(&mut hints, HINT_MARKER, Value::String(m.head.to_string()));
        let content = if m.rest.is_empty() {
            let mut result = Vec::new();
            if let Some(text) =
                iter.next_if(|b| matches!(b, Block::Text(_)) && plain_marker(b).is_none())
            {
                result.push(text);
            }
            while let Some(image) = iter.next_if(|b| matches!(b, Block::Image(_))) {
                result.push(image);
            }
            Content::blocks(result)
        } else {
            set_hint(&mut hints, HINT_INLINE, Value::Bool(true));
            Content::string(m.rest)
        };
        blocks.push(Block::ToolResult(ToolResult {
            tool_use_id: id.clone(),
            content,
            is_error: None,
            extra: RawJson::from_map(hints),
        }));
    }
    msg.content.blocks = blocks;
}

/// The conversation as Anthropic messages again: tool uses back into their text, results back
/// into marker and result blocks.
pub(crate) fn lower(conv: &Conversation) -> Conversation {
    let mut out = conv.clone();
    for msg in &mut out.messages {
        lower_in_place(msg);
    }
    out
}

/// One message as an Anthropic message again (see [`lower`]).
pub(crate) fn lower_message(msg: &Message) -> Message {
    let mut out = msg.clone();
    lower_in_place(&mut out);
    out
}

fn lower_in_place(msg: &mut Message) {
    if msg.content.blocks.iter().any(is_lifted) {
        msg.content.blocks = lower_blocks(std::mem::take(&mut msg.content.blocks));
    }
}

/// Whether a block is a part of a cut text block or a lifted result.
fn is_lifted(block: &Block) -> bool {
    match block {
        Block::Text(t) => has_hint(&t.extra, HINT_TEXT),
        Block::ToolUse(t) => has_hint(&t.extra, HINT_TEXT),
        Block::ToolResult(t) => has_hint(&t.extra, HINT_MARKER),
        _ => false,
    }
}

fn lower_blocks(blocks: Vec<Block>) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::with_capacity(blocks.len());
    // The text block being rebuilt from its parts, and its index.
    let mut open: Option<(Value, TextBlock)> = None;
    for block in blocks {
        let group = group_of(&block);
        if let Some((k, text)) = open.take() {
            if group.as_ref() == Some(&k) {
                open = Some((k, append(text, block)));
                continue;
            }
            out.push(Block::Text(text));
        }
        if let Some(k) = group {
            let start = TextBlock {
                text: String::new(),
                extra: RawJson::default(),
            };
            open = Some((k, append(start, block)));
            continue;
        }
        match block {
            Block::ToolResult(tr) if has_hint(&tr.extra, HINT_MARKER) => {
                out.extend(result_blocks(tr));
            }
            other => out.push(other),
        }
    }
    if let Some((_, text)) = open {
        out.push(Block::Text(text));
    }
    out
}

/// The text block group a part belongs to.
fn group_of(block: &Block) -> Option<Value> {
    let extra = match block {
        Block::Text(t) => &t.extra,
        Block::ToolUse(t) => &t.extra,
        _ => return None,
    };
    if !has_hint(extra, HINT_TEXT) {
        return None;
    }
    let mut map = extra.to_map().ok()?;
    take_hint(&mut map, HINT_TEXT)
}

/// Adds a part to the text block being rebuilt.
fn append(mut text: TextBlock, part: Block) -> TextBlock {
    match part {
        Block::Text(t) => {
            let mut extra = t.extra.to_map().unwrap_or_default();
            take_hint(&mut extra, HINT_TEXT);
            if text.extra.is_empty() && !extra.is_empty() {
                text.extra = RawJson::from_map(extra);
            }
            text.text.push_str(&t.text);
        }
        Block::ToolUse(tu) => text.text.push_str(&call_text(&tu)),
        other => text.text.push_str(&Content::blocks(vec![other]).text()),
    }
    text
}

/// The XML of a call: as read while its input is unchanged, else written from the input.
fn call_text(tu: &ToolUse) -> String {
    let mut extra = tu.extra.to_map().unwrap_or_default();
    if let Some(Value::String(xml)) = take_hint(&mut extra, HINT_XML) {
        if xml.len() > tu.name.len() * 2 + 5 && call_input(&tu.name, &xml) == tu.input {
            return xml;
        }
    }
    let body = match tu.input_object() {
        Some(params) => params
            .iter()
            .map(|(k, v)| {
                let value = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                format!("<{k}>{value}</{k}>\n")
            })
            .collect::<String>(),
        None => tu.input.as_str().to_string(),
    };
    format!("<{0}>\n{body}</{0}>", tu.name)
}

/// A result as its marker and result blocks again.
fn result_blocks(tr: ToolResult) -> Vec<Block> {
    let mut extra = tr.extra.to_map().unwrap_or_default();
    let head = match take_hint(&mut extra, HINT_MARKER) {
        Some(Value::String(head)) => head,
        _ => String::new(),
    };
    if take_hint(&mut extra, HINT_INLINE).is_some() {
        return vec![Block::text(head + &tr.content.text())];
    }
    let mut blocks = vec![Block::text(head)];
    blocks.extend(tr.content.blocks);
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers() {
        let m = marker("[read_file for 'src/a.ts'] Result:").unwrap();
        assert_eq!((m.name, m.rest), ("read_file", ""));
        let m = marker("[search_files for 'x' in '*.ts'] Result:\n\nfound 2").unwrap();
        assert_eq!(
            (m.name, m.head, m.rest),
            (
                "search_files",
                "[search_files for 'x' in '*.ts'] Result:\n\n",
                "found 2"
            )
        );
        assert_eq!(
            marker("[attempt_completion] Result:").unwrap().name,
            "attempt_completion"
        );
        for not in [
            "The result: fine",
            "[read_file for 'a'] Result: was fine] and more",
            "[ERROR] You did not use a tool",
            "[read file] Result:",
            "x [read_file for 'a'] Result:",
        ] {
            assert!(marker(not).is_none(), "{not}");
        }
    }

    #[test]
    fn parameters_and_inputs() {
        let xml = "<read_file>\n<path>src/a.ts</path>\n</read_file>";
        assert_eq!(
            call_input("read_file", xml).as_str(),
            r#"{"path":"src/a.ts"}"#
        );
        // Escaping would make the JSON longer than the XML: the XML stays.
        let body = "\"q\"\n".repeat(12);
        let xml = format!(
            "<write_to_file>\n<path>a</path>\n<content>\n{body}</content>\n</write_to_file>"
        );
        assert_eq!(
            call_input("write_to_file", &xml).as_str(),
            format!("\n<path>a</path>\n<content>\n{body}</content>\n")
        );
        // A content holding its own closing tag: the last one closes it.
        let p = parameters("<content>a</content>b</content>").unwrap();
        assert_eq!(p["content"], "a</content>b");
        assert!(parameters("plain words").is_none());
    }
}
