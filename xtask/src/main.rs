//! Project chores, run as `cargo xtask <task>`:
//!
//! - `plugins`: build every plugin under `plugins/` and put the libraries in `target/plugins/`
//!   (test-only plugins go to `target/test-plugins/`), where `condense` finds them;
//! - `test`: `tidy`, `plugins`, then the whole test suite (what `.ci/run` runs; the Python
//!   venv and the pinned cargo-insta some tests drive are made first), then checks that
//!   docs/stages.md and docs/quality.md are current;
//! - `demo`: `plugins`, then `condense stats` and `condense compress` on a shipped transcript;
//! - `bench`: release build, then the benchmarks (figures for docs/benchmarks.md);
//! - `eval`: `condense eval` on the shipped transcripts, written to docs/quality.md (`--check`:
//!   fail when that file is out of date);
//! - `fuzz --minutes N`: the reliability campaign with random seeds (see xtask/src/fuzz.rs);
//! - `install [--prefix DIR]`: release build, `DIR/bin/condense` and its plugins in
//!   `DIR/lib/condense/plugins/` (default prefix `~/.local`);
//! - `tidy`: the project rules no compiler checks (module docs, docs/ARCHITECTURE.md naming
//!   every crate and task, the plugin dependency allowlist, no I/O in plugins, no
//!   `unwrap_or_default()` on serialization or hashing; see xtask/src/tidy.rs).

mod bench;
mod fuzz;
mod install;
mod quality;
mod tidy;
mod tools;
mod venv;

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Plugins that exist only for the host's tests.
const TEST_PLUGINS: &[&str] = &["test-faulty"];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let task = args.first().map(String::as_str).unwrap_or("help");
    let rest = &args[args.len().min(1)..];
    match task {
        "plugins" => build_plugins(rest.iter().any(|a| a == "--release")).map(|_| ()),
        "test" => test(rest),
        "demo" => demo(),
        "bench" => bench(rest),
        "docs" => docs(rest.iter().any(|a| a == "--check")),
        "eval" => eval(rest.iter().any(|a| a == "--check")),
        "fuzz" => fuzz::fuzz(rest),
        "install" => install::install(rest),
        "tidy" => tidy::tidy(&root()),
        _ => {
            eprintln!(
                "usage: cargo xtask <task>\n\n\
                 tasks:\n  \
                 plugins [--release]  build every plugin into target/plugins/\n  \
                 test [ARGS]          build plugins, then run every test (ARGS go to cargo test)\n  \
                 demo                 compress a shipped transcript and show the report\n  \
                 bench [N] [--peers]  run the benchmarks (release build; --peers: Python side by side)\n  \
                 docs [--check]       regenerate docs/stages.md from plugin metadata (or check it)\n  \
                 eval [--check]       measure retention on the shipped transcripts into docs/quality.md\n  \
                 \x20                    (or check it is current)\n  \
                 fuzz --minutes N     the fuzz campaign with random seeds (docs/reliability.md;\n                       \
                 `cargo xtask fuzz --help`: its options and targets)\n  \
                 install [--prefix DIR]  release build into DIR/bin and DIR/lib/condense/plugins\n  \
                 \x20                    (default ~/.local)\n  \
                 tidy                 check the rules no compiler checks (xtask/src/tidy.rs)"
            );
            if task == "help" || task == "--help" {
                Ok(())
            } else {
                bail!("unknown task `{task}`")
            }
        }
    }
}

fn root() -> PathBuf {
    // xtask lives in <root>/xtask.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

fn run(mut cmd: Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {shown}"))?;
    if !status.success() {
        bail!("{shown} failed with {status}");
    }
    Ok(())
}

/// Every package under plugins/.
fn plugin_packages() -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(root().join("plugins")).context("reading plugins/")? {
        let path = entry?.path();
        if path.join("Cargo.toml").is_file() {
            if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                names.push(name.to_string());
            }
        }
    }
    names.sort();
    Ok(names)
}

/// The library file of a plugin package. Mirrors `condense_host::discover::library_file_name`:
/// xtask stays free of the workspace crates so it builds in seconds before anything else.
fn lib_file(package: &str) -> String {
    format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        package.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    )
}

