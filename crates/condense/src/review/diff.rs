//! `condense diff`: each stage's unified diff, under a header with its figures and, when the
//! stage changed what `condense eval`'s probes find, which probes it lost (or `--json`).

use super::retention::Retention;
use super::{load, render_all, review_now, run_recorded, unified, use_color};
use crate::cli::DiffArgs;
use crate::input::{is_folder, read_at, read_input, Input, Skipped};
use crate::term::escape_controls;
use crate::Failure;
use condense_eval::Probes;
use condense_host::LoadedPipeline;
use condense_model::Conversation;
use condense_text::thousands;
use serde::Serialize;

/// One input's diff, as `--json` prints it.
#[derive(Debug, Serialize)]
struct DiffOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    /// The whole pipeline's retention (the last stage's output against the input).
    retention: Retention,
    stages: Vec<StageDiff>,
}

#[derive(Debug, Serialize)]
struct StageDiff {
    /// The stage's place in the pipeline, from 1.
    number: usize,
    stage: String,
    status: String,
    tokens_before: usize,
    tokens_after: usize,
    tokens_saved: usize,
    millis: f64,
    /// What the stage did to the probes ("artifact 4/4 -> 3/4 (lost: src/a.rs)"); empty when
    /// nothing.
    probes: Vec<String>,
    /// The unified diff; null when the stage changed nothing.
    diff: Option<String>,
}

/// `--json` on a folder.
#[derive(Debug, Serialize)]
struct FolderOut<'a> {
    files: Vec<DiffOut>,
    #[serde(skip_serializing_if = "Skipped::is_empty")]
    skipped: &'a Skipped,
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
    let color = !args.json && use_color(args.color);
    if !is_folder(&args.input) {
        let input = read_input(&args.input)?;
        let out = diff_input(&pipeline, &input, &args, now, color)?;
        return if args.json {
            crate::output::print_json(&out)
        } else {
            crate::output::print(&text(&out, color))
        };
    }
    let mut skipped = Skipped::default();
    let files = crate::folder::sessions_in(&args.input.file, None, &mut skipped)?;
    let mut outs = Vec::new();
    for file in &files {
        let Some(input) = skipped.read(file, |p| read_at(p, &args.input)) else {
            continue;
        };
        let Some(mut out) =
            skipped.read(file, |_| diff_input(&pipeline, &input, &args, now, color))
        else {
            continue;
        };
        out.file = Some(file.display().to_string());
        if !args.json {
            let header = format!("════ {} ════", escape_controls(&file.display().to_string()));
            let body = text(&out, color);
            crate::output::print(&if color {
                format!("\x1b[1m{header}\x1b[0m\n\n{body}")
            } else {
                format!("{header}\n\n{body}")
            })?;
        }
        outs.push(out);
    }
    let done = outs.len();
    if args.json {
        crate::output::print_json(&FolderOut {
            files: outs,
            skipped: &skipped,
        })?;
        // The skipped files are in the JSON too; the exit code still says so.
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
) -> Result<DiffOut, Failure> {
    let labels = input.doc.labels();
    let rec = run_recorded(
        pipeline,
        input.doc.conversations(),
        &labels,
        input.doc.format().as_str(),
        now,
        true,
    )?;
    let before_tokens: usize = rec.runs.iter().map(|r| r.tokens_before).sum();
    let originals: Vec<&Conversation> = rec.before.iter().collect();
    // The probes before the first stage: everything the original holds is kept.
    let probes: Vec<Probes> = rec.before.iter().map(Probes::from_original).collect();
    let mut previous = Retention::measure_with(
        &probes,
        rec.before,
        &originals,
        before_tokens,
        before_tokens,
    );
    let mut stages = Vec::new();
    let stage_count = rec.runs.first().map_or(0, |r| r.stages.len());
    for i in 0..stage_count {
        let first = &rec.runs[0].stages[i];
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
        let after: usize = rec.runs.iter().map(|r| r.stages[i].tokens_after).sum();
        let retention = Retention::measure_with(&probes, rec.before, &next, before_tokens, after);
        let changes = retention.probe_changes(&previous);
        previous = retention;
        if args.stage.as_ref().is_some_and(|s| *s != first.name) {
            continue;
        }
        let (a, b) = (render_all(&prev, &labels), render_all(&next, &labels));
        stages.push(StageDiff {
            number: i + 1,
            stage: first.name.clone(),
            status: first.status.to_string(),
            tokens_before: before,
            tokens_after: before - saved,
            tokens_saved: saved,
            millis: rec.runs.iter().map(|r| r.stages[i].millis).sum(),
            probes: changes,
            diff: (a != b).then(|| {
                unified(
                    &a,
                    &b,
                    &format!("before {}", first.name),
                    &format!("after {}", first.name),
                    color,
                )
            }),
        });
    }
    Ok(DiffOut {
        file: None,
        retention: previous,
        stages,
    })
}

/// The text `condense diff` prints for one input.
fn text(out: &DiffOut, color: bool) -> String {
    let mut o = String::new();
    for s in &out.stages {
        let header = format!(
            "━━ stage {} `{}` ({}): {} → {} tokens, saved {}, {:.1} ms ━━\n",
            s.number,
            s.stage,
            s.status,
            thousands(s.tokens_before),
            thousands(s.tokens_after),
            thousands(s.tokens_saved),
            s.millis
        );
        o.push_str(&if color {
            format!("\x1b[1;35m{}\x1b[0m\n", header.trim_end())
        } else {
            header
        });
        if !s.probes.is_empty() {
            let line = format!("probes: {}", s.probes.join("; "));
            o.push_str(&if color {
                format!("\x1b[1;33m{line}\x1b[0m\n")
            } else {
                format!("{line}\n")
            });
        }
        match &s.diff {
            None => o.push_str("(no change)\n\n"),
            Some(d) => {
                o.push_str(d);
                o.push('\n');
            }
        }
    }
    o
}
