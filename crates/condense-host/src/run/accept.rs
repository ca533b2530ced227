//! The host's guards on a stage's change, and messages replaced in place made in the run's
//! conversation (undone when refused).

use super::{LoadedPipeline, RunState};
use crate::guard;
use condense_abi::{replace_messages, Change};
use condense_model::{Conversation, Message};
use condense_tokens::ConversationCount;

/// What the guards found of a conversation they let through: its count and the invariants it
/// breaks (those it was handed broken already).
pub(super) type Checked = (ConversationCount, Vec<guard::Violation>);

/// A stage's output the host's guards let through (see [`LoadedPipeline::accept`]).
pub(super) enum Accepted {
    Unchanged,
    /// The new conversation.
    Whole(Conversation, Checked),
    /// Messages replaced in place, already made in the run's conversation: what they replaced
    /// (by index).
    Replaced(Vec<(usize, Message)>, Checked),
}

impl LoadedPipeline {
    /// Checks a stage's change against the host's guards: the conversation still one the API
    /// accepts (no invariant broken that was not broken before) and not bigger. Messages
    /// replaced in place are made in `state.current` (nothing else is copied) and put back if
    /// refused; the error is the refusal's reason.
    pub(super) fn accept(
        &self,
        change: Change,
        state: &mut RunState,
        current_tokens: usize,
    ) -> Result<Accepted, String> {
        let checked = |conversation: &Conversation, before: &[guard::Violation]| {
            let violations = guard::violations(conversation);
            let broken = guard::introduced(before, &violations);
            if !broken.is_empty() {
                return Err(guard::describe(&broken));
            }
            let count = self.counter.count_conversation(conversation);
            let after = count.total;
            if after > current_tokens {
                return Err(format!(
                    "made the conversation bigger ({current_tokens} -> {after} tokens); compression must never grow it"
                ));
            }
            Ok((count, violations))
        };
        match change {
            Change::Unchanged => Ok(Accepted::Unchanged),
            Change::Whole(conversation) => {
                let checked = checked(&conversation, &state.violations)?;
                Ok(Accepted::Whole(conversation, checked))
            }
            Change::Replaced(messages) => {
                let olds = replace_messages(&mut state.current, messages)
                    .map_err(|e| format!("returned a malformed change: {e}"))?;
                match checked(&state.current, &state.violations) {
                    Ok(checked) => Ok(Accepted::Replaced(olds, checked)),
                    Err(refused) => {
                        for (i, old) in olds {
                            state.current.messages[i] = old;
                        }
                        Err(refused)
                    }
                }
            }
        }
    }
}
