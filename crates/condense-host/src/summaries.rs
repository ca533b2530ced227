//! The summarize service: what a stage's summary request becomes before a summarizer sees it.
//!
//! 1. **Originals.** Every message of the span that a stage cleared, deduplicated, truncated or
//!    persisted is replaced by its original ([`crate::originals`]), so the summary is written
//!    from what the agent saw, not from placeholders.
//! 2. **Earlier summaries.** The request's `previous_summary`, and any summary message inside
//!    the span (a collapse summary autocompact now summarizes), are what the new summary builds
//!    on, not conversation to summarize again.
//! 3. **The retained record.** Each summary the host writes carries a record of the user's
//!    requests, every file touched and every error met (`condense_retain::Retained`), rendered
//!    first and never dropping a written path ([`condense_summarize::retaining`]). The record is
//!    kept in the store (`records/retain-<session>/<hash of the summary text>`), so the next
//!    summary merges the record itself, not what can be read back from the text; a summary
//!    without a record is read back from its text. Within a run the records stay in memory (a
//!    running summary is rewritten at every commit); at its end, those of the summaries the
//!    output still holds are stored ([`store_records`]), one write each.
//!
//! A running summary rewritten commit after commit within one stage call leaves records nothing
//! can refer to any more. When a stage extends summary `P`, which this same call wrote by
//! extending `G`, then `G` is gone for good: the stage builds on `P` only once `P` replaced `G`
//! in its output, and `G` was never in any conversation outside this call. So `G`'s record is
//! dropped then. (`P`'s is kept until the new summary is known to replace it: a stage may still
//! refuse the new summary and keep `P`.) The memory kept is that of live summaries and their
//! immediate predecessors, not of every intermediate one, which grew with the square of the
//! commits.
//!
//! Nor is a running summary's record copied at each commit: when a stage extends a summary this
//! same call wrote, its record is handed over and the span merged into it in place
//! ([`condense_summarize::retaining::summarize_onto`]); the predecessor keeps only what takes that merge back
//! ([`Kept::Before`]), and is rebuilt from its successor's record if it is asked for again (a
//! stage refused the new summary and kept it, or its record is stored at the end of the run).
//! A commit then costs its span, not the whole record.

use crate::services::Services;
use condense_model::Conversation;
use condense_store::{Store, StoreError};
use condense_summarize::retaining::{
    is_summary_message, summarize_onto_memo, summarize_span, summary_body, OntoSummary, RenderMemo,
    Retained, RetainingSummary, Undo,
};
use condense_summarize::SummaryRequest;
use std::cell::RefCell;
use std::collections::HashMap;
use twox_hash::XxHash3_128;

const RECORD_NAMESPACE: &str = "retain-";

fn record_name(summary: &str) -> String {
    format!("{:032x}", XxHash3_128::oneshot(summary.trim().as_bytes()))
}

/// A summary's record written in this run: the stage call (its index in the run) that wrote
/// it, the summary it extended when that was written by the same call, and the record.
#[derive(Debug)]
pub(crate) struct RunRecord {
    call: usize,
    extends: Option<String>,
    record: Kept,
    /// The token counts of its rendered pieces, handed on with the record to the summary
    /// that extends it (every summary of a run is counted with the run's one counter).
    memo: RenderMemo,
}

/// How a record written in this run is kept.
#[derive(Debug)]
enum Kept {
    /// The record itself.
    Full(Retained),
    /// Handed over to the summary written next by extending this one (`next`, its record
    /// name): this record is that one's with `undo` applied.
    Before { next: String, undo: Undo },
}

/// The record named `name` written in this run, rebuilt when it was handed over (`None` when
/// its successor is gone too, which `remember` never lets happen: the text is read back then).
fn run_record(records: &HashMap<String, RunRecord>, name: &str) -> Option<Retained> {
    // Undos to apply, latest summary's first. Each step goes to a summary written later (a
    // name written again is kept whole), so the chain ends; the bound is a guard all the same.
    let mut undos = Vec::new();
    let mut name = name;
    loop {
        match &records.get(name)?.record {
            Kept::Full(record) => {
                let mut record = record.clone();
                for undo in undos.into_iter().rev() {
                    record.undo(Undo::clone(undo));
                }
                return Some(record);
            }
            Kept::Before { next, undo } if undos.len() < records.len() => {
                undos.push(undo);
                name = next;
            }
            Kept::Before { .. } => return None,
        }
    }
}

/// The records of the summaries written in this run, by record name.
pub(crate) type RunRecords = RefCell<HashMap<String, RunRecord>>;

