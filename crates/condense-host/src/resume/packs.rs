//! A point's whole output packed into a few records, for the next run in another process
//! ([`plan`], [`pack`], [`read`]).
//!
//! A run that resumes needs every message of the previous output: the ones the stages changed
//! or made, and the input messages it kept as they were. A long-lived pipeline remembers both
//! ([`super::PointMemory`]); without memory, `condense compress` read the first as a record
//! each (at a million tokens 173 records, 2.2 M instructions of SQLite) and parsed the others
//! again from its input (566 messages, 5.5 M instructions). A point saved without memory
//! keeps its output in packs of [`PACK`] messages instead, in output order, each a record of
//! the session's block namespace ([`super::blocks::namespace`]) named by the hash of what its
//! messages are (which input message, or which made message, by fingerprint). A turn adds a
//! few messages to the last pack, so it packs and writes that one; the packs the point it
//! resumed from names are stored already. And the next run's reader may leave the whole
//! history unread: unpacking a message costs about a third of parsing it.
//!
//! A pack holds, per message, whether it is an input message (then its index) or one the
//! stages made, its fingerprint, and the packed message ([`condense_model::packed`]); an input
//! message the output holds twice is packed once. [`read`] takes an input message only while
//! the input at its index has that fingerprint: one that does not (a mark moved, the client
//! edited it) is left to the input, which reads it when the start needs it
//! (`Unread::read_all`). A pack missing or damaged gives no made message at all: then the run
//! does not resume.

use super::blocks::{hex, Block};
use super::InputsKept;
use condense_model::packed::{pack_message_into, put_len, put_u128, unpack_message, Reader};
use condense_model::Message;
use condense_store::Store;
use rayon::prelude::*;
use std::borrow::Cow;
use twox_hash::XxHash3_128;

/// Messages in a full pack.
pub(super) const PACK: usize = 64;

/// What a packed message is: an input message kept as it was (its index), or one the stages
/// changed or made.
#[derive(Clone, Copy)]
enum Kind {
    Input(usize),
    Made,
}

/// One message of a pack to be: what it is, its fingerprint, and its place in the output.
#[derive(Clone, Copy)]
struct Entry {
    kind: Kind,
    print: u128,
    place: usize,
}

/// A pack to be: its name and its messages.
pub(super) struct Planned {
    pub(super) name: String,
    entries: Vec<Entry>,
}

/// The packs of an output laid out as `layout` says (an input message's index, or -1 for a
/// made one), with `each` the input's fingerprints and `prints` the output's; the input
/// messages only when `inputs` (a later read may leave them unread: otherwise it reads them,
/// and packing them is wasted). Named before anything is packed: a turn packs only the packs
/// its point does not name already.
pub(super) fn plan(layout: &[i64], each: &[u128], prints: &[u128], inputs: bool) -> Vec<Planned> {
    let mut seen = vec![false; each.len()];
    let mut entries = Vec::with_capacity(layout.len());
    for (place, (&at, &print)) in layout.iter().zip(prints).enumerate() {
        // An input message is packed with the input's fingerprint (the output's is the same:
        // the layout is made by matching them), which the next read compares.
        let (kind, print) = match usize::try_from(at) {
            Ok(i) if i < each.len() => {
                if !inputs || std::mem::replace(&mut seen[i], true) {
                    // Left to the input (a later read reads it), or held twice (the output's
                    // layout puts it in both places).
                    continue;
                }
                (Kind::Input(i), each[i])
            }
            // Not an index of this input: not written by this code, the plan is of no use.
            Ok(_) => return Vec::new(),
            Err(_) => (Kind::Made, print),
        };
        entries.push(Entry { kind, print, place });
    }
    entries
        .chunks(PACK)
        .map(|chunk| {
            let mut key = Vec::with_capacity(chunk.len() * 25);
            for e in chunk {
                put_kind(&mut key, e.kind);
                put_u128(&mut key, e.print);
            }
            Planned {
                name: format!("p{}", hex(XxHash3_128::oneshot(&key))),
                entries: chunk.to_vec(),
            }
        })
        .collect()
}

