//! Python virtualenvs for the tests and benchmarks that drive real Python clients (the
//! official `anthropic` and `openai` SDKs against `condense serve`, `tiktoken` and
//! `langchain-core` as peers in `cargo xtask bench --peers`).
//!
//! One virtualenv per purpose under `target/venvs/<name>/`, made with the machine's `python3`
//! and filled from PyPI with pinned versions. A stamp file holds the requirement list it was
//! made with, so a second run costs nothing and a changed list rebuilds it. Anything missing
//! (no `python3`, no `venv` module, PyPI unreachable) is an error naming what failed: the
//! tests that need these packages fail loudly, they never skip.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::Command;

/// What the integration tests drive for real: the official SDKs (issue 14's end-to-end test).
pub const TEST_PACKAGES: &[&str] = &["anthropic==2.16.0", "openai==3.57.0"];

/// The peers of `cargo xtask bench --peers`.
pub const PEER_PACKAGES: &[&str] = &["tiktoken==0.14.0", "langchain-core==1.8.3"];

/// The environment variable through which tests find the test virtualenv's interpreter.
pub const TEST_PYTHON_ENV: &str = "CONDENSE_TEST_PYTHON";

/// Makes (or reuses) `target/venvs/<name>` with exactly `packages`; returns its interpreter.
pub fn ensure(name: &str, packages: &[&str]) -> Result<PathBuf> {
    let dir = super::target_dir().join("venvs").join(name);
    let python = interpreter(&dir);
    let stamp = dir.join("condense-requirements.txt");
    let wanted = packages.join("\n") + "\n";
    if python.is_file() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(&wanted) {
        return Ok(python);
    }
    eprintln!(
        "xtask: making the `{name}` virtualenv in {} ({})",
        dir.display(),
        packages.join(", ")
    );
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let host = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let mut make = Command::new(&host);
    make.args(["-m", "venv"]).arg(&dir);
    checked(
        make,
        &format!("`{host} -m venv` (is Python 3 with its venv module installed?)"),
    )?;
    let mut pip = Command::new(&python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ])
    .args(packages);
    checked(
        pip,
        &format!("pip install {} (is PyPI reachable?)", packages.join(" ")),
    )?;
    std::fs::write(&stamp, wanted).with_context(|| format!("writing {}", stamp.display()))?;
    Ok(python)
}

fn interpreter(dir: &std::path::Path) -> PathBuf {
    if cfg!(windows) {
        dir.join("Scripts").join("python.exe")
    } else {
        dir.join("bin").join("python")
    }
}

fn checked(mut cmd: Command, what: &str) -> Result<()> {
    let status = cmd.status().with_context(|| format!("cannot run {what}"))?;
    if !status.success() {
        bail!("{what} failed with {status}");
    }
    Ok(())
}
