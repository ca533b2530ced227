//! The projection across runs: re-applied identically, on the same input, with turns appended,
//! on its own output (with and without state); dropped when its messages are gone; forced;
//! blocking; summarizer failures; never larger; a backlog folded in larger spans.

use crate::fixture::{conversation, host, plain_turn};
use crate::support::{run, tokens};
use condense_abi::Signal;
use condense_model::{Conversation, Role};
use condense_testing::{
    apply, assert_no_orphans, assert_unique_ids, has_note, ids, report_json, stage, text,
    MemoryHost,
};
use context_collapse::ContextCollapse;
use serde_json::Value;

#[test]
fn the_same_input_gives_the_same_output_and_leaves_the_state_alone() {
    let mut h = host();
    let stage = stage("");
    let first = run(&stage, &conversation(), &mut h);
    let (state, puts, requests) = (
        h.state.borrow().clone(),
        h.state_puts.get(),
        h.summary_requests.borrow().len(),
    );
    let second = run(&stage, &conversation(), &mut h);
    assert_eq!(second.conversation, first.conversation);
    assert_eq!(*h.state.borrow(), state);
    assert_eq!(h.state_puts.get(), puts, "state not rewritten");
    assert_eq!(
        h.summary_requests.borrow().len(),
        requests,
        "no new summary"
    );
    assert_eq!(second.report.tokens_freed, first.report.tokens_freed);
    assert_eq!(second.report.signals, vec![Signal::CollapseActive]);
    insta::assert_json_snapshot!("rerun_report", report_json(&second.report));
}

#[test]
fn appended_turns_keep_the_committed_view() {
    let mut h = host();
    let stage = stage("");
    let first = run(&stage, &conversation(), &mut h);
    let mut longer = conversation();
    longer
        .messages
        .push(text("b10", Role::Assistant, "Changed modules 1 to 9."));
    longer.messages.push(text("u11", Role::User, "Thanks."));
    let second = run(&stage, &longer, &mut h);
    // The projection up to the end of the first output is unchanged (a stable prompt prefix).
    let n = first.conversation.messages.len();
    assert_eq!(
        second.conversation.messages[..n],
        first.conversation.messages[..]
    );
    assert_eq!(ids(&second.conversation)[n..], ["b10", "u11"]);
}

#[test]
fn growing_past_commit_at_again_merges_the_next_span_into_the_running_summary() {
    let mut h = host();
    let stage = stage("");
    run(&stage, &conversation(), &mut h);
    let mut longer = conversation();
    longer.messages.push(text("b10", Role::Assistant, "Done."));
    for i in 11..=14 {
        longer.messages.extend(plain_turn(i));
    }
    let before = h.summary_requests.borrow().len();
    let out = run(&stage, &longer, &mut h);
    let requests = h.summary_requests.borrow();
    assert!(requests.len() > before);
    let merge = &requests[before];
    assert!(merge
        .previous_summary
        .as_deref()
        .unwrap()
        .starts_with("summary of 9 messages: u1"));
    // The next span starts where the first run's ended: the answer of step 5.
    assert_eq!(merge.messages[0].id, "b5");
    let summaries = out
        .conversation
        .messages
        .iter()
        .filter(context_collapse::is_summary_message)
        .count();
    assert_eq!(summaries, 1, "one running summary");
    assert_eq!(out.report.events[0].kind, "reapplied");
    assert_eq!(out.report.events[1].kind, "collapsed");
    assert_no_orphans(&out.conversation);
    // The 4 most recent turns (steps 13 and 14) are whole.
    let from = longer.position("u13").unwrap();
    let tail = &longer.messages[from..];
    let out_tail = &out.conversation.messages[out.conversation.messages.len() - tail.len()..];
    assert_eq!(out_tail, tail);
}

