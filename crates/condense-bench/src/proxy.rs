//! `condense serve` figures (issue 14): the release binary as a child proxy in front of a fake
//! upstream on 127.0.0.1 (a thread answering a small JSON body), driven by a plain HTTP/1.1
//! client over loopback ([`crate::http`]). The client and the upstream keep their connections
//! alive, as the SDKs and the APIs do.
//!
//! - added latency p50 / p99 on a turn that needs no compression: each request timed through
//!   the proxy and straight to the upstream, alternately; the figures are the differences;
//!   with `x-condense-session` and without it (as the SDKs, Claude Code and Codex send it:
//!   the proxy finds the session from the body); and from a client on a new connection for
//!   every request;
//! - cost per turn of one session growing turn by turn to 200k tokens (the generated agent
//!   session; its tool results over 4 KiB make snip act on most turns), sent without
//!   `x-condense-session` as the real clients send it: each turn's request
//!   timed through the proxy, then the same body straight to the upstream; the difference,
//!   against one cold count of the request (a fresh counter; the median of 11 or more, taken
//!   once the proxy is idle, [`cold_counts`]); then the same session with a Claude Code-like
//!   frame (a long system prompt, tool definitions, the session in `metadata.user_id`, the
//!   newest message marked `cache_control`, the mark moving every turn), and
//!   with that frame, without the metadata, as an OpenAI Chat Completions body, as an OpenAI
//!   Responses body, and as an Anthropic body whose tool results past the newest 100 messages
//!   are masked (OpenHands' observation masking: each turn edits an older message);
//! - requests per second with 32 concurrent sessions;
//! - the proxy's peak memory (`VmHWM` of the child);
//! - the cache-stability share of the growing session (`GET /condense/status`), to 200k tokens
//!   and over the next turns past it, where context-collapse commits.

use crate::gen::{anthropic_file, plugin_dir, turn};
use crate::http::{fake_upstream, get, post, Connection, Connection::Kept};
use crate::speed::Row;
use anyhow::{bail, Context, Result};
use condense_model::{Block, Conversation, Message, Role};
use condense_text::thousands;
use condense_tokens::{TokenCounter, TokenizerKind};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// The Anthropic Messages route.
const MESSAGES: &str = "/v1/messages";

pub(crate) fn run(runs: usize) -> Result<()> {
    let upstream = fake_upstream(None)?;
    let store = tempfile::tempdir()?;
    let mut proxy = Proxy::start(&upstream, store.path(), &[])?;
    let result = figures(&proxy, &upstream, runs);
    let peak = proxy.peak_kib();
    proxy.stop();
    let (lines, judged) = result?;
    println!("\n## condense serve (issue 14)\n");
    println!("| figure | value |\n|---|---|");
    for (k, v) in lines {
        println!("| {k} | {v} |");
    }
    println!(
        "| proxy peak memory (VmHWM, the whole run above) | {} MiB |",
        peak.map_or("?".into(), |k| format!("{:.1}", k as f64 / 1024.0))
    );
    crate::speed::print_done_when(14, &judged.rows());
    Ok(())
}

/// What issue 14's targets are judged on, from one run of [`figures`].
struct Judged {
    /// The latency added at p50 on the turn needing no compression: with the session header,
    /// and without it.
    idle_p50: [f64; 2],
    /// Each growing session's samples, with the frame it was sent with.
    sessions: Vec<(Frame, Vec<TurnSample>)>,
}

/// A compressing turn within this many cold counts of its request (issue 14).
const COMPRESSING_TARGET: f64 = 1.5;
/// A turn needing no compression adds less than this at p50, in ms (issue 14).
const IDLE_TARGET_MS: f64 = 5.0;
/// The cost of a turn "grows with the new turn, not with the whole conversation" when the
/// last sample of the one-line session (about 200k tokens) adds at most this many times what
/// its first (about 13k) adds: each turn adds one line, the conversation is 15 times larger.
/// The first samples need no compression and the last ones compress, so this also counts
/// what compressing costs over passing a body on; the row after it compares compressing
/// turns only ([`Judged::compressing_growth`]).
const FLAT_WITHIN: f64 = 1.5;

