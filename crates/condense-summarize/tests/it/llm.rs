//! LLM backends against a scripted local HTTP server: request shape, retries, prompt-too-long
//! head drops, errors, and the key never leaking.

use crate::support::{assistant, call, result, user, Reply, Server};
use condense_model::Message;
use condense_summarize::{
    build_with_env, llm::NO_TOOLS_PREAMBLE, SummarizeError, Summarizer, SummarizerConfig,
    SummaryRequest,
};
use condense_tokens::TokenCounter;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEY: &str = "sk-test-SECRET-0123456789";

fn summarizer(kind: &str, base_url: &str, extra: &str) -> Box<dyn Summarizer> {
    try_summarizer(kind, base_url, extra).expect("build")
}

fn try_summarizer(
    kind: &str,
    base_url: &str,
    extra: &str,
) -> Result<Box<dyn Summarizer>, SummarizeError> {
    let toml = format!(
        "kind = \"{kind}\"\nmodel = \"test-model\"\nbase_url = \"{base_url}\"\napi_key_env = \"CONDENSE_TEST_KEY\"\nretry_base_ms = 1\n{extra}"
    );
    let config: SummarizerConfig = toml::from_str(&toml).expect("config parses");
    build_with_env(&config, Arc::new(TokenCounter::default()), &|name| {
        (name == "CONDENSE_TEST_KEY").then(|| KEY.to_string())
    })
}

fn span() -> Vec<Message> {
    vec![
        user("u1", "Fix the login bug in src/auth.rs"),
        call(
            "a1",
            "Running the tests.",
            "toolu_1",
            "Bash",
            json!({"command": "cargo test"}),
        ),
        result(
            "r1",
            "toolu_1",
            "error[E0308]: mismatched types",
            Some(true),
        ),
        assistant("a2", "The fix is to refresh the token."),
    ]
}

fn request<'a>(
    messages: &'a [Message],
    previous: Option<&'a str>,
    max_tokens: usize,
) -> SummaryRequest<'a> {
    SummaryRequest {
        messages,
        previous_summary: previous,
        max_tokens,
        purpose: "autocompact",
    }
}

fn anthropic_text(text: &str) -> Reply {
    Reply::json(
        200,
        json!({"id": "msg_1", "type": "message", "role": "assistant",
               "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}),
    )
}

fn openai_text(text: &str) -> Reply {
    Reply::json(
        200,
        json!({"id": "c1", "object": "chat.completion",
               "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}),
    )
}

fn anthropic_too_long() -> Reply {
    Reply::json(
        400,
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long"}}),
    )
}

const REPLY: &str = "<analysis>\nThe user wants the login bug fixed. PRIVATE NOTES\n</analysis>\n\n<summary>\n1. Primary Request and Intent:\n   Fix the login bug in src/auth.rs\n</summary>";

#[test]
fn anthropic_request_and_reply() {
    let server = Server::start(vec![anthropic_text(REPLY)]);
    let s = summarizer("anthropic", &server.url, "");
    assert_eq!(s.name(), "anthropic");
    let msgs = span();
    let out = s
        .summarize(&request(&msgs, Some("## Earlier\n- read src/db.rs"), 800))
        .unwrap();
    assert_eq!(
        out,
        "1. Primary Request and Intent:\n   Fix the login bug in src/auth.rs"
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("authorization"), None);
    let body = r.json();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], 1600, "twice the summary budget");
    assert!(body.get("tools").is_none());
    let system = body["system"].as_str().unwrap();
    assert!(system.starts_with(NO_TOOLS_PREAMBLE));
    assert!(system.contains("Respond with TEXT ONLY. Do NOT call any tools"));
    assert!(system.contains("<analysis>") && system.contains("9. Optional Next Step"));
    assert!(
        system.contains("replace the whole conversation"),
        "purpose shapes the prompt"
    );
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["role"], "user");
    let user = messages[0]["content"].as_str().unwrap();
    for needle in [
        "Fix the login bug in src/auth.rs",
        "[tool call toolu_1 Bash] {\"command\":\"cargo test\"}",
        "[tool result toolu_1 (error)]",
        "error[E0308]: mismatched types",
        "The fix is to refresh the token.",
        "<previous_summary>\n## Earlier\n- read src/db.rs\n</previous_summary>",
        "Merge the span into it",
        "under about 800 tokens",
    ] {
        assert!(user.contains(needle), "{needle:?} missing from:\n{user}");
    }
    assert!(!user.contains(KEY));
}

#[test]
fn openai_request_and_reply() {
    let server = Server::start(vec![openai_text(REPLY)]);
    let s = summarizer(
        "openai",
        &format!("{}/v1", server.url),
        "max_output_tokens = 1000",
    );
    let msgs = span();
    let out = s.summarize(&request(&msgs, None, 800)).unwrap();
    assert!(out.starts_with("1. Primary Request") && !out.contains("PRIVATE NOTES"));

    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(r.header("x-api-key"), None);
    let body = r.json();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], 1000, "max_output_tokens caps the reply");
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert!(messages[0]["content"]
        .as_str()
        .unwrap()
        .starts_with(NO_TOOLS_PREAMBLE));
    assert_eq!(messages[1]["role"], "user");
    let user = messages[1]["content"].as_str().unwrap();
    assert!(
        user.contains("Fix the login bug in src/auth.rs") && !user.contains("<previous_summary>")
    );
}