#[test]
fn its_own_output_is_left_as_it_is_with_or_without_state() {
    let mut h = host();
    let stage = stage("");
    let first = run(&stage, &conversation(), &mut h);
    let requests = h.summary_requests.borrow().len();
    let puts = h.state_puts.get();
    // With the state: the summary message is recognised as the committed collapse.
    let again = run(&stage, &first.conversation, &mut h);
    assert_eq!(again.conversation, first.conversation);
    assert!(!again.changed, "handed back as unchanged");
    assert_eq!(again.report.blocks_changed, 0);
    assert_eq!(again.report.tokens_freed, None);
    assert_eq!(h.summary_requests.borrow().len(), requests);
    assert_eq!(h.state_puts.get(), puts);
    assert_eq!(again.report.signals, vec![Signal::CollapseActive]);
    assert!(again.report.events[0]
        .detail
        .ends_with("(its summary message was already in the input)"));
    // Without it (state lost): the summary message is adopted, not summarized again.
    let mut fresh = host();
    let adopted = run(&stage, &first.conversation, &mut fresh);
    assert_eq!(adopted.conversation, first.conversation);
    assert!(!adopted.changed, "handed back as unchanged");
    assert!(fresh.summary_requests.borrow().is_empty());
    assert!(adopted.report.events[0].detail.ends_with("adopted)"));
    let state = fresh.state_json();
    assert_eq!(state["collapses"][0]["first"], "u1");
    assert_eq!(state["collapses"][0]["last"], "r5");
    assert_eq!(state["collapses"][0]["count"], 20);
    assert_eq!(state["collapses"][0]["ids"][0], "collapse-u1");
}

#[test]
fn forced_rerun_on_its_own_output_merges_into_the_summary_it_finds() {
    // The host's recovery chain runs a forced pass over the output of the normal pass. Forced,
    // the target is a tenth of the effective window (260 tokens) below the projection: each pass
    // merges the next turns into the summary it finds, freeing at least that, until only the
    // keep_recent_turns most recent turns are left.
    let mut h = host();
    let stage = stage("");
    let first = run(&stage, &conversation(), &mut h);
    let mut forced = host().forced();
    *forced.state.borrow_mut() = h.state.borrow().clone();
    let out = run(&stage, &first.conversation, &mut forced);
    assert_eq!(
        ids(&out.conversation),
        [
            "s0",
            "collapse-u1",
            "s5",
            "b7",
            "u8",
            "a8",
            "r8",
            "b8",
            "u9",
            "a9",
            "r9",
            "b9",
            "u10"
        ],
        "turns up to r7 merged: just enough to free 260 tokens, not everything"
    );
    assert!(tokens(&forced, &first.conversation) - tokens(&forced, &out.conversation) >= 260);
    assert!(forced.summary_requests.borrow()[0]
        .previous_summary
        .as_deref()
        .unwrap()
        .starts_with("summary of 9"));
    assert!(
        out.conversation.messages[1]
            .content
            .text()
            .starts_with("[condense: summary of 28 earlier messages (ids u1…r7)]"),
        "{}",
        out.conversation.messages[1]
            .content
            .text()
            .lines()
            .next()
            .unwrap()
    );
    assert_no_orphans(&out.conversation);
    // Forced again and again: down to the 4 most recent turns, then nothing more.
    let mut current = out.conversation;
    for _ in 0..5 {
        let requests = forced.summary_requests.borrow().len();
        let again = run(&stage, &current, &mut forced);
        assert_no_orphans(&again.conversation);
        if again.conversation == current {
            assert_eq!(forced.summary_requests.borrow().len(), requests);
            break;
        }
        current = again.conversation;
    }
    assert_eq!(
        ids(&current),
        [
            "s0",
            "collapse-u1",
            "s5",
            "b8",
            "u9",
            "a9",
            "r9",
            "b9",
            "u10"
        ]
    );
    // With keep_recent_turns = 1, the forced passes merge up to b9, into the summary found in
    // the input.
    let one = condense_testing::stage("keep_recent_turns = 1");
    let mut forced = host().forced();
    *forced.state.borrow_mut() = h.state.borrow().clone();
    let mut current = first.conversation.clone();
    for _ in 0..10 {
        let out = run(&one, &current, &mut forced);
        if out.conversation == current {
            break;
        }
        current = out.conversation;
    }
    assert_eq!(ids(&current), ["s0", "collapse-u1", "s5", "u10"]);
    assert!(current.messages[1]
        .content
        .text()
        .starts_with("[condense: summary of 37 earlier messages (ids u1…b9)]"));
    assert_no_orphans(&current);
}

