//! The HTTP side: a hyper 1 server whose service routes each request, compresses the bodies
//! of the three APIs (`crate::route`: on the blocking pool, one at a time per session, in
//! the order they arrived), forwards everything to its upstream through a rustls client, and
//! streams the answer back frame by frame.

use crate::backend::{SessionBackend, Status};
use crate::settings::Settings;
use crate::wire::{answer, error_answer, error_chain, forward_headers, ms, stream_back};
use crate::{Api, Pipelines, ServeError};
use bytes::Bytes;
use condense_text::{one_line, plural};
use http::header::HeaderMap;
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::combinators::BoxBody;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::graceful::GracefulShutdown;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// Every body the proxy sends or answers with: the client's or upstream's streamed as they
/// come, or one the proxy built.
pub type ProxyBody = BoxBody<Bytes, BoxError>;

/// The header every compressed route's answer carries.
pub const TOKENS_SAVED_HEADER: &str = "x-condense-tokens-saved";

/// The proxy: settings, the pipelines, the backend and the upstream client.
pub struct Proxy {
    pub(crate) settings: Settings,
    pub(crate) pipelines: Pipelines,
    pub(crate) backend: Arc<dyn SessionBackend>,
    client: Client<HttpsConnector<HttpConnector>, ProxyBody>,
    /// The line requests join when their body is in, to take their place in their session's
    /// line in that order ([`crate::route`]).
    pub(crate) intake: Arc<tokio::sync::Mutex<()>>,
    /// Requests whose body is in and whose answer has not started ([`Status::in_flight`]).
    pub(crate) in_flight: Arc<AtomicU64>,
    /// Permits to compress ([`crate::route::TRIPS`]): a request holds one from before it
    /// takes any place in line until its trip to the blocking pool ends.
    pub(crate) trips: Arc<tokio::sync::Semaphore>,
    /// The writer's memo of each session served last ([`crate::compress::WriteMemos`]).
    pub(crate) writes: crate::compress::WriteMemos,
    /// The system prompts and tool lists read before, for every session
    /// ([`condense_formats::frames`]): agents send the same ones turn after turn.
    pub(crate) frames: condense_formats::frames::FrameMemo,
    /// The sessions the looks found, by the bytes they read ([`crate::session::LookMemo`]).
    pub(crate) looks: crate::session::LookMemo,
    /// Write one line per request on stderr (off in benchmarks).
    pub log: bool,
}

