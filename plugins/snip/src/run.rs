//! One run of the stage: plan the tool result changes, apply them, strip images, report.

use crate::images::{self, Stripped};
use crate::markers::{duplicate_marker, is_snip_output, truncated_text};
use crate::scan::{first_unanswered, payload_text, protected_ids, replace_payload};
use crate::{Config, Keep};
use condense_abi::{
    replace_messages, BlockView, Context, Input, Replacements, StageError, StageEvent, StageOutput,
    StageReport, View,
};
use condense_model::prehashed::PrehashedMap;
use condense_model::{Block, Conversation, RawJson, Role, ToolResultAt};
use condense_retain::error_line;
use condense_text::{has_chars, plural, thousands, utf8_prefix, utf8_suffix};
use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet};
use twox_hash::XxHash3_128;

/// Where a changed block sits: message index, block index (a tool result, or an image in a
/// message).
type Place = (usize, usize);

/// One top-level tool result, as measured before any change (its id, tool and text borrowed
/// from the conversation where they can be, see [`payload_text`]: snip looks at every result
/// at every run, and only the few it changes need anything of their own).
struct Entry<'a> {
    message: usize,
    block: usize,
    tool: Option<&'a str>,
    id: &'a str,
    text: Cow<'a, str>,
    protected: bool,
    /// Already a marker or a truncated text from an earlier run.
    snipped: bool,
    /// For an oversized error result that is neither protected nor snipped already (one
    /// [`truncate`] may cut): its first meaningful line (kept when truncated).
    error: Option<String>,
}

/// The new payload text of one tool result.
enum Change {
    Duplicate {
        kept: usize,
        key: String,
    },
    /// `head` and `tail`: bytes of the original kept.
    Truncated {
        key: String,
        head: usize,
        tail: usize,
    },
}

/// A change ready to be made: what replaces the payload at `at`, and its event.
struct Planned {
    at: ToolResultAt,
    text: String,
    duplicate: bool,
    tokens: usize,
    kind: &'static str,
    detail: String,
}

/// Counts of one run, for the notes.
#[derive(Default)]
struct Tally {
    duplicates: usize,
    truncated: usize,
    images: usize,
    tokens: usize,
    protected_oversized: usize,
    protected_duplicates: usize,
    protected_images: usize,
    not_shorter: usize,
    already: usize,
}

/// An event with the position it sorts by: (message, block, image within the block).
type Placed = ((usize, usize, usize), StageEvent);

