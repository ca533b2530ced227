//! An agent's request body compressed once per turn (a real Claude Code session sent as
//! Anthropic Messages, OpenAI Chat and Responses bodies, and a real Codex CLI session's items
//! sent as Codex sends them): from the second turn on, the history the previous input held is
//! not parsed again (`condense_formats::known`), and every output is byte for byte the one a
//! run that parsed everything gives, and expands to its input.

use crate::serve_fake::{anthropic_answer, openai_answer, post, Reply, Serve, Upstream};
use crate::support::{assert_expands_to, condense, copy_dir, fixture, Received};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

const SESSION: &str =
    "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl";

/// Keeps the keys of a content block its type has in the Messages API, in their order.
fn block(b: &Value) -> Option<Value> {
    let keys: &[&str] = match b["type"].as_str()? {
        "text" => &["type", "text"],
        "tool_use" => &["type", "id", "name", "input"],
        "tool_result" => &["type", "tool_use_id", "content", "is_error"],
        _ => return None,
    };
    let mut out = Map::new();
    for k in keys {
        if let Some(v) = b.get(*k) {
            let v = match (*k, v) {
                ("content", Value::Array(items)) => {
                    Value::Array(items.iter().filter_map(block).collect())
                }
                _ => v.clone(),
            };
            out.insert(k.to_string(), v);
        }
    }
    Some(Value::Object(out))
}

/// The session's user and assistant messages as the Messages API takes them.
pub(crate) fn messages() -> Vec<Value> {
    let text = std::fs::read_to_string(fixture(SESSION)).unwrap();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| matches!(line["type"].as_str(), Some("user" | "assistant")))
        .filter_map(|line| {
            let m = &line["message"];
            let content = match &m["content"] {
                Value::Array(blocks) => Value::Array(blocks.iter().filter_map(block).collect()),
                other => other.clone(),
            };
            Some(json!({"role": m["role"].as_str()?, "content": content}))
        })
        .collect()
}

/// The request body of the first `n` messages, pretty-printed as an SDK might send it.
pub(crate) fn body(messages: &[Value], n: usize) -> Vec<u8> {
    let body = json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 8192,
        "messages": &messages[..n],
    });
    serde_json::to_vec_pretty(&body).unwrap()
}

