//! The time-based path on the hand-made fixture: the cache is cold, results are cleared.

use crate::support::{
    call_of, fixture, host_after, last_assistant_ms, result_of, without_timestamps, MINUTE,
};
use condense_model::render::render;
use condense_model::ContentShape;
use condense_testing::{report_json, run, stage, MemoryHost};
use microcompact::{cleared_marker, Microcompact, CLEARED_MARKER};

const OLD: [&str; 4] = ["t1", "t2", "t4", "t5"];
const KEPT: [&str; 3] = ["t6", "t7", "t8"];

/// The marker an old result is cleared to: `t2` is a failed `cargo test` (flagged
/// `is_error`), whose first meaningful line stays in its marker.
fn marker(id: &str) -> String {
    if id == "t2" {
        cleared_marker(Some(
            "cargo test line 001: some output that the model read a while ago",
        ))
    } else {
        CLEARED_MARKER.to_string()
    }
}

#[test]
fn gap_over_an_hour_clears_all_but_the_three_most_recent() {
    let input = fixture();
    let host = host_after(95);
    let out = run(&stage::<Microcompact>(""), &input, &host);
    insta::assert_snapshot!("time_path_output", render(&out.conversation));
    insta::assert_json_snapshot!("time_path_report", report_json(&out.report));

    let conv = &out.conversation;
    for id in OLD {
        assert_eq!(result_of(conv, id).content.text(), marker(id), "{id}");
    }
    for id in KEPT {
        assert_eq!(result_of(conv, id), result_of(&input, id), "{id} is recent");
    }
    // Not compressible (TodoWrite), and smaller than the marker (ls): untouched.
    assert_eq!(result_of(conv, "t3"), result_of(&input, "t3"));
    assert_eq!(result_of(conv, "t0"), result_of(&input, "t0"));
    // Shape and is_error stay; inputs stay without clear_tool_inputs.
    assert_eq!(result_of(conv, "t2").content.shape, ContentShape::String);
    assert_eq!(result_of(conv, "t2").is_error, Some(true));
    assert_eq!(result_of(conv, "t1").content.shape, ContentShape::Array);
    assert_eq!(call_of(conv, "t5"), call_of(&input, "t5"));
    assert_eq!(out.report.blocks_changed, 4);
    assert_eq!(
        out.report.notes[0],
        "gap 1 h 35 min > 60 min: cleared 4 old results, kept 3 most recent (1,445 tokens freed); \
         1 no bigger than the marker left as is"
    );
    // Everything but tool results is as it was.
    assert_eq!(conv.extra, input.extra);
    assert_eq!(conv.system, input.system);
}

#[test]
fn clear_tool_inputs_also_clears_large_inputs_of_cleared_calls() {
    let input = fixture();
    let host = host_after(95);
    let out = run(
        &stage::<Microcompact>("clear_tool_inputs = true"),
        &input,
        &host,
    );
    insta::assert_snapshot!("time_path_inputs_output", render(&out.conversation));
    insta::assert_json_snapshot!("time_path_inputs_report", report_json(&out.report));

    let write = call_of(&out.conversation, "t5");
    let original_chars = call_of(&input, "t5").input.as_str().chars().count();
    assert!(original_chars > 1_000);
    assert_eq!(
        write.input.to_value().unwrap(),
        serde_json::json!({"cleared": true, "original_chars": original_chars})
    );
    // Small inputs (Read's path) stay; recent calls stay whatever their size.
    assert_eq!(call_of(&out.conversation, "t1"), call_of(&input, "t1"));
    assert_eq!(out.report.blocks_changed, 5);
}

#[test]
fn excluded_tools_are_never_cleared() {
    let input = fixture();
    let out = run(
        &stage::<Microcompact>("exclude_tools = [\"WebFetch\"]"),
        &input,
        &host_after(95),
    );
    assert_eq!(result_of(&out.conversation, "t4"), result_of(&input, "t4"));
    for id in ["t1", "t2", "t5"] {
        assert_eq!(result_of(&out.conversation, id).content.text(), marker(id));
    }
    assert_eq!(out.report.blocks_changed, 3);
    insta::assert_json_snapshot!("time_path_excluded_report", report_json(&out.report));
}

#[test]
fn tools_match_by_exact_name() {
    let input = fixture();
    // Only `read` (lower case) is compressible: no result is Read's, nothing is cleared.
    let out = run(
        &stage::<Microcompact>("compressible_tools = [\"read\"]"),
        &input,
        &host_after(95),
    );
    assert_eq!(out.conversation, input);
    // Only Read: t1 is older than the keep window (t1, t7 are the Read results; keep 1).
    let out = run(
        &stage::<Microcompact>("compressible_tools = [\"Read\"]\nkeep_recent = 1"),
        &input,
        &host_after(95),
    );
    assert_eq!(out.report.blocks_changed, 1);
    assert_eq!(
        result_of(&out.conversation, "t1").content.text(),
        CLEARED_MARKER
    );
}

