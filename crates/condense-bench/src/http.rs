//! HTTP/1.1 on loopback for the `condense serve` figures: a fake upstream and a client.
//!
//! Both keep their connections alive, as the model APIs and their SDKs do (the `anthropic` and
//! `openai` SDKs keep a pool; so does the proxy's own client towards the upstream). A request
//! through the proxy then pays what the proxy does and one more loopback hop, not two TCP
//! handshakes and a thread start at the upstream per request, which no real client pays.
//! Until 2026-12-06 both opened a connection for every request; [`Connection::Fresh`] still
//! gives a client that does (one row measures it).
//!
//! ```text
//! let upstream = fake_upstream(None)?;            // "http://127.0.0.1:PORT"
//! let saved = post(&upstream, "/v1/messages", &body, Some("s1"), Connection::Kept)?;
//! ```

use anyhow::{bail, Context, Result};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::Sender;

/// What the fake upstream answers every request with.
const UPSTREAM_ANSWER: &str = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#;

/// How a client request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Connection {
    /// On this thread's open connection to the address (opened the first time, and again when
    /// the server closed it meanwhile).
    Kept,
    /// On a connection of its own, closed after the answer (`connection: close`).
    Fresh,
}

/// A fake model API on 127.0.0.1 (a thread per connection, answering a small JSON body to
/// every request, keeping the connection unless the request says `connection: close`); its
/// URL. With `record`, the fingerprint of every body it receives goes there.
pub(crate) fn fake_upstream(record: Option<Sender<u128>>) -> Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let record = record.clone();
            std::thread::spawn(move || {
                let _ = answer(stream, record);
            });
        }
    });
    Ok(url)
}

/// Answers the requests of one connection until the client closes it or asks to.
fn answer(stream: TcpStream, record: Option<Sender<u128>>) -> Result<()> {
    // One write per answer, sent at once: otherwise Nagle holds the answer's tail until the
    // client acknowledges its head, which a client on a kept connection delays (40 ms).
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = BufWriter::new(stream);
    loop {
        let Some(head) = read_head(&mut reader)? else {
            return Ok(());
        };
        let mut body = vec![0; head.length];
        reader.read_exact(&mut body)?;
        if let Some(record) = &record {
            let _ = record.send(condense_model::fingerprint::fingerprint(&body));
        }
        let close = if head.close {
            "connection: close\r\n"
        } else {
            ""
        };
        write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{close}\r\n{UPSTREAM_ANSWER}",
            UPSTREAM_ANSWER.len()
        )?;
        writer.flush()?;
        if head.close {
            return Ok(());
        }
    }
}

/// The head of a request or an answer.
struct Head {
    /// The request or status line.
    first: String,
    /// `content-length` (0 when absent).
    length: usize,
    /// `x-condense-tokens-saved` (0 when absent).
    saved: usize,
    /// `connection: close`.
    close: bool,
}

/// The head `reader` is at; `None` at the end of the stream (the peer closed the connection
/// between two messages).
fn read_head(reader: &mut impl BufRead) -> Result<Option<Head>> {
    let mut first = String::new();
    if reader.read_line(&mut first)? == 0 {
        return Ok(None);
    }
    let mut head = Head {
        first,
        length: 0,
        saved: 0,
        close: false,
    };
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim();
            match k.trim().to_ascii_lowercase().as_str() {
                "content-length" => head.length = v.parse().unwrap_or(0),
                "x-condense-tokens-saved" => head.saved = v.parse().unwrap_or(0),
                "connection" => head.close = v.eq_ignore_ascii_case("close"),
                _ => {}
            }
        }
    }
    Ok(Some(head))
}

thread_local! {
    /// This thread's kept connections, by address.
    static KEPT: RefCell<HashMap<String, BufReader<TcpStream>>> = RefCell::default();
}

/// POSTs `body` (an API body) to `path` of `url`, naming the session in `x-condense-session`
/// when `session` is given (`None`: the proxy finds it from the body, as the SDKs, Claude Code
/// and Codex send a request); the tokens the proxy says it saved. An answer other than 200 is
/// an error.
pub(crate) fn post(
    url: &str,
    path: &str,
    body: &[u8],
    session: Option<&str>,
    connection: Connection,
) -> Result<usize> {
    let addr = url.trim_start_matches("http://");
    let named = session.map_or_else(String::new, |s| format!("x-condense-session: {s}\r\n"));
    let close = match connection {
        Connection::Kept => "",
        Connection::Fresh => "connection: close\r\n",
    };
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nx-api-key: bench\r\nauthorization: Bearer bench\r\nanthropic-version: 2023-06-01\r\n{named}content-length: {}\r\n{close}\r\n",
        body.len()
    );
    let (answer, _) = exchange(addr, &head, body, connection)?;
    if !answer.first.contains(" 200") {
        bail!("{url}{path}: {}", answer.first.trim());
    }
    Ok(answer.saved)
}