impl Judged {
    fn rows(&self) -> Vec<Row> {
        let idle = self.idle_p50[0].max(self.idle_p50[1]);
        let compressing: Vec<(Frame, &TurnSample)> = self
            .sessions
            .iter()
            .flat_map(|(frame, samples)| samples.iter().map(move |s| (*frame, s)))
            .filter(|(_, s)| s.saved > 0)
            .collect();
        let within = compressing
            .iter()
            .filter(|(_, s)| s.ratio() <= COMPRESSING_TARGET)
            .count();
        let worst = compressing
            .iter()
            .max_by(|a, b| a.1.ratio().total_cmp(&b.1.ratio()));
        let mut rows = vec![
            Row {
                what: "added latency, a turn needing no compression, p50 (with the session header, without)".into(),
                measured: format!("{:.2} / {:.2} ms", self.idle_p50[0], self.idle_p50[1]),
                target: format!("< {IDLE_TARGET_MS} ms"),
                met: Some(idle < IDLE_TARGET_MS),
            },
            Row {
                what: "a compressing turn (tokens saved) / one cold count of its request, every growing session".into(),
                measured: match worst {
                    Some((frame, s)) => format!(
                        "{within} of {} rows within {COMPRESSING_TARGET}x; the worst {:.2}x (the turn at {} tokens{})",
                        compressing.len(),
                        s.ratio(),
                        thousands(s.tokens),
                        frame.label()
                    ),
                    None => "no turn compressed".into(),
                },
                target: format!("<= {COMPRESSING_TARGET}x"),
                met: Some(worst.is_some() && within == compressing.len()),
            },
        ];
        let plain = self
            .sessions
            .iter()
            .find(|(frame, _)| *frame == Frame::Plain);
        if let Some((first, last)) = plain.and_then(|(_, s)| s.first().zip(s.last())) {
            let grows = last.added / first.added;
            rows.push(Row {
                what: "cost per turn as the session grows (the one-line session, its first and last samples)".into(),
                measured: format!(
                    "{:.2} ms at {} tokens -> {:.2} ms at {} ({grows:.2}x, the conversation {:.1}x)",
                    first.added,
                    thousands(first.tokens),
                    last.added,
                    thousands(last.tokens),
                    last.tokens as f64 / first.tokens as f64
                ),
                target: format!("grows with the new turn: the last within {FLAT_WITHIN}x the first"),
                met: Some(grows <= FLAT_WITHIN),
            });
        }
        rows.extend(plain.and_then(|(_, samples)| Self::compressing_growth(samples)));
        rows
    }

    /// The one-line session's cost per turn between its first and last samples that saved
    /// tokens: turns of one kind, so what it shows is what the conversation's size costs.
    /// Shown beside the judged row, not judged.
    fn compressing_growth(samples: &[TurnSample]) -> Option<Row> {
        let mut compressing = samples.iter().filter(|s| s.saved > 0);
        let first = compressing.next()?;
        let last = compressing.next_back()?;
        Some(Row {
            what: "the same between its first and last compressing samples (turns alike)".into(),
            measured: format!(
                "{:.2} ms at {} tokens -> {:.2} ms at {} ({:.2}x, the conversation {:.1}x)",
                first.added,
                thousands(first.tokens),
                last.added,
                thousands(last.tokens),
                last.added / first.added,
                last.tokens as f64 / first.tokens as f64
            ),
            target: "shown, not judged".into(),
            met: None,
        })
    }
}

