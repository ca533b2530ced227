//! `condense serve` and the APIs' and clients' own ways, which the proxy keeps when it changes a
//! body: a field taken only as a beta goes with its beta named; a model's window, long by
//! default or by beta, is the one the stages fit; the request's output limit is left free
//! beside the prompt; a session Claude Code names by header is the one its body names.

use crate::serve::{agent_request, ANTHROPIC_HEADERS};
use crate::serve_fake::*;
use crate::support::Received;

/// A proxy in front of a fake upstream that answers every request, with a pipeline file of
/// `stages`; the folder holding the file goes with them.
fn serving(stages: &str) -> (Upstream, Serve, tempfile::TempDir) {
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let dir = tempfile::tempdir().unwrap();
    let pipeline = dir.path().join("pipeline.toml");
    std::fs::write(&pipeline, stages).unwrap();
    let serve = Serve::start(&up.url, &["--pipeline", pipeline.to_str().unwrap()]);
    (up, serve, dir)
}

/// `body` sent as an Anthropic request in `session`, with `beta` as its `anthropic-beta`: what
/// the upstream received.
fn sent(
    (up, serve): (&Upstream, &Serve),
    session: &str,
    beta: Option<&str>,
    body: &[u8],
) -> Received {
    let mut headers = ANTHROPIC_HEADERS.to_vec();
    headers.push(("x-condense-session", session));
    headers.extend(beta.map(|b| ("anthropic-beta", b)));
    let a = post(&serve.url, "/v1/messages", &headers, body);
    assert_eq!(a.status, 200, "{}", serve.log());
    up.requests().pop().unwrap()
}

/// `body` went upstream cut by a tenth or more (truncate-oldest dropped old turns).
fn assert_cut(body: &[u8], upstream: &Received, serve: &Serve) {
    assert!(
        upstream.body.len() < body.len() * 9 / 10,
        "{} -> {}: {}",
        body.len(),
        upstream.body.len(),
        serve.log()
    );
}

const TRUNCATE_OLDEST: &str =
    "[[stage]]\nname = \"truncate-oldest\"\nplugin = \"truncate-oldest\"\n";

/// microcompact with `emit_context_management` writes the request's `context_management`,
/// which the Anthropic API takes only with its beta named in `anthropic-beta`: the proxy names
/// it, after the betas the client sent, and leaves the headers of a body it sends unchanged
/// as they were.
#[test]
fn a_body_given_context_management_goes_with_its_beta_named() {
    let (up, serve, _dir) = serving(
        "[[stage]]\nname = \"microcompact\"\nplugin = \"microcompact\"\n[stage.config]\n\
         keep_recent = 1\ntrigger_tokens = 100\nclear_at_least = 100\n\
         emit_context_management = true\n",
    );
    let at = (&up, &serve);
    let body = serde_json::to_vec(&agent_request(4, 200, false)).unwrap();
    let first = sent(at, "edits-1", None, &body);
    assert_eq!(
        first.json()["context_management"]["edits"][0]["type"],
        "clear_tool_uses_20250919",
        "{}",
        serve.log()
    );
    assert_eq!(
        first.header("anthropic-beta"),
        Some("context-management-2025-06-27")
    );
    let second = sent(at, "edits-2", Some("prompt-caching-2024-07-31"), &body);
    assert_eq!(
        second.header("anthropic-beta"),
        Some("prompt-caching-2024-07-31,context-management-2025-06-27")
    );
    // A body that needs nothing goes with the client's headers as they came.
    let small = serde_json::to_vec(&agent_request(1, 2, false)).unwrap();
    let third = sent(at, "edits-3", Some("prompt-caching-2024-07-31"), &small);
    assert_eq!(third.body.as_bytes(), &small[..]);
    assert_eq!(
        third.header("anthropic-beta"),
        Some("prompt-caching-2024-07-31")
    );
}

/// A client that asks Anthropic for the long context window (`context-1m-...` in
/// `anthropic-beta`, as Claude Code does for a `[1m]` model) has it: a body over its model's
/// 200k window goes upstream as it came, where without the beta it is cut to that window.
#[test]
fn the_long_context_beta_gives_the_request_its_window() {
    let (up, serve, _dir) = serving(TRUNCATE_OLDEST);
    let at = (&up, &serve);
    // About 190k tokens of claude-sonnet-4-5 (a 200k window).
    let body = serde_json::to_vec(&agent_request(30, 320, false)).unwrap();
    let beta = "prompt-caching-2024-07-31,context-1m-2025-08-07";
    let wide = sent(at, "long-1", Some(beta), &body);
    assert_eq!(wide.body.as_bytes(), &body[..], "{}", serve.log());
    let log = serve.wait_log("session=long-1", 1);
    assert!(log.contains("window=1,000,000 output=32,000"), "{log}");
    let narrow = sent(at, "long-2", None, &body);
    assert_cut(&body, &narrow, &serve);
}

/// The APIs refuse a prompt that fits the window but not beside the request's output limit
/// (`max_tokens`): what that limit asks beyond the pipeline's reserve is left free too.
#[test]
fn the_requests_max_tokens_is_left_free() {
    let (up, serve, _dir) = serving(TRUNCATE_OLDEST);
    let at = (&up, &serve);
    // About 150k tokens of claude-sonnet-4-5 (a 200k window, 20k kept for the output).
    let mut request = agent_request(24, 320, false);
    let body = serde_json::to_vec(&request).unwrap();
    let small_limit = sent(at, "limit-1", None, &body);
    assert_eq!(small_limit.body.as_bytes(), &body[..], "{}", serve.log());
    request["max_tokens"] = 64_000.into();
    let body = serde_json::to_vec(&request).unwrap();
    let large_limit = sent(at, "limit-2", None, &body);
    assert_cut(&body, &large_limit, &serve);
    assert_eq!(large_limit.json()["max_tokens"], 64_000);
    let log = serve.wait_log("session=limit-2", 1);
    // 44,000 past the reserve, rounded up to steps of 8,192.
    assert!(log.contains("window=200,000 output=69,152"), "{log}");
}

/// Claude Code names its session in `metadata.user_id` (a JSON string from 2.1.78 on) and, from
/// 2.1.86 on, in `x-claude-code-session-id` too: either way it is one session, and the header
/// goes upstream as the client sent it.
#[test]
fn claude_codes_session_header_names_the_session_its_body_does() {
    let (up, serve, _dir) = serving(TRUNCATE_OLDEST);
    let mut request = agent_request(1, 2, false);
    request["metadata"]["user_id"] =
        r#"{"device_id":"d1","account_uuid":"","session_id":"5f3e-json"}"#.into();
    let body = serde_json::to_vec(&request).unwrap();
    let by_body = post(&serve.url, "/v1/messages", ANTHROPIC_HEADERS, &body);
    assert_eq!(by_body.status, 200);
    request.as_object_mut().unwrap().remove("metadata");
    let body = serde_json::to_vec(&request).unwrap();
    let mut headers = ANTHROPIC_HEADERS.to_vec();
    headers.push(("x-claude-code-session-id", "5f3e-json"));
    let by_header = post(&serve.url, "/v1/messages", &headers, &body);
    assert_eq!(by_header.status, 200);
    let log = serve.wait_log("session=cc-5f3e-json ", 2);
    assert_eq!(log.matches("session=cc-5f3e-json ").count(), 2, "{log}");
    let sent = up.requests().pop().unwrap();
    assert_eq!(sent.header("x-claude-code-session-id"), Some("5f3e-json"));
}
