//! Bundles the shipped plugins into an installed `condense` binary.
//!
//! `cargo install --path crates/condense` builds the binary alone, in a temporary target
//! folder; a plugin is a separate shared library that no dependency edge builds. So a release
//! build outside this workspace's own `target/` (that is what an installation is) builds the
//! shipped plugins here, with the same toolchain and lock file, and embeds them. The binary
//! unpacks them once into the per-user data folder (`src/bundle.rs`), where discovery finds
//! them. Builds inside the workspace (tests, `cargo xtask`, development) embed nothing: there
//! the plugins live in `target/plugins/`, built by `cargo xtask plugins`.
//!
//! `CONDENSE_BUNDLE_PLUGINS=1` forces a bundle, `=0` forbids it (`cargo xtask install` puts the
//! plugins beside the binary instead).

use std::collections::hash_map::DefaultHasher;
use std::fmt::Write as _;
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const BUNDLE_ENV: &str = "CONDENSE_BUNDLE_PLUGINS";

fn main() -> ExitCode {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed={BUNDLE_ENV}");
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            // One line, as every condense error: cargo shows it under the build script's name.
            eprintln!("error: bundling the condense plugins: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let var = |name: &str| std::env::var_os(name).ok_or_else(|| format!("{name} is not set"));
    let out = PathBuf::from(var("OUT_DIR")?);
    let manifest = PathBuf::from(var("CARGO_MANIFEST_DIR")?);
    let root = manifest
        .parent()
        .and_then(Path::parent)
        .ok_or("crates/condense is not inside a workspace")?
        .to_path_buf();
    let libs = if wants_bundle(&out, &root) {
        println!("cargo:rerun-if-changed={}", root.join("plugins").display());
        println!("cargo:rerun-if-changed={}", root.join("crates").display());
        println!(
            "cargo:rerun-if-changed={}",
            root.join("Cargo.lock").display()
        );
        build_plugins(&root, &out)?
    } else {
        Vec::new()
    };
    let mut code = String::from(
        "/// The shipped plugins embedded in this binary: (library file name, bytes).\n\
         pub const BUNDLED: &[(&str, &[u8])] = &[\n",
    );
    let mut hasher = DefaultHasher::new();
    for (name, path) in &libs {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        hasher.write(name.as_bytes());
        hasher.write(&bytes);
        let _ = writeln!(
            code,
            "    ({name:?}, include_bytes!({:?})),",
            path.display()
        );
    }
    code.push_str("];\n");
    let _ = writeln!(
        code,
        "/// Names the bundle's folder: changes whenever any embedded byte does.\n\
         pub const BUNDLE_ID: &str = \"{}-{:016x}\";",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default(),
        hasher.finish()
    );
    let file = out.join("bundled_plugins.rs");
    std::fs::write(&file, code).map_err(|e| format!("{}: {e}", file.display()))
}

/// A release build outside the workspace's `target/`, unless the environment says. (A
/// `CARGO_TARGET_DIR` elsewhere counts as outside: `cargo install` honours it too. Developers
/// who keep their target folder elsewhere set `CONDENSE_BUNDLE_PLUGINS=0` to skip the bundle.)
fn wants_bundle(out: &Path, root: &Path) -> bool {
    match std::env::var(BUNDLE_ENV).as_deref() {
        Ok("1") => return true,
        Ok("0") => return false,
        _ => {}
    }
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    release && !out.starts_with(root.join("target"))
}

/// Builds every shipped plugin (not the test-only `test-*` ones) in release, in a target
/// folder of its own under OUT_DIR; returns (library file name, path) of each.
fn build_plugins(root: &Path, out: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let plugins_dir = root.join("plugins");
    let mut names = Vec::new();
    let entries =
        std::fs::read_dir(&plugins_dir).map_err(|e| format!("{}: {e}", plugins_dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if path.join("Cargo.toml").is_file() && !name.starts_with("test-") {
            names.push(name.to_string());
        }
    }
    names.sort();
    let target = out.join("plugins-target");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(root)
        .args(["build", "--release", "--quiet", "--target-dir"])
        .arg(&target);
    for name in &names {
        build.args(["-p", name]);
    }
    // The bundle must not bundle itself recursively, whatever the caller's environment says.
    build.env(BUNDLE_ENV, "0");
    // Debug info is three quarters of a plugin library's bytes (about 20 MB -> 5 MB each);
    // an installed binary carries every plugin, so leave it out of them.
    build
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo");
    let status = build
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "`cargo build --release` of the plugins failed ({status})"
        ));
    }
    let dir = target.join("release");
    let mut libs = Vec::new();
    for name in names {
        let file = format!(
            "{}{}{}",
            std::env::consts::DLL_PREFIX,
            name.replace('-', "_"),
            std::env::consts::DLL_SUFFIX
        );
        let path = dir.join(&file);
        if !path.is_file() {
            return Err(format!("{} was not built", path.display()));
        }
        libs.push((file, path));
    }
    Ok(libs)
}
