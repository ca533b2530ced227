//! A request body as the proxy holds it ([`Body`]): the bytes it forwards, and, when they are
//! UTF-8 (a JSON body is), the same bytes as the text the pipeline reads, shared, not copied.
//!
//! A request body used to be copied twice before the stages saw it: hyper's chunks into one
//! buffer, then that buffer into the document's own text (800 KB and about 0.64 M
//! instructions each at 200k tokens). Now the chunks are copied once, into a `String` the
//! document keeps ([`condense_formats::read_shared_knowing`]) and the forwarded `Bytes` point at.

use crate::proxy::BoxError;
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use std::sync::Arc;

/// A request body: its bytes, and the same bytes as text when they are UTF-8.
#[derive(Clone, Debug)]
pub(crate) struct Body {
    bytes: Bytes,
    text: Option<Arc<String>>,
}

impl Body {
    /// `bytes` as a body: checked as UTF-8 once (at the speed of the formats' own check),
    /// kept as text when they are, as plain bytes when not.
    pub(crate) fn from_vec(bytes: Vec<u8>) -> Body {
        match condense_formats::utf8_string(bytes) {
            Ok(text) => {
                let text = Arc::new(text);
                Body {
                    bytes: Bytes::from_owner(Shared(Arc::clone(&text))),
                    text: Some(text),
                }
            }
            Err(bytes) => Body {
                bytes: Bytes::from(bytes),
                text: None,
            },
        }
    }

    /// The body's bytes (a clone shares them).
    pub(crate) fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The same bytes as text, when they are UTF-8.
    pub(crate) fn text(&self) -> Option<&Arc<String>> {
        self.text.as_ref()
    }
}

/// The text under a body's bytes ([`Bytes::from_owner`]).
struct Shared(Arc<String>);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// Why a body could not be read whole.
pub(crate) enum Unread {
    /// Over `max` bytes.
    TooLarge,
    /// The connection failed (or the client went away).
    Failed(BoxError),
}

/// Reads `body` whole into one buffer, `declared` bytes (its `Content-Length`) reserved up
/// front; more than `max` bytes is [`Unread::TooLarge`].
pub(crate) async fn collect<B>(
    body: B,
    max: usize,
    declared: Option<usize>,
) -> Result<Vec<u8>, Unread>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let mut body = std::pin::pin!(Limited::new(body, max));
    let mut out = Vec::with_capacity(declared.unwrap_or(0).min(max));
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(e) if e.is::<LengthLimitError>() => return Err(Unread::TooLarge),
            Err(e) => return Err(Unread::Failed(e)),
        };
        if let Ok(data) = frame.into_data() {
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use http_body_util::Full;
    use hyper::body::Frame;
    use std::collections::VecDeque;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A body that arrives in the chunks given.
    struct Chunks(VecDeque<&'static str>);

    impl hyper::body::Body for Chunks {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(|c| Ok(Frame::data(Bytes::from(c)))))
        }
    }

    #[test]
    fn a_utf8_body_is_its_text_shared_and_another_is_bytes() {
        let body = Body::from_vec(br#"{"messages":[]}"#.to_vec());
        let text = body.text().unwrap();
        assert_eq!(body.bytes().as_ref(), text.as_bytes());
        // The same memory, not a copy.
        assert_eq!(body.bytes().as_ptr(), text.as_ptr());
        let odd = Body::from_vec(vec![b'{', 0xff, b'}']);
        assert!(odd.text().is_none());
        assert_eq!(odd.bytes().as_ref(), [b'{', 0xff, b'}']);
    }

    #[tokio::test]
    async fn chunks_are_read_whole_and_a_body_over_the_limit_is_too_large() {
        let chunks = Chunks(["{\"a\":", "1,", "\"b\":2}"].into());
        let whole = collect(chunks, 100, Some(13)).await.ok().unwrap();
        assert_eq!(whole, b"{\"a\":1,\"b\":2}");
        let over = Chunks(["{\"a\":", "1,", "\"b\":2}"].into());
        assert!(matches!(
            collect(over, 12, None).await,
            Err(Unread::TooLarge)
        ));
        let big = Full::new(Bytes::from(vec![b'x'; 11]));
        assert!(matches!(
            collect(big, 10, None).await,
            Err(Unread::TooLarge)
        ));
        let fits = Full::new(Bytes::from(vec![b'x'; 10]));
        assert_eq!(collect(fits, 10, None).await.ok().unwrap().len(), 10);
    }
}
