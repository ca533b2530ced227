//! Resuming a session from its previous run's output, so a turn does not redo the session.
//!
//! An agent that runs `condense compress` (or sends through `condense serve`) once per turn
//! hands condense its whole history every time: the previous input plus the new turn. Running
//! the stages over all of it again repeats every decision already made, and costs the whole
//! conversation per turn. Instead, after every run the host keeps a **resume point** for the
//! session: a hash of the input's system prompt, tools and messages, how many messages that
//! was, and the output the stages made of them (those of its messages that are input messages
//! unchanged kept as their index). When the next input starts with exactly those messages
//! (same hash) under the same settings, the stages start from that output followed by the
//! input's new messages: what the agent would have had if it had kept condense's output and
//! added the turn to it (a case the stages handle anyway). The top-level fields (`model`,
//! `max_tokens`, ...) are always the new input's.
//!
//! What keeps this safe:
//! - **Nothing is lost.** The previous run archived how its output unwinds to its input, and
//!   this run archives how its output unwinds to the resumed conversation; expansion applies
//!   both (entries are keyed by output messages, see [`crate::archive`]), so `condense expand`
//!   still rebuilds the input exactly.
//! - **Same settings only.** The point records a hash of everything that shapes the output: each
//!   stage's plugin, settings slot and library file, the disabled stages, the tokenizer and the
//!   budget. Any change, a shorter input, a reordered, added or removed earlier message, or a
//!   changed system prompt or tool list means a run over the whole input, as before. Earlier
//!   messages the client edited in place (masked or cleared old observations) are taken from
//!   the input where the output stands for each alone ([`inputs`], [`marks`]). Levels forced by
//!   the recovery chain are not part of it: a request compressed harder after a prompt-too-long
//!   answer is the right start for the next one.
//! - **Counts stay whole.** The run still reports the input's full token count before the
//!   stages (counted with the session's stored counts, so only the new blocks are tokenized).
//!
//! **What a save costs.** A turn's output is mostly the previous turn's, so a save writes what
//! is new to it. Without memory (`condense compress`, a process a turn), the whole output goes
//! into packs of 64 messages ([`packs`]): the messages the stages changed or made, and the
//! input messages it kept as they were when a later read may leave them unread, so the next
//! turn parses none of the history; a turn writes the last pack. A long-lived pipeline
//! remembers the output instead ([`PointMemory`]) and stores the messages the stages changed
//! or made one record each, packed ([`condense_model::packed`]) and named by the hash of their
//! bytes, beside the point, which names them: a run that resumed names again the records of
//! the messages it starts from unchanged, and writes only the messages new to its output.
//! Keeping them all in the point re-serialized and re-compressed every changed message of the
//! session at every turn (at 200k tokens, one request's largest cost after its stages).

use crate::archive::KeyMemo;
use crate::run::{HostError, Unread};
use condense_model::fingerprint::{self, Fingerprinter};
use condense_model::prehashed::PrehashedMap;
use condense_model::{Conversation, Message};
use condense_store::Store;
use condense_tokens::ConversationCount;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};

mod blocks;
mod inputs;
mod load;
mod marks;
mod memory;
mod output;
mod packs;
mod save;
use load::{load, read_stored};
pub(crate) use load::{settings_hash, Loaded};
pub(crate) use memory::PointMemory;
use output::{output_of, put_back, split_output};
pub(crate) use save::save;

/// Store namespace of the resume points, one record per session.
const NAMESPACE: &str = "resume";

/// Prefix of the store namespace of a session's stored output messages (the session follows).
const MESSAGES_PREFIX: &str = "resume-messages-";

/// The store namespace of `session`'s stored output messages.
fn messages_namespace(session: &str) -> String {
    format!("{MESSAGES_PREFIX}{session}")
}

