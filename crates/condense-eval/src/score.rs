//! Scoring a compressed conversation against the probes of its original.
//!
//! The compressed conversation's *text* is everything a model would see: the system prompt,
//! every chat message's text blocks, tool_use names and input JSON text, tool_result texts
//! (nested), in order, joined with `\n` ([`conversation_text`]). A probe is *kept* when that
//! text contains it as an exact substring (the request after `\r\n` → `\n` on both sides).
//!
//! Integrity is four probes: every tool_result answers an earlier tool_use (no orphan the
//! original did not have), tool_use ids are unique, message ids are unique, and the written
//! output reads back to an equal conversation.
//!
//! ```
//! use condense_eval::score::score;
//! use condense_model::{Block, Conversation, Message, RawJson, Role};
//!
//! let write = RawJson::from_string_unchecked(r#"{"file_path":"src/a.rs"}"#.into());
//! let mut original = Conversation::default();
//! original.messages = vec![
//!     Message::new("u", Role::User, vec![Block::text("Add a.rs")]),
//!     Message::new("a", Role::Assistant, vec![Block::tool_use("t", "Write", write)]),
//! ];
//! let mut output = original.clone();
//! output.messages.truncate(1);
//! let s = score(&original, &output, true);
//! assert_eq!((s.artifact.hits, s.artifact.total), (0, 1));
//! assert_eq!(s.lost.artifacts, ["src/a.rs"]);
//! assert_eq!((s.request.hits, s.integrity.hits), (1, 4));
//! ```

use crate::probes::Probes;
use condense_model::{orphaned_tool_results, Block, Conversation};
use serde::Serialize;
use std::collections::HashSet;

/// Probes kept out of probes asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Hits {
    pub hits: usize,
    pub total: usize,
}

impl Hits {
    /// `hits / total`, 1 when there is nothing to keep.
    pub fn ratio(&self) -> f64 {
        if self.total == 0 {
            1.0
        } else {
            self.hits as f64 / self.total as f64
        }
    }

    /// Whether every probe was kept.
    pub fn all(&self) -> bool {
        self.hits == self.total
    }

    fn count(&mut self, kept: bool) {
        self.total += 1;
        self.hits += usize::from(kept);
    }
}

impl std::ops::AddAssign for Hits {
    fn add_assign(&mut self, o: Hits) {
        self.hits += o.hits;
        self.total += o.total;
    }
}

impl std::fmt::Display for Hits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.hits, self.total)
    }
}

/// What was lost: the probes themselves, so users see WHAT, not only how many.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Lost {
    pub artifacts: Vec<String>,
    pub errors: Vec<String>,
    pub request: Option<String>,
    /// The integrity checks that failed, each with what broke.
    pub integrity: Vec<String>,
}

impl Lost {
    pub fn is_empty(&self) -> bool {
        self.artifacts.is_empty()
            && self.errors.is_empty()
            && self.request.is_none()
            && self.integrity.is_empty()
    }
}

/// One output's score.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Score {
    pub artifact: Hits,
    pub errors: Hits,
    /// 0/1 or 1/1 (0/0 when the original has no request).
    pub request: Hits,
    pub integrity: Hits,
    pub lost: Lost,
}

/// Scores `output` against the probes of `original`. `roundtrip_ok`: the written output read
/// back to an equal conversation.
pub fn score(original: &Conversation, output: &Conversation, roundtrip_ok: bool) -> Score {
    let roundtrip = if roundtrip_ok {
        Ok(())
    } else {
        Err("the written output does not read back equal".to_string())
    };
    score_with(
        &Probes::from_original(original),
        original,
        output,
        roundtrip,
    )
}

/// Scores `output` against `probes` (computed once from `original` for several outputs).
/// `roundtrip`: `Err(what differs)` when the written output does not read back equal.
pub fn score_with(
    probes: &Probes,
    original: &Conversation,
    output: &Conversation,
    roundtrip: Result<(), String>,
) -> Score {
    let text = conversation_text(output);
    let mut s = Score::default();
    for path in &probes.artifacts {
        let kept = text.contains(path.as_str());
        s.artifact.count(kept);
        if !kept {
            s.lost.artifacts.push(path.clone());
        }
    }
    for line in &probes.errors {
        let kept = text.contains(line.as_str());
        s.errors.count(kept);
        if !kept {
            s.lost.errors.push(line.clone());
        }
    }
    if let Some(request) = &probes.last_request {
        let kept = crlf_to_lf(&text).contains(&*crlf_to_lf(request));
        s.request.count(kept);
        if !kept {
            s.lost.request = Some(request.clone());
        }
    }
    for check in integrity(original, output, roundtrip) {
        s.integrity.count(check.is_ok());
        if let Err(what) = check {
            s.lost.integrity.push(what);
        }
    }
    s
}

