//! `condense eval`: what survives compression, measured (see `condense eval --help`).
//!
//! The probes, scoring, window and runs live in `condense-eval`; this module reads the flags,
//! walks the inputs, and prints a table per input file plus totals (or the same as JSON).

use crate::cli::EvalArgs;
use crate::commands::{load_pipeline, parse_now};
use crate::input::{collect_inputs, files, read_path, Skipped};
use crate::Failure;
use condense_eval::judge::api::Api;
use condense_eval::judge::{Judge, JudgeConfig, JudgeScores};
use condense_eval::run::{cut, ConversationEval, Scores, DEFAULT_NOW_MS};
use condense_eval::{evaluate, Baseline, Candidate, CandidateKind, EvalError, Settings};
use condense_host::{LoadedPipeline, Pipeline};
use condense_text::thousands;
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

/// How many lost probes of each kind a table lists before counting the rest.
const SHOW_LOST: usize = 3;

impl From<EvalError> for Failure {
    fn from(e: EvalError) -> Self {
        if e.is_config_error() {
            Failure::usage(e.to_string())
        } else {
            Failure::run(e.to_string())
        }
    }
}

#[derive(Debug, Serialize)]
struct Report {
    settings: SettingsOut,
    inputs: Vec<FileEval>,
    totals: Vec<Total>,
    /// Files that could not be read (each named on stderr too).
    #[serde(skip_serializing_if = "Skipped::is_empty")]
    unreadable: Skipped,
}

#[derive(Debug, Serialize)]
struct SettingsOut {
    cut: f64,
    context_window: Option<usize>,
    min_tokens: usize,
    now_ms: i64,
    pipelines: Vec<String>,
}

#[derive(Debug, Serialize)]
struct FileEval {
    file: String,
    format: &'static str,
    /// Why the whole file was skipped (no conversation long enough).
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<String>,
    conversations: Vec<ConversationEval>,
    totals: Vec<Total>,
}

/// One pipeline summed over conversations.
#[derive(Debug, Clone, Serialize)]
struct Total {
    pipeline: String,
    kind: &'static str,
    conversations: usize,
    tokens_before: usize,
    tokens_after: usize,
    cut: f64,
    /// Conversations whose output does not fit its window.
    unfit: usize,
    scores: Scores,
    #[serde(skip_serializing_if = "Option::is_none")]
    judge: Option<JudgeAverages>,
    #[serde(skip)]
    judge_sums: Option<([u64; 4], usize)>,
}

/// The judge's average score (0-5) per question.
#[derive(Debug, Clone, Copy, Serialize)]
struct JudgeAverages {
    artifact: f64,
    recall: f64,
    continuation: f64,
    decision: f64,
}

impl Total {
    fn new(pipeline: &str, kind: &'static str) -> Total {
        Total {
            pipeline: pipeline.to_string(),
            kind,
            conversations: 0,
            tokens_before: 0,
            tokens_after: 0,
            cut: 0.0,
            unfit: 0,
            scores: Scores::default(),
            judge: None,
            judge_sums: None,
        }
    }

    fn add(&mut self, before: usize, r: &condense_eval::PipelineEval) {
        self.conversations += 1;
        self.tokens_before += before;
        self.tokens_after += r.tokens_after;
        self.cut = cut(self.tokens_before, self.tokens_after);
        self.unfit += usize::from(!r.fits);
        self.scores += r.scores;
        if let Some(j) = &r.judge {
            self.add_judge(j);
        }
    }

    fn add_judge(&mut self, j: &JudgeScores) {
        let (sums, n) = self.judge_sums.get_or_insert(([0; 4], 0));
        for (s, v) in sums.iter_mut().zip(j.scores()) {
            *s += u64::from(v);
        }
        *n += 1;
        self.refresh_judge();
    }

    /// `judge` from `judge_sums`.
    fn refresh_judge(&mut self) {
        self.judge = self.judge_sums.map(|(sums, n)| {
            let avg = |i: usize| sums[i] as f64 / n.max(1) as f64;
            JudgeAverages {
                artifact: avg(0),
                recall: avg(1),
                continuation: avg(2),
                decision: avg(3),
            }
        });
    }

    fn merge(&mut self, o: &Total) {
        self.conversations += o.conversations;
        self.tokens_before += o.tokens_before;
        self.tokens_after += o.tokens_after;
        self.cut = cut(self.tokens_before, self.tokens_after);
        self.unfit += o.unfit;
        self.scores += o.scores;
        if let Some((sums, n)) = o.judge_sums {
            let (mine, m) = self.judge_sums.get_or_insert(([0; 4], 0));
            for (a, b) in mine.iter_mut().zip(sums) {
                *a += b;
            }
            *m += n;
            self.refresh_judge();
        }
    }
}

