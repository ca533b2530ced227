//! A client that marks its newest message `cache_control` (SWE-agent, mini-swe-agent, the SDKs'
//! caching examples) moves the mark every turn. Compressed once per turn, a real session
//! still resumes every turn from the previous output; each output carries the client's mark
//! and no stale one, and expands to the client's body byte for byte. Through `condense serve`
//! too, where the proxy takes the kept history from memory.

use crate::known_lists::{compressed_turns, messages};
use crate::serve_fake::{through_the_proxy, ProxyTurns};
use serde_json::{json, Value};

/// The request body of the session's first `n` messages, the last block of its last message
/// marked, or (`marked` 2) of its last two user messages, as SWE-agent marks them (a string
/// content sent as one marked text block, as a client must to mark it).
fn marked_body(messages: &[Value], n: usize, marked: usize) -> Vec<u8> {
    let mut messages = messages[..n].to_vec();
    let mark = json!({"type": "ephemeral"});
    let at: Vec<usize> = match marked {
        1 => vec![n - 1],
        _ => (0..n)
            .rev()
            .filter(|&i| messages[i]["role"] == "user")
            .take(marked)
            .collect(),
    };
    for i in at {
        let message = &mut messages[i];
        match &mut message["content"] {
            Value::String(text) => {
                let block = json!([{"type": "text", "text": text, "cache_control": mark}]);
                message["content"] = block;
            }
            Value::Array(blocks) => {
                if let Some(Value::Object(block)) = blocks.last_mut() {
                    block.insert("cache_control".into(), mark.clone());
                }
            }
            _ => {}
        }
    }
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 8192, "messages": messages});
    serde_json::to_vec_pretty(&body).unwrap()
}

fn marks(bytes: &[u8]) -> usize {
    String::from_utf8_lossy(bytes)
        .matches("\"cache_control\"")
        .count()
}

/// The turns: the session at three fifths, two and four messages on, four fifths, whole.
fn turns(n: usize) -> [usize; 5] {
    [n * 3 / 5, n * 3 / 5 + 2, n * 3 / 5 + 4, n * 4 / 5, n]
}

#[test]
fn a_moved_mark_resumes_every_turn_and_each_output_expands_to_its_body() {
    for marked in [1, 2] {
        moved_marks_resume(marked);
    }
}

/// Each turn of the session compressed, its last `marked` messages marked ([`marked_body`]).
fn moved_marks_resume(marked: usize) {
    let messages = messages();
    let turns = turns(messages.len());
    let bodies: Vec<Vec<u8>> = turns
        .iter()
        .map(|&n| marked_body(&messages, n, marked))
        .collect();
    for (turn, (output, report)) in compressed_turns(&bodies).iter().enumerate() {
        if turn > 0 {
            let resumed = &report["runs"][0]["resumed"];
            let previous = turns[turn - 1];
            assert_eq!(resumed["input_messages"], previous, "turn {turn}: {report}");
            // The history before the message that lost its mark is not parsed again.
            let unread = resumed["unread_messages"].as_u64().unwrap();
            assert!(unread * 2 > previous as u64, "turn {turn}: {report}");
        }
        assert_eq!(
            marks(output),
            marked,
            "turn {turn}: the client's marks, no stale one"
        );
        assert!(output.len() < bodies[turn].len(), "turn {turn}");
    }
}

#[test]
fn through_the_proxy_a_moved_mark_resumes_every_turn() {
    let messages = messages();
    let bodies: Vec<Vec<u8>> = turns(messages.len())
        .iter()
        .map(|&n| marked_body(&messages, n, 1))
        .collect();
    let ProxyTurns { lines, sent } = through_the_proxy("marks", &bodies);
    for (turn, body) in sent.iter().enumerate() {
        assert_eq!(marks(body.as_bytes()), 1, "turn {turn}");
    }
    // Two messages on, and the mark moved to the newest: what was sent before is sent again
    // (the message that lost its mark is the same message to the provider's cache).
    assert!(lines[1].contains("prefix stable"), "{}", lines[1]);
}
