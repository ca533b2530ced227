//! Token estimates with the host's tokenizer, mirroring the host's own counter: a text or
//! thinking block counts its text, a tool use its name and input JSON, a tool result its blocks,
//! an image the estimate from its dimensions, an opaque block its JSON; every chat message adds
//! [`MESSAGE_OVERHEAD_TOKENS`] and an event line costs nothing.
//!
//! The stages use these to estimate what replacing messages saves: the host counts the whole
//! conversation (`Host::conversation_tokens`), the stages count the parts they replace.

pub use condense_abi::text::thousands;
use condense_abi::Host;
use condense_model::{Block, Content, Message, Role};
pub use condense_tokens::MESSAGE_OVERHEAD_TOKENS;

/// Tokens of one block.
pub fn block_tokens(host: &dyn Host, block: &Block) -> usize {
    match block {
        Block::Text(t) => host.count_tokens(&t.text),
        Block::Thinking(t) => host.count_tokens(&t.thinking),
        Block::ToolUse(t) => host.count_tokens(&t.name) + host.count_tokens(t.input.as_str()),
        Block::ToolResult(t) => content_tokens(host, &t.content),
        Block::Image(image) => condense_tokens::image::image_tokens(image),
        Block::Opaque(o) => host.count_tokens(o.json.as_str()),
    }
}

/// Tokens of a content's blocks.
pub fn content_tokens(host: &dyn Host, content: &Content) -> usize {
    content.blocks.iter().map(|b| block_tokens(host, b)).sum()
}

/// Tokens of a message: its blocks plus the overhead; 0 for an event line.
pub fn message_tokens(host: &dyn Host, message: &Message) -> usize {
    if message.role == Role::Event {
        return 0;
    }
    MESSAGE_OVERHEAD_TOKENS + content_tokens(host, &message.content)
}

/// Tokens of several messages.
pub fn messages_tokens<'m>(
    host: &dyn Host,
    messages: impl IntoIterator<Item = &'m Message>,
) -> usize {
    messages.into_iter().map(|m| message_tokens(host, m)).sum()
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
pub fn cut_to_tokens(host: &dyn Host, text: &str, max_tokens: usize) -> Cut {
    let original_tokens = host.count_tokens(text);
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
        if host.count_tokens(&text[..bounds[mid]]) <= max_tokens {
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

/// `fraction × whole`, rounded up to a whole token (a product within 1e-6 of an integer counts
/// as that integer, so `0.9 × 56,000` is 50,400, not 50,401).
pub fn fraction_of(fraction: f64, whole: usize) -> usize {
    let x = fraction * whole as f64;
    let nearest = x.round();
    let t = if (x - nearest).abs() < 1e-6 {
        nearest
    } else {
        x.ceil()
    };
    if t <= 0.0 {
        0
    } else {
        t as usize
    }
}

/// A fraction as a percentage for notes: `0.9` → `90%`, `0.925` → `92.5%`.
pub fn percent(fraction: f64) -> String {
    let p = (fraction * 1000.0).round() / 10.0;
    if p.fract() == 0.0 {
        format!("{p:.0}%")
    } else {
        format!("{p}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_abi::testing::MemoryHost;

    #[test]
    fn cuts_within_the_budget_at_a_line_end() {
        let host = MemoryHost::default();
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
        let host = MemoryHost::default();
        let text = "日本語".repeat(100);
        for max in [0, 1, 2, 5, 37] {
            let cut = cut_to_tokens(&host, &text, max);
            assert!(host.count_tokens(&cut.text) <= max, "{max}");
            assert!(text.starts_with(&cut.text));
        }
    }

    #[test]
    fn fractions_of_a_window() {
        assert_eq!(fraction_of(0.9, 56_000), 50_400);
        assert_eq!(fraction_of(0.95, 180_000), 171_000);
        assert_eq!(fraction_of(0.5, 3), 2);
        assert_eq!(fraction_of(0.0, 100), 0);
        assert_eq!(percent(0.9), "90%");
        assert_eq!(percent(0.925), "92.5%");
    }
}
