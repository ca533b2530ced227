//! Token estimates with the pipeline's tokenizer, mirroring the host's own counter: a text or
//! thinking block counts its text, a tool use its name and input JSON, a tool result its blocks,
//! an image the estimate from its dimensions, an opaque block its JSON; every chat message adds
//! [`MESSAGE_OVERHEAD_TOKENS`] and an event line costs nothing.
//!
//! The stages use these to estimate what replacing messages saves: the host counts the whole
//! conversation, the stages count the parts they replace. Every function takes anything that
//! [`CountTokens`]: a stage's host services, the host's own `TokenCounter`, a test host.
//!
//! ```
//! use condense_model::{Block, CountTokens, Message, Role};
//! use condense_turns::measure::{cut_to_tokens, message_tokens};
//!
//! /// One token per word, for the example.
//! struct Words;
//! impl CountTokens for Words {
//!     fn count_tokens(&self, text: &str) -> usize {
//!         text.split_whitespace().count()
//!     }
//! }
//! let m = Message::new("u1", Role::User, vec![Block::text("fix the failing test")]);
//! assert_eq!(message_tokens(&Words, &m), 4 + condense_budget::MESSAGE_OVERHEAD_TOKENS);
//! assert_eq!(cut_to_tokens(&Words, "one two\nthree four", 3).text, "one two");
//! ```

use condense_budget::image::base64_image_tokens;
use condense_budget::MESSAGE_OVERHEAD_TOKENS;
use condense_model::read::content_pieces;
use condense_model::{Content, CountTokens, Piece, ReadMessage, Role};

/// Tokens of one [`Piece`] of content: a string counted on its own, or an image's estimate.
pub fn piece_tokens<C: CountTokens + ?Sized>(counter: &C, piece: Piece<'_>) -> usize {
    match piece {
        Piece::Text(text) => counter.count_tokens(text),
        Piece::Image { base64 } => base64_image_tokens(base64),
    }
}

/// Tokens of a content's blocks.
pub fn content_tokens<C: CountTokens + ?Sized>(counter: &C, content: &Content) -> usize {
    let mut tokens = 0;
    content_pieces(content, &mut |p| tokens += piece_tokens(counter, p));
    tokens
}

/// Tokens of a message (the model's, or a view of one: [`ReadMessage`]): its blocks plus the
/// overhead; 0 for an event line.
pub fn message_tokens<C: CountTokens + ?Sized, M: ReadMessage + ?Sized>(
    counter: &C,
    message: &M,
) -> usize {
    if message.role() == Role::Event {
        return 0;
    }
    let mut tokens = MESSAGE_OVERHEAD_TOKENS;
    message.pieces(&mut |p| tokens += piece_tokens(counter, p));
    tokens
}

/// Tokens of several messages.
pub fn messages_tokens<'m, C: CountTokens + ?Sized, M: ReadMessage + 'm>(
    counter: &C,
    messages: impl IntoIterator<Item = &'m M>,
) -> usize {
    messages
        .into_iter()
        .map(|m| message_tokens(counter, m))
        .sum()
}

/// A text cut to a token budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The text, or its longest prefix within the budget (ending at a line end when one is in
    /// its second half).
    pub text: String,
    /// Whether anything was cut.
    pub cut: bool,
    /// Tokens of the whole original text.
    pub original_tokens: usize,
}

/// `text` cut to at most `max_tokens` tokens (a prefix, on a char boundary).
pub fn cut_to_tokens<C: CountTokens + ?Sized>(counter: &C, text: &str, max_tokens: usize) -> Cut {
    let original_tokens = counter.count_tokens(text);
    if original_tokens <= max_tokens {
        return Cut {
            text: text.to_string(),
            cut: false,
            original_tokens,
        };
    }
    // The longest char-boundary prefix within the budget (binary search: prefix counts grow with
    // the prefix, give or take a merge at the cut).
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect();
    let (mut lo, mut hi) = (0usize, bounds.len() - 1);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if counter.count_tokens(&text[..bounds[mid]]) <= max_tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut end = bounds[lo];
    if let Some(nl) = text[..end].rfind('\n') {
        if nl >= end / 2 {
            end = nl;
        }
    }
    Cut {
        text: text[..end].to_string(),
        cut: true,
        original_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::{Block, Image, ImageSource, Message, RawJson, ToolResult};

    /// The `estimate` tokenizer's rule (bytes / 4, rounded up), what the test host counts with.
    struct Estimate;
    impl CountTokens for Estimate {
        fn count_tokens(&self, text: &str) -> usize {
            text.len().div_ceil(4)
        }
    }

    #[test]
    fn cuts_within_the_budget_at_a_line_end() {
        let host = Estimate;
        let text: String = (0..200).map(|i| format!("line {i:03} of text\n")).collect();
        let cut = cut_to_tokens(&host, &text, 100);
        assert!(cut.cut);
        assert!(host.count_tokens(&cut.text) <= 100);
        assert!(host.count_tokens(&cut.text) > 90);
        assert!(cut.text.ends_with("of text"));
        assert!(text.starts_with(&cut.text));
        assert_eq!(cut.original_tokens, host.count_tokens(&text));
        let whole = cut_to_tokens(&host, "short", 100);
        assert!(!whole.cut);
        assert_eq!(whole.text, "short");
    }

    #[test]
    fn cuts_multibyte_text_on_char_boundaries() {
        let host = Estimate;
        let text = "日本語".repeat(100);
        for max in [0, 1, 2, 5, 37] {
            let cut = cut_to_tokens(&host, &text, max);
            assert!(host.count_tokens(&cut.text) <= max, "{max}");
            assert!(text.starts_with(&cut.text));
        }
    }

    #[test]
    fn messages_count_their_blocks_the_overhead_and_never_an_event() {
        let host = Estimate;
        let image = Block::Image(Image {
            source: ImageSource::Reference {
                json: RawJson::default(),
            },
            extra: RawJson::default(),
        });
        let result = Block::ToolResult(ToolResult {
            tool_use_id: "c1".into(),
            content: Content::blocks(vec![Block::text("12345678"), image.clone()]),
            is_error: None,
            extra: RawJson::default(),
        });
        let call = Block::tool_use(
            "c1",
            "Bash",
            RawJson::from_string_unchecked(r#"{"a":1}"#.into()),
        );
        // "Bash" is 1, its input 2; the nested text 2 and the image the flat estimate.
        let fallback = condense_budget::image::IMAGE_FALLBACK_TOKENS;
        assert_eq!(
            content_tokens(&host, &Content::blocks(vec![call.clone()])),
            3
        );
        assert_eq!(
            content_tokens(&host, &Content::blocks(vec![result.clone()])),
            2 + fallback
        );
        let m = Message::new("m", Role::User, vec![call, result]);
        assert_eq!(
            message_tokens(&host, &m),
            MESSAGE_OVERHEAD_TOKENS + 5 + fallback
        );
        let event = Message::new("e", Role::Event, vec![Block::text("not sent")]);
        assert_eq!(message_tokens(&host, &event), 0);
        let dynamic: &dyn CountTokens = &host;
        assert_eq!(
            messages_tokens(dynamic, [&m, &event]),
            message_tokens(&host, &m)
        );
    }
}