/// GETs `path` of `url`: the answer's body.
pub(crate) fn get(url: &str, path: &str) -> Result<String> {
    let addr = url.trim_start_matches("http://");
    let head = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\n\r\n");
    let (_, body) = exchange(addr, &head, &[], Connection::Kept)?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// Sends one request and reads its answer: its head and body. A kept connection the server
/// closed since its last answer (nothing of the answer read) is opened again, once.
fn exchange(
    addr: &str,
    head: &str,
    body: &[u8],
    connection: Connection,
) -> Result<(Head, Vec<u8>)> {
    let kept = match connection {
        Connection::Kept => KEPT.with(|k| k.borrow_mut().remove(addr)),
        Connection::Fresh => None,
    };
    let reused = kept.is_some();
    let mut reader = match kept {
        Some(reader) => reader,
        None => open(addr)?,
    };
    let answer = match send(&mut reader, head, body)? {
        Some(answer) => answer,
        // The server closed the kept connection: the request went nowhere.
        None if reused => {
            reader = open(addr)?;
            send(&mut reader, head, body)?
                .with_context(|| format!("{addr} closed the connection"))?
        }
        None => bail!("{addr} closed the connection without an answer"),
    };
    let mut answer_body = vec![0; answer.length];
    reader.read_exact(&mut answer_body)?;
    if connection == Connection::Kept && !answer.close {
        KEPT.with(|k| k.borrow_mut().insert(addr.to_string(), reader));
    }
    Ok((answer, answer_body))
}

/// A new connection to `addr`, with Nagle off (a request's head and body go as they are
/// written).
fn open(addr: &str) -> Result<BufReader<TcpStream>> {
    let stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    stream.set_nodelay(true)?;
    Ok(BufReader::new(stream))
}

/// Writes a request on `reader`'s connection and reads the answer's head; `None` when the
/// connection turned out closed before any of it (a write refused, or the end of the stream).
fn send(reader: &mut BufReader<TcpStream>, head: &str, body: &[u8]) -> Result<Option<Head>> {
    let stream = reader.get_mut();
    if stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body))
        .is_err()
    {
        return Ok(None);
    }
    match read_head(reader) {
        Ok(head) => Ok(head),
        // A reset on a connection the server had closed.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn kept_connections_are_reused_and_reopened_once_closed() {
        let (tx, rx) = std::sync::mpsc::channel();
        let upstream = fake_upstream(Some(tx)).unwrap();
        let addr = upstream.trim_start_matches("http://").to_string();
        for body in [&b"{\"a\":1}"[..], b"{\"a\":2}"] {
            assert_eq!(
                post(&upstream, "/v1/messages", body, None, Connection::Kept).unwrap(),
                0
            );
        }
        let local = KEPT.with(|k| {
            k.borrow()
                .get(&addr)
                .map(|r| r.get_ref().local_addr().unwrap())
        });
        // The same connection took both: still kept, and a third request goes on it too.
        assert!(local.is_some());
        post(
            &upstream,
            "/v1/messages",
            b"{}",
            Some("s"),
            Connection::Kept,
        )
        .unwrap();
        let again = KEPT.with(|k| {
            k.borrow()
                .get(&addr)
                .map(|r| r.get_ref().local_addr().unwrap())
        });
        assert_eq!(again, local);
        // A fresh request is not kept, and the upstream saw every body.
        post(&upstream, "/v1/messages", b"{}", None, Connection::Fresh).unwrap();
        assert_eq!(rx.try_iter().count(), 4);

        // A server that closes each connection after one answer (without saying so): the kept
        // connection is found closed at the next request and opened again.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let head = read_head(&mut reader).unwrap().unwrap();
                let mut body = vec![0; head.length];
                reader.read_exact(&mut body).unwrap();
                let mut w = stream;
                write!(
                    w,
                    "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-condense-tokens-saved: 7\r\n\r\nok"
                )
                .unwrap();
            }
        });
        for _ in 0..3 {
            assert_eq!(
                post(&url, "/v1/messages", b"{}", None, Connection::Kept).unwrap(),
                7
            );
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn an_answer_other_than_200_is_an_error() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                read_head(&mut reader).unwrap();
                let mut w = stream;
                write!(
                    w,
                    "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                )
                .unwrap();
            }
        });
        let err = post(&url, "/v1/messages", b"", None, Connection::Kept).unwrap_err();
        assert!(err.to_string().contains("502 Bad Gateway"), "{err}");
    }
}