/// The TCP connector under the upstream client's TLS: with Nagle off, as on the connections
/// the proxy accepts, so that a request written in more than one piece on a kept connection is
/// not held until the upstream acknowledges the first (which it may delay by tens of
/// milliseconds); `http` and `https` URLs both (the builder's `https_or_http`).
fn upstream_connector() -> HttpConnector {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http
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
            .wrap_connector(upstream_connector());
        let client = Client::builder(TokioExecutor::new()).build(https);
        Ok(Proxy {
            settings,
            pipelines,
            backend,
            client,
            intake: Arc::default(),
            in_flight: Arc::default(),
            trips: Arc::new(tokio::sync::Semaphore::new(crate::route::TRIPS)),
            writes: crate::compress::WriteMemos::default(),
            frames: condense_formats::frames::FrameMemo::default(),
            looks: crate::session::LookMemo::default(),
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
            let status = Status {
                in_flight: self.in_flight.load(Ordering::Relaxed),
                ..self.backend.status()
            };
            return Ok(match serde_json::to_vec(&status) {
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

    pub(crate) fn upstream_uri(&self, uri: &Uri, headers: &HeaderMap) -> Result<Uri, BoxError> {
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

    pub(crate) async fn send(
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

    pub(crate) fn log(&self, line: std::fmt::Arguments<'_>) {
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

    /// Serves until the process is asked to stop (Ctrl-C or SIGTERM), then stops as
    /// [`Server::run_until`] says. Each connection on its own task. The runtime's blocking pool
    /// must allow more threads than the 64 requests that may compress at once
    /// (`route::TRIPS`; tokio's default allows 512).
    pub async fn run(self) {
        self.run_until(stop_signal()).await;
    }

    /// Serves until `stop` completes. Then it takes no new connection and lets the open ones
    /// end on their own: a request in flight gets its whole answer (a stream to its last
    /// event), an idle kept-alive connection is closed. That lasts until they have all ended,
    /// [`STOP_GRACE`] has passed or a second stop signal comes, whichever is first; what is still
    /// open then is cut. Each step is one log line.
    pub async fn run_until(self, stop: impl std::future::Future<Output = ()>) {
        let open = GracefulShutdown::new();
        let mut stop = std::pin::pin!(stop);
        loop {
            let accepted = tokio::select! {
                accepted = self.listener.accept() => accepted,
                () = &mut stop => break,
            };
            let stream = match accepted {
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
            let watcher = open.watcher();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| Arc::clone(&proxy).handle(req));
                // HTTP/1.1, or HTTP/2 when the client opens with its preface (h2c, prior
                // knowledge). A connection error (the client left, an upstream cut) ends that
                // connection only.
                let mut builder =
                    hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                builder.http1().max_buf_size(READ_BUFFER);
                let _ = watcher
                    .watch(builder.serve_connection(TokioIo::new(stream), service))
                    .await;
            });
        }
        drop(self.listener);
        // Written whatever `--quiet` says, as the line saying where it listens is: they are
        // not per-request lines.
        eprintln!(
            "condense serve: stopping: no new connections; {} open, each ends once its answer is \
             sent (at most {} s; a second Ctrl-C or SIGTERM stops at once)",
            plural(open.count(), "connection", "connections"),
            STOP_GRACE.as_secs()
        );
        let how = tokio::select! {
            () = open.shutdown() => "every answer was sent".to_string(),
            () = tokio::time::sleep(STOP_GRACE) => format!(
                "after {} s: the answers still open were cut",
                STOP_GRACE.as_secs()
            ),
            () = stop_signal() => {
                "at once (a second signal): the answers still open were cut".to_string()
            }
        };
        eprintln!("condense serve: stopped: {how}");
    }
}

/// How long a stopping proxy waits for the answers still open ([`Server::run_until`]): a
/// model's streamed answer takes seconds to minutes; past this it is cut.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Completes on Ctrl-C (SIGINT) or, on Unix, SIGTERM (what `docker stop`, systemd and `kill`
/// send). Where a signal cannot be listened for, never completes: the process then ends as it
/// did before, by the signal's default action.
async fn stop_signal() {
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = terminate => {}
        () = interrupt => {}
    }
}

/// The most an HTTP/1 connection's read buffer grows to (hyper's default: about 400 KiB).
/// hyper doubles the buffer from 8 KiB while reads fill it, and each growth reallocates it
/// whole; a request body is gathered into a buffer of its own anyway, so the last doubling
/// only copied. At 256 KiB a proxied request at 200k tokens (an 800 KB body) is 0.16 M
/// instructions less, and alternating benches put every growing turn at 0.91x-0.99x; at 64 KiB
/// the copies were fewer still, but the many more reads made the large turns slower.
const READ_BUFFER: usize = 256 * 1024;

/// How many threads run the async side (accepting, reading and writing bodies, the upstream's
/// TLS): half the cores, at least one. The stages run on the blocking pool, so the other half
/// is theirs; with tokio's default, a worker per core, the async workers and the thread running
/// a request's stages took turns on the same cores. On 2 cores (`condense-bench proxy 5`, six
/// runs with one worker against five with two, medians): the growing session's turn at 62k
/// tokens added 1.37 ms against 1.58, a turn needing no compression 0.50 ms against 0.54
/// (p50); requests per second the same (32 sessions: 1,761-2,182 against 1,764-2,223); the
/// proxy's peak 50.4-51.4 MiB against 49.7-56.2. Larger machines were not measured.
fn async_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// Builds the runtime, binds `listen`, calls `ready` with the address, serves until asked to
/// stop ([`Server::run`]).
pub fn serve_forever(
    listen: &str,
    proxy: Proxy,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(async_workers())
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let served = runtime.block_on(async {
        let server = Server::bind(listen, proxy).await?;
        if let Some(addr) = server.local_addr() {
            ready(addr);
        }
        server.run().await;
        Ok(())
    });
    // Stopped: a stage still running on a body whose answer was cut is not waited for long
    // (the store is safe against a run cut at any point).
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    served
}
