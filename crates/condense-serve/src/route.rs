//! One request of the three compressed routes: the body limit, decoding a content-encoded
//! body, the request's place in its session's line, the pipeline, the upstream, and the
//! prompt-too-long retries.
//!
//! Order: when a body is in, the request first takes its place in the proxy's intake line,
//! then finds its session cheaply ([`quick_session`], concurrently with other requests), and
//! in intake order takes its place in the session's line. So the requests of one session are
//! compressed and sent upstream in the order their bodies arrived, even when a later one reads
//! faster. The session's lock is held until the body has been handed to the upstream
//! connection (`wire`'s `ReleaseAtEnd`), not for the model's answer: sessions that share
//! an id (Claude Code's sub-agents) still wait for each other only while being compressed.

use crate::backend::Turn;
use crate::body::{Body, Unread};
use crate::compress::{self, Compressed};
use crate::encoding::{self, DecodeError};
use crate::order::Place;
use crate::proxy::{BoxError, Proxy, ProxyBody};
use crate::session::{head_of, named_session, quick_session, session_of, Head, Looked};
use crate::settings::{OnError, LONG_CONTEXT_BETA};
use crate::wire::{build, error_answer, forward_headers, full, ms, set_saved, stream_back};
use crate::Api;
use bytes::Bytes;
use condense_host::LoadedPipeline;
use condense_text::thousands;
use http::header;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::OwnedMutexGuard;

/// The most of an upstream error body read to look for prompt-too-long (errors are small).
const ERROR_BODY_LIMIT: usize = 1 << 20;

/// How many requests may be compressing at once (the rest wait for a permit, holding no thread
/// and no place in any line). A request's trip to the blocking pool waits there for its turn in
/// the intake line and in its session's line, that is for requests that took their places
/// before it; each of those took its permit first. So every request another one waits for
/// holds a permit, and with fewer permits than the pool has threads (tokio's default is 512)
/// each of them has a thread or gets one: the waits always end.
pub(crate) const TRIPS: usize = 64;

/// A permit to compress ([`TRIPS`]); `None` only if the semaphore were closed (it never is).
type Trip = Option<tokio::sync::OwnedSemaphorePermit>;

/// A body through the pipeline: its session, model, result and pipeline, the session's turn
/// (held until the body is sent, and until what the next request starts from is kept), and
/// that keeping, under way ([`compress::run`], [`compress::keep`]).
type Done = (
    String,
    Option<String>,
    Compressed,
    Arc<LoadedPipeline>,
    SessionTurn,
    Keeping,
);

/// The session's lock, shared by what must end before its next request starts: sending this
/// one's body, and keeping what the next one starts from.
pub(crate) type SessionTurn = Arc<OwnedMutexGuard<()>>;

/// What a request keeps for its session's next one after handing over its body, running on the
/// blocking pool while the body goes upstream. Waited for before the answer goes back to the
/// client, so an answered request is a kept one (its resume point, its known list).
struct Keeping(tokio::task::JoinHandle<Result<(), NotDone>>);

impl Keeping {
    async fn wait(self, proxy: &Proxy, session: &str) {
        if let Err(e) = self.0.await {
            proxy.log(format_args!(
                "session={session}: keeping what its next request starts from panicked: {e}"
            ));
        }
    }
}
/// Why a body was not compressed: its session when known, and a one-line reason.
type NotDone = (Option<String>, String);

/// The body as the pipeline reads it.
struct Plain {
    body: Body,
    /// It was content-encoded: a compressed body goes upstream without the encoding.
    decoded: bool,
}

impl Proxy {
    pub(crate) async fn compressed_route(
        self: Arc<Self>,
        req: Request<Incoming>,
        api: Api,
        started: Instant,
    ) -> Result<Response<ProxyBody>, BoxError> {
        let (parts, body) = req.into_parts();
        let (method, path) = (parts.method.clone(), parts.uri.path().to_string());
        let max = self.settings.max_body_bytes;
        let too_large = |what: &str| {
            self.log(format_args!(
                "{method} {path}: {what} over the limit -> 413"
            ));
            error_answer(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("condense serve: the request body is over the {}-byte limit (max_body_bytes in [serve], --max-body-bytes)", thousands(max)),
            )
        };
        let declared = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|n| n > max) {
            return Ok(too_large("body"));
        }
        let received = match crate::body::collect(body, max, declared).await {
            Ok(received) => received,
            Err(Unread::TooLarge) => return Ok(too_large("body")),
            Err(Unread::Failed(e)) => return Err(e),
        };
        let uri = self.upstream_uri(&parts.uri, &parts.headers)?;
        let headers = forward_headers(&parts.headers, true);
        // A client that asks Anthropic for the long context window (`context-1m-...`) has it.
        let long_context = crate::wire::names_beta(&parts.headers, LONG_CONTEXT_BETA);
        let header_session = crate::session::header_session(&parts.headers);
        let codings = match parts.headers.get(header::CONTENT_ENCODING) {
            Some(v) => encoding::codings(&String::from_utf8_lossy(v.as_bytes())),
            None => Vec::new(),
        };

