//! The proxy's listener speaks HTTP/2 (h2c, prior knowledge) as well as HTTP/1.1: hyper's
//! client with HTTP/2 only sends a compressed route's request and `GET /condense/status` on one
//! connection, through the proxy in this process (a pipeline without stages: no plugin is
//! needed) to a recording fake upstream on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use condense_host::Pipeline;
use condense_serve::{LocalBackend, Pipelines, Proxy, Server, Settings};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};

const ANSWER: &str = r#"{"id":"msg_01","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}]}"#;

/// An HTTP/1.1 upstream answering [`ANSWER`] to every request; records each body.
fn upstream() -> (String, Arc<Mutex<Vec<Vec<u8>>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let rec = Arc::clone(&bodies);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    if k.trim().eq_ignore_ascii_case("content-length") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).ok();
            rec.lock().unwrap().push(body);
            let out = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{ANSWER}",
                ANSWER.len()
            );
            stream.write_all(out.as_bytes()).ok();
        }
    });
    (url, bodies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_is_served() {
    let (up, bodies) = upstream();
    let store = tempfile::tempdir().unwrap();
    let pipeline = Pipeline::parse("[model]\ncontext_window = 200000\n", "<test>", None).unwrap();
    let settings = Settings {
        anthropic_upstream: up.clone(),
        openai_upstream: up,
        ..Settings::default()
    };
    let backend = LocalBackend::new(condense_store::Store::open(store.path()).unwrap());
    let mut proxy = Proxy::new(
        settings,
        Pipelines::new(pipeline).unwrap(),
        Arc::new(backend),
    )
    .unwrap();
    proxy.log = false;
    let server = Server::bind("127.0.0.1:0", proxy).await.unwrap();
    let addr = server.local_addr().unwrap();
    tokio::spawn(server.run());

    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(conn);
    let body = r#"{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#;
    let req = http::Request::post(format!("http://{addr}/v1/messages"))
        .header("content-type", "application/json")
        .header("x-api-key", "k")
        .header("x-condense-session", "h2")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-condense-tokens-saved"], "0");
    let got = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(got, ANSWER.as_bytes());
    assert_eq!(*bodies.lock().unwrap(), [body.as_bytes().to_vec()]);

    // A second stream on the same connection.
    let req = http::Request::get(format!("http://{addr}/condense/status"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let status: serde_json::Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(status["sessions"]["h2"]["requests"], 1, "{status}");
}