fn parse_number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, Failure> {
    value
        .trim()
        .replace('_', "")
        .parse()
        .map_err(|_| Failure::usage(format!("{flag}: expected a whole number, got `{value}`")))
}

fn settings(args: &EvalArgs) -> Result<Settings, Failure> {
    let cut: f64 = args.cut.trim().parse().unwrap_or(f64::NAN);
    if !(cut > 0.0 && cut < 1.0) {
        return Err(Failure::usage(format!(
            "--cut: expected a fraction between 0 and 1 (0.85 = lose 85% of the tokens), got `{}`",
            args.cut
        )));
    }
    let context_window = args
        .context_window
        .as_deref()
        .map(|w| parse_number::<usize>("--context-window", w))
        .transpose()?;
    if let Some(w) = context_window {
        condense_eval::Window::with_context_window(w)
            .apply(&mut condense_budget::BudgetConfig::default())
            .map_err(|e| Failure::usage(format!("--context-window: {e}")))?;
    }
    Ok(Settings {
        cut,
        context_window,
        min_tokens: parse_number("--min-tokens", &args.min_tokens)?,
        now_ms: match args.now.as_deref() {
            Some(now) => parse_now(now)?,
            None => DEFAULT_NOW_MS,
        },
    })
}

/// The pipelines (`-p`, else the default) then the baselines, each loaded once to fail early
/// on a missing plugin or a rejected config.
fn candidates(args: &EvalArgs) -> Result<Vec<Candidate>, Failure> {
    let mut out = Vec::new();
    if args.pipelines.is_empty() {
        out.push(Candidate {
            label: "default".into(),
            kind: CandidateKind::Pipeline(Box::new(load_pipeline(None)?)),
        });
    }
    for path in &args.pipelines {
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        let label = if out.iter().any(|c: &Candidate| c.label == name) {
            path.display().to_string()
        } else {
            name
        };
        out.push(Candidate {
            label,
            kind: CandidateKind::Pipeline(Box::new(load_pipeline(Some(path))?)),
        });
    }
    let mut baselines: Vec<Baseline> = Vec::new();
    let mut none = false;
    for name in &args.baselines {
        match Baseline::parse(name.trim())? {
            Some(b) if !baselines.contains(&b) => baselines.push(b),
            Some(_) => {}
            None => none = true,
        }
    }
    if none && !baselines.is_empty() {
        return Err(Failure::usage(
            "--baseline none cannot be combined with other baselines",
        ));
    }
    if args.baselines.is_empty() {
        baselines = Baseline::ALL.to_vec();
    }
    out.extend(baselines.into_iter().map(|b| Candidate {
        label: b.name().to_string(),
        kind: CandidateKind::Baseline(b),
    }));
    // Load each once at a typical window: a missing plugin fails now, not after an hour.
    let window = condense_eval::Window::with_context_window(200_000);
    for c in &out {
        let pipeline = match &c.kind {
            CandidateKind::Pipeline(p) => Pipeline::clone(p),
            CandidateKind::Baseline(b) => b.pipeline(&window)?,
        };
        LoadedPipeline::load(pipeline).map_err(|e| {
            let f = Failure::from(e);
            Failure {
                message: format!("pipeline `{}`: {}", c.label, f.message),
                ..f
            }
        })?;
    }
    Ok(out)
}

fn judge(args: &EvalArgs) -> Result<Option<Judge>, Failure> {
    let Some(api) = args.judge.as_deref() else {
        if args.judge_model.is_some()
            || args.judge_base_url.is_some()
            || args.judge_api_key_env.is_some()
        {
            return Err(Failure::usage(
                "--judge-model, --judge-base-url and --judge-api-key-env need --judge anthropic|openai",
            ));
        }
        return Ok(None);
    };
    let api = Api::parse(api.trim()).ok_or_else(|| {
        Failure::usage(format!(
            "--judge: expected anthropic or openai, got `{api}`"
        ))
    })?;
    let config = JudgeConfig {
        api,
        model: args.judge_model.clone().unwrap_or_default(),
        base_url: args.judge_base_url.clone(),
        api_key_env: args.judge_api_key_env.clone(),
        timeout: Duration::from_secs(300),
    };
    Ok(Some(Judge::new(&config, &|name| std::env::var(name).ok())?))
}