/// Bumped when the record's meaning changes: an older point is then not used. 2: the input's
/// hash is taken over each message's own hash, and the output refers to input messages. 3: the
/// output's other messages are records of their own, which the point names. 4: those records
/// are packed ([`condense_model::packed`]), not JSON. 5: messages are hashed without their
/// prompt-cache marks ([`marks`]). 6: the point keeps its frame's hash and each input
/// message's fingerprint and tokens ([`inputs`]).
const VERSION: u32 = 6;

/// What a resumed run started from (reported with the run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resumed {
    /// The input's first messages, unchanged since the previous run, that its output stood for.
    pub input_messages: usize,
    /// The messages of that output the stages started from, before the new ones.
    pub output_messages: usize,
    /// The input's messages after those.
    pub new_messages: usize,
    /// Of the first ones, those the reader left unread: their text was the previous input's,
    /// and the stages' start stands for them ([`crate::ReadFrom::unread`]).
    pub unread_messages: usize,
    /// Of the first ones, those the client edited since the previous run (a masked or cleared
    /// old observation): the start took them from the input.
    pub edited_messages: usize,
    /// The tokens the stages started from: that output plus the new messages.
    pub tokens_started: usize,
}

/// A session's resume point as stored (borrowed when written, owned when read).
#[derive(Debug, Serialize, Deserialize)]
struct Point<'a> {
    version: u32,
    /// Hash of the settings that shape the output ([`settings_hash`]).
    settings: Cow<'a, str>,
    /// How many input messages the point covers.
    inputs: usize,
    /// Hash of the input's frame (system prompt, tools) and those messages.
    prefix: Cow<'a, str>,
    /// Hash of the input's frame alone: an input with that frame whose prefix hash differs is
    /// compared message by message ([`inputs`]).
    #[serde(default)]
    frame: Cow<'a, str>,
    /// The record of the run that made the output ([`crate::archive::record_run`]).
    #[serde(default)]
    run: Option<Cow<'a, str>>,
    /// The names of the records (in the session's [`MESSAGES_PREFIX`] namespace) of the
    /// previous run's output messages that are not messages of its input (the ones the stages
    /// changed or made), in order: each the xxh3-128 of the message's JSON, the record's bytes.
    output: Vec<Cow<'a, str>>,
    /// Where each output message comes from, in order: the index of the input message it is
    /// (unchanged, so not stored twice: about half of a compressed conversation), or -1 for
    /// the next message of `output`.
    layout: Vec<i64>,
    /// The tokens of the input messages the point covers (the frame left out): a run that
    /// resumes counts only its frame and new messages for its whole input's count.
    input_tokens: usize,
    /// The archive key of each output message, in order (empty in a point an older condense
    /// wrote): a run resuming from the point hashes only the messages it changed or added for
    /// its run record, where hashing every message was a JSON serialization of the whole output
    /// (17% of an appended turn of a Claude Code session).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    keys: Vec<Cow<'a, str>>,
    /// The blocks holding the first names of `output`, and of `keys`, [`blocks`]' way: as
    /// stored, the lists hold the names past them; once read ([`load()`]), the whole lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    output_blocks: Vec<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    key_blocks: Vec<Cow<'a, str>>,
    /// The input messages the point covers that had prompt-cache marks ([`marks`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    marks: Vec<marks::Mark>,
    /// Per output message: the input message it stands for alone, as it is or changed in
    /// place, with no run of removed messages anchored to it; -1 for any other
    /// ([`marks::places`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    origins: Vec<i64>,
    /// Each input message's fingerprint as compared and its tokens ([`inputs`]): the blocks
    /// holding the first entries, and the entries past them (both empty when not kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    input_blocks: Vec<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    input_list: Vec<inputs::Entry>,
    /// The packs of its output ([`packs`]), in a point saved without memory: then `output`
    /// names no records (a long-lived pipeline remembers the messages instead).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    packs: Vec<Cow<'a, str>>,
}

