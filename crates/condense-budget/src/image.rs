//! Image token estimates, from the dimensions in an image's first bytes.
//!
//! Anthropic's rule: an image costs about `width * height / 750` tokens, after the API scales
//! it down so that its long edge is at most 1,568 px and it stays around 1,600 tokens. When
//! the dimensions are unknown (a URL or file reference, an unknown or truncated format) the
//! estimate is a flat [`IMAGE_FALLBACK_TOKENS`]. Base64 characters are never counted as text.

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use condense_model::{Image, ImageSource};

/// Pixels per token in Anthropic's image rule.
pub const IMAGE_PIXELS_PER_TOKEN: u64 = 750;
/// The API scales images whose long edge is longer than this (pixels).
pub const IMAGE_MAX_LONG_EDGE: u64 = 1_568;
/// The most one image costs (the API scales larger images down to about this).
pub const IMAGE_MAX_TOKENS: usize = 1_600;
/// The estimate for an image whose dimensions cannot be read.
pub const IMAGE_FALLBACK_TOKENS: usize = 1_600;

/// How many decoded bytes of a JPEG are searched for its frame header (EXIF blocks and
/// embedded thumbnails come first and can be large).
const JPEG_SCAN_BYTES: usize = 256 * 1024;
/// Enough decoded bytes for the PNG, GIF and WebP headers.
const HEADER_BYTES: usize = 32;

/// Estimated tokens of an image block.
pub fn image_tokens(image: &Image) -> usize {
    match &image.source {
        ImageSource::Base64 { data, .. } => base64_image_tokens(Some(data)),
        ImageSource::Reference { .. } => base64_image_tokens(None),
    }
}

/// Estimated tokens of an image given its base64 data (`None`: a reference, the fallback).
pub fn base64_image_tokens(data: Option<&str>) -> usize {
    data.map_or(IMAGE_FALLBACK_TOKENS, |data| {
        tokens_for_dimensions(image_dimensions(data))
    })
}

/// Estimated tokens of an image with these dimensions ([`image_dimensions`]; unknown: the
/// fallback), for callers that need the dimensions too and decode the header once.
pub fn tokens_for_dimensions(dimensions: Option<(u32, u32)>) -> usize {
    dimensions.map_or(IMAGE_FALLBACK_TOKENS, |(w, h)| tokens_for_size(w, h))
}

/// Tokens for an image of `width` x `height` pixels: scaled so the long edge fits
/// [`IMAGE_MAX_LONG_EDGE`], then `ceil(w * h / 750)`, at most [`IMAGE_MAX_TOKENS`].
pub fn tokens_for_size(width: u32, height: u32) -> usize {
    let (mut w, mut h) = (u64::from(width), u64::from(height));
    let long = w.max(h);
    if long > IMAGE_MAX_LONG_EDGE {
        w = (w * IMAGE_MAX_LONG_EDGE).div_ceil(long);
        h = (h * IMAGE_MAX_LONG_EDGE).div_ceil(long);
    }
    let tokens = (w * h).div_ceil(IMAGE_PIXELS_PER_TOKEN);
    usize::try_from(tokens).map_or(IMAGE_MAX_TOKENS, |t| t.min(IMAGE_MAX_TOKENS))
}

/// Width and height from the base64 data of a PNG, JPEG, GIF or WebP image (a `data:` URL
/// prefix is skipped). Decodes only the first bytes.
pub fn image_dimensions(base64_data: &str) -> Option<(u32, u32)> {
    let data = match base64_data.strip_prefix("data:") {
        Some(url) => &url[url.find(',')? + 1..],
        None => base64_data,
    };
    let head = decode_prefix(data, HEADER_BYTES)?;
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        png(&head)
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        gif(&head)
    } else if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
        webp(&head)
    } else if head.starts_with(&[0xFF, 0xD8]) {
        jpeg(&decode_prefix(data, JPEG_SCAN_BYTES)?)
    } else {
        None
    }
}

