//! The host's guards on a stage's change, and messages replaced in place made in the run's
//! conversation (undone when refused).

use super::{HostError, LoadedPipeline, RunState};
use crate::archive::{archive_replaced, archive_stage_named, ArchiveOptions, Pairing};
use crate::guard;
use crate::services::{record_replaced, record_rewrites};
use condense_abi::{replace_messages, Change};
use condense_model::{Conversation, Message};
use condense_store::Store;
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
        // `count` counts the conversation once the guards let it through.
        let checked = |conversation: &Conversation,
                       before: &[guard::Violation],
                       count: &dyn Fn(&Conversation) -> ConversationCount| {
            let violations = guard::violations(conversation);
            let broken = guard::introduced(before, &violations);
            if !broken.is_empty() {
                return Err(guard::describe(&broken));
            }
            let count = count(conversation);
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
                let whole = |c: &Conversation| self.counter.count_conversation(c);
                let checked = checked(&conversation, &state.violations, &whole)?;
                Ok(Accepted::Whole(conversation, checked))
            }
            Change::Replaced(messages) => {
                let olds = replace_messages(&mut state.current, messages)
                    .map_err(|e| format!("returned a malformed change: {e}"))?;
                // Only the replaced messages are counted again.
                let was: Vec<(usize, &Message)> = olds.iter().map(|(i, m)| (*i, m)).collect();
                let recount = |c: &Conversation| self.counter.recount(&state.count, c, &was);
                match checked(&state.current, &state.violations, &recount) {
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

impl Accepted {
    /// Makes the change the run's: what it removed archived for `session` in `store` (unless
    /// the stage keeps nothing: `archived` false, secret redaction) and kept for the
    /// summarizer. The guards' findings, for a change; none when there was none.
    pub(super) fn commit(
        self,
        state: &mut RunState,
        (store, session): (&Store, &str),
        archive: ArchiveOptions<'_>,
        archived: bool,
    ) -> Result<Option<Checked>, HostError> {
        match self {
            Accepted::Unchanged => Ok(None),
            Accepted::Whole(conversation, checked) => {
                let pairing = Pairing::of(&state.current, &conversation);
                let mut anchors = Vec::new();
                if archived {
                    let archived = archive_stage_named(
                        store,
                        session,
                        &state.current,
                        &conversation,
                        &pairing,
                        archive,
                    )?;
                    state.segments.extend(archived.segments);
                    anchors = archived.anchors;
                }
                let before = std::mem::replace(&mut state.current, conversation);
                state.prints = vec![None; state.current.messages.len()];
                state.follow_origins(&pairing, &anchors);
                record_rewrites(
                    &mut state.services,
                    before,
                    &state.current,
                    &pairing,
                    archived,
                );
                Ok(Some(checked))
            }
            Accepted::Replaced(olds, checked) => {
                // Already in `state.current`; what they replaced is archived as the same
                // entries the two whole conversations would give.
                let current = &state.current.messages;
                let olds: Vec<(usize, Message)> = olds
                    .into_iter()
                    .filter(|(i, old)| *old != current[*i])
                    .collect();
                if archived && !olds.is_empty() {
                    let pairs = olds.iter().map(|(i, old)| (*i, old, &current[*i]));
                    let archived = archive_replaced(store, session, pairs, archive)?;
                    state.segments.extend(archived.segments);
                }
                state.forget_prints(olds.iter().map(|(i, _)| *i));
                record_replaced(&mut state.services, olds, &state.current, archived);
                Ok(Some(checked))
            }
        }
    }
}