/// `condense eval`.
pub fn eval(args: EvalArgs) -> Result<(), Failure> {
    let settings = settings(&args)?;
    let judge = judge(&args)?;
    let candidates = candidates(&args)?;
    let mut report = Report {
        settings: SettingsOut {
            cut: settings.cut,
            context_window: settings.context_window,
            min_tokens: settings.min_tokens,
            now_ms: settings.now_ms,
            pipelines: candidates.iter().map(|c| c.label.clone()).collect(),
        },
        inputs: Vec::new(),
        totals: candidates
            .iter()
            .map(|c| Total::new(&c.label, kind_of(c)))
            .collect(),
        unreadable: Skipped::default(),
    };
    let files = collect_inputs(&args.inputs, None, &mut report.unreadable)?;
    if files.is_empty() && report.unreadable.is_empty() {
        return Err(Failure::usage("no transcripts to evaluate"));
    }
    for (n, file) in files.iter().enumerate() {
        let Some(doc) = report.unreadable.read(file, read_path) else {
            continue;
        };
        let progress = (n + 1, files.len());
        let fe = eval_file(file, &doc, progress, &candidates, &settings, judge.as_ref())?;
        for (t, ft) in report.totals.iter_mut().zip(&fe.totals) {
            t.merge(ft);
        }
        if !args.json {
            print!("{}", render_file(&fe));
        }
        report.inputs.push(fe);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| Failure::run(e.to_string()))?
        );
    } else {
        print!("{}", render_totals(&report));
    }
    report.unreadable.outcome(report.inputs.len())
}

fn kind_of(c: &Candidate) -> &'static str {
    match c.kind {
        CandidateKind::Pipeline(_) => "pipeline",
        CandidateKind::Baseline(_) => "baseline",
    }
}

fn eval_file(
    file: &Path,
    doc: &condense_formats::Document,
    (n, of): (usize, usize),
    candidates: &[Candidate],
    settings: &Settings,
    judge: Option<&Judge>,
) -> Result<FileEval, Failure> {
    let source = file.display().to_string();
    let count = doc.conversations().len();
    eprintln!(
        "condense eval: [{n}/{of}] {source}: {count} conversation{}",
        if count == 1 { "" } else { "s" }
    );
    let mut fe = FileEval {
        file: source.clone(),
        format: doc.format().as_str(),
        skipped: None,
        conversations: Vec::new(),
        totals: candidates
            .iter()
            .map(|c| Total::new(&c.label, kind_of(c)))
            .collect(),
    };
    for i in 0..count {
        let ce = evaluate(doc, i, &source, candidates, settings, judge)?;
        if let Some(w) = &ce.window {
            eprintln!(
                "condense eval:   {}{} tokens at a {}-token window: done",
                if ce.label.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", ce.label)
                },
                thousands(ce.tokens_before),
                thousands(w.context_window)
            );
        }
        for (t, r) in fe.totals.iter_mut().zip(&ce.results) {
            t.add(ce.tokens_before, r);
        }
        fe.conversations.push(ce);
    }
    if fe.conversations.iter().all(|c| c.skipped.is_some()) {
        let largest = fe
            .conversations
            .iter()
            .map(|c| c.tokens_before)
            .max()
            .unwrap_or(0);
        fe.skipped = Some(format!(
            "not long enough to need compressing: {} under --min-tokens {} (largest {} tokens)",
            match count {
                1 => "its conversation is".to_string(),
                n => format!("all {n} conversations are"),
            },
            thousands(settings.min_tokens),
            thousands(largest)
        ));
        eprintln!(
            "condense eval:   skipped: {}",
            fe.skipped.as_deref().unwrap_or_default()
        );
    }
    Ok(fe)
}

fn pct(f: f64) -> String {
    format!("{:.1}%", f * 100.0)
}

/// The table header and one row per pipeline.
fn table(o: &mut String, totals: &[Total], lost: Option<&dyn Fn(usize) -> Vec<String>>) {
    let width = totals
        .iter()
        .map(|t| t.pipeline.chars().count())
        .max()
        .unwrap_or(8)
        .max(8);
    let judged = totals.iter().any(|t| t.judge.is_some());
    let _ = write!(
        o,
        "  {:<width$}  {:>10} {:>7}  {:>8}  {:>7}  {:>7}  {:>9}",
        "pipeline", "after", "cut", "artifact", "errors", "request", "integrity"
    );
    if judged {
        let _ = write!(o, "   judge: artifact recall contin. decision");
    }
    o.push('\n');
    for (i, t) in totals.iter().enumerate() {
        let after = format!(
            "{}{}",
            thousands(t.tokens_after),
            if t.unfit > 0 { "*" } else { "" }
        );
        let s = &t.scores;
        let _ = write!(
            o,
            "  {:<width$}  {:>10} {:>7}  {:>8}  {:>7}  {:>7}  {:>9}",
            t.pipeline,
            after,
            pct(t.cut),
            s.artifact.to_string(),
            s.errors.to_string(),
            s.request.to_string(),
            s.integrity.to_string()
        );
        if let Some(j) = &t.judge {
            let _ = write!(
                o,
                "          {:>8.1} {:>6.1} {:>7.1} {:>8.1}",
                j.artifact, j.recall, j.continuation, j.decision
            );
        }
        o.push('\n');
        if let Some(lost) = lost {
            for line in lost(i) {
                let _ = writeln!(o, "      {line}");
            }
        }
    }
}