/// [`crate::resume::compress`] at a fixed time, with its report as JSON: the output and the
/// report.
pub(crate) fn compress(input: &Path, store: &Path, out: &Path, extra: &[&str]) -> (Vec<u8>, Value) {
    let mut args = vec!["--now", "1893456000000", "--report", "json"];
    args.extend_from_slice(extra);
    let stderr = crate::resume::compress(input, store, out, &args);
    let report = serde_json::from_str(&stderr).unwrap();
    (std::fs::read(out).unwrap(), report)
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

/// Forgets what the store knew of message lists: the next read parses everything.
pub(crate) fn forget_lists(store: &Path) {
    let store = condense_store::Store::open(store).unwrap();
    for (name, _) in store.records("known-lists").unwrap() {
        store.record_remove("known-lists", &name).unwrap();
    }
}

fn unread(report: &Value) -> u64 {
    report["runs"][0]["resumed"]["unread_messages"]
        .as_u64()
        .unwrap_or(0)
}

/// A turn's run on a store that knows the message lists (`knowing`: output and report)
/// against the same run on one that forgot them (`parsing`): the same output, the reference
/// read everything, and from the second turn on most of the history was left unread while the
/// run resumed as the other did.
pub(crate) fn assert_as_full_parse(
    turn: usize,
    (out, report): &(Vec<u8>, Value),
    (reference, reference_report): &(Vec<u8>, Value),
) {
    assert!(out == reference, "turn {turn}: not the full parse's output");
    assert_eq!(unread(reference_report), 0);
    if turn > 0 {
        let resumed = &report["runs"][0]["resumed"];
        let input_messages = resumed["input_messages"].as_u64().unwrap();
        assert!(unread(report) * 2 > input_messages, "turn {turn}: {report}");
        let resumed_without = &reference_report["runs"][0]["resumed"];
        assert_eq!(
            resumed["output_messages"],
            resumed_without["output_messages"]
        );
        assert_eq!(report["tokens_before"], reference_report["tokens_before"]);
    }
}

#[test]
fn each_turn_parses_only_what_it_needs_and_writes_what_a_full_parse_does() {
    let messages = messages();
    assert!(messages.len() > 400, "{}", messages.len());
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| -> PathBuf { dir.path().join(name) };
    let (knowing, parsing) = (path("knowing.store"), path("parsing.store"));
    let input = path("request.json");
    let n = messages.len();
    for (turn, count) in [n * 3 / 5, n * 4 / 5, n].into_iter().enumerate() {
        let text = body(&messages, count);
        std::fs::write(&input, &text).unwrap();
        let knowing_run = compress(&input, &knowing, &path("k.json"), &[]);
        forget_lists(&parsing);
        let parsing_run = compress(&input, &parsing, &path("p.json"), &[]);
        assert_as_full_parse(turn, &knowing_run, &parsing_run);
        assert_expands_to(
            path("k.json").to_str().unwrap(),
            knowing.to_str().unwrap(),
            path("back.json").to_str().unwrap(),
            &text,
        );
    }
}

#[test]
fn a_turn_under_other_settings_reads_the_history_after_all() {
    let messages = messages();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| -> PathBuf { dir.path().join(name) };
    let (knowing, parsing) = (path("knowing.store"), path("parsing.store"));
    let input = path("request.json");
    let first = body(&messages, messages.len() - 20);
    std::fs::write(&input, &first).unwrap();
    compress(&input, &knowing, &path("k.json"), &[]);
    compress(&input, &parsing, &path("p.json"), &[]);
    forget_lists(&parsing);
    // The next turn with another window: the previous output is no start for it, so the
    // messages left unread are read before the stages run over the whole input. (Under the
    // same window, on a copy of the store, the same read leaves most of them unread.)
    let whole = body(&messages, messages.len());
    std::fs::write(&input, &whole).unwrap();
    copy_dir(&knowing, &path("same.store"));
    let (_, same) = compress(&input, &path("same.store"), &path("s.json"), &[]);
    assert!(unread(&same) > 100, "{same}");
    let other = ["--context-window", "48000"];
    let (out, report) = compress(&input, &knowing, &path("k.json"), &other);
    let (reference, _) = compress(&input, &parsing, &path("p.json"), &other);
    assert!(report["runs"][0]["resumed"].is_null(), "{report}");
    assert!(out == reference, "not the full parse's output");
    assert_expands_to(
        path("k.json").to_str().unwrap(),
        knowing.to_str().unwrap(),
        path("back.json").to_str().unwrap(),
        &whole,
    );
    // --no-resume keeps nothing for the next read: the record stays the last resuming run's.
    let record = || {
        let store = condense_store::Store::open(&knowing).unwrap();
        store.records("known-lists").unwrap()
    };
    let before = record();
    std::fs::write(&input, body(&messages, messages.len() - 5)).unwrap();
    compress(&input, &knowing, &path("k.json"), &["--no-resume"]);
    assert!(record() == before, "a --no-resume run changed the record");
}

/// Two proxies, each before an upstream that records what it gets: `knowing` keeps what it
/// read of the message lists from turn to turn, `parsing` forgets it before every request (it
/// parses everything).
struct KnowingAndParsing {
    up_knowing: Upstream,
    up_parsing: Upstream,
    knowing: Serve,
    parsing: Serve,
}

impl KnowingAndParsing {
    fn start(answer: fn(&Received, usize) -> Reply) -> KnowingAndParsing {
        let (up_knowing, up_parsing) = (Upstream::start(answer), Upstream::start(answer));
        KnowingAndParsing {
            knowing: Serve::start(&up_knowing.url, &[]),
            parsing: Serve::start(&up_parsing.url, &[]),
            up_knowing,
            up_parsing,
        }
    }

    /// Sends turn `turn`'s `text` to `path` through both, and asserts that both upstreams got
    /// the same body (`what` names the case); the body sent.
    fn send(
        &self,
        (path, headers): (&str, &[(&str, &str)]),
        text: &[u8],
        turn: usize,
        what: &str,
    ) -> String {
        forget_lists(self.parsing.store.path());
        for serve in [&self.knowing, &self.parsing] {
            let answer = post(&serve.url, path, headers, text);
            assert_eq!(answer.status, 200, "{}", serve.log());
        }
        let sent = self.up_knowing.requests()[turn].body.clone();
        assert!(
            sent == self.up_parsing.requests()[turn].body,
            "{what} turn {turn}: not what a full parse sends"
        );
        sent
    }
}

/// The proxy reads each turn's body leaving unread what its last request's body held (even
/// the messages its output kept: it remembers them), and sends upstream byte for byte what a
/// proxy that parsed everything sends. So does one the client names no session to (as the
/// SDKs send a turn): its look at the body matches the known history by its hash, and the
/// read takes that match.
#[test]
fn the_proxy_sends_what_a_full_parse_sends_turn_after_turn() {
    use crate::serve::ANTHROPIC_HEADERS;
    let messages = messages();
    let pair = KnowingAndParsing::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    // A third proxy, which no header names the session to.
    let up_c = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let c = Serve::start(&up_c.url, &[]);
    let mut headers = ANTHROPIC_HEADERS.to_vec();
    headers.push(("x-condense-session", "viewer"));
    let n = messages.len();
    let turns = [n * 3 / 5, n * 3 / 5 + 2, n * 4 / 5, n];
    let mut sent = String::new();
    for (turn, &count) in turns.iter().enumerate() {
        let text = body(&messages, count);
        sent = pair.send(("/v1/messages", &headers), &text, turn, "anthropic");
        let answer = post(&c.url, "/v1/messages", ANTHROPIC_HEADERS, &text);
        assert_eq!(answer.status, 200, "{}", c.log());
        assert!(
            up_c.requests()[turn].body == sent,
            "turn {turn}: without the header, not what a full parse sends"
        );
        // What the proxy keeps for the next turn's read.
        assert_eq!(lists_kept(pair.knowing.store.path()), 1, "turn {turn}");
    }
    // Without the header every turn was the one session the look found.
    assert!(!c.log().contains("the quick look said"), "{}", c.log());
    let status = c.status();
    let sessions = status["sessions"].as_object().unwrap();
    assert_eq!(sessions.len(), 1, "{status}");
    assert_eq!(sessions.values().next().unwrap()["requests"], turns.len());
    // What it sent last expands to the client's body.
    assert_expands_from(
        sent.as_bytes(),
        pair.knowing.store.path(),
        "viewer",
        &body(&messages, n),
    );
}

/// How many known lists the store at `store` keeps.
fn lists_kept(store: &Path) -> usize {
    condense_store::Store::open(store)
        .unwrap()
        .records("known-lists")
        .unwrap()
        .len()
}

/// `condense expand` of `sent` with the proxy's store and `session` gives `client`.
pub(crate) fn assert_expands_from(sent: &[u8], store: &Path, session: &str, client: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let (at, back) = (dir.path().join("sent.json"), dir.path().join("back.json"));
    std::fs::write(&at, sent).unwrap();
    let run = condense(&[
        "expand",
        at.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--session",
        session,
        "--out",
        back.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(std::fs::read(&back).unwrap() == client);
}

/// The same session as an OpenAI Chat Completions body: a system message, assistant tool
/// calls, `tool` results.
fn chat_messages() -> Vec<Value> {
    let mut out = vec![json!({"role": "system", "content": "You are a coding agent."})];
    for m in messages() {
        let blocks = match &m["content"] {
            Value::String(s) => {
                out.push(json!({"role": m["role"], "content": s}));
                continue;
            }
            Value::Array(blocks) => blocks.clone(),
            _ => continue,
        };
        let text: Vec<&str> = blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect();
        if m["role"] == "assistant" {
            let calls: Vec<Value> = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| {
                    json!({"id": b["id"], "type": "function", "function": {
                        "name": b["name"], "arguments": b["input"].to_string()}})
                })
                .collect();
            let mut message = json!({"role": "assistant", "content": text.join("\n")});
            if !calls.is_empty() {
                message["tool_calls"] = Value::Array(calls);
            }
            out.push(message);
            continue;
        }
        for r in blocks.iter().filter(|b| b["type"] == "tool_result") {
            let content = result_text(&r["content"]);
            out.push(json!({"role": "tool", "tool_call_id": r["tool_use_id"], "content": content}));
        }
        if !text.is_empty() {
            out.push(json!({"role": "user", "content": text.join("\n")}));
        }
    }
    out
}

/// An Anthropic tool result's content as one text: a string as it is, a list of parts their
/// texts joined by newlines.
fn result_text(content: &Value) -> String {
    match content {
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.as_str().unwrap_or_default().to_string(),
    }
}

/// The same session as an OpenAI Responses body's items (Codex's): a `message` item for each
/// text, a `function_call` for each call, a `function_call_output` for each result.
fn responses_items() -> Vec<Value> {
    let mut out = Vec::new();
    for m in messages() {
        let (role, part) = match m["role"].as_str() {
            Some("assistant") => ("assistant", "output_text"),
            _ => ("user", "input_text"),
        };
        let blocks = match &m["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(blocks) => blocks.clone(),
            _ => continue,
        };
        for b in blocks {
            out.push(match b["type"].as_str() {
                Some("text") => json!({"type": "message", "role": role,
                    "content": [{"type": part, "text": b["text"]}]}),
                Some("tool_use") => json!({"type": "function_call", "call_id": b["id"],
                    "name": b["name"], "arguments": b["input"].to_string()}),
                Some("tool_result") => json!({"type": "function_call_output",
                    "call_id": b["tool_use_id"], "output": result_text(&b["content"])}),
                _ => continue,
            });
        }
    }
    out
}

/// A real Codex CLI session (a rollout): its `response_item`s are the Responses input items
/// Codex sent, and its `session_meta` holds the instructions it sent with them.
const CODEX_ROLLOUT: &str = "transcripts/codemie-ai__codemie-code/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl";

/// The rollout's input items, and its instructions.
fn codex_items() -> (Vec<Value>, String) {
    let text = std::fs::read_to_string(fixture(CODEX_ROLLOUT)).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let instructions = lines
        .iter()
        .find(|l| l["type"] == "session_meta")
        .and_then(|l| l["payload"]["base_instructions"]["text"].as_str())
        .unwrap()
        .to_string();
    let items = lines
        .into_iter()
        .filter(|l| l["type"] == "response_item")
        .map(|mut l| l["payload"].take())
        .collect();
    (items, instructions)
}

/// The OpenAI bodies whose history is read for their format's reader: Chat Completions,
/// Responses, and Responses as Codex sends them (a real rollout's items and instructions).
#[derive(Clone, Copy, Debug)]
enum OpenAiBody {
    Chat,
    Responses,
    Codex,
}

/// Each kind of [`OpenAiBody`].
const OPENAI_BODIES: [OpenAiBody; 3] = [OpenAiBody::Chat, OpenAiBody::Responses, OpenAiBody::Codex];

impl OpenAiBody {
    /// The session's list in this body's shape.
    fn list(self) -> Vec<Value> {
        match self {
            OpenAiBody::Chat => chat_messages(),
            OpenAiBody::Responses => responses_items(),
            OpenAiBody::Codex => codex_items().0,
        }
    }

    /// The request body of the first `count` elements of `list`, pretty-printed.
    fn body(self, list: &[Value], count: usize) -> Vec<u8> {
        let body = match self {
            OpenAiBody::Chat => json!({"model": "gpt-4o", "messages": &list[..count]}),
            OpenAiBody::Responses => json!({"model": "gpt-5",
                "instructions": "You are a coding agent.", "input": &list[..count]}),
            // The members Codex sends beside its instructions and items.
            OpenAiBody::Codex => json!({"model": "gpt-5-codex", "instructions": codex_items().1,
                "input": &list[..count], "tools": [
                    {"type": "function", "name": "shell", "description": "Runs a shell command.",
                     "strict": false, "parameters": {"type": "object", "properties":
                        {"command": {"type": "array", "items": {"type": "string"}}}}},
                    {"type": "custom", "name": "apply_patch", "description": "Applies a patch."},
                    {"type": "web_search"}],
                "tool_choice": "auto", "parallel_tool_calls": false,
                "reasoning": {"effort": "medium", "summary": "auto"}, "store": false,
                "stream": false, "include": ["reasoning.encrypted_content"],
                "prompt_cache_key": "019e1625-789d-76c0-80ab-3724b5ddb799"}),
        };
        serde_json::to_vec_pretty(&body).unwrap()
    }

    /// The proxy's path for it.
    fn path(self) -> &'static str {
        match self {
            OpenAiBody::Chat => "/v1/chat/completions",
            OpenAiBody::Responses | OpenAiBody::Codex => "/v1/responses",
        }
    }

    /// The `--format` of it.
    fn format(self) -> &'static str {
        match self {
            OpenAiBody::Chat => "openai",
            OpenAiBody::Responses | OpenAiBody::Codex => "responses",
        }
    }
}

