//! What the `condense serve` tests share: a fake upstream on 127.0.0.1 that records what it
//! receives and answers as each test scripts it (JSON, or SSE events sent one at a time, held
//! or cut), the proxy as a child process, and a small HTTP/1.1 client that reads chunked
//! answers frame by frame.

use crate::support::{bin, header, read_head, Received};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a test waits for something that must happen (a bound, not a timing assertion).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// What the fake upstream answers.
pub enum Reply {
    Json(u16, String),
    /// SSE events, each written as its own chunk; before each event after the first, waits for
    /// `gate` (when set) so a test can prove the first reached the client first; `cut`: the
    /// connection closes before the last chunk.
    Sse {
        events: Vec<String>,
        gate: Option<Arc<Mutex<mpsc::Receiver<()>>>>,
        cut: bool,
    },
}

pub struct Upstream {
    pub url: String,
    received: Arc<Mutex<Log>>,
}

/// What the fake upstream received.
#[derive(Default)]
struct Log {
    /// Each request with its body's exact bytes (`Received::body` is lossy text), in the order
    /// their bodies were read whole.
    requests: Vec<(Received, Vec<u8>)>,
    /// In the order the upstream accepted their connections: each one's index in `requests`
    /// once its body is in.
    accepted: Vec<Option<usize>>,
}

impl Upstream {
    /// Starts the fake; `answer(request, n)` where `n` counts the requests before it.
    pub fn start(answer: impl Fn(&Received, usize) -> Reply + Send + Sync + 'static) -> Upstream {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Log::default()));
        let rec = Arc::clone(&received);
        let answer = Arc::new(answer);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                // Numbered here, on the one accepting thread: the kernel queues connections in
                // the order their handshakes completed, whichever thread then runs first.
                let slot = {
                    let mut log = rec.lock().unwrap();
                    log.accepted.push(None);
                    log.accepted.len() - 1
                };
                let (rec, answer) = (Arc::clone(&rec), Arc::clone(&answer));
                std::thread::spawn(move || serve_one(stream, slot, &rec, answer.as_ref()));
            }
        });
        Upstream { url, received }
    }

    /// The requests in the order their connections reached the upstream, which a large body
    /// read after a small later one does not change. The proxy opens a connection only once it
    /// holds the session's turn (it keeps it until the body is handed over), so for one
    /// session this is the order it sent them in. The order in which the fake's threads then
    /// read the heads is the scheduler's: a loaded machine ran the later one's first.
    pub fn in_arrival_order(&self) -> Vec<Received> {
        let log = self.received.lock().unwrap();
        log.accepted
            .iter()
            .filter_map(|i| i.map(|i| log.requests[i].0.clone()))
            .collect()
    }

    pub fn requests(&self) -> Vec<Received> {
        let log = self.received.lock().unwrap();
        log.requests.iter().map(|(req, _)| req.clone()).collect()
    }

    /// The exact bytes of each body received.
    pub fn raw_bodies(&self) -> Vec<Vec<u8>> {
        let log = self.received.lock().unwrap();
        log.requests.iter().map(|(_, raw)| raw.clone()).collect()
    }
}

fn serve_one(
    mut stream: TcpStream,
    slot: usize,
    rec: &Mutex<Log>,
    answer: &(dyn Fn(&Received, usize) -> Reply + Send + Sync),
) {
    stream.set_read_timeout(Some(PATIENCE)).ok();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let Some((line, headers)) = read_head(&mut reader) else {
        return;
    };
    let len = header(&headers, "content-length").map_or(0, |v| v.parse().unwrap_or(0));
    let mut raw = vec![0; len];
    reader.read_exact(&mut raw).ok();
    let mut parts = line.split_whitespace();
    let request = Received {
        method: parts.next().unwrap_or("").to_string(),
        path: parts.next().unwrap_or("").to_string(),
        headers,
        body: String::from_utf8_lossy(&raw).into_owned(),
    };
    let n = {
        let mut log = rec.lock().unwrap();
        log.requests.push((request.clone(), raw));
        let n = log.requests.len() - 1;
        log.accepted[slot] = Some(n);
        n
    };
    match answer(&request, n) {
        Reply::Json(status, reply) => {
            let out = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\nrequest-id: req_fake\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
            stream.write_all(out.as_bytes()).ok();
        }
        Reply::Sse { events, gate, cut } => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).ok();
            for (i, e) in events.iter().enumerate() {
                if i > 0 {
                    if let Some(g) = &gate {
                        g.lock().unwrap().recv_timeout(PATIENCE).ok();
                    }
                }
                let chunk = format!("{:x}\r\n{e}\r\n", e.len());
                stream.write_all(chunk.as_bytes()).ok();
                stream.flush().ok();
            }
            if !cut {
                stream.write_all(b"0\r\n\r\n").ok();
            }
        }
    }
    stream.flush().ok();
    stream.shutdown(std::net::Shutdown::Both).ok();
}

