//! When the stage stands down: collapse active, disabled, too soon after the last compaction;
//! and what force:autocompact overrides.

use crate::fixture::{config, conversation, host};
use crate::support::run;
use condense_abi::Signal;
use condense_model::{Conversation, Role};
use condense_testing::{call, has_note, ids, stage, text, MemoryHost};
use serde_json::json;

#[test]
fn an_active_collapse_suppresses_it_unless_forced() {
    let input = conversation();
    let mut h = host().with_signal(Signal::CollapseActive);
    let out = run(&stage(&config()), &input, &mut h);
    assert_eq!(out.conversation, input);
    assert!(out.report.signals.is_empty());
    assert!(h.summary_requests.borrow().is_empty());
    assert_eq!(
        out.report.notes[1],
        "suppressed: context-collapse is active (flag context-collapse:active); compacting now \
         would race it and throw away the granular context its collapses keep \
         (force:autocompact overrides)"
    );
    assert_eq!(h.state_puts.get(), 0, "nothing worth recording");

    let mut h = host().with_signal(Signal::CollapseActive).forced();
    let out = run(&stage(&config()), &input, &mut h);
    assert_eq!(out.report.signals, vec![Signal::Compacted]);
    assert_eq!(
        out.report.notes[1],
        "force:autocompact: compacting despite context-collapse active"
    );
}

#[test]
fn force_fires_below_the_threshold() {
    let mut h = MemoryHost::default().forced(); // 200k window
    let out = run(&stage(&config()), &conversation(), &mut h);
    assert_eq!(out.report.signals, vec![Signal::Compacted]);
    assert!(has_note(
        &out.report,
        "force:autocompact: compacting despite below the threshold"
    ));
}

#[test]
fn disabled_by_config_or_by_the_host_even_when_forced() {
    let input = conversation();
    let mut h = host().forced();
    let out = run(
        &stage(&format!("{}\nenabled = false", config())),
        &input,
        &mut h,
    );
    assert_eq!(out.conversation, input);
    assert_eq!(out.report.notes[1], "disabled by config (enabled = false)");

    let mut h = host().disabled().forced();
    let out = run(&stage(&config()), &input, &mut h);
    assert_eq!(out.conversation, input);
    assert_eq!(
        out.report.notes[1],
        "disabled by the host (flag disable:autocompact, from CONDENSE_DISABLE_AUTOCOMPACT=1)"
    );
    assert!(h.summary_requests.borrow().is_empty());
}

/// The output of one compaction, adopted by the agent, with `turns` more turns after it.
fn adopted_with_turns(output: &Conversation, turns: usize) -> Conversation {
    let mut conv = output.clone();
    // The kept last user message (u3) gets its answer.
    conv.messages
        .push(text("b3", Role::Assistant, "Changelog written."));
    for i in 1..turns {
        conv.messages
            .push(text(&format!("x{i}"), Role::User, &format!("More {i}")));
        conv.messages.push(text(
            &format!("y{i}"),
            Role::Assistant,
            &"answer ".repeat(900),
        ));
    }
    conv
}