fn figures(proxy: &Proxy, upstream: &str, runs: usize) -> Result<(Vec<(String, String)>, Judged)> {
    let mut out = Vec::new();
    let counter = TokenCounter::new(TokenizerKind::O200k);

    // 1. Added latency, a 20k-token conversation no stage changes.
    let plain = prose_conversation(20_000, &counter);
    let body = anthropic_file(&plain)?;
    let n = (runs * 30).max(100);
    for _ in 0..5 {
        post(&proxy.url, MESSAGES, &body, Some("latency"), Kept)?;
    }
    let named = latencies((&proxy.url, upstream), &body, n, (Some("latency"), Kept))?;
    let dp50 = named[2];
    out.push((
        format!(
            "added latency, a {}-token turn needing no compression ({n} requests)",
            thousands(counter.count_conversation(&plain).total)
        ),
        latency_row(named),
    ));
    // 1b. The same body without `x-condense-session`, as the SDKs, Claude Code and Codex send
    // it: the proxy finds its session from the body.
    let unnamed = latencies((&proxy.url, upstream), &body, n, (None, Kept))?;
    out.push((
        format!("added latency, the same turn without the session header ({n} requests)"),
        latency_row(unnamed),
    ));
    // 1c. The same turn from a client that opens a new connection for every request, to the
    // proxy and straight to the upstream alike (the proxy's own connection to the upstream is
    // kept either way).
    out.push((
        format!("added latency, the same turn, the client on a new connection for every request ({n} requests)"),
        latency_row(latencies(
            (&proxy.url, upstream),
            &body,
            n,
            (Some("latency"), Connection::Fresh),
        )?),
    ));

    // 2. One session growing turn by turn to 200k tokens, sent with each frame in turn: a
    // one-line system prompt; as Claude Code sends it; the SDK-like frame as an OpenAI Chat
    // body (the OpenAI SDK, LangChain); as an OpenAI Responses body (Codex); and masking its
    // old tool results (OpenHands).
    let mut sessions = Vec::new();
    let mut plain_session = None;
    for with in [
        Frame::Plain,
        Frame::ClaudeCode,
        Frame::OpenAiChat,
        Frame::Responses,
        Frame::Masking,
    ] {
        let (samples, conv, turns) =
            growing_session((proxy, upstream), runs, &counter, dp50, with)?;
        push_turn_rows(&mut out, &samples, with.label());
        if with == Frame::Plain {
            plain_session = Some((conv, turns));
        }
        sessions.push((with, samples));
    }
    let (conv, i) = plain_session.context("the one-line growing session")?;
    let growing = condense_serve::session::quick_session(
        &anthropic_file(&conv)?,
        condense_serve::Api::Anthropic,
        None,
        (None, None, None),
    )
    .session
    .context("the growing session's id")?;
    let to_200k = stability(&proxy.url, &growing)?;
    out.push((
        format!("cache-stability share ({i} turns to 200k tokens)"),
        stability_row(to_200k),
    ));
    // 2b. The same session carried on past 200k tokens, where context-collapse commits: each
    // commit changes the prompt from the running summary on, so how often it commits is what
    // a prompt cache loses there.
    let mut conv = conv;
    for k in 0..NEAR_THE_WINDOW {
        conv.messages.extend(turn(i + k));
        post(&proxy.url, MESSAGES, &anthropic_file(&conv)?, None, Kept)?;
    }
    let past = stability(&proxy.url, &growing)?;
    out.push((
        format!("cache-stability share, the same session's next {NEAR_THE_WINDOW} turns (past 200k tokens, near the window)"),
        stability_row(std::array::from_fn(|j| past[j] - to_200k[j])),
    ));

    // 3. 32 concurrent sessions.
    let per = (runs * 4).max(10);
    let url = proxy.url.clone();
    let t = Instant::now();
    let threads: Vec<_> = (0..32)
        .map(|s| {
            let (url, body) = (url.clone(), body_for(&plain, s));
            std::thread::spawn(move || -> Result<()> {
                let body = body?;
                for _ in 0..per {
                    post(&url, MESSAGES, &body, Some(&format!("c{s}")), Kept)?;
                }
                Ok(())
            })
        })
        .collect();
    for th in threads {
        th.join()
            .map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
    }
    let secs = t.elapsed().as_secs_f64();
    out.push((
        format!(
            "requests per second, 32 concurrent sessions ({} requests of {} tokens)",
            32 * per,
            thousands(counter.count_conversation(&plain).total)
        ),
        format!("{:.0}", (32 * per) as f64 / secs),
    ));
    let judged = Judged {
        idle_p50: [added(named).0, added(unnamed).0],
        sessions,
    };
    Ok((out, judged))
}

