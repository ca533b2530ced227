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
//!    without a record is read back from its text.

use crate::services::Services;
use condense_summarize::retaining::{summarize_span, Retained, RetainingSummary};
use condense_summarize::SummaryRequest;
use xxhash_rust::xxh3::xxh3_128;

const RECORD_NAMESPACE: &str = "retain-";

fn record_name(summary: &str) -> String {
    format!("{:032x}", xxh3_128(summary.trim().as_bytes()))
}

/// The record kept for the summary `text` of this session, if any (an unreadable one is as
/// good as none: the text is read back instead).
fn record_of(services: &Services<'_>, text: &str) -> Option<Retained> {
    let bytes = services
        .store
        .record_get(
            &format!("{RECORD_NAMESPACE}{}", services.session),
            &record_name(text),
        )
        .ok()??;
    serde_json::from_slice(&bytes).ok()
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
    // Serializing the record cannot fail (strings, numbers, options); a record that cannot be
    // written is not fatal: the next summary reads this one back from its text.
    if let Ok(bytes) = serde_json::to_vec(&retained) {
        let _ = services.store.record_put(
            &format!("{RECORD_NAMESPACE}{}", services.session),
            &record_name(&text),
            &bytes,
        );
    }
    Ok(text)
}