/// The record kept for the summary `text` of this session, if any: written in this run, or
/// stored by an earlier one (an unreadable one is as good as none: the text is read back
/// instead).
fn record_of(services: &Services<'_>, text: &str) -> Option<Retained> {
    let name = record_name(text);
    let records = services.run.records.borrow();
    if records.contains_key(&name) {
        return run_record(&records, &name);
    }
    drop(records);
    let bytes = services
        .store
        .record_get(&format!("{RECORD_NAMESPACE}{}", services.session), &name)
        .ok()??;
    serde_json::from_slice(&bytes).ok()
}

/// Stores the records of this run's summaries that `output` still holds (a summary merged into
/// a later one in the same run is gone from it). Called once, at the end of a run.
pub(crate) fn store_records(
    records: &RunRecords,
    store: &Store,
    session: &str,
    output: &Conversation,
) -> Result<(), StoreError> {
    let records = records.borrow();
    if records.is_empty() {
        return Ok(());
    }
    for m in &output.messages {
        let Some(body) = summary_body(m) else {
            continue;
        };
        let name = record_name(body);
        // Serializing a record cannot fail (strings, numbers, options); without one the next
        // summary reads this one back from its text.
        if let Some(bytes) = run_record(&records, &name).and_then(|r| serde_json::to_vec(&r).ok()) {
            store.record_put(&format!("{RECORD_NAMESPACE}{session}"), &name, &bytes)?;
        }
    }
    Ok(())
}

/// Keeps the record of summary `text`, written by stage call `call` extending `previous`, and
/// drops the record `previous` superseded when this same call wrote both (see the module docs).
fn remember(
    records: &mut HashMap<String, RunRecord>,
    call: usize,
    previous: Option<&str>,
    text: &str,
    record: Retained,
    memo: RenderMemo,
) {
    // The summary this request extends, when this same call wrote it; and what that one
    // extended, which is now gone for good.
    let extends = previous
        .map(record_name)
        .filter(|p| records.get(p).is_some_and(|r| r.call == call));
    if let Some(gone) = extends
        .as_ref()
        .and_then(|p| records.get(p))
        .and_then(|r| r.extends.clone())
    {
        records.remove(&gone);
    }
    records.insert(
        record_name(text),
        RunRecord {
            call,
            extends,
            record: Kept::Full(record),
            memo,
        },
    );
}

/// The service (see the module docs).
pub(crate) fn summarize(
    services: &Services<'_>,
    request: condense_abi::SummaryRequest,
) -> Result<String, String> {
    let mut messages = request.messages;
    services
        .run
        .originals
        .restore(&mut messages, services.store, services.session);
    let req = SummaryRequest {
        messages: &messages,
        previous_summary: request.previous_summary.as_deref(),
        max_tokens: request.max_tokens,
        purpose: &request.purpose,
    };
    if let Some(done) = summarize_running(services, &req) {
        return done;
    }
    let RetainingSummary { text, retained } =
        summarize_span(services.summarizer, services.counter, &req, &|text| {
            record_of(services, text)
        })
        .map_err(|e| e.to_string())?;
    remember(
        &mut services.run.records.borrow_mut(),
        services.call,
        req.previous_summary,
        &text,
        retained,
        RenderMemo::default(),
    );
    Ok(text)
}

