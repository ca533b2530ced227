//! The originals a summary is written from.
//!
//! By the time context collapse or autocompact asks for a summary, earlier levels may have
//! cleared, deduplicated, truncated or persisted the tool results it covers: a summary written
//! from `[Old tool result content cleared]` forgets the error it was. The host keeps every
//! original (that is what makes `condense expand` exact), so it hands the summarizer the
//! originals instead of the placeholders, whoever the asking stage is:
//!
//! - messages rewritten by a stage of **this run** are taken as they were before the first
//!   stage that changed them ([`Originals::record`] after every stage that changed something);
//! - messages that were **already** placeholders in the input (the agent kept condense's output
//!   of an earlier run) are unwound through the session's archive (`archive::Rewrites`): its
//!   index read once per run, on the first summary request, and only the segments indexed
//!   with a message of a span read.
//!
//! Messages are matched by id within a run, by content hash across runs. A summary message (one
//! that stands for a span) is not unfolded: it reaches the summarizer as an earlier summary.

use crate::archive::{Pairing, Rewrites};
use condense_model::{Conversation, Message};
use condense_store::Store;
use std::collections::HashMap;
use std::sync::OnceLock;

/// See the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct Originals {
    /// Id -> the message as it was before this run's first stage changed it.
    by_id: HashMap<String, Message>,
    /// The archive's in-place rewrites of earlier runs (`None`: the archive could not be read).
    rewrites: OnceLock<Option<Rewrites>>,
}

impl Originals {
    /// Records the messages of `before` that a stage changed in place in `after` (same id, other
    /// content: `pairing` says which), keeping the first version seen. `before` is the stage's
    /// input, which the run drops once `after` replaces it: the changed messages are moved out
    /// of it, not copied (at 4M tokens snip changes 1,500 messages, 9 MB of text, and the copy
    /// was the heap's peak).
    pub(crate) fn record(&mut self, before: Conversation, after: &Conversation, pairing: &Pairing) {
        let mut after_of: Vec<Option<usize>> = vec![None; before.messages.len()];
        for (b, a) in pairing.changed_in_place() {
            after_of[b] = Some(a);
        }
        let changed = before.messages.into_iter().zip(after_of);
        self.record_replaced(
            changed.filter_map(|(message, a)| Some((a?, message))),
            after,
        );
    }

    /// [`record`](Self::record) for messages a stage replaced in place: each `(index in
    /// after, what it replaced)` kept under its message's id, unless an earlier stage's
    /// original is kept already.
    pub(crate) fn record_replaced(
        &mut self,
        originals: impl IntoIterator<Item = (usize, Message)>,
        after: &Conversation,
    ) {
        for (a, message) in originals {
            let id = &after.messages[a].id;
            if !self.by_id.contains_key(id) {
                self.by_id.insert(id.clone(), message);
            }
        }
    }

    /// Forgets the originals of the messages a stage changed without archiving (secret
    /// redaction): from now on their current version is their original for the summarizer.
    pub(crate) fn forget_changed(&mut self, after: &Conversation, pairing: &Pairing) {
        self.forget(
            pairing
                .changed_in_place()
                .map(|(_, a)| after.messages[a].id.as_str()),
        );
    }

    /// Forgets the originals kept under `ids`.
    pub(crate) fn forget<'i>(&mut self, ids: impl IntoIterator<Item = &'i str>) {
        for id in ids {
            self.by_id.remove(id);
        }
    }

    /// `messages` with every rewritten message replaced by its original. Returns how many were
    /// replaced. An unreadable archive is not an error here: the summary is then written from
    /// what the stage handed over, as before.
    pub(crate) fn restore(&self, messages: &mut [Message], store: &Store, session: &str) -> usize {
        let rewrites = self
            .rewrites
            .get_or_init(|| Rewrites::load(store, session).ok());
        let mut restored = 0;
        for m in messages.iter_mut() {
            let mut changed = false;
            if let Some(orig) = self.by_id.get(&m.id) {
                *m = orig.clone();
                changed = true;
            }
            if let Some(orig) = rewrites.as_ref().and_then(|r| r.original(store, m)) {
                *m = orig;
                changed = true;
            }
            restored += usize::from(changed);
        }
        restored
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::{Block, Role};

    fn msg(id: &str, text: &str) -> Message {
        Message::new(id, Role::User, vec![Block::text(text)])
    }

    fn conv(messages: Vec<Message>) -> Conversation {
        Conversation {
            messages,
            ..Conversation::default()
        }
    }

    #[test]
    fn the_first_version_of_a_changed_message_is_kept() {
        let mut o = Originals::default();
        let a = conv(vec![msg("1", "original"), msg("2", "same")]);
        let b = conv(vec![msg("1", "truncated"), msg("2", "same")]);
        let c = conv(vec![msg("1", "cleared"), msg("2", "same")]);
        o.record(a.clone(), &b, &Pairing::of(&a, &b));
        o.record(b.clone(), &c, &Pairing::of(&b, &c));
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut span = c.messages.clone();
        assert_eq!(o.restore(&mut span, &store, "s"), 1);
        assert_eq!(span, a.messages);
    }
}