#[test]
fn local_openai_server_needs_no_key() {
    let server = Server::start(vec![openai_text("plain summary, no tags")]);
    let config: SummarizerConfig = toml::from_str(&format!(
        "kind = \"openai\"\nmodel = \"qwen2.5-coder\"\nbase_url = \"{}/v1\"",
        server.url
    ))
    .unwrap();
    let s = build_with_env(&config, Arc::new(TokenCounter::default()), &|_| None).unwrap();
    let msgs = span();
    assert_eq!(
        s.summarize(&request(&msgs, None, 500)).unwrap(),
        "plain summary, no tags"
    );
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[test]
fn retries_on_429_and_5xx_then_succeeds() {
    let server = Server::start(vec![
        Reply::json(
            429,
            json!({"error": {"type": "rate_limit_error", "message": "slow down"}}),
        )
        .header("retry-after", "0"),
        Reply::json(
            500,
            json!({"error": {"type": "api_error", "message": "internal"}}),
        ),
        Reply::json(
            529,
            json!({"error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
        anthropic_text("<summary>ok</summary>"),
    ]);
    let s = summarizer("anthropic", &server.url, "");
    let msgs = span();
    assert_eq!(s.summarize(&request(&msgs, None, 500)).unwrap(), "ok");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    assert!(
        reqs.windows(2).all(|w| w[0].body == w[1].body),
        "retries resend the same request"
    );
}

#[test]
fn retry_after_is_honoured_and_capped() {
    let server = Server::start(vec![
        Reply::json(429, json!({"error": {"message": "wait"}})).header("retry-after", "1"),
        openai_text("done"),
    ]);
    let s = summarizer("openai", &server.url, "retry_max_ms = 5000");
    let msgs = span();
    let t = Instant::now();
    assert_eq!(s.summarize(&request(&msgs, None, 500)).unwrap(), "done");
    assert!(
        t.elapsed() >= Duration::from_millis(950),
        "waited {:?}",
        t.elapsed()
    );

    let server = Server::start(vec![
        Reply::json(503, json!({"error": {"message": "busy"}})).header("retry-after", "3600"),
        openai_text("done"),
    ]);
    let s = summarizer("openai", &server.url, "retry_max_ms = 20");
    let t = Instant::now();
    assert_eq!(s.summarize(&request(&msgs, None, 500)).unwrap(), "done");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "capped by retry_max_ms"
    );
}

#[test]
fn retries_exhausted_is_one_clear_line() {
    let busy = Reply::json(
        503,
        json!({"error": {"type": "overloaded_error", "message": "Service\nunavailable"}}),
    );
    let server = Server::start(vec![busy.clone(), busy.clone(), busy]);
    let s = summarizer("anthropic", &server.url, "max_retries = 2");
    let msgs = span();
    let err = s
        .summarize(&request(&msgs, None, 500))
        .unwrap_err()
        .to_string();
    assert_eq!(server.requests().len(), 3);
    assert_eq!(
        err,
        "summarizer failed: anthropic API: HTTP 503: Service unavailable (gave up after 3 attempts)"
    );
}

#[test]
fn client_errors_are_not_retried() {
    let server = Server::start(vec![Reply::json(
        400,
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "model: unknown model"}}),
    )]);
    let s = summarizer("anthropic", &server.url, "");
    let msgs = span();
    let err = s
        .summarize(&request(&msgs, None, 500))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "summarizer failed: anthropic API: HTTP 400: model: unknown model"
    );
    assert_eq!(server.requests().len(), 1);
}

