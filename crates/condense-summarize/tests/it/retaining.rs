//! The composed summary the host returns (`retaining::summarize_retaining`): the retained
//! record (user requests, artifact trail, error ledger) first, the extractive prose within what
//! is left of the budget. On the real Claude Code transcript: every written path and the last
//! request survive any budget, the budget holds whenever the mandatory part fits, and merging
//! span by span (with the earlier records, or reading them back from the text) keeps every
//! written path and error of summarizing the whole.

use crate::support::{
    assistant, call, real_transcript, result, section, sidechain, turn_split, user, written_paths,
};
use condense_model::Message;
use condense_summarize::retaining::{
    is_summary_message, summarize_onto, summarize_retaining, summarize_span, summary_body, Earlier,
    OntoSummary, Retained, RetainingSummary,
};
use condense_summarize::{build, SummarizerConfig, SummaryRequest};
use condense_tokens::TokenCounter;
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};

const PROSE: [&str; 4] = [
    "Decisions",
    "Current state",
    "Pending tasks and next steps",
    "Agent notes (verbatim, newest kept first)",
];

/// The pipeline's default tokenizer, loaded once.
fn counter() -> Arc<TokenCounter> {
    static COUNTER: OnceLock<Arc<TokenCounter>> = OnceLock::new();
    Arc::clone(COUNTER.get_or_init(|| Arc::new(TokenCounter::default())))
}

fn compose(
    messages: &[Message],
    earlier: Vec<(String, Option<Retained>)>,
    max_tokens: usize,
) -> RetainingSummary {
    let counter = counter();
    let summarizer = build(&SummarizerConfig::default(), Arc::clone(&counter)).unwrap();
    let request = SummaryRequest {
        messages,
        previous_summary: None,
        max_tokens,
        purpose: "autocompact",
    };
    summarize_retaining(
        summarizer.as_ref(),
        &counter,
        &request,
        Earlier { summaries: earlier },
    )
    .unwrap()
}

fn tokens(text: &str) -> usize {
    counter().count_text(text)
}

/// The record of `messages` rendered alone with nothing optional, and its tokens: the
/// mandatory part (the last request, every written path).
fn mandatory(messages: &[Message]) -> (String, usize) {
    let floor = Retained::from_messages(messages).render(0, &tokens);
    assert!(floor.over_budget);
    (floor.text.trim().to_string(), floor.tokens)
}

/// The last thing the user typed in the real transcript, straight from the JSONL (not a
/// sub-agent's prompt, not a meta line).
fn last_user_text() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/claude-code-session.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .rev()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["type"] == "user" && l["isSidechain"] != true && l["isMeta"] != true)
        .find_map(|l| match &l["message"]["content"] {
            Value::String(s) => Some(s.clone()),
            Value::Array(blocks) => blocks
                .iter()
                .find_map(|b| b["text"].as_str().map(str::to_string)),
            _ => None,
        })
        .unwrap()
}

/// What the whole-transcript checks compare: the written paths (as code spans) and the error
/// lines of the record of summarizing everything at once.
fn assert_keeps_everything(text: &str, whole: &Retained, written: &[String], what: &str) {
    for p in written {
        assert!(text.contains(&format!("`{p}`")), "{p} missing, {what}");
    }
    for e in &whole.errors.entries {
        assert!(text.contains(&e.line), "error {:?} missing, {what}", e.line);
    }
}

#[test]
fn autocompact_summary_of_a_real_transcript_with_artifact_trail_and_error_ledger() {
    let conv = real_transcript();
    let s = compose(&conv.messages, Vec::new(), 12_000);
    assert!(!s.text.contains("omitted"), "nothing left out:\n{}", s.text);
    assert!(tokens(&s.text) <= 12_000);
    let headings: Vec<&str> = s
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .collect();
    assert_eq!(
        headings,
        [
            "User requests",
            "Files (artifact trail)",
            "Errors",
            PROSE[0],
            PROSE[1],
            PROSE[2],
            PROSE[3],
        ],
        "the record first, then the prose"
    );
    insta::assert_snapshot!(
        "autocompact_summary_real_transcript_artifact_trail_error_ledger",
        s.text
    );
    assert_eq!(
        s.text,
        compose(&conv.messages, Vec::new(), 12_000).text,
        "deterministic"
    );
}

