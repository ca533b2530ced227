//! The texts snip writes in place of what it removes, and how it recognises them again.
//!
//! Recognising its own output is what makes the stage idempotent without any state: a
//! duplicate marker, a truncated text and an image marker are never processed again.

use crate::Keep;
use condense_model::duplicate::Toward;
use condense_text::{thousands, utf8_prefix, utf8_suffix};

pub use condense_model::duplicate::DUPLICATE_PREFIX;
/// Every image marker starts with this.
pub const IMAGE_PREFIX: &str = "[image removed: ";
/// Every truncation notice starts with this (after the kept head).
const TRUNCATED_PREFIX: &str = "\n... [truncated";

/// The text that replaces a duplicate tool result: a pointer to the occurrence that is kept.
///
/// `[Duplicate file content, see earlier in conversation: tool_use_id toolu_01]`, or `see later
/// in conversation` when `keep = "last"` (the kept copy is then the later one).
/// The form is `condense_model::duplicate`'s, which context-collapse reads too.
pub fn duplicate_marker(keep: Keep, kept_id: &str) -> String {
    let toward = match keep {
        Keep::First => Toward::Earlier,
        Keep::Last => Toward::Later,
    };
    condense_model::duplicate::duplicate_marker(toward, kept_id)
}

/// Whether `text` is a duplicate marker (one line, starting with [`DUPLICATE_PREFIX`]).
pub fn is_duplicate_marker(text: &str) -> bool {
    is_one_line_marker(text, DUPLICATE_PREFIX)
}

/// The text block that replaces an image:
/// `[image removed: image/png, 12,345 bytes decoded, 800x600, store key <key>]` (the
/// dimensions are left out when the header does not give them).
pub fn image_marker(
    media_type: &str,
    decoded_bytes: usize,
    dimensions: Option<(u32, u32)>,
    key: &str,
) -> String {
    let dims = dimensions.map_or(String::new(), |(w, h)| format!(", {w}x{h}"));
    format!(
        "{IMAGE_PREFIX}{media_type}, {} bytes decoded{dims}, store key {key}]",
        thousands(decoded_bytes)
    )
}

/// Whether `text` is an image marker (one line, starting with [`IMAGE_PREFIX`]).
pub fn is_image_marker(text: &str) -> bool {
    is_one_line_marker(text, IMAGE_PREFIX)
}

fn is_one_line_marker(text: &str, prefix: &str) -> bool {
    text.starts_with(prefix) && text.ends_with(']') && !text.contains('\n')
}

/// `text` cut to its first `head_bytes` bytes (back to a character boundary) and, when
/// `tail_bytes > 0`, its last `tail_bytes` bytes (forward to a character boundary), with a
/// notice naming the store key of the original:
///
/// ```text
/// <head>
/// ... [truncated, 12,345 total chars, store key <key>]
/// ```
///
/// or, keeping a tail,
///
/// ```text
/// <head>
/// ... [truncated 8,000 chars, store key <key>] ...
/// <tail>
/// ```
///
/// When the text is an error result whose first meaningful line (`error_line`) is in the part
/// cut out, the line follows the notice, so the error survives the cut:
///
/// ```text
/// <head>
/// ... [truncated, 12,345 total chars, store key <key>]
/// [the error was: error[E0308]: mismatched types]
/// ```
///
/// `None` when head and tail together cover the whole text (nothing would be cut).
pub fn truncated_text(
    text: &str,
    head_bytes: usize,
    tail_bytes: usize,
    key: &str,
    error_line: Option<&str>,
) -> Option<String> {
    let head = utf8_prefix(text, head_bytes);
    let tail = utf8_suffix(text, tail_bytes);
    if head.len() + tail.len() >= text.len() {
        return None;
    }
    let error = error_line
        .filter(|line| !head.contains(line) && !tail.contains(line))
        .map(|line| format!("\n{ERROR_PREFIX}{line}]"))
        .unwrap_or_default();
    let total = text.chars().count();
    let (label, count, gap, close, before_tail) = if tail.is_empty() {
        (", ", thousands(total), " total chars, store key ", "]", "")
    } else {
        let removed = total - head.chars().count() - tail.chars().count();
        (" ", thousands(removed), " chars, store key ", "] ...", "\n")
    };
    // Joined at its exact size: a run holds every truncated result at once, and `format!`
    // grew each to about twice its length (3.7 MB of the heap at the peak of a 4M-token run).
    Some(
        [
            head,
            TRUNCATED_PREFIX,
            label,
            &count,
            gap,
            key,
            close,
            &error,
            before_tail,
            tail,
        ]
        .concat(),
    )
}