/// The service for a running summary: `req` extends a summary this same stage call wrote, whose
/// record is kept whole, and holds no other summary. Its record is handed over to the new
/// summary (see the module docs). `None`: not that case, nothing done.
fn summarize_running(
    services: &Services<'_>,
    req: &SummaryRequest<'_>,
) -> Option<Result<String, String>> {
    let previous = req
        .previous_summary
        .map(str::trim)
        .filter(|p| !p.is_empty())?;
    if req.messages.iter().any(is_summary_message) {
        return None;
    }
    let name = record_name(previous);
    let (mut record, mut memo) = {
        let mut records = services.run.records.borrow_mut();
        let kept = records.get_mut(&name).filter(|r| r.call == services.call)?;
        match &mut kept.record {
            // Taken; put back below whatever happens (the memo goes on with the record).
            Kept::Full(record) => (std::mem::take(record), std::mem::take(&mut kept.memo)),
            Kept::Before { .. } => return None,
        }
    };
    let req = SummaryRequest {
        previous_summary: Some(previous),
        ..*req
    };
    let written = summarize_onto_memo(
        services.summarizer,
        services.counter,
        &req,
        &mut record,
        &mut memo,
    );
    let mut records = services.run.records.borrow_mut();
    Some(match written {
        Ok(OntoSummary { text, undo }) => {
            if let Some(kept) = records.get_mut(&name) {
                kept.record = Kept::Before {
                    next: record_name(&text),
                    undo,
                };
            }
            remember(
                &mut records,
                services.call,
                Some(previous),
                &text,
                record,
                memo,
            );
            Ok(text)
        }
        Err(e) => {
            if let Some(kept) = records.get_mut(&name) {
                kept.record = Kept::Full(record);
                kept.memo = memo;
            }
            Err(e.to_string())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(records: &HashMap<String, RunRecord>) -> Vec<String> {
        let mut names: Vec<String> = records.keys().cloned().collect();
        names.sort();
        names
    }

    fn expected(texts: &[&str]) -> Vec<String> {
        let mut names: Vec<String> = texts.iter().map(|t| record_name(t)).collect();
        names.sort();
        names
    }

    #[test]
    fn a_running_summary_keeps_only_itself_and_its_predecessor() {
        let mut records = HashMap::new();
        remember(
            &mut records,
            3,
            None,
            "s1",
            Retained::default(),
            RenderMemo::default(),
        );
        remember(
            &mut records,
            3,
            Some("s1"),
            "s2",
            Retained::default(),
            RenderMemo::default(),
        );
        assert_eq!(names(&records), expected(&["s1", "s2"]));
        // Building on s2 means s2 replaced s1 for good.
        remember(
            &mut records,
            3,
            Some("s2"),
            "s3",
            Retained::default(),
            RenderMemo::default(),
        );
        assert_eq!(names(&records), expected(&["s2", "s3"]));
        remember(
            &mut records,
            3,
            Some("s3"),
            "s4",
            Retained::default(),
            RenderMemo::default(),
        );
        assert_eq!(names(&records), expected(&["s3", "s4"]));
    }

    fn requests(list: &[&str]) -> Retained {
        Retained {
            requests: list.iter().map(|r| r.to_string()).collect(),
            ..Retained::default()
        }
    }

    /// What `summarize_running` does to the records: hands `previous`'s record over to `text`.
    fn hand_over(records: &mut HashMap<String, RunRecord>, previous: &str, text: &str, span: &str) {
        let kept = records.get_mut(&record_name(previous)).unwrap();
        let Kept::Full(record) = &mut kept.record else {
            panic!("{previous} was handed over already");
        };
        let mut record = std::mem::take(record);
        let undo = record.merge_later_undoable(requests(&[span]));
        kept.record = Kept::Before {
            next: record_name(text),
            undo,
        };
        remember(
            records,
            3,
            Some(previous),
            text,
            record,
            RenderMemo::default(),
        );
    }

    #[test]
    fn a_handed_over_record_is_rebuilt_from_its_successor() {
        let mut records = HashMap::new();
        remember(
            &mut records,
            3,
            None,
            "s1",
            requests(&["a"]),
            RenderMemo::default(),
        );
        hand_over(&mut records, "s1", "s2", "b");
        assert!(matches!(
            records[&record_name("s1")].record,
            Kept::Before { .. }
        ));
        assert_eq!(
            run_record(&records, &record_name("s1")),
            Some(requests(&["a"]))
        );
        assert_eq!(
            run_record(&records, &record_name("s2")),
            Some(requests(&["a", "b"]))
        );
        hand_over(&mut records, "s2", "s3", "c");
        assert_eq!(names(&records), expected(&["s2", "s3"]));
        assert_eq!(
            run_record(&records, &record_name("s2")),
            Some(requests(&["a", "b"]))
        );
        assert_eq!(
            run_record(&records, &record_name("s3")),
            Some(requests(&["a", "b", "c"]))
        );
        // Its successor gone (never by `remember`): no record, the text is read back instead.
        records.remove(&record_name("s3"));
        assert_eq!(run_record(&records, &record_name("s2")), None);
    }

    #[test]
    fn summaries_of_other_calls_are_never_dropped() {
        let mut records = HashMap::new();
        remember(
            &mut records,
            1,
            None,
            "a1",
            Retained::default(),
            RenderMemo::default(),
        );
        remember(
            &mut records,
            1,
            Some("a1"),
            "a2",
            Retained::default(),
            RenderMemo::default(),
        );
        // A later call (autocompact, the recovery chain) builds on a2: a2 may stay in the
        // output if that call is refused, and so may what it rests on from the earlier call.
        remember(
            &mut records,
            2,
            Some("a2"),
            "b1",
            Retained::default(),
            RenderMemo::default(),
        );
        remember(
            &mut records,
            2,
            Some("b1"),
            "b2",
            Retained::default(),
            RenderMemo::default(),
        );
        assert_eq!(names(&records), expected(&["a1", "a2", "b1", "b2"]));
        remember(
            &mut records,
            2,
            Some("b2"),
            "b3",
            Retained::default(),
            RenderMemo::default(),
        );
        assert_eq!(names(&records), expected(&["a1", "a2", "b2", "b3"]));
    }
}
