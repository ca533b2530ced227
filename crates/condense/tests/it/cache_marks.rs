//! A client that marks its newest message `cache_control` (SWE-agent, mini-swe-agent, the SDKs'
//! caching examples) moves the mark every turn. Compressed once per turn, a real session
//! still resumes every turn from the previous output; each output carries the client's mark
//! and no stale one, and expands to the client's body byte for byte. Through `condense serve`
//! too, where the proxy takes the kept history from memory.

use crate::known_lists::{assert_expands_from, compress, messages};
use crate::serve_fake::{anthropic_answer, post, Reply, Serve, Upstream};
use crate::support::assert_expands_to;
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

/// Each of `bodies` compressed in turn by a new `condense compress` on one store, each output
/// checked to expand to its body byte for byte: the outputs and their reports.
pub(crate) fn compressed_turns(bodies: &[Vec<u8>]) -> Vec<(Vec<u8>, Value)> {
    let dir = tempfile::tempdir().unwrap();
    let (store, input, out) = (
        dir.path().join("store"),
        dir.path().join("request.json"),
        dir.path().join("out.json"),
    );
    let mut outputs = Vec::new();
    for body in bodies {
        std::fs::write(&input, body).unwrap();
        outputs.push(compress(&input, &store, &out, &[]));
        assert_expands_to(
            out.to_str().unwrap(),
            store.to_str().unwrap(),
            dir.path().join("back.json").to_str().unwrap(),
            body,
        );
    }
    outputs
}

/// What a proxy in front of an upstream answering "ok" made of `bodies`, sent as one
/// session's turns (Anthropic Messages, `x-condense-session: session`).
pub(crate) struct ProxyTurns {
    /// The proxy, stopped when dropped (its store holds the session's archive).
    pub(crate) serve: Serve,
    /// Its log line of each request, in order.
    pub(crate) lines: Vec<String>,
    /// The body the upstream got for each request.
    pub(crate) sent: Vec<String>,
}

/// Sends `bodies` through a new proxy as the turns of `session` ([`ProxyTurns`]); every one
/// answered 200.
pub(crate) fn through_the_proxy(session: &str, bodies: &[Vec<u8>]) -> ProxyTurns {
    use crate::serve::ANTHROPIC_HEADERS;
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let serve = Serve::start(&up.url, &[]);
    let mut headers = ANTHROPIC_HEADERS.to_vec();
    headers.push(("x-condense-session", session));
    for body in bodies {
        let answer = post(&serve.url, "/v1/messages", &headers, body);
        assert_eq!(answer.status, 200, "{}", serve.log());
    }
    // One log line a request, written once the answer is sent: waited for.
    let needle = format!("session={session} model=");
    let log = serve.wait_log(&needle, bodies.len());
    let lines: Vec<String> = log
        .lines()
        .filter(|l| l.contains(&needle))
        .map(String::from)
        .collect();
    assert_eq!(lines.len(), bodies.len(), "{log}");
    let sent = up.requests().into_iter().map(|r| r.body).collect();
    ProxyTurns { serve, lines, sent }
}

#[test]
fn through_the_proxy_a_moved_mark_resumes_every_turn() {
    let messages = messages();
    let bodies: Vec<Vec<u8>> = turns(messages.len())
        .iter()
        .map(|&n| marked_body(&messages, n, 1))
        .collect();
    let ProxyTurns { serve, lines, sent } = through_the_proxy("marks", &bodies);
    for (turn, body) in sent.iter().enumerate() {
        assert_eq!(marks(body.as_bytes()), 1, "turn {turn}");
    }
    // Every request after the first started from the one before.
    for (turn, line) in lines.iter().enumerate() {
        assert_eq!(line.contains("resumed"), turn > 0, "turn {turn}: {line}");
    }
    // Two messages on, and the mark moved to the newest: what was sent before is sent again
    // (the message that lost its mark is the same message to the provider's cache).
    assert!(lines[1].contains("prefix stable"), "{}", lines[1]);
    let last = sent.last().unwrap();
    assert_expands_from(
        last.as_bytes(),
        serve.store.path(),
        "marks",
        bodies.last().unwrap(),
    );
}
