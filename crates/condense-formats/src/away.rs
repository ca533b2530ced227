//! The input's text, sent back to its file while the stages run
//! ([`crate::Document::send_text_away`]).
//!
//! A document keeps the bytes it was read from to write back what no stage changed. Between the
//! read and the write only a few of them are wanted: the exact text of each message the archive
//! keeps, and the whole text again when a stage asks for the messages a quick read left
//! unread. For a large file those bytes were the largest single thing live at the run's peak
//! (12.8 MB of 43 at 4M tokens). So a caller that read the text from a file can let it go and
//! have it read again from that file:
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let file = std::fs::File::open("session.jsonl")?;
//! let bytes = std::fs::read("session.jsonl")?;
//! let mut doc = condense_formats::read_owned(bytes, "session.jsonl", &Default::default())?;
//! doc.send_text_away(file, "session.jsonl");
//! // ... the stages run; `original_text_at` reads each text it gives from the file ...
//! doc.bring_text_back()?; // fails, in one line, if the file no longer holds those bytes
//! let out = doc.write()?;
//! # Ok(()) }
//! ```
//!
//! The file must still hold the same bytes where they were read (appending to it is fine: a
//! session still being written). [`Away::bring_back`] checks that with a 128-bit hash of the
//! text; a text read from the file on the way ([`Away::read`]) is one of those bytes, so a file
//! changed in between fails there. A read that fails on the way is kept and reported by
//! [`Away::bring_back`], so a caller never writes an output whose archive silently lacks a text.

use crate::FormatError;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::sync::{Mutex, PoisonError};

/// Where a document's text is while it is away: the file it was read from, where in it, and
/// what it hashed to.
#[derive(Debug)]
pub(crate) struct Away {
    /// The file, read at an offset under the lock (the cursor is shared).
    file: Mutex<File>,
    /// Where the text starts in the file (after a byte order mark).
    offset: u64,
    /// The text's length.
    len: usize,
    /// xxh3-128 of the text.
    print: u128,
    /// The first read that failed on the way, for [`Away::bring_back`] to report.
    failed: Mutex<Option<String>>,
    /// The file's name in errors.
    source: String,
}

impl Away {
    /// `text`, read from `file` (named `source` in errors) at `offset`, to be read from there
    /// again.
    pub fn new(file: File, source: &str, offset: u64, text: &str) -> Away {
        Away {
            source: source.to_string(),
            file: Mutex::new(file),
            offset,
            len: text.len(),
            print: twox_hash::XxHash3_128::oneshot(text.as_bytes()),
            failed: Mutex::new(None),
        }
    }

    /// The bytes of the text at `span`, from the file; `None` (noted for
    /// [`Away::bring_back`]) when they cannot be read or are not UTF-8.
    pub fn read(&self, span: Range<usize>) -> Option<String> {
        let bytes = if span.start <= span.end && span.end <= self.len {
            self.read_at(span.start, span.end - span.start)
        } else {
            Err("a span beyond the text".to_string())
        };
        let read = bytes.and_then(|bytes| {
            String::from_utf8(bytes).map_err(|_| "the bytes are no longer UTF-8".to_string())
        });
        match read {
            Ok(text) => Some(text),
            Err(reason) => {
                let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
                failed.get_or_insert(reason);
                None
            }
        }
    }

    /// The whole text, from the file, checked to be the bytes that were read; an error (one
    /// line, naming the file) when any read on the way failed or the file changed.
    pub fn bring_back(&self) -> Result<String, FormatError> {
        let changed = |reason: String| FormatError::Changed {
            at: self.source.clone(),
            reason,
        };
        let failed = self
            .failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(reason) = failed {
            return Err(changed(reason));
        }
        let bytes = self.read_at(0, self.len).map_err(changed)?;
        if twox_hash::XxHash3_128::oneshot(&bytes) != self.print {
            return Err(changed("its bytes are not the ones read".to_string()));
        }
        // The hash matched the text that was read, which was UTF-8.
        String::from_utf8(bytes).map_err(|_| changed("the bytes are no longer UTF-8".to_string()))
    }

    /// `len` bytes from `at` in the text.
    fn read_at(&self, at: usize, len: usize) -> Result<Vec<u8>, String> {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        // Read into the capacity, not into zeros: the pages are touched once.
        let mut bytes = Vec::with_capacity(len);
        file.seek(SeekFrom::Start(self.offset + at as u64))
            .and_then(|_| (&mut *file).take(len as u64).read_to_end(&mut bytes))
            .map_err(|e| format!("cannot read it again: {e}"))?;
        if bytes.len() < len {
            return Err("it is shorter than it was".to_string());
        }
        Ok(bytes)
    }
}
