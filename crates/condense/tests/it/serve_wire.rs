//! `condense serve`: the order of one session's requests, the totals after a prompt-too-long
//! retry, content-encoded request bodies (gzip, zstd, an unknown encoding, a body that decodes
//! over the limit), and stopping on a signal with an answer still streaming, against the
//! recording fake upstream of `serve_fake`.

use crate::serve::{agent_request, too_long_once, ANTHROPIC_HEADERS};
use crate::serve_fake::*;
use std::sync::{mpsc, Arc, Mutex};

/// An OpenAI Chat request: a system prompt, the first user message, then one user message of
/// `parts` small text parts. Every such request is of one session (the hash of the system
/// prompt and first user message). Many small parts are slow to read for their size.
fn chat_request(parts: usize) -> Vec<u8> {
    let many: Vec<serde_json::Value> = (0..parts)
        .map(|i| serde_json::json!({"type": "text", "text": format!("w{i}")}))
        .collect();
    let messages = vec![
        serde_json::json!({"role": "system", "content": "You are a careful agent."}),
        serde_json::json!({"role": "user", "content": "Audit every file in the tree."}),
        serde_json::json!({"role": "assistant", "content": "Send me the list."}),
        serde_json::json!({"role": "user", "content": many}),
    ];
    // gpt-4.1's window (1,047,576 tokens) holds the large one without a compaction.
    serde_json::to_vec(&serde_json::json!({"model": "gpt-4.1", "messages": messages})).unwrap()
}

/// The tokens before of a request's log line (`tokens 1,234 -> 567`).
fn tokens_before(line: &str) -> usize {
    let after = line.split_once(" tokens ").map_or("", |(_, r)| r);
    let n = after.split_whitespace().next().unwrap_or("");
    n.replace(',', "")
        .parse()
        .unwrap_or_else(|_| panic!("{line}"))
}