#[test]
fn a_sub_agents_event_lines_give_the_record_its_files_and_errors_but_no_prose() {
    // How the Claude Code reader keeps a sub-agent's lines: events (not context) with their
    // content. The record lists what they wrote and hit; the prose is the agent's own.
    let carried = |m: Message| Message {
        role: condense_model::Role::Event,
        ..sidechain(m)
    };
    let messages = vec![
        user("u1", "Build the TODO app"),
        call(
            "a1",
            "I'll delegate the types.",
            "task",
            "Task",
            json!({"prompt": "types"}),
        ),
        carried(user("s1", "Write the types for the TODO app")),
        carried(call(
            "s2",
            "Writing the SUB-AGENT-ONLY types now.",
            "t1",
            "Write",
            json!({"file_path": "/p/types/todo.ts", "content": "export type Todo = {}"}),
        )),
        carried(result("s3", "t1", "File created", None)),
        carried(call(
            "s4",
            "",
            "t2",
            "Bash",
            json!({"command": "ls types/"}),
        )),
        carried(result(
            "s5",
            "t2",
            "ls: cannot access 'types/': No such file or directory",
            Some(true),
        )),
        result("r1", "task", "Done: the types are in place.", None),
        assistant("a2", "The types are written."),
    ];
    let s = compose(&messages, Vec::new(), 4_000);
    assert!(
        s.text.contains("`/p/types/todo.ts` — created"),
        "{}",
        s.text
    );
    assert!(s.text.contains("ls: cannot access 'types/'"), "{}", s.text);
    assert!(!s.text.contains("SUB-AGENT-ONLY"), "{}", s.text);
    assert!(
        !s.text.contains("Write the types"),
        "not a request:\n{}",
        s.text
    );
    assert!(s.text.contains("The types are written."), "{}", s.text);
}

#[test]
fn every_written_path_and_the_last_request_survive_any_budget() {
    let conv = real_transcript();
    let written: Vec<String> = written_paths(&conv.messages).into_iter().collect();
    assert!(written.len() >= 20, "{written:?}");
    let last = last_user_text();
    assert_eq!(last, "Thanks! Please update CLAUDE.md for current changes");
    for max in [0, 1, 50, 300, 1_000, 3_000, 8_000, 20_000] {
        let s = compose(&conv.messages, Vec::new(), max);
        for p in &written {
            assert!(s.text.contains(&format!("`{p}`")), "{p} missing at {max}");
        }
        assert!(
            s.text
                .contains(&format!("Last request (verbatim):\n```\n{last}\n```\n")),
            "the last request verbatim at {max}:\n{}",
            s.text
        );
        assert!(s.text.starts_with("## User requests\n"), "{}", s.text);
    }
}

#[test]
fn the_budget_holds_when_the_mandatory_part_fits() {
    let conv = real_transcript();
    let msgs = &conv.messages;
    let (floor_text, floor) = mandatory(msgs);
    // Tiny budgets: the mandatory part alone, no prose; over the budget by it only.
    for max in [0, 1, 10, 50, floor / 2, floor - 1] {
        let s = compose(msgs, Vec::new(), max);
        assert_eq!(s.text, floor_text, "the mandatory part only, at {max}");
        assert!(tokens(&s.text) <= floor.max(max));
    }
    // From the mandatory part up: never over the budget, and the prose comes in.
    let edges = [floor, floor + 1, floor + 60, floor + 61, floor + 62];
    let sweep = (floor..4_000).step_by(53);
    for max in edges.into_iter().chain(sweep).chain([8_000, 20_000]) {
        let s = compose(msgs, Vec::new(), max);
        let used = tokens(&s.text);
        assert!(used <= max, "{used} > {max}:\n{}", s.text);
        if max >= floor + 300 {
            assert!(s.text.contains("\n\n## Decisions\n"), "prose at {max}");
        }
    }
    // A span merged onto an earlier summary, with its record or read back from its text.
    let split = turn_split(msgs, msgs.len() / 2);
    let first = compose(&msgs[..split], Vec::new(), 3_000);
    for max in [floor, floor + 61, floor + 200, 1_500, 3_000] {
        for with_record in [true, false] {
            let earlier = vec![(
                first.text.clone(),
                with_record.then(|| first.retained.clone()),
            )];
            let s = compose(&msgs[split..], earlier, max);
            let used = tokens(&s.text);
            assert!(
                used <= max,
                "{used} > {max}, record {with_record}:\n{}",
                s.text
            );
        }
    }
}

