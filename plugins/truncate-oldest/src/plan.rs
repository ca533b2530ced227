//! Token estimates and the choice of the cut.
//!
//! The kept conversation is: the top-level system prompt and tool definitions, the pinned
//! messages (every [`Role::System`] message and, with `keep_first_user`, the first
//! [`Role::User`] one) and every other message from the **cut** on. A cut is the index of a
//! chat message that is not pinned; the non-pinned chat messages before it are dropped.
//!
//! A cut is *valid* when no kept message holds a tool_result whose tool_use would be dropped:
//! the kept tail never starts on an orphaned result (an OpenAI `tool` message after its
//! assistant call was dropped, say), and a call is never separated from its results. The plan
//! takes the first valid cut whose kept total fits the budget; when none fits, the last valid
//! cut (the most that can be dropped: the last turn always stays).

use condense_budget::MESSAGE_OVERHEAD_TOKENS;
use condense_model::{Conversation, CountTokens, Message, Role};
use condense_turns::measure::content_tokens;
use std::collections::HashMap;

/// Tokens of what is always kept outside the messages: system prompt (counted as a message)
/// and tool definitions.
pub fn fixed_tokens<C: CountTokens + ?Sized>(counter: &C, conv: &Conversation) -> usize {
    let system = match &conv.system {
        Some(c) if !c.blocks.is_empty() => MESSAGE_OVERHEAD_TOKENS + content_tokens(counter, c),
        _ => 0,
    };
    system
        + conv
            .tools
            .iter()
            .map(|t| counter.count_tokens(t.raw.as_str()))
            .sum::<usize>()
}

/// What to drop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Per message, whether it is dropped.
    pub dropped: Vec<bool>,
    /// Tokens of the conversation before and after.
    pub total_before: usize,
    pub total_after: usize,
    /// Whether the kept conversation fits the budget.
    pub fits: bool,
    /// Chat messages dropped beyond the first cut that fitted, to keep calls and results
    /// together (0 when that cut was valid, or nothing was dropped).
    pub extra_for_pairs: usize,
}

/// Plans the cut for `conv` with per-message `costs` (see
/// [`message_tokens`](condense_turns::measure::message_tokens)) and `fixed`
/// tokens outside the messages.
pub fn plan(
    conv: &Conversation,
    costs: &[usize],
    fixed: usize,
    budget: usize,
    keep_first_user: bool,
) -> Plan {
    let msgs = &conv.messages;
    let n = msgs.len();
    let total_before = fixed + costs.iter().sum::<usize>();
    let nothing = |fits| Plan {
        dropped: vec![false; n],
        total_before,
        total_after: total_before,
        fits,
        extra_for_pairs: 0,
    };
    if total_before <= budget {
        return nothing(true);
    }
    let first_user = msgs.iter().position(|m| m.role == Role::User);
    let pinned: Vec<bool> = (0..n)
        .map(|i| msgs[i].role == Role::System || (keep_first_user && first_user == Some(i)))
        .collect();
    let candidate = |i: usize| msgs[i].is_chat() && !pinned[i];

    // Cost if cut at c: everything minus the non-pinned chat messages before c.
    let mut dropped_before = vec![0usize; n + 1];
    for i in 0..n {
        dropped_before[i + 1] = dropped_before[i] + if candidate(i) { costs[i] } else { 0 };
    }
    let invalid = invalid_cuts(msgs, &pinned);
    let cuts: Vec<usize> = (0..n).filter(|&i| candidate(i)).collect();
    let fits_at = |c: usize| total_before - dropped_before[c] <= budget;

    let first_fitting = cuts.iter().copied().find(|&c| fits_at(c));
    let chosen = cuts.iter().copied().find(|&c| !invalid[c] && fits_at(c));
    let (cut, fits) = match chosen {
        Some(c) => (c, true),
        None => match cuts.iter().copied().rev().find(|&c| !invalid[c]) {
            Some(c) => (c, false),
            None => return nothing(false),
        },
    };
    let extra_for_pairs = match first_fitting {
        Some(f) if fits && f < cut => (f..cut).filter(|&i| candidate(i)).count(),
        _ => 0,
    };

    let mut dropped: Vec<bool> = (0..n).map(|i| i < cut && candidate(i)).collect();
    // An event line goes when the chat messages on both sides of it (those that exist) go.
    // The nearest chat message after each index, from one backward pass (a search per event
    // line made a session full of event lines quadratic); the one before, walking forward.
    let mut next_chat: Vec<Option<usize>> = vec![None; n + 1];
    for i in (0..n).rev() {
        next_chat[i] = if msgs[i].is_chat() {
            Some(i)
        } else {
            next_chat[i + 1]
        };
    }
    let mut prev_chat: Option<usize> = None;
    for i in 0..n {
        if msgs[i].is_chat() {
            prev_chat = Some(i);
            continue;
        }
        let neighbours = [prev_chat, next_chat[i + 1]];
        let mut known = neighbours.iter().flatten().peekable();
        dropped[i] = known.peek().is_some() && known.all(|&j| dropped[j]);
    }
    Plan {
        dropped,
        total_before,
        total_after: total_before - dropped_before[cut],
        fits,
        extra_for_pairs,
    }
}

