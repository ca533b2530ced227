//! The time-based path: the cache is cold, so old results are cleared in the messages.

use crate::scan::Scan;
use crate::{cleared_marker, thousands, Config, CLEARED_MARKER};
use condense_abi::{BlockView, Context, Replacements, StageEvent, StageReport, View};
use condense_model::{Block, Content, ContentShape, RawJson};
use condense_retain::error_line;
use std::collections::HashSet;

/// Counts of one time-based run, for the note.
#[derive(Debug, Default)]
pub struct Cleared {
    pub results: usize,
    pub already: usize,
    /// Results no bigger than the marker, left as they are.
    pub too_small: usize,
    pub inputs: usize,
    pub inputs_already: usize,
    pub tokens: usize,
}

/// The input that replaces a cleared tool_use input of `chars` chars.
pub fn cleared_input(chars: usize) -> String {
    format!(r#"{{"cleared":true,"original_chars":{chars}}}"#)
}

/// Whether a tool_use input is one [`cleared_input`] wrote.
pub fn is_cleared_input(input: &str) -> bool {
    input
        .strip_prefix(r#"{"cleared":true,"original_chars":"#)
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Replaces the content of every old result (and, with `clear_tool_inputs`, the large inputs of
/// their calls), recording each change in `report`. Decided through `view`; only the messages
/// changed are copied, into `replacements`.
pub fn clear_old(
    view: &View<'_>,
    replacements: &mut Replacements<'_, '_>,
    scan: &Scan,
    config: &Config,
    cx: &Context<'_>,
    report: &mut StageReport,
) -> Cleared {
    let calls = crate::scan::tool_use_positions(view);
    let mut done = Cleared::default();
    let mut inputs_seen = HashSet::new();
    for old in &scan.old {
        let Some(message) = view.message(old.at.message) else {
            continue;
        };
        let message_id = message.id().to_string();
        // The error line needs the message's envelope (a Claude Code line's `toolUseResult`)
        // beside the result, so the result is read through its message here.
        let marker = match message.blocks().nth(old.at.block) {
            Some(BlockView::ToolResult(result)) if !old.cleared => {
                let envelope = RawJson::from_string_unchecked(message.envelope().to_string());
                cleared_marker(error_line(&result.to_tool_result(), &envelope).as_deref())
            }
            _ => CLEARED_MARKER.to_string(),
        };
        let marker_tokens = cx.count_tokens(&marker);
        if old.cleared {
            done.already += 1;
        } else if old.tokens <= marker_tokens {
            done.too_small += 1;
        } else if let Some(result) = replacements.tool_result_mut(&old.at) {
            result.content = match result.content.shape {
                ContentShape::String => Content::string(marker.as_str()),
                _ => Content::blocks(vec![Block::text(marker.as_str())]),
            };
            let tokens = old.tokens - marker_tokens;
            done.results += 1;
            done.tokens += tokens;
            report.blocks_changed += 1;
            report.events.push(StageEvent {
                kind: "cleared".to_string(),
                message_id,
                detail: format!(
                    "tool {} result {}: {} tokens -> {marker}",
                    old.tool(),
                    old.tool_use_id,
                    thousands(old.tokens)
                ),
                tokens,
            });
        }
        if !config.clear_tool_inputs || !inputs_seen.insert(old.tool_use_id.as_str()) {
            continue;
        }
        let Some(&(mi, bi)) = calls.get(old.tool_use_id.as_str()) else {
            continue;
        };
        let Some(call_message) = view.message(mi) else {
            continue;
        };
        let Some(BlockView::ToolUse { input, .. }) = call_message.blocks().nth(bi) else {
            continue;
        };
        if is_cleared_input(input) {
            done.inputs_already += 1;
            continue;
        }
        let chars = input.chars().count();
        if chars <= config.min_input_chars {
            continue;
        }
        let replacement = cleared_input(chars);
        let tokens = cx
            .count_tokens(input)
            .saturating_sub(cx.count_tokens(&replacement));
        if tokens == 0 {
            continue;
        }
        let call = replacements
            .message_mut(mi)
            .and_then(|m| match m.content.blocks.get_mut(bi) {
                Some(Block::ToolUse(call)) => Some(call),
                _ => None,
            });
        let Some(call) = call else {
            continue;
        };
        call.input = RawJson::from_string_unchecked(replacement.clone());
        done.inputs += 1;
        done.tokens += tokens;
        report.blocks_changed += 1;
        report.events.push(StageEvent {
            kind: "cleared".to_string(),
            message_id: call_message.id().to_string(),
            detail: format!(
                "tool {} input of {}: {} chars -> {replacement}",
                old.tool(),
                old.tool_use_id,
                thousands(chars)
            ),
            tokens,
        });
    }
    done
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cleared_inputs_are_recognised() {
        assert!(is_cleared_input(&cleared_input(12_345)));
        assert!(is_cleared_input(&cleared_input(0)));
        assert!(!is_cleared_input(r#"{"cleared":true,"original_chars":}"#));
        assert!(!is_cleared_input(
            r#"{"cleared":true,"original_chars":1,"x":2}"#
        ));
        assert!(!is_cleared_input(r#"{"file_path":"a"}"#));
        // Parsed strictly: a marker that is not JSON must fail here, not compare as Null.
        let parsed: serde_json::Value = serde_json::from_str(&cleared_input(7)).unwrap();
        assert_eq!(
            parsed,
            serde_json::json!({"cleared": true, "original_chars": 7})
        );
    }
}
