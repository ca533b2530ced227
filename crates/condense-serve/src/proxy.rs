//! The HTTP side: a hyper 1 server whose service routes each request, compresses the bodies
//! of the three APIs (on the blocking pool, one at a time per session), forwards everything to
//! its upstream through a rustls client, and streams the answer back frame by frame.

use crate::backend::{SessionBackend, Turn};
use crate::compress::{self, Compressed};
use crate::session::{hashed_session, named_session, Head, SESSION_HEADER};
use crate::settings::{OnError, Settings};
use crate::wire::{
    answer, build, error_answer, error_chain, forward_headers, full, ms, set_saved, stream_back,
    strip_hop_by_hop,
};
use crate::{Api, Pipelines, ServeError};
use bytes::Bytes;
use condense_text::{one_line, thousands};
use http::header::{self, HeaderMap};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// Every body the proxy sends or answers with: the client's or upstream's streamed as they
/// come, or one the proxy built.
pub type ProxyBody = BoxBody<Bytes, BoxError>;

/// The most of an upstream error body read to look for prompt-too-long (errors are small).
const ERROR_BODY_LIMIT: usize = 1 << 20;
/// The header every compressed route's answer carries.
pub const TOKENS_SAVED_HEADER: &str = "x-condense-tokens-saved";

/// The proxy: settings, the pipelines, the backend and the upstream client.
pub struct Proxy {
    settings: Settings,
    pipelines: Pipelines,
    backend: Arc<dyn SessionBackend>,
    client: Client<HttpsConnector<HttpConnector>, ProxyBody>,
    /// Write one line per request on stderr (off in benchmarks).
    pub log: bool,
}

