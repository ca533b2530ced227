//! Writing results: to standard output (text and JSON, a closed pipe ending the run quietly),
//! and to files, replaced atomically ([`write_output`]).
//!
//! A file is written in two steps, so that `compress` can write its output while it commits
//! the store ([`stage_output`]) and still put it in place only once the store holds what
//! expands it ([`Staged::publish`]):
//!
//! ```text
//! let staged = stage_output(Some(path), &bytes)?;  // .out.json.condense-<pid>-0.tmp, synced
//! batch.commit()?;                                 // what expands the output
//! staged.publish()?;                               // renamed over out.json
//! ```
//!
//! A staged output dropped without being published (the commit failed) is removed.
//!
//! JSON reports round fractional numbers (milliseconds, shares) to 3 decimals: binary floats
//! sum to `0.13572700000000001`, which says nothing more than `0.136`.

use crate::term::is_broken_pipe;
use crate::Failure;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Prints `text` on stdout; a closed stdout (`| head`) ends the run with exit 0.
pub fn print(text: &str) -> Result<(), Failure> {
    print_bytes(text.as_bytes())
}

/// [`print()`] for bytes.
fn print_bytes(bytes: &[u8]) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if is_broken_pipe(&e) => Err(Failure::closed_stdout()),
        Err(e) => Err(Failure::run(format!("<stdout>: cannot write: {e}"))),
    }
}

/// Writes bytes to `out`, or to stdout when None or `-`. File writes are atomic (a temporary
/// file beside it, renamed over it), so a failed run never leaves a half-written output; a new
/// file gets the mode the umask gives any new file, a replaced one keeps its mode. A closed
/// stdout (`| head`) ends the run quietly (exit 0).
pub fn write_output(out: Option<&Path>, bytes: &[u8]) -> Result<(), Failure> {
    match out.filter(|p| p.as_os_str() != "-") {
        None => print_bytes(bytes),
        Some(path) => match stage_file(path, bytes)? {
            Some(staged) => staged.publish(),
            None => write_into(path, bytes),
        },
    }
}

/// [`write_output`]'s first step for a file: the bytes written to a hidden file beside `out`
/// and synced, to be renamed over it by [`Staged::publish`]. `None` when `out` is standard
/// output (none or `-`), or a device or pipe, which [`write_output`] writes into when the
/// output is ready to be seen.
pub fn stage_output(out: Option<&Path>, bytes: &[u8]) -> Result<Option<Staged>, Failure> {
    match out.filter(|p| p.as_os_str() != "-") {
        None => Ok(None),
        Some(path) => stage_file(path, bytes),
    }
}

/// An output written beside its path, not in place yet ([`stage_output`]). Dropped without
/// [`Staged::publish`], the hidden file is removed.
#[derive(Debug)]
pub struct Staged {
    /// The hidden file (`None` once published or removed).
    tmp: Option<PathBuf>,
    path: PathBuf,
}

impl Staged {
    /// Renames the output into place (atomic: a reader sees the old file or the new one).
    pub fn publish(mut self) -> Result<(), Failure> {
        let Some(tmp) = self.tmp.take() else {
            return Ok(());
        };
        std::fs::rename(&tmp, &self.path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Failure::run(format!("{}: cannot write: {e}", self.path.display()))
        })
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Writes into a device or pipe `path` (`--out /dev/stdout`, a FIFO): renaming a file over it
/// would replace the device itself.
fn write_into(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| Failure::run(format!("{}: cannot write: {e}", path.display())))
}

