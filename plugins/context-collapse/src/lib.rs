//! `context-collapse`: level 4 of the pipeline, a projection that folds old API turns into
//! summaries without rewriting the conversation.
//!
//! When the conversation approaches the window, this stage **commits** collapses: spans of old
//! API turns, each replaced in the stage's output by one summary message the host's summarizer
//! writes. Committed collapses live in the stage state, and every run **re-applies** all of them
//! whose span is still in the input, so the same collapses always give the same view (stable
//! across runs, friendly to prompt caches). The input is never rewritten otherwise, and the host
//! archives the replaced messages, so `condense expand` restores every original message. It is a
//! database view over the message list, not an edit of it.
//!
//! ```toml
//! [[stage]]
//! name = "collapse"
//! plugin = "context-collapse"
//! [stage.config]
//! commit_at = 0.90           # commit new collapses from 90% of the effective window
//! block_at = 0.95            # from 95%, collapsing is mandatory (reported when not enough)
//! keep_recent_turns = 4      # the most recent API turns (model calls) are never collapsed (>= 1)
//! turns_per_span = 4         # API turns per committed span (>= 1)
//! summary_max_tokens = 2000  # the most a span's summary may take
//! ```
//!
//! # API turns
//!
//! The unit is the **API turn**, one API round (see `condense_turns`): one assistant response
//! (consecutive assistant messages, as Claude Code writes one response line by line) with the
//! tool-result messages that answer its calls, opened by the user prompt it answers when there
//! is one. An autonomous stretch of 150 sequential tool calls after one user prompt is about 150
//! turns, not one (parallel calls made in one response are one turn), so collapse can fold the
//! old part of a long stretch and keep its recent calls, which is what agent sessions need: they
//! are dominated by such stretches. A call whose result comes back much later (a `Task` subagent
//! whose own lines are written in between) is one turn with everything in between, since a turn
//! never separates a call from its result.
//!
//! The defaults count these turns. `keep_recent_turns = 4` keeps the last four model calls and
//! everything they got back verbatim: the agent's working set (the file just read, the command
//! just run, the edit just made and its check) plus the prompt, when it is that recent. Fewer
//! would summarize the result the agent is acting on; more would, in a tight window, hold back
//! exactly the tool output that fills it. `turns_per_span = 4` makes a span a small step of work
//! (a few calls and their results): commits free about what is needed to get back under
//! `commit_at` rather than much more, and each merge into the running summary (below) brings it
//! a coherent step. The cost is one summarizer call per span when a conversation jumps far past
//! `commit_at` at once; a session that grows a few turns per run commits a span now and then.
//!
//! # When it commits
//!
//! The effective window is the host's `context_window` minus `min(max_output_tokens, 20,000)`
//! (the `condense_tokens::BudgetConfig` arithmetic, the same as autocompact's). The stage takes
//! `Host::conversation_tokens()` **as it is**: it is already the count of the conversation handed
//! to this stage, after the earlier stages freed what they freed, so subtracting
//! `tokens_freed_before()` would count those savings twice. From it, it subtracts what the
//! re-applied collapses save (the **projected** count). When the projected count reaches
//! `commit_at × effective`, it commits new spans, oldest uncollapsed turns first, until the
//! projected count is below that again or only the `keep_recent_turns` most recent turns are
//! left. The host flag `force:context-collapse` (the host's recovery chain after a
//! prompt-too-long error) commits as if above `commit_at`, until only `keep_recent_turns` turns
//! remain. If the projected count is still at or above `block_at × effective` when nothing more
//! may be collapsed, the report says so plainly; the stage does not fail.
//!
//! What a span saves is estimated as the tokens of its messages (`Host::count_tokens` of every
//! block, see `condense_turns::measure`) minus the tokens of its summary message. A span whose
//! summary would not be smaller is not committed: this stage never grows the conversation.
//!
//! # Spans
//!
//! Spans are whole API turns (see [`turns`]): a span never separates a `tool_use` from its
//! `tool_result`, never holds a system message, and never touches the leading content before the
//! first user prompt. A span is `turns_per_span` consecutive turns, or fewer at the end of what
//! may be collapsed. A span may end in the middle of an autonomous stretch: the summary then
//! stands for the calls made so far, and the turn after it is the next model call.
//!
//! A span that starts right after an existing summary is **merged** into it: the summarizer gets
//! the older summary as `previous_summary` and the new span's messages (anchored iterative
//! summarization) and writes one combined summary for the combined span, which keeps the older
//! summary's id. Since spans are committed oldest first, the collapsed history is in practice one
//! running summary at the head of the conversation, extended span by span, whose size stays
//! within `summary_max_tokens` however long the session gets.
//!
//! # The summary message
//!
//! A [`Role::User`] text message with id `collapse-<first id>`:
//!
//! ```text
//! [condense: summary of 23 earlier messages (ids 4f1c…9a2e)]
//! <the summary>
//! ```
//!
//! `23` counts every message the summary replaces (event lines included: they travel with their
//! turn). It takes the timestamp of the first message it replaces and, in a Claude Code session,
//! that message's wrapper line without its line-specific fields (`sessionId`, `cwd`, ... stay), so
//! the host still finds the session and the message reads back exactly as written. Event lines are not given to the summarizer (the model never saw them). System messages
//! inside a span's range stay, right after its summary. The stage recognises its own summary
//! messages in its input (its output read back), so a rerun on its own output changes nothing.
//!
//! # Report
//!
//! Events `reapplied` (a collapse of an earlier run) and `collapsed` (committed or merged in this
//! run), each with the span's first message id, its size and its summary's size, and the tokens
//! it saves. `tokens_freed` is the sum. Whenever at least one collapse is applied, the report
//! raises the flag `context-collapse:active`: autocompact stands down then, since it would
//! otherwise fire between collapse's commit point and its blocking point and throw away the
//! granular context collapse keeps.