#[test]
fn collapses_whose_messages_are_gone_are_dropped() {
    let mut h = host();
    let stage = stage("");
    run(&stage, &conversation(), &mut h);
    // The session was rewound: turn 1 is gone (another tool rewrote history).
    let mut other = conversation();
    let from = other.position("u2").unwrap();
    other.messages.drain(1..from);
    let out = run(&stage, &other, &mut h);
    assert!(out.report.notes.iter().any(|n| n
        == "dropped 1 collapse whose messages are no longer in the conversation (first ids: u1)"));
    assert_ne!(h.state_json()["collapses"][0]["first"], "u1");
    assert_no_orphans(&out.conversation);
    assert_unique_ids(&out.conversation);
}

#[test]
fn the_force_flag_commits_below_commit_at_until_keep_recent_turns_remain() {
    let mut h = MemoryHost::default().forced(); // 200k window: far below commit_at
    let out = run(&stage(""), &conversation(), &mut h);
    assert_eq!(
        ids(&out.conversation),
        [
            "s0",
            "collapse-u1",
            "s5",
            "b8",
            "u9",
            "a9",
            "r9",
            "b9",
            "u10"
        ],
        "turns 1..=14 collapsed, the 4 most recent kept"
    );
    assert!(
        out.report.notes[1]
            .contains("target 0 (force:context-collapse: a tenth of the effective window below"),
        "{:?}",
        out.report.notes
    );
    // Spans of 4, 4, 4 and 2 turns, merged into one running summary.
    assert_eq!(h.summary_requests.borrow().len(), 4);
}

#[test]
fn still_above_block_at_is_reported_not_failed() {
    // Effective 500: even everything but the 4 kept turns does not get below 475.
    let mut h = MemoryHost::default().with_window(20_500, 20_000);
    let input = conversation();
    let out = run(&stage(""), &input, &mut h);
    let blocking = out
        .report
        .notes
        .iter()
        .find(|n| n.starts_with("BLOCKING"))
        .unwrap();
    assert!(
        blocking.contains("at or above block_at (475 = 95% of the effective window)"),
        "{blocking}"
    );
    assert!(blocking.ends_with("(the 4 most recent turns are kept); the request may not fit"));
    assert!(out
        .report
        .notes
        .iter()
        .any(|n| n == "nothing more to collapse: 4 uncollapsed turns left, keep_recent_turns = 4"));
    assert!(tokens(&h, &out.conversation) < tokens(&h, &input));
}

#[test]
fn a_failing_summarizer_commits_nothing_new_but_keeps_the_committed_view() {
    let mut h = host();
    let stage = stage("");
    let first = run(&stage, &conversation(), &mut h);
    // Later, the summarizer is down and two more turns push the count up again.
    let mut failing = host().with_summarizer(|_| Err("backend unavailable".into()));
    *failing.state.borrow_mut() = h.state.borrow().clone();
    let mut longer = conversation();
    longer.messages.push(text("b10", Role::Assistant, "Done."));
    for i in 11..=14 {
        longer.messages.extend(plain_turn(i));
    }
    let out = apply(&stage, &longer, &{
        failing.run.conversation_tokens = tokens(&failing, &longer);
        failing
    });
    let out = out.unwrap();
    let n = first.conversation.messages.len() - 1; // up to u10
    assert_eq!(
        out.conversation.messages[..n],
        first.conversation.messages[..n]
    );
    assert!(out.report.notes.iter().any(|n| n
        .starts_with("summarizer failed, not collapsing 4 turns (8 messages, ids b5…r7")
        && n.ends_with("backend unavailable; nothing more committed in this run")));
    assert_eq!(out.report.signals, vec![Signal::CollapseActive]);
    let blocking = out.report.notes.last().unwrap();
    assert!(
        blocking.ends_with("(the summarizer failed); the request may not fit"),
        "{blocking}"
    );
}

