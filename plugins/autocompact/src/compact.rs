//! The compaction itself: the summary, the restored files and pinned items, the kept last user
//! message, and the events and notes that describe them.

use crate::messages::{parse_summary, real_turns};
use crate::restore::{self, FileSeen, PinnedItem};
use crate::state::{LastCompaction, State};
use crate::{
    is_condense_message, is_own_message, Autocompact, Trigger, FILE_MARKER, ID_PREFIX, PIN_MARKER,
    PURPOSE, SUMMARY_MARKER,
};
use condense_abi::{Context, StageEvent, StageReport, SummaryRequest};
use condense_model::{Block, Content, Conversation, Message, RawJson, Role};
use condense_text::{plural, thousands};
use condense_turns::measure::{cut_to_tokens, messages_tokens, Cut};

impl Autocompact {
    /// One compaction attempt, recorded in `state` (success, or a failure counting towards the
    /// circuit breaker) and in the report: the compacted messages, or `None`.
    pub(crate) fn attempt(
        &self,
        conversation: &Conversation,
        state: &mut State,
        cx: &Context<'_>,
        t: &Trigger,
        report: &mut StageReport,
    ) -> Option<Vec<Message>> {
        match self.compact(conversation, state, cx, t, report) {
            Ok(Some((messages, last))) => {
                state.compactions += 1;
                state.consecutive_failures = 0;
                state.last_failure = None;
                state.last = Some(last);
                Some(messages)
            }
            Ok(None) => None,
            Err(failure) => {
                state.consecutive_failures += 1;
                let max = self.config.max_consecutive_failures;
                report.note(format!(
                    "compaction failed, conversation left unchanged: {failure} \
                     ({} of max_consecutive_failures = {max})",
                    plural(
                        state.consecutive_failures,
                        "consecutive failure",
                        "consecutive failures"
                    )
                ));
                if state.consecutive_failures >= max {
                    report.note(
                        "circuit breaker open: no more attempts in this session (a \
                         config change resets it)",
                    );
                }
                state.last_failure = Some(failure);
                None
            }
        }
    }

