//! The reliability campaign of issue 12: fuzz targets for every input condense accepts, a
//! deterministic mutator, and a minimizer, shared by the `it` tests (a fixed number of cases
//! per target, in CI) and `cargo xtask fuzz --minutes N` (random seeds, for longer).
//!
//! Targets ([`Target`]):
//! - `read-<format>`: each format reader in-process, on mutated shipped transcripts. A rejected
//!   input must give a one-line [`condense_formats::FormatError`] naming the source; an
//!   accepted one must write back byte for byte (read → write with no change), and a read of
//!   it knowing the list an earlier read of its seed kept must be a full read's ([`knowing`]);
//! - `pipeline`: [`condense_host::Pipeline::parse`] on mutated pipeline TOML: refused with one
//!   line `file:line:col: message`, or loaded and printable as TOML that loads again;
//! - `compress-<format>`: the real binary and plugins: `condense compress` then `condense
//!   expand` must give back the input byte for byte, or compress must refuse it in one line;
//! - `expand`: `condense expand` on a mutated compressed file: done, or one line and exit 1.
//!
//! Every check also fails on a panic (in-process: caught; binary: `internal error` or a
//! signal). A failing input is minimized ([`minimize`]) and written under the campaign's
//! failure folder as `<target>/<hash>.<ext>`, which [`campaign::replay`] runs again: the
//! regression cases of `tests/fixtures/fuzz-regressions/`.

pub mod binary;
pub mod campaign;
pub mod corpus;
pub mod kill;
pub mod knowing;
pub mod minimize;
pub mod mutate;
pub mod pipeline;
pub mod rewrite;
pub mod rng;
pub mod spans;

use condense_formats::{Format, ReadOptions};
use std::any::Any;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

/// What can stop a campaign before it runs (not what it finds).
#[derive(Debug, thiserror::Error)]
pub enum FuzzError {
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("no shipped input reads as {0}")]
    NoSeeds(String),
    #[error(
        "unknown fuzz target `{0}` (expected read-<format>, compress-<format>, pipeline or expand)"
    )]
    UnknownTarget(String),
    #[error("target {0} needs the condense binary")]
    NoBinary(String),
}

/// A fuzz target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Read(Format),
    Pipeline,
    Compress(Format),
    Expand,
}

impl Target {
    /// Every target, in-process ones first.
    pub fn all() -> Vec<Target> {
        let mut all: Vec<Target> = Format::ALL.into_iter().map(Target::Read).collect();
        all.push(Target::Pipeline);
        all.extend(Format::ALL.into_iter().map(Target::Compress));
        all.push(Target::Expand);
        all
    }

    /// Whether the target runs the condense binary (slow: a process per case).
    pub fn needs_binary(self) -> bool {
        matches!(self, Target::Compress(_) | Target::Expand)
    }

    pub fn parse(name: &str) -> Result<Target, FuzzError> {
        Target::all()
            .into_iter()
            .find(|t| t.to_string() == name)
            .ok_or_else(|| FuzzError::UnknownTarget(name.to_string()))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Read(format) => write!(f, "read-{format}"),
            Target::Pipeline => f.write_str("pipeline"),
            Target::Compress(format) => write!(f, "compress-{format}"),
            Target::Expand => f.write_str("expand"),
        }
    }
}

/// What a check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// A panic, or the binary killed by a signal.
    Crash,
    /// No answer within the campaign's time limit (`cargo xtask fuzz` only).
    Hang,
    /// Accepted, but what came back is not the input.
    RoundTrip,
    /// Refused, but not in one line naming the file (and the position, for TOML).
    BadError,
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureKind::Crash => "crash",
            FailureKind::Hang => "hang",
            FailureKind::RoundTrip => "round-trip failure",
            FailureKind::BadError => "bad error message",
        })
    }
}

#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: FailureKind,
    pub detail: String,
}

impl Failure {
    fn crash(what: &str, panic: &Box<dyn Any + Send>) -> Failure {
        let msg = condense_text::panic_message(&**panic).unwrap_or("(no message)");
        Failure {
            kind: FailureKind::Crash,
            detail: format!("{what} panicked: {msg}"),
        }
    }

    fn round_trip(what: &str, input: &[u8], output: &[u8]) -> Failure {
        Failure {
            kind: FailureKind::RoundTrip,
            detail: format!("{what}: {}", first_difference(input, output)),
        }
    }
}

/// The outcome of one case.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Read (loaded, compressed) and everything held.
    Accepted,
    /// Refused, as it should be: one line.
    Rejected,
    Failed(Failure),
}

/// Where two byte strings first differ, with a little of each around it.
pub fn first_difference(expected: &[u8], got: &[u8]) -> String {
    let at = expected
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(got.len()));
    let around = |b: &[u8]| {
        let s = at.saturating_sub(20);
        let e = (at + 40).min(b.len());
        format!("{:?}", String::from_utf8_lossy(&b[s.min(e)..e]))
    };
    format!(
        "differs at byte {at} of {} (got {} bytes): expected {} got {}",
        expected.len(),
        got.len(),
        around(expected),
        around(got)
    )
}

/// The reader target: `bytes` read as `source`, with the format forced or detected.
pub fn check_reader(bytes: &[u8], source: &str, format: Option<Format>) -> Verdict {
    let opts = ReadOptions {
        format,
        select: None,
    };
    let doc = match catch_unwind(AssertUnwindSafe(|| {
        condense_formats::read(bytes, source, &opts)
    })) {
        Err(panic) => return Verdict::Failed(Failure::crash("read", &panic)),
        Ok(Err(e)) => {
            let msg = e.to_string();
            let bad = if msg.contains('\n') || msg.contains('\r') {
                Some("error is not one line")
            } else if !msg.contains(source) {
                Some("error does not name the source")
            } else {
                None
            };
            return match bad {
                None => Verdict::Rejected,
                Some(why) => Verdict::Failed(Failure {
                    kind: FailureKind::BadError,
                    detail: format!("{why}: {msg:?}"),
                }),
            };
        }
        Ok(Ok(doc)) => doc,
    };
    match catch_unwind(AssertUnwindSafe(|| doc.write())) {
        Err(panic) => Verdict::Failed(Failure::crash("write", &panic)),
        Ok(Err(e)) => Verdict::Failed(Failure {
            kind: FailureKind::RoundTrip,
            detail: format!("read as {}, but not written back: {e}", doc.format()),
        }),
        Ok(Ok(out)) if out != bytes => Verdict::Failed(Failure::round_trip(
            &format!("read as {} and written back unchanged", doc.format()),
            bytes,
            &out,
        )),
        Ok(Ok(_)) => Verdict::Accepted,
    }
}