#[test]
fn a_summary_that_would_not_be_smaller_is_not_committed() {
    let big = "x".repeat(40_000);
    let mut h = host().with_summarizer(move |_| Ok(big.clone()));
    let input = conversation();
    let out = run(&stage("summary_max_tokens = 20000"), &input, &mut h);
    assert_eq!(out.conversation, input);
    assert!(out.report.signals.is_empty());
    assert!(
        out.report
            .notes
            .iter()
            .any(|n| n.contains("would not be smaller")),
        "{:?}",
        out.report.notes
    );
    assert_eq!(h.state_puts.get(), 0);
}

#[test]
fn a_summary_over_its_budget_is_kept_whole_when_it_still_saves() {
    // The host's summaries exceed their budget only to keep every written path and the last
    // request: cutting would cut exactly those, so the stage keeps the summary whole.
    let long = "path ".repeat(200);
    let mut h = host().with_summarizer(move |_| Ok(long.clone()));
    let out = run(&stage("summary_max_tokens = 100"), &conversation(), &mut h);
    let summary = &out.conversation.messages[1];
    assert!(summary.content.text().ends_with("path"), "not cut");
    assert!(
        out.report.notes.iter().any(|n| n
            == "summary of ids u1…b2 is 250 tokens, over its budget of 100: kept whole (every \
                written path and the last request stay)"),
        "{:?}",
        out.report.notes
    );
    assert!(tokens(&h, &out.conversation) < tokens(&h, &conversation()));
}

#[test]
fn a_corrupt_state_is_an_error() {
    let h = host();
    *h.state.borrow_mut() = Some("{nope".into());
    let err = apply(&stage::<ContextCollapse>(""), &conversation(), &h).unwrap_err();
    assert!(
        err.message().starts_with("stored state is not valid"),
        "{}",
        err.message()
    );
}

#[test]
fn tool_calls_and_results_are_never_separated() {
    // Every turn size and span size: no output orphans a result, whatever gets collapsed.
    for keep in 1..=5 {
        for per_span in 1..=4 {
            let st = stage(&format!(
                "keep_recent_turns = {keep}\nturns_per_span = {per_span}"
            ));
            let mut h = MemoryHost::default().forced();
            let out = run(&st, &conversation(), &mut h);
            assert_no_orphans(&out.conversation);
            assert_unique_ids(&out.conversation);
            let kept = condense_turns::group(&out.conversation.messages)
                .turns
                .iter()
                .filter(|t| {
                    !context_collapse::is_summary_message(&out.conversation.messages[t.start])
                })
                .count();
            assert_eq!(kept, keep, "keep {keep} per_span {per_span}");
        }
    }
    // The mixed message (a result plus text) stays with its call.
    let conv: Conversation = conversation();
    let turns = condense_turns::group(&conv.messages);
    let r3 = conv.position("r3").unwrap();
    let a3 = conv.position("a3").unwrap();
    assert_eq!(turns.turn_of(r3), turns.turn_of(a3));
}

/// The fixture's system message, then `steps` plain steps (two API turns each), then a prompt.
fn long_conversation(steps: usize) -> Conversation {
    let mut messages = vec![text("s0", Role::System, "You are a careful coding agent.")];
    for i in 1..=steps {
        messages.extend(plain_turn(i));
    }
    messages.push(text("u99", Role::User, "Now summarize what changed."));
    Conversation {
        messages,
        ..Conversation::default()
    }
}

/// The output's tokens and, for each summary request, its span's API turns and tokens.
fn spans_of(config: &str, conv: &Conversation) -> (usize, Vec<(usize, usize)>) {
    let mut h = host();
    let out = run(&stage(config), conv, &mut h);
    let spans = h
        .summary_requests
        .borrow()
        .iter()
        .map(|r| {
            let turns = condense_turns::group(&r.messages).turns.len();
            (
                turns,
                condense_turns::measure::messages_tokens(&h, &r.messages),
            )
        })
        .collect();
    (tokens(&h, &out.conversation), spans)
}

