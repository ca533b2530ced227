//! Resuming a turn whose client moved its prompt-cache marks.
//!
//! A client that marks its newest message `cache_control` (or its last two) moves the marks
//! every turn: last turn's marked message comes back unmarked ([`condense_model::cache_marks`]).
//! A point compared its input's messages whole, so every turn of such a client was a run over
//! the whole conversation (at 1M tokens 0.06 s, against 0.02 s resumed). So a point hashes each
//! message without its marks ([`compared`]) and keeps the marks its input had ([`Mark`]): the
//! next input's prefix matches whatever marks moved, and the messages that differ from the
//! previous input's only by their marks ([`changed`]) are known.
//!
//! The output must then hold such a message as the new input has it, and `condense expand`
//! must still give that input back exactly. So the point also keeps, per output message, the
//! input message it stands for alone (its origin): the message itself, or a stage's change of
//! it, with no run of removed messages anchored to it in the archive. Where the output held
//! the message itself, the start takes it from this input, marks and all (as any message the
//! output kept). Where it held a stage's change of it (a deduplicated or truncated tool
//! result), the start takes the message from this input and the stages make their change
//! again. Either way the chain of runs behind the point unwinds every other output message as
//! before, and this one stands for itself ([`places`]). A message with no such place
//! (dropped, folded into a summary, or the first one `truncate-oldest` kept, which the archive
//! keys a removed run by) means a run over the whole input, as before.

use super::blocks;
use condense_model::cache_marks;
use condense_model::fingerprint::fingerprint;
use condense_model::Message;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A fingerprint as a point stores it: 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Print(pub(super) u128);

impl Serialize for Print {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&blocks::hex(self.0))
    }
}

impl<'de> Deserialize<'de> for Print {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        blocks::parse(&text)
            .map(Print)
            .ok_or_else(|| serde::de::Error::custom("a fingerprint is 32 hex digits"))
    }
}

/// An input message with marks: its index, its fingerprint, and its fingerprint unmarked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Mark(pub(super) usize, pub(super) Print, pub(super) Print);

impl Mark {
    fn at(&self) -> usize {
        self.0
    }
    fn exact(&self) -> u128 {
        self.1 .0
    }
    fn unmarked(&self) -> u128 {
        self.2 .0
    }
}

/// The marks of `messages` (fingerprints `each`), in order: the messages compared by another
/// fingerprint than their own. A message the previous input had at the same place, marks and
/// all (`before`: that input's marks), is not hashed again: the reader may have left it
/// unread, and its unmarked fingerprint is the one kept. One that had marks there and has
/// none now compares [`unmarked`](cache_marks::unmarked) too: a content the client marked as
/// one text block may have come back as a list of it. A message the reader left unread
/// (`unread`, per message; empty when none is) is known by its fingerprint alone: its marks are
/// the previous input's at its place, or none.
pub(super) fn marks_of(
    messages: &[Message],
    each: &[u128],
    before: &[Mark],
    unread: &[bool],
) -> Vec<Mark> {
    let mut before = before.iter().peekable();
    let mut marks = Vec::new();
    for (i, (m, &exact)) in messages.iter().zip(each).enumerate() {
        while before.next_if(|b| b.at() < i).is_some() {}
        let was_marked = before.next_if(|b| b.at() == i);
        let unmarked = match was_marked {
            Some(b) if b.exact() == exact => Some(b.unmarked()),
            _ if unread.get(i) == Some(&true) => None,
            Some(_) => cache_marks::unmarked(m).map(|u| fingerprint(&u)),
            None => cache_marks::unmarked_fingerprint(m),
        };
        if let Some(unmarked) = unmarked {
            marks.push(Mark(i, Print(exact), Print(unmarked)));
        }
    }
    marks
}