impl Point<'_> {
    /// The names of the blocks it names.
    fn block_names(&self) -> HashSet<String> {
        let all = self.output_blocks.iter().chain(&self.key_blocks);
        all.chain(&self.input_blocks)
            .chain(&self.packs)
            .map(|b| b.to_string())
            .collect()
    }

    /// Whether its input list covers every input message ([`inputs`]).
    fn lists_inputs(&self) -> bool {
        self.input_blocks.len() * inputs::BLOCK + self.input_list.len() == self.inputs
    }
}

/// The hash of an input's frame and messages, taken as it is read (one pass over the input).
pub(crate) struct InputHash {
    /// The hash of the frame and the first `inputs` messages of the stored point, when the input
    /// has that many.
    at_point: Option<String>,
    /// The hash of the frame and every message.
    whole: String,
    /// The hash of the frame alone.
    frame: String,
    messages: usize,
    /// Each message's own hash ([`fingerprint`](fingerprint::fingerprint); not [`crate::archive::message_hash`], the
    /// archive's key of a message as written): what the output's messages are looked up by.
    each: Vec<u128>,
    /// The tokens of every message (the frame left out), once the run has counted them.
    pub(crate) message_tokens: Option<usize>,
    /// The record names of the messages the point the run resumed from stored, by their
    /// fingerprint: stored already, so not written again.
    stored: PrehashedMap<u128, String>,
    /// The run's output's token counts, once it has them: a long-lived pipeline keeps them
    /// with the point, and the next run's start counts only its new messages.
    pub(crate) output_count: Option<ConversationCount>,
    /// The blocks the point the run resumed from names ([`blocks`]): stored already.
    point_blocks: Option<HashSet<String>>,
    /// The input's messages with prompt-cache marks ([`marks`]).
    marks: Vec<marks::Mark>,
    /// Per output message, once the run has them: the input message it stands for alone
    /// ([`Point::origins`]).
    pub(crate) origins: Vec<Option<usize>>,
    /// Every message's tokens, for the next point's input list ([`inputs`]), once known.
    tokens: Option<inputs::Tokens>,
    /// Whether a later read of the input's list may leave its messages unread
    /// ([`crate::ReadFrom::lists_known`]): a point saved without memory then packs the input
    /// messages its output kept.
    pub(crate) lists_known: bool,
}

fn hex(h: &Fingerprinter) -> String {
    blocks::hex(h.digest128())
}

impl InputHash {
    /// `given`: each message's fingerprint when the reader made them (used only when there is
    /// one per message, [`fingerprint::each`]). `point`: how many input messages the stored
    /// point covers, and the marks they had. Messages are hashed without their marks.
    /// `unread`: per message, whether the reader left it unread (empty when none).
    fn of(
        conv: &Conversation,
        (given, unread): (Option<&[u128]>, &[bool]),
        point: Option<(usize, &[marks::Mark])>,
    ) -> InputHash {
        let each = fingerprint::each(&conv.messages, given.unwrap_or_default()).into_owned();
        let (point_inputs, before) = point.map_or((None, &[][..]), |(n, m)| (Some(n), m));
        let marks = marks::marks_of(&conv.messages, &each, before, unread);
        let compared = marks::compared(&each, &marks, 0);
        let mut h = Fingerprinter::new();
        (&conv.system, &conv.tools).hash(&mut h);
        let frame = hex(&h);
        let mut at_point = None;
        for (i, own) in compared.iter().enumerate() {
            if point_inputs == Some(i) {
                at_point = Some(hex(&h));
            }
            h.write(&own.to_le_bytes());
        }
        if point_inputs == Some(each.len()) {
            at_point = Some(hex(&h));
        }
        InputHash {
            at_point,
            whole: hex(&h),
            frame,
            messages: each.len(),
            each,
            message_tokens: None,
            stored: PrehashedMap::default(),
            output_count: None,
            point_blocks: None,
            marks,
            origins: Vec::new(),
            tokens: None,
            lists_known: false,
        }
    }