impl Proxy {
    pub fn new(
        settings: Settings,
        pipelines: Pipelines,
        backend: Arc<dyn SessionBackend>,
    ) -> Result<Proxy, ServeError> {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| ServeError::Tls(e.to_string()))?
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(https);
        Ok(Proxy {
            settings,
            pipelines,
            backend,
            client,
            log: true,
        })
    }

    pub fn backend(&self) -> &Arc<dyn SessionBackend> {
        &self.backend
    }

    /// Answers one request. An `Err` closes the client's connection without an answer: what
    /// the client gets when the upstream is down or cuts its answer.
    pub async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Result<Response<ProxyBody>, BoxError> {
        let started = Instant::now();
        let path = req.uri().path().to_string();
        if req.method() == Method::GET && path == "/condense/status" {
            return Ok(match serde_json::to_vec(&self.backend.status()) {
                Ok(json) => answer(StatusCode::OK, json),
                Err(e) => error_answer(StatusCode::INTERNAL_SERVER_ERROR, &format!("status: {e}")),
            });
        }
        match Api::of_path(&path).filter(|_| req.method() == Method::POST) {
            Some(api) => self.compressed_route(req, api, started).await,
            None => self.pass_through(req, started).await,
        }
    }

    /// The upstream a request goes to: by path, else Anthropic when it carries Anthropic's
    /// headers, else OpenAI.
    fn upstream_for(&self, path: &str, headers: &HeaderMap) -> &str {
        let anthropic = path.starts_with("/v1/messages")
            || (!path.starts_with("/v1/chat")
                && !path.starts_with("/v1/responses")
                && (headers.contains_key("x-api-key")
                    || headers.contains_key("anthropic-version")));
        if anthropic {
            &self.settings.anthropic_upstream
        } else {
            &self.settings.openai_upstream
        }
    }

    fn upstream_uri(&self, uri: &Uri, headers: &HeaderMap) -> Result<Uri, BoxError> {
        let base = self.upstream_for(uri.path(), headers);
        let pq = uri.path_and_query().map_or("/", |p| p.as_str());
        Ok(format!("{base}{pq}").parse::<Uri>()?)
    }

    async fn pass_through(
        &self,
        req: Request<Incoming>,
        started: Instant,
    ) -> Result<Response<ProxyBody>, BoxError> {
        let (parts, body) = req.into_parts();
        let uri = self.upstream_uri(&parts.uri, &parts.headers)?;
        let mut up = Request::builder().method(parts.method.clone()).uri(uri);
        if let Some(h) = up.headers_mut() {
            *h = forward_headers(&parts.headers, false);
        }
        let up = up.body(body.map_err(BoxError::from).boxed())?;
        let resp = self
            .send(up, &parts.method, parts.uri.path(), started)
            .await?;
        self.log(format_args!(
            "{} {} passed through -> {} ({:.1} ms)",
            parts.method,
            parts.uri.path(),
            resp.status().as_u16(),
            ms(started)
        ));
        Ok(stream_back(resp, None))
    }

    async fn send(
        &self,
        req: Request<ProxyBody>,
        method: &Method,
        path: &str,
        started: Instant,
    ) -> Result<Response<Incoming>, BoxError> {
        match self.client.request(req).await {
            Ok(resp) => Ok(resp),
            Err(e) => {
                // The client gets a closed connection, as it would from a down upstream.
                self.log(format_args!(
                    "{method} {path}: upstream unreachable ({}), connection closed ({:.1} ms)",
                    one_line(&error_chain(&e)),
                    ms(started)
                ));
                Err(Box::new(e))
            }
        }
    }

    async fn compressed_route(
        self: Arc<Self>,
        req: Request<Incoming>,
        api: Api,
        started: Instant,
    ) -> Result<Response<ProxyBody>, BoxError> {
        let (parts, body) = req.into_parts();
        let max = self.settings.max_body_bytes;
        let declared = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        let too_large = || {
            error_answer(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("condense serve: the request body is over the {}-byte limit (max_body_bytes in [serve], --max-body-bytes)", thousands(max)),
            )
        };
        if declared.is_some_and(|n| n > max) {
            self.log(format_args!(
                "{} {}: body over the limit -> 413",
                parts.method,
                parts.uri.path()
            ));
            return Ok(too_large());
        }
        let bytes = match Limited::new(body, max).collect().await {
            Ok(c) => c.to_bytes(),
            Err(e) if e.is::<LengthLimitError>() => {
                self.log(format_args!(
                    "{} {}: body over the limit -> 413",
                    parts.method,
                    parts.uri.path()
                ));
                return Ok(too_large());
            }
            Err(e) => return Err(e),
        };
        let uri = self.upstream_uri(&parts.uri, &parts.headers)?;
        let headers = forward_headers(&parts.headers, true);
        let session_header = parts
            .headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let encoded = parts
            .headers
            .get(header::CONTENT_ENCODING)
            .is_some_and(|v| v.as_bytes() != b"identity");

        let mut condense_ms = 0.0;
        let t = Instant::now();
        let first = if encoded {
            Err((None, "the request body is content-encoded".to_string()))
        } else {
            Arc::clone(&self)
                .compress(api, bytes.clone(), session_header, None)
                .await
        };
        condense_ms += ms(t);
        let (session, model, mut done, pipeline) = match first {
            Ok(x) => x,
            Err((session, reason)) => {
                let session = session.unwrap_or_else(|| "?".into());
                if self.settings.on_error == OnError::Fail {
                    self.log(format_args!(
                        "{} {} session={session}: not compressed: {reason} -> 502 (on_error = \"fail\")",
                        parts.method,
                        parts.uri.path()
                    ));
                    return Ok(error_answer(
                        StatusCode::BAD_GATEWAY,
                        &format!("condense serve: {reason}"),
                    ));
                }
                self.backend.record(
                    &session,
                    Turn {
                        failed: true,
                        ..Turn::default()
                    },
                );
                let up = build(&parts.method, &uri, &headers, bytes.clone())?;
                let resp = self
                    .send(up, &parts.method, parts.uri.path(), started)
                    .await?;
                self.log(format_args!(
                    "{} {} session={session}: not compressed: {reason}; forwarded unchanged -> {} ({:.1} ms)",
                    parts.method,
                    parts.uri.path(),
                    resp.status().as_u16(),
                    ms(started)
                ));
                return Ok(stream_back(resp, Some(0)));
            }
        };
        let levels = compress::levels(&pipeline).len();
        let mut level = 0;
        let mut retries = 0;
        let stable = self.backend.record(
            &session,
            Turn {
                tokens_before: done.tokens_before,
                tokens_after: done.tokens_after,
                compressed: done.body.is_some(),
                failed: false,
                prefix: std::mem::take(&mut done.prefix),
            },
        );
        loop {
            let body = done.body.clone().map_or_else(|| bytes.clone(), Bytes::from);
            let up = build(&parts.method, &uri, &headers, body)?;
            let resp = self
                .send(up, &parts.method, parts.uri.path(), started)
                .await?;
            let saved = done.tokens_before.saturating_sub(done.tokens_after);
            let line = |status: u16, note: &str, condense_ms: f64, retries: usize| {
                format!(
                    "{} {} session={session} model={} tokens {} -> {} stages={} retries={retries}{note} -> {status} (condense {condense_ms:.1} ms, total {:.1} ms{})",
                    parts.method,
                    parts.uri.path(),
                    model.as_deref().unwrap_or("?"),
                    thousands(done.tokens_before),
                    thousands(done.tokens_after),
                    if done.acted.is_empty() { "-".to_string() } else { done.acted.join(",") },
                    ms(started),
                    match stable {
                        Some(true) => ", prefix stable",
                        Some(false) => ", prefix changed",
                        None => "",
                    }
                )
            };
            if resp.status() != StatusCode::BAD_REQUEST {
                self.log(format_args!(
                    "{}",
                    line(resp.status().as_u16(), "", condense_ms, retries)
                ));
                return Ok(stream_back(resp, Some(saved)));
            }
            // A 400: read it (errors are small) to see whether it is prompt-too-long.
            let (rparts, rbody) = resp.into_parts();
            let error = Limited::new(rbody, ERROR_BODY_LIMIT)
                .collect()
                .await?
                .to_bytes();
            let buffered = |rparts: http::response::Parts, error: Bytes| {
                let mut r = Response::from_parts(rparts, full(error));
                *r.version_mut() = http::Version::HTTP_11;
                strip_hop_by_hop(r.headers_mut());
                r.headers_mut().remove(header::CONTENT_LENGTH);
                set_saved(r.headers_mut(), saved);
                r
            };
            if !api.is_prompt_too_long(&error) {
                self.log(format_args!("{}", line(400, "", condense_ms, retries)));
                return Ok(buffered(rparts, error));
            }
            // Escalate: force one more level each time, and send only what is smaller than
            // what the upstream refused; at most once per level.
            let sent = done.tokens_after;
            let mut next = None;
            while level < levels {
                level += 1;
                let t = Instant::now();
                let again = Arc::clone(&self)
                    .compress(api, bytes.clone(), Some(session.clone()), Some(level))
                    .await;
                condense_ms += ms(t);
                match again {
                    Ok((_, _, c, _)) if c.tokens_after < sent => {
                        next = Some(c);
                        break;
                    }
                    Ok(_) => {}
                    Err((_, reason)) => {
                        self.log(format_args!(
                            "session={session}: forcing level {level} failed: {reason}"
                        ));
                    }
                }
            }
            match next {
                Some(c) => {
                    retries += 1;
                    done = c;
                }
                None => {
                    self.log(format_args!(
                        "{}",
                        line(
                            400,
                            ", prompt too long after every level",
                            condense_ms,
                            retries
                        )
                    ));
                    return Ok(buffered(rparts, error));
                }
            }
        }
    }

    /// Reads, orders by session and compresses a body; `Err` carries the session when known
    /// and a one-line reason. `level`: `None` for the first run, else how many levels to force
    /// (the session is then the one found the first time).
    async fn compress(
        self: Arc<Self>,
        api: Api,
        bytes: Bytes,
        session: Option<String>,
        level: Option<usize>,
    ) -> Result<
        (
            String,
            Option<String>,
            Compressed,
            Arc<condense_host::LoadedPipeline>,
        ),
        (Option<String>, String),
    > {
        let this = Arc::clone(&self);
        let body = bytes.clone();
        let prepared = tokio::task::spawn_blocking(move || {
            let doc = compress::read(&body, api)
                .map_err(|e| (named_session(session.as_deref(), &Head::default()), e))?;
            // The top-level fields condense does not map (`model`, `metadata`, `stream`) are
            // the conversation's `extra`: read there, not by parsing the body again.
            // An empty extra, or one of another shape, reads as no head: nothing is named.
            let extra = doc.conversations()[0].extra.as_str();
            let head: Head = serde_json::from_str(extra).unwrap_or_default(); // tidy: names nothing
            let named = match level {
                Some(_) => session,
                None => named_session(session.as_deref(), &head),
            };
            let session = named.unwrap_or_else(|| hashed_session(&doc.conversations()[0]));
            let window = head
                .model
                .as_deref()
                .and_then(|m| this.settings.window_for(m));
            let pipeline = this
                .pipelines
                .for_window(window)
                .map_err(|e| (Some(session.clone()), e))?;
            Ok::<_, (Option<String>, String)>((doc, session, head.model, pipeline))
        })
        .await
        .map_err(|e| (None, format!("reading the body panicked: {e}")))?;
        let (doc, session, model, pipeline) = prepared?;
        let lock = self.backend.lock(&session);
        let _ordered = lock.lock_owned().await;
        let this = Arc::clone(&self);
        let (s, p) = (session.clone(), Arc::clone(&pipeline));
        let done = tokio::task::spawn_blocking(move || {
            compress::run(
                doc,
                &bytes,
                &p,
                this.backend.store(),
                &s,
                level.unwrap_or(0),
            )
        })
        .await
        .map_err(|e| (Some(session.clone()), format!("the pipeline panicked: {e}")))?
        .map_err(|e| (Some(session.clone()), e))?;
        Ok((session, model, done, pipeline))
    }

    fn log(&self, line: std::fmt::Arguments<'_>) {
        if self.log {
            eprintln!("condense serve: {line}");
        }
    }
}

/// A listening proxy.
pub struct Server {
    listener: tokio::net::TcpListener,
    proxy: Arc<Proxy>,
}

impl Server {
    pub async fn bind(addr: &str, proxy: Proxy) -> Result<Server, ServeError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Listen {
                addr: addr.to_string(),
                source,
            })?;
        Ok(Server {
            listener,
            proxy: Arc::new(proxy),
        })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    pub fn proxy(&self) -> &Arc<Proxy> {
        &self.proxy
    }

    /// Serves until the process ends; each connection on its own task.
    pub async fn run(self) {
        loop {
            let stream = match self.listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little, keep serving.
                    eprintln!("condense serve: accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let proxy = Arc::clone(&self.proxy);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| Arc::clone(&proxy).handle(req));
                // A connection error (the client left, an upstream cut) ends that connection only.
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }
}

/// Builds the runtime, binds `listen`, calls `ready` with the address, serves forever.
pub fn serve_forever(
    listen: &str,
    proxy: Proxy,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    runtime.block_on(async {
        let server = Server::bind(listen, proxy).await?;
        if let Some(addr) = server.local_addr() {
            ready(addr);
        }
        server.run().await;
        Ok(())
    })
}
