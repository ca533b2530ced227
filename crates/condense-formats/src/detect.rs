//! Telling the formats apart.
//!
//! Claude Code sessions and Codex rollouts are recognized by their lines (see
//! [`crate::claude_code::looks_like`], [`crate::codex::looks_like`]). For conversations found in
//! JSON (see [`crate::select::autodetect`]):
//! - a list whose elements are all OpenHands events (`action`/`observation`, no `role`) →
//!   OpenHands;
//! - a Responses request body (an object with `input`, see [`crate::responses::is_request`]), or
//!   a list of input items some of which have a `type` (`function_call`, `reasoning`, ...) →
//!   Responses;
//! - a message list or body where a user message's text block starts with a Cline result marker
//!   (`[read_file for 'a'] Result:`) for a tool whose `<read_file>` call is in the message before
//!   it → Cline (a mere mention of `Result:`, or a marker without its call, is not);
//! - OpenAI if any message has role `system`/`developer`/`tool`, has `tool_calls`, or has
//!   content parts typed `image_url`/`input_text`;
//! - otherwise Anthropic if any content block is typed `tool_use`/`tool_result`/`thinking`/
//!   `redacted_thinking`/`image`, or a request body has a top-level `system`;
//! - otherwise both read the same, losslessly: OpenAI.

use crate::select::SlotKind;
use crate::Format;
use crate::{cline, openhands, responses};
use serde_json::Value;

#[derive(Default)]
struct Evidence {
    events: bool,
    responses: bool,
    cline: bool,
    openai: bool,
    anthropic: bool,
}

/// Decides the format from the conversations' JSON (each slot's value and kind).
pub(crate) fn decide<'v>(targets: impl IntoIterator<Item = (&'v Value, SlotKind)>) -> Format {
    let mut ev = Evidence::default();
    for (target, kind) in targets {
        let messages = match kind {
            SlotKind::Body => {
                if target.get("system").is_some() {
                    ev.anthropic = true;
                }
                target.get("messages").and_then(Value::as_array)
            }
            SlotKind::Input => {
                ev.responses = true;
                continue;
            }
            SlotKind::List => target.as_array(),
        };
        let Some(messages) = messages else { continue };
        if kind == SlotKind::List
            && !messages.is_empty()
            && messages
                .iter()
                .all(|m| openhands::is_event(m) && m.get("role").is_none())
        {
            ev.events = true;
        }
        if kind == SlotKind::List && responses::is_item_list(messages) {
            ev.responses = true;
        }
        if cline::is_history(messages) {
            ev.cline = true;
        }
        for message in messages {
            observe_message(&mut ev, message);
        }
    }
    if ev.events {
        Format::OpenHands
    } else if ev.responses {
        Format::Responses
    } else if ev.cline && !ev.openai {
        Format::Cline
    } else if ev.openai {
        Format::OpenAi
    } else if ev.anthropic {
        Format::Anthropic
    } else {
        Format::OpenAi
    }
}

fn observe_message(ev: &mut Evidence, message: &Value) {
    if let Some(role) = message.get("role").and_then(Value::as_str) {
        if matches!(role, "system" | "developer" | "tool") {
            ev.openai = true;
        }
    }
    if message.get("tool_calls").is_some_and(|t| !t.is_null()) {
        ev.openai = true;
    }
    let Some(parts) = message.get("content").and_then(Value::as_array) else {
        return;
    };
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("image_url" | "input_text") => ev.openai = true,
            Some("tool_use" | "tool_result" | "thinking" | "redacted_thinking" | "image") => {
                ev.anthropic = true;
            }
            _ => {}
        }
    }
}
