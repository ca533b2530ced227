//! A client that edits its own history every turn (OpenHands' observation masking turns every
//! tool result older than its window into `<MASKED>`) still resumes every turn from the
//! previous output: the turns a real session's masks moved on resume with those messages
//! taken from the body, leave most of the history unparsed, and every output expands to its
//! body byte for byte. Through
//! `condense serve` too, where the log says how many messages were edited.

use crate::known_lists::{assert_expands_from, compress, messages};
use crate::serve_fake::{anthropic_answer, post, Reply, Serve, Upstream};
use crate::support::assert_expands_to;
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
    let dir = tempfile::tempdir().unwrap();
    let (store, input, out) = (
        dir.path().join("store"),
        dir.path().join("request.json"),
        dir.path().join("out.json"),
    );
    let mut previous = 0;
    let mut edited_turns = 0;
    for (turn, n) in turns(messages.len()).into_iter().enumerate() {
        let body = masked_body(&messages, n);
        std::fs::write(&input, &body).unwrap();
        let (output, report) = compress(&input, &store, &out, &[]);
        let resumed = &report["runs"][0]["resumed"];
        if turn > 0 {
            assert_eq!(resumed["input_messages"], previous, "turn {turn}: {report}");
            let edited = resumed["edited_messages"].as_u64().unwrap();
            if edited > 0 {
                edited_turns += 1;
            }
            // The history before the last multiple of 64 messages before the first edit is not
            // parsed again.
            let unread = resumed["unread_messages"].as_u64().unwrap();
            assert!(unread * 2 > previous as u64, "turn {turn}: {report}");
        }
        assert!(output.len() <= body.len(), "turn {turn}");
        assert_expands_to(
            out.to_str().unwrap(),
            store.to_str().unwrap(),
            dir.path().join("back.json").to_str().unwrap(),
            &body,
        );
        previous = n;
    }
    // The window moved over tool results at every turn but, at most, one.
    assert!(edited_turns >= 3, "{edited_turns}");
}

#[test]
fn through_the_proxy_masked_observations_resume_every_turn() {
    use crate::serve::ANTHROPIC_HEADERS;
    let messages = messages();
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let serve = Serve::start(&up.url, &[]);
    let mut headers = ANTHROPIC_HEADERS.to_vec();
    headers.push(("x-condense-session", "masks"));
    let turns = turns(messages.len());
    let mut last = Vec::new();
    for &n in &turns {
        last = masked_body(&messages, n);
        let answer = post(&serve.url, "/v1/messages", &headers, &last);
        assert_eq!(answer.status, 200, "{}", serve.log());
    }
    let log = serve.wait_log("session=masks model=", turns.len());
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("session=masks model="))
        .collect();
    assert_eq!(lines.len(), turns.len(), "{log}");
    for (turn, line) in lines.iter().enumerate() {
        assert_eq!(line.contains("resumed"), turn > 0, "turn {turn}: {line}");
    }
    assert!(
        lines.iter().filter(|l| l.contains(" edited)")).count() >= 3,
        "{log}"
    );
    let sent = up.requests()[turns.len() - 1].body.clone();
    assert_expands_from(sent.as_bytes(), serve.store.path(), "masks", &last);
}