fn crlf_to_lf(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains("\r\n") {
        s.replace("\r\n", "\n").into()
    } else {
        s.into()
    }
}

/// The four integrity checks, each `Ok` or `Err(what broke)`.
pub fn integrity(
    original: &Conversation,
    output: &Conversation,
    roundtrip: Result<(), String>,
) -> [Result<(), String>; 4] {
    let before: HashSet<&str> = orphaned_tool_results(&original.messages)
        .into_iter()
        .map(|(_, id)| id)
        .collect();
    let orphans: Vec<&str> = orphaned_tool_results(&output.messages)
        .into_iter()
        .map(|(_, id)| id)
        .filter(|id| !before.contains(id))
        .collect();
    let paired = match orphans.as_slice() {
        [] => Ok(()),
        ids => Err(format!(
            "tool_result without an earlier tool_use: {}",
            list(ids)
        )),
    };
    let tool_ids = |c: &Conversation| -> Vec<String> {
        c.chat_messages()
            .flat_map(|m| m.tool_uses())
            .map(|t| t.id.clone())
            .collect()
    };
    let message_ids =
        |c: &Conversation| -> Vec<String> { c.messages.iter().map(|m| m.id.clone()).collect() };
    let unique_tools = unique(&tool_ids(original), &tool_ids(output), "tool_use id");
    let unique_messages = unique(&message_ids(original), &message_ids(output), "message id");
    [paired, unique_tools, unique_messages, roundtrip]
}

/// Duplicates in `after` that `before` did not already have.
fn unique(before: &[String], after: &[String], what: &str) -> Result<(), String> {
    let dups = |ids: &[String]| -> Vec<String> {
        let mut seen = HashSet::new();
        let mut d: Vec<String> = Vec::new();
        for id in ids {
            if !seen.insert(id.as_str()) && !d.contains(id) {
                d.push(id.clone());
            }
        }
        d
    };
    let old = dups(before);
    let new: Vec<String> = dups(after)
        .into_iter()
        .filter(|d| !old.contains(d))
        .collect();
    if new.is_empty() {
        Ok(())
    } else {
        let ids: Vec<&str> = new.iter().map(String::as_str).collect();
        Err(format!("duplicate {what}: {}", list(&ids)))
    }
}

/// Up to three items, then a count.
fn list(items: &[&str]) -> String {
    let mut s = items
        .iter()
        .take(3)
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > 3 {
        s.push_str(&format!(" and {} more", items.len() - 3));
    }
    s
}

