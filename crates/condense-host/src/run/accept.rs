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

/// What the guards found of a conversation they let through: its count, and the invariants it
/// breaks (those it was handed broken already) when they were looked for again (`None`: the
/// change kept every message's shape, [`guard::keeps_invariants`], so they are as before).
pub(super) type Checked = (ConversationCount, Option<Vec<guard::Violation>>);

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
    ///
    /// The invariants are looked for over the whole conversation only for a change that can
    /// break one: a whole new conversation, or a replacement that changes what they are made
    /// of. A replacement that keeps every message's shape (most: a result's text cut, cleared,
    /// persisted) breaks none, and the conversation's own (`state.violations`) are then not
    /// needed: a resumed turn whose stages only do that never makes the pass.
    pub(super) fn accept(
        &self,
        change: Change,
        state: &mut RunState,
        current_tokens: usize,
    ) -> Result<Accepted, String> {
        let not_bigger = |count: &ConversationCount| {
            let after = count.total;
            if after > current_tokens {
                return Err(format!(
                    "made the conversation bigger ({current_tokens} -> {after} tokens); compression must never grow it"
                ));
            }
            Ok(())
        };
        // The invariants `conversation` breaks, none of them new to `before`.
        let guarded = |conversation: &Conversation, before: &[guard::Violation]| {
            let violations = guard::violations(conversation);
            let broken = guard::introduced(before, &violations);
            if !broken.is_empty() {
                return Err(guard::describe(&broken));
            }
            Ok(violations)
        };
        match change {
            Change::Unchanged => Ok(Accepted::Unchanged),
            Change::Whole(conversation) => {
                let before = state.violations();
                let violations = guarded(&conversation, before)?;
                let count = self.counter.count_conversation(&conversation);
                not_bigger(&count)?;
                Ok(Accepted::Whole(conversation, (count, Some(violations))))
            }
            Change::Replaced(messages) => {
                let mut olds = replace_messages(&mut state.current, messages)
                    .map_err(|e| format!("returned a malformed change: {e}"))?;
                let current = &state.current.messages;
                let same_shape = olds
                    .iter()
                    .all(|(i, old)| guard::keeps_invariants(old, &current[*i]));
                if !same_shape && state.violations.is_none() {
                    // What the conversation broke before the change: its messages put back
                    // for the pass, then the change made again.
                    swap_in(&mut state.current, &mut olds);
                    state.violations();
                    swap_in(&mut state.current, &mut olds);
                }
                // Only the replaced messages are counted again.
                let checked = (|| {
                    let violations = match (same_shape, &state.violations) {
                        (true, _) => None,
                        (false, before) => Some(guarded(
                            &state.current,
                            before.as_deref().unwrap_or_default(),
                        )?),
                    };
                    let was: Vec<(usize, &Message)> = olds.iter().map(|(i, m)| (*i, m)).collect();
                    let count = self.counter.recount(&state.count, &state.current, &was);
                    not_bigger(&count)?;
                    Ok((count, violations))
                })();
                match checked {
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

/// Swaps each of `messages` with the message at its index in `conversation`: done twice, both
/// are as they were.
fn swap_in(conversation: &mut Conversation, messages: &mut [(usize, Message)]) {
    for (i, m) in messages {
        std::mem::swap(&mut conversation.messages[*i], m);
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