    /// Builds the compacted conversation: `Ok(None)` when there is nothing to summarize,
    /// `Err(failure)` on a failed attempt.
    pub(crate) fn compact(
        &self,
        conversation: &Conversation,
        state: &State,
        cx: &Context<'_>,
        t: &Trigger,
        report: &mut StageReport,
    ) -> Result<Option<(Vec<Message>, LastCompaction)>, String> {
        let messages = &conversation.messages;
        let system: Vec<Message> = messages
            .iter()
            .filter(|m| m.role == Role::System)
            .cloned()
            .collect();
        // The summary of an earlier compaction, when the conversation starts with one.
        let first_chat = messages
            .iter()
            .position(|m| m.is_chat() && m.role != Role::System);
        let previous = first_chat.and_then(|i| parse_summary(&messages[i]).map(|p| (i, p)));
        // The last user message, when nothing answered it.
        let kept = messages
            .iter()
            .rposition(|m| condense_turns::is_user_prompt(m) && !is_condense_message(m))
            .filter(|&i| !messages[i + 1..].iter().any(|m| m.role == Role::Assistant));
        // Indices of the messages to summarize: what the summary stands for is read from the
        // conversation, so the request can own its copies.
        let picked: Vec<usize> = (0..messages.len())
            .filter(|&i| {
                let m = &messages[i];
                m.is_chat() && m.role != Role::System && Some(i) != kept && !is_own_message(m)
            })
            .collect();
        let Some(&last) = picked.last() else {
            report.note("nothing to summarize: not compacting");
            return Ok(None);
        };
        let timestamp = messages[last].timestamp.clone();
        let count = previous.as_ref().map_or(0, |(_, (_, c, _))| *c) + picked.len();
        // For Claude Code, the session's line fields, from the latest user message summarized.
        let template = picked
            .iter()
            .rev()
            .map(|&i| &messages[i])
            .find(condense_turns::is_user_prompt)
            .unwrap_or(&messages[last]);
        let max_tokens = self.config.summary_max_tokens.min(t.effective / 4).max(1);
        // The event lines go to the summarizer too: it writes no prose from them, but a
        // sub-agent's lines (kept as events with their content) are the session's work, and the
        // retained record lists the files it wrote and the errors it hit.
        let span: Vec<Message> = messages
            .iter()
            .enumerate()
            .filter(|&(i, m)| m.role != Role::System && Some(i) != kept && !is_own_message(m))
            .map(|(_, m)| m.clone())
            .collect();
        let request = SummaryRequest {
            messages: span,
            previous_summary: previous.as_ref().map(|(_, (_, _, body))| body.clone()),
            max_tokens,
            purpose: PURPOSE.to_string(),
        };
        let summary = cx
            .summarize(request)
            .map_err(|e| format!("the summarizer failed: {}", e.message()))?;
        if summary.trim().is_empty() {
            return Err("the summarizer returned an empty summary".into());
        }
        // The host's summaries fit their budget, except that they never drop a written path or
        // the last request: a longer one is kept whole (cutting it would cut exactly those).
        let summary = summary.trim();
        let summary_tokens = cx.count_tokens(summary);
        if summary_tokens > max_tokens {
            report.note(format!(
                "summary of {} tokens is over its budget of {} (min(summary_max_tokens, \
                 effective / 4)): kept whole, every written path and the last request stay",
                thousands(summary_tokens),
                thousands(max_tokens)
            ));
        }
        let n = state
            .compactions
            .max(previous.as_ref().map_or(0, |(_, (n, _, _))| *n))
            + 1;
        let new_message = |id: &str, text: String| {
            let mut m = Message {
                id: id.to_string(),
                role: Role::User,
                timestamp: timestamp.clone(),
                content: Content::string(text),
                extra: Default::default(),
                envelope: Default::default(),
            };
            // A format's own wrapper for the new message (a Claude Code line); none when the
            // format is unknown.
            m.envelope = cx.format.map_or_else(RawJson::default, |format| {
                condense_formats::envelope_template(format, template, &m)
            });
            m
        };
        let summary_id = format!("{ID_PREFIX}{n}");
        let summary_msg = new_message(
            &summary_id,
            format!("{SUMMARY_MARKER}{count} messages]\n{summary}"),
        );

        // Restoration, from everything but the kept message.
        let source = || {
            messages
                .iter()
                .enumerate()
                .filter(move |(i, _)| Some(*i) != kept)
        };
        let mut seen = restore::files_seen(source(), &self.config.read_tools);
        seen.truncate(self.config.restore_files);
        seen.reverse(); // oldest first, the most recent last
        let mut files: Vec<(Message, String)> = seen
            .iter()
            .enumerate()
            .map(|(k, f)| self.file_message(cx, f, n, k + 1, &new_message))
            .collect();
        let mut pins =
            self.pin_messages(cx, restore::pinned(source(), &self.pins), n, &new_message);

        let kept_msg = kept.map(|i| without_tool_results(&messages[i]));
        let tokens_in = messages_tokens(cx, messages);
        let build = |files: &[(Message, String)], pins: &[(Message, String)]| {
            let mut out = system.clone();
            out.push(summary_msg.clone());
            out.extend(files.iter().map(|(m, _)| m.clone()));
            out.extend(pins.iter().map(|(m, _)| m.clone()));
            out.extend(kept_msg.clone());
            out
        };
        let mut out = build(&files, &pins);
        let mut tokens_out = messages_tokens(cx, &out);
        // Land below the threshold, or the next run compacts again: drop restored items.
        let mut dropped = Vec::new();
        while !t.no_room()
            && t.tokens.saturating_sub(tokens_in) + tokens_out >= t.threshold
            && !(files.is_empty() && pins.is_empty())
        {
            let (m, _) = if files.is_empty() {
                pins.remove(0)
            } else {
                files.remove(0)
            };
            dropped.push(m.id);
            out = build(&files, &pins);
            tokens_out = messages_tokens(cx, &out);
        }
        if tokens_out >= tokens_in {
            return Err(format!(
                "the result ({} tokens) would not be smaller than the input ({} tokens)",
                thousands(tokens_out),
                thousands(tokens_in)
            ));
        }
        if !dropped.is_empty() {
            report.note(format!(
                "dropped {} so the result lands below the threshold: {}",
                plural(dropped.len(), "restored item", "restored items"),
                dropped.join(", ")
            ));
        }

        let removed: Vec<&Message> = messages
            .iter()
            .enumerate()
            .filter(|(i, m)| m.role != Role::System && Some(*i) != kept)
            .map(|(_, m)| m)
            .collect();
        report.blocks_changed = removed.iter().map(|m| m.content.blocks.len()).sum();
        let removed_tokens = messages_tokens(cx, removed.iter().copied());
        let summary_tokens = messages_tokens(cx, [&summary_msg]);
        report.events.push(StageEvent {
            kind: "compacted".into(),
            message_id: summary_id.clone(),
            detail: format!(
                "{} messages ({} tokens){} → summary of {} tokens",
                removed.len(),
                thousands(removed_tokens),
                if previous.is_some() {
                    ", merged into the previous summary"
                } else {
                    ""
                },
                thousands(summary_tokens)
            ),
            tokens: removed_tokens.saturating_sub(summary_tokens),
        });
        for (kind, items) in [("restored-file", &files), ("pinned", &pins)] {
            for (m, detail) in items {
                report.events.push(StageEvent {
                    kind: kind.into(),
                    message_id: m.id.clone(),
                    detail: detail.clone(),
                    tokens: 0,
                });
            }
        }
        if let Some(k) = &kept_msg {
            report.events.push(StageEvent {
                kind: "kept".into(),
                message_id: k.id.clone(),
                detail: "the last user message, unanswered: kept with its id".into(),
                tokens: 0,
            });
        }
        report.tokens_freed = Some(tokens_in - tokens_out);
        report.note(format!(
            "compacted {} messages into {summary_id} ({} → {} tokens of messages; {} and {} \
             restored{})",
            removed.len(),
            thousands(tokens_in),
            thousands(tokens_out),
            plural(files.len(), "file", "files"),
            plural(pins.len(), "pinned item", "pinned items"),
            if kept_msg.is_some() {
                ", the unanswered last user message kept"
            } else {
                ""
            }
        ));
        let last = LastCompaction {
            summary_id,
            turns_total: real_turns(messages).len(),
            at_ms: cx.now_ms,
            tokens_before: tokens_in,
            tokens_after: tokens_out,
        };
        Ok(Some((out, last)))
    }

