//! What these tests need beyond `condense_testing`: the stage's own token estimate of a
//! conversation, and a runner that hands the stage that estimate as the conversation's count.

use autocompact::Autocompact;
use condense_model::Conversation;
use condense_testing::{Applied, MemoryHost};

/// Tokens of a conversation's messages as the stage estimates them.
pub fn tokens(host: &MemoryHost, conv: &Conversation) -> usize {
    condense_turns::measure::messages_tokens(host, &conv.messages)
}

/// Runs the stage with the host's conversation count set to the input's size.
pub fn run(stage: &Autocompact, conv: &Conversation, host: &mut MemoryHost) -> Applied {
    host.run.conversation_tokens = tokens(host, conv);
    condense_testing::run(stage, conv, host)
}
