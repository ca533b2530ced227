//! A client that edits its own history every turn (OpenHands' observation masking turns every
//! tool result older than its window into `<MASKED>`) still resumes every turn from the
//! previous output: the turns a real session's masks moved on resume with those messages
//! taken from the body, leave most of the history unparsed, and every output expands to its
//! body byte for byte. Through
//! `condense serve` too, where the log says how many messages were edited.

use crate::known_lists::{compressed_turns, messages};
use crate::serve_fake::{through_the_proxy, ProxyTurns};
use serde_json::{json, Value};

/// Messages an observation stays unmasked for (OpenHands' `attention_window` counts events).
const WINDOW: usize = 12;

/// The request body of the session's first `n` messages, every tool result but those of the
/// last [`WINDOW`] messages masked.
fn masked_body(messages: &[Value], n: usize) -> Vec<u8> {
    let mut messages = messages[..n].to_vec();
    for message in &mut messages[..n.saturating_sub(WINDOW)] {
        if let Value::Array(blocks) = &mut message["content"] {
            for block in blocks.iter_mut().filter(|b| b["type"] == "tool_result") {
                block["content"] = json!("<MASKED>");
            }
        }
    }
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 8192, "messages": messages});
    serde_json::to_vec_pretty(&body).unwrap()
}

/// The turns: the session at three fifths, two, four and eight messages on, and whole.
fn turns(n: usize) -> [usize; 5] {
    [n * 3 / 5, n * 3 / 5 + 2, n * 3 / 5 + 4, n * 3 / 5 + 12, n]
}

#[test]
fn masked_observations_resume_every_turn_and_each_output_expands_to_its_body() {
    let messages = messages();
    let turns = turns(messages.len());
    let bodies: Vec<Vec<u8>> = turns.iter().map(|&n| masked_body(&messages, n)).collect();
    let mut edited_turns = 0;
    for (turn, (output, report)) in compressed_turns(&bodies).iter().enumerate() {
        if turn > 0 {
            let resumed = &report["runs"][0]["resumed"];
            let previous = turns[turn - 1];
            assert_eq!(resumed["input_messages"], previous, "turn {turn}: {report}");
            if resumed["edited_messages"].as_u64().unwrap() > 0 {
                edited_turns += 1;
            }
            // The history before the last multiple of 64 messages before the first edit is not
            // parsed again.
            let unread = resumed["unread_messages"].as_u64().unwrap();
            assert!(unread * 2 > previous as u64, "turn {turn}: {report}");
        }
        assert!(output.len() <= bodies[turn].len(), "turn {turn}");
    }
    // The window moved over tool results at every turn but, at most, one.
    assert!(edited_turns >= 3, "{edited_turns}");
}

#[test]
fn through_the_proxy_masked_observations_resume_every_turn() {
    let messages = messages();
    let bodies: Vec<Vec<u8>> = turns(messages.len())
        .iter()
        .map(|&n| masked_body(&messages, n))
        .collect();
    let ProxyTurns { lines, .. } = through_the_proxy("masks", &bodies);
    let edited = lines.iter().filter(|l| l.contains(" edited)")).count();
    assert!(edited >= 3, "{lines:?}");
}