        // The place in the intake line is taken now that the body is in (with a permit to
        // compress first, `TRIPS`); the session is found while others' are, and its place
        // taken in intake order.
        let trip = self.trip().await;
        let intake = Place::take(Arc::clone(&self.intake)).await;
        let _in_flight = InFlight::new(&self.in_flight);
        let t = Instant::now();
        // A plain body needs no trip of its own: its session is the header's, or is found by
        // the quick look on the trip that compresses it (`Order::Look`). A content-encoded body
        // is decoded and looked at on a trip of its own. The client's bytes, with their
        // encoding, are what goes upstream when nothing is compressed; a plain body's are also
        // the text the pipeline reads (one buffer for both).
        let named = named_session(header_session.as_deref(), &Head::default());
        // `found`: the session found so far (`None`: left to the trip's quick look).
        let (bytes, plain, found) = if codings.is_empty() {
            let body = Body::from_vec(received);
            let bytes = body.bytes().clone();
            let found = named.clone().map(Some);
            (
                bytes,
                Ok(Plain {
                    body,
                    decoded: false,
                }),
                found,
            )
        } else {
            let bytes = Bytes::from(received);
            let (raw, hs, this) = (bytes.clone(), header_session.clone(), Arc::clone(&self));
            let looked = tokio::task::spawn_blocking(move || {
                let plain = encoding::decode(&raw, &codings, max).map(|v| Plain {
                    body: Body::from_vec(v),
                    decoded: true,
                });
                let quick = match &plain {
                    Ok(p) => {
                        let known = compress::known_lists(this.backend.store());
                        let known = (Some(&known as _), Some(&this.frames), Some(&this.looks));
                        quick_session(p.body.bytes(), api, hs.as_deref(), known).session
                    }
                    Err(_) => None,
                };
                (plain, quick)
            })
            .await;
            let (plain, quick) = match looked {
                Ok(x) => x,
                Err(e) => (
                    Err(DecodeError::Corrupt {
                        encoding: "?".into(),
                        reason: format!("decoding panicked: {e}"),
                    }),
                    None,
                ),
            };
            (bytes, plain, Some(quick))
        };
        let mut condense_ms = ms(t);
        let order = match found {
            Some(quick) => Order::Found(self.place_in_line(intake, quick).await),
            None => Order::Look(intake),
        };

