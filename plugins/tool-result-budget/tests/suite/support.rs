//! What only this stage's tests need: a rendering of conversations that abbreviates long
//! originals (references never are) and the stored state with each reference shown by its
//! length. Everything else comes from `condense_testing`.

use condense_model::{Block, Content, ContentShape, Conversation, ImageSource, RawJson};
use condense_testing::MemoryHost;
use serde_json::{json, Value};
use std::fmt::Write as _;

/// The stored state as JSON, each reference text shown by its length only.
pub fn state_summary(host: &MemoryHost) -> Value {
    let mut v = host.state_json();
    if let Some(replaced) = v.get_mut("replaced").and_then(Value::as_object_mut) {
        for entry in replaced.values_mut() {
            let len = entry["reference"].as_str().unwrap().len();
            entry["reference"] = json!(format!("<{len} bytes>"));
        }
    }
    v
}

/// Text longer than this is abbreviated in renderings (references never are).
const SHOW_WHOLE: usize = 2_500;

fn show(text: &str) -> String {
    let chars = text.chars().count();
    if chars <= SHOW_WHOLE || text.starts_with("[condense: ") {
        return text.to_string();
    }
    let head: String = text.chars().take(60).collect();
    let tail: String = text.chars().skip(chars - 30).collect();
    format!("«{chars} chars, {} bytes: {head:?} … {tail:?}»", text.len())
}

fn render_content(out: &mut String, content: &Content, indent: &str) {
    let shape = match content.shape {
        ContentShape::String => "string",
        ContentShape::Array => "array",
        ContentShape::Null => "null",
        ContentShape::Absent => "absent",
    };
    let _ = writeln!(out, "{indent}content ({shape}):");
    for block in &content.blocks {
        render_block(out, block, &format!("{indent}  "));
    }
}

fn render_block(out: &mut String, block: &Block, indent: &str) {
    let extra = |raw: &RawJson| {
        if raw.is_empty() {
            String::new()
        } else {
            format!(" extra={raw}")
        }
    };
    match block {
        Block::Text(t) => {
            let _ = writeln!(out, "{indent}- text{}:", extra(&t.extra));
            for line in show(&t.text).lines() {
                let _ = writeln!(out, "{indent}    | {line}");
            }
        }
        Block::Thinking(t) => {
            let _ = writeln!(out, "{indent}- thinking: {}", show(&t.thinking));
        }
        Block::ToolUse(t) => {
            let _ = writeln!(out, "{indent}- tool_use {} {} {}", t.id, t.name, t.input);
        }
        Block::ToolResult(r) => {
            let _ = writeln!(
                out,
                "{indent}- tool_result {} is_error={:?}{}",
                r.tool_use_id,
                r.is_error,
                extra(&r.extra)
            );
            render_content(out, &r.content, &format!("{indent}  "));
        }
        Block::Image(i) => {
            let src = match &i.source {
                ImageSource::Base64 { media_type, data } => {
                    format!("{media_type}, {} bytes base64", data.len())
                }
                ImageSource::Reference { json } => json.to_string(),
            };
            let _ = writeln!(out, "{indent}- image ({src})");
        }
        Block::Opaque(o) => {
            let _ = writeln!(out, "{indent}- opaque {}", show(o.json.as_str()));
        }
    }
}

/// Every message: id, role, and each block with its text (long originals abbreviated).
pub fn render(conv: &Conversation) -> String {
    let mut out = String::new();
    for m in &conv.messages {
        let _ = writeln!(out, "## {} ({})", m.id, m.role.as_str());
        render_content(&mut out, &m.content, "");
    }
    out
}