/// An OpenAI Chat or Responses session through the proxy: from the second turn on its history
/// is left unread as an Anthropic body's is (its lists are kept), and every body sent upstream
/// is the one a proxy that parsed everything sends; the last expands to the client's body.
#[test]
fn the_proxy_reads_an_openai_turn_as_an_anthropic_one() {
    for kind in OPENAI_BODIES {
        let list = kind.list();
        let pair = KnowingAndParsing::start(|_, _| Reply::Json(200, openai_answer("ok")));
        let headers = [
            ("content-type", "application/json"),
            ("authorization", "Bearer sk-test"),
        ];
        let n = list.len();
        let turns = [n * 3 / 5, n * 3 / 5 + 2, n * 4 / 5, n];
        let mut last = String::new();
        for (turn, &count) in turns.iter().enumerate() {
            let text = kind.body(&list, count);
            last = pair.send((kind.path(), &headers), &text, turn, &format!("{kind:?}"));
            assert_eq!(
                lists_kept(pair.knowing.store.path()),
                1,
                "{kind:?} turn {turn}: the list is kept"
            );
        }
        assert!(
            last.len() < kind.body(&list, n).len(),
            "{kind:?}: the stages cut the last turn"
        );
        let status = pair.knowing.status();
        let session = status["sessions"]
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap();
        assert_expands_from(
            last.as_bytes(),
            pair.knowing.store.path(),
            session,
            &kind.body(&list, n),
        );
    }
}