/// Each message's fingerprint as a point compares it, from message `from` on: `each[from..]`,
/// but unmarked where `marks` say (borrowed when no mark is among them).
pub(super) fn compared<'a>(
    each: &'a [u128],
    marks: &[Mark],
    from: usize,
) -> std::borrow::Cow<'a, [u128]> {
    let each = each.get(from..).unwrap_or_default();
    let mut marks = marks.iter().filter(|m| m.at() >= from).peekable();
    if marks.peek().is_none() {
        return std::borrow::Cow::Borrowed(each);
    }
    let mut out = each.to_vec();
    for mark in marks {
        if let Some(slot) = out.get_mut(mark.at() - from) {
            *slot = mark.unmarked();
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The first `inputs` messages that differ from the previous input's only by their marks (the
/// two compared equal unmarked), by index. `before`: the previous input's marks; `now`: this
/// input's ([`marks_of`]); `each`: this input's fingerprints.
pub(super) fn changed(before: &[Mark], now: &[Mark], each: &[u128], inputs: usize) -> Vec<usize> {
    let mut out = Vec::new();
    // Unmarked before: its fingerprint was the unmarked one it has now.
    for mark in now.iter().filter(|m| m.at() < inputs) {
        let was = before.iter().find(|b| b.at() == mark.at());
        let previous = was.map_or(mark.unmarked(), Mark::exact);
        if previous != mark.exact() {
            out.push(mark.at());
        }
    }
    // Marked before, unmarked now.
    for mark in before.iter().filter(|b| b.at() < inputs) {
        let unmarked_now = !now.iter().any(|m| m.at() == mark.at());
        if unmarked_now && each.get(mark.at()) != Some(&mark.exact()) {
            out.push(mark.at());
        }
    }
    out.sort_unstable();
    out
}

/// Where a point's output stands for a message the start takes from the input (its marks
/// moved, or the client edited it: [`super::inputs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Place {
    /// The output message's index.
    pub(super) at: usize,
    /// The input message's.
    pub(super) input: usize,
    /// The output holds a stage's change of the message (stored), not the message itself.
    pub(super) changed: bool,
}

/// Every place where the point's output (`layout`, `origins`: [`Point`](super::Point)'s)
/// stands for one of the `changed` messages (sorted), in output order; `None` when one of them
/// is not stood for alone anywhere (dropped, folded into a summary, or next to a run of removed
/// messages the archive keyed by its old form), or its origins are not known.
pub(super) fn places(changed: &[usize], layout: &[i64], origins: &[i64]) -> Option<Vec<Place>> {
    if changed.is_empty() {
        return Some(Vec::new());
    }
    if origins.len() != layout.len() {
        return None;
    }
    // One pass over the output (a client clearing old tool results may edit dozens of
    // messages at once): `changed` is sorted.
    let mut placed = vec![false; changed.len()];
    let mut places = Vec::new();
    for (at, (&origin, &from)) in origins.iter().zip(layout).enumerate() {
        let Some(k) = usize::try_from(origin)
            .ok()
            .and_then(|o| changed.binary_search(&o).ok())
        else {
            continue;
        };
        let changed = match from {
            -1 => true,
            i if i == origin => false,
            _ => return None,
        };
        placed[k] = true;
        let input = usize::try_from(origin).ok()?;
        places.push(Place { at, input, changed });
    }
    placed.iter().all(|&p| p).then_some(places)
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::{Block, RawJson, Role, TextBlock};

    fn message(i: usize, marked: bool) -> Message {
        let extra = if marked {
            r#"{"cache_control":{"type":"ephemeral"}}"#
        } else {
            ""
        };
        Message::new(
            format!("#{i}"),
            Role::User,
            vec![
                Block::text(format!("turn {i}")),
                Block::Text(TextBlock {
                    text: "the mark's block".into(),
                    extra: RawJson::from_string_unchecked(extra.into()),
                }),
            ],
        )
    }

    fn read(n: usize, marked: &[usize]) -> (Vec<Message>, Vec<u128>) {
        let messages: Vec<Message> = (0..n).map(|i| message(i, marked.contains(&i))).collect();
        let each = messages.iter().map(fingerprint).collect();
        (messages, each)
    }

    /// The last message marked, then one more turn with the mark moved to it: the two inputs
    /// compare equal on the first's messages, and the one that lost its mark is the change.
    #[test]
    fn a_moved_mark_compares_equal_and_is_the_change() {
        let (m1, e1) = read(4, &[3]);
        let before = marks_of(&m1, &e1, &[], &[]);
        assert_eq!(before.len(), 1);
        let (m2, e2) = read(6, &[5]);
        let now = marks_of(&m2, &e2, &before, &[]);
        assert_eq!(compared(&e1, &before, 0)[..], compared(&e2, &now, 0)[..4]);
        assert_ne!(e1[3], e2[3]);
        assert_eq!(changed(&before, &now, &e2, 4), [3]);
        // Marks that stay where they were, or sit past the covered messages: no change.
        let (m3, e3) = read(6, &[3, 5]);
        let now = marks_of(&m3, &e3, &before, &[]);
        assert!(changed(&before, &now, &e3, 4).is_empty());
        // A mark put on an old message that had none.
        let (m4, e4) = read(6, &[1, 3]);
        let now = marks_of(&m4, &e4, &before, &[]);
        assert_eq!(changed(&before, &now, &e4, 4), [1]);
    }

    /// A string content a client marked by sending it as one text block comes back unmarked
    /// as the string, or as the block: either way the inputs compare equal, and the message
    /// is the change.
    #[test]
    fn a_string_content_marked_as_a_block_compares_equal_however_it_comes_back() {
        let block = |marked: bool| {
            let extra = if marked {
                r#"{"cache_control":{"type":"ephemeral"}}"#
            } else {
                ""
            };
            let text = TextBlock {
                text: "fix it".into(),
                extra: RawJson::from_string_unchecked(extra.into()),
            };
            Message::new("#1", Role::User, vec![Block::Text(text)])
        };
        let mut string = Message::new("#1", Role::User, Vec::new());
        string.content = condense_model::Content::string("fix it");
        let first = [message(0, false), block(true)];
        let e1: Vec<u128> = first.iter().map(fingerprint).collect();
        let before = marks_of(&first, &e1, &[], &[]);
        for back in [string, block(false)] {
            let now_messages = [message(0, false), back, message(2, true)];
            let e2: Vec<u128> = now_messages.iter().map(fingerprint).collect();
            let now = marks_of(&now_messages, &e2, &before, &[]);
            assert_eq!(compared(&e1, &before, 0)[..], compared(&e2, &now, 0)[..2]);
            assert_eq!(changed(&before, &now, &e2, 2), [1]);
        }
    }

    /// A message left unread (a placeholder with the reader's fingerprint) that the previous
    /// input had, marks and all, takes the unmarked fingerprint kept with that input's marks.
    #[test]
    fn an_unread_marked_message_takes_the_kept_unmarked_fingerprint() {
        let (m1, e1) = read(4, &[2]);
        let before = marks_of(&m1, &e1, &[], &[]);
        let placeholder = Message::new("#2", Role::User, Vec::new());
        let mut m2 = m1.clone();
        m2[2] = placeholder;
        let unread = [false, false, true, false];
        assert_eq!(marks_of(&m2, &e1, &before, &unread), before);
        // Not the same message (another fingerprint): nothing is taken.
        let mut e2 = e1.clone();
        e2[2] ^= 1;
        assert!(marks_of(&m2, &e2, &before, &unread).is_empty());
        // Unread messages are not looked into: one with a mark of its own (a reader's
        // placeholder has none) counts as unmarked.
        let (m3, e3) = read(4, &[1]);
        assert_eq!(marks_of(&m3, &e3, &[], &unread).len(), 1);
        assert!(marks_of(&m3, &e3, &[], &[false, true]).is_empty());
    }

    /// A message whose marks moved is placed where the output stands for it alone: kept as it
    /// is, or a stage's change of it; nowhere (or where its origins are not known) means no
    /// resuming.
    #[test]
    fn a_changed_message_is_placed_where_the_output_stands_for_it_alone() {
        let place = |at, input, changed| Place { at, input, changed };
        // A summary, input 2 kept, input 3 kept, a change of input 4.
        let (layout, origins) = ([-1, 2, 3, -1], [-1, 2, 3, 4]);
        assert_eq!(
            places(&[3], &layout, &origins),
            Some(vec![place(2, 3, false)])
        );
        assert_eq!(
            places(&[2, 4], &layout, &origins),
            Some(vec![place(1, 2, false), place(3, 4, true)])
        );
        // Input 0 is in the summary only; input 3 with a run of removed messages next to it.
        assert_eq!(places(&[0], &layout, &origins), None);
        assert_eq!(places(&[3], &layout, &[-1, 2, -1, 4]), None);
        assert_eq!(places(&[3], &layout, &[]), None);
        assert_eq!(places(&[], &layout, &[]), Some(Vec::new()));
    }

    #[test]
    fn a_print_is_stored_as_32_hex_digits() {
        let mark = Mark(3, Print(0xab), Print(u128::MAX));
        let json = serde_json::to_string(&mark).unwrap();
        assert_eq!(json, format!(r#"[3,"{:032x}","{:032x}"]"#, 0xab, u128::MAX));
        assert_eq!(serde_json::from_str::<Mark>(&json).unwrap(), mark);
        assert!(serde_json::from_str::<Print>(r#""xyz""#).is_err());
    }
}
