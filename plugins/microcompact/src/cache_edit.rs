//! The cache-edit path: the cache is hot, so the messages stay byte-identical and the results
//! to clear are recorded as cache edits (and, for Anthropic requests, as `context_management`).

use crate::scan::Scan;
use crate::state::{Pinned, State};
use crate::{thousands, Config, CLEARED_MARKER};
use condense_abi::{BlockView, Context, StageEvent, StageReport, View};
use condense_model::RawJson;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

/// The Anthropic context editing strategy this stage mirrors.
pub const STRATEGY: &str = "clear_tool_uses_20250919";

/// What the cache-edit path found.
#[derive(Debug, Default)]
pub struct Hot {
    /// Tokens of the old results still whole in the messages (pinned ones included).
    pub clearable: usize,
    /// Tokens the new edits free (or would free, when they do not fire).
    pub new_tokens: usize,
    /// Old results that could get a new edit.
    pub candidates: usize,
    /// Whether new edits were made.
    pub fired: bool,
    /// New edits made.
    pub new_edits: usize,
    /// Edits of earlier runs sent again.
    pub resent: usize,
    /// Edits of earlier runs whose result is no longer an old, whole result here.
    pub dropped: usize,
}

/// Decides on new cache edits, updates `state.pinned` and records every edit (new and
/// re-sent) as a `cache-edit` event. The conversation is not touched.
pub fn plan(
    conv: &View<'_>,
    scan: &Scan,
    state: &mut State,
    config: &Config,
    cx: &Context<'_>,
    report: &mut StageReport,
) -> Hot {
    let marker_tokens = cx.count_tokens(CLEARED_MARKER);
    let live: Vec<_> = scan.old.iter().filter(|o| !o.cleared).collect();
    let mut hot = Hot {
        clearable: live.iter().map(|o| o.tokens).sum(),
        ..Hot::default()
    };
    let earlier_edits = state.pinned_by_id();
    for old in &live {
        if !earlier_edits.contains_key(old.tool_use_id.as_str()) && old.tokens > marker_tokens {
            hot.candidates += 1;
            hot.new_tokens += old.tokens - marker_tokens;
        }
    }
    hot.fired = hot.candidates > 0
        && hot.clearable > config.trigger_tokens
        && hot.new_tokens >= config.clear_at_least;

    let mut pinned = Vec::new();
    for old in &live {
        let earlier = earlier_edits.get(old.tool_use_id.as_str());
        let (tokens, how) = match earlier {
            Some(p) => (p.tokens, "re-sent: pinned on an earlier run"),
            None if hot.fired && old.tokens > marker_tokens => (old.tokens - marker_tokens, "new"),
            None => continue,
        };
        if earlier.is_some() {
            hot.resent += 1;
        } else {
            hot.new_edits += 1;
        }
        pinned.push(Pinned {
            tool_use_id: old.tool_use_id.clone(),
            tool: old.tool().to_string(),
            tokens,
        });
        report.events.push(StageEvent {
            kind: "cache-edit".to_string(),
            message_id: conv
                .message(old.at.message)
                .map_or_else(String::new, |m| m.id().to_string()),
            detail: edit_detail(old.tool(), &old.tool_use_id, tokens, how),
            tokens,
        });
    }
    hot.dropped = state.pinned.len().saturating_sub(hot.resent);
    state.pinned = pinned;
    hot
}

/// A `cache-edit` event's detail: `tool Bash result toolu_01: clear 5,120 tokens server-side
/// (new)`. Pushed piece by piece: a long session re-sends hundreds of edits at every run.
fn edit_detail(tool: &str, id: &str, tokens: usize, how: &str) -> String {
    let tokens = thousands(tokens);
    let mut detail = String::with_capacity(48 + tool.len() + id.len() + tokens.len() + how.len());
    for piece in [
        "tool ",
        tool,
        " result ",
        id,
        ": clear ",
        &tokens,
        " tokens server-side (",
        how,
        ")",
    ] {
        detail.push_str(piece);
    }
    detail
}

/// The `clear_tool_uses_20250919` edit for this config. `exclude_tools` holds the configured
/// ones plus every tool of the conversation that is not compressible, so the server clears the
/// same kinds of results this stage would.
pub fn strategy_edit(conv: &View<'_>, config: &Config) -> Value {
    let mut exclude: BTreeSet<&str> = config.exclude_tools.iter().map(String::as_str).collect();
    let used = conv.messages().flat_map(|m| {
        m.blocks().filter_map(|b| match b {
            BlockView::ToolUse { name, .. } => Some(name),
            _ => None,
        })
    });
    for name in conv.tool_names().chain(used) {
        if !config.compressible_tools.iter().any(|c| c == name) {
            exclude.insert(name);
        }
    }
    json!({
        "type": STRATEGY,
        "trigger": {"type": "input_tokens", "value": config.trigger_tokens},
        "keep": {"type": "tool_uses", "value": config.keep_recent},
        "clear_at_least": {"type": "input_tokens", "value": config.clear_at_least},
        "exclude_tools": exclude,
        "clear_tool_inputs": config.clear_tool_inputs,
    })
}

/// Writes `edit` into the request's top-level `context_management.edits`, replacing an edit of
/// the same type and keeping every other key and edit. Errors say why nothing was written.
pub fn write_context_management(extra: &RawJson, edit: Value) -> Result<RawJson, String> {
    let mut fields = extra
        .to_map()
        .map_err(|e| format!("the request fields are not a JSON object ({e})"))?;
    let cm = fields
        .entry("context_management")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(cm) = cm else {
        return Err("the request's context_management is not an object".to_string());
    };
    let edits = cm
        .entry("edits")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Value::Array(edits) = edits else {
        return Err("the request's context_management.edits is not an array".to_string());
    };
    match edits
        .iter_mut()
        .find(|e| e.get("type") == Some(&json!(STRATEGY)))
    {
        Some(existing) => *existing = edit,
        None => edits.push(edit),
    }
    Ok(RawJson::from_map(fields))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn merges_into_existing_fields_and_edits() {
        let extra = RawJson::from_value(&json!({
            "model": "claude",
            "context_management": {
                "edits": [
                    {"type": "clear_thinking_20251015", "keep": "all"},
                    {"type": STRATEGY, "old": true}
                ],
                "other": 1
            },
            "max_tokens": 5
        }));
        let out = write_context_management(&extra, json!({"type": STRATEGY, "new": true}));
        assert_eq!(
            out.unwrap().to_value().unwrap(),
            json!({
                "model": "claude",
                "context_management": {
                    "edits": [
                        {"type": "clear_thinking_20251015", "keep": "all"},
                        {"type": STRATEGY, "new": true}
                    ],
                    "other": 1
                },
                "max_tokens": 5
            })
        );
        let empty = write_context_management(&RawJson::default(), json!({"type": STRATEGY}));
        assert_eq!(
            empty.unwrap().as_str(),
            r#"{"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]}}"#
        );
    }

    #[test]
    fn refuses_what_it_cannot_merge_into() {
        for bad in [
            json!({"context_management": "on"}),
            json!({"context_management": {"edits": {}}}),
        ] {
            let raw = RawJson::from_value(&bad);
            assert!(write_context_management(&raw, json!({})).is_err(), "{bad}");
        }
        let not_object = RawJson::from_string_unchecked("[1]".into());
        assert!(write_context_management(&not_object, json!({})).is_err());
    }
}
