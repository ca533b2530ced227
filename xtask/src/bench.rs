//! `cargo xtask bench [RUNS] [--peers]`: the release build of the binary, the plugins and the
//! bench, then the bench (`crates/condense-bench`), whose whole-process figures run the real
//! `target/release/condense`.
//!
//! `--peers` also makes the `peers` virtualenv (tiktoken, langchain-core; see [`venv`]) and
//! hands its interpreter to the bench, which runs `xtask/peers/*.py` on the same inputs. tiktoken
//! would download its vocabulary on first use; the bench instead points it at the identical file
//! the tiktoken-rs crate ships (tiktoken checks its hash), so a machine without access to
//! OpenAI's blob storage runs the peers too.

use super::{cargo, run, target_dir, venv};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;

pub fn bench(extra: &[String]) -> Result<()> {
    let peers = extra.iter().any(|a| a == "--peers");
    let rest: Vec<&String> = extra.iter().filter(|a| *a != "--peers").collect();
    super::build_plugins(true)?;
    let mut binary = cargo();
    binary.args(["build", "--release", "--quiet", "-p", "condense"]);
    run(binary)?;
    let mut c = cargo();
    c.args(["run", "--release", "--quiet", "-p", "condense-bench", "--"])
        .args(rest);
    if peers {
        let python = venv::ensure("peers", venv::PEER_PACKAGES)?;
        c.arg("--python").arg(python);
        c.env("CONDENSE_BPE_FILE", o200k_vocabulary()?);
        c.env("TIKTOKEN_CACHE_DIR", target_dir().join("tiktoken-cache"));
    }
    run(c)
}

/// `o200k_base.tiktoken` as the tiktoken-rs crate of this workspace ships it.
fn o200k_vocabulary() -> Result<PathBuf> {
    let out = cargo()
        .args(["metadata", "--format-version", "1"])
        .output()
        .context("cargo metadata")?;
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("reading cargo metadata")?;
    let manifest = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "tiktoken-rs")
        .and_then(|p| p["manifest_path"].as_str())
        .context("tiktoken-rs is not in cargo metadata (a dependency of condense-tokens)")?;
    let file = PathBuf::from(manifest).with_file_name("assets/o200k_base.tiktoken");
    if !file.is_file() {
        bail!("{} is missing (tiktoken-rs's vocabulary)", file.display());
    }
    Ok(file)
}