#[test]
fn merging_across_two_splits_keeps_every_written_path_and_error() {
    let conv = real_transcript();
    let msgs = &conv.messages;
    let written: Vec<String> = written_paths(msgs).into_iter().collect();
    let whole = compose(msgs, Vec::new(), 20_000);
    assert!(whole.retained.errors.entries.len() >= 5);
    assert_keeps_everything(&whole.text, &whole.retained, &written, "whole");
    for at in [msgs.len() / 4, msgs.len() / 2, msgs.len() * 3 / 4] {
        let split = turn_split(msgs, at);
        let (a, b) = msgs.split_at(split);
        let first = compose(a, Vec::new(), 20_000);
        // With the record the host kept: the same record, the same summary.
        let merged = compose(
            b,
            vec![(first.text.clone(), Some(first.retained.clone()))],
            20_000,
        );
        assert_eq!(merged.retained, whole.retained, "split at {split}");
        assert_eq!(merged.text, whole.text, "split at {split}");
        // Without it: read back from the text, nothing written or failed is lost.
        let merged = compose(b, vec![(first.text.clone(), None)], 20_000);
        let what = format!("read back, split at {split}");
        assert_keeps_everything(&merged.text, &whole.retained, &written, &what);
        assert_same_record(&merged.retained, &whole.retained, &what);
        for heading in PROSE {
            assert_eq!(
                section(&merged.text, heading),
                section(&whole.text, heading),
                "{what}"
            );
        }
    }
}

#[test]
fn a_record_handed_over_gives_the_same_summary_and_comes_back() {
    let conv = real_transcript();
    let msgs = &conv.messages;
    let counter = counter();
    let summarizer = build(&SummarizerConfig::default(), Arc::clone(&counter)).unwrap();
    for at in [msgs.len() / 4, msgs.len() / 2, msgs.len() * 3 / 4] {
        let split = turn_split(msgs, at);
        let (a, b) = msgs.split_at(split);
        let first = compose(a, Vec::new(), 20_000);
        for budget in [300, 2_000, 20_000] {
            let request = SummaryRequest {
                messages: b,
                previous_summary: Some(&first.text),
                max_tokens: budget,
                purpose: "collapse",
            };
            let copied = summarize_span(summarizer.as_ref(), &counter, &request, &|_| {
                Some(first.retained.clone())
            })
            .unwrap();
            let mut record = first.retained.clone();
            let OntoSummary { text, undo } =
                summarize_onto(summarizer.as_ref(), &counter, &request, &mut record).unwrap();
            let what = format!("split at {split}, budget {budget}");
            assert_eq!(text, copied.text, "{what}");
            assert_eq!(record, copied.retained, "{what}");
            record.undo(undo);
            assert_eq!(record, first.retained, "{what}");
        }
    }
}