/// A span of `n` turns; turn `i` says `TURN-i`.
fn turns(n: usize) -> Vec<Message> {
    (0..n)
        .flat_map(|i| {
            vec![
                user(
                    &format!("u{i}"),
                    &format!("TURN-{i} request {}", "words ".repeat(40)),
                ),
                call(
                    &format!("a{i}"),
                    "",
                    &format!("t{i}"),
                    "Bash",
                    json!({"command": format!("echo {i}")}),
                ),
                result(
                    &format!("r{i}"),
                    &format!("t{i}"),
                    &format!("output {i}"),
                    None,
                ),
                assistant(&format!("b{i}"), &format!("answer {i}")),
            ]
        })
        .collect()
}

fn user_text(r: &crate::support::Recorded, openai: bool) -> String {
    let body = r.json();
    let i = usize::from(openai);
    body["messages"][i]["content"].as_str().unwrap().to_string()
}

#[test]
fn prompt_too_long_drops_turns_from_the_head() {
    let server = Server::start(vec![
        anthropic_too_long(),
        anthropic_too_long(),
        anthropic_text("<summary>short</summary>"),
    ]);
    let s = summarizer("anthropic", &server.url, "");
    let msgs = turns(10);
    assert_eq!(s.summarize(&request(&msgs, None, 500)).unwrap(), "short");

    let texts: Vec<String> = server
        .requests()
        .iter()
        .map(|r| user_text(r, false))
        .collect();
    assert_eq!(texts.len(), 3);
    assert!(texts[0].contains("TURN-0 ") && !texts[0].contains("left out"));
    // Each retry is smaller, has lost its oldest turns, and keeps the newest.
    for w in texts.windows(2) {
        assert!(w[1].len() < w[0].len());
    }
    let first_kept = |t: &str| (0..10).find(|i| t.contains(&format!("TURN-{i} "))).unwrap();
    assert!(first_kept(&texts[1]) > 0);
    assert!(first_kept(&texts[2]) > first_kept(&texts[1]));
    for t in &texts {
        assert!(t.contains("TURN-9 ") && t.contains("answer 9"));
    }
    // Dropping happens at turn boundaries: the kept part starts with a user request.
    assert!(texts[1].contains(&format!(
        "[the first {} messages of the span were left out",
        first_kept(&texts[1]) * 4
    )));
}