/// The start of the line that keeps a truncated error's first meaningful line.
pub const ERROR_PREFIX: &str = "[the error was: ";

/// Whether `text` carries a truncation notice written by [`truncated_text`] (with either
/// wording). Such a text is never truncated again, nor taken for a duplicate.
pub fn is_truncated(text: &str) -> bool {
    // `memmem`, not `str::match_indices`: every tool result is searched at every run, and the
    // portable two-way search took about 2 instructions a byte.
    memchr::memmem::find_iter(text.as_bytes(), TRUNCATED_PREFIX.as_bytes())
        .any(|at| notice_follows(&text[at + TRUNCATED_PREFIX.len()..]))
}

/// Whether `rest` (what follows `\n... [truncated`) continues as one of the two notices.
fn notice_follows(rest: &str) -> bool {
    let (rest, suffix) = if let Some(r) = rest.strip_prefix(", ") {
        (r, " total chars, store key ")
    } else if let Some(r) = rest.strip_prefix(' ') {
        (r, " chars, store key ")
    } else {
        return false;
    };
    let digits = rest
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b',')
        .count();
    digits > 0 && rest[digits..].starts_with(suffix)
}

/// Whether `text` is something snip wrote: a duplicate marker, an image marker or a truncated
/// text. Such texts are never processed again.
pub fn is_snip_output(text: &str) -> bool {
    is_duplicate_marker(text) || is_image_marker(text) || is_truncated(text)
}

/// Bytes that base64 text decodes to, from its length: whitespace and `=` padding are not
/// counted, a `data:...;base64,` prefix is skipped.
pub fn base64_decoded_len(data: &str) -> usize {
    let data = match data.strip_prefix("data:") {
        Some(url) => url.find(',').map_or("", |comma| &url[comma + 1..]),
        None => data,
    };
    let chars = data
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
        .count();
    chars * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_notices_are_recognised_in_both_wordings() {
        let text = "x".repeat(100);
        let head_only = truncated_text(&text, 10, 0, "k1", None).unwrap_or_default();
        assert_eq!(
            head_only,
            format!(
                "{}\n... [truncated, 100 total chars, store key k1]",
                "x".repeat(10)
            )
        );
        assert!(is_truncated(&head_only));
        let with_tail = truncated_text(&text, 10, 5, "k2", None).unwrap_or_default();
        assert!(with_tail.contains("\n... [truncated 85 chars, store key k2] ...\n"));
        assert!(with_tail.ends_with("xxxxx"));
        assert!(is_truncated(&with_tail));
        assert!(!is_truncated("\n... [truncated, lots]"));
        assert!(!is_truncated("plain text"));
        assert_eq!(truncated_text(&text, 60, 40, "k", None), None);
        // An error line cut out is kept after the notice; one still in the head is not repeated.
        let log = format!("{}\nerror: boom", "x".repeat(50));
        let cut = truncated_text(&log, 10, 0, "k3", Some("error: boom")).unwrap_or_default();
        assert!(
            cut.ends_with("store key k3]\n[the error was: error: boom]"),
            "{cut}"
        );
        assert!(is_truncated(&cut));
        let early = format!("error: boom\n{}", "x".repeat(50));
        let cut = truncated_text(&early, 20, 0, "k4", Some("error: boom")).unwrap_or_default();
        assert!(!cut.contains("the error was"), "{cut}");
    }

    #[test]
    fn decoded_length_from_base64_length() {
        assert_eq!(base64_decoded_len("iVBORw0KGgo="), 8);
        assert_eq!(base64_decoded_len("iVBO\nRw0K\nGgo="), 8);
        assert_eq!(base64_decoded_len("data:image/png;base64,iVBORw0KGgo="), 8);
        assert_eq!(base64_decoded_len("QUJD"), 3);
        assert_eq!(base64_decoded_len("QUI="), 2);
    }

    #[test]
    fn markers_are_recognised() {
        assert!(is_duplicate_marker(&duplicate_marker(Keep::First, "t1")));
        assert!(is_duplicate_marker(&duplicate_marker(Keep::Last, "t1")));
        let image = image_marker("image/png", 12_345, Some((800, 600)), "abc");
        assert_eq!(
            image,
            "[image removed: image/png, 12,345 bytes decoded, 800x600, store key abc]"
        );
        assert!(is_image_marker(&image));
        assert!(!is_image_marker("[image removed: x]\nmore"));
    }
}
