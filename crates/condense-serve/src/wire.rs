//! The HTTP plumbing the proxy's service uses: building upstream requests, streaming answers
//! back, the proxy's own JSON answers, and which headers cross (hop-by-hop ones never do).

use crate::proxy::{BoxError, ProxyBody, TOKENS_SAVED_HEADER};
use crate::session::SESSION_HEADER;
use bytes::Bytes;
use condense_text::one_line;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use std::time::Instant;

pub(crate) fn build(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Request<ProxyBody>, BoxError> {
    let mut req = Request::builder().method(method.clone()).uri(uri.clone());
    if let Some(h) = req.headers_mut() {
        *h = headers.clone();
    }
    Ok(req.body(full(body))?)
}

pub(crate) fn full(bytes: Bytes) -> ProxyBody {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

/// The upstream's answer, streamed frame by frame as it arrives; its end (or its cut) is the
/// client's.
pub(crate) fn stream_back(resp: Response<Incoming>, saved: Option<usize>) -> Response<ProxyBody> {
    let (mut parts, body) = resp.into_parts();
    // The client's connection is HTTP/1.1 whatever the upstream spoke.
    parts.version = http::Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    if let Some(saved) = saved {
        set_saved(&mut parts.headers, saved);
    }
    let body = FlushBeforeError {
        inner: body.map_err(BoxError::from).boxed(),
        error: None,
    };
    Response::from_parts(parts, body.boxed())
}

/// Hands on the upstream's frames, and when the upstream fails (a cut stream), first lets the
/// server flush what it already has, then fails. hyper's server drops its unflushed write
/// buffer when a body fails, so without this the last frames before a cut (those that arrived
/// with the cut, in one read) never reach the client, which then sees less than the upstream
/// sent.
struct FlushBeforeError {
    inner: ProxyBody,
    error: Option<BoxError>,
}

impl hyper::body::Body for FlushBeforeError {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, BoxError>>> {
        use std::task::Poll;
        if let Some(e) = self.error.take() {
            return Poll::Ready(Some(Err(e)));
        }
        match std::pin::Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Err(e))) => {
                // Pending once: the server flushes while the body waits; the next poll fails.
                self.error = Some(e);
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.error.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// `req` with `guard` (a share of its session's turn) held until its body has been handed to
/// the upstream connection (its last frame taken, or the body dropped): the session's next
/// request waits for that (and for what this one keeps for it), not for the model's answer.
pub(crate) fn release_at_end(
    req: Request<ProxyBody>,
    guard: Option<crate::route::SessionTurn>,
) -> Request<ProxyBody> {
    req.map(|inner| ReleaseAtEnd { inner, guard }.boxed())
}

struct ReleaseAtEnd {
    inner: ProxyBody,
    guard: Option<crate::route::SessionTurn>,
}

impl hyper::body::Body for ReleaseAtEnd {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, BoxError>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        let ended = match &polled {
            std::task::Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            std::task::Poll::Ready(_) => true,
            std::task::Poll::Pending => false,
        };
        if ended {
            self.guard = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

pub(crate) fn set_saved(headers: &mut HeaderMap, saved: usize) {
    headers.insert(
        HeaderName::from_static(TOKENS_SAVED_HEADER),
        HeaderValue::from(saved),
    );
}

pub(crate) fn answer(status: StatusCode, json: Vec<u8>) -> Response<ProxyBody> {
    let mut r = Response::new(full(Bytes::from(json)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// An error the proxy itself answers, in a shape both SDKs read (`error.message`).
pub(crate) fn error_answer(status: StatusCode, message: &str) -> Response<ProxyBody> {
    let json = serde_json::json!({
        "type": "error",
        "error": {"type": "condense_error", "message": one_line(message)},
    });
    // `Display` of a `Value` is its JSON and cannot fail.
    answer(status, json.to_string().into_bytes())
}

/// Headers that belong to one connection, never forwarded (RFC 9110 7.6.1).
pub(crate) const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for h in HOP_BY_HOP {
        headers.remove(*h);
    }
}

/// The client's headers as sent upstream: auth and version headers as they are; the host and
/// length are the upstream request's own; the session header and `expect` are not forwarded. A compressed
/// route also asks for an unencoded answer, so a prompt-too-long error can be read.
pub(crate) fn forward_headers(headers: &HeaderMap, compressed: bool) -> HeaderMap {
    let mut out = headers.clone();
    strip_hop_by_hop(&mut out);
    out.remove(header::HOST);
    out.remove(SESSION_HEADER);
    // The proxy has read the body already (or streams it): `100-continue` was between the
    // client and the proxy.
    out.remove(header::EXPECT);
    if compressed {
        out.remove(header::CONTENT_LENGTH);
        out.remove(header::ACCEPT_ENCODING);
    }
    out
}

/// Anthropic's header naming the beta features a request uses.
const ANTHROPIC_BETA: HeaderName = HeaderName::from_static("anthropic-beta");

/// The betas `headers`' `anthropic-beta` names (comma-separated, in one or more lines; a line
/// that is not text names none).
fn named_betas(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(&ANTHROPIC_BETA)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|b| !b.is_empty())
}

/// Whether `headers`' `anthropic-beta` names a beta starting with `prefix`.
pub(crate) fn names_beta(headers: &HeaderMap, prefix: &str) -> bool {
    named_betas(headers).any(|b| b.starts_with(prefix))
}

/// Names each of `betas` in `headers`' `anthropic-beta` where the client did not: the
/// client's values first, in one line. A line that is not text is left as it is, beside a
/// line of ours.
pub(crate) fn with_betas(headers: &mut HeaderMap, betas: &[&'static str]) {
    let sent: Vec<&str> = named_betas(headers).collect();
    let missing: Vec<&str> = betas
        .iter()
        .copied()
        .filter(|b| !sent.contains(b))
        .collect();
    if missing.is_empty() {
        return;
    }
    let all_text = headers
        .get_all(&ANTHROPIC_BETA)
        .iter()
        .all(|v| v.to_str().is_ok());
    let named = if all_text { &sent[..] } else { &[] };
    let line = named
        .iter()
        .chain(&missing)
        .copied()
        .collect::<Vec<_>>()
        .join(",");
    // Text the client sent as a header value is a header value again.
    let Ok(value) = HeaderValue::from_str(&line) else {
        return;
    };
    if all_text {
        headers.insert(ANTHROPIC_BETA, value);
    } else {
        headers.append(ANTHROPIC_BETA, value);
    }
}

pub(crate) fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn betas(lines: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append(ANTHROPIC_BETA, HeaderValue::from_bytes(line).unwrap());
        }
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        with_betas(&mut headers, &["context-management-2025-06-27"]);
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        headers
            .get_all(ANTHROPIC_BETA)
            .iter()
            .map(|v| v.as_bytes().to_vec())
            .collect()
    }

    /// Added where the client named other betas or none, in one line after the client's; left
    /// as it is where the client named it already.
    #[test]
    fn a_beta_is_named_once_after_the_clients() {
        let want = b"context-management-2025-06-27".to_vec();
        assert_eq!(betas(&[]), std::slice::from_ref(&want));
        assert_eq!(
            betas(&[b"prompt-caching-2024-07-31", b"a, b"]),
            [b"prompt-caching-2024-07-31,a,b,context-management-2025-06-27".to_vec()]
        );
        let named: &[&[u8]] = &[b"x, context-management-2025-06-27"];
        assert_eq!(betas(named), [named[0].to_vec()]);
        // A value that is not text stays, and ours goes beside it.
        assert_eq!(betas(&[b"caf\xe9"]), [b"caf\xe9".to_vec(), want]);
    }
}
