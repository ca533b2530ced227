//! What every benchmark shares: the timing helper, where things are, and the generated agent
//! session (any size) that the scaling and whole-process figures run on.

use condense_model::{Block, Content, Conversation, Message, Role};
use condense_tokens::TokenCounter;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub(crate) fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// The no-op-capable test plugin `cargo xtask plugins` builds.
pub(crate) fn test_plugin_path() -> PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo().join("target"), PathBuf::from);
    target
        .join("test-plugins")
        .join(condense_host::discover::library_file_name("test-faulty"))
}

/// Where the plugins are: `target/plugins` (`cargo xtask bench` builds them there in
/// release), or `CONDENSE_BENCH_PLUGINS` (a private copy while others rebuild the shared one).
pub(crate) fn plugin_dir() -> PathBuf {
    std::env::var_os("CONDENSE_BENCH_PLUGINS")
        .map_or_else(|| target().join("plugins"), PathBuf::from)
}

/// Fails when the plugins the bench would load are a debug build: `cargo xtask test` builds
/// them into the same folder as `cargo xtask bench` and `cargo xtask plugins --release`, and
/// timing a release binary with debug stages gives figures of neither (the stages several
/// times slower). The folder says which build it holds (`.profile`, written by xtask); one
/// named by `CONDENSE_BENCH_PLUGINS`, or without the file, is taken as it is.
pub(crate) fn check_plugins() -> anyhow::Result<()> {
    if std::env::var_os("CONDENSE_BENCH_PLUGINS").is_some() {
        return Ok(());
    }
    not_debug(&plugin_dir())
}

/// The file a plugins folder says which build it holds in (`release` or `debug`): xtask's
/// `PROFILE_MARK`.
const PROFILE_MARK: &str = ".profile";

/// Fails when the plugins folder `dir` says it holds a debug build.
fn not_debug(dir: &Path) -> anyhow::Result<()> {
    match std::fs::read_to_string(dir.join(PROFILE_MARK)) {
        Ok(profile) if profile.trim() == "debug" => anyhow::bail!(
            "the plugins in {} are a debug build (`cargo xtask test` builds them there): run \
             `cargo xtask plugins --release` first, or `cargo xtask bench`, which does",
            dir.display()
        ),
        _ => Ok(()),
    }
}

fn target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo().join("target"), PathBuf::from)
}

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A synthetic agent session of about `target_tokens` tokens: user asks, assistant calls tools,
/// tool results of varied sizes (code, logs, JSON), some repeated.
pub(crate) fn generated_conversation(target_tokens: usize, counter: &TokenCounter) -> Conversation {
    let mut conv = Conversation::default();
    let mut i = 0usize;
    let mut total = 0usize;
    while total < target_tokens {
        for m in turn(i) {
            total += counter.count_message(&m);
            conv.messages.push(m);
        }
        i += 1;
    }
    conv
}

/// `from` grown by one turn, then by another, `turns` times, as an agent's requests grow: the
/// first element has one turn more than `from`, the last `turns` more. The turns continue the
/// generated session's (`from` is one of [`generated_conversation`]'s), their ids the
/// synthetic `#n` of the input's messages.
pub(crate) fn grown_turn_by_turn(from: &Conversation, turns: usize) -> Vec<Conversation> {
    let next = from.messages.len() / 3;
    let mut grown: Vec<Conversation> = Vec::with_capacity(turns);
    for k in 0..turns {
        let mut c = grown.last().unwrap_or(from).clone();
        let at = c.messages.len();
        c.messages
            .extend(turn(next + k).into_iter().enumerate().map(|(j, mut m)| {
                m.id = format!("#{}", at + j);
                m
            }));
        grown.push(c);
    }
    grown
}

