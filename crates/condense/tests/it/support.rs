//! Shared helpers: run the binary, find fixtures and test plugins.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_condense"))
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixture(rel: &str) -> PathBuf {
    repo().join("tests/fixtures").join(rel)
}

/// A shipped plugin built by `cargo xtask plugins`.
pub fn built_plugin(name: &str) -> PathBuf {
    let path = bin()
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("plugins")
        .join(condense_host::discover::library_file_name(name));
    assert!(
        path.is_file(),
        "{} missing: run `cargo xtask plugins`",
        path.display()
    );
    path
}

/// The folder `cargo xtask plugins` puts test-only plugins in.
pub fn test_plugin(name: &str) -> PathBuf {
    let target = bin()
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let file = condense_host::discover::library_file_name(name);
    let path = target.join("test-plugins").join(file);
    assert!(
        path.is_file(),
        "{} missing: run `cargo xtask plugins` (the README's test command does)",
        path.display()
    );
    path
}

/// Every shared transcript copied into the repo.
pub fn transcripts() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let dir = fixture("transcripts");
    for entry in std::fs::read_dir(&dir).expect("tests/fixtures/transcripts") {
        let sub = entry.unwrap().path();
        if !sub.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&sub).unwrap() {
            let p = f.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if !name.starts_with("UPSTREAM") {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(
        out.len() >= 7,
        "expected the shared transcripts in {}",
        dir.display()
    );
    out
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Copies the folder `from` into `to`, recursively (a fixture store to a scratch place).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let p = entry.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

/// `condense expand OUT --store STORE --out BACK` succeeds and BACK is `expected`, byte for byte.
pub fn assert_expands_to(out: &str, store: &str, back: &str, expected: &[u8]) {
    let run = condense(&["expand", out, "--store", store, "--out", back]);
    assert_eq!(run.code, 0, "{out}: {}", run.stderr);
    assert!(
        std::fs::read(back).unwrap() == expected,
        "{out}: not the original"
    );
}

pub fn condense(args: &[&str]) -> Run {
    condense_in(args, None)
}

pub fn condense_in(args: &[&str], dir: Option<&Path>) -> Run {
    condense_env(args, &[], dir)
}

impl Run {
    /// Asserts the run failed with `code` and said exactly one line on stderr.
    pub fn one_line_failure(&self, code: i32) -> &str {
        assert_eq!(self.code, code, "stderr: {}", self.stderr);
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "expected one line, got: {}", self.stderr);
        assert!(
            !self.stderr.contains("panicked at") && !self.stderr.contains("RUST_BACKTRACE"),
            "{}",
            self.stderr
        );
        lines[0]
    }
}

/// JSON equality for JSON and JSONL files (key order free).
pub fn json_values(bytes: &[u8]) -> Vec<serde_json::Value> {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) {
        return vec![v];
    }
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("JSONL line"))
        .collect()
}

/// A request the local HTTP server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Lower-cased names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("request body is JSON")
    }
}

/// The first line and the headers (names lower-cased) of an HTTP/1.1 message; `None` at the
/// end of the stream.
pub fn read_head(reader: &mut impl BufRead) -> Option<(String, Vec<(String, String)>)> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
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
    Some((line, headers))
}

/// The value of header `name` (lower-case) in `headers`.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// One HTTP/1.1 request (a `content-length` body); `None` at the end of the stream.
pub fn read_request(reader: &mut impl BufRead) -> Option<Received> {
    let (line, headers) = read_head(reader)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let len = header(&headers, "content-length").map_or(0, |v| v.parse().unwrap_or(0));
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok();
    Some(Received {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// An HTTP/1.1 server on 127.0.0.1 answering every request with `answer(request)` (status,
/// body), one request per connection, until the test ends.
pub struct LocalServer {
    pub url: String,
    received: std::sync::Arc<std::sync::Mutex<Vec<Received>>>,
}

impl LocalServer {
    pub fn start(answer: impl Fn(&Received) -> (u16, String) + Send + 'static) -> LocalServer {
        use std::io::{BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let rec = std::sync::Arc::clone(&received);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                stream
                    .set_read_timeout(Some(std::time::Duration::from_secs(10)))
                    .ok();
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let Some(request) = read_request(&mut reader) else {
                    continue;
                };
                let (status, reply) = answer(&request);
                rec.lock().unwrap().push(request);
                let out = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                    reply.len()
                );
                stream.write_all(out.as_bytes()).ok();
                stream.flush().ok();
            }
        });
        LocalServer { url, received }
    }

    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// Runs condense with extra environment variables.
pub fn condense_env(args: &[&str], env: &[(&str, &str)], dir: Option<&Path>) -> Run {
    let mut cmd = Command::new(bin());
    cmd.args(args).env_remove("CONDENSE_PLUGIN_PATH");
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let out: Output = cmd.output().expect("run condense");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
