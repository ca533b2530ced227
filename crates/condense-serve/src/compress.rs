//! One request body through the pipeline, on the blocking pool: read it in its API's format,
//! run the stages (with the first `level` levels forced when the upstream said the prompt was
//! too long), write it back, archive it as written (so `condense expand` restores it).

use crate::body::Body;
use crate::Api;
use condense_formats::frames::FrameMemo;
use condense_formats::{known, Document, Format, ReadOptions, WriteMemo, Written};
use condense_host::{LoadedPipeline, RunOptions, StateMode};
use condense_model::fingerprint::fingerprint;
use condense_model::recent::Recent;
use condense_model::Conversation;
use condense_store::Store;
use std::sync::Arc;

/// What the pipeline made of a body.
#[derive(Debug)]
pub struct Compressed {
    /// The body to send; `None` when it is the client's, byte for byte.
    pub body: Option<Vec<u8>>,
    pub tokens_before: usize,
    pub tokens_after: usize,
    /// The stages that saved tokens, in order; first `resumed` when the run started from the
    /// session's previous output ([`condense_host::Resumed`]).
    pub acted: Vec<String>,
    /// See [`crate::backend::Turn::prefix`].
    pub prefix: Vec<u64>,
    /// The beta features `body` uses that its API wants named in a header, or the request is
    /// refused: Anthropic's `context_management` ([`CONTEXT_MANAGEMENT_BETA`]), named in
    /// `anthropic-beta` when the body is sent.
    pub betas: Vec<&'static str>,
}

/// The `anthropic-beta` value the API wants with a request's `context_management`, which
/// microcompact writes (`emit_context_management`).
pub const CONTEXT_MANAGEMENT_BETA: &str = "context-management-2025-06-27";

/// The beta features a conversation condense wrote uses: Anthropic's `context_management`
/// (a request that carries it without the beta named is refused with a 400).
pub(crate) fn betas_of(format: Format, conv: &Conversation) -> Vec<&'static str> {
    let key = "context_management";
    let uses = format == Format::Anthropic
        && conv.extra.as_str().contains(key)
        && conv.extra.to_map().is_ok_and(|m| m.contains_key(key));
    if uses {
        vec![CONTEXT_MANAGEMENT_BETA]
    } else {
        Vec::new()
    }
}

/// Reads a request body as its API's format: exactly one conversation.
pub fn read(body: &[u8], api: Api) -> Result<Document, String> {
    one(condense_formats::read(body, BODY, &options(api)))
}

