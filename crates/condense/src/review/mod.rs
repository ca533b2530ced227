//! Reviewing what a pipeline does: `condense diff` and `condense snapshot`.
//!
//! Both render conversations with `condense_model::render` (stable: it depends on the
//! conversation only) and run the pipeline against a throwaway store, so a review never changes
//! the state later real runs see. `diff` (and `compare`) run at the clock's time, as `compress`
//! does, so they show what `compress` would do now; `snapshot` runs at a pinned time, so the
//! same inputs always give the same snapshots. Control characters from the conversation (a
//! tool's terminal escapes) are shown escaped, never sent to the terminal.
//!
//! - [`diff`](mod@diff): `condense diff`, each stage's diff with what it did to the probes;
//! - [`snapshot`](mod@snapshot): `condense snapshot`, the CI gate, `--accept`, `--review`;
//! - [`insta_format`]: the snapshot files, in insta's format (cargo-insta reviews them);
//! - [`retention`]: `condense eval`'s probes summed per transcript, and their change;
//! - [`interactive`]: `--review`'s accept / reject / skip questions;
//! - [`report`]: `--json` and `--markdown` for snapshot and compare (a pull request comment).

pub mod diff;
pub mod insta_format;
pub mod interactive;
pub mod report;
pub mod retention;
pub mod snapshot;

pub use diff::diff;
pub use snapshot::snapshot;

use crate::cli::{ColorChoice, ModelArgs};
use crate::commands::{apply_model_args, load_pipeline, parse_now};
use crate::term::escape_controls;
use crate::Failure;
use condense_host::{session_key, LoadedPipeline, RunOptions, RunResult};
use condense_model::render::render;
use condense_model::Conversation;
use condense_store::Store;
use similar::TextDiff;
use std::fmt::Write;
use std::io::IsTerminal;
use std::path::Path;

/// The time `diff` and `compare` run at: `--now` when given, else None (the clock, as for
/// `compress`).
pub(crate) fn review_now(now: Option<&str>) -> Result<Option<i64>, Failure> {
    now.map(parse_now).transpose()
}

pub(crate) struct Recorded<'a> {
    /// The input conversations.
    pub before: &'a [Conversation],
    pub runs: Vec<RunResult>,
}

pub(crate) fn run_recorded<'a>(
    pipeline: &LoadedPipeline,
    convs: &'a [Conversation],
    labels: &[String],
    format: &str,
    now_ms: Option<i64>,
    record_outputs: bool,
) -> Result<Recorded<'a>, Failure> {
    let dir = tempfile::tempdir()
        .map_err(|e| Failure::run(format!("cannot create a temporary store: {e}")))?;
    let store = Store::open(dir.path()).map_err(|e| Failure::run(e.to_string()))?;
    let opts = RunOptions {
        now_ms,
        format: format.to_string(),
        record_outputs,
        ..Default::default()
    };
    let mut runs = Vec::new();
    for (i, conv) in convs.iter().enumerate() {
        let session = session_key(conv, labels.get(i).map_or("", String::as_str), None);
        runs.push(pipeline.run(conv.clone(), &store, &session, &opts)?);
    }
    Ok(Recorded {
        before: convs,
        runs,
    })
}

pub(crate) fn load(pipeline: Option<&Path>, model: &ModelArgs) -> Result<LoadedPipeline, Failure> {
    let mut p = load_pipeline(pipeline)?;
    apply_model_args(&mut p, model)?;
    Ok(LoadedPipeline::load(p)?)
}

pub(crate) fn use_color(choice: ColorChoice) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
        }
    }
}

/// A unified diff of two renderings, coloured on request.
pub(crate) fn unified(old: &str, new: &str, old_name: &str, new_name: &str, color: bool) -> String {
    let diff = TextDiff::from_lines(old, new);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string();
    if !color {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let code = if line.starts_with("+++") || line.starts_with("---") {
            "1"
        } else if line.starts_with('+') {
            "32"
        } else if line.starts_with('-') {
            "31"
        } else if line.starts_with("@@") {
            "36"
        } else {
            ""
        };
        if code.is_empty() {
            out.push_str(line);
        } else {
            let body = line.strip_suffix('\n').unwrap_or(line);
            let _ = write!(out, "\x1b[{code}m{body}\x1b[0m");
            if line.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    out
}

pub(crate) fn render_all(convs: &[&Conversation], labels: &[String]) -> String {
    let mut out = String::new();
    for (i, c) in convs.iter().enumerate() {
        if convs.len() > 1 {
            let _ = writeln!(
                out,
                "=== conversation {} ===\n",
                labels.get(i).map_or("", String::as_str)
            );
        }
        out.push_str(&escape_controls(&render(c)));
    }
    out
}