/// One growing turn's figures (each the median of the turn and the four before it).
struct TurnSample {
    /// The conversation's tokens at the turn.
    tokens: usize,
    /// What the proxy added, ms: the time through it less the same body sent straight.
    added: f64,
    /// The same, less the small body's direct time (how the row was measured before).
    small: f64,
    /// One cold count of the turn's request, ms.
    cold: f64,
    /// The tokens the proxy said it saved.
    saved: usize,
}

impl TurnSample {
    /// What the proxy added, in cold counts of the request.
    fn ratio(&self) -> f64 {
        self.added / self.cold
    }
}

/// What a growing session's bodies carry besides their messages.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Frame {
    /// A one-line system prompt, no tools (the bench's first growing session).
    Plain,
    /// A 30 KB system prompt, 20 tool definitions, the session in `metadata.user_id` and the
    /// newest message's last block marked `cache_control` (the mark moving to the new newest
    /// every turn, as a client caching its whole conversation does), as Claude Code sends its
    /// turns (about 14k tokens).
    ClaudeCode,
    /// The same system prompt and tools without the metadata, as an agent on the SDKs sends
    /// them (the proxy finds the session from the system prompt and first user message).
    Sdk,
    /// [`Frame::Sdk`] in an OpenAI Chat Completions body (`/v1/chat/completions`; the system
    /// prompt is the list's first message), as an agent on the OpenAI SDK or LangChain sends it.
    OpenAiChat,
    /// [`Frame::Sdk`] in an OpenAI Responses body (`/v1/responses`; the system prompt is its
    /// `instructions`, each text, call and result an item), as Codex sends it.
    Responses,
    /// [`Frame::Sdk`] with every tool result older than the newest [`MASK_WINDOW`] messages
    /// masked, as OpenHands' observation masking sends its history: each turn edits the one
    /// older message that left the window.
    Masking,
}

/// The messages a [`Frame::Masking`] client leaves unmasked (OpenHands'
/// `attention_window` is 100 events).
const MASK_WINDOW: usize = 100;

impl Frame {
    /// How a growing session's rows say they were sent with this frame (nothing for the
    /// first, one-line session).
    fn label(self) -> &'static str {
        match self {
            Frame::Plain => "",
            Frame::ClaudeCode => ", a Claude Code-like frame, the newest message marked",
            Frame::Sdk => ", an SDK-like frame",
            Frame::OpenAiChat => ", an OpenAI Chat body",
            Frame::Responses => ", an OpenAI Responses body",
            Frame::Masking => {
                ", an SDK-like frame, tool results past the newest 100 messages masked"
            }
        }
    }

    /// Where a body with this frame goes, and the body of `conv`.
    fn request(self, conv: &Conversation) -> Result<(&'static str, Vec<u8>)> {
        Ok(match self {
            Frame::OpenAiChat => ("/v1/chat/completions", crate::gen::openai_file(conv)?),
            Frame::Responses => ("/v1/responses", crate::gen::responses_file(conv)?),
            Frame::ClaudeCode => ("/v1/messages", anthropic_file(&marked_newest(conv))?),
            Frame::Masking => ("/v1/messages", anthropic_file(&masked_past(conv))?),
            _ => ("/v1/messages", anthropic_file(conv)?),
        })
    }
}

/// `conv` with its newest message's last block marked `cache_control`.
fn marked_newest(conv: &Conversation) -> Conversation {
    let mut conv = conv.clone();
    let mark = condense_model::RawJson::from_value(&serde_json::json!({
        "cache_control": {"type": "ephemeral"}
    }));
    let last = conv
        .messages
        .last_mut()
        .and_then(|m| m.content.blocks.last_mut());
    if let Some(extra) = last.and_then(Block::extra_mut) {
        *extra = mark;
    }
    conv
}

/// `conv` with the content of every tool result before its newest [`MASK_WINDOW`] messages
/// replaced by `<MASKED>`.
fn masked_past(conv: &Conversation) -> Conversation {
    let mut conv = conv.clone();
    let old = conv.messages.len().saturating_sub(MASK_WINDOW);
    for m in &mut conv.messages[..old] {
        for block in &mut m.content.blocks {
            if let Block::ToolResult(r) = block {
                r.content = condense_model::Content::string("<MASKED>");
            }
        }
    }
    conv
}

