//! The SIGKILL loop: `condense compress` killed at varied moments, each kill followed by a
//! rerun that must succeed and an expand that must give back the input byte for byte; at the
//! end, no orphan temp file (`.tmpXXXXXX`) may be left.

use crate::binary::{Binary, NOW, PIPELINE};
use crate::rng::Rng;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the loop did.
#[derive(Debug, Clone, Default)]
pub struct KillReport {
    /// Runs killed while still running.
    pub kills: usize,
    /// Runs started to be killed (some had finished already).
    pub tries: usize,
    /// Temp files left after the final run.
    pub orphans: Vec<PathBuf>,
}

/// What went wrong after a kill.
#[derive(Debug, thiserror::Error)]
pub enum KillError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("rerun {after} failed: {stderr}")]
    Rerun { after: String, stderr: String },
    #[error("expand {after} failed: {stderr}")]
    Expand { after: String, stderr: String },
    #[error("expand {after} is not the input: {difference}")]
    NotExact { after: String, difference: String },
    #[error("only {kills} of {tries} runs were still running when killed")]
    TooFewKills { kills: usize, tries: usize },
}

fn command(bin: &Binary, dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(&bin.path);
    c.args(args)
        .current_dir(dir)
        .env_remove("CONDENSE_PLUGIN_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

/// The run the loop kills: `in.jsonl` in its folder, compressed with `p.toml` into store `s`.
pub const COMPRESS: &[&str] = &[
    "compress",
    "in.jsonl",
    "--pipeline",
    "p.toml",
    "--store",
    "s",
    "--out",
    "out.jsonl",
    "--now",
    NOW,
];

/// A full compress and expand in `dir`, checked.
fn rerun_and_expand(bin: &Binary, dir: &Path, input: &[u8], after: &str) -> Result<(), KillError> {
    let out = command(bin, dir, COMPRESS).output()?;
    if !out.status.success() {
        return Err(KillError::Rerun {
            after: after.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let args = ["expand", "out.jsonl", "--store", "s", "--out", "back.jsonl"];
    let out = command(bin, dir, &args).output()?;
    if !out.status.success() {
        return Err(KillError::Expand {
            after: after.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let back = std::fs::read(dir.join("back.jsonl"))?;
    if back != input {
        return Err(KillError::NotExact {
            after: after.to_string(),
            difference: crate::first_difference(input, &back),
        });
    }
    Ok(())
}

/// Kills `compress` of `input` (a JSONL session) in `dir` until `kills` runs were killed while
/// running, at delays drawn from `seed` over the length of one run.
pub fn kill_loop(
    bin: &Binary,
    input: &[u8],
    kills: usize,
    seed: u64,
    dir: &Path,
) -> Result<KillReport, KillError> {
    std::fs::write(dir.join("in.jsonl"), input)?;
    std::fs::write(dir.join("p.toml"), PIPELINE)?;
    // One whole run first: it fills the store. Then the kills spread over half the median
    // length of the reruns so far (what the loop kills: with a filled store, a rerun is much
    // shorter than the first run; half, as each timed rerun includes its expand), used only to
    // choose when to kill. Every rerun is timed, not just the first: one timed while the
    // machine was busy would make most kills land after the run they aim at.
    rerun_and_expand(bin, dir, input, "of the first run")?;
    let mut reruns = vec![timed(|| {
        rerun_and_expand(bin, dir, input, "of the second run")
    })?];
    let mut rng = Rng::new(seed);
    let mut report = KillReport::default();
    while report.kills < kills {
        report.tries += 1;
        if report.tries > 4 * kills {
            return Err(KillError::TooFewKills {
                kills: report.kills,
                tries: report.tries,
            });
        }
        reruns.sort_unstable();
        let span = (reruns[reruns.len() / 2] / 2).max(1000);
        let delay = Duration::from_micros(rng.below(span) as u64);
        let mut child = command(bin, dir, COMPRESS).stderr(Stdio::null()).spawn()?;
        std::thread::sleep(delay);
        let running = child.try_wait()?.is_none();
        child.kill()?; // SIGKILL on Unix
        child.wait()?;
        if running {
            report.kills += 1;
        }
        let after = format!("after kill {} at {delay:?} (seed {seed})", report.kills);
        reruns.push(timed(|| rerun_and_expand(bin, dir, input, &after))?);
    }
    report.orphans = temp_files(dir)?;
    Ok(report)
}

/// How long `run` took, in microseconds (what [`kill_loop`] spreads its kills over).
fn timed<E>(run: impl FnOnce() -> Result<(), E>) -> Result<usize, E> {
    let start = Instant::now();
    run()?;
    Ok(usize::try_from(start.elapsed().as_micros()).unwrap_or(usize::MAX))
}

/// Every file under `dir` named like a temp file (`.tmpXXXXXX`).
pub fn temp_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        if p.is_dir() {
            out.extend(temp_files(&p)?);
        } else if p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(".tmp"))
        {
            out.push(p);
        }
    }
    Ok(out)
}
