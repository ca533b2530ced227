//! Test helpers: a scripted HTTP/1.1 server on 127.0.0.1 and message builders.
#![allow(dead_code)]

use condense_model::{Block, Content, Message, RawJson, Role, ToolResult, ToolUse};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted answer.
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn json(status: u16, body: serde_json::Value) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
}

/// What the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Lower-cased names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("request body is JSON")
    }
}

/// Answers one connection per scripted reply, in order, then stops listening.
pub struct Server {
    pub url: String,
    recorded: Arc<Mutex<Vec<Recorded>>>,
}

impl Server {
    pub fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let rec = Arc::clone(&recorded);
        std::thread::spawn(move || {
            for reply in replies {
                let Ok((mut stream, _)) = listener.accept() else {
                    return;
                };
                stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut line = String::new();
                reader.read_line(&mut line).ok();
                let mut parts = line.split_whitespace();
                let method = parts.next().unwrap_or("").to_string();
                let path = parts.next().unwrap_or("").to_string();
                let mut headers = Vec::new();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                    }
                }
                let len = headers
                    .iter()
                    .find(|(k, _)| k == "content-length")
                    .and_then(|(_, v)| v.parse::<usize>().ok())
                    .unwrap_or(0);
                let mut body = vec![0; len];
                reader.read_exact(&mut body).ok();
                rec.lock().unwrap().push(Recorded {
                    method,
                    path,
                    headers,
                    body: String::from_utf8_lossy(&body).into_owned(),
                });
                let mut out = format!(
                    "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                    reply.status,
                    reply.body.len()
                );
                for (k, v) in &reply.headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                out.push_str(&reply.body);
                stream.write_all(out.as_bytes()).ok();
                stream.flush().ok();
            }
        });
        Server { url, recorded }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.recorded.lock().unwrap().clone()
    }
}

pub fn text(id: &str, role: Role, text: &str) -> Message {
    Message::new(id, role, vec![Block::text(text)])
}

pub fn user(id: &str, t: &str) -> Message {
    text(id, Role::User, t)
}

pub fn assistant(id: &str, t: &str) -> Message {
    text(id, Role::Assistant, t)
}

/// An assistant message with a text and one tool call.
pub fn call(id: &str, say: &str, tool_id: &str, name: &str, input: serde_json::Value) -> Message {
    let mut blocks = Vec::new();
    if !say.is_empty() {
        blocks.push(Block::text(say));
    }
    blocks.push(Block::ToolUse(ToolUse {
        id: tool_id.into(),
        name: name.into(),
        input: RawJson::from_value(&input),
        extra: RawJson::default(),
    }));
    Message::new(id, Role::Assistant, blocks)
}

/// A user message with one tool result.
pub fn result(id: &str, tool_id: &str, out: &str, is_error: Option<bool>) -> Message {
    Message::new(
        id,
        Role::User,
        vec![Block::ToolResult(ToolResult {
            tool_use_id: tool_id.into(),
            content: Content::string(out),
            is_error,
            extra: RawJson::default(),
        })],
    )
}

/// A message as a Claude Code sub-agent line (`isSidechain: true` in its envelope).
pub fn sidechain(mut message: Message) -> Message {
    message.envelope = RawJson::from_value(&serde_json::json!({"isSidechain": true}));
    message
}

/// The shipped real Claude Code session (`examples/claude-code-session.jsonl`: an orchestrator
/// building a TODO app through sub-agents), read with `condense_formats`.
pub fn real_transcript() -> condense_model::Conversation {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/claude-code-session.jsonl"
    );
    let bytes = std::fs::read(path).unwrap();
    let doc = condense_formats::read(&bytes, path, &Default::default()).unwrap();
    doc.conversations()[0].clone()
}

/// Paths the session wrote or edited, from its `Write`/`Edit`/`MultiEdit` calls.
pub fn written_paths(messages: &[Message]) -> std::collections::BTreeSet<String> {
    messages
        .iter()
        .flat_map(|m| m.tool_uses())
        .filter(|tu| matches!(tu.name.as_str(), "Write" | "Edit" | "MultiEdit"))
        .filter_map(|tu| {
            tu.input_object()?
                .get("file_path")?
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// The text of one `## ` section, heading included, trailing blank lines trimmed.
pub fn section<'a>(summary: &'a str, heading: &str) -> &'a str {
    let head = format!("## {heading}\n");
    let start = if summary.starts_with(&head) {
        0
    } else {
        let at = summary.find(&format!("\n{head}"));
        at.unwrap_or_else(|| panic!("no {heading} in\n{summary}")) + 1
    };
    let rest = &summary[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    rest[..end].trim_end()
}

/// Whether cutting at `split` keeps every tool call with its result (spans are cut between
/// turns).
pub fn between_turns(msgs: &[Message], split: usize) -> bool {
    let (a, b) = msgs.split_at(split);
    let calls: Vec<&str> = a
        .iter()
        .flat_map(|m| m.tool_uses())
        .map(|t| t.id.as_str())
        .collect();
    !b.iter()
        .flat_map(|m| m.tool_results())
        .any(|r| calls.contains(&r.tool_use_id.as_str()))
}

/// The first cut at or after `at` that is between turns.
pub fn turn_split(msgs: &[Message], at: usize) -> usize {
    (at..msgs.len())
        .find(|s| between_turns(msgs, *s))
        .unwrap_or(msgs.len())
}