/// An empty conversation with `frame`.
pub(crate) fn frame(frame: Frame) -> Conversation {
    let mut conv = Conversation {
        system: Some(condense_model::Content::string("You are a coding agent.")),
        ..Conversation::default()
    };
    if frame == Frame::Plain {
        return conv;
    }
    conv.system = Some(condense_model::Content::string(
        "You are Claude Code. ".to_string()
            + &"Follow the repository's conventions and explain each change. ".repeat(480),
    ));
    let description = "Runs one step of the task and reports what it did. ".repeat(60);
    let schema = serde_json::json!({"type": "object", "properties": {"arg": {"type": "string"}}});
    conv.tools = (0..20)
        .map(|k| {
            let name = format!("Tool{k}");
            let raw = match frame {
                Frame::OpenAiChat => serde_json::json!({"type": "function", "function": {
                    "name": name, "description": description, "parameters": schema}}),
                Frame::Responses => serde_json::json!({"type": "function", "name": name,
                    "description": description, "parameters": schema}),
                _ => serde_json::json!({
                    "name": name, "description": description, "input_schema": schema}),
            };
            condense_model::ToolDef {
                name,
                raw: condense_model::RawJson::from_value(&raw),
            }
        })
        .collect();
    if frame == Frame::ClaudeCode {
        conv.extra = condense_model::RawJson::from_value(&serde_json::json!({
            "metadata": {"user_id": "user_bench_account_0_session_5f3e9a17-bench"}
        }));
    }
    conv
}

/// A session sent turn by turn until it holds 200k tokens, without `x-condense-session` (as
/// the SDKs, Claude Code and Codex send a turn: the proxy finds the session from the body).
/// Each body carries `with` besides its messages ([`Frame`]). Gives the samples (every 25
/// turns and the last), the conversation and the number of turns.
fn growing_session(
    (proxy, upstream): (&Proxy, &str),
    runs: usize,
    counter: &TokenCounter,
    dp50: f64,
    with: Frame,
) -> Result<(Vec<TurnSample>, Conversation, usize)> {
    let mut conv = frame(with);
    let mut i = 0;
    let mut samples = Vec::new();
    // The Claude Code-like frame's tokens count toward the 200k (the one-line system prompt's
    // few are left out, as the rows measured before it was added were).
    let mut total_tokens = if with != Frame::Plain {
        counter.count_conversation(&conv).total
    } else {
        0
    };
    // Each turn's own request: with the session's resume point, a turn's cost is that of
    // the turn, so a turn is measured once, when it is new (a repeat would resume from itself).
    // What the proxy adds is the time through it less the time of the same body sent straight
    // (a 200k-token body takes the upstream longer to read than the small one above).
    let mut firsts: Vec<f64> = Vec::new();
    // The same, less the small body's direct time (how this row was measured before).
    let mut smalls: Vec<f64> = Vec::new();
    while total_tokens < 200_000 {
        for m in turn(i) {
            total_tokens += counter.count_message(&m);
            conv.messages.push(m);
        }
        i += 1;
        let (path, body) = with.request(&conv)?;
        let t = Instant::now();
        let saved = post(&proxy.url, path, &body, None, Kept)?;
        let via = ms(t);
        let t = Instant::now();
        post(upstream, path, &body, Some("growing"), Kept)?;
        firsts.push(via - ms(t));
        smalls.push(via - dp50);
        if i % 25 == 0 || total_tokens >= 200_000 {
            // The median of this turn and the four before it, and of as many cold counts of
            // this turn's request.
            let mut added = firsts[firsts.len().saturating_sub(5)..].to_vec();
            let mut small = smalls[smalls.len().saturating_sub(5)..].to_vec();
            let mut cold = cold_counts(&conv, runs);
            samples.push(TurnSample {
                tokens: total_tokens,
                added: pct(&mut added, 50),
                small: pct(&mut small, 50),
                cold: pct(&mut cold, 50),
                saved,
            });
        }
    }
    Ok((samples, conv, i))
}

