//! What these tests need beyond `condense_testing`: the stage's own token estimate of a
//! conversation, a runner that hands the stage that estimate as the conversation's count, and
//! the stored state in a form short enough to snapshot.

use condense_model::id_list::IdList;
use condense_model::Conversation;
use condense_testing::{Applied, MemoryHost};
use context_collapse::ContextCollapse;
use serde_json::{json, Value};

/// Tokens of a conversation as the stage estimates them (bytes / 4 with the default host).
pub fn tokens(host: &MemoryHost, conv: &Conversation) -> usize {
    condense_turns::measure::messages_tokens(host, &conv.messages)
}

/// Runs the stage with the host's conversation count set to the input's size.
pub fn run(stage: &ContextCollapse, conv: &Conversation, host: &mut MemoryHost) -> Applied {
    host.run.conversation_tokens = tokens(host, conv);
    condense_testing::run(stage, conv, host)
}

/// The state with each summary shown by its length and the id lists by their ends and count.
pub fn state_summary(host: &MemoryHost) -> Value {
    let mut v = host.state_json();
    if let Some(list) = v.get_mut("collapses").and_then(Value::as_array_mut) {
        for c in list {
            let ids: IdList = serde_json::from_value(c["ids"].take()).unwrap();
            c["ids"] = json!(format!(
                "{} ids: {} … {}",
                ids.len(),
                ids.first().unwrap_or_default(),
                ids.last().unwrap_or_default()
            ));
        }
    }
    v
}