        let t = Instant::now();
        let first = match plain {
            Err(DecodeError::TooLarge) => return Ok(too_large("decoded body")),
            Err(e) => Err((named, e.to_string())),
            Ok(p) => Arc::clone(&self)
                .compress(
                    (api, long_context),
                    p.body.clone(),
                    header_session,
                    None,
                    (order, trip),
                )
                .await
                .map(|done| (done, p)),
        };
        condense_ms += ms(t);
        let ((session, model, mut done, pipeline, guard, keeping), plain) = match first {
            Ok(x) => x,
            Err((session, reason)) => {
                let session = session.unwrap_or_else(|| "?".into());
                if self.settings.on_error == OnError::Fail {
                    self.log(format_args!(
                        "{method} {path} session={session}: not compressed: {reason} -> 502 (on_error = \"fail\")"
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
                // The client's bytes, with their encoding.
                let up = build(&method, &uri, &headers, bytes.clone())?;
                let resp = self.send(up, &method, &path, started).await?;
                self.log(format_args!(
                    "{method} {path} session={session}: not compressed: {reason}; forwarded unchanged -> {} ({:.1} ms)",
                    resp.status().as_u16(),
                    ms(started)
                ));
                return Ok(stream_back(resp, Some(0)));
            }
        };
        let levels = compress::levels(&pipeline).len();
        let mut level = 0;
        let mut retries = 0;
        let mut guard = Some(guard);
        let mut keeping = Some(keeping);
        // Recorded before it is sent, under the session's lock: the session's turns are
        // recorded in the order they went upstream.
        let kept = self.backend.record(
            &session,
            Turn {
                tokens_before: done.tokens_before,
                tokens_after: done.tokens_after,
                compressed: done.body.is_some(),
                retry: false,
                failed: false,
                prefix: std::mem::take(&mut done.prefix),
            },
        );
        let mut ever_compressed = done.body.is_some();
        loop {
            // A body condense changed goes as plain JSON (moved into the request, not copied:
            // a retry sends the body it compresses next); the client's goes as it came.
            let up = match done.body.take() {
                Some(b) => {
                    let mut plain_headers = headers.clone();
                    if plain.decoded {
                        plain_headers.remove(header::CONTENT_ENCODING);
                    }
                    // A request field condense wrote that the API takes only as a beta.
                    crate::wire::with_betas(&mut plain_headers, &done.betas);
                    build(&method, &uri, &plain_headers, Bytes::from(b))?
                }
                None => build(&method, &uri, &headers, bytes.clone())?,
            };
            let up = crate::wire::release_at_end(up, guard.take());
            let resp = self.send(up, &method, &path, started).await?;
            if let Some(k) = keeping.take() {
                k.wait(&self, &session).await;
            }
            let saved = done.tokens_before.saturating_sub(done.tokens_after);
            let budget = &pipeline.pipeline.budget;
            let line = |status: u16, note: &str, condense_ms: f64, retries: usize| {
                format!(
                    "{method} {path} session={session} model={} window={} output={} tokens {} -> {} stages={} retries={retries}{note} -> {status} (condense {condense_ms:.1} ms, total {:.1} ms{})",
                    model.as_deref().unwrap_or("?"),
                    thousands(budget.context_window),
                    thousands(budget.max_output_tokens),
                    thousands(done.tokens_before),
                    thousands(done.tokens_after),
                    if done.acted.is_empty() { "-".to_string() } else { done.acted.join(",") },
                    ms(started),
                    match kept {
                        Some(k) if k.stable() => ", prefix stable".to_string(),
                        Some(k) => format!(
                            ", prefix changed after {} of the {} elements last sent",
                            k.kept, k.previous
                        ),
                        None => String::new(),
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
                crate::wire::strip_hop_by_hop(r.headers_mut());
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
                    .compress(
                        (api, long_context),
                        plain.body.clone(),
                        Some(session.clone()),
                        Some(level),
                        (Order::Found(None), self.trip().await),
                    )
                    .await;
                condense_ms += ms(t);
                match again {
                    Ok((_, _, c, _, g, k)) if c.tokens_after < sent => {
                        next = Some((c, g, k));
                        break;
                    }
                    Ok((.., k)) => k.wait(&self, &session).await,
                    Err((_, reason)) => {
                        self.log(format_args!(
                            "session={session}: forcing level {level} failed: {reason}"
                        ));
                    }
                }
            }
            match next {
                Some((mut c, g, k)) => {
                    retries += 1;
                    self.backend.record(
                        &session,
                        Turn {
                            tokens_before: c.tokens_before,
                            tokens_after: c.tokens_after,
                            compressed: c.body.is_some() && !ever_compressed,
                            retry: true,
                            failed: false,
                            prefix: std::mem::take(&mut c.prefix),
                        },
                    );
                    ever_compressed |= c.body.is_some();
                    done = c;
                    guard = Some(g);
                    keeping = Some(k);
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

    /// Reads, orders by session and compresses a plain body; `Err` carries the session when
    /// known and a one-line reason. `long_context`: the client asked for the long context
    /// window (see [`crate::settings::Settings::window_for`]). `level`: `None` for the first
    /// run, else how many levels to force (`session` is then the one found the first time).
    /// `order`: where the request is in line ([`Order`]); `trip`: its permit to compress
    /// ([`TRIPS`]), given back when the trip ends.
    async fn compress(
        self: Arc<Self>,
        (api, long_context): (Api, bool),
        request: Body,
        session: Option<String>,
        level: Option<usize>,
        (order, trip): (Order, Trip),
    ) -> Result<Done, NotDone> {
        // One trip to the blocking pool: the quick look when the session is still to find, the
        // body is read, the request waits for its turn in its session's line there (blocking
        // that thread, not a worker: `TRIPS` says why the wait ends), the stages run, the body
        // is handed over, and what the next request starts from is kept. A trip for the look,
        // one for the read and one for the run cost four more thread wake-ups (about 0.1 ms).
        let this = Arc::clone(&self);
        let runtime = tokio::runtime::Handle::current();
        let (tx, handed) = tokio::sync::oneshot::channel();
        let keeping = tokio::task::spawn_blocking(move || {
            let (place, looked) = match order {
                Order::Found(place) => (place, Looked::default()),
                Order::Look(intake) => {
                    // The read takes what the look matched of the message list (unless the
                    // session's previous request kept a longer list meanwhile).
                    let known = compress::known_lists(this.backend.store());
                    let known = (Some(&known as _), Some(&this.frames), Some(&this.looks));
                    let looked = quick_session(request.bytes(), api, None, known);
                    let session = looked.session.clone();
                    let place = runtime.block_on(this.place_in_line(intake, session));
                    (place, looked)
                }
            };
            let Looked {
                session: looked_session,
                matched,
            } = looked;
            let store = this.backend.store();
            let doc = compress::read_body(&request, api, (store, &this.frames), matched)
                .map_err(|e| (named_session(session.as_deref(), &Head::default()), e))?;
            let conv = &doc.conversations()[0];
            let head = head_of(conv);
            // The session the look found is the one the whole body gives (`session::tests`): an
            // SDK agent's is a hash of its system prompt, not made twice.
            let session = match (level, session, looked_session) {
                (Some(_), Some(s), _) => s,
                (None, None, Some(looked)) => looked,
                (_, header, _) => session_of(conv, &head, header.as_deref()),
            };
            let model = head.model.as_deref();
            let window = model.and_then(|m| this.settings.window_for(m, long_context));
            // The output the request leaves room for: its own limit, or what its model's
            // window keeps whatever the request says, the larger.
            let kept = model.and_then(|m| this.settings.output_kept_for(m));
            let output = head.max_output().max(kept);
            let pipeline = this
                .pipelines
                .for_request(window, output)
                .map_err(|e| (Some(session.clone()), e))?;
            let turn: SessionTurn = Arc::new(runtime.block_on(this.turn_of(&session, place)));
            let mut memo = this.writes.take(&session);
            let store = this.backend.store();
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                compress::run(
                    doc,
                    request.bytes(),
                    &pipeline,
                    (store, &session),
                    level.unwrap_or(0),
                    &mut memo,
                )
            }));
            this.writes.keep(&session, memo);
            let (done, kept) = match ran {
                Ok(ran) => ran.map_err(|e| (Some(session.clone()), e))?,
                Err(panic) => {
                    let reason = format!(
                        "the pipeline panicked: {}",
                        condense_text::panic_message(&*panic).unwrap_or("a panic")
                    );
                    return Err((Some(session), reason));
                }
            };
            // The session's next request may start once this one's body is sent (see
            // `release_at_end`) and what it starts from is kept.
            let held = Arc::clone(&turn);
            let handed = (
                session.clone(),
                head.model,
                done,
                Arc::clone(&pipeline),
                turn,
            );
            // A receiver gone (the client left) leaves nothing to send to.
            let _ = tx.send(handed);
            if let Err(e) = compress::keep(kept, &pipeline, (store, &session)) {
                this.log(format_args!(
                    "session={session}: sent; keeping what its next request starts from failed ({e}): it starts from the one before"
                ));
            }
            drop(held);
            drop(trip);
            Ok(())
        });
        match handed.await {
            Ok((session, model, done, pipeline, turn)) => {
                Ok((session, model, done, pipeline, turn, Keeping(keeping)))
            }
            // Nothing handed over: the read or the run failed (or panicked) before its body
            // was ready.
            Err(_) => Err(match keeping.await {
                Ok(Err(not_done)) => not_done,
                Ok(Ok(())) => (None, "the pipeline handed over no body".to_string()),
                Err(e) => (None, format!("reading the body panicked: {e}")),
            }),
        }
    }

    /// A permit to compress ([`TRIPS`]), waited for.
    async fn trip(&self) -> Trip {
        Arc::clone(&self.trips).acquire_owned().await.ok()
    }

    /// The place in the line of the session found quickly (`quick`), taken at the request's
    /// turn in the intake line (so the requests of one session take theirs in the order their
    /// bodies came in).
    async fn place_in_line(&self, intake: Place, quick: Option<String>) -> Option<(String, Place)> {
        let _turn = intake.turn().await;
        let session = quick?;
        let place = Place::take(self.backend.lock(&session)).await;
        Some((session, place))
    }

    /// The request's turn in `session`'s line: the place it took when its session was found
    /// quickly (`place`), else one taken now.
    async fn turn_of(&self, session: &str, place: Option<(String, Place)>) -> OwnedMutexGuard<()> {
        match place {
            Some((quick, place)) if quick == session => place.turn().await,
            other => {
                if let Some((quick, _)) = other {
                    // The cut body named another session than the whole one: keep the
                    // state right, at the cost of this request's order.
                    self.log(format_args!(
                        "session={session}: the quick look said {quick}; ordered by the whole body"
                    ));
                }
                Place::take(self.backend.lock(session)).await.turn().await
            }
        }
    }
}

/// Where a request is in its session's line when it is handed to [`Proxy::compress`].
enum Order {
    /// Its place, taken when its session was found quickly (`None`: not found so; or a retry,
    /// which takes its session's place again).
    Found(Option<(String, Place)>),
    /// A plain body not looked at yet: the trip that compresses it looks, then takes its place
    /// at its turn in the intake line (the place it holds there).
    Look(Place),
}

/// Counts a request in flight ([`crate::backend::Status::in_flight`]) while it lives.
struct InFlight(Arc<AtomicU64>);

impl InFlight {
    fn new(count: &Arc<AtomicU64>) -> InFlight {
        count.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(count))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