/// A row for each sample of a growing session (`what` says which).
fn push_turn_rows(out: &mut Vec<(String, String)>, samples: &[TurnSample], what: &str) {
    for s in samples {
        out.push((
            format!(
                "turn at {} tokens (session growing turn by turn{what}; median of 5 turns)",
                thousands(s.tokens)
            ),
            format!(
                "{:.2} ms added ({:.2} ms less the small body's direct time), {} tokens saved; one cold count {:.2} ms ({:.2}x)",
                s.added,
                s.small,
                s.saved,
                s.cold,
                s.ratio()
            ),
        ));
    }
}

/// `n` requests of `body` through the proxy (in `session`, or with no session header) and as
/// many straight to the upstream, alternately, each way on `connection`: the p50 and p99 of
/// each, in ms.
fn latencies(
    (proxy, upstream): (&str, &str),
    body: &[u8],
    n: usize,
    (session, connection): (Option<&str>, Connection),
) -> Result<[f64; 4]> {
    let (mut via, mut direct) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let t = Instant::now();
        post(proxy, MESSAGES, body, session, connection)?;
        via.push(ms(t));
        let t = Instant::now();
        post(upstream, MESSAGES, body, Some("latency"), connection)?;
        direct.push(ms(t));
    }
    Ok([
        pct(&mut via, 50),
        pct(&mut via, 99),
        pct(&mut direct, 50),
        pct(&mut direct, 99),
    ])
}

/// What the proxy adds at p50 and p99, from [`latencies`].
fn latency_row(l: [f64; 4]) -> String {
    let [vp50, vp99, dp50, dp99] = l;
    let (p50, p99) = added(l);
    format!(
        "p50 {p50:.2} ms, p99 {p99:.2} ms (through the proxy {vp50:.2} / {vp99:.2}, direct {dp50:.2} / {dp99:.2})"
    )
}

/// What the proxy adds at p50 and p99, from [`latencies`]: through it less straight.
fn added([vp50, vp99, dp50, dp99]: [f64; 4]) -> (f64, f64) {
    (vp50 - dp50, vp99 - dp99)
}

/// `conv` with its first message made unique to session `s` (its own hash session).
fn body_for(conv: &Conversation, s: usize) -> Result<Vec<u8>> {
    let mut c = conv.clone();
    c.system = Some(condense_model::Content::string(format!(
        "You are agent {s}."
    )));
    anthropic_file(&c)
}

/// User and assistant prose only, about `target` tokens: nothing for any stage to do.
fn prose_conversation(target: usize, counter: &TokenCounter) -> Conversation {
    let mut conv = Conversation::default();
    let mut total = 0;
    let mut i = 0;
    while total < target {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        let text: String = (0..40)
            .map(|k| format!("Sentence {k} of message {i} talks about the module and its tests. "))
            .collect();
        let m = Message::new(format!("#{i}"), role, vec![Block::text(text)]);
        total += counter.count_message(&m);
        conv.messages.push(m);
        i += 1;
    }
    if conv
        .messages
        .last()
        .is_some_and(|m| m.role == Role::Assistant)
    {
        conv.messages.push(Message::new(
            format!("#{i}"),
            Role::User,
            vec![Block::text("Go on.")],
        ));
    }
    conv
}

struct Proxy {
    child: Child,
    url: String,
}

