//! The circuit breaker: three failures in a row stop the attempts for the session; a success
//! or a config change resets it. A failure leaves the input unchanged, without failing.

use crate::fixture::{config, conversation, host};
use crate::support::run;
use condense_abi::Signal;
use condense_testing::{has_note, report_json, stage, MemoryHost};
use std::cell::Cell;
use std::rc::Rc;

/// A host whose summarizer fails while `failing` is set.
fn switchable() -> (MemoryHost, Rc<Cell<bool>>) {
    let failing = Rc::new(Cell::new(true));
    let f = Rc::clone(&failing);
    let host = host().with_summarizer(move |r| {
        if f.get() {
            Err("503 from the summarizer backend".into())
        } else {
            Ok(format!("summary of {} messages", r.messages.len()))
        }
    });
    (host, failing)
}

#[test]
fn three_failures_open_the_breaker_and_the_summarizer_is_not_called_again() {
    let (mut h, _) = switchable();
    let stage = stage(&config());
    let input = conversation();
    for i in 1..=3 {
        let out = run(&stage, &input, &mut h);
        assert_eq!(
            out.conversation, input,
            "a failure leaves the input unchanged"
        );
        assert!(out.report.signals.is_empty());
        assert!(has_note(
            &out.report,
            &format!(
                "compaction failed, conversation left unchanged: the summarizer failed: 503 from \
                 the summarizer backend ({i} consecutive failure{} of max_consecutive_failures = 3)",
                if i == 1 { "" } else { "s" }
            )
        ));
        assert_eq!(h.summary_requests.borrow().len(), i);
        assert_eq!(h.state_json()["consecutive_failures"], i);
    }
    let out = run(&stage, &input, &mut h);
    assert_eq!(h.summary_requests.borrow().len(), 3, "no fourth call");
    insta::assert_json_snapshot!("breaker_open_report", report_json(&out.report));
    // Forcing does not get past it either.
    let mut forced = host().forced();
    *forced.state.borrow_mut() = h.state.borrow().clone();
    let out = run(&stage, &input, &mut forced);
    assert!(forced.summary_requests.borrow().is_empty());
    assert!(has_note(
        &out.report,
        "(force:autocompact does not override it)"
    ));
}

#[test]
fn a_success_resets_the_count() {
    let (mut h, failing) = switchable();
    let stage = stage(&config());
    run(&stage, &conversation(), &mut h);
    run(&stage, &conversation(), &mut h);
    assert_eq!(h.state_json()["consecutive_failures"], 2);
    failing.set(false);
    let out = run(&stage, &conversation(), &mut h);
    assert_eq!(out.report.signals, vec![Signal::Compacted]);
    assert_eq!(h.state_json()["consecutive_failures"], 0);
    assert_eq!(h.state_json()["last_failure"], serde_json::Value::Null);
}

#[test]
fn a_config_change_resets_the_breaker() {
    let (mut h, failing) = switchable();
    let stage_a = stage(&config());
    for _ in 0..4 {
        run(&stage_a, &conversation(), &mut h);
    }
    assert_eq!(h.summary_requests.borrow().len(), 3);
    failing.set(false);
    // Same config: still open.
    run(&stage_a, &conversation(), &mut h);
    assert_eq!(h.summary_requests.borrow().len(), 3);
    // A changed config: tried again, and it works.
    let stage_b = stage(&format!("{}\nrestore_files = 4", config()));
    let out = run(&stage_b, &conversation(), &mut h);
    assert_eq!(h.summary_requests.borrow().len(), 4);
    assert_eq!(out.report.signals, vec![Signal::Compacted]);
    assert!(has_note(
        &out.report,
        "the stage config changed: circuit breaker reset (was 3 consecutive failures)"
    ));
}

#[test]
fn a_result_that_is_not_smaller_is_not_kept_and_counts_as_a_failure() {
    // Forced in a 200k window (the summary may take 20,000 tokens): a summary longer than
    // everything it replaces.
    let big = "lorem ipsum ".repeat(1_000);
    let mut h = MemoryHost::default()
        .forced()
        .with_summarizer(move |_| Ok(big.clone()));
    let input = conversation();
    let out = run(&stage(&config()), &input, &mut h);
    assert!(out.conversation == input, "input kept");
    assert!(out.report.signals.is_empty());
    assert!(
        has_note(
            &out.report,
            "would not be smaller than the input (2,461 tokens)"
        ),
        "{:?}",
        out.report.notes
    );
    assert_eq!(h.state_json()["consecutive_failures"], 1);
}

#[test]
fn an_empty_summary_is_a_failure() {
    let mut h = host().with_summarizer(|_| Ok("  \n".into()));
    let out = run(&stage(&config()), &conversation(), &mut h);
    assert!(has_note(
        &out.report,
        "the summarizer returned an empty summary"
    ));
    assert_eq!(h.state_json()["consecutive_failures"], 1);
}