    /// Takes a run over the whole input's `count` (its messages' tokens) for the point.
    pub(crate) fn counted_whole(&mut self, count: &ConversationCount) {
        self.message_tokens = Some(count.in_messages());
        self.tokens =
            (count.messages.len() == self.messages).then(|| inputs::Tokens::whole(&count.messages));
    }
}

/// The input messages a point's output kept as they were, by index, when a long-lived pipeline
/// remembered them with the point ([`PointMemory`]): a run takes them from there, so its
/// reader may leave them unread too.
///
/// Ordered by index, not hashed: built in order from a point's layout and looked up by index
/// once each, where hashing 400 indices with SipHash cost more than the lookups.
type InputsKept = BTreeMap<usize, Message>;

/// A run's input: the conversation, each of its messages' [`fingerprint`](fingerprint::fingerprint) when the
/// reader made them ([`crate::ReadFrom::fingerprints`]), and those it left unread
/// ([`crate::ReadFrom::unread`]).
pub(crate) struct Input<'a> {
    pub(crate) conversation: Conversation,
    pub(crate) fingerprints: Option<&'a [u128]>,
    pub(crate) unread: Option<Unread<'a>>,
    /// [`crate::ReadFrom::lists_known`].
    pub(crate) lists_known: bool,
}

impl Input<'_> {
    /// The conversation with every message read.
    pub(crate) fn read_all(self) -> Result<Conversation, HostError> {
        read_all(self.conversation, self.unread)
    }
}

/// `conversation`, its `unread` messages read (all of it read again).
fn read_all(
    conversation: Conversation,
    unread: Option<Unread<'_>>,
) -> Result<Conversation, HostError> {
    match unread {
        Some(u) => (u.read_all)().map_err(HostError::ReadAgain),
        None => Ok(conversation),
    }
}

/// Whether a run starting from `point` drops every unread message (`mask`): each is one the
/// point covers, and none is one its output keeps but for those remembered in `kept`, nor one
/// the start takes from the input (`from_input`: its marks moved, the client edited it, or it
/// leans on an edited one).
fn drops_unread(point: &Point<'_>, mask: &[bool], kept: &InputsKept, from_input: &[usize]) -> bool {
    let at_hand =
        |i: usize| mask.get(i) == Some(&false) || (i < mask.len() && kept.contains_key(&i));
    let kept_read = point
        .layout
        .iter()
        .all(|&i| i < 0 || usize::try_from(i).is_ok_and(at_hand));
    let taken_read = from_input.iter().all(|&i| mask.get(i) == Some(&false));
    kept_read && taken_read && !mask.iter().skip(point.inputs).any(|&m| m)
}