/// The compressed conversation's text: what the probes are looked for in.
pub fn conversation_text(conv: &Conversation) -> String {
    let mut out = String::new();
    let mut first = true;
    let mut push = |s: &str| {
        if !first {
            out.push('\n');
        }
        first = false;
        out.push_str(s);
    };
    if let Some(system) = &conv.system {
        push(&system.text());
    }
    for m in conv.chat_messages() {
        for b in &m.content.blocks {
            match b {
                Block::Text(t) => push(&t.text),
                Block::ToolUse(tu) => {
                    push(&tu.name);
                    push(tu.input.as_str());
                }
                Block::ToolResult(tr) => push(&tr.content.text()),
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::{Content, Message, RawJson, Role, ToolResult};

    fn original() -> Conversation {
        let input = |s: &str| RawJson::from_string_unchecked(s.into());
        Conversation {
            system: Some(Content::string("You are a coder.")),
            messages: vec![
                Message::new("u1", Role::User, vec![Block::text("Fix\r\nthe build")]),
                Message::new(
                    "a1",
                    Role::Assistant,
                    vec![
                        Block::tool_use("t1", "Write", input(r#"{"file_path":"src/new.rs"}"#)),
                        Block::tool_use("t2", "Bash", input(r#"{"command":"make"}"#)),
                    ],
                ),
                Message::new(
                    "r1",
                    Role::User,
                    vec![
                        Block::tool_result("t1", Content::string("ok")),
                        Block::ToolResult(ToolResult {
                            is_error: Some(true),
                            ..ToolResult::new(
                                "t2",
                                Content::string(format!("error: {}", "x".repeat(300))),
                            )
                        }),
                    ],
                ),
            ],
            ..Conversation::default()
        }
    }

    #[test]
    fn everything_kept_when_nothing_changed() {
        let o = original();
        let s = score(&o, &o, true);
        assert_eq!(
            (s.artifact, s.errors, s.request, s.integrity),
            (
                Hits { hits: 1, total: 1 },
                Hits { hits: 1, total: 1 },
                Hits { hits: 1, total: 1 },
                Hits { hits: 4, total: 4 }
            )
        );
        assert!(s.lost.is_empty());
    }

    #[test]
    fn an_error_line_cut_at_200_chars_is_found_in_a_cut_copy() {
        let o = original();
        let mut out = o.clone();
        // A stage kept the head of the error (250 chars): the 200-char probe is still there.
        let head: String = format!("error: {}", "x".repeat(300))
            .chars()
            .take(250)
            .collect();
        out.messages[2].content.blocks[1] = Block::ToolResult(ToolResult {
            is_error: Some(true),
            ..ToolResult::new("t2", Content::string(head))
        });
        assert_eq!(score(&o, &out, true).errors, Hits { hits: 1, total: 1 });
        // Only 150 chars kept: lost.
        let short: String = format!("error: {}", "x".repeat(300))
            .chars()
            .take(150)
            .collect();
        out.messages[2].content.blocks[1] = Block::tool_result("t2", Content::string(short));
        let s = score(&o, &out, true);
        assert_eq!(s.errors, Hits { hits: 0, total: 1 });
        assert_eq!(s.lost.errors[0].chars().count(), 200);
    }

    #[test]
    fn a_path_present_anywhere_is_kept_absent_is_lost() {
        let o = original();
        let mut out = o.clone();
        out.messages.drain(1..);
        out.messages.push(Message::new(
            "s",
            Role::User,
            vec![Block::text(
                "[condense: summary] wrote src/new.rs; make failed",
            )],
        ));
        let s = score(&o, &out, true);
        assert_eq!(s.artifact, Hits { hits: 1, total: 1 });
        assert_eq!(s.errors, Hits { hits: 0, total: 1 });
        out.messages.pop();
        let s = score(&o, &out, true);
        assert_eq!(s.lost.artifacts, ["src/new.rs"]);
    }

    #[test]
    fn the_request_is_compared_without_crlf() {
        let o = original();
        let mut out = o.clone();
        out.messages[0] = Message::new("u1", Role::User, vec![Block::text("Fix\nthe build")]);
        assert_eq!(score(&o, &out, true).request, Hits { hits: 1, total: 1 });
        out.messages[0] = Message::new("u1", Role::User, vec![Block::text("Fix the build")]);
        let s = score(&o, &out, true);
        assert_eq!(s.request, Hits { hits: 0, total: 1 });
        assert_eq!(s.lost.request.as_deref(), Some("Fix\r\nthe build"));
    }

    #[test]
    fn integrity_failures_are_named() {
        let o = original();
        // An orphaned result: its call dropped.
        let mut orphan = o.clone();
        orphan.messages.remove(1);
        let s = score(&o, &orphan, true);
        assert_eq!(s.integrity, Hits { hits: 3, total: 4 });
        assert!(s.lost.integrity[0].contains("`t1`, `t2`"), "{:?}", s.lost);
        // A duplicate tool_use id and a duplicate message id.
        let mut dup = o.clone();
        let again = dup.messages[1].clone();
        dup.messages.push(again);
        let s = score(&o, &dup, false);
        assert_eq!(s.integrity, Hits { hits: 1, total: 4 });
        assert_eq!(
            s.lost.integrity,
            [
                "duplicate tool_use id: `t1`, `t2`",
                "duplicate message id: `a1`",
                "the written output does not read back equal"
            ]
        );
    }

    #[test]
    fn text_holds_system_messages_calls_and_results_in_order() {
        let t = conversation_text(&original());
        assert!(t.starts_with("You are a coder.\nFix\r\nthe build\nWrite\n{\"file_path\":\"src/new.rs\"}\nBash\n{\"command\":\"make\"}\nok\nerror: "), "{t}");
        let mut with_event = original();
        with_event
            .messages
            .push(Message::new("e", Role::Event, vec![Block::text("hidden")]));
        assert!(!conversation_text(&with_event).contains("hidden"));
    }
}
