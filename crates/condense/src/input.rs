//! Reading conversations (a file, standard input, or every session in a folder).
//!
//! Commands that take folders (`stats`, `compress`, `diff`, `snapshot`, `compare`, `eval`)
//! share one walker, [`collect_inputs`], and one way of going on past a bad file, [`Skipped`]:
//!
//! ```text
//! sessions/                         condense stats sessions/
//!   a.jsonl                 read
//!   a.condensed.jsonl       skipped: an output of `condense compress` (see condensed_name)
//!   2025/05/01/b.jsonl      read (folders are walked recursively)
//!   notes.md                skipped: not .json, .jsonl or .traj
//!   ui_messages.json        skipped: a Cline task folder's companion file (COMPANION_FILES)
//!   broken.json             read, fails: one line on stderr, the others go on, exit 1
//!   .condense/              skipped: hidden (and a store: any folder with a store's layout)
//! ```

use crate::cli::InputArgs;
use crate::Failure;
use condense_formats::files::{COMPANION_FILES, SESSION_EXTENSIONS};
use condense_formats::{Document, ReadOptions};
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A parsed input and where it came from.
pub struct Input {
    pub doc: Document,
    /// The file, or None for stdin.
    pub path: Option<PathBuf>,
    /// The `--select` pointer it was read with.
    pub select: Option<String>,
    /// The file it was read from, still open (None for stdin): `compress` lets the document's
    /// text go while the stages run and reads it back from here
    /// ([`Document::send_text_away`]).
    pub file: Option<std::fs::File>,
}

/// The folder the default store of the input at `path` lives in: beside it (the current folder
/// for stdin, `None`).
pub fn default_store_dir(path: Option<&Path>) -> PathBuf {
    let dir = path
        .and_then(Path::parent)
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    dir.join(".condense")
}

/// What an earlier run knew of message lists ([`condense_formats::known`]), by first
/// element's key: a reader leaves unread what it covers.
pub type Known<'a> = condense_formats::known::Lists<'a>;

impl Input {
    /// The input's name in reports: its path, or `<stdin>`.
    pub fn source(&self) -> String {
        self.path
            .as_ref()
            .map_or("<stdin>".to_string(), |p| p.display().to_string())
    }
}

/// The bytes of `path`, or one line naming it, and the file still open. As `std::fs::read`,
/// into a buffer of the file's size made for it ([`crate::memory::input_buffer`]).
fn read_file(path: &Path) -> Result<(Vec<u8>, std::fs::File), Failure> {
    let fail = |e: std::io::Error| Failure::run(format!("{}: cannot read: {e}", path.display()));
    let mut file = std::fs::File::open(path).map_err(fail)?;
    let size = file.metadata().map_or(0, |m| m.len());
    // One byte more than the file: `read_to_end` finds the end without growing the buffer.
    // A size the machine cannot hold fails here, in one line, as `std::fs::read` fails.
    let want = usize::try_from(size).map_or(usize::MAX, |n| n.saturating_add(1));
    let mut bytes = crate::memory::input_buffer(want)
        .map_err(|e| fail(std::io::Error::new(std::io::ErrorKind::OutOfMemory, e)))?;
    file.read_to_end(&mut bytes).map_err(fail)?;
    Ok((bytes, file))
}

/// Parses `bytes`, which the document keeps as its text (no second copy of the input).
fn parse(bytes: Vec<u8>, name: &str, opts: &ReadOptions) -> Result<Document, Failure> {
    parse_knowing(bytes, name, opts, None)
}

/// [`parse`], leaving unread what `known` covers.
fn parse_knowing(
    bytes: Vec<u8>,
    name: &str,
    opts: &ReadOptions,
    known: Option<Known<'_>>,
) -> Result<Document, Failure> {
    match known {
        Some(known) => condense_formats::read_owned_knowing(bytes, name, opts, known),
        None => condense_formats::read_owned(bytes, name, opts),
    }
    .map_err(|e| Failure::run(e.to_string()))
}

/// Reads and parses the transcript at `path`, its format detected.
pub fn read_path(path: &Path) -> Result<Document, Failure> {
    parse(
        read_file(path)?.0,
        &path.display().to_string(),
        &ReadOptions::default(),
    )
}

/// Reads and parses the file at `path` with the `--format` and `--select` of `args` (one file
/// of a folder the command was given).
pub fn read_at(path: &Path, args: &InputArgs) -> Result<Input, Failure> {
    read_at_knowing(path, args, None)
}

