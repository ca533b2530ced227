//! `cargo xtask install [--prefix DIR]`: a release build of condense and its plugins, laid out
//! the way the binary looks for them.
//!
//! `DIR/bin/condense` and `DIR/lib/condense/plugins/lib*.so` (the prefix defaults to
//! `~/.local`, so the binary lands in `~/.local/bin`, usually on `PATH`). condense searches
//! `<its own folder>/../lib/condense/plugins`, so the installed binary finds the plugins built
//! with it wherever the prefix is, with no environment variable. Test-only plugins are left
//! out. Files are copied to a temporary name and renamed, so a running condense never sees a
//! half-written library.

use super::{cargo, copy_lib, lib_file, plugin_packages, run, target_dir, TEST_PLUGINS};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;

/// Runs the task with its arguments (`--prefix DIR` or `--prefix=DIR`).
pub fn install(args: &[String]) -> Result<()> {
    let prefix = prefix(args)?;
    let packages: Vec<String> = plugin_packages()?
        .into_iter()
        .filter(|p| !TEST_PLUGINS.contains(&p.as_str()))
        .collect();
    let mut build = cargo();
    build.args(["build", "--release", "--quiet", "-p", "condense"]);
    for p in &packages {
        build.args(["-p", p]);
    }
    run(build)?;

    let release = target_dir().join("release");
    let bin_dir = prefix.join("bin");
    let plugin_dir = prefix.join("lib").join("condense").join("plugins");
    let exe = format!("condense{}", std::env::consts::EXE_SUFFIX);
    std::fs::create_dir_all(&bin_dir).with_context(|| format!("creating {}", bin_dir.display()))?;
    let tmp = bin_dir.join(format!(".{exe}.tmp"));
    std::fs::copy(release.join(&exe), &tmp)
        .with_context(|| format!("copying the binary to {}", bin_dir.display()))?;
    std::fs::rename(&tmp, bin_dir.join(&exe))?;
    for p in &packages {
        copy_lib(&release, p, &plugin_dir, &lib_file(p))?;
    }
    eprintln!(
        "xtask: installed {} and {} plugins in {}",
        bin_dir.join(&exe).display(),
        packages.len(),
        plugin_dir.display()
    );
    let on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d == bin_dir));
    if !on_path {
        eprintln!(
            "xtask: {} is not on PATH; add it, or run condense by its full path",
            bin_dir.display()
        );
    }
    Ok(())
}

/// `--prefix DIR`, else `~/.local` (`%USERPROFILE%\.local` on Windows).
fn prefix(args: &[String]) -> Result<PathBuf> {
    match args {
        [] => {}
        [flag, dir] if flag == "--prefix" => return Ok(PathBuf::from(dir)),
        [one] if one.starts_with("--prefix=") => {
            return Ok(PathBuf::from(&one["--prefix=".len()..]));
        }
        [flag] if flag == "--prefix" => bail!("--prefix needs a folder"),
        other => bail!(
            "install: unexpected arguments `{}` (usage: cargo xtask install [--prefix DIR])",
            other.join(" ")
        ),
    }
    let home = std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .context("no home folder (HOME): pass --prefix DIR")?;
    Ok(PathBuf::from(home).join(".local"))
}