/// `in_flight` of `/condense/status` counts a request from its body's arrival until its answer
/// starts: 1 while the upstream holds it, 0 once answered.
#[test]
fn status_counts_a_request_in_flight_until_its_answer_starts() {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let held = std::sync::Mutex::new(held);
    let up = Upstream::start(move |_, _| {
        let _ = held.lock().unwrap().recv();
        Reply::Json(200, openai_answer("ok"))
    });
    let serve = Serve::start(&up.url, &[]);
    assert_eq!(serve.status()["in_flight"], 0);
    let url = serve.url.clone();
    let client = std::thread::spawn(move || {
        post(
            &url,
            "/v1/chat/completions",
            &[("authorization", "Bearer k")],
            &chat_request(2),
        )
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while serve.status()["in_flight"] != 1 {
        assert!(std::time::Instant::now() < deadline, "{}", serve.log());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    release.send(()).unwrap();
    assert_eq!(client.join().unwrap().status, 200);
    assert_eq!(serve.status()["in_flight"], 0, "{}", serve.log());
}

#[test]
fn a_sessions_requests_go_upstream_in_arrival_order_even_when_a_later_one_reads_faster() {
    let up = Upstream::start(|_, _| Reply::Json(200, openai_answer("ok")));
    let serve = Serve::start(&up.url, &[]);
    // The first is some megabytes: it takes the proxy far longer to read than the second.
    let large = chat_request(60_000);
    let small = chat_request(2);
    assert!(
        large.len() > 1_500_000 && small.len() < 1000,
        "{}",
        large.len()
    );
    let headers = [("authorization", "Bearer k")];
    let first = send(&serve.url, "POST", "/v1/chat/completions", &headers, &large);
    // Its body has been handed to the kernel; the second is sent once the proxy has it all.
    serve.wait_taken_in();
    let b = post(&serve.url, "/v1/chat/completions", &headers, &small);
    let a = read_answer(first, |_| {});
    assert_eq!((a.status, b.status), (200, 200), "{}", serve.log());
    let got = up.in_arrival_order();
    assert_eq!(got.len(), 2);
    assert!(
        got[0].body.len() > got[1].body.len(),
        "the upstream got the second request first: {}",
        serve.wait_log("-> 200", 2)
    );
    // The second was recorded after the first and compared with what the first sent (it does
    // not extend it: it is a shorter conversation of the same session).
    let log = serve.wait_log("-> 200", 2);
    let mut lines: Vec<&str> = log.lines().filter(|l| l.contains("-> 200")).collect();
    lines.sort_by_key(|l| tokens_before(l));
    assert!(lines[0].contains("prefix changed"), "{log}");
    assert!(
        !lines[1].contains("prefix"),
        "the first of its session: {log}"
    );
    let status = serve.status();
    assert_eq!(status["in_flight"], 0, "both answered: {status}");
    let sessions = status["sessions"].as_object().unwrap();
    assert_eq!(sessions.len(), 1, "{status}");
    let totals = sessions.values().next().unwrap();
    assert_eq!(totals["requests"], 2);
    assert_eq!(
        (
            totals["cache_compared"].as_u64(),
            totals["cache_stable"].as_u64()
        ),
        (Some(1), Some(0)),
        "{status}"
    );
    // The turn changed something in the previous prefix: not all of it was kept.
    assert!(
        totals["cache_kept"].as_u64() < totals["cache_previous"].as_u64(),
        "{status}"
    );
}

#[test]
fn the_totals_count_what_a_prompt_too_long_retry_sent() {
    let up = too_long_once();
    let serve = Serve::start(&up.url, &[]);
    let body = serde_json::to_vec(&agent_request(6, 80, false)).unwrap();
    let a = post(&serve.url, "/v1/messages", ANTHROPIC_HEADERS, &body);
    assert_eq!(a.status, 200, "{}", serve.log());
    let saved: u64 = a
        .header("x-condense-tokens-saved")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(up.requests().len(), 2);
    let log = serve.wait_log("retries=1", 1);
    let line = log.lines().find(|l| l.contains("retries=1")).unwrap();
    let before = tokens_before(line) as u64;
    let status = serve.status();
    let t = &status["sessions"]["cc-5f3e-agent"];
    assert_eq!(
        (t["requests"].as_u64(), t["retries"].as_u64()),
        (Some(1), Some(1)),
        "{status}"
    );
    // Two bodies went upstream: the client's as it came (refused), then the retry's.
    assert_eq!(t["tokens_before"].as_u64(), Some(2 * before), "{status}");
    assert_eq!(
        t["tokens_after"].as_u64(),
        Some(2 * before - saved),
        "{status}"
    );
    assert_eq!(t["tokens_saved"].as_u64(), Some(saved), "{status}");
    assert_eq!(t["compressed"].as_u64(), Some(1), "{status}");
    assert_eq!(status["totals"]["retries"].as_u64(), Some(1), "{status}");
}

/// `data` gzip-compressed (flate2, as the proxy's own tests).
fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// `data` as one zstd frame (ruzstd's encoder).
fn zstd(data: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
}

#[test]
fn gzip_and_zstd_bodies_are_decoded_compressed_and_sent_plain() {
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let serve = Serve::start(&up.url, &[]);
    // Tool results over 4 KiB in old turns: snip truncates them.
    let original = serde_json::to_vec_pretty(&agent_request(4, 200, false)).unwrap();
    for (i, (coding, encoded)) in [("gzip", gzip(&original)), ("zstd", zstd(&original))]
        .into_iter()
        .enumerate()
    {
        let session = format!("enc-{coding}");
        let mut headers = ANTHROPIC_HEADERS.to_vec();
        headers.extend([
            ("x-condense-session", session.as_str()),
            ("content-encoding", coding),
        ]);
        let a = post(&serve.url, "/v1/messages", &headers, &encoded);
        assert_eq!(a.status, 200, "{}", serve.log());
        let saved: usize = a
            .header("x-condense-tokens-saved")
            .unwrap()
            .parse()
            .unwrap();
        assert!(saved > 1000, "{coding}: saved {saved}");
        let sent = &up.requests()[i];
        let raw = &up.raw_bodies()[i];
        assert_eq!(
            sent.header("content-encoding"),
            None,
            "{coding}: sent plain"
        );
        assert_eq!(
            sent.header("content-length"),
            Some(raw.len().to_string().as_str())
        );
        assert!(
            raw.len() < original.len() * 2 / 3,
            "{coding}: {}",
            raw.len()
        );
        let (mut before, mut after): (serde_json::Value, serde_json::Value) = (
            serde_json::from_slice(&original).unwrap(),
            serde_json::from_slice(raw).unwrap(),
        );
        before.as_object_mut().unwrap().remove("messages");
        after.as_object_mut().unwrap().remove("messages");
        assert_eq!(
            before, after,
            "{coding}: every other field as the client sent it"
        );
    }
    let log = serve.wait_log("stages=snip", 2);
    assert!(
        log.contains("session=enc-gzip") && log.contains("session=enc-zstd"),
        "{log}"
    );
}

#[test]
fn an_encoded_body_needing_nothing_goes_with_its_encoding_and_an_unknown_one_passes() {
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let serve = Serve::start(&up.url, &[]);
    let body = br#"{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#;
    let gz = gzip(body);
    let mut headers = ANTHROPIC_HEADERS.to_vec();
    headers.extend([
        ("x-condense-session", "enc-plain"),
        ("content-encoding", "gzip"),
    ]);
    let a = post(&serve.url, "/v1/messages", &headers, &gz);
    assert_eq!(
        (a.status, a.header("x-condense-tokens-saved")),
        (200, Some("0"))
    );
    assert_eq!(up.raw_bodies()[0], gz, "the client's gzip bytes");
    assert_eq!(up.requests()[0].header("content-encoding"), Some("gzip"));
    let log = serve.wait_log("session=enc-plain", 1);
    assert!(log.contains("stages=- retries=0 -> 200"), "{log}");

    // No decoder for brotli: the body goes as it came, and one line says why.
    let opaque = b"\x8b\x02\x80not really brotli\x03";
    let mut headers = ANTHROPIC_HEADERS.to_vec();
    headers.push(("content-encoding", "br"));
    let a = post(&serve.url, "/v1/messages", &headers, opaque);
    assert_eq!(a.status, 200);
    assert_eq!(up.raw_bodies()[1], opaque);
    assert_eq!(up.requests()[1].header("content-encoding"), Some("br"));
    let log = serve.wait_log("forwarded unchanged", 1);
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("`br`")).collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("not compressed"), "{log}");
}

#[test]
fn a_body_that_decodes_over_the_limit_answers_413() {
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let serve = Serve::start(&up.url, &["--max-body-bytes", "4000"]);
    let body = serde_json::to_vec(&agent_request(4, 200, false)).unwrap();
    // Within the limit as sent, over it decoded: 3,000 bytes of the body, then 100,000 spaces,
    // which compress to a few bytes.
    let mut bomb = body[..3000].to_vec();
    bomb.extend(std::iter::repeat_n(b' ', 100_000));
    let encoded = zstd(&bomb);
    assert!(encoded.len() < 4000);
    let mut headers = ANTHROPIC_HEADERS.to_vec();
    headers.push(("content-encoding", "zstd"));
    let a = post(&serve.url, "/v1/messages", &headers, &encoded);
    assert_eq!(a.status, 413, "{}", serve.log());
    assert!(up.requests().is_empty());
    assert!(serve
        .wait_log("413", 1)
        .contains("decoded body over the limit"));
}

/// The proxy's HTTP/1 read buffer stops growing at 256 KiB: a body larger than that arrives
/// whole (upstream byte for byte when nothing needs compressing), and a request head over it
/// is refused (431) without reaching the upstream, the proxy still serving after it.
#[test]
fn bodies_larger_than_the_read_buffer_arrive_whole_and_an_oversized_head_is_refused() {
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let serve = Serve::start(&up.url, &[]);
    // 600 KB in one message that needs no compression (120k tokens, inside the window).
    let big = "word ".repeat(120_000);
    let body = serde_json::to_vec(&serde_json::json!({
        "model": "claude-sonnet-4-5", "max_tokens": 1000,
        "messages": [{"role": "user", "content": big}]
    }))
    .unwrap();
    assert!(body.len() > 2 * 256 * 1024);
    let mut headers = ANTHROPIC_HEADERS.to_vec();
    headers.push(("x-condense-session", "big-1"));
    let a = post(&serve.url, "/v1/messages", &headers, &body);
    assert_eq!(a.status, 200, "{}", serve.log());
    let got = up.requests();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].body.as_bytes(),
        body.as_slice(),
        "not byte-identical"
    );

    let long = "x".repeat(300 * 1024);
    let mut headers = ANTHROPIC_HEADERS.to_vec();
    headers.push(("x-long", long.as_str()));
    let refused = post(&serve.url, "/v1/messages", &headers, b"{}");
    assert_eq!(refused.status, 431, "{}", serve.log());
    assert_eq!(
        up.requests().len(),
        1,
        "the oversized head reached the upstream"
    );
    let again = post(
        &serve.url,
        "/v1/messages",
        ANTHROPIC_HEADERS,
        br#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}"#,
    );
    assert_eq!(again.status, 200, "{}", serve.log());
}

