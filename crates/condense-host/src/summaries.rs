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

use crate::services::Services;
use condense_model::Conversation;
use condense_store::{Store, StoreError};
use condense_summarize::retaining::{summarize_span, summary_body, Retained, RetainingSummary};
use condense_summarize::SummaryRequest;
use std::cell::RefCell;
use std::collections::HashMap;
use xxhash_rust::xxh3::xxh3_128;

const RECORD_NAMESPACE: &str = "retain-";

fn record_name(summary: &str) -> String {
    format!("{:032x}", xxh3_128(summary.trim().as_bytes()))
}

/// The record kept for the summary `text` of this session, if any: written in this run, or
/// stored by an earlier one (an unreadable one is as good as none: the text is read back
/// instead).
fn record_of(services: &Services<'_>, text: &str) -> Option<Retained> {
    let name = record_name(text);
    if let Some(record) = services.run.records.borrow().get(&name) {
        return Some(record.clone());
    }
    let bytes = services
        .store
        .record_get(&format!("{RECORD_NAMESPACE}{}", services.session), &name)
        .ok()??;
    serde_json::from_slice(&bytes).ok()
}

/// Stores the records of this run's summaries that `output` still holds (a summary merged into
/// a later one in the same run is gone from it). Called once, at the end of a run.
pub(crate) fn store_records(
    records: &RefCell<HashMap<String, Retained>>,
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
        if let Some(bytes) = records.get(&name).and_then(|r| serde_json::to_vec(r).ok()) {
            store.record_put(&format!("{RECORD_NAMESPACE}{session}"), &name, &bytes)?;
        }
    }
    Ok(())
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
    let RetainingSummary { text, retained } =
        summarize_span(services.summarizer, services.counter, &req, &|text| {
            record_of(services, text)
        })
        .map_err(|e| e.to_string())?;
    services
        .run
        .records
        .borrow_mut()
        .insert(record_name(&text), retained);
    Ok(text)
}