pub fn apply(
    config: &Config,
    input: Input<'_>,
    cx: &Context<'_>,
) -> Result<StageOutput, StageError> {
    // Planned through the view; the conversation is copied in only when something changes
    // (on a turn that appends to a snipped session, usually nothing does).
    let view = input.view()?;
    let protected = protected_ids(&view, config.protect_recent_turns);
    // Event lines never reach the model: only chat messages' results are judged.
    let entries: Vec<Entry<'_>> = view
        .tool_results()
        .filter(|r| r.role != Role::Event)
        .map(|r| {
            let text = payload_text(r.result.content());
            let snipped = is_snip_output(&text);
            let protected = protected.contains(r.result.tool_use_id());
            // Only a result `truncate` may cut keeps its error line: the recent turns' large
            // results are not scanned again at every turn.
            let error = if text.len() > config.max_tool_result_bytes && !snipped && !protected {
                let envelope = view.message(r.message).map(|m| m.envelope());
                let envelope = RawJson::from_string_unchecked(envelope.unwrap_or("").to_string());
                error_line(&r.result.to_tool_result(), &envelope)
            } else {
                None
            };
            Entry {
                message: r.message,
                block: r.block,
                tool: r.tool,
                id: r.result.tool_use_id(),
                snipped,
                protected,
                text,
                error,
            }
        })
        .collect();
    let mut tally = Tally {
        already: entries.iter().filter(|e| e.snipped).count(),
        ..Tally::default()
    };

    // Duplicates first, then truncation of everything else; a protected duplicate whose kept
    // copy gets truncated stays whole (the agent is acting on it and would lose the content).
    let targets = duplicate_targets(config, &entries);
    let mut changes: Vec<Option<(String, Change)>> = Vec::with_capacity(entries.len());
    for (entry, target) in entries.iter().zip(&targets) {
        changes.push(match target {
            None => truncate(config, entry, cx, &mut tally)?,
            Some(_) => None,
        });
    }
    for (i, target) in targets.iter().enumerate() {
        let Some(kept) = *target else { continue };
        let entry = &entries[i];
        let kept_truncated = matches!(changes[kept], Some((_, Change::Truncated { .. })));
        changes[i] = if entry.protected && kept_truncated {
            tally.protected_duplicates += 1;
            None
        } else if entries[kept].id.is_empty() {
            truncate(config, entry, cx, &mut tally)?
        } else {
            deduplicate(config, entry, kept, entries[kept].id, cx, &mut tally)?
        };
    }

    // Measured and described while the entries still borrow the conversation, then made.
    let planned: Vec<Planned> = entries
        .iter()
        .zip(changes)
        .filter_map(|(entry, change)| {
            let (text, change) = change?;
            let tool = entry.tool.unwrap_or("?");
            let (kind, detail) = describe(entry, &change, &entries, tool);
            Some(Planned {
                at: ToolResultAt {
                    message: entry.message,
                    block: entry.block,
                    tool: entry.tool.map(str::to_string),
                },
                tokens: cx
                    .count_tokens(&entry.text)
                    .saturating_sub(cx.count_tokens(&text)),
                text,
                duplicate: matches!(change, Change::Duplicate { .. }),
                kind,
                detail,
            })
        })
        .collect();
    drop(entries);
    let images = config.strip_images && has_base64_image(&view);
    let mut events: Vec<Placed> = Vec::new();
    let mut changed: BTreeSet<Place> = BTreeSet::new();
    if planned.is_empty() && !images {
        return Ok(finish(config, None, &tally, events, &changed));
    }
    // Only the messages a planned change touches are copied; they cross back alone unless
    // images are stripped too, which walks the whole conversation.
    let mut replacements = Replacements::new(&view);
    for planned in planned {
        let (mi, bi) = (planned.at.message, planned.at.block);
        let Some(result) = replacements.tool_result_mut(&planned.at) else {
            continue;
        };
        result.content = replace_payload(&result.content, planned.text);
        tally.tokens += planned.tokens;
        changed.insert((mi, bi));
        if planned.duplicate {
            tally.duplicates += 1;
        } else {
            tally.truncated += 1;
        }
        events.push((
            (mi, bi, 0),
            StageEvent {
                kind: planned.kind.to_string(),
                message_id: view
                    .message(mi)
                    .map_or_else(String::new, |m| m.id().to_string()),
                detail: planned.detail,
                tokens: planned.tokens,
            },
        ));
    }
    if !images {
        let report = report(config, &tally, events, &changed);
        return Ok(replacements.into_output(report));
    }
    let replaced = replacements.into_messages();
    // Owned before the view's conversation is taken.
    let protected: HashSet<String> = protected.into_iter().map(str::to_string).collect();
    let mut conv = input.into_conversation()?;
    replace_messages(&mut conv, replaced)?;
    strip_images(
        config,
        &mut conv,
        &protected,
        cx,
        &mut tally,
        &mut events,
        &mut changed,
    )?;
    Ok(finish(config, Some(conv), &tally, events, &changed))
}

/// The output: `conv` (the copy the changes were made in, if any) when a block changed, and
/// the report of the run.
fn finish(
    config: &Config,
    conv: Option<Conversation>,
    tally: &Tally,
    events: Vec<Placed>,
    changed: &BTreeSet<Place>,
) -> StageOutput {
    let report = report(config, tally, events, changed);
    // Every change lands in `changed`: an empty set means the conversation is as it came.
    match conv {
        Some(conv) if !changed.is_empty() => StageOutput::changed(conv, report),
        _ => StageOutput::unchanged(report),
    }
}

/// The report of a run: its events in conversation order, and its notes.
fn report(
    config: &Config,
    tally: &Tally,
    mut events: Vec<Placed>,
    changed: &BTreeSet<Place>,
) -> StageReport {
    events.sort_by_key(|(at, _)| *at);
    let mut report = StageReport {
        blocks_changed: changed.len(),
        tokens_freed: Some(tally.tokens),
        events: events.into_iter().map(|(_, e)| e).collect(),
        ..StageReport::default()
    };
    write_notes(&mut report, tally, config);
    report
}

/// Whether a chat message holds a base64 image, in its content or at the top of one of its
/// tool results' contents: the images [`strip_images`] looks at.
fn has_base64_image(view: &View<'_>) -> bool {
    let base64 = |b: &BlockView<'_>| matches!(b, BlockView::ImageBase64 { .. });
    view.messages().filter(|m| m.is_chat()).any(|m| {
        m.blocks().any(|b| match b {
            BlockView::ToolResult(r) => r.content().blocks().any(|b| base64(&b)),
            other => base64(&other),
        })
    })
}

