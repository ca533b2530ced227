//! `condense stats`: where the tokens of a conversation go.

use condense_model::{Block, Conversation, ImageSource};
use condense_tokens::{Budget, BudgetConfig, TokenCounter};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;

/// Tool results shorter than this are not counted as duplicates (a repeated "ok" is not a
/// wasted file read). Matches snip's `min_duplicate_chars` default.
pub const MIN_DUPLICATE_CHARS: usize = 200;

#[derive(Debug, Serialize)]
pub struct Stats {
    pub source: String,
    pub format: String,
    pub tokenizer: String,
    pub conversations: usize,
    pub messages: usize,
    pub total_tokens: usize,
    pub by_role: BTreeMap<String, usize>,
    pub by_block_type: BTreeMap<String, usize>,
    /// Tools by tokens in their results, largest first.
    pub top_tools: Vec<ToolStat>,
    pub tool_calls: usize,
    pub duplicate_tool_results: usize,
    pub base64_images: usize,
    /// The budget of the largest conversation.
    pub budget: Budget,
    /// Which conversation the budget is for (empty for a single one).
    pub budget_for: String,
}

#[derive(Debug, Serialize)]
pub struct ToolStat {
    pub tool: String,
    pub calls: usize,
    pub result_tokens: usize,
}

/// Computes the statistics of `convs` (labelled by `labels`).
pub fn compute(
    source: &str,
    format: &str,
    convs: &[Conversation],
    labels: &[String],
    counter: &TokenCounter,
    budget: &BudgetConfig,
    top: usize,
) -> Stats {
    let mut by_role: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_block: BTreeMap<String, usize> = BTreeMap::new();
    let mut tools: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let (mut messages, mut total, mut tool_calls, mut dups, mut images) = (0, 0, 0, 0, 0);
    let mut largest: Option<(usize, usize)> = None;

    for (ci, conv) in convs.iter().enumerate() {
        let count = counter.count_conversation(conv);
        total += count.total;
        if largest.is_none_or(|(_, t)| count.total > t) {
            largest = Some((ci, count.total));
        }
        if count.fixed() > 0 {
            *by_role.entry("system prompt + tools".into()).or_default() +=
                count.system + count.tools;
        }
        let names = conv.tool_names_by_id();
        let mut seen: HashSet<String> = HashSet::new();
        for (msg, tokens) in conv.messages.iter().zip(&count.messages) {
            if !msg.is_chat() {
                continue;
            }
            messages += 1;
            *by_role.entry(msg.role.as_str().into()).or_default() += tokens;
            for block in &msg.content.blocks {
                let t = counter.count_block(block);
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
                        let text = tr.content.text();
                        if text.chars().count() >= MIN_DUPLICATE_CHARS && !seen.insert(text) {
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

    let (budget, budget_for) = match largest {
        Some((i, _)) => (
            counter.budget(&convs[i], budget),
            if convs.len() > 1 {
                labels.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            },
        ),
        None => (Budget::compute(budget, 0, 0), String::new()),
    };
    Stats {
        source: source.to_string(),
        format: format.to_string(),
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
        budget,
        budget_for,
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
pub use condense_abi::text::thousands as num;

/// The human-readable table.
pub fn render(s: &Stats) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}  ({}, {} tokenizer)", s.source, s.format, s.tokenizer);
    let _ = writeln!(
        o,
        "{} conversation{}, {} messages, {} tool calls, {} tokens",
        s.conversations,
        if s.conversations == 1 { "" } else { "s" },
        num(s.messages),
        num(s.tool_calls),
        num(s.total_tokens)
    );
    let section = |o: &mut String, title: &str, rows: &mut dyn Iterator<Item = (String, usize)>| {
        let _ = writeln!(o, "\n{title:<28} {:>12} {:>7}", "tokens", "share");
        for (k, v) in rows {
            let _ = writeln!(o, "  {k:<26} {:>12} {:>7}", num(v), pct(v, s.total_tokens));
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
    let _ = writeln!(
        o,
        "\n{:<28} {:>12} {:>7} {:>7}",
        "Top tools by result tokens", "tokens", "share", "calls"
    );
    for t in &s.top_tools {
        let _ = writeln!(
            o,
            "  {:<26} {:>12} {:>7} {:>7}",
            t.tool,
            num(t.result_tokens),
            pct(t.result_tokens, s.total_tokens),
            t.calls
        );
    }
    let _ = writeln!(
        o,
        "\nDuplicate tool results: {} (>= {} chars)   Base64 images: {}",
        s.duplicate_tool_results, MIN_DUPLICATE_CHARS, s.base64_images
    );
    let b = &s.budget;
    let _ = writeln!(
        o,
        "\nBudget{} (window {}):",
        if s.budget_for.is_empty() {
            String::new()
        } else {
            format!(" of the largest conversation, {}", s.budget_for)
        },
        num(b.context_window)
    );
    let _ = writeln!(o, "  fixed (system + tools)   {:>12}", num(b.fixed));
    let _ = writeln!(o, "  messages                 {:>12}", num(b.messages));
    let _ = writeln!(
        o,
        "  output reserve           {:>12}",
        num(b.output_reserve)
    );
    let available = if b.available < 0 {
        format!("-{}", num(b.available.unsigned_abs() as usize))
    } else {
        num(b.available as usize)
    };
    let _ = writeln!(o, "  available                {available:>12}");
    let _ = writeln!(
        o,
        "  utilization              {:>11.1}%  ({})",
        b.utilization * 100.0,
        serde_json::to_value(b.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    );
    let _ = writeln!(
        o,
        "  effective window         {:>12}",
        num(b.effective_window)
    );
    let _ = writeln!(
        o,
        "  autocompact threshold    {:>12}",
        num(b.autocompact_threshold)
    );
    o
}