#[test]
fn a_backlog_is_folded_in_larger_spans_and_the_rest_turns_per_span_at_a_time() {
    // About 18,000 tokens against a target of 2,340: a backlog of about 15,800 to free.
    let conv = long_conversation(40);
    let (without, small) = spans_of("backlog_span_tokens = 0", &conv);
    let (with, large) = spans_of("backlog_span_tokens = 3000", &conv);
    assert!(small.iter().all(|&(turns, _)| turns <= 4), "{small:?}");
    // Spans of up to 3,000 tokens while more than that is left to free: far fewer calls.
    assert!(large.len() * 2 <= small.len(), "{large:?} vs {small:?}");
    let (backlog, rest): (Vec<_>, Vec<_>) = large.iter().partition(|&&(turns, _)| turns > 4);
    assert!(backlog.len() >= 4, "{large:?}");
    assert!(backlog.iter().all(|&(_, t)| t <= 3000), "{large:?}");
    // The last spans are cut as without a backlog: both land below the target (2,340), within
    // one span's worth of each other.
    assert!(
        !rest.is_empty() && large.last().unwrap().0 <= 4,
        "{large:?}"
    );
    assert!(with < 2_340 && without < 2_340, "{with} / {without}");
    assert!(with.abs_diff(without) < small[0].1, "{with} / {without}");
}

#[test]
fn a_run_that_commits_goes_on_down_to_the_landing_point() {
    // An effective window of 20,000: target 18,000, landing point 17,000 (a twentieth of the
    // window below it). Steps of 470 tokens, spans of at most 4 API turns (two steps): a run
    // that stopped at the first span below the target would land within a step of it, and
    // the next step would commit again (a new prompt prefix every other turn).
    let mut h = MemoryHost::default().with_window(40_000, 20_000);
    let stage = stage("");
    let grown = |steps: usize| {
        let mut conv = long_conversation(36);
        let prompt = conv.messages.pop().unwrap();
        conv.messages
            .extend((0..steps).flat_map(|k| plain_turn(40 + k)));
        conv.messages.push(prompt);
        conv
    };
    let below = run(&stage, &grown(2), &mut h);
    assert_eq!(below.conversation, grown(2));
    assert_eq!(
        h.summary_requests.borrow().len(),
        0,
        "17,793 tokens: under the target"
    );
    let first = run(&stage, &grown(3), &mut h);
    let spans = h.summary_requests.borrow().len();
    let landed = tokens(&h, &first.conversation);
    assert!(
        spans >= 2 && landed < 17_000,
        "{spans} spans, {landed} tokens"
    );
    let note = report_json(&first.report)["notes"].to_string();
    assert!(note.contains("goes on down to 17,000"), "{note}");
    // The next step stays under the target: nothing new is committed, and the view sent
    // before is the prefix of this one.
    let second = run(&stage, &grown(4), &mut h);
    assert_eq!(h.summary_requests.borrow().len(), spans);
    let n = first.conversation.messages.len() - 1;
    assert_eq!(
        second.conversation.messages[..n],
        first.conversation.messages[..n]
    );
}

#[test]
fn a_small_excess_is_committed_as_without_a_backlog() {
    // The fixture is about 1,960 tokens over the landing point: under the backlog size, so
    // the default commits exactly what `backlog_span_tokens = 0` does.
    let off = run(
        &stage("backlog_span_tokens = 0"),
        &conversation(),
        &mut host(),
    );
    let on = run(&stage(""), &conversation(), &mut host());
    assert_eq!(on.conversation, off.conversation);
    assert_eq!(on.report.events.len(), 2, "{:?}", on.report.events);
}

#[test]
fn a_large_backlog_is_folded_in_about_backlog_commits_spans_of_at_most_half_the_window() {
    // A backlog of about 15,800 tokens, one-turn spans past it (about 230 tokens a turn) and a
    // floor of 300 tokens: about 60 calls. With 16 commits' worth (990 tokens a span, under half
    // the effective window: 2,600 / 2 = 1,300), about 16 and the last few.
    let conv = long_conversation(40);
    let config = "turns_per_span = 1\nbacklog_span_tokens = 300\nbacklog_commits = ";
    let (fixed, floor) = spans_of(&format!("{config}0"), &conv);
    let (grown, large) = spans_of(&format!("{config}16"), &conv);
    assert!(
        floor.iter().all(|&(t, tokens)| t <= 1 || tokens <= 300),
        "{floor:?}"
    );
    let backlog: Vec<usize> = large
        .iter()
        .filter(|&&(turns, _)| turns > 1)
        .map(|&(_, tokens)| tokens)
        .collect();
    assert!(backlog.len() >= 8, "{large:?}");
    assert!(backlog.iter().all(|&t| t > 300 && t <= 1_300), "{large:?}");
    assert!(large.len() <= 16 + 8, "{large:?}");
    assert!(large.len() * 2 <= floor.len(), "{large:?} vs {floor:?}");
    // Both land below the target (2,340), within one span's worth of each other.
    assert!(grown < 2_340 && fixed < 2_340, "{grown} / {fixed}");
    assert!(grown.abs_diff(fixed) < 1_300, "{grown} / {fixed}");
}