/// [`read_at`], leaving unread what `known` covers.
pub fn read_at_knowing(
    path: &Path,
    args: &InputArgs,
    known: Option<Known<'_>>,
) -> Result<Input, Failure> {
    let opts = read_options(args);
    let (bytes, file) = read_file(path)?;
    Ok(Input {
        doc: parse_knowing(bytes, &path.display().to_string(), &opts, known)?,
        path: Some(path.to_path_buf()),
        select: opts.select,
        file: Some(file),
    })
}

fn read_options(args: &InputArgs) -> ReadOptions {
    ReadOptions {
        format: args.format,
        select: args.select.clone(),
    }
}

/// Reads and parses the input named by `args` (a file, or `-` for standard input).
pub fn read_input(args: &InputArgs) -> Result<Input, Failure> {
    read_input_knowing(args, None)
}

/// [`read_input`], leaving unread what `known` covers.
pub fn read_input_knowing(args: &InputArgs, known: Option<Known<'_>>) -> Result<Input, Failure> {
    if args.file.as_os_str() != "-" {
        return read_at_knowing(&args.file, args, known);
    }
    let mut buf = Vec::new();
    let stdin = std::io::stdin();
    if std::io::IsTerminal::is_terminal(&stdin) {
        // Not piped: the user may not know condense is waiting for them.
        eprintln!(
            "condense: reading a conversation from standard input (end it with Ctrl-D; \
             or give a FILE, see --help)"
        );
    }
    stdin
        .lock()
        .read_to_end(&mut buf)
        .map_err(|e| Failure::run(format!("<stdin>: cannot read: {e}")))?;
    let opts = read_options(args);
    Ok(Input {
        doc: parse_knowing(buf, "-", &opts, known)?,
        path: None,
        select: opts.select,
        file: None,
    })
}

/// Whether `args` names a folder (the command then runs on every session in it).
pub fn is_folder(args: &InputArgs) -> bool {
    args.file.as_os_str() != "-" && args.file.is_dir()
}

/// Loads `pipeline`'s plugins on a second thread while `read` (the input) runs on this one.
/// Loading (finding, mapping and relocating each library, checking its layout, configuring its
/// stage) and reading (the file's pages, parsing) are independent and each mostly one core's
/// work: a turn at 1M tokens used 18.0 ms of CPU in 18.3 ms of wall time. A panic while
/// loading carries on in this thread, where `main` reports it.
pub(crate) fn read_while_loading<T>(
    pipeline: condense_host::Pipeline,
    read: impl FnOnce() -> T,
) -> (T, Result<condense_host::LoadedPipeline, Failure>) {
    let (loaded, read) = crate::concurrent::beside(
        "load plugins",
        move || condense_host::LoadedPipeline::load(pipeline),
        read,
    );
    (read, loaded.map_err(Failure::from))
}

/// What `condense compress DIR` inserts before the extension of each output it writes beside
/// its input: `a.jsonl` → `a.condensed.jsonl`. A folder walk skips such files, so a second run
/// never takes its own outputs for sessions.
const CONDENSED_MARK: &str = ".condensed";

/// The name of the output `condense compress DIR` writes beside `name`: [`CONDENSED_MARK`]
/// before the last extension (`rollout-1.jsonl` → `rollout-1.condensed.jsonl`), or at the end
/// when there is none.
pub fn condensed_name(name: &str) -> String {
    match name.rfind('.').filter(|&i| i > 0) {
        Some(i) => format!("{}{CONDENSED_MARK}{}", &name[..i], &name[i..]),
        None => format!("{name}{CONDENSED_MARK}"),
    }
}

/// Whether `name` is an output of `condense compress DIR` ([`condensed_name`]).
fn is_condensed_output(name: &str) -> bool {
    let stem = name
        .rfind('.')
        .filter(|&i| i > 0)
        .map_or(name, |i| &name[..i]);
    stem.ends_with(CONDENSED_MARK) || name.ends_with(CONDENSED_MARK)
}

/// Whether a file found in a folder is a session to read: a session extension, not hidden,
/// not an output of `compress`, not a known companion file.
fn is_session_file(name: &str) -> bool {
    let extension = Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    !name.starts_with('.')
        && !is_condensed_output(name)
        && !COMPANION_FILES.contains(&name)
        && extension.is_some_and(|e| SESSION_EXTENSIONS.contains(&e.as_str()))
}

