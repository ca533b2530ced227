//! Levels 4-5 through the real host with an LLM summarizer backend pointed at a local server.

use crate::support::{condense, fixture, LocalServer};

/// A local OpenAI-compatible endpoint that answers every request with 500.
fn failing_server() -> LocalServer {
    LocalServer::start(|_| {
        let reply = r#"{"error":{"message":"the model is overloaded","type":"server_error"}}"#;
        (500, reply.to_string())
    })
}

#[test]
fn circuit_breaker_stops_calling_a_failing_summarizer_server() {
    let server = failing_server();
    let url = format!("{}/v1", server.url);
    let dir = tempfile::tempdir().unwrap();
    let pipeline = dir.path().join("p.toml");
    std::fs::write(
        &pipeline,
        format!(
            "[model]\ncontext_window = 32000\nmax_output_tokens = 8000\nfixed_tokens = 16484\n\n[summarizer]\nkind = \"openai\"\nmodel = \"test-model\"\nbase_url = \"{url}\"\napi_key_env = \"\"\nmax_retries = 0\ntimeout_secs = 5\n\n[[stage]]\nplugin = \"autocompact\"\n[stage.config]\nmin_turns_between = 0\n"
        ),
    )
    .unwrap();
    let cc = fixture(
        "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    );
    let store = dir.path().join("store");
    let mut notes = Vec::new();
    for _ in 0..4 {
        let run = condense(&[
            "compress",
            cc.to_str().unwrap(),
            "--pipeline",
            pipeline.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--report",
            "json",
            "--out",
            dir.path().join("out.jsonl").to_str().unwrap(),
        ]);
        assert_eq!(
            run.code, 0,
            "a failing summarizer never fails the pipeline: {}",
            run.stderr
        );
        let report: serde_json::Value = serde_json::from_str(&run.stderr).unwrap();
        let stage = &report["runs"][0]["stages"][0];
        assert_eq!(stage["tokens_saved"], 0, "the input is kept unchanged");
        notes.push(stage["report"]["notes"].to_string());
    }
    assert_eq!(
        server.requests().len(),
        3,
        "three attempts, then the breaker opens: {notes:?}"
    );
    assert!(notes[3].contains("circuit breaker open"), "{}", notes[3]);
    assert!(
        notes[0].contains("overloaded") || notes[0].contains("500"),
        "the failure is reported: {}",
        notes[0]
    );
}
