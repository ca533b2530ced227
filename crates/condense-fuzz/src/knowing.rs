//! The read targets' second check: a mutated input read knowing the message list (or the
//! Claude Code session's lines) an earlier read of its seed kept
//! ([`condense_formats::known`]) must give what a read of every message gives: the same
//! error, or the same bytes written back, fingerprints, usage, warnings, list for the next
//! read and, once read whole, the same conversation. A mutation after the known prefix
//! exercises the read that leaves that prefix unread; one inside it, the fallback to a full
//! read.

use crate::{Failure, FailureKind, Verdict};
use condense_formats::known::KnownList;
use condense_formats::{read_owned, read_owned_knowing, Document, Format, ReadOptions};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The earlier input a case's read knows: the seed whole when `percent` is 50 or more, else
/// its lines up to the last line end before `percent`% of it (for a session file, the turns
/// before; a JSON body cut there does not read, and the case knows nothing).
pub fn earlier(seed: &[u8], percent: usize) -> &[u8] {
    if percent >= 50 {
        return seed;
    }
    let at = seed.len() * percent / 100;
    match seed[..at].iter().rposition(|&b| b == b'\n') {
        Some(end) => &seed[..=end],
        None => seed,
    }
}

/// `input` read knowing the list a read of `earlier` kept, against a full read of it (module
/// docs); `format` as the read target forces it or not.
pub fn check_knowing(
    earlier: &[u8],
    input: &[u8],
    source: &str,
    format: Option<Format>,
) -> Verdict {
    let opts = ReadOptions {
        format,
        select: None,
    };
    let compared = catch_unwind(AssertUnwindSafe(|| -> Option<String> {
        let list = read_owned(earlier.to_vec(), source, &opts)
            .ok()?
            .known_list()?;
        let lookup = |key: u64| -> Vec<KnownList> {
            (key == list.0)
                .then(|| list.1.clone())
                .into_iter()
                .collect()
        };
        let full = read_owned(input.to_vec(), source, &opts);
        let knowing = read_owned_knowing(input.to_vec(), source, &opts, &lookup);
        match (full, knowing) {
            (Err(a), Err(b)) => (a.to_string() != b.to_string())
                .then(|| format!("the errors differ: {a} / knowing: {b}")),
            (Ok(full), Ok(knowing)) => difference(&full, &knowing),
            (Ok(_), Err(e)) => Some(format!("refused only knowing: {e}")),
            (Err(e), Ok(_)) => Some(format!("read only knowing (a full read: {e})")),
        }
    }));
    match compared {
        Err(panic) => Verdict::Failed(Failure::crash("read knowing", &panic)),
        Ok(Some(detail)) => Verdict::Failed(Failure {
            kind: FailureKind::RoundTrip,
            detail: format!("a read knowing an earlier list is not a full read: {detail}"),
        }),
        Ok(None) => Verdict::Accepted,
    }
}

/// Where `knowing` is not what `full` is (`None`: nowhere).
fn difference(full: &Document, knowing: &Document) -> Option<String> {
    if knowing.write().ok() != full.write().ok() {
        return Some("written back otherwise".into());
    }
    if knowing.message_fingerprints(0) != full.message_fingerprints(0) {
        return Some("other fingerprints".into());
    }
    if knowing.reported_usage(0) != full.reported_usage(0) || knowing.warnings() != full.warnings()
    {
        return Some("another usage or other warnings".into());
    }
    let whole = match knowing.unread(0) {
        Some(_) => knowing.read_unread(0).ok(),
        None => knowing.conversations().first().cloned(),
    };
    if whole.as_ref() != full.conversations().first() {
        return Some("another conversation, read whole".into());
    }
    (knowing.known_list() != full.known_list())
        .then(|| "another list kept for the next read".into())
}