/// The first step of [`write_output`]'s atomic file write: `None` (nothing written) for a
/// device or a pipe.
fn stage_file(path: &Path, bytes: &[u8]) -> Result<Option<Staged>, Failure> {
    let shown = path.display();
    if path.is_dir() {
        return Err(Failure::usage(format!(
            "--out {shown}: is a folder; give a file name (a folder is for a folder input)"
        )));
    }
    let named_as_folder = path.as_os_str().to_string_lossy().ends_with('/');
    let name = path.file_name().filter(|_| !named_as_folder);
    let Some(name) = name else {
        return Err(Failure::usage(format!(
            "--out {shown}: names a folder that does not exist; give a file name"
        )));
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let fail = |e: std::io::Error| Failure::run(format!("{shown}: cannot write: {e}"));
    let existing = std::fs::metadata(path).ok();
    if existing.as_ref().is_some_and(|m| !m.is_file()) {
        return Ok(None);
    }
    std::fs::create_dir_all(&dir).map_err(fail)?;
    let kept_mode = existing.map(|m| m.permissions());
    // A hidden name beside the output, unique to this process: the rename is atomic only
    // within one file system.
    let mut n = 0u32;
    let (tmp, mut file) = loop {
        let tmp = dir.join(format!(
            ".{}.condense-{}-{n}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        // OpenOptions creates with 0o666 less the umask: the mode any new file gets.
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
            Err(e) => return Err(fail(e)),
        }
    };
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| match &kept_mode {
            Some(mode) => std::fs::set_permissions(&tmp, mode.clone()),
            None => Ok(()),
        });
    let staged = Staged {
        tmp: Some(tmp),
        path: path.to_path_buf(),
    };
    // On an error the hidden file goes with `staged`.
    written.map_err(fail).map(|()| Some(staged))
}

/// `value` as pretty JSON, fractional numbers rounded to 3 decimals.
pub fn json_text(value: &impl Serialize) -> Result<String, Failure> {
    let mut v = serde_json::to_value(value).map_err(|e| Failure::run(e.to_string()))?;
    round_floats(&mut v);
    serde_json::to_string_pretty(&v).map_err(|e| Failure::run(e.to_string()))
}

/// Prints `value` as pretty JSON (see [`json_text`]) and a newline.
pub fn print_json(value: &impl Serialize) -> Result<(), Failure> {
    print(&format!("{}\n", json_text(value)?))
}

/// Rounds every fractional number in `v` to 3 decimals.
fn round_floats(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Number(n) if n.is_f64() => {
            if let Some(x) = n.as_f64() {
                let rounded = (x * 1000.0).round() / 1000.0;
                if let Some(r) = serde_json::Number::from_f64(rounded) {
                    *n = r;
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(round_floats),
        serde_json::Value::Object(map) => map.values_mut().for_each(round_floats),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files in `dir`, sorted.
    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_staged_output_is_in_place_once_published_and_gone_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.json");
        std::fs::write(&out, "old").unwrap();
        // Staged: the old file is still what a reader sees, beside one hidden file.
        let staged = stage_output(Some(&out), b"new").unwrap().unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"old");
        assert_eq!(files(dir.path()).len(), 2);
        staged.publish().unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        assert_eq!(files(dir.path()), ["out.json"]);
        // Dropped unpublished (what went before it failed): nothing changes.
        drop(stage_output(Some(&out), b"newer").unwrap());
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        assert_eq!(files(dir.path()), ["out.json"]);
        // Standard output and devices are written when the output is ready, not staged.
        for later in [None, Some(Path::new("-")), Some(Path::new("/dev/null"))] {
            assert!(stage_output(later, b"x").unwrap().is_none());
        }
        write_output(Some(Path::new("/dev/null")), b"x").unwrap();
        assert!(!std::fs::metadata("/dev/null").unwrap().is_file());
    }

    #[test]
    fn fractions_are_rounded_integers_kept() {
        let v = serde_json::json!({"millis": 0.13572700000000001, "n": 12, "a": [2.0004, 1e300]});
        let text = json_text(&v).unwrap();
        assert!(text.contains("\"millis\": 0.136"), "{text}");
        assert!(
            text.contains("\"n\": 12") && text.contains("2.0,"),
            "{text}"
        );
    }
}
