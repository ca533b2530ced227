//! Finding plugin libraries by name.
//!
//! Search order:
//! 1. the pipeline file's `[plugins] dirs`;
//! 2. `CONDENSE_PLUGIN_PATH` (a `:`-separated list, `;` on Windows);
//! 3. the folders that travel with the `condense` executable: `plugins/` beside it,
//!    `../lib/condense/plugins` (where `cargo xtask install --prefix DIR` puts them:
//!    `DIR/bin/condense` and `DIR/lib/condense/plugins/`), and `target/plugins/` above it (where
//!    `cargo xtask plugins` builds them in a checkout);
//!    then the plugins a bundled binary unpacked ([`set_bundled_dir`]: a binary installed with
//!    `cargo install --path crates/condense` carries the shipped plugins and unpacks them once);
//! 4. the per-user data folder ([`user_plugin_dir`]: `$XDG_DATA_HOME/condense/plugins`, by
//!    default `~/.local/share/condense/plugins`), for a binary installed on its own
//!    (`cargo install`) and for the user's own stages.
//!
//! Loading a library runs abi_stable's layout check, unless this host has passed it for the
//! same library before: the record of passes ([`condense_abi::CheckedLayouts`]) is kept in the
//! per-user cache folder ([`user_cache_dir`], file [`CHECKED_LAYOUTS_FILE`]).
//!
//! The executable's own folders come before the user's so that a binary finds the plugins
//! built with it (same ABI) first. A plugin given as a path (it contains a path separator or
//! ends in the platform's library suffix) is used as is. Either way the file must be a
//! complete shared library for this platform ([`condense_abi::libfile`]), so a damaged one is
//! refused here, as a configuration problem, before the dynamic loader could crash on it.

use condense_abi::libfile::{check_library, LibFileError};
use condense_abi::CheckedLayouts;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where this binary unpacked its bundled plugins, if it carries any.
static BUNDLED_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Tells discovery where the plugins bundled in this binary are (set once, at start-up, by
/// the binary; searched after the executable's own folders). Later calls are ignored.
pub fn set_bundled_dir(dir: PathBuf) {
    let _ = BUNDLED_DIR.set(dir);
}

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
            // PREFIX/bin/condense -> PREFIX/lib/condense/plugins (`cargo xtask install`).
            if let Some(prefix) = exe_dir.parent() {
                dirs.push(prefix.join("lib").join("condense").join("plugins"));
            }
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
    if let Some(bundled) = BUNDLED_DIR.get() {
        dirs.push(bundled.clone());
    }
    if let Some(user) = user_plugin_dir() {
        dirs.push(user);
    }
    let mut unique = Vec::new();
    for d in dirs {
        if !unique.contains(&d) {
            unique.push(d);
        }
    }
    unique
}

/// The per-user plugin folder: `$XDG_DATA_HOME/condense/plugins` (an absolute
/// `XDG_DATA_HOME` only, as the XDG spec says), else `~/.local/share/condense/plugins`; on
/// macOS `~/Library/Application Support/condense/plugins`; on Windows
/// `%LOCALAPPDATA%\condense\plugins`. `None` when the home folder is unknown.
pub fn user_plugin_dir() -> Option<PathBuf> {
    let data = if cfg!(windows) {
        absolute_var("LOCALAPPDATA")?
    } else if cfg!(target_vendor = "apple") {
        absolute_var("HOME")?
            .join("Library")
            .join("Application Support")
    } else {
        absolute_var("XDG_DATA_HOME")
            .or_else(|| absolute_var("HOME").map(|h| h.join(".local").join("share")))?
    };
    Some(data.join("condense").join("plugins"))
}

/// The per-user cache folder: `$XDG_CACHE_HOME/condense` (absolute only), else
/// `~/.cache/condense`; on macOS `~/Library/Caches/condense`; on Windows
/// `%LOCALAPPDATA%\condense\cache`. `None` when the home folder is unknown. Whatever is in it
/// may be deleted at any time.
pub fn user_cache_dir() -> Option<PathBuf> {
    Some(if cfg!(windows) {
        absolute_var("LOCALAPPDATA")?.join("condense").join("cache")
    } else if cfg!(target_vendor = "apple") {
        absolute_var("HOME")?
            .join("Library")
            .join("Caches")
            .join("condense")
    } else {
        absolute_var("XDG_CACHE_HOME")
            .or_else(|| absolute_var("HOME").map(|h| h.join(".cache")))?
            .join("condense")
    })
}