/// [`read`] of bytes the document keeps, taking the system prompt and tools from `frames`
/// where their bytes were read before ([`condense_formats::frames`]).
pub(crate) fn read_framed(
    bytes: std::borrow::Cow<'_, [u8]>,
    api: Api,
    frames: Option<&FrameMemo>,
) -> Result<Document, String> {
    let Some(frames) = frames else {
        return read(&bytes, api);
    };
    match condense_formats::utf8_string(bytes.into_owned()) {
        Ok(text) => {
            let nothing_known = |_| Vec::new();
            let known = (&nothing_known as known::Lists<'_>, None);
            one(condense_formats::read_shared_knowing(
                Arc::new(text),
                BODY,
                &options(api),
                known,
                Some(frames),
            ))
        }
        Err(bytes) => read(&bytes, api),
    }
}

/// [`read`], keeping the body's text as the document's (no copy of it), and leaving unread
/// what `store` knows of the message list from an earlier request
/// ([`condense_formats::known`]): its history, which the session's resume point stands for.
/// `matched`: what the session look matched of this body's list ([`known_lists`]); `frames`:
/// the system prompts and tool lists read before ([`condense_formats::frames`]).
pub(crate) fn read_body(
    body: &Body,
    api: Api,
    (store, frames): (&Store, &FrameMemo),
    matched: Option<known::Matched>,
) -> Result<Document, String> {
    let lists = known_lists(store);
    let opts = options(api);
    one(match body.text() {
        Some(text) => condense_formats::read_shared_knowing(
            Arc::clone(text),
            BODY,
            &opts,
            (&lists, matched),
            Some(frames),
        ),
        None => {
            let bytes = body.bytes().to_vec();
            condense_formats::read_owned_knowing(bytes, BODY, &opts, &lists)
        }
    })
}

/// How request bodies are named in errors.
const BODY: &str = "<request body>";

fn options(api: Api) -> ReadOptions {
    ReadOptions {
        format: Some(api.format()),
        select: None,
    }
}

/// The document of a read, when it holds exactly one conversation (a request).
fn one(read: Result<Document, condense_formats::FormatError>) -> Result<Document, String> {
    let doc = read.map_err(|e| e.to_string())?;
    match doc.conversations().len() {
        1 => Ok(doc),
        n => Err(format!(
            "<request body>: holds {n} conversations, not one request"
        )),
    }
}

/// The plugins of the enabled stages, lightest first: the recovery chain's levels.
pub fn levels(pipeline: &LoadedPipeline) -> Vec<String> {
    pipeline
        .stages
        .iter()
        .filter(|s| s.spec.enabled)
        .map(|s| s.spec.plugin.clone())
        .collect()
}

/// Runs the pipeline over the document read from `body`, forcing the first `level` levels:
/// what to send as soon as it is written and archived, and what only the session's next
/// request needs (its resume point, the message list to leave unread, the output in memory),
/// to [`keep`] while the body is on its way upstream. `memo`: the session's texts from its
/// previous request's write ([`WriteMemos`]).
///
/// `Err`: nothing to send (the caller forwards the client's body or answers 502).
pub fn run(
    mut doc: Document,
    body: &[u8],
    pipeline: &LoadedPipeline,
    (store, session): (&Store, &str),
    level: usize,
    memo: &mut WriteMemo,
) -> Result<(Compressed, ToKeep), String> {
    let format = doc.format();
    let opts = RunOptions {
        now_ms: None,
        format: format.as_str().to_string(),
        record_outputs: false,
        forced: levels(pipeline).into_iter().take(level).collect(),
        disabled: condense_host::env_disabled(),
        state: StateMode::Saved,
        // Each request is the session's previous one plus a turn: start from its output.
        resume: true,
    };
    let conv = std::mem::take(&mut doc.conversations_mut()[0]);
    let (mut result, point) = {
        let doc = &doc;
        let texts = |m: &condense_model::Message, at: usize| {
            doc.original_text_at(0, m, at)
                .map(condense_host::archive::Original::of)
        };
        let read_all = || doc.read_unread(0).map_err(|e| e.to_string());
        let read = condense_host::ReadFrom {
            texts: &texts,
            fingerprints: doc.message_fingerprints(0),
            unread: doc.unread(0).map(|mask| condense_host::Unread {
                mask,
                read_all: &read_all,
            }),
            lists_known: doc.lists_known(),
        };
        pipeline
            .run_with_texts_deferring(conv, store, session, &opts, &read)
            .map_err(|e| e.to_string())?
    };
    // A request that started from the session's previous output says so first: the tokens it
    // saves include what earlier requests' stages cut. Earlier messages the client edited
    // since (masked old observations) are said with it.
    let acted = result
        .resumed
        .iter()
        .map(|r| match r.edited_messages {
            0 => "resumed".to_string(),
            n => format!("resumed ({n} edited)"),
        })
        .chain(
            result
                .stages
                .iter()
                .filter(|s| s.tokens_saved > 0)
                .map(|s| s.name.clone()),
        )
        .collect();
    let prefix = prefix_hashes(&result.conversation, &result.output_fingerprints);
    let betas = betas_of(format, &result.conversation);
    let (tokens_before, tokens_after) = (result.tokens_before, result.tokens_after);
    doc.conversations_mut()[0] = std::mem::take(&mut result.conversation);
    doc.vouch_fingerprints(0, result.output_fingerprints.clone());
    let out = doc.write_remembering(memo).map_err(|e| e.to_string())?;
    let (body, betas) = if *out == *body {
        // The client's own body: its headers are its own too.
        (None, Vec::new())
    } else {
        let what = (&out, &mut *memo, "compressed body");
        archive_as_written(&doc, what, None, &[(session, &result.archive_run)], store)?;
        (Some(out.into_bytes()), betas)
    };
    result.conversation = std::mem::take(&mut doc.conversations_mut()[0]);
    let compressed = Compressed {
        body,
        tokens_before,
        tokens_after,
        acted,
        prefix,
        betas,
    };
    Ok((compressed, ToKeep { doc, result, point }))
}

/// What a run left for its session's next request ([`run`], [`keep`]).
pub struct ToKeep {
    doc: Document,
    result: condense_host::RunResult,
    point: condense_host::PendingPoint,
}

/// Keeps what the session's next request starts from, in one transaction: the resume point of
/// a [`run`] whose body was sent, the message list to leave unread, and the output in memory.
/// `Err`: the next request starts from this one's predecessor (the store holds everything
/// this one removed either way).
pub fn keep(
    kept: ToKeep,
    pipeline: &LoadedPipeline,
    (store, session): (&Store, &str),
) -> Result<(), String> {
    let ToKeep { doc, result, point } = kept;
    let batch = store.batch();
    pipeline
        .keep_point(store, session, point, &result)
        .map_err(|e| e.to_string())?;
    remember_list(&doc, store)?;
    batch.commit().map_err(|e| e.to_string())?;
    // Written, archived and sent: the output goes to the session's point in memory, not copied.
    pipeline.keep_output(store, session, result.conversation);
    Ok(())
}

/// How many sessions' write memos a proxy keeps, as many as the host keeps resume points: the
/// least recently used goes first.
const WRITE_MEMO_SESSIONS: usize = 64;

/// The writer's memos of the sessions served last ([`WriteMemo`]): a session's request
/// serializes only the messages its stages changed since the previous request (at 200k
/// tokens, most of the writer's cost was serializing the same snip-cut results again). Each
/// holds about one output's changed messages. A memo is taken out while its session's request
/// is written (requests of one session are in order) and kept again after.
#[derive(Debug)]
pub struct WriteMemos(Recent<String, WriteMemo>);

impl Default for WriteMemos {
    fn default() -> Self {
        WriteMemos(Recent::new(WRITE_MEMO_SESSIONS))
    }
}

impl WriteMemos {
    /// `session`'s memo, taken out (an empty one when none is kept).
    pub fn take(&self, session: &str) -> WriteMemo {
        self.0.take(session).unwrap_or_default()
    }

    /// Keeps `memo` as `session`'s.
    pub fn keep(&self, session: &str, memo: WriteMemo) {
        self.0.keep(session.to_string(), memo);
    }

    /// How many sessions have a memo.
    pub fn sessions(&self) -> usize {
        self.0.len()
    }
}

/// The message lists `store` knows ([`condense_formats::known`]), by first element's key: what
/// a read that leaves them unread asks (the request bodies' reads and the session look, and
/// `condense compress`'s read). The session's resume point holds the messages its output kept
/// (a long-lived pipeline's memory, or the packs a point saved without it keeps;
/// `condense_host`'s resume), and a run reads them after all when it has neither.
pub fn known_lists(store: &Store) -> impl Fn(u64) -> Vec<known::KnownList> + '_ {
    known::lookup(known_record(store))
}