    /// A restored file's message and its event detail.
    fn file_message(
        &self,
        cx: &Context<'_>,
        f: &FileSeen,
        n: usize,
        k: usize,
        new_message: &dyn Fn(&str, String) -> Message,
    ) -> (Message, String) {
        let cut = cut_to_tokens(cx, &f.content, self.config.restore_file_max_tokens);
        let mut provenance = format!("{} in message {}", f.how, f.message_id);
        if let Some(e) = &f.edited_in {
            provenance.push_str(&format!("; edited later in message {e}: may be stale"));
        }
        provenance.push_str(&cut_note(&cut, self.config.restore_file_max_tokens));
        let text = format!("{FILE_MARKER}{}]\n({provenance})\n{}", f.path, cut.text);
        let id = format!("{ID_PREFIX}{n}-file-{k}");
        let detail = format!(
            "{} ({provenance}), {} tokens",
            f.path,
            thousands(cx.count_tokens(&cut.text))
        );
        (new_message(&id, text), detail)
    }

    /// The pinned items' messages within the budgets, oldest first, with their event details.
    fn pin_messages(
        &self,
        cx: &Context<'_>,
        items: Vec<PinnedItem>,
        n: usize,
        new_message: &dyn Fn(&str, String) -> Message,
    ) -> Vec<(Message, String)> {
        let mut left = self.config.pin_budget_tokens;
        let mut out = Vec::new();
        for item in items {
            // Each item cut to pin_max_tokens, then taken whole if it fits what is left of the
            // budget (newest first; an older, smaller item may still fit after a skipped one).
            let cut = cut_to_tokens(cx, &item.content, self.config.pin_max_tokens);
            let used = cx.count_tokens(&cut.text);
            if cut.text.trim().is_empty() || used > left {
                continue;
            }
            left -= used;
            let mut provenance = format!("from message {}", item.message_id);
            provenance.push_str(&cut_note(&cut, self.config.pin_max_tokens));
            let text = format!("{PIN_MARKER}{}]\n({provenance})\n{}", item.key, cut.text);
            let detail = format!("{} ({provenance}), {} tokens", item.key, thousands(used));
            out.push((text, detail));
        }
        out.reverse();
        out.into_iter()
            .enumerate()
            .map(|(k, (text, detail))| {
                (
                    new_message(&format!("{ID_PREFIX}{n}-pin-{}", k + 1), text),
                    detail,
                )
            })
            .collect()
    }
}

/// The message with its tool_result blocks turned into text (their calls are summarized away).
fn without_tool_results(message: &Message) -> Message {
    if message.tool_results().next().is_none() {
        return message.clone();
    }
    let mut m = message.clone();
    m.content.blocks = m
        .content
        .blocks
        .into_iter()
        .map(|b| match b {
            Block::ToolResult(r) => Block::text(format!(
                "[tool result for {}]\n{}",
                r.tool_use_id,
                r.content.text()
            )),
            other => other,
        })
        .collect();
    m
}

/// "; cut to N of M tokens" when `cut` (cut to at most `max` tokens) lost anything, else empty.
fn cut_note(cut: &Cut, max: usize) -> String {
    if cut.cut {
        format!(
            "; cut to {} of {} tokens",
            thousands(max),
            thousands(cut.original_tokens)
        )
    } else {
        String::new()
    }
}
