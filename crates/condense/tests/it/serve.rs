//! `condense serve` against a fake upstream on 127.0.0.1 that records what it receives:
//! Anthropic and OpenAI Chat, streaming and not; a compressed request (and `condense expand`
//! on it); a byte-identical pass; the prompt-too-long retry; `on_error` pass and fail; 413; an
//! upstream that cuts a stream or is down; pass-through paths; concurrent sessions.

use crate::serve_fake::*;
use crate::support::condense;
use std::sync::{mpsc, Arc, Mutex};

pub(crate) const ANTHROPIC_HEADERS: &[(&str, &str)] = &[
    ("content-type", "application/json"),
    ("x-api-key", "sk-ant-secret-key"),
    ("anthropic-version", "2023-06-01"),
];

/// An Anthropic request of `turns` tool rounds, each result `result_lines` lines long.
/// An upstream that refuses the first body as Anthropic does (prompt too long) and accepts
/// what comes next with "fits now".
pub(crate) fn too_long_once() -> Upstream {
    let ptl = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
    Upstream::start(move |_, n| {
        if n == 0 {
            Reply::Json(400, ptl.to_string())
        } else {
            Reply::Json(200, anthropic_answer("fits now"))
        }
    })
}

pub(crate) fn agent_request(turns: usize, result_lines: usize, stream: bool) -> serde_json::Value {
    let mut msgs = vec![
        serde_json::json!({"role": "user", "content": "Please fix the failing build in src/lib.rs"}),
    ];
    for i in 0..turns {
        msgs.push(serde_json::json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Step {i}: reading a file.")},
            {"type": "tool_use", "id": format!("toolu_{i:02}"), "name": "Read", "input": {"path": format!("src/file{i}.rs")}}]}));
        let result: Vec<String> = (0..result_lines)
            .map(|j| format!("line {j} of file {i}: let value_{j} = compute({j}, {i});"))
            .collect();
        msgs.push(serde_json::json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i:02}"), "content": result.join("\n")}]}));
    }
    msgs.push(serde_json::json!({"role": "assistant", "content": "Done reading."}));
    msgs.push(serde_json::json!({"role": "user", "content": "Now run the tests."}));
    serde_json::json!({
        "model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": stream,
        "system": "You are a coding agent.", "temperature": 0.2,
        "metadata": {"user_id": "user_ab12_account_0000_session_5f3e-agent"},
        "tools": [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}],
        "an_unknown_field": {"kept": [1, 2.50, "x"]},
        "messages": msgs
    })
}