/// "lost artifacts (12): a, b, c (+9 more)".
fn lost_line(kind: &str, items: &[String], quote: bool) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    let shown: Vec<String> = items
        .iter()
        .take(SHOW_LOST)
        .map(|i| if quote { format!("{i:?}") } else { i.clone() })
        .collect();
    let more = if items.len() > SHOW_LOST {
        format!(" (+{} more)", items.len() - SHOW_LOST)
    } else {
        String::new()
    };
    Some(format!(
        "lost {kind} ({}): {}{more}",
        items.len(),
        shown.join(", ")
    ))
}

fn render_file(fe: &FileEval) -> String {
    let mut o = String::new();
    let evaluated: Vec<&ConversationEval> = fe
        .conversations
        .iter()
        .filter(|c| c.skipped.is_none())
        .collect();
    let count = fe.conversations.len();
    let convs = format!("{count} conversation{}", if count == 1 { "" } else { "s" });
    if let Some(why) = &fe.skipped {
        let _ = writeln!(o, "{} ({}, {convs}): skipped, {why}\n", fe.file, fe.format);
        return o;
    }
    let before: usize = evaluated.iter().map(|c| c.tokens_before).sum();
    let windows: Vec<String> = evaluated
        .iter()
        .filter_map(|c| {
            let w = c.window.as_ref()?;
            let at = if count > 1 {
                format!("{}: ", c.label)
            } else {
                String::new()
            };
            Some(format!(
                "{at}window {}, fit limit {}",
                thousands(w.context_window),
                thousands(w.limit)
            ))
        })
        .collect();
    let _ = writeln!(
        o,
        "{} ({}, {convs}, {} tokens; {})",
        fe.file,
        fe.format,
        thousands(before),
        windows.join("; ")
    );
    let lost = |i: usize| -> Vec<String> {
        let mut artifacts = Vec::new();
        let mut errors = Vec::new();
        let mut requests = Vec::new();
        let mut integrity = Vec::new();
        for c in &evaluated {
            if let Some(r) = c.results.get(i) {
                artifacts.extend(r.lost.artifacts.iter().cloned());
                errors.extend(r.lost.errors.iter().cloned());
                requests.extend(r.lost.request.iter().cloned());
                integrity.extend(r.lost.integrity.iter().cloned());
            }
        }
        [
            lost_line("artifacts", &artifacts, false),
            lost_line("errors", &errors, true),
            lost_line("request", &requests, true),
            lost_line("integrity", &integrity, false),
        ]
        .into_iter()
        .flatten()
        .collect()
    };
    table(&mut o, &fe.totals, Some(&lost));
    for c in fe.conversations.iter().filter(|c| c.skipped.is_some()) {
        let _ = writeln!(
            o,
            "  skipped {}: {}",
            c.label,
            c.skipped.as_deref().unwrap_or_default()
        );
    }
    if fe.totals.iter().any(|t| t.unfit > 0) {
        o.push_str("  * does not fit its window even after forcing every level\n");
    }
    o.push('\n');
    o
}

fn render_totals(r: &Report) -> String {
    let mut o = String::new();
    let evaluated: usize = r
        .inputs
        .iter()
        .flat_map(|f| &f.conversations)
        .filter(|c| c.skipped.is_none())
        .count();
    let skipped: usize = r
        .inputs
        .iter()
        .flat_map(|f| &f.conversations)
        .filter(|c| c.skipped.is_some())
        .count();
    let _ = writeln!(
        o,
        "totals: {evaluated} conversation{} evaluated in {} file{}, {skipped} skipped (under {} tokens){}",
        if evaluated == 1 { "" } else { "s" },
        r.inputs.len(),
        if r.inputs.len() == 1 { "" } else { "s" },
        thousands(r.settings.min_tokens),
        match r.unreadable.len() {
            0 => String::new(),
            n => format!("; {} unreadable, skipped", files(n)),
        }
    );
    if evaluated > 0 {
        table(&mut o, &r.totals, None);
    }
    o
}