impl Proxy {
    /// The release binary serving on a free port of 127.0.0.1 in front of `upstream`, run by
    /// `wrap` when it names a program (a profiler: `valgrind --tool=callgrind`).
    fn start(upstream: &str, store: &std::path::Path, wrap: &[String]) -> Result<Proxy> {
        let bin = crate::process::condense_binary()?;
        let mut command = match wrap.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let mut child = command
            .args([
                "serve",
                "--quiet",
                "--listen",
                "127.0.0.1:0",
                "--anthropic-upstream",
                upstream,
                "--openai-upstream",
                upstream,
                "--store",
            ])
            .arg(store)
            .env("CONDENSE_PLUGIN_PATH", plugin_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting condense serve")?;
        let stderr = child.stderr.take().context("the proxy's stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        // The first line that names the address (a profiler may write lines of its own first).
        let mut last = String::new();
        let url = loop {
            let Some(line) = lines.next().transpose()? else {
                let _ = child.kill();
                bail!("condense serve did not start: {last}");
            };
            if let Some((_, rest)) = line.split_once("listening on ") {
                break rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string();
            }
            last = line;
        };
        // Keep reading so the proxy never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Ok(Proxy { url, child })
    }

    /// The child's peak resident set (`VmHWM`), in KiB, where /proc says it.
    fn peak_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Ends the proxy with SIGINT, as Ctrl-C does, so that a profiler it runs under writes
    /// its figures. The signal goes to the child and to every process under it: a wrapper that
    /// runs the proxy as its own child (`strace -f`, `perf stat`) leaves SIGINT to it and
    /// waits, so the proxy itself must get it (valgrind runs it in its own process). The child
    /// is killed if it cannot be signalled.
    fn interrupt(&mut self) -> Result<()> {
        let pid = self.child.id();
        let mut sent = false;
        for p in std::iter::once(pid).chain(descendants(pid)) {
            let Ok(p) = libc::pid_t::try_from(p) else {
                continue;
            };
            // SAFETY: kill(2) with a pid read from this child's own tree and a valid signal;
            // it touches no memory of this process.
            #[allow(unsafe_code)]
            let rc = unsafe { libc::kill(p, libc::SIGINT) };
            sent |= rc == 0;
        }
        if !sent {
            self.stop();
            bail!("could not interrupt the proxy (pid {pid})");
        }
        self.child.wait()?;
        Ok(())
    }
}

/// Every process under `pid`, children before theirs (from `/proc`; none elsewhere).
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        let tasks = std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten();
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                out.push(child);
                next.push(child);
            }
        }
    }
    out
}

/// `profile-proxy [plain|claude-code|sdk|openai-chat|responses|masking] [FROM_TOKENS] [TURNS] [PAUSE_MS]`: the
/// growing session with that [`Frame`] (default `plain`), sent to a proxy without
/// `x-condense-session` as the real clients send it: first the turn at which it holds `FROM_TOKENS`
/// (default 62,000) in one request, then `TURNS` turns after it (default 10), each `PAUSE_MS` after
/// the one before (default 300), then the proxy is interrupted. `CONDENSE_BENCH_WRAP` names a
/// program to run the proxy under, with its arguments (`valgrind --tool=callgrind
/// --callgrind-out-file=FILE`): the instructions of a turn are those of a run with `TURNS` = 13
/// less one with 3, over 10. With `CONDENSE_BENCH_RECORD=FILE`, the fingerprint of each body the
/// upstream received goes to FILE, a line a turn (two builds that send the same bodies write the
/// same file). The pause lets each turn find what the previous one keeps after its body is sent
/// (under valgrind, a turn sent at once may come before it, and the counts move by about a million
/// from run to run).
pub(crate) fn profile(args: &[String]) -> Result<()> {
    let with = match args.first().map(String::as_str) {
        None | Some("plain") => Frame::Plain,
        Some("claude-code") => Frame::ClaudeCode,
        Some("sdk") => Frame::Sdk,
        Some("openai-chat") => Frame::OpenAiChat,
        Some("responses") => Frame::Responses,
        Some("masking") => Frame::Masking,
        Some(other) => {
            bail!("unknown frame `{other}` (plain, claude-code, sdk, openai-chat, responses, masking)")
        }
    };
    let number = |i: usize, default: usize| -> Result<usize> {
        args.get(i).map_or(Ok(default), |a| {
            a.replace(['_', ','], "")
                .parse()
                .with_context(|| format!("`{a}` is not a number"))
        })
    };
    let (from, turns, pause) = (number(1, 62_000)?, number(2, 10)?, number(3, 300)?);
    let wrap: Vec<String> = std::env::var("CONDENSE_BENCH_WRAP")
        .map(|w| w.split_whitespace().map(String::from).collect())
        .unwrap_or_default();
    let record = std::env::var_os("CONDENSE_BENCH_RECORD").map(PathBuf::from);
    let (tx, received) = std::sync::mpsc::channel();
    let upstream = fake_upstream(record.is_some().then_some(tx))?;
    let mut recorded = String::new();
    let store = tempfile::tempdir()?;
    let mut proxy = Proxy::start(&upstream, store.path(), &wrap)?;
    let counter = TokenCounter::new(TokenizerKind::O200k);
    let mut conv = frame(with);
    let mut tokens = counter.count_conversation(&conv).total;
    let mut i = 0;
    let mut sent = 0;
    while sent <= turns {
        for m in turn(i) {
            tokens += counter.count_message(&m);
            conv.messages.push(m);
        }
        i += 1;
        if tokens < from {
            continue;
        }
        let (path, body) = with.request(&conv)?;
        let t = Instant::now();
        let saved = post(&proxy.url, path, &body, None, Kept)?;
        println!(
            "turn {i}: {} tokens, {} bytes, {:.2} ms, {} tokens saved",
            thousands(tokens),
            thousands(body.len()),
            ms(t),
            thousands(saved)
        );
        if record.is_some() {
            // The upstream had the body before it answered.
            let print = received.recv_timeout(std::time::Duration::from_secs(5))?;
            recorded.push_str(&format!("turn {i}: {print:032x}\n"));
        }
        sent += 1;
        std::thread::sleep(std::time::Duration::from_millis(pause as u64));
    }
    if let Some(file) = record {
        std::fs::write(&file, recorded).with_context(|| file.display().to_string())?;
    }
    proxy.interrupt()
}