/// The event kind and detail of one tool result change.
fn describe(
    entry: &Entry<'_>,
    change: &Change,
    entries: &[Entry<'_>],
    tool: &str,
) -> (&'static str, String) {
    let chars = thousands(entry.text.chars().count());
    let id = entry.id;
    match change {
        Change::Duplicate { kept, key } => (
            "deduplicated",
            format!(
                "tool_result {id} ({tool}): {chars} chars, same as tool_use_id {}; \
                 original stored under key {key}",
                entries[*kept].id
            ),
        ),
        Change::Truncated { key, head, tail } => {
            let tail = if *tail > 0 {
                format!(" and last {}", thousands(*tail))
            } else {
                String::new()
            };
            (
                "truncated",
                format!(
                    "tool_result {id} ({tool}): {chars} chars ({} bytes) cut to its first {}{tail} \
                     bytes; original stored under key {key}",
                    thousands(entry.text.len()),
                    thousands(*head),
                ),
            )
        }
    }
}

/// For each entry, the index of the entry whose copy is kept when this one is a duplicate.
fn duplicate_targets(config: &Config, entries: &[Entry<'_>]) -> Vec<Option<usize>> {
    let eligible = |e: &Entry<'_>| !e.snipped && has_chars(&e.text, config.min_duplicate_chars);
    // Each eligible text hashed once, whole (a 128-bit digest: texts with equal digests are
    // still compared in full before one is replaced). A map keyed by the texts hashed every
    // text twice, to insert and to look up, through a streaming hasher.
    let digests: Vec<Option<u128>> = entries
        .iter()
        .map(|e| eligible(e).then(|| XxHash3_128::oneshot(e.text.as_bytes())))
        .collect();
    let mut kept: PrehashedMap<u128, usize> =
        PrehashedMap::with_capacity_and_hasher(entries.len(), Default::default());
    for (i, digest) in digests.iter().enumerate() {
        let Some(digest) = *digest else { continue };
        match config.keep {
            Keep::First => {
                kept.entry(digest).or_insert(i);
            }
            Keep::Last => {
                kept.insert(digest, i);
            }
        }
    }
    digests
        .iter()
        .enumerate()
        .map(|(i, digest)| {
            let k = *kept.get(digest.as_ref()?)?;
            (k != i && entries[k].text == entries[i].text).then_some(k)
        })
        .collect()
}

fn deduplicate(
    config: &Config,
    entry: &Entry<'_>,
    kept: usize,
    kept_id: &str,
    cx: &Context<'_>,
    tally: &mut Tally,
) -> Result<Option<(String, Change)>, StageError> {
    let marker = duplicate_marker(config.keep, kept_id);
    // Shorter in bytes is not enough: 300 newlines are a handful of tokens, the marker ~20.
    if marker.len() >= entry.text.len() || cx.count_tokens(&marker) >= cx.count_tokens(&entry.text)
    {
        tally.not_shorter += 1;
        return Ok(None);
    }
    let key = store(cx, &entry.text, entry.id)?;
    Ok(Some((marker, Change::Duplicate { kept, key })))
}

fn truncate(
    config: &Config,
    entry: &Entry<'_>,
    cx: &Context<'_>,
    tally: &mut Tally,
) -> Result<Option<(String, Change)>, StageError> {
    if entry.snipped || entry.text.len() <= config.max_tool_result_bytes {
        return Ok(None);
    }
    if entry.protected {
        tally.protected_oversized += 1;
        return Ok(None);
    }
    let cut = |key: &str| {
        truncated_text(
            &entry.text,
            config.max_tool_result_bytes,
            config.keep_tail_bytes,
            key,
            entry.error.as_deref(),
        )
        .filter(|t| t.len() < entry.text.len())
    };
    let saves = |t: &str| cx.count_tokens(t) < cx.count_tokens(&entry.text);
    // A lower bound first (empty key), so a result that stays whole costs no store write. Its
    // tokens are counted only when it keeps more than half the bytes: counting a cut is a cold
    // count of new text, and the real cut below is counted all the same, so a lower bound that
    // halves the bytes but would not save tokens costs one unused store write, not a wrong
    // output.
    let halves = |t: &str| t.len() * 2 <= entry.text.len();
    if !cut("").is_some_and(|t| halves(&t) || saves(&t)) {
        tally.not_shorter += 1;
        return Ok(None);
    }
    let key = store(cx, &entry.text, entry.id)?;
    match cut(&key).filter(|t| saves(t)) {
        Some(text) => {
            let head = utf8_prefix(&entry.text, config.max_tool_result_bytes).len();
            let tail = utf8_suffix(&entry.text, config.keep_tail_bytes).len();
            Ok(Some((text, Change::Truncated { key, head, tail })))
        }
        None => {
            tally.not_shorter += 1;
            Ok(None)
        }
    }
}

fn store(cx: &Context<'_>, text: &str, id: &str) -> Result<String, StageError> {
    cx.store_put(text.as_bytes())
        .map_err(|e| format!("cannot store tool result {id}: {}", e.message()).into())
}

/// Strips the base64 images of every chat message and of the tool results in it, except those
/// of protected tool results and, when any turn is protected, of messages not answered yet.
fn strip_images(
    config: &Config,
    conv: &mut Conversation,
    protected: &HashSet<String>,
    cx: &Context<'_>,
    tally: &mut Tally,
    events: &mut Vec<Placed>,
    changed: &mut BTreeSet<Place>,
) -> Result<(), StageError> {
    let unanswered = if config.protect_recent_turns > 0 {
        first_unanswered(conv)
    } else {
        None
    };
    let kept_whole = |mi: usize| unanswered.is_some_and(|from| mi >= from);
    // Counted apart: the closure below holds `tally` while the walks count protected images.
    let mut protected_images = 0;
    // Strips one image; `at` is (message, block, 1 + index within a tool result's content),
    // which orders the events.
    let mut strip = |image: &mut Block,
                     at: (usize, usize, usize),
                     place: &str,
                     message_id: &str|
     -> Result<(), StageError> {
        match images::strip(image, cx)? {
            Stripped::Done { detail, tokens } => {
                tally.images += 1;
                tally.tokens += tokens;
                changed.insert((at.0, at.1));
                events.push((
                    at,
                    StageEvent {
                        kind: "image-stripped".to_string(),
                        message_id: message_id.to_string(),
                        detail: format!("{place}: {detail}"),
                        tokens,
                    },
                ));
            }
            Stripped::NotShorter => tally.not_shorter += 1,
            Stripped::NotBase64 => {}
        }
        Ok(())
    };

    // Images inside the tool results of chat messages.
    for slot in conv.tool_results_mut() {
        if slot.role == Role::Event {
            continue;
        }
        let result = slot.result;
        if protected.contains(&result.tool_use_id) || kept_whole(slot.at.message) {
            protected_images += count_base64(&result.content.blocks);
            continue;
        }
        let place = format!("image in tool_result {}", result.tool_use_id);
        for (ii, block) in result.content.blocks.iter_mut().enumerate() {
            strip(
                block,
                (slot.at.message, slot.at.block, ii + 1),
                &place,
                slot.message_id,
            )?;
        }
    }
    // Images in the chat messages themselves.
    for (mi, message) in conv.messages.iter_mut().enumerate() {
        if !message.is_chat() {
            continue;
        }
        for (bi, block) in message.content.blocks.iter_mut().enumerate() {
            if !matches!(block, Block::Image(_)) {
                continue;
            }
            if kept_whole(mi) {
                protected_images += count_base64(std::slice::from_ref(block));
                continue;
            }
            strip(block, (mi, bi, 1), "image in message", &message.id)?;
        }
    }
    tally.protected_images += protected_images;
    Ok(())
}

fn count_base64(blocks: &[Block]) -> usize {
    blocks
        .iter()
        .filter(|b| matches!(b, Block::Image(i) if matches!(i.source, condense_model::ImageSource::Base64 { .. })))
        .count()
}

fn write_notes(report: &mut StageReport, t: &Tally, config: &Config) {
    report.note(format!(
        "{}, {} truncated, {}; {} tokens freed",
        plural(
            t.duplicates,
            "duplicate tool result",
            "duplicate tool results"
        ),
        thousands(t.truncated),
        plural(t.images, "image", "images"),
        thousands(t.tokens)
    ));
    let turns = match config.protect_recent_turns {
        1 => "the last tool-calling turn".to_string(),
        n => format!("the last {} tool-calling turns", thousands(n)),
    };
    if t.protected_oversized > 0 {
        report.note(format!(
            "kept {} over {} bytes whole: protected, answering {turns}",
            plural(t.protected_oversized, "tool result", "tool results"),
            thousands(config.max_tool_result_bytes)
        ));
    }
    if t.protected_duplicates > 0 {
        report.note(format!(
            "kept {} whole: protected, answering {turns}, and the copy repeated is truncated",
            plural(
                t.protected_duplicates,
                "duplicate tool result",
                "duplicate tool results"
            )
        ));
    }
    if t.protected_images > 0 {
        report.note(format!(
            "kept {}: protected, in results answering {turns} or in messages not answered yet",
            plural(t.protected_images, "image", "images")
        ));
    }
    if t.not_shorter > 0 {
        report.note(format!(
            "left {} as {}: the replacement would not be shorter",
            plural(t.not_shorter, "block", "blocks"),
            if t.not_shorter == 1 {
                "it was"
            } else {
                "they were"
            }
        ));
    }
    if t.already > 0 {
        report.note(format!(
            "{} already snipped by an earlier run",
            plural(t.already, "tool result was", "tool results were")
        ));
    }
}