/// The conversation the stages start from: `input` itself, or the stored point's output
/// followed by `input`'s new messages when `input` extends that point's input (see the
/// [module docs](self)). Also gives the input's hash, for [`save()`].
/// `count` counts a conversation: the resumed run reports the whole input's count as its count
/// before, does not resume when the start would not be smaller, and keeps the start's count.
/// `memory`: the points a long-lived pipeline keeps ([`PointMemory`]).
pub(crate) fn start(
    store: &Store,
    session: &str,
    settings: Option<&str>,
    memory: Option<&PointMemory>,
    input: Input<'_>,
    count: impl Fn(&Conversation) -> ConversationCount,
) -> Result<Start, HostError> {
    let Input {
        conversation: mut input,
        fingerprints,
        mut unread,
        lists_known,
    } = input;
    if unread.is_some() && fingerprints.map(<[u128]>::len) != Some(input.messages.len()) {
        // Without their known fingerprints, placeholders cannot even be matched.
        input = read_all(input, unread.take())?;
    }
    let loaded = match settings {
        Some(settings) => load(store, session, memory)?.map(|l| (settings, l)),
        None => None,
    };
    let (point, mut remembered, mut kept, output_count) = match loaded {
        Some((
            settings,
            Loaded {
                point: p,
                stored,
                kept,
                count,
                awaiting: _,
            },
        )) => {
            let usable =
                p.version == VERSION && p.settings == settings && p.inputs <= input.messages.len();
            (usable.then_some(p), stored, kept, count)
        }
        None => (None, None, InputsKept::new(), None),
    };
    let mut hash = InputHash::of(
        &input,
        (fingerprints, unread.as_ref().map_or(&[][..], |u| u.mask)),
        point.as_ref().map(|p| (p.inputs, &p.marks[..])),
    );
    hash.lists_known = lists_known;
    // The input's first messages are the point's input (the same hash), or are but for those
    // the client edited since: compared one by one when the frame is the point's ([`inputs`]).
    let (mut point, edits) = match point {
        Some(p) if hash.at_point.as_deref() == Some(&*p.prefix) => (Some(p), None),
        Some(p) if *p.frame == hash.frame => match inputs::edits_of(store, session, &p, &hash) {
            Some(edits) => (Some(p), Some(edits)),
            None => (None, None),
        },
        _ => (None, None),
    };
    // Without memory, the output comes from the point's packs: its stored messages, and the
    // input messages it kept that the reader left unread.
    if let Some(p) = point
        .as_ref()
        .filter(|p| remembered.is_none() && !p.packs.is_empty())
    {
        let mask = unread.as_ref().map_or(&[][..], |u| u.mask);
        let unpacked = packs::read(store, session, &p.packs, (&hash.each, mask));
        match unpacked.made {
            Some(made) => {
                remembered = Some(made);
                if kept.is_empty() {
                    kept = unpacked.kept;
                }
            }
            None => point = None,
        }
    }
    let edited: &[usize] = edits.as_ref().map_or(&[], |(e, _)| e);
    // A stage's change that leans on an edited message (snip's pointer to the copy it kept) is
    // made again too: the output's stored messages are needed now to find them.
    let mut leaning = Vec::new();
    if let (false, Some(p)) = (edited.is_empty(), &point) {
        if remembered.is_none() {
            remembered = read_stored(store, session, &p.output);
        }
        let found = remembered.as_deref().and_then(|s| {
            inputs::pointing_at_edited(&input.messages, edited, (s, &p.layout, &p.origins))
        });
        match found {
            Some(found) => leaning = found,
            None => point = None,
        }
    }
    // The messages whose marks moved, those the client edited and those leaning on them: the
    // start takes them from this input (not from memory, which has their old form) where the
    // point's output stands for each alone.
    let from_input = point.as_ref().map_or_else(Vec::new, |p| {
        let mut changed = marks::changed(&p.marks, &hash.marks, &hash.each, p.inputs);
        changed.extend_from_slice(edited);
        changed.extend_from_slice(&leaning);
        changed.sort_unstable();
        changed.dedup();
        changed
    });
    let edited_messages = edited.len();
    let places = point
        .as_ref()
        .and_then(|p| marks::places(&from_input, &p.layout, &p.origins));
    let point = point.filter(|_| places.is_some());
    let places = places.unwrap_or_default();
    for i in &from_input {
        kept.remove(i);
    }
    if let Some(u) = unread {
        if !point
            .as_ref()
            .is_some_and(|p| drops_unread(p, u.mask, &kept, &from_input))
        {
            input = read_all(input, unread.take())?;
        }
    }
    let Some(point) = point else {
        return Ok(Start::whole(input, Some(hash)));
    };
    let Some(stored) = remembered.or_else(|| read_stored(store, session, &point.output)) else {
        return Ok(Start::whole(read_all(input, unread)?, Some(hash)));
    };
    hash.point_blocks = Some(point.block_names());
    let lists_inputs = point.lists_inputs();
    let Point {
        inputs,
        run,
        output: names,
        layout,
        input_tokens: covered,
        keys,
        origins,
        input_blocks,
        input_list,
        ..
    } = point;
    let stored_prints: Vec<u128> = stored.iter().map(|(fp, _)| *fp).collect();
    hash.stored = stored_prints
        .iter()
        .zip(&names)
        .map(|(fp, name)| (*fp, name.to_string()))
        .collect();
    let output: Vec<Message> = stored.into_iter().map(|(_, m)| m).collect();
    // The whole input's count. The messages the point covers are those its input had (same
    // hash), so their tokens are the point's: only the frame and the new messages are counted.
    let new = input.messages.split_off(inputs);
    let covering = std::mem::replace(&mut input.messages, new);
    let counted = count(&input);
    let new_tokens = counted.messages.iter().map(|&n| inputs::clamp(n));
    // The edited messages' old tokens are the point's; their new ones are counted.
    let (covered, tokens) = match edits {
        None => {
            let after = input_list.iter().map(|e| e.1).chain(new_tokens).collect();
            let blocks = input_blocks.into_iter().map(Cow::into_owned).collect();
            (
                covered,
                lists_inputs.then_some(inputs::Tokens { blocks, after }),
            )
        }
        Some((edited, mut entries)) => {
            let messages = edited.iter().filter_map(|&i| covering.get(i).cloned());
            let now = count(&Conversation {
                messages: messages.collect(),
                ..Conversation::default()
            });
            let mut covered = covered;
            for (&i, &n) in edited.iter().zip(&now.messages) {
                if let Some(entry) = entries.get_mut(i) {
                    covered = (covered + n).saturating_sub(entry.1 as usize);
                    entry.1 = inputs::clamp(n);
                }
            }
            let after = entries.iter().map(|e| e.1).chain(new_tokens).collect();
            let blocks = Vec::new();
            (covered, Some(inputs::Tokens { blocks, after }))
        }
    };
    hash.tokens = tokens;
    let tokens_before = covered + counted.total;
    hash.message_tokens = Some(covered + counted.in_messages());
    let mut new = std::mem::replace(&mut input.messages, covering);
    let Some((mut output, mut moved)) = output_of(output, &layout, &mut input.messages, kept)
    else {
        input.messages.append(&mut new);
        return Ok(Start::whole(read_all(input, unread)?, Some(hash)));
    };
    // A message whose marks moved, where the output held a stage's change of it: the stages
    // make their change again, from the message as the input has it now.
    let retaken: Vec<(usize, usize)> = places
        .iter()
        .filter(|place| place.changed)
        .map(|place| (place.at, place.input))
        .collect();
    output::take_inputs(&mut output, &mut input.messages, &retaken, &mut moved);
    let output_messages = output.len();
    // The output messages that are input messages kept as they were have the reader's
    // fingerprints: only those the stages changed or made are fingerprinted here.
    let read_prints = fingerprints.filter(|p| p.len() == hash.messages);
    let mut stored_prints = stored_prints.iter();
    let mut prints: Vec<Option<u128>> = layout
        .iter()
        .map(|&at| match usize::try_from(at) {
            Ok(i) => read_prints.and_then(|p| p.get(i).copied()),
            Err(_) => stored_prints.next().copied(),
        })
        .collect();
    for &(at, i) in &retaken {
        prints[at] = hash.each.get(i).copied();
    }
    let keys = (keys.len() == output_messages).then(|| {
        let prints = output
            .iter()
            .zip(&prints)
            .map(|(m, p)| p.unwrap_or_else(|| fingerprint::fingerprint(m)));
        // A message whose marks moved is another message than the one its key was made of.
        let pairs = prints
            .zip(keys.into_iter().map(Cow::into_owned))
            .enumerate();
        KeyMemo::seeded(pairs.filter_map(|(at, pair)| {
            let moved_here = places.iter().any(|place| place.at == at);
            (!moved_here).then_some(pair)
        }))
    });
    // The new messages' are the input's.
    prints.extend(
        hash.each
            .get(inputs..)
            .unwrap_or_default()
            .iter()
            .map(|&p| Some(p)),
    );
    let prefix = std::mem::replace(&mut input.messages, output);
    input.messages.extend(new);
    // The new messages stand for themselves.
    let origins: Vec<Option<usize>> = if origins.len() == output_messages {
        let output_origins = origins.iter().map(|&o| usize::try_from(o).ok());
        output_origins
            .chain((inputs..hash.messages).map(Some))
            .collect()
    } else {
        Vec::new()
    };
    // The remembered output's counts are the prefix's (the same messages): only the frame and
    // the new messages were counted.
    let counts_hold = retaken.is_empty() && edited_messages == 0;
    let started = match output_count.filter(|c| counts_hold && c.messages.len() == output_messages)
    {
        Some(prefix_count) => {
            let started = counted.after(&prefix_count);
            debug_assert!(
                started == count(&input),
                "a remembered output's counts are not its messages'"
            );
            started
        }
        None => count(&input),
    };
    let tokens_started = started.total;
    if tokens_started > tokens_before {
        // Not expected (a stored output was never bigger than its input), but a run must never
        // start bigger than its input: put the input back and run over it whole.
        let new = input.messages.split_off(output_messages);
        let output = std::mem::replace(&mut input.messages, prefix);
        put_back(&mut input.messages, output, &moved);
        input.messages.extend(new);
        return Ok(Start::whole(read_all(input, unread)?, Some(hash)));
    }
    Ok(Start {
        resumed: Some(Resumed {
            input_messages: inputs,
            output_messages,
            new_messages: hash.messages - inputs,
            unread_messages: unread.map_or(0, |u| u.mask.iter().filter(|&&m| m).count()),
            edited_messages,
            tokens_started,
        }),
        tokens_before: Some(tokens_before),
        count: Some(started),
        conversation: input,
        hash: Some(hash),
        parent_run: run.map(Cow::into_owned),
        keys,
        prints,
        origins,
    })
}