/// `condense compress --format openai` (or `responses`) once per turn on a growing body: the
/// history is left unread from the second turn on, and each output is the one a full parse
/// gives.
#[test]
fn each_openai_turn_with_its_format_said_parses_only_what_it_needs() {
    for kind in OPENAI_BODIES {
        let list = kind.list();
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| -> PathBuf { dir.path().join(name) };
        let (knowing, parsing) = (path("knowing.store"), path("parsing.store"));
        let input = path("request.json");
        let n = list.len();
        let said = ["--format", kind.format()];
        for (turn, count) in [n * 3 / 5, n * 4 / 5, n].into_iter().enumerate() {
            let text = kind.body(&list, count);
            std::fs::write(&input, &text).unwrap();
            let (out, report) = compress(&input, &knowing, &path("k.json"), &said);
            forget_lists(&parsing);
            let (reference, _) = compress(&input, &parsing, &path("p.json"), &said);
            assert!(
                out == reference,
                "{kind:?} turn {turn}: not the full parse's output"
            );
            if turn > 0 {
                let resumed = &report["runs"][0]["resumed"];
                assert!(
                    unread(&report) * 2 > resumed["input_messages"].as_u64().unwrap(),
                    "{kind:?}: {resumed}"
                );
            }
            assert_expands_to(
                path("k.json").to_str().unwrap(),
                knowing.to_str().unwrap(),
                path("back.json").to_str().unwrap(),
                &text,
            );
        }
    }
}