#[test]
fn prompt_too_long_with_a_token_count_drops_enough_at_once() {
    let server = Server::start(vec![
        Reply::json(
            400,
            json!({"error": {"message": "This model's maximum context length is 4000 tokens. However, your messages resulted in 4500 tokens.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
        ),
        openai_text("fits"),
    ]);
    let s = summarizer("openai", &server.url, "");
    let msgs = turns(20);
    assert_eq!(s.summarize(&request(&msgs, None, 500)).unwrap(), "fits");
    let texts: Vec<String> = server
        .requests()
        .iter()
        .map(|r| user_text(r, true))
        .collect();
    let counter = TokenCounter::default();
    let dropped = counter.count_text(&texts[0]) - counter.count_text(&texts[1]);
    assert!(
        dropped >= 500,
        "dropped {dropped} tokens for a 500-token overflow"
    );
    assert!(texts[1].contains("TURN-19 "));
}

#[test]
fn prompt_too_long_four_times_fails_after_three_retries() {
    let server = Server::start(vec![anthropic_too_long(); 4]);
    let s = summarizer("anthropic", &server.url, "");
    let msgs = turns(10);
    let err = s
        .summarize(&request(&msgs, None, 500))
        .unwrap_err()
        .to_string();
    assert_eq!(server.requests().len(), 4);
    assert!(err.contains("prompt too long even after dropping"), "{err}");
    assert!(
        err.contains("(3 retries): HTTP 400: prompt is too long"),
        "{err}"
    );
    assert!(!err.contains('\n'));
}

#[test]
fn max_completion_tokens_fallback() {
    let server = Server::start(vec![
        Reply::json(
            400,
            json!({"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}}),
        ),
        openai_text("ok"),
        openai_text("again"),
    ]);
    let s = summarizer("openai", &server.url, "");
    let msgs = span();
    assert_eq!(s.summarize(&request(&msgs, None, 500)).unwrap(), "ok");
    assert_eq!(s.summarize(&request(&msgs, None, 500)).unwrap(), "again");
    let bodies: Vec<_> = server.requests().iter().map(|r| r.json()).collect();
    assert!(bodies[0].get("max_tokens").is_some());
    for b in &bodies[1..] {
        assert_eq!(b["max_completion_tokens"], 1024);
        assert!(b.get("max_tokens").is_none());
    }
}

#[test]
fn long_summaries_are_cut_to_the_budget() {
    let long = format!("<summary>{}</summary>", "many words here\n".repeat(500));
    let server = Server::start(vec![anthropic_text(&long)]);
    let s = summarizer("anthropic", &server.url, "");
    let msgs = span();
    let out = s.summarize(&request(&msgs, None, 100)).unwrap();
    assert!(TokenCounter::default().count_text(&out) <= 100);
    assert!(out.ends_with("[summary cut to its token budget]"));
}

#[test]
fn the_key_never_appears_in_errors() {
    let server = Server::start(vec![Reply::json(
        401,
        json!({"type": "error", "error": {"type": "authentication_error", "message": format!("invalid x-api-key {KEY}")}}),
    )]);
    let s = summarizer("anthropic", &server.url, "");
    let msgs = span();
    let err = s
        .summarize(&request(&msgs, None, 500))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("HTTP 401") && err.contains("[redacted]"),
        "{err}"
    );
    assert!(!err.contains(KEY));

    // A transport failure (nothing listens any more) after retries.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let s = summarizer("openai", &closed, "max_retries = 1");
    let err = s
        .summarize(&request(&msgs, None, 500))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("summarizer failed: openai API: ")
            && err.contains("gave up after 2 attempts"),
        "{err}"
    );
    assert!(!err.contains(KEY) && !err.contains('\n'));
}

#[test]
fn config_errors_are_one_clear_line() {
    let counter = || Arc::new(TokenCounter::default());
    let no_env = |_: &str| None;
    let build = |toml_text: &str| {
        let c: SummarizerConfig = toml::from_str(toml_text).unwrap();
        build_with_env(&c, counter(), &no_env)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        build("kind = \"anthropic\""),
        "summarizer config: kind = \"anthropic\": `model` is required (the model name the API expects)"
    );
    assert_eq!(
        build("kind = \"anthropic\"\nmodel = \"m\""),
        "summarizer config: kind = \"anthropic\": environment variable ANTHROPIC_API_KEY (api_key_env) is not set; it must hold the API key"
    );
    assert!(build("kind = \"openai\"\nmodel = \"m\"").contains("OPENAI_API_KEY"));
    assert!(build("kind = \"openai\"\nmodel = \"m\"\napi_key_env = \"MY_KEY\"\nbase_url = \"http://localhost:1\"").contains("MY_KEY"));
    assert!(
        build("kind = \"openai\"\nmodel = \"m\"\nbase_url = \"localhost:11434\"")
            .contains("base_url \"localhost:11434\" is not an http:// or https:// URL")
    );
    // `api_key_env = ""` sends no key.
    let c: SummarizerConfig =
        toml::from_str("kind = \"anthropic\"\nmodel = \"m\"\napi_key_env = \"\"").unwrap();
    assert!(build_with_env(&c, counter(), &no_env).is_ok());

    let unknown_kind = toml::from_str::<SummarizerConfig>("kind = \"gemini\"")
        .unwrap_err()
        .to_string();
    assert!(
        unknown_kind.contains("unknown variant `gemini`") && unknown_kind.contains("`openai`"),
        "{unknown_kind}"
    );
    let unknown_key =
        toml::from_str::<SummarizerConfig>("kind = \"openai\"\nmodel = \"m\"\napi_key = \"x\"")
            .unwrap_err()
            .to_string();
    assert!(
        unknown_key.contains("unknown field `api_key`"),
        "{unknown_key}"
    );
    assert!(toml::from_str::<SummarizerConfig>("kind = \"extractive\"\nmodel = \"m\"").is_err());
}

#[test]
fn config_round_trips_with_defaults_filled_in() {
    let c: SummarizerConfig =
        toml::from_str("kind = \"openai\"\nmodel = \"gpt-4.1-mini\"").unwrap();
    let text = toml::to_string(&c).unwrap();
    assert!(
        text.contains("kind = \"openai\"")
            && text.contains("timeout_secs = 120")
            && text.contains("max_retries = 3"),
        "{text}"
    );
    assert_eq!(toml::from_str::<SummarizerConfig>(&text).unwrap(), c);
    assert_eq!(
        toml::from_str::<SummarizerConfig>("kind = \"extractive\"").unwrap(),
        SummarizerConfig::default()
    );
}
