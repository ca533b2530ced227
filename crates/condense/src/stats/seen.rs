//! The repeated tool results `stats` reports: results of the same text (of
//! [`MIN_DUPLICATE_CHARS`] characters or more) met again in one conversation.

use super::MIN_DUPLICATE_CHARS;
use condense_model::{Block, Content};
use std::borrow::Cow;
use std::collections::HashMap;

/// The tool result texts of a conversation seen so far, to find the repeated ones.
#[derive(Default)]
pub(super) struct Seen<'c> {
    /// By their hash ([`Block::text_hash`]: one fast pass over each text), every text with it.
    texts: HashMap<u64, Vec<Cow<'c, str>>>,
}

impl<'c> Seen<'c> {
    /// Whether the text of `content` (of [`MIN_DUPLICATE_CHARS`] or more) was seen before;
    /// remembers it. The text of one text block is borrowed, not joined into a copy.
    pub(super) fn repeated(&mut self, content: &'c Content) -> bool {
        let text = match content.blocks.as_slice() {
            [Block::Text(t)] => Cow::Borrowed(t.text.as_str()),
            _ => Cow::Owned(content.text()),
        };
        // A char is at most 4 bytes: from 4 bytes a char on, no need to count them.
        let long = text.len() >= 4 * MIN_DUPLICATE_CHARS
            || (text.len() >= MIN_DUPLICATE_CHARS && text.chars().count() >= MIN_DUPLICATE_CHARS);
        if !long {
            return false;
        }
        let same = self.texts.entry(Block::text_hash(&text)).or_default();
        if same.contains(&text) {
            return true;
        }
        same.push(text);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_repeated_from_its_second_time_and_only_when_long_enough() {
        let long = "é".repeat(MIN_DUPLICATE_CHARS);
        let short = "é".repeat(MIN_DUPLICATE_CHARS - 1);
        let (a, b) = ("a".repeat(150), "b".repeat(150));
        let contents = [
            Content::string(long.clone()),
            Content::blocks(vec![Block::text(long)]),
            Content::blocks(vec![Block::text(a.clone()), Block::text(b.clone())]),
            // The same text as the two blocks joined by their line break.
            Content::string(format!("{a}\n{b}")),
            Content::string(short.clone()),
            Content::string(short),
        ];
        let mut seen = Seen::default();
        let repeated: Vec<bool> = contents.iter().map(|c| seen.repeated(c)).collect();
        assert_eq!(repeated, [false, true, false, true, false, false]);
    }
}
