//! The compression prompt: a no-tools preamble, an `<analysis>` scratchpad, a nine-section
//! `<summary>`; the span rendered as a transcript; the reply's summary extracted.

use condense_model::{Block, Content, Message, Role};
use std::fmt::Write;

/// First thing in the system prompt: some models try tool calls unless told very plainly.
pub const NO_TOOLS_PREAMBLE: &str = "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.

- Do NOT use Read, Bash, Grep, Glob, Edit, Write, or ANY other tool.
- You already have all the context you need in the conversation below.
- Tool calls will be REJECTED and will waste your only turn — you will fail the task.
- Your entire response must be plain text: an <analysis> block followed by a <summary> block.";

const INSTRUCTIONS: &str = "Your task is to create a detailed summary of a span of a conversation between a user and an AI coding agent. The summary replaces the span in the agent's context, so it must hold everything needed to continue the work without re-reading files or re-running commands: exact file paths, function and variable names, commands, error messages and the user's instructions.

condense puts a record it keeps itself in front of your summary: every user request (the last one verbatim), every file created, modified, deleted or read, and every distinct error with whether it was fixed. Do not spend your budget listing those again: in sections 3, 4 and 6 say what matters about them (why a file changed, how an error was fixed, what the user meant), and give the rest of the budget to the reasoning, the state of the work and the next step.

Before the summary, wrap your analysis in <analysis> tags. In it, go through the conversation chronologically and note for each part: the user's explicit requests and intent, the approach taken, key decisions, technical concepts, file names, code snippets and function signatures, errors met and how they were fixed, and user feedback, especially where the user asked for something to be done differently. Keep the analysis brief; it is discarded.

Then write the summary in <summary> tags, with these sections:
1. Primary Request and Intent: all of the user's explicit requests and intents, in detail.
2. Key Technical Concepts: the technologies, frameworks and concepts discussed.
3. Files and Code Sections: every file examined, modified or created, by exact path, with why it matters, what changed, and short code snippets where they help.
4. Errors and fixes: every error met (exact message) and how it was fixed, and what the user said about it.
5. Problem Solving: problems solved and troubleshooting still going on.
6. All user messages: every user message that is not a tool result, verbatim or nearly so.
7. Pending Tasks: tasks the user asked for that are not done.
8. Current Work: what was being worked on right before the end of the span, in detail, with file names and code.
9. Optional Next Step: the next step, only if it follows directly from the user's latest request; quote the conversation to show where it comes from.

Output format:
<analysis>
[your notes]
</analysis>

<summary>
1. Primary Request and Intent:
   [...]
2. Key Technical Concepts:
   - [...]
3. Files and Code Sections:
   - [path]
     - [why it matters, what changed]
4. Errors and fixes:
   - [...]
5. Problem Solving:
   [...]
6. All user messages:
   - [...]
7. Pending Tasks:
   - [...]
8. Current Work:
   [...]
9. Optional Next Step:
   [...]
</summary>

REMINDER: Do NOT call any tools. Respond with plain text only: an <analysis> block followed by a <summary> block.";

/// Characters of one text block, tool input or tool result shown to the model; longer ones
/// keep their head and tail.
const TEXT_CHARS: usize = 20_000;
const INPUT_CHARS: usize = 4_000;
const RESULT_CHARS: usize = 8_000;

/// The system prompt for a request from `purpose`.
pub(crate) fn system_prompt(purpose: &str) -> String {
    let why = match purpose {
        "autocompact" => "The summary will replace the whole conversation so far.".to_string(),
        "context-collapse" => {
            "The summary folds an older part of the conversation; the recent messages stay verbatim after it."
                .to_string()
        }
        "" => String::new(),
        other => format!("The summary is requested by `{other}`."),
    };
    format!("{NO_TOOLS_PREAMBLE}\n\n{INSTRUCTIONS}\n\n{why}")
        .trim_end()
        .to_string()
}