#[test]
fn synthetic_ids_are_kept_as_runs_and_the_collapse_reapplies_from_them() {
    // A request body's messages: ids `#0`, `#1`, … (what a reader gives messages without ids).
    let mut conv = conversation();
    for (i, m) in conv.messages.iter_mut().enumerate() {
        m.id = condense_model::synthetic_id(i);
    }
    let mut h = host();
    let stage = stage("");
    let first = run(&stage, &conv, &mut h);
    assert!(first.changed, "the fixture collapses");
    let state = h.state_json();
    let stored = &state["collapses"][0];
    let count = stored["count"].as_u64().unwrap();
    // One run or a few (system messages are not part of a collapse and split its ids).
    let ids = stored["ids"].as_array().unwrap();
    assert!(ids.len() < count as usize, "{ids:?}");
    assert!(ids.iter().any(Value::is_array), "{ids:?}");
    // The next run finds the same span through them: the same output, no new summary.
    let requests = h.summary_requests.borrow().len();
    let second = run(&stage, &conv, &mut h);
    assert_eq!(second.conversation, first.conversation);
    assert_eq!(h.summary_requests.borrow().len(), requests);
    // And the same as with the ids spelled out, as states held them before runs.
    let mut spelled = h.state_json();
    let list: condense_model::id_list::IdList =
        serde_json::from_value(spelled["collapses"][0]["ids"].take()).unwrap();
    spelled["collapses"][0]["ids"] = list.iter().map(|id| id.to_text().into_owned()).collect();
    *h.state.borrow_mut() = Some(spelled.to_string());
    let third = run(&stage, &conv, &mut h);
    assert_eq!(third.conversation, first.conversation);
    assert_eq!(h.summary_requests.borrow().len(), requests);
}

#[test]
fn a_duplicate_marker_whose_kept_copy_is_folded_says_so() {
    use condense_model::duplicate::{duplicate_marker, folded_marker, Toward};
    use condense_model::{Block, Content};
    // snip kept the first copies (t1, t45) and pointed two later results at them: t1 is in the
    // oldest turns, which a run over this window folds; t45 stays.
    let mut conv = long_conversation(48);
    let mut point = |turn: &str, kept: &str| {
        let m = conv.messages.iter_mut().find(|m| m.id == turn).unwrap();
        let Block::ToolResult(r) = &mut m.content.blocks[0] else {
            panic!("{turn} is a tool result");
        };
        r.content = Content::string(duplicate_marker(Toward::Earlier, kept));
    };
    point("r46", "t1");
    point("r47", "t45");
    let mut h = MemoryHost::default().with_window(40_000, 20_000);
    let out = run(&stage(""), &conv, &mut h);
    let text_of = |id: &str| {
        let m = out.conversation.messages.iter().find(|m| m.id == id);
        m.map(|m| m.content.text())
    };
    assert!(
        text_of("r1").is_none() && text_of("r45").is_some(),
        "t1 folded, t45 kept: {:?}",
        ids(&out.conversation)
    );
    assert_eq!(
        text_of("r46").as_deref(),
        Some(folded_marker("t1").as_str())
    );
    assert_eq!(
        text_of("r47").as_deref(),
        Some(duplicate_marker(Toward::Earlier, "t45").as_str())
    );
    let note = "1 duplicate marker pointed at results folded";
    assert!(has_note(&out.report, note), "{:?}", out.report.notes);
    // Re-applied on the same input: the same view.
    let again = run(&stage(""), &conv, &mut h);
    assert_eq!(again.conversation, out.conversation);
}