fn copy_lib(profile_dir: &Path, package: &str, dest_dir: &Path, dest_name: &str) -> Result<()> {
    std::fs::create_dir_all(dest_dir)?;
    let from = profile_dir.join(lib_file(package));
    let to = dest_dir.join(dest_name);
    // Copy to a temp name then rename: a running condense never sees a half-written library.
    let tmp = dest_dir.join(format!(".{dest_name}.tmp"));
    std::fs::copy(&from, &tmp).with_context(|| format!("copying {}", from.display()))?;
    std::fs::rename(&tmp, &to)?;
    Ok(())
}

/// Builds all plugins; returns the folder they were put in.
fn build_plugins(release: bool) -> Result<PathBuf> {
    let packages = plugin_packages()?;
    let target = target_dir();
    let profile_dir = target.join(if release { "release" } else { "debug" });
    let plugins_dir = target.join("plugins");
    let test_dir = target.join("test-plugins");

    // The test plugin claiming a foreign ABI version first: the normal build below replaces
    // the library cargo leaves in the profile folder.
    let mut forged = cargo();
    forged.args([
        "build",
        "--quiet",
        "-p",
        "test-faulty",
        "--features",
        "forged-abi-version",
    ]);
    if release {
        forged.arg("--release");
    }
    run(forged)?;
    copy_lib(
        &profile_dir,
        "test-faulty",
        &test_dir,
        &lib_file("test-faulty-forged"),
    )?;

    let mut build = cargo();
    build.args(["build", "--quiet"]);
    if release {
        build.arg("--release");
    }
    for p in &packages {
        build.args(["-p", p]);
    }
    run(build)?;
    for p in &packages {
        let dest = if TEST_PLUGINS.contains(&p.as_str()) {
            &test_dir
        } else {
            &plugins_dir
        };
        copy_lib(&profile_dir, p, dest, &lib_file(p))?;
    }
    // Which build the folder holds: `cargo xtask test` puts debug plugins where `bench` and
    // `plugins --release` put release ones, and the bench refuses to time debug plugins.
    let mark = plugins_dir.join(PROFILE_MARK);
    let profile = if release { "release\n" } else { "debug\n" };
    std::fs::write(&mark, profile).with_context(|| mark.display().to_string())?;
    eprintln!(
        "xtask: {} plugins in {}",
        packages.len() - TEST_PLUGINS.len(),
        plugins_dir.display()
    );
    Ok(plugins_dir)
}

/// The file in the plugins folder that says which build they are (`release` or `debug`);
/// `condense-bench` reads it (`gen::check_plugins`).
const PROFILE_MARK: &str = ".profile";

fn test(extra: &[String]) -> Result<()> {
    // The cheapest check first: a broken project rule fails before minutes of building.
    tidy::tidy(&root())?;
    build_plugins(false)?;
    let mut t = cargo();
    t.args(["test", "--workspace"]).args(extra);
    // Snapshots never get written silently in a test run: a mismatch fails.
    t.env("INSTA_UPDATE", "no");
    // Tests that drive real Python clients find them here (they fail, never skip, without).
    t.env(
        venv::TEST_PYTHON_ENV,
        venv::ensure("test", venv::TEST_PACKAGES)?,
    );
    // The snapshot review tests run the real cargo-insta (they fail, never skip, without).
    t.env(tools::CARGO_INSTA_ENV, tools::cargo_insta()?);
    run(t)?;
    // `cargo test --workspace` has just built the binary and the plugins are in place; with
    // extra arguments (a filter, `-p ...`) the binary may be missing or stale.
    let bin = if extra.is_empty() {
        condense_bin()
    } else {
        build_condense()?
    };
    stage_docs(&bin, true)?;
    // docs/quality.md holds what the stages retain: a change to a stage or the summarizer that
    // moves it must regenerate it (`cargo xtask eval`), so its figures are always current.
    quality::quality_docs(&root(), &bin, &target_dir().join("plugins"), true)
}

/// Builds every plugin and the condense binary (debug profile); returns the binary's path.
fn build_condense() -> Result<PathBuf> {
    build_plugins(false)?;
    let mut c = cargo();
    c.args(["build", "--quiet", "-p", "condense"]);
    run(c)?;
    Ok(condense_bin())
}

