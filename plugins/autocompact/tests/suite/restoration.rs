//! What a compaction gives back: the 5 most recently read files (latest content, cut at 5,000
//! tokens), pinned content within its budgets, and the unanswered last user message; nothing
//! orphaned.

use crate::fixture::lines;
use crate::support::run;
use condense_model::{Block, Content, Conversation, Message, Role};
use condense_testing::{
    assert_no_orphans, assert_unique_ids, call, ids, stage, text, tool_result, tool_use, MemoryHost,
};
use serde_json::json;

fn forced() -> MemoryHost {
    MemoryHost::default().forced()
}

fn texts_starting(conv: &Conversation, prefix: &str) -> Vec<String> {
    conv.messages
        .iter()
        .map(|m| m.content.text())
        .filter(|t| t.starts_with(prefix))
        .collect()
}

/// Seven files read; `f3.rs` twice (the second read wins); `big.rs` over 5,000 tokens.
fn seven_files() -> Conversation {
    let mut m = vec![text("u0", Role::User, "Read everything.")];
    for (i, name) in ["f1", "f2", "f3", "f4", "f5"].iter().enumerate() {
        m.extend(call(
            &format!("{i}"),
            "Read",
            json!({"file_path": format!("src/{name}.rs")}),
            &format!("{name} first version"),
        ));
    }
    m.extend(call(
        "5",
        "Read",
        json!({"file_path": "src/big.rs"}),
        &lines("big", 400),
    ));
    m.extend(call(
        "6",
        "Read",
        json!({"file_path": "src/f3.rs"}),
        "f3 second version",
    ));
    m.extend(call(
        "7",
        "read_file",
        json!({"path": "src/f6.rs"}),
        "f6 via read_file",
    ));
    m.push(text("b7", Role::Assistant, "Read them all."));
    Conversation {
        messages: m,
        ..Conversation::default()
    }
}

#[test]
fn the_five_most_recent_files_with_their_latest_content() {
    let mut h = forced();
    let out = run(&stage(""), &seven_files(), &mut h);
    let restored = texts_starting(&out.conversation, "[condense: file restored");
    let heads: Vec<&str> = restored.iter().map(|t| t.lines().next().unwrap()).collect();
    // Most recent last: f6 (read last), f3 (re-read), big, f5, f4; f1 and f2 are older.
    assert_eq!(
        heads,
        [
            "[condense: file restored after compaction — src/f4.rs]",
            "[condense: file restored after compaction — src/f5.rs]",
            "[condense: file restored after compaction — src/big.rs]",
            "[condense: file restored after compaction — src/f3.rs]",
            "[condense: file restored after compaction — src/f6.rs]",
        ]
    );
    assert!(restored[3].ends_with("\n(read in message r6)\nf3 second version"));
    // big.rs: 400 lines of ~65 chars = about 6,500 tokens, cut at 5,000 on a line end.
    let big = &restored[2];
    assert!(
        big.contains("\n(read in message r5; cut to 5,000 of 6,"),
        "{}",
        &big[..200]
    );
    let body = big.splitn(3, '\n').nth(2).unwrap();
    assert!(body.len().div_ceil(4) <= 5_000);
    assert!(body.len().div_ceil(4) > 4_900);
    assert!(lines("big", 400).starts_with(body));
    assert!(body.ends_with("adipiscing"));
    // Plain text, never tool results: nothing can be orphaned.
    assert!(out
        .conversation
        .messages
        .iter()
        .all(|m| m.tool_results().next().is_none() && m.tool_uses().next().is_none()));
    assert_no_orphans(&out.conversation);
    assert_unique_ids(&out.conversation);
}

#[test]
fn restore_files_and_its_limit_are_configurable() {
    let mut h = forced();
    let out = run(
        &stage("restore_files = 2\nrestore_file_max_tokens = 3"),
        &seven_files(),
        &mut h,
    );
    let restored = texts_starting(&out.conversation, "[condense: file restored");
    assert_eq!(restored.len(), 2);
    assert_eq!(
        restored[1],
        "[condense: file restored after compaction — src/f6.rs]\n(read in message r7; cut to 3 \
         of 4 tokens)\nf6 via read_"
    );
    let mut h = forced();
    let out = run(&stage("restore_files = 0"), &seven_files(), &mut h);
    assert!(texts_starting(&out.conversation, "[condense: file restored").is_empty());
}

