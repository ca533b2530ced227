//! The extractive summarizer (the prose part of a summary): every section on a hand-made
//! session, the merge rules, merging span by span on the real Claude Code transcript, and the
//! token budget. The user requests, files and errors are the retained record's
//! (retaining.rs).

use crate::support::{
    assistant, between_turns, call, real_transcript, result, section, sidechain, turn_split, user,
};
use condense_model::{Block, Message, Role};
use condense_summarize::{build, Summarizer, SummarizerConfig, SummaryRequest};
use condense_tokens::TokenCounter;
use serde_json::json;
use std::sync::Arc;

const DECISIONS: &str = "Decisions";
const STATE: &str = "Current state";
const PENDING: &str = "Pending tasks and next steps";
const NOTES: &str = "Agent notes (verbatim, newest kept first)";
const PROSE: [&str; 4] = [DECISIONS, STATE, PENDING, NOTES];

fn extractive() -> Box<dyn Summarizer> {
    build(
        &SummarizerConfig::default(),
        Arc::new(TokenCounter::default()),
    )
    .unwrap()
}

fn summarize(messages: &[Message], previous: Option<&str>, max_tokens: usize) -> String {
    extractive()
        .summarize(&SummaryRequest {
            messages,
            previous_summary: previous,
            max_tokens,
            purpose: "context-collapse",
        })
        .unwrap()
}

/// A debugging session that fills every section, with a sub-agent (`Task`) whose own lines
/// are sidechain lines.
fn session() -> Vec<Message> {
    vec![
        user("u1", "Fix the 401 on /api/auth/login.\nThe tests are in tests/auth.test.ts."),
        user("u2", "<system-reminder>The date is today.</system-reminder>"),
        call("a1", "I'll read the controller first.", "toolu_01", "Read", json!({"file_path": "src/auth/controller.ts"})),
        result("r1", "toolu_01", "export function login() {}", None),
        call("a2", "", "toolu_04", "Task", json!({"description": "Find the Redis client", "prompt": "Where is the Redis client created?", "subagent_type": "general-purpose"})),
        sidechain(user("s1", "Where is the Redis client created?")),
        sidechain(call("s2", "I'll switch to grep instead of reading every file.", "toolu_s1", "Grep", json!({"pattern": "new Redis"}))),
        sidechain(result("s3", "toolu_s1", "src/session/store.ts:42: new Redis()", None)),
        sidechain(assistant("s4", "Found it: src/session/store.ts:42 creates the client.")),
        result("r2", "toolu_04", "The session store creates a new Redis client per request (src/session/store.ts:42).\n\nNothing reuses it.", None),
        call("a3", "", "toolu_02", "Bash", json!({"command": "cat config/redis.ts && head -n 20 src/session/store.ts"})),
        result("r3", "toolu_02", "export const redis = {}", None),
        call("a4", "", "toolu_03", "Bash", json!({"command": "npm test"})),
        result(
            "r4",
            "toolu_03",
            "FAIL tests/auth.test.ts\n  login returns 200\n    Error: expected 200, got 401\nTests:       2 failed, 14 passed, 16 total",
            Some(true),
        ),
        assistant("a5", "The root cause is a stale Redis connection in the session store. I'll use a connection pool instead of per-request connections."),
        call("a6", "", "toolu_05", "Edit", json!({"file_path": "config/redis.ts", "old_string": "a", "new_string": "b"})),
        result("r6", "toolu_05", "The file config/redis.ts has been updated.", None),
        call("a7", "", "toolu_06", "Write", json!({"file_path": "src/session/retry.ts", "content": "export {}"})),
        result("r7", "toolu_06", "File created successfully", None),
        call("a8", "", "toolu_07", "Bash", json!({"command": "sed -i 's/timeout: 5/timeout: 30/' src/session/store.ts"})),
        result("r8", "toolu_07", "", None),
        call("a9", "", "toolu_08", "TodoWrite", json!({"todos": [
            {"content": "Fix connection pooling", "status": "completed", "activeForm": "Fixing"},
            {"content": "Fix remaining test failures", "status": "in_progress", "activeForm": "Fixing"},
            {"content": "Update documentation", "status": "pending", "activeForm": "Updating"}
        ]})),
        result("r9", "toolu_08", "Todos have been modified successfully", None),
        call("a10", "", "toolu_09", "Bash", json!({"command": "npm test -- auth"})),
        result("r10", "toolu_09", "Tests:       1 failed, 15 passed, 16 total", Some(true)),
        assistant("a11", "One failure left: the session mock still returns the old client."),
        user("u3", "Also add a retry test, and don't touch the CORS middleware."),
    ]
}