/// Standard alphabet, padding optional (we decode prefixes), trailing bits tolerated.
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Decodes about the first `bytes` bytes of base64 text (standard or URL-safe alphabet, line
/// breaks allowed).
fn decode_prefix(data: &str, bytes: usize) -> Option<Vec<u8>> {
    let want_chars = bytes.div_ceil(3) * 4;
    let mut chars: Vec<u8> = Vec::with_capacity(want_chars.min(data.len()));
    for &b in data.as_bytes() {
        if chars.len() == want_chars || b == b'=' {
            break;
        }
        match b {
            b'-' => chars.push(b'+'),
            b'_' => chars.push(b'/'),
            b if b.is_ascii_whitespace() => {}
            b => chars.push(b),
        }
    }
    // A lone trailing character carries no whole byte.
    if chars.len() % 4 == 1 {
        chars.pop();
    }
    LENIENT.decode(&chars).ok()
}

fn be16(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_be_bytes(
        b.get(at..at + 2)?.try_into().ok()?,
    )))
}

fn le16(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_le_bytes(
        b.get(at..at + 2)?.try_into().ok()?,
    )))
}

fn le24(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 3)?;
    Some(u32::from(s[0]) | u32::from(s[1]) << 8 | u32::from(s[2]) << 16)
}

fn nonzero(w: u32, h: u32) -> Option<(u32, u32)> {
    (w > 0 && h > 0).then_some((w, h))
}

/// PNG: the IHDR chunk comes first; width and height are big-endian u32 at 16 and 20.
fn png(b: &[u8]) -> Option<(u32, u32)> {
    if b.get(12..16) != Some(b"IHDR") {
        return None;
    }
    let w = u32::from_be_bytes(b.get(16..20)?.try_into().ok()?);
    let h = u32::from_be_bytes(b.get(20..24)?.try_into().ok()?);
    nonzero(w, h)
}

/// GIF: the logical screen size, little-endian u16 at 6 and 8.
fn gif(b: &[u8]) -> Option<(u32, u32)> {
    nonzero(le16(b, 6)?, le16(b, 8)?)
}

