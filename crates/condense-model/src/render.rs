//! A stable, readable rendering of a conversation, for diffs and snapshot tests.
//!
//! One paragraph per message, one entry per block: role, ids, kind, and the text, with long
//! texts elided to their head and tail plus a hash, so a change anywhere in an elided part still
//! shows up. The rendering depends only on the conversation, so it is stable across runs.
//!
//! ```
//! use condense_model::{render, Block, Conversation, Message, Role};
//! let mut c = Conversation::default();
//! c.messages.push(Message::new("m1", Role::User, vec![Block::text("hello")]));
//! assert!(render::render(&c).contains("[m1] user"));
//! ```

use crate::{Block, Content, ContentShape, Conversation, ImageSource, Message};
use std::fmt::Write;
use twox_hash::XxHash3_64;

/// Texts up to this many lines are shown whole.
const WHOLE_LINES: usize = 12;
/// Lines kept at the head and tail of an elided text.
const HEAD_LINES: usize = 6;
const TAIL_LINES: usize = 3;
/// Longer lines are cut (with their length shown).
const MAX_LINE_CHARS: usize = 160;

/// Renders the whole conversation.
pub fn render(conv: &Conversation) -> String {
    let mut out = String::new();
    if let Some(system) = &conv.system {
        let _ = writeln!(out, "[system prompt]");
        render_content(&mut out, system, "  ");
        out.push('\n');
    }
    if !conv.tools.is_empty() {
        let names: Vec<&str> = conv.tools.iter().map(|t| t.name.as_str()).collect();
        let _ = writeln!(out, "[tools] {}\n", names.join(", "));
    }
    if !conv.extra.is_empty() {
        let _ = writeln!(
            out,
            "[request fields] {}\n",
            short_json(conv.extra.as_str())
        );
    }
    for m in &conv.messages {
        render_message(&mut out, m);
        out.push('\n');
    }
    out
}

/// Renders one message (a paragraph).
pub fn render_message(out: &mut String, m: &Message) {
    let ts = m
        .timestamp
        .as_deref()
        .map(|t| format!(" @ {t}"))
        .unwrap_or_default();
    let _ = writeln!(out, "[{}] {}{ts}", m.id, m.role.as_str());
    if m.is_chat() {
        render_content(out, &m.content, "  ");
    } else {
        let kind = m
            .envelope
            .to_map()
            .ok()
            .and_then(|e| e.get("type").and_then(|t| t.as_str().map(str::to_string)))
            .unwrap_or_else(|| "event".into());
        let _ = writeln!(
            out,
            "  (not sent to the model: {kind}, {} bytes)",
            m.envelope.len()
        );
    }
}

fn render_content(out: &mut String, content: &Content, indent: &str) {
    if content.blocks.is_empty() {
        let shape = match content.shape {
            ContentShape::Null => "null",
            ContentShape::Absent => "absent",
            _ => "empty",
        };
        let _ = writeln!(out, "{indent}({shape} content)");
    }
    for block in &content.blocks {
        render_block(out, block, indent);
    }
}

fn render_block(out: &mut String, block: &Block, indent: &str) {
    match block {
        Block::Text(t) => {
            let _ = writeln!(out, "{indent}text:");
            render_text(out, &t.text, indent);
        }
        Block::Thinking(t) => {
            let _ = writeln!(out, "{indent}thinking:");
            render_text(out, &t.thinking, indent);
        }
        Block::ToolUse(t) => {
            let _ = writeln!(out, "{indent}tool_use {} {}:", t.id, t.name);
            render_text(out, t.input.as_str(), indent);
        }
        Block::ToolResult(t) => {
            let err = match t.is_error {
                Some(true) => " (error)",
                _ => "",
            };
            let _ = writeln!(out, "{indent}tool_result for {}{err}:", t.tool_use_id);
            render_content(out, &t.content, &format!("{indent}  "));
        }
        Block::Image(i) => match &i.source {
            ImageSource::Base64 { media_type, data } => {
                let _ = writeln!(
                    out,
                    "{indent}image {media_type}, {} base64 chars, xxh3 {:016x}",
                    data.len(),
                    XxHash3_64::oneshot(data.as_bytes())
                );
            }
            ImageSource::Reference { json } => {
                let _ = writeln!(out, "{indent}image reference {}", short_json(json.as_str()));
            }
        },
        Block::Opaque(o) => {
            let _ = writeln!(out, "{indent}opaque block {}", short_json(o.json.as_str()));
        }
    }
}

fn short_json(s: &str) -> String {
    cut_line(s)
}

fn cut_line(line: &str) -> String {
    let n = line.chars().count();
    if n <= MAX_LINE_CHARS {
        line.to_string()
    } else {
        let head: String = line.chars().take(MAX_LINE_CHARS).collect();
        format!("{head}… [{n} chars]")
    }
}

/// Text as indented `| ` lines, elided with a hash when long.
fn render_text(out: &mut String, text: &str, indent: &str) {
    let lines: Vec<&str> = text.split('\n').collect();
    let pad = format!("{indent}  | ");
    if lines.len() <= WHOLE_LINES {
        for l in &lines {
            let _ = writeln!(out, "{pad}{}", cut_line(l));
        }
        return;
    }
    for l in &lines[..HEAD_LINES] {
        let _ = writeln!(out, "{pad}{}", cut_line(l));
    }
    let hidden = &lines[HEAD_LINES..lines.len() - TAIL_LINES];
    let hidden_text = hidden.join("\n");
    let _ = writeln!(
        out,
        "{indent}  … {} lines, {} chars elided (xxh3 {:016x}) …",
        hidden.len(),
        hidden_text.chars().count(),
        XxHash3_64::oneshot(hidden_text.as_bytes())
    );
    for l in &lines[lines.len() - TAIL_LINES..] {
        let _ = writeln!(out, "{pad}{}", cut_line(l));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Role, ToolResult};

    #[test]
    fn long_texts_are_elided_with_a_hash_that_tracks_changes() {
        let long: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let changed = long.replace("line 50", "line fifty");
        let r = |t: &str| {
            let mut c = Conversation::default();
            c.messages
                .push(Message::new("a", Role::User, vec![Block::text(t)]));
            render(&c)
        };
        let (a, b) = (r(&long), r(&changed));
        assert!(a.contains("lines,") && a.contains("elided"), "{a}");
        assert_ne!(a, b, "a change in the elided middle still shows");
        assert!(a.lines().count() < 20);
    }

    #[test]
    fn tool_results_show_their_call_id_and_error_flag() {
        let mut c = Conversation::default();
        c.messages.push(Message::new(
            "r",
            Role::Tool,
            vec![Block::ToolResult(ToolResult {
                tool_use_id: "call_1".into(),
                content: Content::string("boom"),
                is_error: Some(true),
                extra: Default::default(),
            })],
        ));
        let s = render(&c);
        assert!(s.contains("tool_result for call_1 (error):"), "{s}");
        assert!(s.contains("| boom"), "{s}");
    }
}
