//! The real `anthropic` and `openai` Python SDKs through `condense serve` to the fake
//! upstream: three turns each of Anthropic Messages, OpenAI Chat Completions and OpenAI
//! Responses (streaming and not). Asserts what each SDK received and what
//! the upstream got. Needs the interpreter of the `test` virtualenv in CONDENSE_TEST_PYTHON
//! (`cargo xtask test` makes it); without it the test fails, it never skips.

use crate::serve_fake::*;
use crate::support::fixture;
use std::process::Command;

fn python() -> String {
    match std::env::var("CONDENSE_TEST_PYTHON") {
        Ok(p) if !p.is_empty() => p,
        _ => panic!(
            "CONDENSE_TEST_PYTHON is not set: run `cargo xtask test` (it makes the `test` virtualenv with the anthropic and openai SDKs), or set it to that interpreter, e.g. target/venvs/test/bin/python"
        ),
    }
}

/// Answers "<api> answer to N messages", so the SDK's view says which request it answers.
fn answer(r: &crate::support::Received, _: usize) -> Reply {
    let body = r.json();
    let n = body["messages"]
        .as_array()
        .or(body["input"].as_array())
        .map_or(0, Vec::len);
    let stream = body["stream"] == true;
    match (r.path.as_str(), stream) {
        ("/v1/responses", false) => Reply::Json(
            200,
            responses_answer(&format!("responses answer to {n} items")),
        ),
        ("/v1/responses", true) => Reply::Sse {
            events: responses_events(&format!("responses stream to {n} items")),
            gate: None,
            cut: false,
        },
        ("/v1/messages", false) => Reply::Json(
            200,
            anthropic_answer(&format!("anthropic answer to {n} messages")),
        ),
        ("/v1/messages", true) => Reply::Sse {
            events: anthropic_events(&format!("anthropic stream to {n} messages")),
            gate: None,
            cut: false,
        },
        (_, false) => Reply::Json(
            200,
            openai_answer(&format!("openai answer to {n} messages")),
        ),
        (_, true) => Reply::Sse {
            events: openai_events(&format!("openai stream to {n} messages")),
            gate: None,
            cut: false,
        },
    }
}

#[test]
fn the_real_sdks_work_through_the_proxy() {
    let python = python();
    let up = Upstream::start(answer);
    let serve = Serve::start(&up.url, &[]);
    let out = Command::new(&python)
        .arg(fixture("serve/sdk_e2e.py"))
        .env("CONDENSE_URL", &serve.url)
        // The SDKs' HTTP client honours proxy variables; the test talks to 127.0.0.1 only.
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("all_proxy")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    assert!(
        out.status.success(),
        "the SDK script failed: {}\nproxy log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        serve.log()
    );
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let texts = |api: &str| -> Vec<String> {
        seen[api]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["text"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        texts("anthropic"),
        [
            "anthropic answer to 1 messages",
            "anthropic stream to 3 messages",
            "anthropic answer to 5 messages"
        ]
    );
    assert_eq!(
        texts("openai"),
        [
            "openai answer to 2 messages",
            "openai stream to 4 messages",
            "openai answer to 6 messages"
        ]
    );
    assert_eq!(
        texts("responses"),
        [
            "responses answer to 1 items",
            "responses stream to 3 items",
            "responses answer to 5 items"
        ]
    );
    assert_eq!(seen["anthropic"][1]["stop"], "end_turn");
    assert_eq!(seen["anthropic"][0]["saved"], "0");
    assert_eq!(seen["openai"][2]["saved"], "0");
    assert_eq!(seen["responses"][2]["saved"], "0");

    let got = up.requests();
    let paths: Vec<&str> = got.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        ["/v1/messages"; 3]
            .iter()
            .chain(&["/v1/chat/completions"; 3])
            .chain(&["/v1/responses"; 3])
            .copied()
            .collect::<Vec<_>>()
    );
    for r in &got[..3] {
        // The key as the SDK sends it (`x-api-key`, or a bearer token in newer SDKs).
        let key = r.header("x-api-key").or(r.header("authorization"));
        assert!(
            key.is_some_and(|k| k.ends_with("sk-ant-test-key")),
            "{:?}",
            r.headers
        );
        assert!(r.header("anthropic-version").is_some());
        assert_eq!(r.header("x-condense-session"), None);
        assert_eq!(r.json()["system"], "You are a coding agent.");
    }
    for r in &got[3..] {
        assert_eq!(r.header("authorization"), Some("Bearer sk-openai-test-key"));
    }
    for r in &got[6..] {
        assert_eq!(r.json()["instructions"], "You are a coding agent.");
    }
    // What the SDK sent is what the upstream got: the turns as the script wrote them.
    assert_eq!(got[2].json()["messages"][4]["content"], "Turn 3: go on.");
    assert_eq!(got[1].json()["stream"], true);
    assert_eq!(got[5].json()["messages"][5]["content"], "Turn 3: go on.");
    assert_eq!(got[8].json()["input"][4]["content"], "Turn 3: go on.");
    assert_eq!(got[7].json()["stream"], true);
    let status = serve.status();
    assert_eq!(status["sessions"]["sdk-anthropic"]["requests"], 3);
    assert_eq!(status["sessions"]["sdk-anthropic"]["cache_stable"], 2);
    assert_eq!(status["totals"]["requests"], 9);
}
