//! `condense stats`: where the tokens of a conversation go.
//!
//! Only the context counts: what the model would be sent. A Claude Code session also carries
//! lines that are not context (a sub-agent's `isSidechain` lines, a branch abandoned by a
//! rewind, what a compaction replaced); they are shown apart with the tokens their content
//! would be. When the session recorded the usage of its last model call, the prompt it reported
//! (input + cache reads + cache writes) is set against condense's count of that same prompt,
//! and the gap is named: mostly the system prompt and tool definitions the file does not hold,
//! which `--fixed-tokens` (or `[model] fixed_tokens`) adds to the budget. What the reader did
//! not understand (a partial last line, unknown roles) is listed as warnings.
//!
//! ```text
//! Not context (in the file, 0 tokens)        messages   tokens
//!   sub-agent lines (isSidechain)                 405   73,624
//!
//! Reported usage (line 438: the last main-thread assistant message's usage):
//!   prompt (input + cache reads + writes)       21,552  6 + 20,542 + 1,004; output 10
//!   condense's count of that prompt              5,013  the conversation before its last response
//!   gap                                         16,539  the system prompt and tool definitions ...
//! ```

use condense_budget::{Budget, BudgetConfig, MESSAGE_OVERHEAD_TOKENS};
use condense_formats::claude_code::is_sidechain_work;
use condense_formats::{Document, ReportedUsage};
use condense_model::{Block, ImageSource, Message, Role};
use condense_tokens::{ConversationCount, TokenCounter};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

mod seen;
use seen::Seen;

/// Tool results shorter than this are not counted as duplicates (a repeated "ok" is not a
/// wasted file read). Matches snip's `min_duplicate_chars` default.
pub const MIN_DUPLICATE_CHARS: usize = 200;

#[derive(Debug, Serialize)]
pub struct Stats {
    pub source: String,
    pub format: String,
    pub tokenizer: String,
    pub conversations: usize,
    /// Messages of the context (event lines are not counted).
    pub messages: usize,
    pub total_tokens: usize,
    pub by_role: BTreeMap<String, usize>,
    pub by_block_type: BTreeMap<String, usize>,
    /// Tools by tokens in their results, largest first.
    pub top_tools: Vec<ToolStat>,
    pub tool_calls: usize,
    pub duplicate_tool_results: usize,
    pub base64_images: usize,
    /// Chat lines the file carries that are not context: 0 tokens, shown apart.
    pub not_context: NotContext,
    /// The system prompt and tool definitions of the budget's conversation.
    pub fixed: Fixed,
    /// The usage the session reported for its last model call, against condense's count.
    pub reported_usage: Option<UsageCheck>,
    /// What the reader read but did not understand, or carried through untouched.
    pub warnings: Vec<String>,
    /// The budget of the largest conversation.
    pub budget: Budget,
    /// How the budget's reserve and buffer were set: the settings, and what a small window
    /// scaled ("window 32,000: output reserve scaled to 8,000 ...").
    pub budget_model: BudgetModel,
    /// Which conversation the budget is for (absent for a single one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_for: Option<String>,
}

/// The settings the budget's numbers come from (one output reserve, explained once).
#[derive(Debug, Serialize)]
pub struct BudgetModel {
    pub max_output_tokens: usize,
    /// `[model] output_reserve`: the most the reserve may be.
    pub output_reserve_cap: usize,
    pub summary_output_cap: usize,
    /// `[model] autocompact_buffer`, before any scaling.
    pub autocompact_buffer: usize,
    /// The buffer in use.
    pub buffer: usize,
    pub notes: Vec<String>,
}

