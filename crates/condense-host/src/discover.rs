//! Finding plugin libraries by name.
//!
//! Search order: the pipeline file's `[plugins] dirs`, then `CONDENSE_PLUGIN_PATH` (a
//! `:`-separated list, `;` on Windows), then the folders the xtask build puts plugins in
//! (`plugins/` beside the `condense` executable, and `target/plugins/` above it). A plugin
//! given as a path (it contains a path separator or ends in the platform's library suffix) is
//! used as is.

use std::path::{Path, PathBuf};

/// The environment variable holding extra plugin folders.
pub const PLUGIN_PATH_ENV: &str = "CONDENSE_PLUGIN_PATH";

/// The library file name of plugin `name` on this platform: `tool-result-budget` ->
/// `libtool_result_budget.so` (Linux), `libtool_result_budget.dylib` (macOS),
/// `tool_result_budget.dll` (Windows).
pub fn library_file_name(name: &str) -> String {
    format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        name.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    )
}

/// Whether a `plugin = "..."` value is a path rather than a name.
pub fn looks_like_path(plugin: &str) -> bool {
    plugin.contains('/') || plugin.contains('\\') || plugin.ends_with(std::env::consts::DLL_SUFFIX)
}

/// The folders searched for plugins, in order.
pub fn search_dirs(pipeline_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = pipeline_dirs.to_vec();
    if let Some(env) = std::env::var_os(PLUGIN_PATH_ENV) {
        dirs.extend(std::env::split_paths(&env).filter(|p| !p.as_os_str().is_empty()));
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(exe_dir) = exe.parent() {
            dirs.push(exe_dir.join("plugins"));
            // target/<profile>/condense -> target/plugins (where `cargo xtask plugins` puts them).
            if let Some(target) = exe_dir.parent() {
                dirs.push(target.join("plugins"));
                // Test binaries live one level deeper: target/<profile>/deps/.
                if let Some(target2) = target.parent() {
                    if exe_dir.ends_with("deps") {
                        dirs.push(target2.join("plugins"));
                    }
                }
            }
        }
    }
    let mut unique = Vec::new();
    for d in dirs {
        if !unique.contains(&d) {
            unique.push(d);
        }
    }
    unique
}

/// Why a plugin was not found.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    #[error("plugin `{name}` not found (looked for {file} in: {searched}); run `cargo xtask plugins` to build the shipped ones, or set {env}")]
    NotFound {
        name: String,
        file: String,
        searched: String,
        env: &'static str,
    },
    #[error("plugin library {0} does not exist")]
    MissingPath(PathBuf),
}

/// Resolves a `plugin = "..."` value to a library path.
pub fn find_plugin(
    plugin: &str,
    base_dir: Option<&Path>,
    dirs: &[PathBuf],
) -> Result<PathBuf, FindError> {
    if looks_like_path(plugin) {
        let p = PathBuf::from(plugin);
        let p = match base_dir {
            Some(base) if p.is_relative() => base.join(p),
            _ => p,
        };
        return if p.is_file() {
            Ok(p)
        } else {
            Err(FindError::MissingPath(p))
        };
    }
    let file = library_file_name(plugin);
    for dir in dirs {
        let candidate = dir.join(&file);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(FindError::NotFound {
        name: plugin.to_string(),
        file,
        searched: if dirs.is_empty() {
            "no folders".to_string()
        } else {
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        },
        env: PLUGIN_PATH_ENV,
    })
}

/// Every plugin library in the search folders: (name, path), first occurrence of a name wins.
pub fn list_plugins(dirs: &[PathBuf]) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut here: Vec<(String, PathBuf)> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter_map(|p| {
                let file = p.file_name()?.to_str()?;
                let stem = file
                    .strip_prefix(std::env::consts::DLL_PREFIX)?
                    .strip_suffix(std::env::consts::DLL_SUFFIX)?;
                Some((stem.replace('_', "-"), p.clone()))
            })
            .collect();
        here.sort();
        for (name, path) in here {
            if !found.iter().any(|(n, _)| *n == name) {
                found.push((name, path));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_library_files() {
        let f = library_file_name("tool-result-budget");
        assert!(f.contains("tool_result_budget"), "{f}");
    }

    #[test]
    fn not_found_lists_the_folders() {
        let err =
            find_plugin("nope", None, &[PathBuf::from("/a"), PathBuf::from("/b")]).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("plugin `nope` not found") && msg.contains("/a, /b"),
            "{msg}"
        );
    }

    #[test]
    fn paths_are_taken_as_paths() {
        assert!(looks_like_path("./x") && looks_like_path(r"plugins\x"));
        assert!(looks_like_path(&format!(
            "x{}",
            std::env::consts::DLL_SUFFIX
        )));
        assert!(!looks_like_path("snip"));
        let err = find_plugin("./missing/libx.so", Some(Path::new("/base")), &[]).unwrap_err();
        assert!(err.to_string().contains("/base/./missing/libx.so"), "{err}");
    }
}