pub mod state;

/// API-turn grouping (the `condense-turns` library, shared with autocompact).
pub use condense_turns as turns;

use condense_abi::{Host, Stage, StageEvent, StageOutput, StageReport, SummaryRequest};
use condense_model::{Block, Content, Conversation, Message, Role};
use condense_tokens::BudgetConfig;
use condense_turns::measure::{cut_to_tokens, fraction_of, message_tokens, percent, thousands};
use serde::{Deserialize, Serialize};
use state::{Collapse, State};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;

/// The flag this stage raises when at least one collapse is applied.
pub const ACTIVE_FLAG: &str = "context-collapse:active";
/// The host flag that makes the stage commit as if above `commit_at`.
pub const FORCE_FLAG: &str = "force:context-collapse";
/// The start of a summary message's text.
pub const SUMMARY_MARKER: &str = "[condense: summary of ";
/// The prefix of a summary message's id.
pub const ID_PREFIX: &str = "collapse-";
/// The `purpose` of this stage's summary requests.
pub const PURPOSE: &str = "context-collapse";

/// The stage's `[stage.config]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Fraction of the effective window from which new collapses are committed.
    pub commit_at: f64,
    /// Fraction of the effective window from which collapsing is mandatory.
    pub block_at: f64,
    /// The most recent API turns (API rounds: model calls with their results), never
    /// collapsed.
    pub keep_recent_turns: usize,
    /// API turns (API rounds) per committed span.
    pub turns_per_span: usize,
    /// The most a span's summary may take, in tokens.
    pub summary_max_tokens: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            commit_at: 0.90,
            block_at: 0.95,
            keep_recent_turns: 4,
            turns_per_span: 4,
            summary_max_tokens: 2_000,
        }
    }
}

/// The stage.
#[derive(Debug)]
pub struct ContextCollapse {
    config: Config,
}

impl ContextCollapse {
    pub fn config(&self) -> &Config {
        &self.config
    }
}