/// WebP: the first chunk is `VP8 ` (lossy), `VP8L` (lossless) or `VP8X` (extended).
fn webp(b: &[u8]) -> Option<(u32, u32)> {
    match b.get(12..16)? {
        b"VP8 " => {
            // Frame tag (3 bytes), start code 9d 01 2a, then 14-bit width and height.
            if b.get(23..26) != Some(&[0x9d, 0x01, 0x2a]) {
                return None;
            }
            nonzero(le16(b, 26)? & 0x3fff, le16(b, 28)? & 0x3fff)
        }
        b"VP8L" => {
            // Signature 0x2f, then 14 bits width - 1 and 14 bits height - 1.
            if b.get(20) != Some(&0x2f) {
                return None;
            }
            let bits = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
            nonzero((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1)
        }
        b"VP8X" => nonzero(le24(b, 24)? + 1, le24(b, 27)? + 1),
        _ => None,
    }
}

/// JPEG: walks the marker segments to the first start-of-frame (SOF0-SOF15 but DHT, JPG and
/// DAC), whose payload holds height then width, big-endian u16.
fn jpeg(b: &[u8]) -> Option<(u32, u32)> {
    let mut i = 2;
    loop {
        // Markers may be padded with any number of 0xFF bytes.
        while *b.get(i)? == 0xFF && *b.get(i + 1)? == 0xFF {
            i += 1;
        }
        if *b.get(i)? != 0xFF {
            return None;
        }
        let marker = *b.get(i + 1)?;
        match marker {
            // Standalone markers without a length.
            0x01 | 0xD0..=0xD7 => {
                i += 2;
                continue;
            }
            // Start of scan or end of image before any frame header.
            0xD9 | 0xDA => return None,
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => {
                return nonzero(be16(b, i + 7)?, be16(b, i + 5)?);
            }
            _ => {}
        }
        let len = be16(b, i + 2)? as usize;
        if len < 2 {
            return None;
        }
        i += 2 + len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;

    fn b64(bytes: &[u8]) -> String {
        STANDARD.encode(bytes)
    }

    fn png_bytes(w: u32, h: u32) -> Vec<u8> {
        let mut v = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        v.extend_from_slice(&w.to_be_bytes());
        v.extend_from_slice(&h.to_be_bytes());
        v.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        v.extend_from_slice(&[0u8; 100]);
        v
    }

    #[test]
    fn png_dimensions() {
        assert_eq!(
            image_dimensions(&b64(&png_bytes(640, 480))),
            Some((640, 480))
        );
        let url = format!("data:image/png;base64,{}", b64(&png_bytes(3, 5)));
        assert_eq!(image_dimensions(&url), Some((3, 5)));
        // Line-wrapped base64 (MIME style).
        let wrapped: String = b64(&png_bytes(7, 9))
            .as_bytes()
            .chunks(10)
            .map(|c| format!("{}\n", std::str::from_utf8(c).unwrap()))
            .collect();
        assert_eq!(image_dimensions(&wrapped), Some((7, 9)));
    }

    #[test]
    fn gif_and_webp_dimensions() {
        let mut gif = b"GIF89a".to_vec();
        gif.extend_from_slice(&[0x20, 0x03, 0x58, 0x02]); // 800 x 600
        gif.extend_from_slice(&[0; 30]);
        assert_eq!(image_dimensions(&b64(&gif)), Some((800, 600)));

        let mut lossy = b"RIFF\0\0\0\0WEBPVP8 \0\0\0\0".to_vec();
        lossy.extend_from_slice(&[0, 0, 0, 0x9d, 0x01, 0x2a]);
        lossy.extend_from_slice(&[0x00, 0x04, 0x00, 0x03]); // 1024 x 768
        lossy.extend_from_slice(&[0; 16]);
        assert_eq!(image_dimensions(&b64(&lossy)), Some((1024, 768)));

        let mut lossless = b"RIFF\0\0\0\0WEBPVP8L\0\0\0\0\x2f".to_vec();
        let bits: u32 = (100 - 1) | ((50 - 1) << 14);
        lossless.extend_from_slice(&bits.to_le_bytes());
        lossless.extend_from_slice(&[0; 16]);
        assert_eq!(image_dimensions(&b64(&lossless)), Some((100, 50)));

        let mut ext = b"RIFF\0\0\0\0WEBPVP8X\0\0\0\0\0\0\0\0".to_vec();
        ext.extend_from_slice(&[0x3f, 0x01, 0x00, 0xc7, 0x00, 0x00]); // 320 x 200
        ext.extend_from_slice(&[0; 16]);
        assert_eq!(image_dimensions(&b64(&ext)), Some((320, 200)));
    }

    #[test]
    fn jpeg_dimensions_after_app_segments() {
        let mut jpg = vec![0xFF, 0xD8];
        // An APP1 (EXIF) segment of 2,000 bytes, then a DHT, then SOF2 (progressive).
        jpg.extend_from_slice(&[0xFF, 0xE1, 0x07, 0xD0]);
        jpg.extend_from_slice(&[0xAB; 2000 - 2]);
        jpg.extend_from_slice(&[0xFF, 0xC4, 0x00, 0x04, 0x00, 0x00]);
        jpg.extend_from_slice(&[0xFF, 0xFF, 0xC2, 0x00, 0x11, 0x08, 0x04, 0x38, 0x07, 0x80]);
        jpg.extend_from_slice(&[0; 64]);
        assert_eq!(image_dimensions(&b64(&jpg)), Some((1920, 1080)));
        // Truncated before the frame header.
        assert_eq!(image_dimensions(&b64(&jpg[..100])), None);
    }

    #[test]
    fn garbage_is_unknown() {
        assert_eq!(image_dimensions(""), None);
        assert_eq!(image_dimensions("!!!!"), None);
        assert_eq!(image_dimensions(&b64(b"hello world, not an image")), None);
        assert_eq!(image_dimensions(&b64(&png_bytes(0, 10))), None);
        assert_eq!(image_dimensions("data:image/png;base64"), None);
    }

    #[test]
    fn token_rule() {
        // 1000 x 1000 = 1,333.3 tokens, rounded up.
        assert_eq!(tokens_for_size(1000, 1000), 1334);
        assert_eq!(tokens_for_size(200, 200), 54);
        assert_eq!(tokens_for_size(1, 1), 1);
        // Large images are scaled down and capped.
        assert_eq!(tokens_for_size(4000, 3000), IMAGE_MAX_TOKENS);
        // 3000 x 100 scales to 1568 x 53: 111 tokens, not 400.
        assert_eq!(tokens_for_size(3000, 100), 111);
        assert_eq!(tokens_for_size(u32::MAX, u32::MAX), IMAGE_MAX_TOKENS);
    }
}
