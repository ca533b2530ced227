//! `condense compare`: several pipelines side by side on the same transcripts.
//!
//! Each pipeline runs on each transcript against a throwaway store, at the clock's time as
//! `compress` does (or `--now`), so it never touches real stage state. A transcript that cannot
//! be read, or that a pipeline fails on, is named in one line and skipped; the others go on and
//! the exit code is 1.
//!
//! Each pipeline's output is also scored with `condense eval`'s probes (in the JSON, and in
//! `--markdown`'s summary for a pull request comment).

use crate::cli::CompareArgs;
use crate::input::{collect_inputs, read_path, Skipped};
use crate::review::report::cell;
use crate::review::retention::{listed, signed, Retention, KINDS};
use crate::review::{load, review_now, run_recorded};
use crate::Failure;
use condense_text::thousands;
use serde::Serialize;
use std::fmt::Write;

#[derive(Debug, Serialize)]
struct Comparison {
    transcript: String,
    format: &'static str,
    conversations: usize,
    tokens_before: usize,
    context_window: usize,
    pipelines: Vec<PipelineResult>,
}

#[derive(Debug, Serialize)]
struct PipelineResult {
    pipeline: String,
    stages: Vec<StageResult>,
    tokens_after: usize,
    tokens_saved: usize,
    /// tokens_after of the largest conversation / context window.
    window_share: f64,
    millis: f64,
    /// Tokens, cut and `condense eval`'s probes on the output.
    retention: Retention,
}

#[derive(Debug, Serialize)]
struct StageResult {
    name: String,
    status: String,
    tokens_after: usize,
    millis: f64,
}

pub fn compare(args: CompareArgs) -> Result<(), Failure> {
    if args.pipelines.len() < 2 {
        return Err(Failure::usage(
            "compare needs at least two --pipeline files",
        ));
    }
    let now = review_now(args.now.as_deref())?;
    let pipelines = args
        .pipelines
        .iter()
        .map(|p| Ok((p.display().to_string(), load(Some(p), &args.model)?)))
        .collect::<Result<Vec<_>, Failure>>()?;
    let mut skipped = Skipped::default();
    let files = collect_inputs(&args.inputs, None, &mut skipped)?;
    let mut all = Vec::new();
    for file in &files {
        let Some(doc) = skipped.read(file, read_path) else {
            continue;
        };
        let labels = doc.labels();
        let mut cmp = Comparison {
            transcript: file.display().to_string(),
            format: doc.format().as_str(),
            conversations: doc.conversations().len(),
            tokens_before: 0,
            context_window: 0,
            pipelines: Vec::new(),
        };
        let mut failed = false;
        for (name, pipeline) in &pipelines {
            let Some(rec) = skipped.read(file, |_| {
                run_recorded(
                    pipeline,
                    doc.conversations(),
                    &labels,
                    doc.format().as_str(),
                    now,
                    false,
                )
                .map_err(|f| Failure::run(format!("pipeline {name}: {}", f.message)))
            }) else {
                failed = true;
                break;
            };
            cmp.tokens_before = rec.runs.iter().map(|r| r.tokens_before).sum();
            cmp.context_window = pipeline.pipeline.budget.context_window;
            let stage_count = rec.runs.first().map_or(0, |r| r.stages.len());
            let stages = (0..stage_count)
                .map(|i| StageResult {
                    name: rec.runs[0].stages[i].name.clone(),
                    status: rec.runs[0].stages[i].status.to_string(),
                    tokens_after: rec.runs.iter().map(|r| r.stages[i].tokens_after).sum(),
                    millis: rec.runs.iter().map(|r| r.stages[i].millis).sum(),
                })
                .collect();
            let after: usize = rec.runs.iter().map(|r| r.tokens_after).sum();
            let largest = rec.runs.iter().map(|r| r.tokens_after).max().unwrap_or(0);
            cmp.pipelines.push(PipelineResult {
                pipeline: name.clone(),
                stages,
                tokens_after: after,
                tokens_saved: cmp.tokens_before.saturating_sub(after),
                window_share: largest as f64 / cmp.context_window.max(1) as f64,
                millis: rec
                    .runs
                    .iter()
                    .flat_map(|r| r.stages.iter())
                    .map(|s| s.millis)
                    .sum(),
                retention: Retention::measure(
                    rec.before,
                    &rec.runs.iter().map(|r| &r.conversation).collect::<Vec<_>>(),
                    cmp.tokens_before,
                    after,
                ),
            });
        }
        if !failed {
            all.push(cmp);
        }
    }
    if args.json {
        crate::output::print_json(&all)?;
    } else if args.markdown {
        let mut text = "### condense compare\n\n".to_string();
        for c in &all {
            text.push_str(&markdown(c));
        }
        crate::output::print(&text)?;
    } else {
        for c in &all {
            crate::output::print(&render(c))?;
        }
    }
    skipped.outcome(all.len())
}