/// The same written paths with the same status, the same error lines, the same requests.
fn assert_same_record(got: &Retained, want: &Retained, what: &str) {
    let written = |r: &Retained| {
        let mut v: Vec<(String, String)> = r
            .artifacts
            .written()
            .map(|a| (a.path.clone(), a.status.as_str().to_string()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(written(got), written(want), "{what}");
    let lines =
        |r: &Retained| -> Vec<String> { r.errors.entries.iter().map(|e| e.line.clone()).collect() };
    assert_eq!(lines(got), lines(want), "{what}");
    assert_eq!(got.requests, want.requests, "{what}");
}

#[test]
fn merging_across_three_splits_keeps_every_written_path_and_error() {
    let conv = real_transcript();
    let msgs = &conv.messages;
    let written: Vec<String> = written_paths(msgs).into_iter().collect();
    let whole = compose(msgs, Vec::new(), 20_000);
    let (one, two) = (
        turn_split(msgs, msgs.len() / 3),
        turn_split(msgs, msgs.len() * 2 / 3),
    );
    let (a, b, c) = (&msgs[..one], &msgs[one..two], &msgs[two..]);
    for with_record in [true, false] {
        let keep = |s: &RetainingSummary| (s.text.clone(), with_record.then(|| s.retained.clone()));
        // A chain, as autocompact builds on its previous summary.
        let s1 = compose(a, Vec::new(), 20_000);
        let s2 = compose(b, vec![keep(&s1)], 20_000);
        let s3 = compose(c, vec![keep(&s2)], 20_000);
        let what = format!("chain, record {with_record}");
        assert_keeps_everything(&s3.text, &whole.retained, &written, &what);
        assert_same_record(&s3.retained, &whole.retained, &what);
        if with_record {
            assert_eq!(s3.retained, whole.retained);
            assert_eq!(s3.text, whole.text);
        }
        // Two earlier summaries side by side (two collapse summaries autocompact builds on).
        let s2 = compose(b, Vec::new(), 20_000);
        let s3 = compose(c, vec![keep(&s1), keep(&s2)], 20_000);
        let what = format!("side by side, record {with_record}");
        assert_keeps_everything(&s3.text, &whole.retained, &written, &what);
        assert_same_record(&s3.retained, &whole.retained, &what);
        if with_record {
            assert_eq!(s3.retained, whole.retained);
        }
    }
}

#[test]
fn shell_and_editor_tools_of_other_agents() {
    let msgs = vec![
        user("u1", "Refactor the parser"),
        call(
            "a1",
            "",
            "c1",
            "str_replace_editor",
            json!({"command": "view", "path": "/workspace/parser.py"}),
        ),
        result("r1", "c1", "def parse(): ...", None),
        call(
            "a2",
            "",
            "c2",
            "str_replace_editor",
            json!({"command": "str_replace", "path": "/workspace/parser.py", "old_str": "a", "new_str": "b"}),
        ),
        result(
            "r2",
            "c2",
            "The file /workspace/parser.py has been edited.",
            None,
        ),
        call(
            "a3",
            "",
            "c3",
            "str_replace_editor",
            json!({"command": "create", "path": "/workspace/test_parser.py", "file_text": "x"}),
        ),
        result("r3", "c3", "File created successfully", None),
        call(
            "a4",
            "",
            "c4",
            "execute_bash",
            json!({"command": "cat > notes.md <<'EOF'\n# notes\ncat secret.txt\nEOF\necho done >> CHANGELOG.md"}),
        ),
        result("r4", "c4", "", None),
        call(
            "a5",
            "",
            "c5",
            "shell",
            json!({"command": ["bash", "-lc", "pytest -q"]}),
        ),
        result(
            "r5",
            "c5",
            "F.\nFAILED test_parser.py::test_parse - AssertionError\n1 failed, 1 passed in 0.1s",
            Some(true),
        ),
    ];
    let s = compose(&msgs, Vec::new(), 2_000).text;
    insta::assert_snapshot!("other_agents_tools", s);
    let files = section(&s, "Files (artifact trail)");
    for line in [
        "- `/workspace/parser.py` — modified (2 ops, last: edit)",
        "- `/workspace/test_parser.py` — created (1 op, last: create)",
        "- `notes.md` — created (1 op, last: write)",
        "- `CHANGELOG.md` — modified (1 op, last: append)",
    ] {
        assert!(files.contains(line), "{line} missing:\n{files}");
    }
    assert!(
        !s.contains("secret.txt"),
        "here-document bodies are not commands"
    );
    assert!(section(&s, "Errors").contains(
        "- shell: `pytest -q` — unresolved (first c5)\n  FAILED test_parser.py::test_parse - AssertionError"
    ));
    assert!(section(&s, "Current state")
        .contains("- Last test run (`c5`): `pytest -q` → 1 failed, 1 passed in 0.1s"));
    assert!(s.contains("Last request (verbatim):\n```\nRefactor the parser\n```"));
}

/// Three spans, each with a todo list update, then a span without one.
fn planned_session() -> [Vec<Message>; 3] {
    let todo = |id: &str, a: &str, b: &str| {
        call(
            id,
            "",
            &format!("t{id}"),
            "TodoWrite",
            json!({"todos": [
                {"content": "Write the lexer", "status": a},
                {"content": "Write the parser", "status": b}
            ]}),
        )
    };
    [
        vec![
            user("u1", "Build the parser."),
            todo("a1", "in_progress", "pending"),
            result("r1", "ta1", "ok", None),
            assistant("a2", "We decided to hand-write the lexer."),
        ],
        vec![
            todo("a3", "completed", "in_progress"),
            result("r3", "ta3", "ok", None),
            assistant("a4", "The lexer is done."),
        ],
        vec![
            call("a5", "", "t5", "Bash", json!({"command": "cargo test"})),
            result("r5", "t5", "test result: ok. 3 passed; 0 failed", None),
            assistant("a6", "Tests pass."),
        ],
    ]
}

#[test]
fn several_earlier_summaries_merge_like_a_chain() {
    let [a, b, c] = planned_session();
    let all: Vec<Message> = [a.clone(), b.clone(), c.clone()].concat();
    let whole = compose(&all, Vec::new(), 2_000);
    assert!(section(&whole.text, PROSE[2]).contains("- [in_progress] Write the parser"));
    let s1 = compose(&a, Vec::new(), 2_000);
    let s2 = compose(&b, Vec::new(), 2_000);
    let earlier = vec![
        (s1.text.clone(), Some(s1.retained)),
        (s2.text.clone(), Some(s2.retained)),
    ];
    let s3 = compose(&c, earlier, 2_000);
    for heading in PROSE {
        assert_eq!(
            section(&s3.text, heading),
            section(&whole.text, heading),
            "{heading}"
        );
    }
}

#[test]
fn summarizing_nothing_onto_a_summary_keeps_it() {
    let [a, b, c] = planned_session();
    let all: Vec<Message> = [a, b, c].concat();
    let s = compose(&all, Vec::new(), 2_000);
    for record in [Some(s.retained.clone()), None] {
        let again = compose(&[], vec![(s.text.clone(), record)], 2_000);
        assert_eq!(again.text, s.text);
    }
}

#[test]
fn summary_messages_in_the_span_are_built_on_not_summarized() {
    let conv = real_transcript();
    let msgs = &conv.messages;
    let split = turn_split(msgs, msgs.len() / 2);
    let (a, b) = msgs.split_at(split);
    let first = compose(a, Vec::new(), 20_000);
    let counter = counter();
    let summarizer = build(&SummarizerConfig::default(), Arc::clone(&counter)).unwrap();
    let span = |messages: &[Message], previous: Option<&str>, known: bool| {
        let request = SummaryRequest {
            messages,
            previous_summary: previous,
            max_tokens: 20_000,
            purpose: "autocompact",
        };
        let record_of = |text: &str| {
            assert_eq!(text, first.text, "asked for the record of the summary text");
            known.then(|| first.retained.clone())
        };
        summarize_span(summarizer.as_ref(), &counter, &request, &record_of).unwrap()
    };
    // As context-collapse writes it.
    let collapsed = format!(
        "[condense: summary of {split} earlier messages (ids a…b)]\n{}",
        first.text
    );
    let with_message: Vec<Message> = std::iter::once(user("s1", &collapsed))
        .chain(b.iter().cloned())
        .collect();
    assert!(is_summary_message(&with_message[0]));
    assert_eq!(summary_body(&with_message[0]), Some(first.text.as_str()));
    for known in [true, false] {
        let expected = compose(
            b,
            vec![(first.text.clone(), known.then(|| first.retained.clone()))],
            20_000,
        );
        let got = span(&with_message, None, known);
        assert_eq!(got.text, expected.text, "summary message, record {known}");
        assert_eq!(got.retained, expected.retained);
        let got = span(b, Some(&first.text), known);
        assert_eq!(got.text, expected.text, "previous_summary, record {known}");
    }
    // With the record, exactly what summarizing the whole gives.
    let whole = compose(msgs, Vec::new(), 20_000);
    assert_eq!(span(&with_message, None, true).text, whole.text);
    // As autocompact writes it; its other messages (a restored file, pinned items) are no
    // summaries.
    let compacted = format!(
        "[condense: conversation compacted — summary of {split} messages]\n{}",
        first.text
    );
    assert_eq!(
        summary_body(&user("c1", &compacted)),
        Some(first.text.as_str())
    );
    for other in [
        "[condense: file restored after compaction — src/a.rs]\nfn a() {}",
        "[condense: pinned — 2 items]\n- keep",
    ] {
        assert!(!is_summary_message(&user("p1", other)), "{other}");
    }
}