/// The user message: the previous summary to merge into (if any), the span, the budget.
pub(crate) fn user_message(
    rendered: &[String],
    dropped: usize,
    previous_summary: Option<&str>,
    max_tokens: usize,
) -> String {
    let mut out = String::new();
    if let Some(prev) = previous_summary.filter(|p| !p.trim().is_empty()) {
        let _ = write!(
            out,
            "<previous_summary>\n{}\n</previous_summary>\n\nThe summary above covers the conversation before the span below. Merge the span into it: keep every file path, error, decision and user message it records unless the span supersedes them, and update the current work, pending tasks and next step.\n\n",
            prev.trim()
        );
    }
    out.push_str("<conversation>\n");
    if dropped > 0 {
        let _ = writeln!(
            out,
            "[the first {dropped} messages of the span were left out: the request was too long for the model]\n"
        );
    }
    for m in rendered.iter().filter(|m| !m.is_empty()) {
        out.push_str(m);
        out.push('\n');
    }
    let _ = write!(
        out,
        "</conversation>\n\nWrite the <analysis> and then the <summary> now. Keep the <summary> under about {max_tokens} tokens."
    );
    out
}

/// One message as transcript text: `[role]` then its blocks. Thinking is left out; events
/// (not sent to the model) render as nothing.
pub(crate) fn render_message(m: &Message) -> String {
    if m.role == Role::Event {
        return String::new();
    }
    let mut out = format!("[{}]\n", m.role.as_str());
    render_content(&mut out, &m.content);
    out
}

fn render_content(out: &mut String, content: &Content) {
    for block in &content.blocks {
        match block {
            Block::Text(t) if !t.text.trim().is_empty() => {
                out.push_str(&head_tail(t.text.trim_end(), TEXT_CHARS));
                out.push('\n');
            }
            Block::ToolUse(tu) => {
                let _ = writeln!(
                    out,
                    "[tool call {} {}] {}",
                    tu.id,
                    tu.name,
                    head_tail(tu.input.as_str(), INPUT_CHARS)
                );
            }
            Block::ToolResult(tr) => {
                let err = if tr.is_error == Some(true) {
                    " (error)"
                } else {
                    ""
                };
                let _ = writeln!(out, "[tool result {}{err}]", tr.tool_use_id);
                let mut inner = String::new();
                render_content(&mut inner, &tr.content);
                out.push_str(&head_tail(inner.trim_end(), RESULT_CHARS));
                out.push('\n');
            }
            Block::Image(_) => out.push_str("[image]\n"),
            Block::Text(_) | Block::Thinking(_) | Block::Opaque(_) => {}
        }
    }
}

/// `text` whole, or its head and tail with the number of characters left out between.
fn head_tail(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let head_len = max * 3 / 4;
    let tail_len = max - head_len;
    let head: String = text.chars().take(head_len).collect();
    let tail: String = text.chars().skip(n - tail_len).collect();
    format!("{head}\n[… {} characters left out …]\n{tail}", n - max)
}

/// The summary in a reply: `<analysis>` blocks removed, the `<summary>` content (or the whole
/// text when there are no tags). An unclosed tag runs to the end.
pub(crate) fn extract_summary(reply: &str) -> String {
    let mut text = reply.to_string();
    while let Some(start) = text.find("<analysis>") {
        let end = match text[start..].find("</analysis>") {
            Some(e) => start + e + "</analysis>".len(),
            None => text[start..]
                .find("<summary>")
                .map_or(text.len(), |s| start + s),
        };
        text.replace_range(start..end, "");
    }
    match text.find("<summary>") {
        Some(start) => {
            let body = &text[start + "<summary>".len()..];
            let end = body.find("</summary>").unwrap_or(body.len());
            body[..end].trim().to_string()
        }
        None => text.trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analysis_is_stripped() {
        assert_eq!(
            extract_summary(
                "<analysis>\nthinking\n</analysis>\n\n<summary>\n1. Intent\n</summary>"
            ),
            "1. Intent"
        );
        assert_eq!(extract_summary("plain text"), "plain text");
        assert_eq!(extract_summary("<analysis>cut off"), "");
        assert_eq!(extract_summary("<analysis>x <summary>partial"), "partial");
    }

    #[test]
    fn an_event_renders_as_nothing_even_with_content() {
        // A sub-agent's line as the Claude Code reader keeps it: not context, content kept.
        let event = Message::new(
            "s1",
            Role::Event,
            vec![Block::text("the sub-agent's words")],
        );
        assert_eq!(render_message(&event), "");
        let user = Message::new("u1", Role::User, vec![Block::text("the user's words")]);
        assert_eq!(render_message(&user), "[user]\nthe user's words\n");
    }

    #[test]
    fn long_texts_keep_head_and_tail() {
        let t: String = "a".repeat(100) + &"b".repeat(100);
        let s = head_tail(&t, 40);
        assert!(s.starts_with("aaa") && s.ends_with("bbb") && s.contains("160 characters"));
    }
}