#[test]
fn min_turns_between_two_compactions() {
    let stage = stage(&config());
    let mut h = host();
    let first = run(&stage, &conversation(), &mut h);
    assert_eq!(first.report.signals, vec![Signal::Compacted]);

    // One turn (the kept u3 answered) since: too soon, even over the threshold.
    let one = adopted_with_turns(&first.conversation, 1);
    h.run.conversation_tokens = 5_000;
    let out = condense_testing::run(&stage, &one, &h);
    assert!(out.report.signals.is_empty());
    assert_eq!(
        out.report.notes[1],
        "compacted 1 turn ago (autocompact-1); min_turns_between = 2: not compacting again yet"
    );

    // Two turns since: compacts again, merging into the first summary.
    let two = adopted_with_turns(&first.conversation, 2);
    let out = run(&stage, &two, &mut h);
    assert_eq!(out.report.signals, vec![Signal::Compacted]);
    let request = h.summary_requests.borrow().last().cloned().unwrap();
    let first_summary = first.conversation.messages[1].content.text();
    assert_eq!(
        request.previous_summary.as_deref(),
        Some(first_summary.split_once('\n').unwrap().1)
    );
    assert!(request
        .messages
        .iter()
        .all(|m| !m.id.starts_with("autocompact-1")));
    assert_eq!(ids(&out.conversation)[1], "autocompact-2");
    assert!(out.conversation.messages[1]
        .content
        .text()
        .starts_with("[condense: conversation compacted — summary of 28 messages]\n"));
    // Restored files and pins of the first compaction survive the second.
    let text: Vec<String> = out
        .conversation
        .messages
        .iter()
        .map(|m| m.content.text())
        .collect();
    assert!(text.iter().any(|t| t.starts_with(
        "[condense: file restored after compaction — src/parser.rs]\n(restored in message autocompact-1-file-"
    )));
    assert!(text.iter().any(|t| t.starts_with(
        "[condense: pinned — regex IMPORTANT:.* — IMPORTANT: never touch src/generated.rs]\n(from message u1)"
    )));
    assert_eq!(h.state_json()["compactions"], 2);

    // Forced, the minimum does not hold (one turn since: the assistant's answer after the
    // restored items, no user prompt).
    let mut forced = host().forced();
    *forced.state.borrow_mut() = h.state.borrow().clone();
    let again = adopted_with_turns(&out.conversation, 1);
    let out = run(&stage, &again, &mut forced);
    assert_eq!(out.report.signals, vec![Signal::Compacted]);
    assert!(
        has_note(&out.report, "min_turns_between (1 since the last)"),
        "{:?}",
        out.report.notes
    );
}

#[test]
fn the_model_calls_of_an_autonomous_stretch_count_as_turns() {
    let stage = stage(&config());
    let mut h = host();
    let first = run(&stage, &conversation(), &mut h);
    assert_eq!(first.report.signals, vec![Signal::Compacted]);
    // The agent answers the kept u3 with a call: one turn (u3, the call, its result), and no
    // user prompt after it.
    let mut conv = first.conversation.clone();
    let output = "test result: ok\n".repeat(300);
    conv.messages.extend(call(
        "90",
        "Bash",
        json!({"command": "cargo test"}),
        &output,
    ));
    h.run.conversation_tokens = 5_000;
    let out = condense_testing::run(&stage, &conv, &h);
    assert!(out.report.signals.is_empty());
    assert!(
        has_note(&out.report, "compacted 1 turn ago (autocompact-1)"),
        "{:?}",
        out.report.notes
    );
    // The next call of the same stretch is the second turn since: it compacts again.
    conv.messages.extend(call(
        "91",
        "Bash",
        json!({"command": "cargo clippy"}),
        &output,
    ));
    let out = condense_testing::run(&stage, &conv, &h);
    assert_eq!(
        out.report.signals,
        vec![Signal::Compacted],
        "{:?}",
        out.report.notes
    );
}

#[test]
fn an_agent_that_keeps_its_full_history_waits_for_new_turns_too() {
    let stage = stage(&config());
    let mut h = host();
    run(&stage, &conversation(), &mut h);
    // The same full history again: no new turn since.
    let out = run(&stage, &conversation(), &mut h);
    assert!(out.report.signals.is_empty());
    assert!(has_note(
        &out.report,
        "compacted 0 turns ago (autocompact-1)"
    ));
    // Two more turns in the full history: it compacts again.
    let mut longer = conversation();
    for i in 0..2 {
        longer
            .messages
            .push(text(&format!("z{i}"), Role::Assistant, "ok"));
        longer
            .messages
            .push(text(&format!("w{i}"), Role::User, "next"));
    }
    let out = run(&stage, &longer, &mut h);
    assert_eq!(out.report.signals, vec![Signal::Compacted]);
}