#[test]
fn gap_exactly_at_the_threshold_does_not_clear() {
    let input = fixture();
    let out = run(&stage::<Microcompact>(""), &input, &host_after(60));
    assert_eq!(out.conversation, input);
    let host = MemoryHost::default().with_now_ms(last_assistant_ms() + 60 * MINUTE + 1);
    let out = run(&stage::<Microcompact>(""), &input, &host);
    assert_eq!(out.report.blocks_changed, 4);
}

#[test]
fn rerun_on_its_output_changes_nothing() {
    let input = fixture();
    let stage = stage::<Microcompact>("clear_tool_inputs = true");
    let host = host_after(95);
    let once = run(&stage, &input, &host);
    let twice = run(&stage, &once.conversation, &host);
    assert_eq!(twice.conversation, once.conversation);
    assert_eq!(twice.report.blocks_changed, 0);
    assert_eq!(twice.report.tokens_freed, Some(0));
    assert_eq!(
        twice.report.notes[0],
        "gap 1 h 35 min > 60 min: cleared 0 old results, kept 3 most recent (0 tokens freed); \
         4 already cleared; 1 input already cleared; 1 no bigger than the marker left as is"
    );
}

#[test]
fn without_timestamps_the_previous_run_gives_the_gap() {
    let input = without_timestamps(fixture());
    let stage = stage::<Microcompact>("");
    let host = host_after(0);
    let first = run(&stage, &input, &host);
    assert_eq!(
        first.conversation, input,
        "no timestamps, no earlier run: gap unknown"
    );
    assert!(first.report.notes[0].starts_with("gap unknown and clearable tokens"));
    assert_eq!(
        first.report.notes.last().unwrap(),
        "gap unknown: no timestamp on the last assistant message and no previous run; \
         8 compressible results (3 kept as most recent), 0 excluded, 1 of other tools"
    );
    let state = host.state_json();
    assert_eq!(
        state["last_seen_ms"],
        serde_json::json!(last_assistant_ms())
    );
    assert_eq!(state["messages_seen"], serde_json::json!(20));

    // 90 minutes later, on the same conversation.
    let later = host_after(90);
    later.state.replace(host.state.borrow().clone());
    let second = run(&stage, &input, &later);
    assert_eq!(second.report.blocks_changed, 4);
    assert!(second.report.notes.last().unwrap().starts_with(
        "gap 1 h 30 min: no timestamp on the last assistant message; time since the previous run"
    ));

    // Shorter, but still ending with the last message the previous run saw, as a run resumed
    // from the previous output is once a later stage collapsed its history: the gap is known.
    let last = input.messages.last().unwrap().id.clone();
    assert_eq!(later.state_json()["last_seen_id"], serde_json::json!(last));
    let mut collapsed = input.clone();
    collapsed.messages.drain(1..11);
    let resumed = host_after(180);
    resumed.state.replace(later.state.borrow().clone());
    let resumed_run = run(&stage, &collapsed, &resumed);
    assert!(
        resumed_run.report.notes.last().unwrap().starts_with(
            "gap 1 h 30 min: no timestamp on the last assistant message; time since the \
             previous run"
        ),
        "{:?}",
        resumed_run.report.notes
    );

    // A shorter conversation without that message: the gap is unknown again.
    let mut shorter = input.clone();
    shorter.messages.truncate(10);
    let again = host_after(500);
    again.state.replace(later.state.borrow().clone());
    let third = run(&stage, &shorter, &again);
    assert_eq!(third.conversation, shorter);
    assert!(
        third.report.notes.last().unwrap().contains(&format!(
            "the previous run saw a longer conversation (20 messages, now 10, without its \
             last message {last})"
        )),
        "{:?}",
        third.report.notes
    );
}

#[test]
fn non_compressible_tools_are_kept() {
    let input = fixture();
    let out = run(
        &stage::<Microcompact>("keep_recent = 1"),
        &input,
        &host_after(95),
    );
    // TodoWrite is not compressible: its result stays even far outside the keep window.
    assert_eq!(result_of(&out.conversation, "t3"), result_of(&input, "t3"));
    assert_eq!(
        result_of(&out.conversation, "t7").content.text(),
        CLEARED_MARKER
    );
    assert_eq!(result_of(&out.conversation, "t8"), result_of(&input, "t8"));
    assert_eq!(out.report.blocks_changed, 6);
}

#[test]
fn the_recovery_chain_can_force_the_time_path_on_a_hot_cache() {
    let input = fixture();
    // Two minutes after the last assistant message: hot, nothing would be cleared.
    assert_eq!(
        run(&stage::<Microcompact>(""), &input, &host_after(2)).conversation,
        input
    );
    let forced = MemoryHost::default()
        .with_now_ms(last_assistant_ms() + 2 * MINUTE)
        .forced();
    let out = run(&stage::<Microcompact>(""), &input, &forced);
    assert_eq!(
        out.report.blocks_changed,
        OLD.len(),
        "the old results are cleared"
    );
    assert!(out
        .report
        .notes
        .iter()
        .any(|n| n.contains("forced by the recovery chain")));
}