impl Stage for ContextCollapse {
    type Config = Config;
    const NAME: &'static str = "context-collapse";
    const DESCRIPTION: &'static str = "Level 4: a projection that replaces committed spans of old \
        API turns by one summary each, re-applied identically on every run; the input is never \
        rewritten otherwise.";
    const CONFIG_DOCS: &'static [(&'static str, &'static str)] = &[
        (
            "commit_at",
            "Fraction of the effective window (window - min(max output, 20,000)) from which new \
             collapses are committed, in (0, 1].",
        ),
        (
            "block_at",
            "Fraction of the effective window from which collapsing is mandatory; a count still \
             above it once nothing more may be collapsed is reported. commit_at <= block_at <= 1.",
        ),
        (
            "keep_recent_turns",
            "The most recent API turns, never collapsed (>= 1). An API turn is one API round: \
             an assistant response (consecutive assistant messages) with the tool results that \
             answer it, opened by the user prompt it answers when there is one; an autonomous \
             stretch of tool calls is one turn per call. 4 keeps the agent's last few calls and \
             their results verbatim.",
        ),
        (
            "turns_per_span",
            "API turns (API rounds, see keep_recent_turns) per committed span (>= 1); 4: a \
             small step of work per span, so commits free about what is needed.",
        ),
        (
            "summary_max_tokens",
            "The most a span's summary may take, in tokens (>= 1).",
        ),
    ];

    fn new(config: Config) -> Result<Self, String> {
        let fraction_ok = |v: f64| v.is_finite() && v > 0.0 && v <= 1.0;
        if !fraction_ok(config.commit_at) {
            return Err(format!(
                "commit_at must be a fraction of the effective window in (0, 1], got {}",
                config.commit_at
            ));
        }
        if !fraction_ok(config.block_at) {
            return Err(format!(
                "block_at must be a fraction of the effective window in (0, 1], got {}",
                config.block_at
            ));
        }
        if config.commit_at > config.block_at {
            return Err(format!(
                "commit_at ({}) must not be above block_at ({})",
                config.commit_at, config.block_at
            ));
        }
        for (name, value) in [
            ("keep_recent_turns", config.keep_recent_turns),
            ("turns_per_span", config.turns_per_span),
            ("summary_max_tokens", config.summary_max_tokens),
        ] {
            if value == 0 {
                return Err(format!("{name} must be >= 1, got 0"));
            }
        }
        Ok(ContextCollapse { config })
    }

    fn apply(&self, conversation: Conversation, host: &dyn Host) -> Result<StageOutput, String> {
        let (state, loaded) = State::load(host)?;
        let mut run = Run::new(&self.config, &conversation.messages, state, host);
        run.plan();
        run.commit();
        let (messages, report) = run.finish(loaded.as_deref())?;
        Ok(StageOutput {
            conversation: Conversation {
                messages,
                ..conversation
            },
            report,
        })
    }
}

/// A summary message's header line, parsed: `(count, first, last)`.
pub fn parse_header(text: &str) -> Option<(usize, &str, &str)> {
    let rest = text.strip_prefix(SUMMARY_MARKER)?;
    let (count, rest) = rest.split_once(" earlier messages (ids ")?;
    let (ids, _) = rest.split_once(")]")?;
    let (first, last) = ids.split_once('…')?;
    Some((count.parse().ok()?, first, last))
}

/// Whether `message` is a summary message of this stage.
pub fn is_summary_message(message: &Message) -> bool {
    message.role == Role::User
        && message.id.starts_with(ID_PREFIX)
        && matches!(message.content.blocks.as_slice(), [Block::Text(t)] if t.text.starts_with(SUMMARY_MARKER))
}

/// The summary message of a collapse, with the timestamp and, for Claude Code, the wrapper line
/// of `first`, the first message it replaces (see [`condense_turns::envelope_template`]).
pub fn summary_message(
    collapse: &Collapse,
    first: Option<&Message>,
    source_format: &str,
) -> Message {
    let text = format!(
        "{SUMMARY_MARKER}{} earlier messages (ids {}…{})]\n{}",
        collapse.count, collapse.first, collapse.last, collapse.summary
    );
    let mut message = Message {
        id: format!("{ID_PREFIX}{}", collapse.first),
        role: Role::User,
        timestamp: first.and_then(|m| m.timestamp.clone()),
        content: Content::string(text),
        extra: Default::default(),
        envelope: Default::default(),
    };
    if let Some(first) = first {
        message.envelope = condense_turns::envelope_template(source_format, first, &message);
    }
    message
}

