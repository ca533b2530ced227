//! `condense plugin new NAME`: scaffolds an out-of-tree stage plugin crate.
//!
//! The templates live in `src/scaffold/`; docs/writing-a-stage.md shows the same code, and an
//! integration test generates, builds, loads and runs a scaffolded plugin end to end.

use crate::cli::PluginNewArgs;
use crate::Failure;
use std::path::{Path, PathBuf};

const CARGO_TOML: &str = include_str!("scaffold/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("scaffold/lib.rs.tmpl");
const STAGE_TEST: &str = include_str!("scaffold/stage_test.rs.tmpl");
const PIPELINE: &str = include_str!("scaffold/pipeline.toml.tmpl");

/// Where this condense was built from: its ABI and model crates, for path dependencies.
fn workspace_crates() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
}

/// A path as TOML-safe text (forward slashes).
fn toml_path(p: &Path) -> String {
    p.display().to_string().replace('\\', "/")
}

pub fn plugin_new(args: PluginNewArgs) -> Result<(), Failure> {
    let name = &args.name;
    if !valid_name(name) {
        return Err(Failure::usage(format!(
            "plugin name `{name}`: use lowercase letters, digits and dashes, starting with a letter (e.g. `cut-long-lines`)"
        )));
    }
    let crates = match &args.abi_path {
        Some(p) => p.clone(),
        None => workspace_crates(),
    };
    let abi = crates.join("condense-abi");
    let model = crates.join("condense-model");
    if !abi.join("Cargo.toml").is_file() || !model.join("Cargo.toml").is_file() {
        return Err(Failure::usage(format!(
            "cannot find the condense-abi and condense-model crates in {}; pass --abi-path <condense checkout>/crates",
            crates.display()
        )));
    }
    let abi = abi.canonicalize().unwrap_or(abi);
    let model = model.canonicalize().unwrap_or(model);
    let dir = args.dir.join(name);
    if dir.exists() {
        return Err(Failure::usage(format!("{} already exists", dir.display())));
    }
    let crate_name = name.replace('-', "_");
    let lib_file = condense_host::discover::library_file_name(name);
    let fill = |t: &str| {
        t.replace("{{name}}", name)
            .replace("{{crate_name}}", &crate_name)
            .replace("{{abi_path}}", &toml_path(&abi))
            .replace("{{model_path}}", &toml_path(&model))
            .replace("{{lib_path}}", &format!("target/debug/{lib_file}"))
    };
    let files = [
        ("Cargo.toml", fill(CARGO_TOML)),
        ("src/lib.rs", fill(LIB_RS)),
        ("tests/stage.rs", fill(STAGE_TEST)),
        ("pipeline.toml", fill(PIPELINE)),
        (".gitignore", "/target\n.condense/\n".to_string()),
    ];
    for (rel, text) in &files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Failure::run(format!("{}: {e}", parent.display())))?;
        }
        std::fs::write(&path, text)
            .map_err(|e| Failure::run(format!("{}: {e}", path.display())))?;
    }
    println!("created {} (stage `{name}`)", dir.display());
    println!("next:\n  cd {}\n  cargo test\n  cargo build\n  condense compress <session> --pipeline pipeline.toml", dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::valid_name;

    #[test]
    fn names_are_checked() {
        assert!(valid_name("cut-long-lines") && valid_name("x2"));
        assert!(
            !valid_name("Cut")
                && !valid_name("-x")
                && !valid_name("x-")
                && !valid_name("a_b")
                && !valid_name("")
        );
    }
}
