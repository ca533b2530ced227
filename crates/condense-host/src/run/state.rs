//! What one run threads through its stages ([`RunState`]), and what it leaves in the store at
//! its end: the retained records of its summaries, how the conversation was read, the run's
//! archive record, and the session's next resume point.

use super::{RunOptions, RunResult, StageRun};
use crate::archive::{record_run, KeyMemo};
use crate::guard;
use crate::pipeline::Pipeline;
use crate::resume::{self, InputHash, PointMemory, Resumed, Start};
use crate::services::RunServices;
use condense_abi::Signal;
use condense_model::fingerprint::fingerprint;
use condense_model::Conversation;
use condense_store::{Store, StoreError};
use condense_tokens::{ConversationCount, TokenCounter};

use super::HostError;

/// The state threaded through one run's stages.
pub(super) struct RunState {
    pub(super) now_ms: i64,
    /// The input's tokens (the whole input's, when the run resumed).
    pub(super) tokens_before: usize,
    pub(super) resumed: Option<Resumed>,
    /// The input's hash, for the next resume point.
    pub(super) input_hash: Option<InputHash>,
    /// The record of the run a resumed run started from the output of.
    pub(super) parent_run: Option<String>,
    /// The archive segments this run wrote, in order.
    pub(super) segments: Vec<String>,
    /// Per message of `current`: the input message it stands for alone, as it is or changed
    /// in place by a stage, with no run of removed messages anchored to it (the resume point
    /// keeps them, [`crate::resume`]'s marks); `None` for any other.
    pub(super) origins: Vec<Option<usize>>,
    pub(super) current: Conversation,
    /// The token count of `current` (kept whole: the budget is computed from it).
    pub(super) count: ConversationCount,
    pub(super) freed: usize,
    /// What the stages that ran so far raised.
    pub(super) signals: Vec<Signal>,
    /// Invariants the conversation already breaks: not the next stage's fault (see `guard`).
    /// Looked for when a change first needs them ([`RunState::violations`]).
    pub(super) violations: Option<Vec<guard::Violation>>,
    pub(super) runs: Vec<StageRun>,
    /// What the host services keep across the run's stages (the originals of rewritten
    /// messages, the state slots written).
    pub(super) services: RunServices,
    /// The archive keys of the output the run resumed from, when its point kept them.
    point_keys: Option<KeyMemo>,
    /// Each message of `current`'s fingerprint while it is known (from the start, and not
    /// changed by a stage since): the output's are made of them ([`RunState::finish`]).
    pub(super) prints: Vec<Option<u128>>,
}

impl RunState {
    /// The invariants `current` breaks, looked for on the first call (see `accept`).
    pub(super) fn violations(&mut self) -> &[guard::Violation] {
        let current = &self.current;
        self.violations
            .get_or_insert_with(|| guard::violations(current))
    }

    pub(super) fn new(counter: &TokenCounter, start: Start, opts: &RunOptions) -> RunState {
        let Start {
            conversation,
            mut hash,
            resumed,
            tokens_before,
            count,
            parent_run,
            keys,
            mut prints,
            mut origins,
        } = start;
        if prints.len() != conversation.messages.len() {
            prints = vec![None; conversation.messages.len()];
        }
        if origins.len() != conversation.messages.len() {
            origins = vec![None; conversation.messages.len()];
        }
        let count = count.unwrap_or_else(|| counter.count_conversation(&conversation));
        if let Some(hash) = hash.as_mut().filter(|h| h.message_tokens.is_none()) {
            // A run over the whole input: `count` is the input's.
            hash.counted_whole(&count);
        }
        let tokens_before = tokens_before.unwrap_or(count.total);
        RunState {
            now_ms: opts.now_ms.unwrap_or_else(system_now_ms),
            // A resumed run starts with what the previous runs freed (the stages' reports
            // count from the whole input).
            freed: tokens_before.saturating_sub(count.total),
            tokens_before,
            resumed,
            input_hash: hash,
            parent_run,
            segments: Vec::new(),
            origins,
            count,
            violations: None,
            current: conversation,
            signals: Vec::new(),
            runs: Vec::new(),
            services: RunServices::default(),
            point_keys: keys,
            prints,
        }
    }

