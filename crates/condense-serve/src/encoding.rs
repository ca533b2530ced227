//! Content-encoded request bodies (`Content-Encoding: gzip`, `deflate`, `zstd`; Codex can send
//! zstd): decoded with pure-Rust decoders (flate2 on miniz_oxide, ruzstd) so the pipeline can
//! read them. Decoding stops one byte past the body limit, so a small body that inflates to
//! gigabytes (a decompression bomb) costs at most the limit.

use std::io::Read;

/// Why a body could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// An encoding condense has no decoder for (`br`, ...): the body passes through as it is.
    #[error("the request body is encoded as `{0}`, which condense does not decode")]
    Unknown(String),
    /// The decoded body is over the limit.
    #[error("the decoded request body is over the limit")]
    TooLarge,
    /// The bytes are not what the encoding says.
    #[error("the request body does not decode as `{encoding}`: {reason}")]
    Corrupt { encoding: String, reason: String },
}

/// The codings of a `Content-Encoding` value in the order they were applied, without
/// `identity`; empty for none.
pub fn codings(header: &str) -> Vec<String> {
    header
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty() && c != "identity")
        .collect()
}

/// Decodes `body`, encoded with `codings` (in the order applied), into at most `max` bytes.
pub fn decode(body: &[u8], codings: &[String], max: usize) -> Result<Vec<u8>, DecodeError> {
    if let Some(unknown) = codings.iter().find(|c| !is_known(c)) {
        return Err(DecodeError::Unknown(unknown.clone()));
    }
    let mut data = body.to_vec();
    // The last coding applied is the first undone.
    for coding in codings.iter().rev() {
        data = decode_one(&data, coding, max).map_err(|e| match e {
            Step::TooLarge => DecodeError::TooLarge,
            Step::Io(e) => DecodeError::Corrupt {
                encoding: coding.clone(),
                reason: e.to_string(),
            },
        })?;
    }
    Ok(data)
}

fn is_known(coding: &str) -> bool {
    matches!(coding, "gzip" | "x-gzip" | "deflate" | "zstd")
}

enum Step {
    TooLarge,
    Io(std::io::Error),
}

fn decode_one(data: &[u8], coding: &str, max: usize) -> Result<Vec<u8>, Step> {
    match coding {
        // Several gzip members in a row are one body (RFC 1952 2.2).
        "gzip" | "x-gzip" => bounded(flate2::read::MultiGzDecoder::new(data), max),
        // HTTP's deflate is zlib-wrapped (RFC 9110 8.4.1.2); some clients send raw deflate.
        "deflate" => match bounded(flate2::read::ZlibDecoder::new(data), max) {
            Err(Step::Io(_)) => bounded(flate2::read::DeflateDecoder::new(data), max),
            other => other,
        },
        _ => zstd(data, max),
    }
}

/// zstd: one frame after another until the input ends (concatenated frames are one stream).
fn zstd(mut data: &[u8], max: usize) -> Result<Vec<u8>, Step> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let mut decoder = ruzstd::decoding::StreamingDecoder::new(&mut data)
            .map_err(|e| Step::Io(std::io::Error::other(e)))?;
        let room = max.saturating_sub(out.len());
        let frame = bounded(&mut decoder, room)?;
        out.extend(frame);
    }
    Ok(out)
}

/// Reads `reader` to its end, or fails once it yields more than `max` bytes.
fn bounded(reader: impl Read, max: usize) -> Result<Vec<u8>, Step> {
    let mut out = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    reader.take(limit).read_to_end(&mut out).map_err(Step::Io)?;
    if out.len() > max {
        return Err(Step::TooLarge);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn zstd(data: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
    }

    const BODY: &[u8] =
        br#"{"model":"m","messages":[{"role":"user","content":"hello hello hello"}]}"#;

    #[test]
    fn each_coding_and_a_stack_of_them_decode() {
        let c = |s: &str| codings(s);
        assert_eq!(decode(&gzip(BODY), &c("gzip"), 1000).unwrap(), BODY);
        assert_eq!(decode(&zlib(BODY), &c("deflate"), 1000).unwrap(), BODY);
        assert_eq!(decode(&zstd(BODY), &c("ZSTD"), 1000).unwrap(), BODY);
        // Applied gzip first, then zstd: undone in reverse.
        assert_eq!(
            decode(&zstd(&gzip(BODY)), &c("gzip, identity, zstd"), 1000).unwrap(),
            BODY
        );
        let mut two = zstd(&BODY[..10]);
        two.extend(zstd(&BODY[10..]));
        assert_eq!(decode(&two, &c("zstd"), 1000).unwrap(), BODY);
        assert!(codings(" identity ").is_empty());
    }

    #[test]
    fn a_bomb_stops_at_the_limit() {
        // 16 MiB of zeros compresses to a few KiB.
        let zeros = vec![0u8; 16 << 20];
        for (coded, coding) in [(gzip(&zeros), "gzip"), (zstd(&zeros), "zstd")] {
            assert!(coded.len() < 1 << 20, "{coding}: {}", coded.len());
            assert_eq!(
                decode(&coded, &codings(coding), 1 << 20),
                Err(DecodeError::TooLarge),
                "{coding}"
            );
        }
        assert_eq!(
            decode(&gzip(BODY), &codings("gzip"), BODY.len()).unwrap(),
            BODY
        );
        assert_eq!(
            decode(&gzip(BODY), &codings("gzip"), BODY.len() - 1),
            Err(DecodeError::TooLarge)
        );
    }

    #[test]
    fn unknown_and_corrupt_bodies_say_why() {
        assert_eq!(
            decode(BODY, &codings("br"), 1000),
            Err(DecodeError::Unknown("br".into()))
        );
        assert!(matches!(
            decode(BODY, &codings("gzip"), 1000),
            Err(DecodeError::Corrupt { encoding, .. }) if encoding == "gzip"
        ));
        assert!(matches!(
            decode(BODY, &codings("zstd"), 1000),
            Err(DecodeError::Corrupt { .. })
        ));
    }
}