/// One part of the conversation after the leading content.
#[derive(Debug, Clone)]
enum Unit {
    /// An API turn left as it is (index into the turns).
    Turn(usize),
    /// A collapse (index into `Run::collapses`) over a range of the input.
    Collapsed(usize),
}

/// A collapse applied in this run.
#[derive(Debug, Clone)]
struct Applied {
    collapse: Collapse,
    /// Whole turns of the input it replaces (system messages inside stay).
    range: Range<usize>,
    /// Tokens of the input messages in `range` (system messages excluded).
    input_tokens: usize,
    /// How it was found: the original messages, or a summary message already in the input.
    found: Found,
    /// Whether it was committed or merged in this run.
    fresh: bool,
    /// For a collapse of an earlier run: itself and its input tokens before any merge in this run.
    prior: Option<(Collapse, usize)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    Span,
    SummaryMessage,
    Adopted,
}

struct Run<'a> {
    config: &'a Config,
    messages: &'a [Message],
    host: &'a dyn Host,
    turns: condense_turns::Turns,
    stored: State,
    collapses: Vec<Applied>,
    units: Vec<Unit>,
    effective: usize,
    commit_threshold: usize,
    block_threshold: usize,
    conversation_tokens: usize,
    projected: usize,
    forced: bool,
    /// Why committing stopped while still over `commit_at`.
    stopped: Option<String>,
    report: StageReport,
}

impl<'a> Run<'a> {
    fn new(config: &'a Config, messages: &'a [Message], stored: State, host: &'a dyn Host) -> Self {
        let budget = BudgetConfig {
            context_window: host.context_window(),
            max_output_tokens: host.max_output_tokens(),
            ..BudgetConfig::default()
        };
        let effective = budget.effective_window();
        let conversation_tokens = host.conversation_tokens();
        Run {
            config,
            messages,
            host,
            turns: condense_turns::group(messages),
            stored,
            collapses: Vec::new(),
            units: Vec::new(),
            effective,
            commit_threshold: fraction_of(config.commit_at, effective),
            block_threshold: fraction_of(config.block_at, effective),
            conversation_tokens,
            projected: conversation_tokens,
            forced: host.has_flag(FORCE_FLAG),
            stopped: None,
            report: StageReport::default(),
        }
    }

    fn tokens_of_range(&self, range: Range<usize>) -> usize {
        self.messages[range]
            .iter()
            .filter(|m| m.role != Role::System)
            .map(|m| message_tokens(self.host, m))
            .sum()
    }

    /// Whether `end` closes a turn: the messages from `end` to the end of the turn holding
    /// `end - 1` are all system messages. Returns that turn's end.
    fn turn_end_at(&self, end: usize) -> Option<usize> {
        let t = self.turns.turn_of(end.checked_sub(1)?)?;
        let turn_end = self.turns.turns[t].end;
        self.messages[end..turn_end]
            .iter()
            .all(|m| m.role == Role::System)
            .then_some(turn_end)
    }

    /// Where a stored collapse is in the input: the whole-turn range it covers and how.
    fn locate(&self, c: &Collapse, index: &HashMap<&str, usize>) -> Option<(Range<usize>, Found)> {
        let starts_turn = |p: usize| self.turns.turns.iter().any(|t| t.start == p);
        if let Some(&p) = c.ids.first().and_then(|id| index.get(id.as_str())) {
            if starts_turn(p) {
                if let Some(end) = self.match_ids(p, &c.ids).and_then(|q| self.turn_end_at(q)) {
                    return Some((p..end, Found::Span));
                }
            }
        }
        // The summary message itself (the stage's output read back), possibly followed by the
        // messages of spans merged into it since.
        let summary_id = format!("{ID_PREFIX}{}", c.first);
        let &p = index.get(summary_id.as_str())?;
        if !(is_summary_message(&self.messages[p]) && starts_turn(p)) {
            return None;
        }
        let next = (p + 1..self.messages.len()).find(|&i| self.messages[i].role != Role::System);
        if let Some(k) = next.and_then(|q| c.ids.iter().position(|id| *id == self.messages[q].id)) {
            if let Some(end) = self.match_ids(p + 1, &c.ids[k..]) {
                if let Some(end) = self.turn_end_at(end) {
                    return Some((p..end, Found::SummaryMessage));
                }
            }
        }
        let end = self.turn_end_at(p + 1)?;
        Some((p..end, Found::SummaryMessage))
    }