#[test]
fn pins_by_tool_and_by_regex_within_their_budgets() {
    let mut m = vec![text(
        "u0",
        Role::User,
        "IMPORTANT: use tabs\nand IMPORTANT: no unsafe code",
    )];
    m.extend(call("1", "TodoWrite", json!({"todos": ["a"]}), "ok"));
    m.extend(call(
        "2",
        "Bash",
        json!({"command": "make"}),
        &format!("IMPORTANT: {}", "x".repeat(400)),
    ));
    m.extend(call("3", "TodoWrite", json!({"todos": ["a", "b"]}), "ok"));
    m.extend(call(
        "4",
        "Bash",
        json!({"command": "make test"}),
        &lines("test", 100),
    ));
    m.push(text(
        "b3",
        Role::Assistant,
        "done IMPORTANT: not a user text, not pinned",
    ));
    let conv = Conversation {
        messages: m,
        ..Conversation::default()
    };
    let config = r#"pin = [{ tool = "TodoWrite" }, { regex = 'IMPORTANT:[^\n]*' }]"#;
    let mut h = forced();
    let out = run(&stage(config), &conv, &mut h);
    let pins = texts_starting(&out.conversation, "[condense: pinned");
    assert_eq!(
        pins,
        [
            "[condense: pinned — regex IMPORTANT:[^\\n]* — IMPORTANT: use tabs]\n(from message u0)\nIMPORTANT: use tabs",
            "[condense: pinned — regex IMPORTANT:[^\\n]* — IMPORTANT: no unsafe code]\n(from message u0)\nIMPORTANT: no unsafe code",
            &format!("[condense: pinned — regex IMPORTANT:[^\\n]* — IMPORTANT: {}…]\n(from message r2)\nIMPORTANT: {}", "x".repeat(69), "x".repeat(400)),
            "[condense: pinned — tool TodoWrite]\n(from message r3)\ninput: {\"todos\":[\"a\",\"b\"]}\nresult: ok",
        ]
    );
    // Each item cut to pin_max_tokens; all of them within pin_budget_tokens, newest first.
    let mut h = forced();
    let tight = format!("{config}\npin_max_tokens = 20\npin_budget_tokens = 35");
    let out = run(&stage(&tight), &conv, &mut h);
    let pins = texts_starting(&out.conversation, "[condense: pinned");
    // Newest first: the todo list (10 tokens), the long line cut to 20, then "no unsafe code"
    // (7) does not fit the 5 left, "use tabs" (5) does.
    assert_eq!(pins.len(), 3, "{pins:#?}");
    assert!(pins[0].ends_with("(from message u0)\nIMPORTANT: use tabs"));
    assert!(pins[1].contains("(from message r2; cut to 20 of 103 tokens)\nIMPORTANT: xxxx"));
    assert!(pins[2].starts_with("[condense: pinned — tool TodoWrite]"));
    let spent: usize = pins
        .iter()
        .map(|p| p.splitn(3, '\n').nth(2).unwrap().len().div_ceil(4))
        .sum();
    assert_eq!(spent, 35);
}

#[test]
fn the_unanswered_last_user_message_is_kept_with_its_id() {
    let mut m = vec![text("u0", Role::User, "Start.")];
    m.extend(call("1", "Bash", json!({"command": "ls"}), "a\nb"));
    m.push(text("b1", Role::Assistant, "Listed."));
    m.push(Message {
        timestamp: Some("2025-01-01T00:00:00Z".into()),
        ..text("u1", Role::User, "What next?")
    });
    let conv = Conversation {
        messages: m.clone(),
        ..Conversation::default()
    };
    let mut h = forced();
    let out = run(&stage(""), &conv, &mut h);
    assert_eq!(out.conversation.messages.last(), conv.messages.last());
    assert!(h.summary_requests.borrow()[0]
        .messages
        .iter()
        .all(|m| m.id != "u1"));

    // Answered: summarized like the rest, not kept.
    m.push(text("b2", Role::Assistant, "Nothing."));
    let answered = Conversation {
        messages: m,
        ..Conversation::default()
    };
    let mut h = forced();
    let out = run(&stage(""), &answered, &mut h);
    assert_eq!(ids(&out.conversation), ["autocompact-1"]);
}

#[test]
fn a_kept_message_carrying_tool_results_has_them_as_text() {
    // A user message answering a call and asking something, not answered yet.
    let mut m = vec![text("u0", Role::User, "Start.")];
    m.extend(call(
        "0",
        "Bash",
        json!({"command": "make"}),
        &lines("make", 50),
    ));
    m.push(Message::new(
        "a1",
        Role::Assistant,
        vec![tool_use("t1", "Bash", json!({"command": "ls"}))],
    ));
    m.push(Message::new(
        "u1",
        Role::User,
        vec![
            tool_result("t1", Content::string("a\nb"), None),
            Block::text("Also, why?"),
        ],
    ));
    let conv = Conversation {
        messages: m,
        ..Conversation::default()
    };
    let mut h = forced();
    let out = run(&stage(""), &conv, &mut h);
    let kept = out.conversation.messages.last().unwrap();
    assert_eq!(kept.id, "u1");
    assert_eq!(
        kept.content.text(),
        "[tool result for t1]\na\nb\nAlso, why?"
    );
    assert_no_orphans(&out.conversation);
}

#[test]
fn system_messages_stay_at_the_head_and_the_system_prompt_is_untouched() {
    let mut conv = seven_files();
    conv.system = Some(condense_model::Content::string("top-level system prompt"));
    conv.messages.insert(0, text("s0", Role::System, "first"));
    conv.messages
        .insert(5, text("s1", Role::System, "mid-conversation instruction"));
    let mut h = forced();
    let out = run(&stage(""), &conv, &mut h);
    assert_eq!(out.conversation.system, conv.system);
    assert_eq!(ids(&out.conversation)[..3], ["s0", "s1", "autocompact-1"]);
}