impl BudgetModel {
    fn of(config: &BudgetConfig) -> BudgetModel {
        BudgetModel {
            max_output_tokens: config.max_output_tokens,
            output_reserve_cap: config.output_reserve,
            summary_output_cap: config.summary_output_cap,
            autocompact_buffer: config.autocompact_buffer,
            buffer: config.buffer(),
            notes: config.scaling_notes(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ToolStat {
    pub tool: String,
    pub calls: usize,
    pub result_tokens: usize,
}

/// Lines with content that the model is not sent (event lines that kept their content).
#[derive(Debug, Default, Serialize)]
pub struct NotContext {
    /// A sub-agent's own conversation (`isSidechain: true`).
    pub sidechain: Carried,
    /// Main-thread lines off the context: a branch abandoned by a rewind, what a compaction
    /// replaced.
    pub off_thread: Carried,
}

#[derive(Debug, Default, Serialize)]
pub struct Carried {
    pub messages: usize,
    /// What their content would count as messages.
    pub tokens: usize,
}

/// The fixed part of the budget: what the file holds, and what was configured for what it
/// does not.
#[derive(Debug, Serialize)]
pub struct Fixed {
    /// Counted in the file: system prompt, tool definitions, system messages.
    pub in_file: usize,
    /// `--fixed-tokens` / `[model] fixed_tokens`.
    pub configured: usize,
    /// The file holds none of it, so nothing was measured (a Claude Code session never records
    /// its system prompt and tools).
    pub missing_from_file: bool,
    /// The model called tools but the file holds no tool definitions: the request had some
    /// (a Codex rollout records its instructions, not its tools; a trajectory its messages).
    pub tools_missing: bool,
}

/// The session's own figure for its last model call, and condense's count of the same prompt.
#[derive(Debug, Serialize)]
pub struct UsageCheck {
    #[serde(flatten)]
    pub reported: ReportedUsage,
    /// Input + cache reads + cache writes.
    pub prompt_tokens: u64,
    /// condense's count of that prompt: the fixed part and the messages before the last
    /// assistant response (the call's own output is not its input).
    pub counted: usize,
    /// `prompt_tokens - counted`; negative when condense counts more.
    pub gap: i64,
    /// What the gap is.
    pub gap_is: String,
}

/// Computes the statistics of a document's conversations.
pub fn compute(
    source: &str,
    doc: &Document,
    counter: &TokenCounter,
    budget: &BudgetConfig,
    top: usize,
) -> Stats {
    let convs = doc.conversations();
    let mut by_role: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_block: BTreeMap<String, usize> = BTreeMap::new();
    let mut tools: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut not_context = NotContext::default();
    let (mut messages, mut total, mut tool_calls, mut dups, mut images) = (0, 0, 0, 0, 0);
    let mut largest: Option<(usize, ConversationCount)> = None;

    // Counted together first: many small conversations then share the cores.
    let counts = counter.count_conversations(convs);
    for (ci, (conv, count)) in convs.iter().zip(counts).enumerate() {
        total += count.total;
        if count.fixed() > 0 {
            *by_role.entry("system prompt + tools".into()).or_default() +=
                count.system + count.tools;
        }
        let names = conv.tool_names_by_id();
        let mut seen = Seen::default();
        // One count per chat block, in the order walked below.
        let mut block_tokens = count.blocks.iter().copied();
        for (msg, tokens) in conv.messages.iter().zip(&count.messages) {
            if !msg.is_chat() {
                if let Some(carried) = not_context.of(msg) {
                    carried.messages += 1;
                    carried.tokens += MESSAGE_OVERHEAD_TOKENS + counter.count_content(&msg.content);
                }
                continue;
            }
            messages += 1;
            *by_role.entry(msg.role.as_str().into()).or_default() += tokens;
            for block in &msg.content.blocks {
                let t = block_tokens.next().unwrap_or(0);
                *by_block.entry(block.kind().into()).or_default() += t;
                match block {
                    Block::ToolUse(tu) => {
                        tool_calls += 1;
                        tools.entry(tu.name.clone()).or_default().0 += 1;
                    }
                    Block::ToolResult(tr) => {
                        let name = names
                            .get(tr.tool_use_id.as_str())
                            .copied()
                            .unwrap_or("(unknown)");
                        tools.entry(name.to_string()).or_default().1 += t;
                        if seen.repeated(&tr.content) {
                            dups += 1;
                        }
                        images += tr
                            .content
                            .blocks
                            .iter()
                            .filter(|b| is_base64_image(b))
                            .count();
                    }
                    other if is_base64_image(other) => images += 1,
                    _ => {}
                }
            }
        }
        if largest.as_ref().is_none_or(|(_, c)| count.total > c.total) {
            largest = Some((ci, count));
        }
    }
    let mut top_tools: Vec<ToolStat> = tools
        .into_iter()
        .map(|(tool, (calls, result_tokens))| ToolStat {
            tool,
            calls,
            result_tokens,
        })
        .collect();
    top_tools.sort_by(|a, b| {
        b.result_tokens
            .cmp(&a.result_tokens)
            .then(a.tool.cmp(&b.tool))
    });
    top_tools.truncate(top);

    let (budget_of, fixed, reported_usage, budget_for) = match largest {
        Some((i, count)) => {
            let fixed = Fixed {
                in_file: count.fixed(),
                configured: budget.fixed_tokens,
                missing_from_file: count.fixed() == 0,
                tools_missing: convs[i].tools.is_empty()
                    && convs[i]
                        .chat_messages()
                        .any(|m| m.tool_uses().next().is_some()),
            };
            let usage = doc.reported_usage(i).map(|reported| {
                // System messages are among the messages: the fixed part here is only what
                // stands outside them.
                let before = last_response_start(&convs[i].messages);
                let messages: usize = count.messages[..before].iter().sum();
                let outside = count.system + count.tools + budget.fixed_tokens;
                usage_check(reported, outside + messages, &fixed)
            });
            let label = if convs.len() > 1 {
                doc.labels().get(i).cloned().filter(|l| !l.is_empty())
            } else {
                None
            };
            (count.budget(budget), fixed, usage, label)
        }
        None => (
            Budget::compute(budget, 0, 0),
            Fixed {
                in_file: 0,
                configured: budget.fixed_tokens,
                missing_from_file: true,
                tools_missing: true,
            },
            None,
            None,
        ),
    };
    Stats {
        source: source.to_string(),
        format: doc.format().as_str().to_string(),
        tokenizer: counter.kind().to_string(),
        conversations: convs.len(),
        messages,
        total_tokens: total,
        by_role,
        by_block_type: by_block,
        top_tools,
        tool_calls,
        duplicate_tool_results: dups,
        base64_images: images,
        not_context,
        fixed,
        reported_usage,
        warnings: doc.warnings().to_vec(),
        budget: budget_of,
        budget_model: BudgetModel::of(budget),
        budget_for,
    }
}

impl NotContext {
    /// Where an event line that kept its content is counted (`None`: an event without content,
    /// which never was a message).
    fn of(&mut self, msg: &Message) -> Option<&mut Carried> {
        if msg.content.blocks.is_empty() {
            None
        } else if is_sidechain_work(msg) {
            Some(&mut self.sidechain)
        } else {
            Some(&mut self.off_thread)
        }
    }
}

/// The index of the first message of the last assistant response (consecutive assistant
/// messages, events between them aside): the messages before it were that call's input. The
/// whole list when there is no assistant message.
fn last_response_start(messages: &[Message]) -> usize {
    let Some(last) = messages.iter().rposition(|m| m.role == Role::Assistant) else {
        return messages.len();
    };
    let mut start = last;
    for (i, m) in messages[..last].iter().enumerate().rev() {
        match m.role {
            Role::Assistant => start = i,
            Role::Event => {}
            _ => break,
        }
    }
    start
}

fn usage_check(reported: &ReportedUsage, counted: usize, fixed: &Fixed) -> UsageCheck {
    let prompt = reported.prompt_tokens();
    let gap = i64::try_from(prompt).unwrap_or(i64::MAX) - i64::try_from(counted).unwrap_or(0);
    let gap_is = if gap < 0 {
        "condense counts more than the model was sent (its tokenizer is not the model's)".into()
    } else if fixed.missing_from_file && fixed.configured == 0 {
        "the system prompt and tool definitions the file does not hold, and tokenizer differences"
            .into()
    } else if fixed.configured > 0 {
        "what the configured fixed tokens leave out of the system prompt and tool definitions, \
         and tokenizer differences"
            .into()
    } else if fixed.tools_missing {
        "the tool definitions the file does not hold, and tokenizer differences".into()
    } else {
        "tokenizer differences, and what the request held beyond the file".into()
    };
    UsageCheck {
        reported: reported.clone(),
        prompt_tokens: prompt,
        counted,
        gap,
        gap_is,
    }
}

fn is_base64_image(block: &Block) -> bool {
    matches!(block, Block::Image(i) if matches!(i.source, ImageSource::Base64 { .. }))
}

fn pct(part: usize, whole: usize) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// Thousands separators: 1234567 -> "1,234,567".
use condense_text::thousands;

/// The human-readable table.
pub fn render(s: &Stats) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}  ({}, {} tokenizer)", s.source, s.format, s.tokenizer);
    let _ = writeln!(
        o,
        "{} conversation{}, {} messages, {} tool calls, {} tokens",
        s.conversations,
        if s.conversations == 1 { "" } else { "s" },
        thousands(s.messages),
        thousands(s.tool_calls),
        thousands(s.total_tokens)
    );
    render_not_context(&mut o, &s.not_context);
    let section = |o: &mut String, title: &str, rows: &mut dyn Iterator<Item = (String, usize)>| {
        let _ = writeln!(o, "\n{title:<28} {:>12} {:>7}", "tokens", "share");
        for (k, v) in rows {
            let _ = writeln!(
                o,
                "  {k:<26} {:>12} {:>7}",
                thousands(v),
                pct(v, s.total_tokens)
            );
        }
    };
    section(
        &mut o,
        "By role",
        &mut s.by_role.iter().map(|(k, v)| (k.clone(), *v)),
    );
    section(
        &mut o,
        "By block type",
        &mut s.by_block_type.iter().map(|(k, v)| (k.clone(), *v)),
    );
    if !s.top_tools.is_empty() {
        let _ = writeln!(
            o,
            "\n{:<28} {:>12} {:>7} {:>7}",
            "Top tools by result tokens", "tokens", "share", "calls"
        );
    }
    for t in &s.top_tools {
        let _ = writeln!(
            o,
            "  {:<26} {:>12} {:>7} {:>7}",
            t.tool,
            thousands(t.result_tokens),
            pct(t.result_tokens, s.total_tokens),
            t.calls
        );
    }
    let _ = writeln!(
        o,
        "\nDuplicate tool results: {} (>= {} chars)   Base64 images: {}",
        s.duplicate_tool_results, MIN_DUPLICATE_CHARS, s.base64_images
    );
    if let Some(u) = &s.reported_usage {
        render_usage(&mut o, u, &s.fixed);
    }
    render_budget(&mut o, s);
    if !s.warnings.is_empty() {
        let _ = writeln!(o, "\nWarnings:");
        for w in &s.warnings {
            let _ = writeln!(o, "  {w}");
        }
    }
    o
}

/// The lines with content that are not context, when there are any.
fn render_not_context(o: &mut String, n: &NotContext) {
    let rows = [
        ("sub-agent lines (isSidechain)", &n.sidechain),
        ("off the main thread", &n.off_thread),
    ];
    if rows.iter().all(|(_, c)| c.messages == 0) {
        return;
    }
    let _ = writeln!(
        o,
        "\n{:<36} {:>8} {:>8}",
        "Not context (in the file, 0 tokens)", "messages", "tokens"
    );
    for (what, c) in rows.iter().filter(|(_, c)| c.messages > 0) {
        let _ = writeln!(
            o,
            "  {what:<34} {:>8} {:>8}",
            thousands(c.messages),
            thousands(c.tokens)
        );
    }
}

fn render_usage(o: &mut String, u: &UsageCheck, fixed: &Fixed) {
    let r = &u.reported;
    let _ = writeln!(o, "\nReported usage ({}):", r.source);
    let _ = writeln!(
        o,
        "  {:<40} {:>9}  {} + {} + {}; output {}",
        "prompt (input + cache reads + writes)",
        thousands(u.prompt_tokens as usize),
        thousands(r.input_tokens as usize),
        thousands(r.cache_read_tokens as usize),
        thousands(r.cache_write_tokens as usize),
        thousands(r.output_tokens as usize)
    );
    let _ = writeln!(
        o,
        "  {:<40} {:>9}  the conversation before its last response",
        "condense's count of that prompt",
        thousands(u.counted)
    );
    let gap = if u.gap < 0 {
        format!("-{}", thousands(u.gap.unsigned_abs() as usize))
    } else {
        thousands(u.gap as usize)
    };
    let _ = writeln!(o, "  {:<40} {gap:>9}  {}", "gap", u.gap_is);
    if u.gap > 0 && fixed.configured == 0 && (fixed.missing_from_file || fixed.tools_missing) {
        let _ = writeln!(
            o,
            "  {:<40} {:>9}  --fixed-tokens {} (or [model] fixed_tokens) counts them",
            "", "", u.gap
        );
    }
}

fn render_budget(o: &mut String, s: &Stats) {
    let b = &s.budget;
    let _ = writeln!(
        o,
        "\nBudget{} (window {}):",
        match &s.budget_for {
            None => String::new(),
            Some(label) => format!(" of the largest conversation, {label}"),
        },
        thousands(b.context_window)
    );
    let f = &s.fixed;
    let fixed = match (f.missing_from_file, f.configured) {
        (true, 0) => format!(
            "{:>12}  not in the file: --fixed-tokens N counts them",
            "unknown"
        ),
        (true, n) => format!(
            "{:>12}  set with fixed tokens (not in the file)",
            thousands(n)
        ),
        (false, 0) if f.tools_missing => format!(
            "{:>12}  tools called, none defined in the file: --fixed-tokens N counts them",
            thousands(b.fixed)
        ),
        (false, 0) => format!("{:>12}", thousands(b.fixed)),
        (false, n) => format!(
            "{:>12}  {} in the file + {} fixed tokens",
            thousands(b.fixed),
            thousands(f.in_file),
            thousands(n)
        ),
    };
    let _ = writeln!(o, "  fixed (system + tools)   {fixed}");
    let _ = writeln!(
        o,
        "  messages                 {:>12}",
        thousands(b.messages)
    );
    let m = &s.budget_model;
    let _ = writeln!(
        o,
        "  output reserve           {:>12}  for the response and a summary: min(max output {}, \
         {}, window / 4)",
        thousands(b.output_reserve),
        thousands(m.max_output_tokens),
        thousands(m.output_reserve_cap.min(m.summary_output_cap))
    );
    let available = if b.available < 0 {
        format!("-{}", thousands(b.available.unsigned_abs() as usize))
    } else {
        thousands(b.available as usize)
    };
    let _ = writeln!(o, "  available                {available:>12}");
    let _ = writeln!(
        o,
        "  utilization              {:>11.1}%  ({})",
        b.utilization * 100.0,
        b.level.as_str()
    );
    let _ = writeln!(
        o,
        "  effective window         {:>12}  the window less the output reserve",
        thousands(b.effective_window)
    );
    let _ = writeln!(
        o,
        "  autocompact threshold    {:>12}  the effective window less a {} buffer",
        thousands(b.autocompact_threshold),
        thousands(m.buffer)
    );
    for note in &m.notes {
        let _ = writeln!(o, "  {note}");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_last_response_starts_at_its_first_assistant_message() {
        let m = |id: &str, role| Message::new(id, role, vec![Block::text("x")]);
        let messages = [
            m("u1", Role::User),
            m("a1", Role::Assistant),
            m("r1", Role::User),
            m("a2", Role::Assistant),
            m("e", Role::Event),
            m("a3", Role::Assistant),
        ];
        assert_eq!(last_response_start(&messages), 3);
        assert_eq!(last_response_start(&messages[..3]), 1);
        assert_eq!(
            last_response_start(&messages[..1]),
            1,
            "no assistant: all of it"
        );
    }

    #[test]
    fn the_usage_is_set_against_the_prompt_of_the_last_call() {
        let session = br#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"Fix the build"}}
{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"s","message":{"role":"assistant","content":[{"type":"text","text":"Done, the build passes."}],"usage":{"input_tokens":3,"cache_read_input_tokens":900,"cache_creation_input_tokens":100,"output_tokens":7}}}
{"type":"user","uuid":"x1","parentUuid":null,"isSidechain":true,"sessionId":"s","message":{"role":"user","content":"a sub-agent's prompt"}}
"#;
        let doc = condense_formats::read(session, "s.jsonl", &Default::default()).unwrap();
        let counter = TokenCounter::default();
        let count = counter.count_conversation(&doc.conversations()[0]);
        let config = BudgetConfig {
            fixed_tokens: 500,
            ..BudgetConfig::default()
        };
        let s = compute("s.jsonl", &doc, &counter, &config, 10);
        assert_eq!((s.messages, s.total_tokens), (2, count.total));
        assert_eq!(s.not_context.sidechain.messages, 1);
        let u = s.reported_usage.unwrap();
        assert_eq!(u.prompt_tokens, 1_003);
        // The prompt of the call that answered: u1 and the 500 fixed tokens, not a1 itself.
        assert_eq!(u.counted, count.messages[0] + 500);
        assert_eq!(u.gap, 1_003 - u.counted as i64);
        assert_eq!((s.fixed.configured, s.budget.fixed), (500, 500));
        assert!(u
            .gap_is
            .starts_with("what the configured fixed tokens leave out"));
    }
}
