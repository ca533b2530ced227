//! `Retained` as a whole: derivation from messages and the merge-equals-fold property.

use super::*;
use crate::testing::*;
use condense_model::{Message, RawJson, Role};
use serde_json::json;

fn with_envelope(mut m: Message, envelope: &str) -> Message {
    m.envelope = RawJson::from_string_unchecked(envelope.into());
    m
}

#[test]
fn derives_all_three_records() {
    let side = r#"{"isSidechain":true}"#;
    let messages = vec![
        user("u1", "Build the TODO app"),
        with_envelope(user("u2", "expanded slash command prompt"), r#"{"isMeta":true}"#),
        // A sub-agent's prompt is not a request, but its writes are the session's writes.
        with_envelope(user("u3", "sub-agent task"), side),
        with_envelope(
            assistant(
                "a1",
                vec![
                    call("t1", "Write", json!({"file_path": "/p/types/todo.ts"})),
                    call("t2", "Write", json!({"file_path": "/p/types/nope.ts"})),
                    call("t3", "Bash", json!({"command": "cd /p && mkdir -p src && rm -f old.txt; false"})),
                ],
            ),
            side,
        ),
        with_envelope(
            results(
                "r1",
                vec![
                    result("t1", "File created", None),
                    result("t2", "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>", Some(true)),
                    result("t3", "rm: cannot remove 'old.txt': Permission denied", Some(true)),
                ],
            ),
            side,
        ),
        user("u4", "Build the TODO app"),
        assistant("a2", vec![call("t4", "Write", json!({"file_path": "/p/types/nope.ts"}))]),
        results("r2", vec![result("t4", "ok", None)]),
        user("u5", "[Request interrupted by user]"),
        user("u6", "Now add tests"),
    ];
    let r = Retained::from_messages(&messages);

    let paths: Vec<(&str, FileStatus)> = r
        .artifacts
        .entries()
        .map(|a| (a.path.as_str(), a.status))
        .collect();
    assert_eq!(
        paths,
        vec![
            ("/p/types/todo.ts", FileStatus::Created),
            // The failed shell command still counts: it may have done part of its work.
            ("/p/src", FileStatus::Created),
            ("/p/old.txt", FileStatus::Deleted),
            // The failed Write wrote nothing; the later one created it.
            ("/p/types/nope.ts", FileStatus::Created),
        ]
    );
    assert_eq!(r.artifacts.get("/p/types/nope.ts").map(|a| a.ops), Some(1));

    let lines: Vec<(&str, &str, Option<&str>)> = r
        .errors
        .entries
        .iter()
        .map(|e| (e.line.as_str(), e.about.as_str(), e.resolved_by.as_deref()))
        .collect();
    assert_eq!(
        lines,
        vec![
            (
                "File has not been read yet. Read it first before writing to it.",
                "/p/types/nope.ts",
                Some("t4")
            ),
            (
                "rm: cannot remove 'old.txt': Permission denied",
                "cd /p && mkdir -p src && rm -f old.txt; false",
                None
            ),
        ]
    );
    assert_eq!(r.requests, ["Build the TODO app", "Now add tests"]);
    assert!(!r.is_empty());
    assert_eq!(r.last_request(), Some("Now add tests"));
}

/// A sub-agent's line as the Claude Code reader keeps it: an event (not context) with its
/// content, the whole line as its envelope.
fn sidechain_event(mut m: Message, sidechain: bool) -> Message {
    m.role = Role::Event;
    m.envelope = RawJson::from_value(&json!({
        "type": "user", "isSidechain": sidechain, "message": {"role": "user", "content": "…"}
    }));
    m
}

#[test]
fn a_sub_agents_event_lines_count_for_artifacts_and_errors_not_requests() {
    let messages = vec![
        user("u1", "Build the TODO app"),
        assistant(
            "a1",
            vec![call("task", "Task", json!({"prompt": "write the types"}))],
        ),
        sidechain_event(user("s1", "write the types"), true),
        sidechain_event(
            assistant(
                "s2",
                vec![
                    call("t1", "Write", json!({"file_path": "/p/types/todo.ts"})),
                    call("t2", "Bash", json!({"command": "ls types/"})),
                ],
            ),
            true,
        ),
        sidechain_event(
            results(
                "s3",
                vec![
                    result("t1", "File created", None),
                    result(
                        "t2",
                        "ls: cannot access 'types/': No such file or directory",
                        Some(true),
                    ),
                ],
            ),
            true,
        ),
        // An abandoned branch (not a sub-agent's): carried, but not the session's work.
        sidechain_event(
            assistant(
                "x1",
                vec![call("t3", "Write", json!({"file_path": "/p/abandoned.ts"}))],
            ),
            false,
        ),
        results("r1", vec![result("task", "Done: types written", None)]),
    ];
    let r = Retained::from_messages(&messages);
    let paths: Vec<&str> = r.artifacts.entries().map(|a| a.path.as_str()).collect();
    assert_eq!(paths, ["/p/types/todo.ts"]);
    assert_eq!(
        r.artifacts.get("/p/types/todo.ts").map(|a| a.status),
        Some(FileStatus::Created)
    );
    let errors: Vec<&str> = r.errors.entries.iter().map(|e| e.line.as_str()).collect();
    assert_eq!(
        errors,
        ["ls: cannot access 'types/': No such file or directory"]
    );
    assert_eq!(r.errors.entries[0].tool, "Bash");
    assert_eq!(r.requests, ["Build the TODO app"]);
    assert!(is_sidechain_work(&messages[3]) && !is_sidechain_work(&messages[5]));
    // A sidechain event without content (nothing parsed) is not work either.
    assert!(!is_sidechain_work(&sidechain_event(
        Message::new("e", Role::Event, vec![]),
        true
    )));
}

#[test]
fn consecutive_duplicate_requests_once() {
    let r = Retained::from_messages(&[
        user("a", "go"),
        user("b", "go"),
        user("c", "stop"),
        user("d", "go"),
    ]);
    assert_eq!(r.requests, ["go", "stop", "go"]);
    let mut first = Retained::from_messages(&[user("a", "go")]);
    first.merge_later(Retained::from_messages(&[
        user("b", "go"),
        user("c", "stop"),
    ]));
    assert_eq!(first.requests, ["go", "stop"]);
}

#[test]
fn openhands_events() {
    // The reader's shape: a tool call per assistant message, the observation as a Tool message
    // whose envelope carries the exit code.
    let run = |id: &str, cmd: &str| {
        assistant(
            id,
            vec![call(
                id,
                "execute_bash",
                json!({"command": cmd, "is_input": false}),
            )],
        )
    };
    let obs = |id: &str, text: &str, code: i64| {
        let mut m = Message::new(format!("o{id}"), Role::Tool, vec![result(id, text, None)]);
        m.envelope = RawJson::from_string_unchecked(format!(
            r#"{{"observation":"run","content":null,"extras":{{"metadata":{{"exit_code":{code}}}}}}}"#
        ));
        m
    };
    let messages = vec![
        run("c1", "make build"),
        obs("c1", "make: *** [Makefile:192: build] Error 2", 2),
        assistant(
            "c2",
            vec![call(
                "c2",
                "str_replace_editor",
                json!({"command": "str_replace", "path": "/w/Makefile", "old_str": "a", "new_str": "b"}),
            )],
        ),
        Message::new(
            "oc2",
            Role::Tool,
            vec![result("c2", "The file /w/Makefile has been edited.", None)],
        ),
        run("c3", "make build"),
        obs("c3", "ok", 0),
    ];
    let r = Retained::from_messages(&messages);
    assert_eq!(r.errors.entries.len(), 1);
    assert_eq!(r.errors.entries[0].resolved_by.as_deref(), Some("c3"));
    assert_eq!(
        r.artifacts.get("/w/Makefile").map(|a| a.status),
        Some(FileStatus::Modified)
    );
}

#[test]
fn orphan_results_and_unknown_tools() {
    let messages = vec![
        results(
            "r0",
            vec![result("gone", "fatal: not a git repository", Some(true))],
        ),
        assistant(
            "a1",
            vec![call("t1", "WebFetch", json!({"url": "https://x.test"}))],
        ),
        results(
            "r1",
            vec![result(
                "t1",
                "Request failed with status code 404",
                Some(true),
            )],
        ),
        assistant(
            "a2",
            vec![call("t2", "WebFetch", json!({"url": "https://x.test"}))],
        ),
        results("r2", vec![result("t2", "<html>", None)]),
    ];
    let r = Retained::from_messages(&messages);
    let e = &r.errors.entries;
    assert_eq!(
        (
            e[0].tool.as_str(),
            e[0].key.as_str(),
            e[0].resolved_by.as_deref()
        ),
        ("", "", None)
    );
    assert_eq!(
        (e[1].tool.as_str(), e[1].about.as_str()),
        ("WebFetch", "https://x.test")
    );
    assert_eq!(e[1].resolved_by.as_deref(), Some("t2"));
}

#[test]
fn merging_equals_folding_on_generated_sessions() {
    for seed in 0..200 {
        let rounds = session(seed, 12);
        let all: Vec<Message> = rounds.iter().flatten().cloned().collect();
        let whole = Retained::from_messages(&all);
        // Every two-way split between rounds, and a three-way one.
        for split in 0..=rounds.len() {
            let (a, b) = rounds.split_at(split);
            let a: Vec<Message> = a.iter().flatten().cloned().collect();
            let b: Vec<Message> = b.iter().flatten().cloned().collect();
            let mut merged = Retained::from_messages(&a);
            merged.merge_later(Retained::from_messages(&b));
            assert_eq!(merged, whole, "seed {seed} split {split}");
        }
        let mut merged = Retained::default();
        for round in &rounds {
            merged.merge_later(Retained::from_messages(round));
        }
        assert_eq!(merged, whole, "seed {seed} round by round");
    }
}

#[test]
fn serde_round_trip() {
    let rounds = session(7, 20);
    let all: Vec<Message> = rounds.into_iter().flatten().collect();
    let r = Retained::from_messages(&all);
    let text = serde_json::to_string(&r).unwrap();
    let back: Retained = serde_json::from_str(&text).unwrap();
    assert_eq!(back, r);
    assert!(Retained::default().is_empty());
}

#[test]
fn an_undoable_merge_gives_the_earlier_record_back() {
    for seed in 0..200 {
        let rounds = session(seed, 12);
        let mut running = Retained::default();
        for (n, round) in rounds.iter().enumerate() {
            let before = running.clone();
            let undo = running.merge_later_undoable(Retained::from_messages(round));
            let after = running.clone();
            // Undone on a copy: the record before the merge, which merges on as it did.
            let mut back = running.clone();
            back.undo(undo);
            assert_eq!(back, before, "seed {seed} round {n}");
            back.merge_later(Retained::from_messages(round));
            assert_eq!(back, after, "seed {seed} round {n} merged again");
        }
        let all: Vec<Message> = rounds.iter().flatten().cloned().collect();
        assert_eq!(running, Retained::from_messages(&all), "seed {seed}");
    }
}

#[test]
fn a_record_read_back_from_json_merges_like_the_original() {
    for seed in 0..50 {
        let rounds = session(seed, 10);
        let (a, b) = rounds.split_at(5);
        let a: Vec<Message> = a.iter().flatten().cloned().collect();
        let b: Vec<Message> = b.iter().flatten().cloned().collect();
        let first = Retained::from_messages(&a);
        let mut back: Retained =
            serde_json::from_str(&serde_json::to_string(&first).unwrap()).unwrap();
        back.merge_later(Retained::from_messages(&b));
        let all: Vec<Message> = rounds.iter().flatten().cloned().collect();
        assert_eq!(back, Retained::from_messages(&all), "seed {seed}");
    }
}
