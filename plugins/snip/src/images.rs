//! Base64 images, in messages or inside tool results, replaced by a metadata text block.

use crate::markers::{base64_decoded_len, image_marker};
use condense_abi::Host;
use condense_model::{Block, ImageSource, TextBlock};
use condense_tokens::image::{image_dimensions, tokens_for_dimensions};

/// What became of one image.
pub enum Stripped {
    /// Replaced; the block now holds the marker.
    Done { detail: String, tokens: usize },
    /// Left as it was: the marker would not be smaller (a tiny image).
    NotShorter,
    /// Not a base64 image (a URL or file reference).
    NotBase64,
}

/// Replaces `block`, a base64 [`Block::Image`], by a text block holding its metadata and the
/// store key of its data. The marker must be shorter than the data and cost fewer tokens than
/// the image (as `condense-tokens` estimates it) or the image stays. The image's `extra`
/// (a `cache_control` breakpoint, say) moves to the text block.
pub fn strip(block: &mut Block, host: &dyn Host) -> Result<Stripped, String> {
    let Block::Image(image) = block else {
        return Ok(Stripped::NotBase64);
    };
    let ImageSource::Base64 { media_type, data } = &image.source else {
        return Ok(Stripped::NotBase64);
    };
    let dims = image_dimensions(data);
    let decoded = base64_decoded_len(data);
    let before = tokens_for_dimensions(dims);
    let smaller = |marker: &str| marker.len() < data.len() && host.count_tokens(marker) < before;
    // A lower bound first (empty key), so a tiny image costs no store write.
    if !smaller(&image_marker(media_type, decoded, dims, "")) {
        return Ok(Stripped::NotShorter);
    }
    let key = host
        .store_put(data.as_bytes())
        .map_err(|e| format!("snip: cannot store an image: {e}"))?;
    let marker = image_marker(media_type, decoded, dims, &key);
    if !smaller(&marker) {
        return Ok(Stripped::NotShorter);
    }
    let tokens = before.saturating_sub(host.count_tokens(&marker));
    let dims_text = dims.map_or(String::new(), |(w, h)| format!(", {w}x{h}"));
    let detail = format!(
        "{media_type}, {decoded} bytes decoded{dims_text}; stored under key {key}",
        decoded = crate::markers::thousands(decoded)
    );
    let extra = image.extra.clone();
    *block = Block::Text(TextBlock {
        text: marker,
        extra,
    });
    Ok(Stripped::Done { detail, tokens })
}