/// Turns the growing session is carried on past 200k tokens for the cache-stability share
/// near the window.
const NEAR_THE_WINDOW: usize = 40;

/// A cache-stability row from `cache_stable`, `cache_compared`, `cache_kept` and
/// `cache_previous`.
fn stability_row([stable, compared, kept, previous]: [u64; 4]) -> String {
    format!(
        "{stable} of {compared} turns sent a prefix equal to the previous turn's; {kept} of the \
         {previous} elements the previous turns sent (system, tools, messages: {:.1}%) started \
         the next turn unchanged",
        kept as f64 * 100.0 / previous.max(1) as f64
    )
}

/// The growing session's `cache_stable`, `cache_compared`, `cache_kept` and
/// `cache_previous` so far.
fn stability(url: &str, session: &str) -> Result<[u64; 4]> {
    let v: serde_json::Value = serde_json::from_str(&get(url, "/condense/status")?)?;
    let g = &v["sessions"][session];
    if g.is_null() {
        bail!("/condense/status has no session {session}");
    }
    Ok([
        "cache_stable",
        "cache_compared",
        "cache_kept",
        "cache_previous",
    ]
    .map(|k| g[k].as_u64().unwrap_or(0)))
}

/// Cold counts of `conv` (each with a fresh counter), taken once the proxy has finished the
/// turn just sent: it sends a body before it archives the turn, and a count on the same two
/// cores meanwhile measured up to twice its time. Spread over a few milliseconds, so that one
/// slow spell of the host does not make every count of the median.
fn cold_counts(conv: &Conversation, runs: usize) -> Vec<f64> {
    std::thread::sleep(std::time::Duration::from_millis(20));
    (0..runs.max(5) * 2 + 1)
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            let counter = TokenCounter::new(TokenizerKind::O200k);
            let t = Instant::now();
            let _ = counter.count_conversation(conv);
            ms(t)
        })
        .collect()
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

fn pct(v: &mut [f64], p: usize) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) * p / 100).min(v.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(tokens: usize, added: f64, saved: usize) -> TurnSample {
        TurnSample {
            tokens,
            added,
            small: added,
            cold: 1.0,
            saved,
        }
    }

    #[test]
    fn compressing_growth_compares_the_first_and_last_turns_that_saved_tokens() {
        let samples = [
            sample(13_000, 0.5, 0),
            sample(62_000, 2.0, 1_000),
            sample(140_000, 9.0, 20_000),
            sample(200_000, 3.0, 40_000),
        ];
        let row = Judged::compressing_growth(&samples).map(|r| (r.measured, r.met));
        assert_eq!(
            row,
            Some((
                "2.00 ms at 62,000 tokens -> 3.00 ms at 200,000 (1.50x, the conversation 3.2x)"
                    .to_string(),
                None
            ))
        );
        // Fewer than two compressing turns: nothing to compare.
        assert!(Judged::compressing_growth(&samples[..2]).is_none());
    }
}