/// The bullets of a section (first lines only, without `- `).
fn bullets(section: &str) -> Vec<&str> {
    section
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .collect()
}

#[test]
fn hand_made_session_fills_every_section() {
    let s = summarize(&session(), None, 2_000);
    insta::assert_snapshot!("hand_made_session", s);
    assert_eq!(s, summarize(&session(), None, 2_000), "deterministic");

    let headings: Vec<&str> = s.lines().filter_map(|l| l.strip_prefix("## ")).collect();
    assert_eq!(headings, PROSE, "the prose sections only, in this order");
    assert_eq!(
        bullets(section(&s, DECISIONS)),
        [
            "The root cause is a stale Redis connection in the session store.",
            "I'll use a connection pool instead of per-request connections.",
        ],
        "exploring is no decision; a sub-agent's line is not the agent's decision"
    );
    assert_eq!(
        bullets(section(&s, STATE)),
        [
            "Last test run (`toolu_09`): `npm test -- auth` → Tests: 1 failed, 15 passed, 16 total",
            "Last assistant message: One failure left: the session mock still returns the old client.",
        ]
    );
    assert_eq!(
        bullets(section(&s, PENDING)),
        [
            "[in_progress] Fix remaining test failures",
            "[pending] Update documentation",
            "Unanswered user request: Also add a retry test, and don't touch the CORS middleware.",
        ],
        "completed todo items are not pending"
    );
    let notes = section(&s, NOTES);
    assert_eq!(
        bullets(notes),
        [
            "I'll read the controller first.",
            "Sub-agent report (`toolu_04`): The session store creates a new Redis client per request (src/session/store.ts:42).",
            "The root cause is a stale Redis connection in the session store. I'll use a connection pool instead of per-request connections.",
            "One failure left: the session mock still returns the old client.",
        ],
        "{notes}"
    );
    assert!(
        notes.contains("(src/session/store.ts:42).\n  Nothing reuses it.\n"),
        "a report's further lines are continuation lines, blank lines dropped:\n{notes}"
    );
    assert!(
        !s.contains("grep instead") && !s.contains("Found it"),
        "sidechain lines are the sub-agent's, not the agent's"
    );
}