/// The session files `paths` name, sorted and without duplicates. A file is taken as given,
/// whatever its name. A folder is walked recursively for session files ([`SESSION_EXTENSIONS`],
/// not hidden, not outputs of `compress`); hidden folders, folders with a store's layout
/// ([`condense_store::looks_like_store`]) and `leave_out` (where `compress --out` writes) are
/// not entered, nor are symbolic links to folders (a link can make a cycle). A folder that
/// cannot be read is reported in `skipped`; a path that does not exist is a usage error.
pub fn collect_inputs(
    paths: &[PathBuf],
    leave_out: Option<&Path>,
    skipped: &mut Skipped,
) -> Result<Vec<PathBuf>, Failure> {
    let leave_out = leave_out.and_then(|p| p.canonicalize().ok());
    let left_out = |dir: &Path| {
        leave_out
            .as_deref()
            .is_some_and(|out| dir.canonicalize().is_ok_and(|d| d == out))
    };
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut stack = vec![p.clone()];
            while let Some(dir) = stack.pop() {
                let entries = match std::fs::read_dir(&dir) {
                    Ok(entries) => entries,
                    Err(e) => {
                        skipped.add(
                            &dir,
                            Failure::run(format!("{}: cannot read folder: {e}", dir.display())),
                        );
                        continue;
                    }
                };
                for entry in entries.filter_map(Result::ok) {
                    let path = entry.path();
                    let name = entry.file_name().to_string_lossy().to_string();
                    let Ok(kind) = entry.file_type() else {
                        continue;
                    };
                    let is_file = kind.is_file() || (kind.is_symlink() && path.is_file());
                    if kind.is_dir() {
                        if !name.starts_with('.')
                            && !condense_store::looks_like_store(&path)
                            && !left_out(&path)
                        {
                            stack.push(path);
                        }
                    } else if is_file && is_session_file(&name) {
                        files.push(path);
                    }
                }
            }
        } else if p.is_file() {
            files.push(p.clone());
        } else {
            return Err(Failure::usage(format!(
                "{}: no such file or folder",
                p.display()
            )));
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// The files a command over many inputs could not process. Each is reported on stderr when it
/// happens (one line naming it and why); the command goes on with the others and ends with
/// [`Skipped::outcome`]: exit 1 when anything was skipped.
#[derive(Debug, Default, Serialize)]
#[serde(transparent)]
pub struct Skipped {
    pub files: Vec<SkippedFile>,
}

#[derive(Debug, Serialize)]
pub struct SkippedFile {
    pub file: String,
    pub error: String,
}

impl Skipped {
    /// Reports that `file` was skipped because of `failure`, and counts it.
    pub fn add(&mut self, file: &Path, failure: Failure) {
        let file = file.display().to_string();
        // Read errors already start with the file's name (`a.jsonl:3: invalid JSON ...`).
        let line = if failure.message.starts_with(&file) {
            failure.message.clone()
        } else {
            format!("{file}: {}", failure.message)
        };
        crate::term::warn(&format!("skipped {line}"));
        self.files.push(SkippedFile {
            file,
            error: failure.message,
        });
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// `read(path)`, or `None` after reporting why it failed.
    pub fn read<T>(
        &mut self,
        path: &Path,
        read: impl FnOnce(&Path) -> Result<T, Failure>,
    ) -> Option<T> {
        read(path).map_err(|f| self.add(path, f)).ok()
    }

    /// ", 1 file skipped" (or nothing): for a command's own final line.
    pub fn suffix(&self) -> String {
        match self.len() {
            0 => String::new(),
            1 => ", 1 file skipped".to_string(),
            n => format!(", {n} files skipped"),
        }
    }

    /// How a command over `done` processed files ends: `Ok` when nothing was skipped, else
    /// exit 1 with one line saying how many files were skipped (each was named above).
    pub fn outcome(&self, done: usize) -> Result<(), Failure> {
        if self.is_empty() {
            return Ok(());
        }
        Err(Failure::run(format!(
            "{} skipped (named above), {done} processed",
            files(self.len())
        )))
    }
}

/// "1 file", "3 files".
pub fn files(n: usize) -> String {
    format!("{n} file{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condensed_outputs_are_named_so_the_walker_skips_them() {
        for (name, output) in [
            ("a.jsonl", "a.condensed.jsonl"),
            ("x.traj.json", "x.traj.condensed.json"),
            ("noext", "noext.condensed"),
            (".hidden", ".hidden.condensed"),
        ] {
            assert_eq!(condensed_name(name), output);
            assert!(is_condensed_output(output), "{output}");
            assert!(!is_condensed_output(name), "{name}");
        }
        assert!(!is_session_file("a.condensed.jsonl"));
        assert!(!is_session_file("ui_messages.json"));
        assert!(is_session_file("api_conversation_history.json"));
        assert!(is_session_file("a.JSONL") && is_session_file("run.traj"));
        assert!(!is_session_file("README.md") && !is_session_file(".a.jsonl"));
        assert!(!is_session_file("UPSTREAM_LICENSE.txt") && !is_session_file("jsonl"));
    }
}
