//! Whole processes: the real `condense` binary (and the Python peers) run as children, timed
//! from spawn to exit, with the child's own peak memory.
//!
//! Peak memory is the kernel's `ru_maxrss` of that one child, read by `wait4`: polling
//! `/proc/<pid>/status` would miss a peak reached just before exit (the memory is gone by the
//! time the process can be observed as exited), and `getrusage(RUSAGE_CHILDREN)` is the
//! largest of every child so far, not of this one.

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// One finished child.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Finished {
    pub ms: f64,
    /// Peak resident set size in bytes (0 where the platform does not say).
    pub max_rss: u64,
}

/// The release binary next to the bench (`cargo xtask bench` builds it first).
pub(crate) fn condense_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("where the bench binary is")?;
    let bin = exe.with_file_name(format!("condense{}", std::env::consts::EXE_SUFFIX));
    if !bin.is_file() {
        bail!(
            "{} is missing: build it with `cargo build --release -p condense` (cargo xtask bench does)",
            bin.display()
        );
    }
    Ok(bin)
}

/// A `condense` command that finds the freshly built plugins whatever is installed.
pub(crate) fn condense(args: &[&str]) -> Result<Command> {
    let mut c = Command::new(condense_binary()?);
    c.args(args)
        .env("CONDENSE_PLUGIN_PATH", crate::gen::plugin_dir());
    Ok(c)
}

/// Runs `cmd` to completion, output discarded, and fails (naming it) unless it exits 0.
pub(crate) fn run(cmd: &mut Command) -> Result<Finished> {
    run_out(cmd).map(|(f, _)| f)
}

/// [`run`], also returning what the child wrote on standard output.
pub(crate) fn run_out(cmd: &mut Command) -> Result<(Finished, String)> {
    let what = format!("{cmd:?}");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {what}"))?;
    // Both pipes are drained on threads so a chatty child never blocks on a full pipe.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut s);
            }
            s
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let (ok, max_rss) = reap(&mut child)?;
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if !ok {
        bail!("{what} failed: {}", err.trim());
    }
    Ok((Finished { ms, max_rss }, out))
}

/// The median of `runs` whole-process runs (`setup` runs before each, untimed), with the peak
/// memory of the median run.
pub(crate) fn median(
    runs: usize,
    mut setup: impl FnMut(usize) -> Result<()>,
    mut make: impl FnMut(usize) -> Result<Command>,
) -> Result<Finished> {
    let mut all = Vec::with_capacity(runs);
    for i in 0..runs.max(1) {
        setup(i)?;
        all.push(run(&mut make(i)?)?);
    }
    all.sort_by(|a, b| a.ms.total_cmp(&b.ms));
    Ok(all[all.len() / 2])
}

#[cfg(target_os = "linux")]
fn reap(child: &mut std::process::Child) -> Result<(bool, u64)> {
    let pid = i32::try_from(child.id()).context("child pid")?;
    let mut status: i32 = 0;
    // SAFETY: `rusage` is plain old data that wait4 fills; `status` is a valid out-pointer;
    // the pid is our own unreaped child (std never reaps it: `wait` is not called on it).
    #[allow(unsafe_code)]
    let (rc, usage) = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let rc = libc::wait4(pid, &mut status, 0, &mut usage);
        (rc, usage)
    };
    if rc != pid {
        bail!(
            "wait4 on child {pid} failed: {}",
            std::io::Error::last_os_error()
        );
    }
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    // Linux reports ru_maxrss in KiB.
    Ok((ok, u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024))
}

#[cfg(not(target_os = "linux"))]
fn reap(child: &mut std::process::Child) -> Result<(bool, u64)> {
    Ok((child.wait()?.success(), 0))
}

/// A Python interpreter and a script of `xtask/peers/`, as a command.
pub(crate) fn python(python: &Path, script: &str) -> Command {
    let mut c = Command::new(python);
    // No `__pycache__` left in the source tree.
    c.env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(crate::gen::repo().join("xtask/peers").join(script));
    c
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A shell holding a 40 MB string peaks above 40 MB, and a child that fails is an error
    /// naming what it said.
    #[test]
    fn peak_memory_is_the_childs() {
        let mut big = Command::new("sh");
        big.args([
            "-c",
            "x=$(head -c 40000000 /dev/zero | tr '\\0' a); echo ${#x}",
        ]);
        let (f, out) = run_out(&mut big).unwrap();
        assert_eq!(out.trim(), "40000000");
        assert!(f.max_rss >= 40_000_000, "peak {} bytes", f.max_rss);
        let err = run(Command::new("sh").args(["-c", "echo broken >&2; exit 3"])).unwrap_err();
        assert!(err.to_string().contains("broken"), "{err}");
    }
}
