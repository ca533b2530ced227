//! Saving a run's output as the session's resume point ([`save`]): the output's messages as
//! the point keeps them (input messages by index, the others as packed records of their own),
//! with the input's marks, each input message's fingerprint and tokens ([`super::inputs`]) and
//! the output messages' origins ([`super::marks`]), in the store
//! and, for a long-lived pipeline, in memory.

use super::inputs::{self, Entry};
use super::marks::{self, Print};
use super::packs;
use super::{
    blocks, messages_namespace, InputHash, InputsKept, Loaded, Point, PointMemory, NAMESPACE,
    VERSION,
};
use condense_model::fingerprint;
use condense_model::prehashed::PrehashedMap;
use condense_model::{Conversation, Message};
use condense_store::{Store, StoreError};
use std::borrow::Cow;
use std::collections::HashSet;
use twox_hash::XxHash3_128;

/// `output`'s messages as a point keeps them: each one that is a message of the input (by its
/// hash in `each`) as that message's index, the others stored (with their fingerprint).
/// `prints`: each output message's [`fingerprint`](fingerprint::fingerprint) when made already
/// (else empty).
fn layout<'a>(
    each: &[u128],
    output: &'a [Message],
    prints: &[u128],
) -> (Vec<(u128, &'a Message)>, Vec<i64>) {
    let mut index: PrehashedMap<u128, usize> =
        PrehashedMap::with_capacity_and_hasher(each.len(), Default::default());
    for (i, own) in each.iter().enumerate() {
        index.entry(*own).or_insert(i);
    }
    let prints = fingerprint::each(output, prints);
    let mut stored = Vec::new();
    let layout = output
        .iter()
        .zip(prints.iter())
        .map(|(m, own)| match index.get(own) {
            Some(&i) => i as i64,
            None => {
                stored.push((*own, m));
                -1
            }
        })
        .collect();
    (stored, layout)
}

/// The names of the records of `stored` (the output messages that are not input messages), in
/// `session`'s messages namespace: the one the run started from when a message is unchanged
/// (`started`, by fingerprint), else written now, packed (named by its bytes' hash: the same
/// message is one record, written once).
fn records_of(
    store: &Store,
    session: &str,
    stored: &[(u128, &Message)],
    started: &PrehashedMap<u128, String>,
) -> Result<Vec<String>, StoreError> {
    let namespace = messages_namespace(session);
    let mut names = Vec::with_capacity(stored.len());
    for (fp, m) in stored {
        let name = match started.get(fp) {
            Some(name) => name.clone(),
            None => {
                let packed = condense_model::packed::pack_message(m);
                let name = format!("{:032x}", XxHash3_128::oneshot(&packed));
                store.record_put(&namespace, &name, &packed)?;
                name
            }
        };
        names.push(name);
    }
    Ok(names)
}

/// The names of the blocks `session`'s stored point names (none when it has no point, or one
/// that does not read).
fn stored_blocks(store: &Store, session: &str) -> HashSet<String> {
    let bytes = store.record_get(NAMESPACE, session).ok().flatten();
    bytes
        .and_then(|b| {
            serde_json::from_slice::<Point<'_>>(&b)
                .ok()
                .map(|p| p.block_names())
        })
        .unwrap_or_default()
}

fn owned(names: &[Cow<'_, str>]) -> Vec<Cow<'static, str>> {
    names.iter().map(|n| Cow::Owned(n.to_string())).collect()
}

/// The point's input list ([`inputs`]): the names of the blocks stored already that hold its
/// first entries, the new full blocks, and the entries past them; all empty when the run does
/// not know every message's tokens.
fn input_list(hash: &InputHash) -> (&[String], Vec<blocks::Block>, Vec<Entry>) {
    let Some(tokens) = hash.tokens.as_ref().filter(|t| t.len() == hash.messages) else {
        return (&[], Vec::new(), Vec::new());
    };
    // Only the messages past the blocks stored already: most turns, a few.
    let from = tokens.blocks.len() * inputs::BLOCK;
    let entries: Vec<Entry> = marks::compared(&hash.each, &hash.marks, from)
        .iter()
        .zip(&tokens.after)
        .map(|(&print, &n)| Entry(Print(print), n))
        .collect();
    let (full, tail) = inputs::split(&entries);
    (&tokens.blocks, full, tail.to_vec())
}

/// Stores `output` as the session's resume point for the input `hash` was taken of.
/// With `memory`, the point is also kept there for the session's next run.
pub(crate) fn save(
    store: &Store,
    session: &str,
    settings: &str,
    hash: &InputHash,
    (run, keys): (&str, &[String]),
    (output, prints): (&Conversation, &[u128]),
    memory: Option<&PointMemory>,
) -> Result<(), StoreError> {
    // Every run sets it (`resume::start`, else `RunState::new` from the input's count); a point
    // without it would make the next run's count wrong, so none is kept then.
    let Some(input_tokens) = hash.message_tokens else {
        return Ok(());
    };
    let output_prints = fingerprint::each(&output.messages, prints);
    let (stored, layout) = layout(&hash.each, &output.messages, &output_prints);
    let origins: Vec<i64> = if hash.origins.len() == layout.len() {
        let origin = |o: Option<usize>| o.and_then(|i| i64::try_from(i).ok()).unwrap_or(-1);
        hash.origins.iter().map(|&o| origin(o)).collect()
    } else {
        Vec::new()
    };
    // Without memory, the output goes into packs ([`packs`]; the input messages it kept too
    // when a later read may leave them unread): those the point the run resumed from names
    // are stored already, the others are packed now.
    let packs = match memory {
        None => packs::plan(&layout, &hash.each, &output_prints, hash.lists_known),
        Some(_) => Vec::new(),
    };
    let names = if packs.is_empty() {
        records_of(store, session, &stored, &hash.stored)?
    } else {
        Vec::new()
    };
    let names: Vec<Cow<'_, str>> = names.iter().map(|n| Cow::Borrowed(n.as_str())).collect();
    // One per output message, or none (a point without them is read as before).
    let keys: Vec<Cow<'_, str>> = if keys.len() == output.messages.len() {
        keys.iter().map(|k| Cow::Borrowed(k.as_str())).collect()
    } else {
        Vec::new()
    };
    let (output_blocks, output_tail) = blocks::split(&names);
    let (key_blocks, key_tail) = blocks::split(&keys);
    let (input_stored, input_full, input_tail) = input_list(hash);
    // Stored already: the blocks of the point the run resumed from (read back whole). Not
    // resumed, those of the stored point may be missing or damaged: none is taken as stored,
    // and the ones no longer named are removed.
    let none = HashSet::new();
    let kept = hash.point_blocks.as_ref().unwrap_or(&none);
    let old = match &hash.point_blocks {
        Some(kept) => Cow::Borrowed(kept),
        None => Cow::Owned(stored_blocks(store, session)),
    };
    // The packs not stored yet are written one at a time (a first run at a million tokens
    // packs 700 KB of messages; all of them at once were that much more at the run's peak).
    for planned in packs.iter().filter(|p| !kept.contains(&p.name)) {
        let (name, bytes) = packs::pack(planned, &output.messages);
        store.record_put(&blocks::namespace(session), &name, &bytes)?;
    }
    let mut staying = input_stored.to_vec();
    staying.extend(packs.iter().map(|p| p.name.clone()));
    let all: Vec<&blocks::Block> = output_blocks
        .iter()
        .chain(&key_blocks)
        .chain(&input_full)
        .collect();
    blocks::keep(store, session, (&all, &staying), (kept, &old))?;
    let input_blocks: Vec<Cow<'_, str>> = input_stored
        .iter()
        .map(|n| Cow::Borrowed(n.as_str()))
        .chain(blocks::names(&input_full))
        .collect();
    let point = Point {
        version: VERSION,
        settings: Cow::Borrowed(settings),
        inputs: hash.messages,
        prefix: Cow::Borrowed(&hash.whole),
        frame: Cow::Borrowed(&hash.frame),
        run: Some(Cow::Borrowed(run)),
        output: output_tail.to_vec(),
        layout,
        input_tokens,
        keys: key_tail.to_vec(),
        output_blocks: blocks::names(&output_blocks),
        key_blocks: blocks::names(&key_blocks),
        marks: hash.marks.clone(),
        origins,
        input_blocks,
        input_list: input_tail,
        packs: packs
            .iter()
            .map(|p| Cow::Borrowed(p.name.as_str()))
            .collect(),
    };
    let bytes = crate::archive::encode("a resume point", &point)?;
    store.record_put(NAMESPACE, session, &bytes)?;
    if let Some(memory) = memory {
        let owned = Point {
            version: VERSION,
            settings: Cow::Owned(settings.to_string()),
            inputs: hash.messages,
            prefix: Cow::Owned(hash.whole.clone()),
            frame: Cow::Owned(hash.frame.clone()),
            run: Some(Cow::Owned(run.to_string())),
            output: owned(&names),
            layout: point.layout,
            input_tokens,
            // A pipeline that keeps points in memory keeps the archive keys there too (its
            // `KeyMemo`): not copied, nor fingerprinted again at the next start.
            keys: Vec::new(),
            output_blocks: owned(&point.output_blocks),
            key_blocks: owned(&point.key_blocks),
            marks: point.marks,
            origins: point.origins,
            input_blocks: owned(&point.input_blocks),
            input_list: point.input_list,
            packs: Vec::new(),
        };
        // The messages come once the caller is done with the output (`PointMemory::fill`):
        // the input messages it kept, so the next request need not parse them, and those it
        // stored, so it need not read them back.
        let loaded = Loaded {
            point: owned,
            stored: None,
            kept: InputsKept::new(),
            count: hash.output_count.clone(),
            awaiting: Some(stored.iter().map(|(fp, _)| *fp).collect()),
        };
        memory.keep(store, session, XxHash3_128::oneshot(&bytes), loaded);
    }
    Ok(())
}
