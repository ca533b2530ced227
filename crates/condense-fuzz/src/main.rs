//! `condense-fuzz`: the campaign for longer than CI, with random seeds (`cargo xtask fuzz
//! --minutes N` builds condense and the plugins, then runs this).
//!
//! ```text
//! condense-fuzz --minutes N --condense target/debug/condense --root . \
//!     --out tests/fixtures/fuzz-regressions [--seed S] [--kills K] [--targets a,b]
//! ```
//!
//! First the SIGKILL loop (K kills, default 50), then every target in turn for an equal share
//! of the time, each as campaigns of fresh seeds. Minimized failures are written to
//! `--out/<target>/`; the last lines are the table of docs/reliability.md.

use anyhow::{bail, Context, Result};
use condense_fuzz::binary::Binary;
use condense_fuzz::campaign::{self, Config, Stats};
use condense_fuzz::kill::kill_loop;
use condense_fuzz::rng::Rng;
use condense_fuzz::Target;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

struct Args {
    minutes: f64,
    condense: PathBuf,
    root: PathBuf,
    out: PathBuf,
    seed: Option<u64>,
    kills: usize,
    targets: Vec<Target>,
}

fn args() -> Result<Args> {
    let mut a = Args {
        minutes: 1.0,
        condense: PathBuf::from("target/debug/condense"),
        root: PathBuf::from("."),
        out: PathBuf::from("tests/fixtures/fuzz-regressions"),
        seed: None,
        kills: 50,
        targets: Target::all(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--help" | "-h" => {
                print!("{}", usage());
                std::process::exit(0);
            }
            "--minutes" => a.minutes = value()?.parse().context("--minutes")?,
            "--condense" => a.condense = value()?.into(),
            "--root" => a.root = value()?.into(),
            "--out" => a.out = value()?.into(),
            "--seed" => a.seed = Some(value()?.parse().context("--seed")?),
            "--kills" => a.kills = value()?.parse().context("--kills")?,
            "--targets" => {
                a.targets = value()?
                    .split(',')
                    .map(Target::parse)
                    .collect::<Result<_, _>>()?
            }
            other => bail!("unknown argument `{other}` (`--help` lists them)"),
        }
    }
    Ok(a)
}

/// What `--help` prints: the options, and the targets `--targets` takes.
fn usage() -> String {
    let targets: Vec<String> = Target::all().iter().map(ToString::to_string).collect();
    format!(
        "usage: cargo xtask fuzz --minutes N [--seed S] [--kills K] [--targets a,b]\n\n\
         First K SIGKILLs of `condense compress` at random points (default 50), then every\n\
         target in turn for an equal share of the N minutes (default 1), with seeds from S\n\
         (default: the clock). Minimized failures go to tests/fixtures/fuzz-regressions/<target>/,\n\
         which the tests replay from then on.\n\n\
         options (the runner's own; `cargo xtask fuzz` sets --condense, --root and --out):\n  \
         --minutes N      how long, in minutes (fractions too)\n  \
         --seed S         the first seed, to repeat a campaign\n  \
         --kills K        how many SIGKILLs before the targets\n  \
         --targets a,b    only these targets\n  \
         --condense PATH  the condense binary the process targets run\n  \
         --root DIR       the repository, for the seed corpus\n  \
         --out DIR        where minimized failures are written\n\n\
         targets: {}\n",
        targets.join(", ")
    )
}

fn main() -> Result<()> {
    let a = args()?;
    // Panics are what the campaign counts (caught per case); their traces would drown the
    // output.
    std::panic::set_hook(Box::new(|_| {}));
    let bin = Binary {
        path: a.condense.clone(),
        timeout: Some(Duration::from_secs(120)),
    };
    let work = tempfile::tempdir().context("scratch folder")?;
    let mut seeds = Rng::new(a.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    }));
    let started = Instant::now();
    let budget = Duration::from_secs_f64(a.minutes * 60.0);

    let mut kills = 0;
    let mut kill_failures = Vec::new();
    if a.kills > 0 {
        let session = a
            .root
            .join("tests/fixtures/transcripts/DRMacIver__claude-reliability/transcript.jsonl");
        let input = std::fs::read(&session).with_context(|| session.display().to_string())?;
        let seed = seeds.next_u64();
        let dir = tempfile::tempdir_in(work.path())?;
        match kill_loop(&bin, &input, a.kills, seed, dir.path()) {
            Ok(r) => {
                kills = r.kills;
                if !r.orphans.is_empty() {
                    kill_failures.push(format!(
                        "{} orphan temp files: {:?}",
                        r.orphans.len(),
                        r.orphans
                    ));
                }
            }
            Err(e) => kill_failures.push(format!("seed {seed}: {e}")),
        }
        eprintln!("kill loop: {kills} kills survived; {kill_failures:?}");
    }

    let left = budget.saturating_sub(started.elapsed());
    let share = left / a.targets.len().max(1) as u32;
    let mut rows = Vec::new();
    let mut total = Stats::default();
    for &target in &a.targets {
        let until = Instant::now() + share;
        let mut stats = Stats::default();
        let mut found = Vec::new();
        while Instant::now() < until {
            let config = Config {
                target,
                seed: seeds.next_u64() >> 1,
                cases: if target.needs_binary() { 20 } else { 1_000 },
                until: Some(until),
                root: a.root.clone(),
                binary: Some(bin.clone()),
                failures: a.out.clone(),
                work: work.path().to_path_buf(),
                keep: 3,
                hang_after: Some(Duration::from_secs(10)),
                minimize_binary: 40,
            };
            // A campaign that cannot run (its scratch folder gone, ...) is reported, and the
            // others still run.
            let report = match campaign::run(&config) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("{target}: campaign stopped: {e}");
                    break;
                }
            };
            stats.add(&report.stats);
            if !report.found.is_empty() {
                eprintln!("{}", report.describe());
            }
            found.extend(report.found);
        }
        eprintln!(
            "{target}: {} inputs, {} failures ({} kept)",
            stats.inputs,
            stats.failures(),
            found.len()
        );
        total.add(&stats);
        rows.push((target, stats));
    }

    println!("| target | inputs tried | accepted | rejected | crashes | hangs | round-trip failures | bad errors |");
    println!("|---|---|---|---|---|---|---|---|");
    for (t, s) in &rows {
        println!(
            "| {t} | {} | {} | {} | {} | {} | {} | {} |",
            s.inputs, s.accepted, s.rejected, s.crashes, s.hangs, s.round_trips, s.bad_errors
        );
    }
    println!(
        "| **all** | {} | {} | {} | {} | {} | {} | {} |",
        total.inputs,
        total.accepted,
        total.rejected,
        total.crashes,
        total.hangs,
        total.round_trips,
        total.bad_errors
    );
    println!(
        "\nkills survived: {kills} of {} ({} problems{})",
        a.kills,
        kill_failures.len(),
        if kill_failures.is_empty() {
            String::new()
        } else {
            format!(": {}", kill_failures.join("; "))
        }
    );
    println!(
        "minutes: {:.1}; minimized failures in {}",
        started.elapsed().as_secs_f64() / 60.0,
        a.out.display()
    );
    if total.failures() > 0 || !kill_failures.is_empty() {
        bail!("the campaign found failures");
    }
    Ok(())
}