fn render(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} ({}, {} conversation{}, {} tokens, window {})",
        c.transcript,
        c.format,
        c.conversations,
        if c.conversations == 1 { "" } else { "s" },
        thousands(c.tokens_before),
        thousands(c.context_window)
    );
    let width = c
        .pipelines
        .iter()
        .map(|p| p.pipeline.len())
        .max()
        .unwrap_or(8)
        .max(8);
    let _ = writeln!(
        o,
        "  {:<width$}  {:>10} {:>10} {:>7} {:>9}   tokens after each stage",
        "pipeline", "after", "saved", "window", "ms"
    );
    for p in &c.pipelines {
        let chain: Vec<String> = p
            .stages
            .iter()
            .map(|s| {
                let mark = if s.status == "ran" {
                    String::new()
                } else {
                    format!(" ({})", s.status)
                };
                format!("{} {}{mark}", s.name, thousands(s.tokens_after))
            })
            .collect();
        let _ = writeln!(
            o,
            "  {:<width$}  {:>10} {:>10} {:>6.1}% {:>9.1}   {}",
            p.pipeline,
            thousands(p.tokens_after),
            thousands(p.tokens_saved),
            p.window_share * 100.0,
            p.millis,
            chain.join(" → ")
        );
    }
    o.push('\n');
    o
}

/// `--markdown`: a table per transcript, one row per pipeline; the first pipeline is the
/// reference the others' token change is measured from.
fn markdown(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "#### `{}` ({}, {} conversation{}, {} tokens)\n",
        cell(&c.transcript),
        c.format,
        c.conversations,
        if c.conversations == 1 { "" } else { "s" },
        thousands(c.tokens_before)
    );
    o.push_str(
        "| pipeline | tokens | cut | artifact | errors | request | integrity | stages that changed it |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    let reference = c.pipelines.first().map(|p| p.tokens_after);
    let mut lost = String::new();
    for (i, p) in c.pipelines.iter().enumerate() {
        let tokens = match reference {
            Some(r) if i > 0 && r != p.tokens_after => format!(
                "{} ({})",
                thousands(p.tokens_after),
                signed(p.tokens_after as i64 - r as i64)
            ),
            _ => thousands(p.tokens_after),
        };
        let probes: Vec<String> = KINDS
            .iter()
            .map(|k| p.retention.kind(k).0.to_string())
            .collect();
        let mut before = c.tokens_before;
        let mut stages = Vec::new();
        for s in &p.stages {
            if s.tokens_after != before {
                stages.push(format!(
                    "`{}` {}",
                    cell(&s.name),
                    signed(s.tokens_after as i64 - before as i64)
                ));
            }
            before = s.tokens_after;
        }
        let _ = writeln!(
            o,
            "| `{}` | {tokens} | {} | {} | {} |",
            cell(&p.pipeline),
            p.retention.cut,
            probes.join(" | "),
            if stages.is_empty() {
                "none".to_string()
            } else {
                stages.join(", ")
            }
        );
        let gone: Vec<String> = KINDS
            .iter()
            .filter(|k| !p.retention.kind(k).1.is_empty())
            .map(|k| format!("{k}: {}", listed(p.retention.kind(k).1)))
            .collect();
        if !gone.is_empty() {
            let _ = writeln!(
                lost,
                "- `{}` lost {}",
                cell(&p.pipeline),
                cell(&gone.join("; "))
            );
        }
    }
    if !lost.is_empty() {
        o.push('\n');
        o.push_str(&lost);
    }
    o.push('\n');
    o
}
