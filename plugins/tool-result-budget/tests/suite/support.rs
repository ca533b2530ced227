//! A fake [`Host`], a runner, a readable rendering of conversations, fixture block builders.

use condense_abi::testing::{apply, Applied};
use condense_abi::{build_stage, StageReport};
use condense_model::{
    Block, Content, ContentShape, Conversation, Image, ImageSource, RawJson, ToolResult,
};
use serde_json::{json, Value};
use std::fmt::Write as _;
use tool_result_budget::ToolResultBudget;

/// The shared in-memory host: content-addressed store, state in a cell, fixed time,
/// tokens = bytes / 4 rounded up.
pub type FakeHost = condense_abi::testing::MemoryHost;

/// The stage state as JSON, each reference text shown by its length only.
pub trait StateSummary {
    fn state_summary(&self) -> Value;
}

impl StateSummary for FakeHost {
    /// The state as pretty JSON, each reference text shown by its length only.
    fn state_summary(&self) -> Value {
        let text = self.state.borrow().clone().unwrap_or_default();
        let mut v: Value = serde_json::from_str(&text).unwrap();
        if let Some(replaced) = v.get_mut("replaced").and_then(Value::as_object_mut) {
            for entry in replaced.values_mut() {
                let len = entry["reference"].as_str().unwrap().len();
                entry["reference"] = json!(format!("<{len} bytes>"));
            }
        }
        v
    }
}

/// A stage from TOML config text.
pub fn stage(config_toml: &str) -> ToolResultBudget {
    build_stage::<ToolResultBudget>(config_toml).unwrap()
}

pub fn run(stage: &ToolResultBudget, conv: &Conversation, host: &FakeHost) -> Applied {
    apply(stage, conv, host).unwrap()
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

/// The report as JSON, for snapshots.
pub fn report_json(report: &StageReport) -> Value {
    serde_json::to_value(report).unwrap()
}

/// Block constructors for hand-made fixtures.
pub fn tool_use(id: &str, name: &str, input: Value) -> Block {
    Block::tool_use(id, name, RawJson::from_string_unchecked(input.to_string()))
}

pub fn tool_result(id: &str, content: Content, is_error: Option<bool>) -> Block {
    Block::ToolResult(ToolResult {
        is_error,
        ..ToolResult::new(id, content)
    })
}

pub fn image() -> Block {
    Block::Image(Image {
        source: ImageSource::Base64 {
            media_type: "image/png".into(),
            data: "iVBORw0KGgo=".into(),
        },
        extra: RawJson::default(),
    })
}