/// Turn `i` of the generated session: the user's ask, the assistant's tool call, its result.
pub(crate) fn turn(i: usize) -> [Message; 3] {
    let code: String = (0..(20 + i % 180))
        .map(|k| format!("    let value_{k} = compute(input_{k}, {});\n", k * i % 97))
        .collect();
    let text = match i % 4 {
        0 => format!("fn handler_{i}() {{\n{code}}}\n"),
        1 => (0..(30 + i % 120))
            .map(|k| format!("2025-01-0{} INFO request {k} served in {}ms\n", i % 9 + 1, k * 3 % 250))
            .collect(),
        2 => serde_json::json!({"items": (0..(10 + i % 60)).map(|k| serde_json::json!({"id": k, "name": format!("item-{k}"), "ok": k % 3 == 0})).collect::<Vec<_>>()}).to_string(),
        _ => format!("fn handler_{}() {{\n{code}}}\n", i - 1),
    };
    let id = format!("call_{i}");
    let mut msgs = [
        Message::new(
            format!("#{}", 3 * i),
            Role::User,
            vec![Block::text(format!(
                "Step {i}: look at module {i} and fix what fails."
            ))],
        ),
        Message::new(
            format!("#{}", 3 * i + 1),
            Role::Assistant,
            vec![
                Block::text(format!("Reading module {i}.")),
                Block::tool_use(
                    id.clone(),
                    ["Read", "Bash", "Grep"][i % 3],
                    condense_model::RawJson::from_value(
                        &serde_json::json!({"file_path": format!("src/module_{i}.rs")}),
                    ),
                ),
            ],
        ),
        Message::new(
            format!("#{}", 3 * i + 2),
            Role::User,
            vec![Block::tool_result(id, Content::string(text))],
        ),
    ];
    for (k, m) in msgs.iter_mut().enumerate() {
        // One message a minute from 2025-01-01, so time-based stages have a clock to read.
        m.timestamp = Some(rfc3339(1_735_689_600 + 60 * (3 * i + k) as i64));
    }
    msgs
}

