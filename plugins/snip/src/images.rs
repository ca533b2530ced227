//! Base64 images, in messages or inside tool results, replaced by a metadata text block.

use crate::markers::{base64_decoded_len, image_marker};
use condense_abi::{Context, StageError};
use condense_budget::image::{image_dimensions, tokens_for_dimensions};
use condense_model::{Block, ImageSource, TextBlock};

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
/// the image (as `condense-budget` estimates it) or the image stays. The image's `extra`
/// (a `cache_control` breakpoint, say) moves to the text block.
pub fn strip(block: &mut Block, cx: &Context<'_>) -> Result<Stripped, StageError> {
    let Block::Image(image) = block else {
        return Ok(Stripped::NotBase64);
    };
    let ImageSource::Base64 { media_type, data } = &image.source else {
        return Ok(Stripped::NotBase64);
    };
    let dims = image_dimensions(data);
    let decoded = base64_decoded_len(data);
    let before = tokens_for_dimensions(dims);
    let smaller = |marker: &str| marker.len() < data.len() && cx.count_tokens(marker) < before;
    // A lower bound first (empty key), so a tiny image costs no store write.
    if !smaller(&image_marker(media_type, decoded, dims, "")) {
        return Ok(Stripped::NotShorter);
    }
    let key = cx
        .store_put(data.as_bytes())
        .map_err(|e| format!("cannot store an image: {}", e.message()))?;
    let marker = image_marker(media_type, decoded, dims, &key);
    if !smaller(&marker) {
        return Ok(Stripped::NotShorter);
    }
    let tokens = before.saturating_sub(cx.count_tokens(&marker));
    let dims_text = dims.map_or(String::new(), |(w, h)| format!(", {w}x{h}"));
    let detail = format!(
        "{media_type}, {decoded} bytes decoded{dims_text}; stored under key {key}",
        decoded = condense_text::thousands(decoded)
    );
    let extra = image.extra.clone();
    *block = Block::Text(TextBlock {
        text: marker,
        extra,
    });
    Ok(Stripped::Done { detail, tokens })
}