    /// Follows the messages' origins through a stage that made `current` anew: each output
    /// message keeps its input message's (`pairing`), but for those `anchors` names (runs of
    /// removed messages were archived next to them).
    pub(super) fn follow_origins(&mut self, pairing: &crate::archive::Pairing, anchors: &[usize]) {
        let before = std::mem::take(&mut self.origins);
        self.origins = (0..self.current.messages.len())
            .map(|a| {
                pairing
                    .input_of(a)
                    .and_then(|b| before.get(b).copied().flatten())
            })
            .collect();
        for &a in anchors {
            if let Some(origin) = self.origins.get_mut(a) {
                *origin = None;
            }
        }
    }

    /// Forgets the fingerprints of the messages a stage changed, by index.
    pub(super) fn forget_prints(&mut self, changed: impl IntoIterator<Item = usize>) {
        for i in changed {
            if let Some(p) = self.prints.get_mut(i) {
                *p = None;
            }
        }
    }

    /// The result, after storing the retained records of the summaries the output holds and
    /// how the conversation was read (for `expand`); and the input's hash for the next resume
    /// point. `keys`: the archive keys a long-lived pipeline remembers; else those of the
    /// output the run resumed from.
    pub(super) fn finish(
        self,
        pipeline: &Pipeline,
        store: &Store,
        session: &str,
        opts: &RunOptions,
        keys: Option<&KeyMemo>,
    ) -> Result<(RunResult, Option<InputHash>), HostError> {
        crate::summaries::store_records(&self.services.records, store, session, &self.current)?;
        let keys = keys.or(self.point_keys.as_ref());
        record_format(store, session, &opts.format)?;
        // Made once for what looks the output's messages up by them: the keys a long-lived
        // pipeline remembers, the resume point, the proxy's prefix hashes.
        // Those of the messages no stage changed are known from the start.
        let output_fingerprints: Vec<u128> = if keys.is_some() || self.input_hash.is_some() {
            let messages = &self.current.messages;
            let known = self.prints.iter().copied().chain(std::iter::repeat(None));
            let prints: Vec<u128> = messages
                .iter()
                .zip(known)
                .map(|(m, p)| p.unwrap_or_else(|| fingerprint(m)))
                .collect();
            debug_assert!(
                messages
                    .iter()
                    .zip(&prints)
                    .all(|(m, &p)| p == fingerprint(m)),
                "a fingerprint carried from the start is not its message's"
            );
            prints
        } else {
            Vec::new()
        };
        let archive_run = record_run(
            store,
            session,
            self.parent_run.as_deref(),
            self.segments,
            (&self.current, &output_fingerprints),
            keys,
        )?;
        let result = RunResult {
            archive_run,
            output_fingerprints,
            budget_after: self.count.budget(&pipeline.budget),
            conversation: self.current,
            session: session.to_string(),
            tokens_before: self.tokens_before,
            tokens_after: self.count.total,
            resumed: self.resumed,
            stages: self.runs,
        };
        let hash = self.input_hash.map(|mut h| {
            h.output_count = Some(self.count);
            h.origins = self.origins;
            h
        });
        Ok((result, hash))
    }
}

/// Keeps `result`'s output as the session's resume point, when the run keeps one.
pub(super) fn save_point(
    store: &Store,
    session: &str,
    settings: Option<String>,
    hash: Option<InputHash>,
    result: &RunResult,
    memory: Option<&PointMemory>,
) -> Result<(), HostError> {
    if let (Some(settings), Some(hash)) = (settings, hash) {
        resume::save(
            store,
            session,
            &settings,
            &hash,
            (result.archive_run.name(), result.archive_run.keys()),
            (&result.conversation, &result.output_fingerprints),
            memory,
        )?;
    }
    Ok(())
}

/// Records the format `session` was read with, unless that format is recorded already: the
/// caller may have recorded it with its `--select` pointer
/// ([`crate::archive::record_read_as`]), which the run does not know.
fn record_format(store: &Store, session: &str, format: &str) -> Result<(), StoreError> {
    if format.is_empty() {
        return Ok(());
    }
    match crate::archive::recorded_read_as(store, session)? {
        Some(recorded) if recorded.format == format => Ok(()),
        _ => crate::archive::record_read_as(
            store,
            session,
            &crate::archive::ReadAs {
                format: format.to_string(),
                select: None,
            },
        ),
    }
}

fn system_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