/// An environment variable naming an absolute path (relative ones are ignored, as the XDG
/// spec says).
fn absolute_var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// The file in [`user_cache_dir`] that records the plugin libraries whose ABI layout a host
/// has checked ([`CheckedLayouts`]).
pub const CHECKED_LAYOUTS_FILE: &str = "checked-plugin-layouts";

/// The record of layout checks passed, from the per-user cache (empty when there is none or
/// it cannot be read: every plugin is then checked).
pub fn read_checked_layouts() -> CheckedLayouts {
    user_cache_dir()
        .and_then(|dir| std::fs::read_to_string(dir.join(CHECKED_LAYOUTS_FILE)).ok())
        .map_or_else(CheckedLayouts::default, |text| CheckedLayouts::parse(&text))
}

/// Writes `checked` back to the per-user cache when a check was added. Best effort: a cache
/// that cannot be written only costs the next run the checks, so a failure is not reported.
pub fn save_checked_layouts(checked: &CheckedLayouts) {
    if !checked.changed() {
        return;
    }
    if let Some(dir) = user_cache_dir() {
        // What a write killed half-way left (writes are rare: only when a pass is added).
        let _ = condense_store::remove_orphan_temps(&dir, 0);
        let _ = condense_store::write_atomic(
            &dir.join(CHECKED_LAYOUTS_FILE),
            checked.to_text().as_bytes(),
        );
    }
}

/// How to get the shipped plugins, for the messages of a binary that found none.
pub const HOW_TO_INSTALL: &str = "from a condense checkout, install condense with its plugins (`cargo install --path crates/condense` or `cargo xtask install`), or build them in place (`cargo xtask plugins`)";

/// Why a plugin was not found.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    #[error(
        "plugin `{name}` not found (looked for {file} in: {searched}); {}, or set {env}",
        HOW_TO_INSTALL
    )]
    NotFound {
        name: String,
        file: String,
        searched: String,
        env: &'static str,
    },
    #[error("plugin library {0} does not exist")]
    MissingPath(PathBuf),
    #[error("plugin library {0} is a directory; name the library file in it, or list the folder in the pipeline's [plugins] dirs")]
    Directory(PathBuf),
    #[error("plugin library {0} is a symbolic link loop")]
    SymlinkLoop(PathBuf),
    #[error("plugin library {path} is a symbolic link to {target}, which does not exist")]
    DanglingLink { path: PathBuf, target: PathBuf },
    #[error("plugin library {path} cannot be read: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error("{path}: not a usable plugin library: {source}")]
    Damaged { path: PathBuf, source: LibFileError },
}

/// The `ELOOP` errno of this platform: too many levels of symbolic links.
const ELOOP: i32 = if cfg!(any(target_os = "linux", target_os = "android")) {
    40
} else {
    62
};

/// What is wrong with a plugin path that is not a readable file, in words.
fn path_problem(p: &Path) -> FindError {
    let path = p.to_path_buf();
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => FindError::Directory(path),
        Ok(_) => FindError::Unreadable {
            path,
            reason: "not a regular file".into(),
        },
        Err(e) if !cfg!(windows) && e.raw_os_error() == Some(ELOOP) => FindError::SymlinkLoop(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::read_link(p) {
            Ok(target) => FindError::DanglingLink { path, target },
            Err(_) => FindError::MissingPath(path),
        },
        Err(e) => FindError::Unreadable {
            path,
            reason: e.to_string(),
        },
    }
}

/// `path` when it is a complete shared library for this platform.
fn usable(path: PathBuf) -> Result<PathBuf, FindError> {
    match check_library(&path) {
        Ok(_) => Ok(path),
        Err(source) => Err(FindError::Damaged { path, source }),
    }
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
            usable(p)
        } else {
            Err(path_problem(&p))
        };
    }
    let file = library_file_name(plugin);
    for dir in dirs {
        let candidate = dir.join(&file);
        if candidate.is_file() {
            return usable(candidate);
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