/// A long Claude Code session made of a real one: `session` (JSONL) `copies` times after its
/// first line, each copy's uuids renumbered (every uuid-shaped token, so links and references
/// stay within the copy) and its first main-thread root line continuing from the copy before
/// it; then the first `more` lines of one copy more, a turn appended. Every line stays the
/// compact line Claude Code wrote but for those roots' `parentUuid`. Gives the session without
/// the turn and with it.
pub(crate) fn tiled_claude_code(
    session: &str,
    copies: usize,
    more: usize,
) -> anyhow::Result<(String, String)> {
    let mut lines = session.lines().filter(|l| !l.trim().is_empty());
    let head = lines.next().unwrap_or_default();
    let body: Vec<&str> = lines.collect();
    let mut out = format!("{head}\n");
    let mut before = String::new();
    let mut last: Option<String> = None;
    for k in 0..=copies {
        if k == copies {
            before.clone_from(&out);
        }
        let take = if k == copies { more } else { body.len() };
        for line in body.iter().take(take) {
            let mut line = renumbered(line, k);
            let value: serde_json::Value = serde_json::from_str(&line)
                .map_err(|e| anyhow::anyhow!("a line of the session does not parse: {e}"))?;
            let chat = matches!(value["type"].as_str(), Some("user" | "assistant"))
                && value["isSidechain"] != serde_json::Value::Bool(true);
            if chat && value["parentUuid"].is_null() {
                if let Some(parent) = &last {
                    line = line.replacen(
                        "\"parentUuid\":null",
                        &format!("\"parentUuid\":\"{parent}\""),
                        1,
                    );
                }
            }
            if chat {
                last = value["uuid"].as_str().map(str::to_string);
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    Ok((before, out))
}

/// `line` with the last four hex digits of every uuid-shaped token (8-4-4-4-12 lowercase hex)
/// moved by a step per `copy`: the same length, so nothing else in the line moves.
fn renumbered(line: &str, copy: usize) -> String {
    let bytes = line.as_bytes();
    let is_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    let uuid_at = |i: usize| {
        bytes.get(i..i + 36).is_some_and(|w| {
            w.iter().enumerate().all(|(k, &b)| {
                if matches!(k, 8 | 13 | 18 | 23) {
                    b == b'-'
                } else {
                    is_hex(b)
                }
            })
        })
    };
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < bytes.len() {
        if uuid_at(i) {
            let tail = &line[i + 32..i + 36];
            let n = u16::from_str_radix(tail, 16).unwrap_or(0);
            // 7919: a prime step, so copies do not collide within 65,536 of them.
            let moved = n.wrapping_add((copy as u16).wrapping_mul(7919));
            out.push_str(&line[i..i + 32]);
            out.push_str(&format!("{moved:04x}"));
            i += 36;
        } else {
            let ch = line[i..].chars().next().unwrap_or_default();
            out.push(ch);
            i += ch.len_utf8().max(1);
        }
    }
    out
}

/// `conv` as an Anthropic Messages request body, the file the whole-process figures read (an
/// agent sends one of these every turn).
pub(crate) fn anthropic_file(conv: &Conversation) -> anyhow::Result<Vec<u8>> {
    const SEED: &[u8] =
        br#"{"model": "claude-sonnet-4-5", "max_tokens": 32000, "messages": [{"role": "user", "content": "hi"}]}"#;
    // Said, not detected: the seed reads as an OpenAI Chat body too, whose writer has no place
    // for a tool result block (it became an opaque part, which no stage touches).
    request_file(conv, (SEED, condense_model::Format::Anthropic), |_| {})
}

/// `conv` as an OpenAI Chat Completions request body: its system prompt a leading system
/// message, each message that is one tool result a `tool` message.
pub(crate) fn openai_file(conv: &Conversation) -> anyhow::Result<Vec<u8>> {
    const SEED: &[u8] = br#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}"#;
    request_file(conv, (SEED, condense_model::Format::OpenAi), |m| {
        m.timestamp = None;
        if let [condense_model::Block::ToolResult(_)] = m.content.blocks.as_slice() {
            m.role = condense_model::Role::Tool;
        }
    })
}

/// `conv` as an OpenAI Responses request body (Codex's): its system prompt the
/// `instructions`, each text a `message` item, each call and result an item of its own.
pub(crate) fn responses_file(conv: &Conversation) -> anyhow::Result<Vec<u8>> {
    const SEED: &[u8] = br#"{"model": "gpt-5", "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}"#;
    request_file(conv, (SEED, condense_model::Format::Responses), |m| {
        m.timestamp = None;
    })
}

/// `conv` written into the body `seed` of `format` reads as, each message shaped by `shape`
/// for that format first.
fn request_file(
    conv: &Conversation,
    (seed, format): (&[u8], condense_model::Format),
    shape: impl Fn(&mut condense_model::Message),
) -> anyhow::Result<Vec<u8>> {
    let opts = condense_formats::ReadOptions {
        format: Some(format),
        ..Default::default()
    };
    let mut doc = condense_formats::read(seed, "seed", &opts)?;
    let mut conv = conv.clone();
    // Event lines are never sent to the model (nor counted); a request body has no place for
    // them, nor for another format's per-message fields (a Claude Code line's wrapper).
    conv.messages
        .retain(|m| m.role != condense_model::Role::Event);
    for m in &mut conv.messages {
        m.envelope = Default::default();
        m.extra = Default::default();
        shape(m);
    }
    doc.conversations_mut()[0] = conv;
    Ok(doc.write()?)
}

/// Unix seconds as RFC 3339 UTC (civil-from-days, Howard Hinnant's algorithm).
pub(crate) fn rfc3339(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub(crate) fn concatenated_text(conv: &Conversation) -> String {
    let mut s = String::new();
    for m in &conv.messages {
        for b in &m.content.blocks {
            match b {
                Block::Text(t) => s.push_str(&t.text),
                Block::ToolUse(t) => {
                    s.push_str(&t.name);
                    s.push_str(t.input.as_str());
                }
                Block::ToolResult(t) => s.push_str(&t.content.text()),
                _ => {}
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_tokens::TokenizerKind;

    /// Plugins a folder says are a debug build are refused, naming the folder; a release
    /// build, or a folder that says nothing, is taken.
    #[test]
    fn debug_plugins_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(not_debug(dir.path()).is_ok());
        std::fs::write(dir.path().join(PROFILE_MARK), "release\n").unwrap();
        assert!(not_debug(dir.path()).is_ok());
        std::fs::write(dir.path().join(PROFILE_MARK), "debug\n").unwrap();
        let err = not_debug(dir.path()).unwrap_err().to_string();
        assert!(err.contains("debug build") && err.contains(&dir.path().display().to_string()));
    }

    /// The request body the whole-process figures run on reads back as the same conversation
    /// (same messages, about the same tokens): the binary and the in-process figures measure one
    /// input.
    #[test]
    fn the_request_body_reads_back_as_the_conversation() {
        let counter = TokenCounter::new(TokenizerKind::O200k);
        let conv = generated_conversation(20_000, &counter);
        let bytes = anthropic_file(&conv).unwrap();
        let doc = condense_formats::read(&bytes, "x.json", &Default::default()).unwrap();
        let back = &doc.conversations()[0];
        assert_eq!(back.messages.len(), conv.messages.len());
        // Read from the file, tool inputs and results keep their JSON form: a few more tokens.
        let (read, made) = (
            counter.count_conversation(back).total as f64,
            counter.count_conversation(&conv).total as f64,
        );
        assert!((1.0..1.1).contains(&(read / made)), "{read} vs {made}");
        // Every block reads back as the kind it was made as (tool calls and results included),
        // so the stages have the same work in the file as in memory.
        let kinds = |c: &Conversation| -> Vec<std::mem::Discriminant<Block>> {
            c.messages
                .iter()
                .flat_map(|m| m.content.blocks.iter().map(std::mem::discriminant))
                .collect()
        };
        assert_eq!(kinds(back), kinds(&conv));
        let appended = turn(conv.messages.len() / 3);
        assert_eq!(appended[0].role, Role::User);
    }

    /// The long Claude Code session is one thread through every copy: each copy's context
    /// messages, the shipped session's, once per copy, and the turn appended after them.
    #[test]
    fn a_tiled_session_is_one_thread_through_its_copies() {
        let session =
            std::fs::read_to_string(repo().join("examples/claude-code-session.jsonl")).unwrap();
        let opts = condense_formats::ReadOptions {
            format: Some(condense_model::Format::ClaudeCode),
            ..Default::default()
        };
        let context = |text: &str| {
            let doc = condense_formats::read(text.as_bytes(), "s.jsonl", &opts).unwrap();
            let conv = &doc.conversations()[0];
            let chat = conv.messages.iter().filter(|m| m.role != Role::Event);
            (chat.count(), conv.messages.len())
        };
        let (one, lines) = context(&session);
        let (before, whole) = tiled_claude_code(&session, 3, 12).unwrap();
        assert!(whole.starts_with(&before));
        assert_eq!(context(&before), (3 * one, 3 * (lines - 1) + 1));
        let (with_turn, all) = context(&whole);
        assert_eq!(all, 3 * (lines - 1) + 1 + 12);
        assert!(with_turn > 3 * one, "{with_turn} context messages");
        // Renumbering keeps a line's length and moves only its uuids.
        let line = r#"{"uuid":"62e0bdc0-a1e4-4d5c-8509-3b9d0d57cc67","n":"x"}"#;
        let moved = renumbered(line, 1);
        assert_eq!(moved.len(), line.len());
        assert_ne!(moved, line);
        assert_eq!(renumbered(line, 0), line);
    }
}