/// A message's kind: 0 then its index for an input message, 1 for a made one.
fn put_kind(out: &mut Vec<u8>, kind: Kind) {
    match kind {
        Kind::Input(i) => {
            out.push(0);
            put_len(out, i);
        }
        Kind::Made => out.push(1),
    }
}

/// The bytes of `planned`'s pack, its messages taken from `output`.
pub(super) fn pack(planned: &Planned, output: &[Message]) -> Block {
    let mut bytes = Vec::new();
    let mut one = Vec::new();
    put_len(&mut bytes, planned.entries.len());
    for e in &planned.entries {
        put_kind(&mut bytes, e.kind);
        put_u128(&mut bytes, e.print);
        one.clear();
        if let Some(message) = output.get(e.place) {
            pack_message_into(&mut one, message);
        }
        put_len(&mut bytes, one.len());
        bytes.extend_from_slice(&one);
    }
    (planned.name.clone(), bytes)
}

/// What [`read`] found: the input messages kept as they were that the input still has, by
/// index, and the made messages with their fingerprints, in output order (`None` when a pack
/// was missing or damaged).
pub(super) struct Unpacked {
    pub(super) kept: InputsKept,
    pub(super) made: Option<Vec<(u128, Message)>>,
}

/// The messages of the packs `names` (in `session`'s block namespace), with `each` the
/// fingerprints of the input and `unread` the messages its reader left unread (the input
/// messages unpacked are those only).
pub(super) fn read(
    store: &Store,
    session: &str,
    names: &[Cow<'_, str>],
    (each, unread): (&[u128], &[bool]),
) -> Unpacked {
    let wanted: Vec<&str> = names.iter().map(|n| n.as_ref()).collect();
    let packs = store
        .records_get_stored(&super::blocks::namespace(session), &wanted)
        .unwrap_or_default();
    // Decoded and unpacked on all cores, one pack at a time: the run's start is otherwise one
    // thread's (at a million tokens, about 750 messages), and a pack's decoded bytes are let
    // go before the next one's (a Claude Code session's packs hold its whole history).
    let unpacked: Vec<Option<One>> = packs
        .into_par_iter()
        .map(|stored| unpack(&stored?.decode().ok()?, (each, unread)))
        .collect();
    let mut out = Unpacked {
        kept: InputsKept::new(),
        made: (unpacked.len() == names.len()).then(Vec::new),
    };
    for one in unpacked {
        match one {
            Some(one) => {
                out.kept.extend(one.kept);
                if let Some(made) = &mut out.made {
                    made.extend(one.made);
                }
            }
            None => out.made = None,
        }
    }
    out
}

/// One pack's messages ([`Unpacked`]).
struct One {
    kept: Vec<(usize, Message)>,
    made: Vec<(u128, Message)>,
}

/// A pack's messages, the input ones only where `unread` and where `each` still has them;
/// `None` when the bytes are not a whole pack.
fn unpack(bytes: &[u8], (each, unread): (&[u128], &[bool])) -> Option<One> {
    let mut r = Reader::new(bytes);
    let mut one = One {
        kept: Vec::new(),
        made: Vec::new(),
    };
    for _ in 0..r.length()? {
        let kind = match r.byte()? {
            0 => Kind::Input(r.length()?),
            1 => Kind::Made,
            _ => return None,
        };
        let print = r.u128()?;
        let len = r.length()?;
        let packed = r.take(len)?;
        match kind {
            Kind::Input(i) if unread.get(i) == Some(&true) && each.get(i) == Some(&print) => {
                one.kept.push((i, unpack_message(packed)?));
            }
            Kind::Input(_) => {}
            Kind::Made => one.made.push((print, unpack_message(packed)?)),
        }
    }
    r.is_done().then_some(one)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use condense_model::{fingerprint::fingerprint, Content, Role};

    fn messages(n: usize, tag: &str) -> Vec<Message> {
        (0..n)
            .map(|i| {
                let text = Content::string(format!("{tag} {i}"));
                let block = condense_model::Block::tool_result("t", text);
                Message::new(format!("m{i}"), Role::User, vec![block])
            })
            .collect()
    }

    fn put(store: &Store, (name, bytes): &Block) {
        let namespace = super::super::blocks::namespace("s");
        store.record_put(&namespace, name, bytes).unwrap();
    }

    #[test]
    fn an_output_comes_back_from_its_packs_with_the_input_messages_the_input_still_has() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let input = messages(PACK + 10, "result");
        let mut each: Vec<u128> = input.iter().map(fingerprint).collect();
        // The output: a summary of the first two, the input from message 2 on with message 9
        // cut, and message 5 again at the end (packed once).
        let summary = Message::new("s", Role::User, vec![]);
        let cut = messages(10, "cut").remove(9);
        let mut layout: Vec<i64> = vec![-1];
        let mut output = vec![summary.clone()];
        for (i, m) in input.iter().enumerate().skip(2) {
            layout.push(if i == 9 { -1 } else { i as i64 });
            output.push(if i == 9 { cut.clone() } else { m.clone() });
        }
        layout.push(5);
        output.push(input[5].clone());
        let prints: Vec<u128> = output.iter().map(fingerprint).collect();
        let planned = plan(&layout, &each, &prints, true);
        assert_eq!(planned.len(), 2);
        planned.iter().for_each(|p| put(&store, &pack(p, &output)));
        let names: Vec<Cow<'_, str>> = planned.iter().map(|p| Cow::Borrowed(&*p.name)).collect();
        let unread = vec![true; input.len()];
        let back = read(&store, "s", &names, (&each, &unread));
        assert_eq!(back.kept.len(), input.len() - 3);
        assert!(back.kept.iter().all(|(&i, m)| *m == input[i]));
        let made = back.made.unwrap();
        assert_eq!(made, vec![(prints[0], summary), (prints[8], cut)]);

        // The same output plans the same names; another fingerprint at an index, another name.
        let again = plan(&layout, &each, &prints, true);
        assert!(again.iter().zip(&planned).all(|(a, b)| a.name == b.name));
        each[3] ^= 1;
        assert_ne!(plan(&layout, &each, &prints, true)[0].name, planned[0].name);
        // An input message the input no longer has as it was is not taken; the rest are.
        let back = read(&store, "s", &names, (&each, &unread));
        assert_eq!(back.kept.len(), input.len() - 4);
        assert!(!back.kept.contains_key(&3));
        assert!(back.made.is_some());
        // The input messages its reader read are not unpacked.
        let some_unread: Vec<bool> = (0..input.len()).map(|i| i < 10).collect();
        let back = read(&store, "s", &names, (&each, &some_unread));
        assert_eq!(
            back.kept.keys().copied().collect::<Vec<_>>(),
            [2, 4, 5, 6, 7, 8]
        );
        // Planned without the input messages: the made ones alone, in one pack.
        let made_only = plan(&layout, &each, &prints, false);
        assert_eq!(made_only.len(), 1);
        put(&store, &pack(&made_only[0], &output));
        let name = [Cow::Borrowed(&*made_only[0].name)];
        let back = read(&store, "s", &name, (&each, &unread));
        assert!(back.kept.is_empty() && back.made.unwrap().len() == 2);

        // A damaged pack gives none of its messages, and no made messages at all; a missing
        // one neither.
        let (name, bytes) = pack(&planned[1], &output);
        put(&store, &(name, bytes[..bytes.len() - 1].to_vec()));
        let back = read(&store, "s", &names, (&each, &unread));
        assert_eq!(back.kept.len(), PACK - 3);
        assert!(back.made.is_none());
        let missing = [Cow::Borrowed("p00")];
        let back = read(&store, "s", &missing, (&each, &unread));
        assert!(back.kept.is_empty() && back.made.is_none());
    }
}