/// `condense serve` as a child process on a free port, pointed at `upstream` for both APIs.
pub struct Serve {
    child: Child,
    pub url: String,
    pub store: tempfile::TempDir,
    log: Arc<Mutex<String>>,
}

impl Serve {
    pub fn start(upstream: &str, extra: &[&str]) -> Serve {
        let store = tempfile::tempdir().unwrap();
        let mut child = Command::new(bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--store"])
            .arg(store.path())
            .args([
                "--anthropic-upstream",
                upstream,
                "--openai-upstream",
                upstream,
            ])
            .args(extra)
            .env_remove("CONDENSE_PLUGIN_PATH")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if let Some(rest) = line.split_once("listening on ").map(|(_, r)| r) {
                    let url = rest.split_whitespace().next().unwrap_or("").to_string();
                    tx.send(url).ok();
                }
                let mut l = sink.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let url = rx.recv_timeout(PATIENCE).unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("condense serve did not start: {}", log.lock().unwrap())
        });
        Serve {
            child,
            url,
            store,
            log,
        }
    }

    /// `GET /condense/status`, as JSON.
    pub fn status(&self) -> serde_json::Value {
        request(&self.url, "GET", "/condense/status", &[], b"", |_| {}).json()
    }

    /// Everything the proxy wrote on stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits until the proxy has taken in a first request: it is in flight (`in_flight` of
    /// `/condense/status`: its body in, no answer yet), or already answered (counted in the
    /// totals before it leaves the flight, so no moment between the two is missed).
    pub fn wait_taken_in(&self) {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let status = self.status();
            let in_flight = status["in_flight"].as_u64().unwrap_or(0);
            let answered = status["totals"]["requests"].as_u64().unwrap_or(0);
            if in_flight + answered > 0 {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no request taken in: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until the log holds `n` lines containing `needle` (log lines are written after
    /// the answer's headers are sent).
    pub fn wait_log(&self, needle: &str, n: usize) -> String {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let log = self.log();
            if log.matches(needle).count() >= n || std::time::Instant::now() > deadline {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Serve {
    /// Sends the proxy `signal` (`libc::SIGTERM`, `libc::SIGINT`), as `kill` does (without
    /// needing procps' `kill` on the machine).
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) only sends a signal to the child this test started and still holds
        // (not yet waited for, so its pid is not reused); it touches no memory.
        #[allow(unsafe_code)]
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(sent, 0, "kill({pid}, {signal}) failed");
    }

    /// The proxy's exit status, once it has exited (waited for at most [`PATIENCE`]).
    pub fn exit_status(&mut self) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the proxy did not exit: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An answer as the client read it.
#[derive(Debug, Default)]
pub struct Answer {
    /// 0: the connection closed before a status line.
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body ended as announced (its length, or the last chunk).
    pub complete: bool,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.text()))
    }
}

/// Sends one request and reads the answer, calling `on_chunk` with each chunk of a chunked
/// body as it arrives.
pub fn request(
    url: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    on_chunk: impl FnMut(&[u8]),
) -> Answer {
    read_answer(send(url, method, path, headers, body), on_chunk)
}

/// Sends one request (`content-length` is added); the answer is then read with
/// [`read_answer`].
pub fn send(
    url: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> TcpStream {
    let addr = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).ok();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).ok();
    stream
}

/// Reads the answer to a request [`send`] sent.
pub fn read_answer(stream: TcpStream, mut on_chunk: impl FnMut(&[u8])) -> Answer {
    let mut reader = BufReader::new(stream);
    let Some((line, headers)) = read_head(&mut reader) else {
        return Answer::default();
    };
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut answer = Answer {
        status,
        headers,
        ..Answer::default()
    };
    let chunked = answer
        .header("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"));
    if chunked {
        loop {
            let mut size = String::new();
            if reader.read_line(&mut size).unwrap_or(0) == 0 {
                break;
            }
            let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
                break;
            };
            if n == 0 {
                answer.complete = true;
                break;
            }
            let mut chunk = vec![0; n + 2];
            if reader.read_exact(&mut chunk).is_err() {
                break;
            }
            chunk.truncate(n);
            on_chunk(&chunk);
            answer.body.extend(chunk);
        }
    } else if let Some(n) = answer.header("content-length").and_then(|v| v.parse().ok()) {
        let mut body = vec![0; n];
        answer.complete = reader.read_exact(&mut body).is_ok();
        answer.body = body;
    } else {
        reader.read_to_end(&mut answer.body).ok();
        answer.complete = true;
    }
    answer
}

pub fn post(url: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    request(url, "POST", path, headers, body, |_| {})
}

