//! The targets that run the real `condense` binary with the real plugins (found where the
//! binary looks: `target/plugins` beside a `target/<profile>/condense`).

use crate::{Failure, FailureKind, Verdict};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Levels 1-3 with limits low enough to act on small inputs.
pub const PIPELINE: &str = "[[stage]]\nplugin = \"tool-result-budget\"\n[stage.config]\nmax_result_size_chars = 400\npreview_bytes = 100\n\n[[stage]]\nplugin = \"snip\"\n[stage.config]\nmax_tool_result_bytes = 300\n\n[[stage]]\nplugin = \"microcompact\"\n";

/// Late enough that every timestamped session's prompt cache is cold (microcompact clears).
pub const NOW: &str = "2030-01-01T00:00:00Z";

/// How to run the binary.
#[derive(Debug, Clone)]
pub struct Binary {
    pub path: PathBuf,
    /// Kill a run after this long and call it a hang (`None`: wait; the tests make no timing
    /// assertions).
    pub timeout: Option<Duration>,
}

/// One run's result.
#[derive(Debug)]
pub struct Run {
    /// `None`: killed by a signal (or by the timeout: `hung`).
    pub code: Option<i32>,
    pub hung: bool,
    pub stderr: String,
}

impl Binary {
    /// Runs condense with `args` in `dir`; stdout and stderr go to files there (no pipe to
    /// fill).
    pub fn run(&self, args: &[&str], dir: &Path) -> std::io::Result<Run> {
        let err_path = dir.join(".stderr");
        let child = Command::new(&self.path)
            .args(args)
            .current_dir(dir)
            .env_remove("CONDENSE_PLUGIN_PATH")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err_path)?)
            .spawn()?;
        let (status, hung) = wait(child, self.timeout)?;
        Ok(Run {
            code: status.and_then(|s| s.code()),
            hung,
            stderr: String::from_utf8_lossy(&std::fs::read(&err_path)?).into_owned(),
        })
    }
}

fn wait(
    mut child: std::process::Child,
    timeout: Option<Duration>,
) -> std::io::Result<(Option<std::process::ExitStatus>, bool)> {
    let Some(limit) = timeout else {
        return child.wait().map(|s| (Some(s), false));
    };
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok((Some(status), false));
        }
        if start.elapsed() > limit {
            child.kill()?;
            child.wait()?;
            return Ok((None, true));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A crash, a hang, or an error that is not one line; `None` for a clean run or refusal.
fn judge(what: &str, run: &Run) -> Option<Failure> {
    if run.hung {
        return Some(Failure {
            kind: FailureKind::Hang,
            detail: format!("{what} did not finish"),
        });
    }
    if run.code.is_none()
        || run.stderr.contains("internal error")
        || run.stderr.contains("panicked")
    {
        return Some(Failure {
            kind: FailureKind::Crash,
            detail: format!("{what} crashed: {}", run.stderr.trim()),
        });
    }
    if run.code != Some(0) && run.stderr.trim_end().lines().count() != 1 {
        return Some(Failure {
            kind: FailureKind::BadError,
            detail: format!("{what} failed without one line: {:?}", run.stderr),
        });
    }
    None
}

fn io_failure(e: std::io::Error) -> Verdict {
    Verdict::Failed(Failure {
        kind: FailureKind::Crash,
        detail: format!("cannot run condense: {e}"),
    })
}

/// `compress` then `expand` in a fresh folder under `work`: the input must come back byte for
/// byte, or compress must refuse it in one line.
pub fn check_compress(bin: &Binary, input: &[u8], file_name: &str, work: &Path) -> Verdict {
    compress_expand(bin, input, file_name, work).unwrap_or_else(io_failure)
}

fn compress_expand(
    bin: &Binary,
    input: &[u8],
    file_name: &str,
    work: &Path,
) -> std::io::Result<Verdict> {
    let (dir, out, run) = compress_in_scratch(bin, input, file_name, work, &["--report", "json"])?;
    let d = dir.path();
    let back = format!("back-{file_name}");
    if let Some(f) = judge("compress", &run) {
        return Ok(Verdict::Failed(f));
    }
    if run.code != Some(0) {
        return Ok(Verdict::Rejected);
    }
    let run = bin.run(&["expand", &out, "--store", "s", "--out", &back], d)?;
    if let Some(f) = judge("expand", &run) {
        return Ok(Verdict::Failed(f));
    }
    if run.code != Some(0) {
        return Ok(Verdict::Failed(Failure {
            kind: FailureKind::RoundTrip,
            detail: format!("compressed, but expand failed: {}", run.stderr.trim()),
        }));
    }
    let restored = std::fs::read(d.join(&back))?;
    if restored != input {
        return Ok(Verdict::Failed(Failure::round_trip(
            "expand(compress(x)) != x",
            input,
            &restored,
        )));
    }
    Ok(Verdict::Accepted)
}

/// `condense compress` of `input` (as `file_name`) with [`PIPELINE`] at [`NOW`], in a fresh
/// folder under `work` with its store `s`, plus `extra` arguments; returns the folder, the
/// output's name and the run.
fn compress_in_scratch(
    bin: &Binary,
    input: &[u8],
    file_name: &str,
    work: &Path,
    extra: &[&str],
) -> std::io::Result<(tempfile::TempDir, String, Run)> {
    let dir = tempfile::tempdir_in(work)?;
    let d = dir.path();
    std::fs::write(d.join(file_name), input)?;
    std::fs::write(d.join("p.toml"), PIPELINE)?;
    let out = format!("out-{file_name}");
    let mut args = vec![
        "compress",
        file_name,
        "--pipeline",
        "p.toml",
        "--store",
        "s",
        "--out",
        &out,
        "--now",
        NOW,
    ];
    args.extend_from_slice(extra);
    let run = bin.run(&args, d)?;
    Ok((dir, out, run))
}

/// A compressed file and the store it was written with.
#[derive(Debug)]
pub struct Compressed {
    pub dir: tempfile::TempDir,
    pub file_name: String,
    pub bytes: Vec<u8>,
}

/// Compresses `input` once, for the expand target to mutate (`None`: refused).
pub fn compress_once(
    bin: &Binary,
    input: &[u8],
    file_name: &str,
    work: &Path,
) -> std::io::Result<Option<Compressed>> {
    let (dir, out, run) = compress_in_scratch(bin, input, file_name, work, &[])?;
    let d = dir.path();
    // Refused, or (a stage left nothing to write) no output: nothing for expand to test.
    let Ok(bytes) = std::fs::read(d.join(&out)) else {
        return Ok(None);
    };
    if run.code != Some(0) {
        return Ok(None);
    }
    Ok(Some(Compressed {
        dir,
        file_name: out,
        bytes,
    }))
}

/// `expand` of `mutated` (a changed compressed file) against the store of `base`: it may
/// succeed, or fail with one line, never crash.
pub fn check_expand(bin: &Binary, base: &Compressed, mutated: &[u8]) -> Verdict {
    let run = || -> std::io::Result<Verdict> {
        let d = base.dir.path();
        let name = format!("m-{}", base.file_name);
        std::fs::write(d.join(&name), mutated)?;
        let run = bin.run(&["expand", &name, "--store", "s", "--out", "back"], d)?;
        Ok(match judge("expand", &run) {
            Some(f) => Verdict::Failed(f),
            None if run.code == Some(0) => Verdict::Accepted,
            None => Verdict::Rejected,
        })
    };
    run().unwrap_or_else(io_failure)
}