#[test]
fn a_stop_signal_lets_the_answer_streaming_end_then_exits_0() {
    // The stopping lines are written with `--quiet` too (not per-request lines).
    for (signal, name, extra) in [
        (libc::SIGTERM, "TERM", &[][..]),
        (libc::SIGINT, "INT", &["--quiet"][..]),
    ] {
        let (release, gate) = mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        let events = anthropic_events("the last words");
        let up = Upstream::start({
            let events = events.clone();
            move |_, _| Reply::Sse {
                events: events.clone(),
                gate: Some(Arc::clone(&gate)),
                cut: false,
            }
        });
        let mut serve = Serve::start(&up.url, extra);
        let body = serde_json::to_vec(&agent_request(1, 3, true)).unwrap();
        // The client reads the stream on a thread and says when its first event is in.
        let (first, got_first) = mpsc::channel::<()>();
        let stream = send(&serve.url, "POST", "/v1/messages", ANTHROPIC_HEADERS, &body);
        let client = std::thread::spawn(move || {
            read_answer(stream, |_| {
                first.send(()).ok();
            })
        });
        got_first.recv_timeout(PATIENCE).unwrap();
        serve.signal(signal);
        let log = serve.wait_log("stopping: no new connections", 1);
        assert!(
            log.contains("stopping: no new connections; 1 connection open"),
            "{name}: {log}"
        );
        // No new connection is taken while the open one ends.
        let addr = serve.url.trim_start_matches("http://").to_string();
        assert!(
            std::net::TcpStream::connect(&addr).is_err(),
            "{name}: a connection was taken after the signal"
        );
        // The answer under way goes on to its last event.
        for _ in 1..events.len() {
            release.send(()).unwrap();
        }
        let answer = client.join().unwrap();
        assert_eq!(answer.status, 200, "{name}");
        assert!(answer.complete, "{name}: the answer was cut");
        assert_eq!(answer.text(), events.concat(), "{name}");
        let status = serve.exit_status();
        assert!(status.success(), "{name}: {status}: {}", serve.log());
        assert!(
            serve
                .wait_log("stopped: every answer was sent", 1)
                .contains("stopped: every answer was sent"),
            "{name}: {}",
            serve.log()
        );
    }
}