/// An Anthropic Messages answer.
pub fn anthropic_answer(text: &str) -> String {
    serde_json::json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
        "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 3}
    })
    .to_string()
}

/// An OpenAI Chat Completions answer.
pub fn openai_answer(text: &str) -> String {
    serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    })
    .to_string()
}

/// An OpenAI Responses answer (`/v1/responses`): one assistant `message` item with `text`.
pub fn responses_answer(text: &str) -> String {
    responses_object(text, "completed").to_string()
}

/// The Responses API's response object, `status` as given.
fn responses_object(text: &str, status: &str) -> serde_json::Value {
    serde_json::json!({
        "id": "resp_1", "object": "response", "created_at": 1_700_000_000, "model": "gpt-5",
        "status": status, "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
        "output": [{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "usage": {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0}}
    })
}

/// OpenAI's streamed Responses answer with `text`: named events, each with its sequence number.
pub fn responses_events(text: &str) -> Vec<String> {
    let ev = |n: usize, name: &str, mut data: serde_json::Value| {
        data["type"] = name.into();
        data["sequence_number"] = n.into();
        format!("event: {name}\ndata: {data}\n\n")
    };
    vec![
        ev(
            0,
            "response.created",
            serde_json::json!({"response": responses_object("", "in_progress")}),
        ),
        ev(
            1,
            "response.output_text.delta",
            serde_json::json!({"item_id": "msg_1", "output_index": 0, "content_index": 0,
                "delta": text, "logprobs": []}),
        ),
        ev(
            2,
            "response.completed",
            serde_json::json!({"response": responses_object(text, "completed")}),
        ),
    ]
}

/// Anthropic's streamed answer with `text`, one SSE event per element.
pub fn anthropic_events(text: &str) -> Vec<String> {
    let ev = |name: &str, data: serde_json::Value| format!("event: {name}\ndata: {data}\n\n");
    vec![
        ev(
            "message_start",
            serde_json::json!({"type": "message_start", "message": {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        ),
        ev(
            "content_block_start",
            serde_json::json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ev(
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        ),
        ev(
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": 0}),
        ),
        ev(
            "message_delta",
            serde_json::json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 3}}),
        ),
        ev("message_stop", serde_json::json!({"type": "message_stop"})),
    ]
}

/// OpenAI's streamed chat answer with `text`.
pub fn openai_events(text: &str) -> Vec<String> {
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        let c = serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "gpt-4o", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    vec![
        chunk(
            serde_json::json!({"role": "assistant", "content": ""}),
            serde_json::Value::Null,
        ),
        chunk(
            serde_json::json!({"content": text}),
            serde_json::Value::Null,
        ),
        chunk(serde_json::json!({}), serde_json::json!("stop")),
        "data: [DONE]\n\n".to_string(),
    ]
}

/// What a proxy in front of an upstream answering "ok" made of `bodies`, sent as one
/// session's turns (Anthropic Messages, `x-condense-session: session`).
pub(crate) struct ProxyTurns {
    /// Its log line of each request, in order.
    pub(crate) lines: Vec<String>,
    /// The body the upstream got for each request.
    pub(crate) sent: Vec<String>,
}

/// Sends `bodies` through a new proxy as the turns of `session` ([`ProxyTurns`]). Every one is
/// answered 200, every one after the first starts from the one before (`resumed`), and the
/// last body sent expands to the last one given.
pub(crate) fn through_the_proxy(session: &str, bodies: &[Vec<u8>]) -> ProxyTurns {
    use crate::known_lists::assert_expands_from;
    use crate::serve::ANTHROPIC_HEADERS;
    let up = Upstream::start(|_, _| Reply::Json(200, anthropic_answer("ok")));
    let serve = Serve::start(&up.url, &[]);
    let mut headers = ANTHROPIC_HEADERS.to_vec();
    headers.push(("x-condense-session", session));
    for body in bodies {
        let answer = post(&serve.url, "/v1/messages", &headers, body);
        assert_eq!(answer.status, 200, "{}", serve.log());
    }
    // One log line a request, written once the answer is sent: waited for.
    let needle = format!("session={session} model=");
    let log = serve.wait_log(&needle, bodies.len());
    let lines: Vec<String> = log
        .lines()
        .filter(|l| l.contains(&needle))
        .map(String::from)
        .collect();
    assert_eq!(lines.len(), bodies.len(), "{log}");
    for (turn, line) in lines.iter().enumerate() {
        assert_eq!(line.contains("resumed"), turn > 0, "turn {turn}: {line}");
    }
    let sent: Vec<String> = up.requests().into_iter().map(|r| r.body).collect();
    if let (Some(last), Some(client)) = (sent.last(), bodies.last()) {
        assert_expands_from(last.as_bytes(), serve.store.path(), session, client);
    }
    ProxyTurns { lines, sent }
}