#[test]
fn anthropic_body_needing_nothing_goes_upstream_byte_identical() {
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("hello back")));
    let serve = Serve::start(&up.url, &[]);
    // Odd spacing, a number as written, an escape: none of it may be re-serialized.
    let body = br#"{ "model" : "claude-sonnet-4-5", "max_tokens":1e3,
  "messages":[{"role":"user","content":"h\u00e9llo \/ there"}] }"#;
    let mut headers = ANTHROPIC_HEADERS.to_vec();
    headers.push(("x-condense-session", "plain-1"));
    let a = post(&serve.url, "/v1/messages", &headers, body);
    assert_eq!(a.status, 200, "{}", serve.log());
    assert_eq!(a.text(), anthropic_answer("hello back"));
    assert_eq!(a.header("x-condense-tokens-saved"), Some("0"));
    assert_eq!(a.header("request-id"), Some("req_fake"));
    let got = up.requests();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, "/v1/messages");
    assert_eq!(got[0].body.as_bytes(), body, "not byte-identical");
    // Auth and version pass through; condense's own header does not.
    assert_eq!(got[0].header("x-api-key"), Some("sk-ant-secret-key"));
    assert_eq!(got[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(got[0].header("x-condense-session"), None);
    let log = serve.wait_log("session=plain-1", 1);
    let line = log
        .lines()
        .find(|l| l.contains("session=plain-1"))
        .unwrap_or_default();
    assert!(
        line.contains("model=claude-sonnet-4-5") && line.contains("-> 200"),
        "{log}"
    );
    assert!(
        !log.contains("sk-ant-secret-key"),
        "a key was logged: {log}"
    );
}

#[test]
fn openai_chat_not_streaming_and_streaming() {
    let up = Upstream::start(|r, _| {
        if r.json()["stream"] == true {
            Reply::Sse {
                events: openai_events("streamed"),
                gate: None,
                cut: false,
            }
        } else {
            Reply::Json(200, openai_answer("plain"))
        }
    });
    let serve = Serve::start(&up.url, &[]);
    let headers = [
        ("content-type", "application/json"),
        ("authorization", "Bearer sk-openai-secret"),
    ];
    let body = br#"{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}"#;
    let a = post(&serve.url, "/v1/chat/completions", &headers, body);
    assert_eq!((a.status, a.text()), (200, openai_answer("plain")));
    let body_s = br#"{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let s = post(&serve.url, "/v1/chat/completions", &headers, body_s);
    assert_eq!(s.status, 200);
    assert!(s.complete);
    assert_eq!(s.text(), openai_events("streamed").concat());
    assert_eq!(s.header("content-type"), Some("text/event-stream"));
    let got = up.requests();
    assert_eq!(got[0].body.as_bytes(), body);
    assert_eq!(got[1].body.as_bytes(), body_s);
    assert_eq!(
        got[0].header("authorization"),
        Some("Bearer sk-openai-secret")
    );
    assert!(!serve
        .wait_log("/v1/chat/completions", 2)
        .contains("sk-openai-secret"));
}

/// The upstream sends the first event and waits until the client has it before sending the
/// rest: a proxy that buffered would never deliver it (the gate gives up after a minute and
/// the test fails on the order below).
#[test]
fn anthropic_stream_passes_event_by_event() {
    let (tx, rx) = mpsc::channel::<()>();
    let gate = Arc::new(Mutex::new(rx));
    let up = Upstream::start(move |_, _| Reply::Sse {
        events: anthropic_events("streamed text"),
        gate: Some(Arc::clone(&gate)),
        cut: false,
    });
    let serve = Serve::start(&up.url, &[]);
    let body = serde_json::to_vec(&agent_request(1, 3, true)).unwrap();
    let mut seen: Vec<String> = Vec::new();
    let order = Arc::new(Mutex::new(Vec::new()));
    let a = request(
        &serve.url,
        "POST",
        "/v1/messages",
        ANTHROPIC_HEADERS,
        &body,
        |chunk| {
            seen.push(String::from_utf8_lossy(chunk).into_owned());
            order.lock().unwrap().push(seen.len());
            // Releases the upstream's next event only now.
            tx.send(()).ok();
        },
    );
    assert_eq!(a.status, 200);
    assert!(a.complete);
    assert_eq!(
        seen,
        anthropic_events("streamed text"),
        "one chunk per event, in order"
    );
}

#[test]
fn a_compressed_request_keeps_every_field_and_expands_back() {
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let serve = Serve::start(&up.url, &[]);
    // Tool results over 4 KiB in old turns: snip truncates them.
    let original = serde_json::to_vec_pretty(&agent_request(4, 200, false)).unwrap();
    let mut headers = ANTHROPIC_HEADERS.to_vec();
    headers.push(("x-condense-session", "big-1"));
    let a = post(&serve.url, "/v1/messages", &headers, &original);
    assert_eq!(a.status, 200, "{}", serve.log());
    let saved: usize = a
        .header("x-condense-tokens-saved")
        .unwrap()
        .parse()
        .unwrap();
    assert!(saved > 1000, "saved {saved}");
    let sent = &up.requests()[0];
    assert!(
        sent.body.len() < original.len() * 2 / 3,
        "{} -> {}",
        original.len(),
        sent.body.len()
    );
    let (mut before, mut after): (serde_json::Value, serde_json::Value) =
        (serde_json::from_slice(&original).unwrap(), sent.json());
    assert_eq!(
        before["messages"].as_array().unwrap().len(),
        after["messages"].as_array().unwrap().len()
    );
    before.as_object_mut().unwrap().remove("messages");
    after.as_object_mut().unwrap().remove("messages");
    assert_eq!(before, after, "every other field as the client sent it");
    let log = serve.wait_log("session=big-1", 1);
    assert!(log.contains("stages=snip"), "{log}");

    // What the proxy archived restores the client's exact bytes.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sent.json");
    std::fs::write(&file, &sent.body).unwrap();
    let out = dir.path().join("restored.json");
    let store = serve.store.path().to_str().unwrap();
    let run = condense(&[
        "expand",
        file.to_str().unwrap(),
        "--store",
        store,
        "--session",
        "big-1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read(&out).unwrap(), original);
}

#[test]
fn prompt_too_long_escalates_and_retries_once_per_level() {
    let up = too_long_once();
    let serve = Serve::start(&up.url, &[]);
    let body = serde_json::to_vec(&agent_request(6, 80, false)).unwrap();
    let a = post(&serve.url, "/v1/messages", ANTHROPIC_HEADERS, &body);
    assert_eq!(
        (a.status, a.text()),
        (200, anthropic_answer("fits now")),
        "{}",
        serve.log()
    );
    let got = up.requests();
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[0].body.as_bytes(),
        &body[..],
        "the first try is the client's body"
    );
    assert!(got[1].body.len() < got[0].body.len());
    assert!(
        a.header("x-condense-tokens-saved")
            .unwrap()
            .parse::<usize>()
            .unwrap()
            > 0
    );
    let log = serve.wait_log("retries=1", 1);
    // No header: the session is the one Claude Code names in `metadata.user_id`.
    let line = log
        .lines()
        .find(|l| l.contains("retries=1"))
        .unwrap_or_default();
    // The retry starts from what the first try made of the same body (its resume point),
    // with microcompact forced.
    assert!(
        line.contains("session=cc-5f3e-agent") && line.contains("stages=resumed,microcompact"),
        "{log}"
    );
}

#[test]
fn prompt_too_long_at_every_level_gives_the_upstreams_own_error() {
    let ptl = r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    let up = Upstream::start(move |_, _| Reply::Json(400, ptl.to_string()));
    let serve = Serve::start(&up.url, &[]);
    // Long turns the forced levels can fold or summarize.
    let body = serde_json::to_vec(&serde_json::json!({
        "model": "gpt-4o",
        "messages": (0..12).map(|i| serde_json::json!({"role": if i % 2 == 0 {"user"} else {"assistant"}, "content": format!("turn {i} {}", "words ".repeat(300))})).collect::<Vec<_>>()
    })).unwrap();
    let a = post(
        &serve.url,
        "/v1/chat/completions",
        &[("authorization", "Bearer k")],
        &body,
    );
    assert_eq!((a.status, a.text()), (400, ptl.to_string()));
    let got = up.requests();
    // At most one try per level (5 in the default pipeline), each smaller than the last.
    assert!((1..=6).contains(&got.len()), "{} tries", got.len());
    for w in got.windows(2) {
        assert!(w[1].body.len() < w[0].body.len());
    }
    assert!(serve
        .wait_log("prompt too long after every level", 1)
        .contains("-> 400"));
}

#[test]
fn on_error_pass_forwards_what_it_cannot_read_and_fail_answers_502() {
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let serve = Serve::start(&up.url, &[]);
    let body = br#"{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"cut"#;
    let a = post(&serve.url, "/v1/messages", ANTHROPIC_HEADERS, body);
    assert_eq!(a.status, 200);
    assert_eq!(up.requests()[0].body.as_bytes(), body);
    let log = serve.wait_log("forwarded unchanged", 1);
    assert!(log.contains("not compressed: <request body>"), "{log}");

    let failing = Serve::start(&up.url, &["--on-error", "fail"]);
    let a = post(&failing.url, "/v1/messages", ANTHROPIC_HEADERS, body);
    assert_eq!(a.status, 502);
    let message = a.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with("condense serve: <request body>") && !message.contains('\n'),
        "{message}"
    );
    assert_eq!(up.requests().len(), 1, "nothing sent upstream on fail");
}

#[test]
fn a_body_over_the_limit_answers_413() {
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let serve = Serve::start(&up.url, &["--max-body-bytes", "1000"]);
    let body = serde_json::to_vec(&agent_request(2, 20, false)).unwrap();
    assert!(body.len() > 1000);
    let a = post(&serve.url, "/v1/messages", ANTHROPIC_HEADERS, &body);
    assert_eq!(a.status, 413);
    assert!(a.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("1,000-byte limit"));
    assert!(up.requests().is_empty());
}

#[test]
fn an_upstream_that_cuts_a_stream_cuts_the_clients_and_the_proxy_stays_up() {
    let up = Upstream::start(|_, n| {
        if n == 0 {
            Reply::Sse {
                events: anthropic_events("half")[..3].to_vec(),
                gate: None,
                cut: true,
            }
        } else {
            Reply::Json(200, anthropic_answer("still here"))
        }
    });
    let serve = Serve::start(&up.url, &[]);
    let body = serde_json::to_vec(&agent_request(1, 3, true)).unwrap();
    let a = post(&serve.url, "/v1/messages", ANTHROPIC_HEADERS, &body);
    assert_eq!(a.status, 200);
    assert!(!a.complete, "the client must see the cut");
    assert_eq!(a.text(), anthropic_events("half")[..3].concat());
    let b = post(&serve.url, "/v1/messages", ANTHROPIC_HEADERS, &body);
    assert_eq!((b.status, b.text()), (200, anthropic_answer("still here")));
}

#[test]
fn a_down_upstream_closes_the_connection_as_it_would_without_the_proxy() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let serve = Serve::start(&url, &[]);
    let a = post(
        &serve.url,
        "/v1/messages",
        ANTHROPIC_HEADERS,
        br#"{"model":"m","messages":[]}"#,
    );
    assert_eq!(a.status, 0, "no answer, a closed connection");
    let log = serve.wait_log("upstream unreachable", 1);
    assert!(log.contains("upstream unreachable"), "{log}");
    let status = request(&serve.url, "GET", "/condense/status", &[], b"", |_| {});
    assert_eq!(status.status, 200, "the proxy stays up");
}