/// `invalid[c]`: cutting at `c` would keep a tool_result whose tool_use is dropped.
fn invalid_cuts(msgs: &[Message], pinned: &[bool]) -> Vec<bool> {
    let n = msgs.len();
    let mut use_at: HashMap<&str, usize> = HashMap::new();
    for (i, m) in msgs.iter().enumerate().filter(|(_, m)| m.is_chat()) {
        for tu in m.tool_uses() {
            use_at.entry(tu.id.as_str()).or_insert(i);
        }
    }
    // +1 at the first invalid cut, -1 one past the last (a difference array over 0..=n).
    let mut delta = vec![0i64; n + 2];
    for (r, m) in msgs.iter().enumerate().filter(|(_, m)| m.is_chat()) {
        for result in m.tool_results() {
            let Some(&u) = use_at.get(result.tool_use_id.as_str()) else {
                continue;
            };
            if u >= r || pinned[u] {
                continue;
            }
            // Cuts in (u, r] drop the call and keep the result; a pinned result is kept by
            // every cut, so every cut past the call is invalid.
            let last = if pinned[r] { n } else { r };
            delta[u + 1] += 1;
            delta[last + 1] -= 1;
        }
    }
    let mut invalid = Vec::with_capacity(n + 1);
    let mut running = 0i64;
    for d in delta.iter().take(n + 1) {
        running += d;
        invalid.push(running > 0);
    }
    invalid
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::Block;

    /// The rule for event lines, as stated: an event line goes when every chat message next to
    /// it (the nearest before and after, those that exist) goes.
    fn reference(msgs: &[Message], dropped: &[bool]) -> Vec<bool> {
        (0..msgs.len())
            .map(|i| {
                if msgs[i].is_chat() {
                    return dropped[i];
                }
                let prev = (0..i).rev().find(|&j| msgs[j].is_chat());
                let next = (i + 1..msgs.len()).find(|&j| msgs[j].is_chat());
                let near: Vec<usize> = prev.into_iter().chain(next).collect();
                !near.is_empty() && near.iter().all(|&j| dropped[j])
            })
            .collect()
    }

    #[test]
    fn event_lines_follow_their_neighbours() {
        // Roles by letter: u user, a assistant, e event line.
        for layout in ["eueaeaeuaee", "eeua", "uaeeeuaua", "eee", "uaueauae"] {
            let messages: Vec<Message> = layout
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    let role = match c {
                        'u' => Role::User,
                        'a' => Role::Assistant,
                        _ => Role::Event,
                    };
                    Message::new(format!("m{i}"), role, vec![Block::text("x")])
                })
                .collect();
            let conv = Conversation {
                messages,
                ..Conversation::default()
            };
            let costs = vec![10; layout.len()];
            for budget in [0, 15, 25, 45, 1_000] {
                let plan = plan(&conv, &costs, 0, budget, true);
                assert_eq!(
                    plan.dropped,
                    reference(&conv.messages, &plan.dropped),
                    "{layout} within {budget}"
                );
            }
        }
    }
}
