//! The count of a conversation after some of its messages were replaced in place, from its
//! count before ([`TokenCounter::recount`]): only the replaced messages are counted again.

use super::{ConversationCount, TokenCounter, MESSAGE_OVERHEAD_TOKENS};
use condense_model::{Conversation, Message, Role};

impl TokenCounter {
    /// The count of `conversation` given `before`, the count of the same conversation before
    /// some of its messages were replaced in place: `replaced` holds, by ascending index, what
    /// each replaced message was (the system prompt and the tools are as they were). Only the
    /// replaced messages are counted again: after a stage replaced a few tool results of a long
    /// conversation, counting it whole hashed every block's text again to find what the cache
    /// knew (about 0.35 M instructions at 160k tokens). The same as
    /// [`TokenCounter::count_conversation`] of `conversation`, which is what it is when
    /// `before` does not fit (another number of messages or blocks).
    ///
    /// ```
    /// use condense_model::{Block, Conversation, Message, Role};
    /// use condense_tokens::{TokenCounter, TokenizerKind};
    /// let counter = TokenCounter::new(TokenizerKind::Estimate);
    /// let m = |id: &str, t: &str| Message::new(id, Role::User, vec![Block::text(t)]);
    /// let mut conv = Conversation { messages: vec![m("a", "one two three"), m("b", "four")], ..Default::default() };
    /// let before = counter.count_conversation(&conv);
    /// let old = std::mem::replace(&mut conv.messages[0], m("a", "one"));
    /// assert_eq!(counter.recount(&before, &conv, &[(0, &old)]), counter.count_conversation(&conv));
    /// ```
    pub fn recount(
        &self,
        before: &ConversationCount,
        conversation: &Conversation,
        replaced: &[(usize, &Message)],
    ) -> ConversationCount {
        self.recounted(before, conversation, replaced)
            .unwrap_or_else(|| self.count_conversation(conversation))
    }

    fn recounted(
        &self,
        before: &ConversationCount,
        conversation: &Conversation,
        replaced: &[(usize, &Message)],
    ) -> Option<ConversationCount> {
        if before.messages.len() != conversation.messages.len() {
            return None;
        }
        let mut count = ConversationCount {
            system: before.system,
            tools: before.tools,
            messages: Vec::with_capacity(before.messages.len()),
            system_messages: 0,
            total: 0,
            blocks: Vec::with_capacity(before.blocks.len()),
        };
        let blocks_of = |m: &Message| {
            if m.is_chat() {
                m.content.blocks.len()
            } else {
                0
            }
        };
        // Where the next message's blocks are in `before.blocks`.
        let mut at = 0;
        let mut replaced = replaced.iter().peekable();
        for (i, m) in conversation.messages.iter().enumerate() {
            let n = match replaced.next_if(|(r, _)| *r == i) {
                Some((_, old)) => {
                    at += blocks_of(old);
                    let mut n = 0;
                    if m.is_chat() {
                        n = MESSAGE_OVERHEAD_TOKENS;
                        for b in &m.content.blocks {
                            let block = self.count_block(b);
                            count.blocks.push(block);
                            n += block;
                        }
                    }
                    n
                }
                None => {
                    let len = blocks_of(m);
                    count
                        .blocks
                        .extend_from_slice(before.blocks.get(at..at + len)?);
                    at += len;
                    before.messages[i]
                }
            };
            if m.role == Role::System {
                count.system_messages += n;
            }
            count.messages.push(n);
        }
        if at != before.blocks.len() || replaced.next().is_some() {
            return None;
        }
        count.total = count.system + count.tools + count.messages.iter().sum::<usize>();
        Some(count)
    }
}