/// The record named `name` in `store`'s namespace `namespace` (known lists and their
/// blocks); an unreadable one is none.
fn known_record(store: &Store) -> impl Fn(&str, &str) -> Option<Vec<u8>> + '_ {
    |namespace, name| store.record_get(namespace, name).ok().flatten()
}

/// Keeps in `store` what the next read of `doc`'s message list may leave unread, after a run
/// that kept a resume point to start that read's run from. Nothing when the list was not read
/// quick.
pub fn remember_list(doc: &Document, store: &Store) -> Result<(), String> {
    let Some(write) = doc.known_record(known_record(store)) else {
        return Ok(());
    };
    let batch = store.batch();
    let put = || -> Result<(), condense_store::StoreError> {
        for (name, bytes) in &write.blocks {
            store.record_put(known::BLOCKS, name, bytes)?;
        }
        store.record_put(known::RECORDS, &write.name, &write.record)?;
        for name in &write.stale {
            store.record_remove(known::BLOCKS, name)?;
        }
        Ok(())
    };
    put().map_err(|e| e.to_string())?;
    batch.commit().map_err(|e| e.to_string())
}

/// Reads `out`, what `doc` was just written as (with `memo`), back as `condense expand` will,
/// and archives every message that reads back differently from what the stages produced (a
/// summary a stage made gets the id and wrapper line the format gives it), so expansion starts
/// from the file itself. `runs`: each conversation's session and run record, in order; `select`:
/// the pointer the input was read with; `what` names the output in an error (`output`,
/// `compressed body`). `condense compress` and the proxy both archive this way.
pub fn archive_as_written(
    doc: &Document,
    (out, memo, what): (&Written, &mut WriteMemo, &str),
    select: Option<String>,
    runs: &[(&str, &condense_host::archive::ArchivedRun)],
    store: &Store,
) -> Result<(), String> {
    let opts = ReadOptions {
        format: Some(doc.format()),
        select,
    };
    let reread = doc
        .read_back((out, &format!("<{what}>")), memo, &opts)
        .map_err(|e| format!("the {what} does not read back: {e}"))?;
    for ((produced, back), (session, run)) in doc.conversations().iter().zip(&reread).zip(runs) {
        let back = (&back.conversation, back.same.as_slice());
        condense_host::archive::archive_written(store, session, produced, back, Some(run))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// One hash for the system prompt and tools, then one per message (64 bits of each one's
/// fingerprint; `prints`: those fingerprints when the run made them, else empty). A message is
/// hashed without its prompt-cache marks ([`condense_model::cache_marks`]): a client that
/// moves its mark to its newest message every turn changes no cached prefix (the provider
/// reads one back up to an earlier breakpoint), so the turn keeps the prefix stable.
pub fn prefix_hashes(conv: &Conversation, prints: &[u128]) -> Vec<u64> {
    let mut out = Vec::with_capacity(conv.messages.len() + 1);
    out.push(fingerprint(&(&conv.system, &conv.tools)) as u64);
    let prints = condense_model::fingerprint::each(&conv.messages, prints);
    let unmarked = |(m, p): (&condense_model::Message, &u128)| {
        condense_model::cache_marks::unmarked_fingerprint(m).unwrap_or(*p)
    };
    out.extend(
        conv.messages
            .iter()
            .zip(prints.iter())
            .map(|mp| unmarked(mp) as u64),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_memos_keep_the_sessions_served_last() {
        let memos = WriteMemos::default();
        let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let mut doc = read(body, Api::Anthropic).unwrap();
        doc.conversations_mut()[0].messages[0].content = condense_model::Content::string("hello");
        for i in 0..=WRITE_MEMO_SESSIONS {
            let mut memo = memos.take(&format!("s{i}"));
            doc.write_remembering(&mut memo).unwrap();
            memos.keep(&format!("s{i}"), memo);
        }
        // One session too many: the least recently used one went.
        assert_eq!(memos.sessions(), WRITE_MEMO_SESSIONS);
        assert!(memos.take("s0").is_empty());
        let kept = memos.take(&format!("s{WRITE_MEMO_SESSIONS}"));
        assert_eq!(kept.len(), 1);
        // Taken out while its request is written.
        assert_eq!(memos.sessions(), WRITE_MEMO_SESSIONS - 1);
    }

    /// Only an Anthropic conversation whose top-level fields hold `context_management` uses the
    /// beta; the words inside another field's text do not.
    #[test]
    fn a_conversation_uses_the_context_management_beta_when_it_holds_the_field() {
        let conv = |extra: &str, format| {
            let mut doc = read(
                format!(r#"{{"model":"m",{extra}"messages":[{{"role":"user","content":"hi"}}]}}"#)
                    .as_bytes(),
                Api::Anthropic,
            )
            .unwrap();
            (std::mem::take(&mut doc.conversations_mut()[0]), format)
        };
        let with = r#""context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]},"#;
        let (c, f) = conv(with, Format::Anthropic);
        assert_eq!(betas_of(f, &c), [CONTEXT_MANAGEMENT_BETA]);
        let (c, _) = conv(with, Format::Anthropic);
        assert!(betas_of(Format::OpenAi, &c).is_empty());
        let (c, f) = conv(
            r#""metadata":{"note":"context_management"},"#,
            Format::Anthropic,
        );
        assert!(betas_of(f, &c).is_empty());
        let (c, f) = conv("", Format::Anthropic);
        assert!(betas_of(f, &c).is_empty());
    }

    /// Each API's output limit reaches the head the proxy reads, from the body as read.
    #[test]
    fn each_apis_output_limit_is_read_from_its_body() {
        let limit = |body: &str, api| {
            let mut doc = read(body.as_bytes(), api).unwrap();
            let conv = std::mem::take(&mut doc.conversations_mut()[0]);
            crate::session::head_of(&conv).max_output()
        };
        let anthropic =
            r#"{"model":"m","max_tokens":64000,"messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(limit(anthropic, Api::Anthropic), Some(64_000));
        let chat = r#"{"model":"m","max_completion_tokens":9000,"messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(limit(chat, Api::OpenAiChat), Some(9_000));
        let responses =
            r#"{"model":"m","max_output_tokens":128000,"input":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(limit(responses, Api::Responses), Some(128_000));
    }
}