    /// Where `ids` end when they are the non-system messages from `from` on, in order.
    fn match_ids(&self, from: usize, ids: &[String]) -> Option<usize> {
        let mut q = from;
        let mut matched = 0;
        while matched < ids.len() && q < self.messages.len() {
            let m = &self.messages[q];
            if m.role != Role::System {
                if m.id != ids[matched] {
                    return None;
                }
                matched += 1;
            }
            q += 1;
        }
        (matched == ids.len()).then_some(q)
    }

    /// Re-applies the stored collapses, adopts summary messages without a record, and lays out
    /// the units.
    fn plan(&mut self) {
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, m) in self.messages.iter().enumerate() {
            index.entry(m.id.as_str()).or_insert(i);
        }
        let mut located: BTreeMap<usize, (Range<usize>, Collapse, Found)> = BTreeMap::new();
        let mut dropped = Vec::new();
        for c in std::mem::take(&mut self.stored.collapses) {
            match self.locate(&c, &index) {
                Some((range, found))
                    if !located
                        .values()
                        .any(|(r, _, _)| r.start < range.end && range.start < r.end) =>
                {
                    located.insert(range.start, (range, c, found));
                }
                _ => dropped.push(c.first.clone()),
            }
        }
        if !dropped.is_empty() {
            self.report.note(format!(
                "dropped {} collapse{} whose messages are no longer in the conversation (first ids: {})",
                dropped.len(),
                plural(dropped.len()),
                dropped.join(", ")
            ));
        }