#[test]
fn other_paths_pass_through_unchanged() {
    let up = Upstream::start(|_, _| Reply::Json(200, r#"{"data":[]}"#.to_string()));
    let serve = Serve::start(&up.url, &[]);
    let a = request(
        &serve.url,
        "GET",
        "/v1/models?limit=2",
        ANTHROPIC_HEADERS,
        b"",
        |_| {},
    );
    assert_eq!((a.status, a.text()), (200, r#"{"data":[]}"#.to_string()));
    let count = br#"{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"x"}]}"#;
    post(
        &serve.url,
        "/v1/messages/count_tokens",
        ANTHROPIC_HEADERS,
        count,
    );
    let got = up.requests();
    assert_eq!(
        (got[0].method.as_str(), got[0].path.as_str()),
        ("GET", "/v1/models?limit=2")
    );
    assert_eq!(got[0].header("x-api-key"), Some("sk-ant-secret-key"));
    assert_eq!(got[1].path, "/v1/messages/count_tokens");
    assert_eq!(got[1].body.as_bytes(), count);
}

#[test]
fn concurrent_sessions_each_keep_their_totals() {
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let serve = Serve::start(&up.url, &[]);
    let url = serve.url.clone();
    let threads: Vec<_> = (0..8)
        .map(|s| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut messages = vec![serde_json::json!({"role": "user", "content": format!("Task of agent {s}.")})];
                for turn in 1..=3 {
                    let req = serde_json::json!({
                        "model": "claude-sonnet-4-5", "max_tokens": 100,
                        "system": format!("You are agent {s}."), "messages": messages,
                    });
                    let a = post(
                        &url,
                        "/v1/messages",
                        ANTHROPIC_HEADERS,
                        &serde_json::to_vec(&req).unwrap(),
                    );
                    assert_eq!(a.status, 200);
                    messages.push(serde_json::json!({"role": "assistant", "content": format!("Answer {turn}.")}));
                    messages.push(serde_json::json!({"role": "user", "content": format!("Question {turn}.")}));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(up.requests().len(), 24);
    let status = serve.status();
    let sessions = status["sessions"].as_object().unwrap();
    assert_eq!(sessions.len(), 8, "{status}");
    for (id, totals) in sessions {
        assert!(
            id.starts_with('h'),
            "a hash of system + first user message: {id}"
        );
        assert_eq!(totals["requests"], 3);
        // Each turn appends to the last: the prefix sent stays the same.
        assert_eq!(
            (
                totals["cache_compared"].as_u64(),
                totals["cache_stable"].as_u64()
            ),
            (Some(2), Some(2)),
            "{status}"
        );
        // Every element the previous turns sent started the next one.
        assert_eq!(totals["cache_kept"], totals["cache_previous"], "{status}");
        assert!(totals["cache_previous"].as_u64() > Some(2), "{status}");
    }
    assert_eq!(status["totals"]["requests"], 24);
}

#[test]
fn more_requests_at_once_than_may_compress_all_go_through() {
    // 96 clients at once, two requests each, without the session header: more than the 64
    // requests that may compress at once (the others wait for a permit before taking a place in
    // any line). Every other client's bodies cannot be read and go upstream unchanged: that
    // path gives its permit back too, or the proxy would stop taking requests after 64.
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let serve = Serve::start(&up.url, &[]);
    let (clients, per) = (96, 2);
    let (tx, rx) = mpsc::channel();
    for c in 0..clients {
        let (url, tx) = (serve.url.clone(), tx.clone());
        std::thread::spawn(move || {
            let mut messages =
                vec![serde_json::json!({"role": "user", "content": format!("Task {c}.")})];
            for turn in 0..per {
                let body = if c % 2 == 0 {
                    let req = serde_json::json!({
                        "model": "claude-sonnet-4-5", "max_tokens": 100,
                        "system": format!("You are agent {c}."), "messages": messages,
                    });
                    serde_json::to_vec(&req).unwrap()
                } else {
                    format!(r#"{{"model":"claude-sonnet-4-5","messages":[{{"role":"user","content":"cut {c}"#)
                        .into_bytes()
                };
                let status = post(&url, "/v1/messages", ANTHROPIC_HEADERS, &body).status;
                let _ = tx.send(status);
                messages.push(
                    serde_json::json!({"role": "assistant", "content": format!("Answer {turn}.")}),
                );
                messages.push(
                    serde_json::json!({"role": "user", "content": format!("Question {turn}.")}),
                );
            }
        });
    }
    drop(tx);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut statuses = Vec::new();
    while statuses.len() < clients * per {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(status) => statuses.push(status),
            Err(_) => panic!(
                "{} of {} requests answered: the proxy stopped taking requests\n{}",
                statuses.len(),
                clients * per,
                serve.log()
            ),
        }
    }
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    assert_eq!(up.requests().len(), clients * per);
    assert_eq!(serve.status()["in_flight"], 0);
}

#[test]
fn responses_bodies_are_read_and_pass_byte_identical() {
    let up = Upstream::start(|_, _| {
        Reply::Json(
            200,
            r#"{"id":"resp_1","object":"response","output":[]}"#.to_string(),
        )
    });
    let serve = Serve::start(&up.url, &[]);
    let body = br#"{"model":"gpt-5","instructions":"Be brief.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"store":false}"#;
    let a = post(
        &serve.url,
        "/v1/responses",
        &[("authorization", "Bearer k")],
        body,
    );
    assert_eq!(a.status, 200);
    assert_eq!(a.header("x-condense-tokens-saved"), Some("0"));
    assert_eq!(up.requests()[0].body.as_bytes(), body);
    let log = serve.wait_log("POST /v1/responses", 1);
    assert!(
        log.contains("model=gpt-5") && !log.contains("not compressed"),
        "{log}"
    );
}

#[test]
fn serve_settings_errors_are_one_line_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[serve]\nupstream = \"http://x\"\n").unwrap();
    let run = condense(&["serve", "--pipeline", bad.to_str().unwrap()]);
    let line = run.one_line_failure(2);
    assert!(
        line.contains("bad.toml: [serve]: unknown field `upstream`"),
        "{line}"
    );
    let run = condense(&["serve", "--on-error", "maybe"]);
    assert!(run
        .one_line_failure(2)
        .contains("--on-error: expected `pass` or `fail`"));
    let run = condense(&["serve", "--openai-upstream", "api.openai.com"]);
    assert!(run
        .one_line_failure(2)
        .contains("--openai-upstream: `api.openai.com` is not an http:// or https:// URL"));
    let run = condense(&[
        "serve",
        "--listen",
        "127.0.0.1:notaport",
        "--store",
        dir.path().join("s").to_str().unwrap(),
    ]);
    assert!(
        run.one_line_failure(1)
            .contains("cannot listen on 127.0.0.1:notaport"),
        "{}",
        run.stderr
    );
}
