//! Command-line tools the tests drive for real, installed at pinned versions under
//! `target/tools/` (never the user's `~/.cargo/bin`), once: a second run finds the binary at
//! the right version and costs nothing.
//!
//! - `cargo-insta`: the snapshot review tests run `cargo insta accept` and `reject` on
//!   `condense snapshot`'s files (issue 16), found through [`CARGO_INSTA_ENV`]. A test that
//!   needs it fails, never skips, when the variable is missing.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::Command;

/// The cargo-insta the tests run; the same version as the workspace's `insta`, whose file
/// format condense writes.
pub const CARGO_INSTA_VERSION: &str = "1.49.0";

/// The environment variable through which tests find the cargo-insta binary.
pub const CARGO_INSTA_ENV: &str = "CONDENSE_CARGO_INSTA";

/// Installs (or reuses) `target/tools/bin/cargo-insta` at [`CARGO_INSTA_VERSION`]; returns its
/// path.
pub fn cargo_insta() -> Result<PathBuf> {
    let root = super::target_dir().join("tools");
    let bin = root
        .join("bin")
        .join(format!("cargo-insta{}", std::env::consts::EXE_SUFFIX));
    if installed_version(&bin).as_deref() == Some(CARGO_INSTA_VERSION) {
        return Ok(bin);
    }
    eprintln!(
        "xtask: installing cargo-insta {CARGO_INSTA_VERSION} into {}",
        root.display()
    );
    let mut install = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    install
        .args(["install", "cargo-insta", "--locked", "--force", "--version"])
        .arg(CARGO_INSTA_VERSION)
        .arg("--root")
        .arg(&root);
    let status = install
        .status()
        .context("running `cargo install cargo-insta`")?;
    if !status.success() {
        bail!("`cargo install cargo-insta --version {CARGO_INSTA_VERSION}` failed (is crates.io reachable?)");
    }
    match installed_version(&bin) {
        Some(v) if v == CARGO_INSTA_VERSION => Ok(bin),
        other => bail!(
            "{} reports version {}, expected {CARGO_INSTA_VERSION}",
            bin.display(),
            other.unwrap_or_else(|| "nothing".into())
        ),
    }
}

/// The version `bin --version` prints (`cargo-insta 1.49.0`), None when it does not run.
fn installed_version(bin: &std::path::Path) -> Option<String> {
    if !bin.is_file() {
        return None;
    }
    let out = Command::new(bin).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().last().map(str::to_string)
}