        let mut t = 0;
        while t < self.turns.turns.len() {
            let turn = self.turns.turns[t];
            if let Some((range, collapse, found)) = located.remove(&turn.start) {
                while t < self.turns.turns.len() && self.turns.turns[t].start < range.end {
                    t += 1;
                }
                self.push_collapsed(collapse, range, found);
                continue;
            }
            let members: Vec<usize> = turn.members(self.messages).collect();
            if let [only] = members.as_slice() {
                let m = &self.messages[*only];
                if is_summary_message(m) {
                    let collapse = adopt(m, self.host.now_ms());
                    self.push_collapsed(collapse, turn.range(), Found::Adopted);
                    t += 1;
                    continue;
                }
            }
            self.units.push(Unit::Turn(t));
            t += 1;
        }
        for c in &self.collapses {
            self.projected = self.projected.saturating_sub(
                c.input_tokens
                    .saturating_sub(self.summary_tokens(&c.collapse)),
            );
        }
    }

    fn push_collapsed(&mut self, collapse: Collapse, range: Range<usize>, found: Found) {
        let input_tokens = self.tokens_of_range(range.clone());
        self.units.push(Unit::Collapsed(self.collapses.len()));
        self.collapses.push(Applied {
            prior: Some((collapse.clone(), input_tokens)),
            collapse,
            range,
            input_tokens,
            found,
            fresh: false,
        });
    }

    fn summary_tokens(&self, c: &Collapse) -> usize {
        message_tokens(self.host, &summary_message(c, None, ""))
    }

    /// How many unit positions hold turns left as they are.
    fn open_turns(&self) -> Vec<usize> {
        self.units
            .iter()
            .enumerate()
            .filter(|(_, u)| matches!(u, Unit::Turn(_)))
            .map(|(i, _)| i)
            .collect()
    }

    /// Commits new spans while over `commit_at` (or forced) and turns may still be collapsed.
    fn commit(&mut self) {
        let keep = self.config.keep_recent_turns;
        loop {
            let over = self.projected >= self.commit_threshold;
            if !(over || self.forced) {
                break;
            }
            let open = self.open_turns();
            if open.len() <= keep {
                if over {
                    self.stopped = Some(format!(
                        "the {keep} most recent turn{} are kept",
                        plural(keep)
                    ));
                    self.report.note(format!(
                        "nothing more to collapse: {} uncollapsed turn{} left, keep_recent_turns = {keep}",
                        open.len(),
                        plural(open.len())
                    ));
                }
                break;
            }
            let eligible = &open[..open.len() - keep];
            // The span: consecutive open turns from the oldest eligible one.
            let u0 = eligible[0];
            let mut u1 = u0;
            while u1 < self.units.len()
                && eligible.contains(&u1)
                && u1 - u0 < self.config.turns_per_span
            {
                u1 += 1;
            }
            let merge_into = match u0.checked_sub(1).map(|u| &self.units[u]) {
                Some(Unit::Collapsed(c)) => Some(*c),
                _ => None,
            };
            if let Err((why, short)) = self.commit_span(u0..u1, merge_into) {
                self.report.note(why);
                self.stopped = Some(short.to_string());
                break;
            }
        }
    }

    /// Summarizes the turns of units `span` (merged into collapse `merge_into` when given) and
    /// replaces them by the collapse.
    fn commit_span(
        &mut self,
        span: Range<usize>,
        merge_into: Option<usize>,
    ) -> Result<(), (String, &'static str)> {
        let turn_idx: Vec<usize> = self.units[span.clone()]
            .iter()
            .filter_map(|u| match u {
                Unit::Turn(t) => Some(*t),
                Unit::Collapsed(_) => None,
            })
            .collect();
        let first_turn = self.turns.turns[turn_idx[0]];
        let last_turn = self.turns.turns[turn_idx[turn_idx.len() - 1]];
        let range = first_turn.start..last_turn.end;
        let ids: Vec<String> = range
            .clone()
            .filter(|&i| self.messages[i].role != Role::System)
            .map(|i| self.messages[i].id.clone())
            .collect();
        let chat: Vec<Message> = range
            .clone()
            .map(|i| &self.messages[i])
            .filter(|m| m.is_chat() && m.role != Role::System)
            .cloned()
            .collect();
        let span_tokens = self.tokens_of_range(range.clone());
        let first_id = self.messages[range.start].id.clone();
        let last_id = ids.last().cloned().unwrap_or_default();
        let previous = merge_into.map(|c| self.collapses[c].collapse.clone());
        let describe = |what: &str| {
            format!(
                "{what} {} turn{} ({} messages, ids {first_id}…{last_id}, {} tokens)",
                turn_idx.len(),
                plural(turn_idx.len()),
                ids.len(),
                thousands(span_tokens)
            )
        };

        let request = SummaryRequest {
            messages: chat,
            previous_summary: previous.as_ref().map(|p| p.summary.clone()),
            max_tokens: self.config.summary_max_tokens,
            purpose: PURPOSE.to_string(),
        };
        let summary = self.host.summarize(request).map_err(|e| {
            (
                format!(
                    "summarizer failed, {}: {e}; nothing more committed in this run",
                    describe("not collapsing")
                ),
                "the summarizer failed",
            )
        })?;
        if summary.trim().is_empty() {
            return Err((
                format!(
                    "summarizer returned an empty summary, {}; nothing more committed in this run",
                    describe("not collapsing")
                ),
                "the summarizer returned an empty summary",
            ));
        }
        let cut = cut_to_tokens(self.host, summary.trim(), self.config.summary_max_tokens);
        if cut.cut {
            self.report.note(format!(
                "summary of ids {first_id}…{last_id} cut from {} to summary_max_tokens = {}",
                thousands(cut.original_tokens),
                thousands(self.config.summary_max_tokens)
            ));
        }
        let now = self.host.now_ms();
        let collapse = match &previous {
            Some(p) => {
                let mut ids_all = p.ids.clone();
                ids_all.extend(ids.iter().cloned());
                Collapse {
                    first: p.first.clone(),
                    last: last_id.clone(),
                    count: p.count + ids.len(),
                    turns: p.turns + turn_idx.len(),
                    ids: ids_all,
                    summary: cut.text,
                    merges: p.merges + 1,
                    committed_ms: now,
                }
            }
            None => Collapse {
                first: first_id.clone(),
                last: last_id.clone(),
                count: ids.len(),
                turns: turn_idx.len(),
                ids: ids.clone(),
                summary: cut.text,
                merges: 0,
                committed_ms: now,
            },
        };
        let old_summary = previous.as_ref().map_or(0, |p| self.summary_tokens(p));
        let new_summary = self.summary_tokens(&collapse);
        if new_summary >= span_tokens + old_summary {
            return Err((
                format!(
                    "{}: its summary ({} tokens) would not be smaller; nothing more committed in \
                     this run",
                    describe("not collapsing"),
                    thousands(new_summary)
                ),
                "a summary would not have been smaller",
            ));
        }
        let saving = span_tokens + old_summary - new_summary;
        self.projected = self.projected.saturating_sub(saving);
        let detail = match &previous {
            Some(p) => format!(
                "{} into the summary of ids {}…{} ({} → {} tokens; now {} messages)",
                describe("merged"),
                p.first,
                p.last,
                thousands(old_summary),
                thousands(new_summary),
                collapse.count
            ),
            None => format!(
                "{} → summary message of {} tokens",
                describe("collapsed"),
                thousands(new_summary)
            ),
        };
        self.report.events.push(StageEvent {
            kind: "collapsed".into(),
            message_id: collapse.first.clone(),
            detail,
            tokens: saving,
        });
        match merge_into {
            Some(c) => {
                let applied = &mut self.collapses[c];
                applied.range.end = range.end;
                applied.input_tokens += span_tokens;
                applied.collapse = collapse;
                applied.fresh = true;
                self.units.drain(span);
            }
            None => {
                let c = self.collapses.len();
                self.collapses.push(Applied {
                    collapse,
                    range,
                    input_tokens: span_tokens,
                    found: Found::Span,
                    fresh: true,
                    prior: None,
                });
                self.units.splice(span, [Unit::Collapsed(c)]);
            }
        }
        Ok(())
    }

    fn finish(mut self, loaded: Option<&str>) -> Result<(Vec<Message>, StageReport), String> {
        let messages = self.messages;
        let mut out: Vec<Message> = messages[..self.turns.leading_end].to_vec();
        let mut freed = 0usize;
        let mut blocks_changed = 0usize;
        let mut reapplied = 0usize;
        for unit in &self.units {
            match unit {
                Unit::Turn(t) => out.extend_from_slice(&messages[self.turns.turns[*t].range()]),
                Unit::Collapsed(c) => {
                    let applied = &self.collapses[*c];
                    let first = &messages[applied.range.start];
                    let summary_msg =
                        summary_message(&applied.collapse, Some(first), &self.host.source_format());
                    out.push(summary_msg.clone());
                    out.extend(
                        messages[applied.range.clone()]
                            .iter()
                            .filter(|m| m.role == Role::System)
                            .cloned(),
                    );
                    let summary = self.summary_tokens(&applied.collapse);
                    freed += applied.input_tokens.saturating_sub(summary);
                    let replaced: Vec<&Message> = messages[applied.range.clone()]
                        .iter()
                        .filter(|m| m.role != Role::System)
                        .collect();
                    let unchanged = applied.found != Found::Span
                        && replaced.len() == 1
                        && *replaced[0] == summary_msg;
                    if !unchanged {
                        blocks_changed += replaced
                            .iter()
                            .map(|m| m.content.blocks.len())
                            .sum::<usize>();
                    }
                    if let Some((prior, prior_tokens)) = &applied.prior {
                        reapplied += 1;
                        let prior_summary = self.summary_tokens(prior);
                        let how = match applied.found {
                            Found::Span => "",
                            Found::SummaryMessage => {
                                " (its summary message was already in the input)"
                            }
                            Found::Adopted => {
                                " (a summary message found without a record, adopted)"
                            }
                        };
                        self.report.events.push(StageEvent {
                            kind: "reapplied".into(),
                            message_id: prior.first.clone(),
                            detail: format!(
                                "{} messages (ids {}…{}, {} turns, {} tokens) → summary message of {} tokens{how}",
                                prior.count,
                                prior.first,
                                prior.last,
                                prior.turns,
                                thousands(*prior_tokens),
                                thousands(prior_summary)
                            ),
                            tokens: prior_tokens.saturating_sub(prior_summary),
                        });
                    }
                }
            }
        }
        // Events in conversation order: re-applied first within a span, then the commits.
        self.report.events.sort_by_key(|e| {
            let pos = self
                .collapses
                .iter()
                .position(|c| c.collapse.first == e.message_id)
                .unwrap_or(usize::MAX);
            (pos, e.kind != "reapplied")
        });

        let input_orphans: HashSet<(String, String)> =
            condense_turns::orphaned_tool_results(messages)
                .into_iter()
                .collect();
        let introduced: Vec<String> = condense_turns::orphaned_tool_results(&out)
            .into_iter()
            .filter(|o| !input_orphans.contains(o))
            .map(|(m, t)| format!("{t} in {m}"))
            .collect();
        if !introduced.is_empty() {
            return Err(format!(
                "context-collapse: internal error, the projection would orphan tool results ({}); input left unchanged",
                introduced.join(", ")
            ));
        }

        let committed = self.collapses.iter().filter(|c| c.fresh).count();
        debug_assert_eq!(
            self.report.events.iter().map(|e| e.tokens).sum::<usize>(),
            freed,
            "events add up to tokens_freed"
        );
        self.summary_notes(reapplied, committed);
        let state = State {
            collapses: self.collapses.iter().map(|c| c.collapse.clone()).collect(),
            ..State::default()
        };
        state.save(self.host, loaded)?;
        if !self.collapses.is_empty() {
            self.report.flags.push(ACTIVE_FLAG.to_string());
        }
        self.report.blocks_changed = blocks_changed;
        self.report.tokens_freed = (freed > 0).then_some(freed);
        Ok((out, self.report))
    }

    /// The arithmetic and the outcome, in front of the other notes.
    fn summary_notes(&mut self, reapplied: usize, committed: usize) {
        let reserved = self.host.context_window() - self.effective;
        let mut notes = vec![format!(
            "{} tokens, {} projected with the collapses; commit at {} = {} of {} effective \
             ({} window - {} reserved for output), block at {} = {}",
            thousands(self.conversation_tokens),
            thousands(self.projected),
            thousands(self.commit_threshold),
            percent(self.config.commit_at),
            thousands(self.effective),
            thousands(self.host.context_window()),
            thousands(reserved),
            thousands(self.block_threshold),
            percent(self.config.block_at),
        )];
        if self.forced {
            notes.push(format!(
                "{FORCE_FLAG}: committing as if above commit_at until only keep_recent_turns = {} turns remain",
                self.config.keep_recent_turns
            ));
        }
        if reapplied > 0 {
            notes.push(format!(
                "re-applied {reapplied} committed collapse{}",
                plural(reapplied)
            ));
        }
        let spans = self
            .report
            .events
            .iter()
            .filter(|e| e.kind == "collapsed")
            .count();
        if committed > 0 {
            notes.push(format!(
                "committed {spans} span{} in this run",
                plural(spans)
            ));
        } else if !self.forced && self.projected < self.commit_threshold {
            notes.push("below commit_at: no new collapse".to_string());
        }
        notes.append(&mut self.report.notes);
        if self.projected >= self.block_threshold {
            notes.push(format!(
                "BLOCKING: still {} tokens, at or above block_at ({} = {} of the effective \
                 window), and nothing more could be collapsed ({}); the request may not fit",
                thousands(self.projected),
                thousands(self.block_threshold),
                percent(self.config.block_at),
                self.stopped
                    .as_deref()
                    .unwrap_or("no turn may be collapsed")
            ));
        }
        self.report.notes = notes;
    }
}

/// A collapse record for a summary message found in the input without one.
fn adopt(message: &Message, now_ms: i64) -> Collapse {
    let text = message.content.text();
    let (header, body) = text.split_once('\n').unwrap_or((text.as_str(), ""));
    let fallback = message.id.trim_start_matches(ID_PREFIX).to_string();
    let (count, first, last) = parse_header(header)
        .map(|(n, a, b)| (n, a.to_string(), b.to_string()))
        .unwrap_or((1, fallback.clone(), fallback));
    Collapse {
        first,
        last,
        count,
        turns: 1,
        ids: vec![message.id.clone()],
        summary: body.to_string(),
        merges: 0,
        committed_ms: now_ms,
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

condense_abi::export_stage!(ContextCollapse);