#[test]
fn unanswered_requests_skip_boilerplate_and_are_cleared_by_an_answer() {
    let unanswered = |msgs: &[Message]| {
        let s = summarize(msgs, None, 1_000);
        bullets(section(&s, PENDING))
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let review = user("u1", "<command-message>review is running…</command-message>\n<command-name>/review</command-name>\n<command-args>src/main.rs</command-args>");
    let interrupted = Message::new(
        "u2",
        Role::User,
        vec![Block::text("[Request interrupted by user]")],
    );
    assert_eq!(
        unanswered(&[review.clone(), interrupted.clone()]),
        ["Unanswered user request: /review src/main.rs"]
    );
    let anyhow = user("u3", "Use `anyhow` for errors, not Box<dyn Error>.");
    assert_eq!(
        unanswered(&[review.clone(), interrupted.clone(), anyhow.clone()]),
        ["Unanswered user request: Use `anyhow` for errors, not Box<dyn Error>."],
        "verbatim"
    );
    assert_eq!(
        unanswered(&[review, interrupted, anyhow, assistant("a1", "Done.")]),
        Vec::<String>::new(),
        "answered"
    );
    // A sub-agent's prompt is no request, and its answer does not answer the user.
    assert_eq!(
        unanswered(&[
            user("u1", "Find the flaky test."),
            sidechain(user("s1", "Search the tests for sleeps.")),
            sidechain(assistant("s2", "Found two.")),
        ]),
        ["Unanswered user request: Find the flaky test."]
    );
}

#[test]
fn test_runs_and_todo_lists_of_other_agents() {
    let msgs = vec![
        user("u1", "Refactor the parser"),
        call(
            "a1",
            "",
            "c1",
            "update_plan",
            json!({"plan": [
                {"step": "Split the tokenizer", "status": "completed"},
                {"step": "Port the tests", "status": "in_progress"}
            ]}),
        ),
        result("r1", "c1", "Plan updated", None),
        call(
            "a2",
            "",
            "c2",
            "shell",
            json!({"command": ["bash", "-lc", "pytest -q"]}),
        ),
        result(
            "r2",
            "c2",
            "F.\nFAILED test_parser.py::test_parse - AssertionError\n1 failed, 1 passed in 0.1s",
            None,
        ),
        call(
            "a3",
            "",
            "c3",
            "execute_bash",
            json!({"command": "cat tests/test_parser.py"}),
        ),
        result("r3", "c3", "def test_parse(): ...", None),
    ];
    let s = summarize(&msgs, None, 2_000);
    assert_eq!(
        bullets(section(&s, STATE)),
        ["Last test run (`c2`): `pytest -q` → 1 failed, 1 passed in 0.1s"],
        "reading a test file is no test run"
    );
    assert_eq!(
        bullets(section(&s, PENDING)),
        ["[in_progress] Port the tests"]
    );
    // OpenHands' task tracker; a later list replaces the earlier one.
    let mut msgs = msgs;
    msgs.push(call(
        "a4",
        "",
        "c4",
        "task_tracker",
        json!({"command": "plan", "task_list": [
            {"title": "Port the tests", "status": "done"},
            {"title": "Update the docs", "status": "todo"}
        ]}),
    ));
    let s = summarize(&msgs, None, 2_000);
    assert_eq!(bullets(section(&s, PENDING)), ["[todo] Update the docs"]);
    assert_eq!(
        section(&s, STATE),
        "## Current state\n- Last test run (`c2`): `pytest -q` → 1 failed, 1 passed in 0.1s",
        "a tool-only agent has no last assistant message"
    );
}

/// A summary this summarizer could have written, with a section it does not know.
const PREVIOUS: &str = "## Decisions\n- We decided to use nom for the parser.\n\n## Current state\n- Last test run (`t1`): `cargo test` → 3 passed; 0 failed\n- Last assistant message: The parser handles literals.\n\n## Pending tasks and next steps\n- [pending] Write docs\n- Unanswered user request: add tests\n\n## Agent notes (verbatim, newest kept first)\n- The parser handles literals.\n  Operators are next.\n\n## Notes from the user\nKeep the public API stable.\n";

#[test]
fn merge_rules() {
    let span = vec![
        call(
            "a1",
            "We decided to use nom for the parser. The lexer will be rewritten instead.",
            "t2",
            "Edit",
            json!({"file_path": "src/lib.rs"}),
        ),
        result("r1", "t2", "ok", None),
        call(
            "a2",
            "",
            "t3",
            "TodoWrite",
            json!({"todos": [{"content": "Write docs", "status": "completed"}]}),
        ),
        result("r2", "t3", "ok", None),
        user("u1", "Now the lexer."),
    ];
    let s = summarize(&span, Some(PREVIOUS), 2_000);
    insta::assert_snapshot!("merge_rules", s);
    assert_eq!(
        bullets(section(&s, DECISIONS)),
        [
            "We decided to use nom for the parser.",
            "The lexer will be rewritten instead."
        ],
        "appended, a repeated decision once"
    );
    assert_eq!(
        bullets(section(&s, STATE)),
        [
            "Last test run (`t1`): `cargo test` → 3 passed; 0 failed",
            "Last assistant message: We decided to use nom for the parser. The lexer will be rewritten instead.",
        ],
        "the test run is kept (the span ran none), the last message replaced"
    );
    assert_eq!(
        bullets(section(&s, PENDING)),
        ["Unanswered user request: Now the lexer."],
        "the span's (finished) todo list replaces the old one; its request the old one"
    );
    assert_eq!(
        section(&s, NOTES),
        "## Agent notes (verbatim, newest kept first)\n- The parser handles literals.\n  Operators are next.\n- We decided to use nom for the parser. The lexer will be rewritten instead.",
        "appended; continuation lines survive the round trip"
    );
    assert_eq!(
        section(&s, "Notes from the user"),
        "## Notes from the user\nKeep the public API stable.",
        "a foreign section is kept verbatim"
    );
    let headings: Vec<&str> = s.lines().filter_map(|l| l.strip_prefix("## ")).collect();
    assert_eq!(
        headings,
        [DECISIONS, STATE, PENDING, NOTES, "Notes from the user"],
        "foreign sections after the known ones"
    );

    // A span with an assistant turn answers the old request; one without keeps it.
    let s = summarize(&[assistant("a1", "Tests added.")], Some(PREVIOUS), 2_000);
    assert_eq!(
        bullets(section(&s, PENDING)),
        ["[pending] Write docs"],
        "answered: cleared"
    );
    let s = summarize(&[result("r1", "t0", "ok", None)], Some(PREVIOUS), 2_000);
    assert_eq!(
        bullets(section(&s, PENDING)),
        ["[pending] Write docs", "Unanswered user request: add tests"]
    );
    assert_eq!(
        summarize(&[], Some(&s), 2_000),
        s,
        "merging nothing changes nothing"
    );
}

#[test]
fn decisions_and_notes_keep_the_most_recent() {
    let decided = |n: usize| format!("We decided on option {n}.");
    let mut previous = String::from("## Decisions\n");
    for n in 1..=12 {
        previous.push_str(&format!("- {}\n", decided(n)));
    }
    previous.push_str("\n## Agent notes (verbatim, newest kept first)\n");
    for n in 1..=40 {
        previous.push_str(&format!("- Note {n}.\n"));
    }
    let s = summarize(&[assistant("a1", &decided(13))], Some(&previous), 100_000);
    let expected: Vec<String> = (2..=13).map(decided).collect();
    assert_eq!(bullets(section(&s, DECISIONS)), expected, "12 kept");
    let notes = bullets(section(&s, NOTES));
    assert_eq!(notes.len(), 40, "40 kept");
    assert_eq!((notes[0], notes[39]), ("Note 2.", decided(13).as_str()));

    // Within one span too.
    let text: String = (1..=15).map(|n| format!("{} ", decided(n))).collect();
    let s = summarize(&[assistant("a1", &text)], None, 100_000);
    let expected: Vec<String> = (4..=15).map(decided).collect();
    assert_eq!(bullets(section(&s, DECISIONS)), expected);
}

#[test]
fn a_foreign_previous_summary_is_kept() {
    let previous = "1. Primary Request and Intent:\n   Port the CLI to clap 4.\n3. Files and Code Sections:\n   - src/cli.rs";
    let s = summarize(&session(), Some(previous), 2_000);
    let earlier = section(&s, "Earlier summary");
    assert_eq!(earlier, format!("## Earlier summary\n{previous}"));
    let fresh = summarize(&session(), None, 2_000);
    for heading in PROSE {
        assert_eq!(section(&s, heading), section(&fresh, heading), "{heading}");
    }
}

#[test]
fn merging_a_span_into_the_previous_summary_matches_summarizing_both() {
    let conv = real_transcript();
    let msgs = &conv.messages;
    let whole = summarize(msgs, None, 20_000);
    assert!(!whole.contains("more omitted"), "nothing trimmed:\n{whole}");
    for at in [msgs.len() / 4, msgs.len() / 2, msgs.len() * 3 / 4] {
        let split = turn_split(msgs, at);
        let (a, b) = msgs.split_at(split);
        let first = summarize(a, None, 20_000);
        let merged = summarize(b, Some(&first), 20_000);
        for heading in PROSE {
            assert_eq!(
                section(&merged, heading),
                section(&whole, heading),
                "split at {split}"
            );
        }
        assert_eq!(merged, whole, "nothing else either, split at {split}");
    }
    // Three rounds, as a long session would go.
    let (one, two) = (
        turn_split(msgs, msgs.len() / 3),
        turn_split(msgs, msgs.len() * 2 / 3),
    );
    let (a, b, c) = (&msgs[..one], &msgs[one..two], &msgs[two..]);
    let s1 = summarize(a, None, 20_000);
    let s2 = summarize(b, Some(&s1), 20_000);
    let s3 = summarize(c, Some(&s2), 20_000);
    assert_eq!(s3, whole);
    assert_eq!(
        s3,
        summarize(&[], Some(&s3), 20_000),
        "merging nothing changes nothing"
    );
}

#[test]
fn a_sub_agent_does_not_answer_the_user_across_a_merge() {
    let a = vec![user("u1", "Find the flaky test.")];
    let b = vec![
        sidechain(user("s1", "Search the tests for sleeps.")),
        sidechain(assistant("s2", "Found two.")),
    ];
    let whole = summarize(&[a.clone(), b.clone()].concat(), None, 2_000);
    assert!(section(&whole, PENDING).contains("Unanswered user request: Find the flaky test."));
    assert_eq!(
        summarize(&b, Some(&summarize(&a, None, 2_000)), 2_000),
        whole
    );
}

#[test]
fn hand_made_session_merges_consistently() {
    let msgs = session();
    let whole = summarize(&msgs, None, 2_000);
    let mut splits = 0;
    for split in 1..msgs.len() {
        if !between_turns(&msgs, split) {
            continue;
        }
        splits += 1;
        let (a, b) = msgs.split_at(split);
        let merged = summarize(b, Some(&summarize(a, None, 2_000)), 2_000);
        assert_eq!(merged, whole, "split at {split}");
    }
    assert!(splits > 10, "{splits}");
}

#[test]
fn the_budget_is_respected() {
    let counter = TokenCounter::default();
    let conv = real_transcript();
    let previous = summarize(&conv.messages[..200], None, 3_000);
    for max in [0, 5, 20, 50, 100, 300, 1_000, 3_000] {
        for (msgs, prev) in [
            (&conv.messages[..], None),
            (&conv.messages[200..], Some(previous.as_str())),
            (&session()[..], None),
            (&session()[..], Some(PREVIOUS)),
        ] {
            let s = summarize(msgs, prev, max);
            assert!(
                counter.count_text(&s) <= max,
                "{} > {max}:\n{s}",
                counter.count_text(&s)
            );
        }
    }
    // Small budgets keep the structure and the most important items.
    let s = summarize(&conv.messages, None, 300);
    for heading in PROSE {
        assert!(
            s.contains(&format!("## {heading}\n")),
            "{heading} missing:\n{s}"
        );
    }
    assert!(s.contains("more omitted)"), "{s}");
    let whole = summarize(&conv.messages, None, 20_000);
    assert!(
        section(&s, STATE) == section(&whole, STATE),
        "the last assistant message is kept:\n{s}"
    );
    let kept = bullets(section(&s, DECISIONS));
    let all = bullets(section(&whole, DECISIONS));
    assert!(
        !kept.is_empty() && all.ends_with(&kept),
        "the newest decisions are kept:\n{s}"
    );
}

/// `summary` with every agent note omitted (`(N more omitted)`), the other sections as they are.
fn without_notes(summary: &str) -> String {
    let notes = section(summary, NOTES);
    let n = bullets(notes).len();
    summary.replace(notes, &format!("## {NOTES}\n({n} more omitted)"))
}

#[test]
fn agent_notes_give_way_first() {
    let counter = TokenCounter::default();
    let msgs = session();
    let full = summarize(&msgs, None, 10_000);
    let full_tokens = counter.count_text(&full);
    assert_eq!(bullets(section(&full, NOTES)).len(), 4);
    // Just too small: the other sections are whole, the oldest notes go, the newest stays.
    for max in [full_tokens - 1, full_tokens - 20] {
        let s = summarize(&msgs, None, max);
        assert!(counter.count_text(&s) <= max);
        for heading in [DECISIONS, STATE, PENDING] {
            assert_eq!(section(&s, heading), section(&full, heading), "{heading}");
        }
        let notes = section(&s, NOTES);
        assert!(notes.contains("more omitted)"), "{s}");
        assert_eq!(
            bullets(notes).last(),
            Some(&"One failure left: the session mock still returns the old client."),
            "the newest note is kept first:\n{s}"
        );
    }
    // The real transcript at a tight budget: no note, and the newest decisions.
    let conv = real_transcript();
    let s = summarize(&conv.messages, None, 120);
    assert!(bullets(section(&s, NOTES)).is_empty(), "{s}");
    assert!(!bullets(section(&s, DECISIONS)).is_empty(), "{s}");
}

#[test]
fn notes_are_dropped_before_any_other_item() {
    let counter = TokenCounter::default();
    for msgs in [session(), real_transcript().messages] {
        let full = summarize(&msgs, None, 100_000);
        let without = without_notes(&full);
        for max in (counter.count_text(&without)..counter.count_text(&full)).step_by(3) {
            let s = summarize(&msgs, None, max);
            for heading in [DECISIONS, STATE, PENDING] {
                assert_eq!(
                    section(&s, heading),
                    section(&full, heading),
                    "{heading} at {max}"
                );
            }
        }
    }
}

#[test]
fn a_summary_cut_to_the_budget_uses_most_of_it() {
    let counter = TokenCounter::default();
    let conv = real_transcript();
    let full = counter.count_text(&summarize(&conv.messages, None, 100_000));
    let wasteful: Vec<(usize, usize)> = (100..full)
        .step_by(10)
        .map(|max| {
            (
                max,
                counter.count_text(&summarize(&conv.messages, None, max)),
            )
        })
        .filter(|(max, used)| used * 4 < max * 3)
        .collect();
    assert!(wasteful.is_empty(), "(budget, tokens used): {wasteful:?}");
}