/// Where the debug condense binary is built.
fn condense_bin() -> PathBuf {
    target_dir()
        .join("debug")
        .join(format!("condense{}", std::env::consts::EXE_SUFFIX))
}

/// `cargo xtask docs [--check]`.
fn docs(check: bool) -> Result<()> {
    stage_docs(&build_condense()?, check)
}

/// `cargo xtask eval [--check]`: docs/quality.md from `condense eval` on the transcripts.
fn eval(check: bool) -> Result<()> {
    let bin = build_condense()?;
    quality::quality_docs(&root(), &bin, &target_dir().join("plugins"), check)
}

/// docs/stages.md, generated from the shipped plugins' metadata by the condense binary `bin`:
/// written, or (`check`) compared with what is committed.
fn stage_docs(bin: &Path, check: bool) -> Result<()> {
    let out = Command::new(bin)
        .args(["plugins", "--details", "--markdown"])
        .env("CONDENSE_PLUGIN_PATH", target_dir().join("plugins"))
        .output()
        .context("running condense plugins")?;
    if !out.status.success() {
        bail!(
            "condense plugins failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let path = root().join("docs/stages.md");
    if check {
        let current = std::fs::read(&path).unwrap_or_default();
        if current != out.stdout {
            bail!(
                "docs/stages.md is out of date with the plugins' metadata: run `cargo xtask docs`"
            );
        }
        eprintln!("xtask: docs/stages.md is current");
    } else {
        std::fs::write(&path, &out.stdout)?;
        eprintln!("xtask: wrote {}", path.display());
    }
    Ok(())
}

fn demo() -> Result<()> {
    let bin = build_condense()?;
    let transcript = root().join("examples/claude-code-session.jsonl");
    let pipeline = root().join("examples/demo-pipeline.toml");
    let out_dir = target_dir().join("demo");
    let _ = std::fs::remove_dir_all(&out_dir);
    std::fs::create_dir_all(&out_dir)?;
    let condense = |args: &[&std::ffi::OsStr]| -> Result<()> {
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        eprintln!("\n$ condense {}", shown.join(" "));
        let mut c = Command::new(&bin);
        c.args(args);
        run(c)
    };
    let path = |p: &Path| p.as_os_str().to_owned();
    let (default_out, default_store) =
        (out_dir.join("default.jsonl"), out_dir.join("store-default"));
    let (small_out, small_store) = (
        out_dir.join("small-window.jsonl"),
        out_dir.join("store-small"),
    );
    let restored = out_dir.join("restored.jsonl");

    // 1. Where the tokens go.
    condense(&["stats".as_ref(), &path(&transcript)])?;
    // 2. The embedded default pipeline (200k window): levels 1-3 act, 4-5 have nothing to do.
    condense(&[
        "compress".as_ref(),
        &path(&transcript),
        "--out".as_ref(),
        &path(&default_out),
        "--store".as_ref(),
        &path(&default_store),
    ])?;
    // 3. All five levels in a 32k window (examples/demo-pipeline.toml).
    condense(&[
        "compress".as_ref(),
        &path(&transcript),
        "--pipeline".as_ref(),
        &path(&pipeline),
        "--out".as_ref(),
        &path(&small_out),
        "--store".as_ref(),
        &path(&small_store),
    ])?;
    // 4. The model says prompt_too_long: the recovery chain forces the levels in turn.
    condense(&[
        "compress".as_ref(),
        &path(&transcript),
        "--pipeline".as_ref(),
        &path(&pipeline),
        "--prompt-too-long".as_ref(),
        "--out".as_ref(),
        &path(&out_dir.join("forced.jsonl")),
        "--store".as_ref(),
        &path(&out_dir.join("store-forced")),
    ])?;
    // 5. Nothing was lost.
    condense(&[
        "expand".as_ref(),
        &path(&small_out),
        "--store".as_ref(),
        &path(&small_store),
        "--out".as_ref(),
        &path(&restored),
    ])?;
    let same = std::fs::read(&transcript)? == std::fs::read(&restored)?;
    eprintln!("\nrestored file is byte-identical to the original: {same}");
    if !same {
        bail!("expand did not restore the original");
    }
    Ok(())
}

fn bench(extra: &[String]) -> Result<()> {
    bench::bench(extra)
}