/// The conversation a run starts from, and what [`save()`] needs after it.
pub(crate) struct Start {
    pub(crate) conversation: Conversation,
    /// `None` when the run keeps no resume point ([`RunOptions::resume`](crate::RunOptions::resume) off).
    pub(crate) hash: Option<InputHash>,
    pub(crate) resumed: Option<Resumed>,
    /// The whole input's tokens, when the run resumed (else the run counts `conversation`).
    pub(crate) tokens_before: Option<usize>,
    /// The count of `conversation`, when it was counted already (a resumed start).
    pub(crate) count: Option<ConversationCount>,
    /// The archive's record of the run that made the output the run resumed from.
    pub(crate) parent_run: Option<String>,
    /// The archive keys of that output's messages, by fingerprint, when its point kept them.
    pub(crate) keys: Option<KeyMemo>,
    /// Each message's [`fingerprint`](fingerprint::fingerprint) where it is known already (the
    /// reader's, the stored messages'), in order; empty when none is.
    pub(crate) prints: Vec<Option<u128>>,
    /// Per message: the input message it stands for alone ([`Point::origins`]); empty when
    /// not known.
    pub(crate) origins: Vec<Option<usize>>,
}

impl Start {
    /// A run over the whole input (`hash`: `None` when no point is kept).
    pub(crate) fn whole(conversation: Conversation, hash: Option<InputHash>) -> Start {
        let prints = match &hash {
            Some(h) if h.each.len() == conversation.messages.len() => {
                h.each.iter().map(|&p| Some(p)).collect()
            }
            _ => Vec::new(),
        };
        Start {
            origins: (0..conversation.messages.len()).map(Some).collect(),
            conversation,
            hash,
            resumed: None,
            tokens_before: None,
            count: None,
            parent_run: None,
            keys: None,
            prints,
        }
    }
}
