//! How a stage's output lines up with its input, message by message, worked out once per
//! stage.
//!
//! The archive (what to keep) and the summarizer's originals (what to hand back) both need
//! which messages the stage changed in place, and telling a changed message from an unchanged
//! one compares the two copies whole: on a first run at 1M tokens the three comparisons this
//! replaces read 3.2 MB twice each, 7% of the run.

use condense_model::ids::{id_map, IdMap};
use condense_model::{Conversation, Message};

/// See the [module docs](self).
#[derive(Debug)]
pub(crate) struct Pairing {
    /// Per input message: the output message with its identity, if the stage kept one.
    pub(super) after_of: Vec<Option<usize>>,
    /// Per output message: the input message with its identity, if it had one.
    pub(super) before_of: Vec<Option<usize>>,
    /// Per output message: it has an input message and differs from it (changed in place).
    pub(super) changed: Vec<bool>,
}

impl Pairing {
    /// Matches `after`'s messages to `before`'s by identity ([`identities`]).
    pub(crate) fn of(before: &Conversation, after: &Conversation) -> Pairing {
        let before_ids = identities(&before.messages);
        let after_ids = identities(&after.messages);
        let mut at: IdMap<(&str, usize), usize> = id_map(before_ids.len());
        at.extend(before_ids.iter().enumerate().map(|(i, &id)| (id, i)));
        let before_of: Vec<Option<usize>> =
            after_ids.iter().map(|id| at.get(id).copied()).collect();
        let mut after_of = vec![None; before.messages.len()];
        for (a, b) in before_of.iter().enumerate() {
            if let Some(b) = *b {
                after_of[b] = Some(a);
            }
        }
        let changed = before_of
            .iter()
            .zip(&after.messages)
            .map(|(b, m)| b.is_some_and(|b| before.messages[b] != *m))
            .collect();
        Pairing {
            after_of,
            before_of,
            changed,
        }
    }

    /// The input message output message `after` is (changed in place or not), if any.
    pub(crate) fn input_of(&self, after: usize) -> Option<usize> {
        self.before_of.get(after).copied().flatten()
    }

    /// `(input index, output index)` of each message the stage changed in place, in output
    /// order.
    pub(crate) fn changed_in_place(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.before_of
            .iter()
            .zip(&self.changed)
            .enumerate()
            .filter_map(|(a, (b, changed))| b.filter(|_| *changed).map(|b| (b, a)))
    }
}

/// Each message's identity for matching a stage's input and output: its id and how many
/// earlier messages share that id (a duplicated JSONL line repeats its id; both copies must be
/// matched, not folded into one).
fn identities(messages: &[Message]) -> Vec<(&str, usize)> {
    // Ids are hashed with foldhash (`condense_model::ids`): two maps of every message a stage.
    let mut seen: IdMap<&str, usize> = id_map(messages.len());
    messages
        .iter()
        .map(|m| {
            let n = seen.entry(m.id.as_str()).or_insert(0);
            *n += 1;
            (m.id.as_str(), *n - 1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::{Block, Role};

    fn msg(id: &str, text: &str) -> Message {
        Message::new(id, Role::User, vec![Block::text(text)])
    }

    /// Kept, changed, removed and new messages, and a duplicated id matched copy to copy.
    #[test]
    fn pairs_by_id_and_occurrence() {
        let before = Conversation {
            messages: vec![
                msg("a", "1"),
                msg("d", "same"),
                msg("b", "2"),
                msg("d", "same"),
                msg("c", "3"),
            ],
            ..Conversation::default()
        };
        let after = Conversation {
            messages: vec![
                msg("a", "1"),
                msg("d", "same"),
                msg("d", "cut"),
                msg("new", "summary"),
                msg("c", "3!"),
            ],
            ..Conversation::default()
        };
        let p = Pairing::of(&before, &after);
        assert_eq!(p.before_of, vec![Some(0), Some(1), Some(3), None, Some(4)]);
        assert_eq!(p.after_of, vec![Some(0), Some(1), None, Some(2), Some(4)]);
        assert_eq!(p.changed, vec![false, false, true, false, true]);
        assert_eq!(
            p.changed_in_place().collect::<Vec<_>>(),
            vec![(3, 2), (4, 4)]
        );
    }
}
