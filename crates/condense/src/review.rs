//! Reviewing what a pipeline does: `condense diff` and `condense snapshot`.
//!
//! Both render conversations with `condense_model::render` (stable: it depends on the
//! conversation only) and run the pipeline against a throwaway store, so a review never changes
//! the state later real runs see. `diff` (and `compare`) run at the clock's time, as `compress`
//! does, so they show what `compress` would do now; `snapshot` runs at a pinned time, so the
//! same inputs always give the same snapshots. Control characters from the conversation (a
//! tool's terminal escapes) are shown escaped, never sent to the terminal.

use crate::cli::ModelArgs;
use crate::cli::{ColorChoice, DiffArgs, SnapshotArgs};
use crate::commands::{apply_model_args, load_pipeline, parse_now};
use crate::input::{collect_inputs, is_folder, read_at, read_input, read_path, Input, Skipped};
use crate::stats::num;
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

/// The time `snapshot` runs at unless `--now` says otherwise: fixed, so snapshots are
/// reproducible.
const SNAPSHOT_EPOCH_MS: i64 = 0;

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
fn unified(old: &str, new: &str, old_name: &str, new_name: &str, color: bool) -> String {
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

fn render_all(convs: &[&Conversation], labels: &[String]) -> String {
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

/// `condense diff`: on a file, the diff of each stage; on a folder, the same for every session
/// in it, each under a header naming the file (a file that cannot be read is skipped, exit 1).
pub fn diff(args: DiffArgs) -> Result<(), Failure> {
    let now = review_now(args.now.as_deref())?;
    let pipeline = load(args.pipeline.as_deref(), &args.model)?;
    if let Some(only) = &args.stage {
        if !pipeline.stages.iter().any(|s| &s.spec.name == only) {
            let names: Vec<&str> = pipeline
                .stages
                .iter()
                .map(|s| s.spec.name.as_str())
                .collect();
            return Err(Failure::usage(format!(
                "--stage: no stage named `{only}` (stages: {})",
                names.join(", ")
            )));
        }
    }
    let color = use_color(args.color);
    if !is_folder(&args.input) {
        let input = read_input(&args.input)?;
        return crate::output::print(&diff_input(&pipeline, &input, &args, now, color)?);
    }
    let mut skipped = Skipped::default();
    let files = crate::folder::sessions_in(&args.input.file, None, &mut skipped)?;
    let mut done = 0;
    for file in &files {
        let Some(input) = skipped.read(file, |p| read_at(p, &args.input)) else {
            continue;
        };
        let Some(text) = skipped.read(file, |_| diff_input(&pipeline, &input, &args, now, color))
        else {
            continue;
        };
        let header = format!("════ {} ════", escape_controls(&file.display().to_string()));
        crate::output::print(&if color {
            format!("\x1b[1m{header}\x1b[0m\n\n{text}")
        } else {
            format!("{header}\n\n{text}")
        })?;
        done += 1;
    }
    skipped.outcome(done)
}

/// The diff of every stage (or `--stage`'s) of one input.
fn diff_input(
    pipeline: &LoadedPipeline,
    input: &Input,
    args: &DiffArgs,
    now: Option<i64>,
    color: bool,
) -> Result<String, Failure> {
    let labels = input.doc.labels();
    let rec = run_recorded(
        pipeline,
        input.doc.conversations(),
        &labels,
        input.doc.format().as_str(),
        now,
        true,
    )?;
    let mut out = String::new();
    let stage_count = rec.runs.first().map_or(0, |r| r.stages.len());
    for i in 0..stage_count {
        let first = &rec.runs[0].stages[i];
        if args.stage.as_ref().is_some_and(|s| *s != first.name) {
            continue;
        }
        let prev: Vec<&Conversation> = rec
            .runs
            .iter()
            .zip(rec.before)
            .map(|(r, b)| {
                if i == 0 {
                    b
                } else {
                    r.stages[i - 1].output.as_ref().unwrap_or(b)
                }
            })
            .collect();
        let next: Vec<&Conversation> = rec
            .runs
            .iter()
            .zip(&prev)
            .map(|(r, p)| r.stages[i].output.as_ref().unwrap_or(p))
            .collect();
        let saved: usize = rec.runs.iter().map(|r| r.stages[i].tokens_saved).sum();
        let before: usize = rec.runs.iter().map(|r| r.stages[i].tokens_before).sum();
        let millis: f64 = rec.runs.iter().map(|r| r.stages[i].millis).sum();
        let header = format!(
            "━━ stage {} `{}` ({}): {} → {} tokens, saved {}, {:.1} ms ━━\n",
            i + 1,
            first.name,
            first.status,
            num(before),
            num(before - saved),
            num(saved),
            millis
        );
        out.push_str(&if color {
            format!("\x1b[1;35m{}\x1b[0m\n", header.trim_end())
        } else {
            header
        });
        let (a, b) = (render_all(&prev, &labels), render_all(&next, &labels));
        if a == b {
            out.push_str("(no change)\n\n");
        } else {
            out.push_str(&unified(
                &a,
                &b,
                &format!("before {}", first.name),
                &format!("after {}", first.name),
                color,
            ));
            out.push('\n');
        }
    }
    Ok(out)
}

/// What one snapshot file holds: the stage's report (without timings) and the rendering.
fn snapshot_text(rec: &Recorded<'_>, i: usize, labels: &[String]) -> String {
    let mut out = String::new();
    for (ci, r) in rec.runs.iter().enumerate() {
        let s = &r.stages[i];
        let mut report = serde_json::to_value(&s.report).unwrap_or_default();
        if let Some(obj) = report.as_object_mut() {
            obj.insert("status".into(), s.status.into());
            obj.insert("tokens_before".into(), s.tokens_before.into());
            obj.insert("tokens_after".into(), s.tokens_after.into());
            if let Some(e) = &s.error {
                obj.insert("error".into(), e.clone().into());
            }
        }
        let label = labels.get(ci).map_or("", String::as_str);
        let _ = writeln!(
            out,
            "# report{}",
            if label.is_empty() {
                String::new()
            } else {
                format!(" {label}")
            }
        );
        let _ = writeln!(
            out,
            "{}\n",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    }
    let outputs: Vec<&Conversation> = rec
        .runs
        .iter()
        .zip(rec.before)
        .map(|(r, b)| r.stages[i].output.as_ref().unwrap_or(b))
        .collect();
    out.push_str("# conversation\n");
    out.push_str(&render_all(&outputs, labels));
    out
}

fn stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map_or("input".into(), |n| n.to_string_lossy().to_string());
    let parent = path
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().to_string());
    let raw = match parent {
        Some(p) => format!("{p}__{name}"),
        None => name,
    };
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `condense snapshot`: exit 0 when every snapshot matches (or `--accept`), 1 when anything
/// differs (new versions written beside the old as `.snap.new`) or a transcript could not be
/// read (named on stderr and skipped; the others are still compared).
pub fn snapshot(args: SnapshotArgs) -> Result<(), Failure> {
    let now = Some(match &args.now {
        Some(t) => parse_now(t)?,
        None => SNAPSHOT_EPOCH_MS,
    });
    let pipeline = load(args.pipeline.as_deref(), &ModelArgs::default())?;
    let mut skipped = Skipped::default();
    let files = collect_inputs(&args.inputs, None, &mut skipped)?;
    if files.is_empty() && skipped.is_empty() {
        return Err(Failure::usage("no transcripts to snapshot"));
    }
    let color = use_color(args.color);
    let (mut same, mut changed, mut added, mut accepted) = (0, 0, 0, 0);
    let mut done = 0;
    for file in &files {
        let Some(doc) = skipped.read(file, read_path) else {
            continue;
        };
        let labels = doc.labels();
        // A transcript the pipeline fails on is named and skipped like an unreadable one.
        let Some(rec) = skipped.read(file, |_| {
            run_recorded(
                &pipeline,
                doc.conversations(),
                &labels,
                doc.format().as_str(),
                now,
                true,
            )
        }) else {
            continue;
        };
        let dir = args.snapshots.join(stem(file));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Failure::run(format!("{}: {e}", dir.display())))?;
        done += 1;
        let stage_count = rec.runs.first().map_or(0, |r| r.stages.len());
        for i in 0..stage_count {
            let name = &rec.runs[0].stages[i].name;
            let snap = dir.join(format!("{:02}-{}.snap", i + 1, name));
            let pending = snap.with_extension("snap.new");
            let text = snapshot_text(&rec, i, &labels);
            let old = std::fs::read_to_string(&snap).ok();
            let write = |p: &Path| {
                std::fs::write(p, &text).map_err(|e| Failure::run(format!("{}: {e}", p.display())))
            };
            if old.as_deref() == Some(text.as_str()) {
                same += 1;
                let _ = std::fs::remove_file(&pending);
                continue;
            }
            if args.accept {
                write(&snap)?;
                let _ = std::fs::remove_file(&pending);
                accepted += 1;
                continue;
            }
            write(&pending)?;
            match old {
                Some(old) => {
                    changed += 1;
                    crate::output::print(&unified(
                        &old,
                        &text,
                        &snap.display().to_string(),
                        &pending.display().to_string(),
                        color,
                    ))?;
                }
                None => {
                    added += 1;
                    crate::output::print(&format!("new snapshot: {}\n", pending.display()))?;
                }
            }
        }
    }
    eprintln!(
        "condense snapshot: {done} transcript{}, {same} unchanged, {changed} changed, {added} new{}{}",
        if done == 1 { "" } else { "s" },
        if accepted > 0 {
            format!(", {accepted} accepted")
        } else {
            String::new()
        },
        skipped.suffix()
    );
    if changed + added > 0 {
        return Err(Failure {
            code: 1,
            message: format!(
                "{} snapshot{} differ; review the .snap.new files, then run again with --accept{}",
                changed + added,
                if changed + added == 1 { "" } else { "s" },
                skipped.suffix()
            ),
            detail: None,
        });
    }
    skipped.outcome(done)
}
