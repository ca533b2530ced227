//! Reading a conversation file (or stdin) and writing results.

use crate::cli::InputArgs;
use crate::Failure;
use condense_formats::{Document, ReadOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// A parsed input and where it came from.
pub struct Input {
    pub doc: Document,
    /// The file, or None for stdin.
    pub path: Option<PathBuf>,
    /// The `--select` pointer it was read with.
    pub select: Option<String>,
}

impl Input {
    /// The folder the default store lives in: beside the input (the current folder for stdin).
    pub fn default_store_dir(&self) -> PathBuf {
        let dir = self
            .path
            .as_deref()
            .and_then(Path::parent)
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        dir.join(".condense")
    }
}

/// The bytes of `path`, or one line naming it.
fn read_file(path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| Failure::run(format!("{}: cannot read: {e}", path.display())))
}

fn parse(bytes: &[u8], name: &str, opts: &ReadOptions) -> Result<Document, Failure> {
    condense_formats::read(bytes, name, opts).map_err(|e| Failure::run(e.to_string()))
}

/// Reads and parses the transcript at `path`, its format detected.
pub fn read_path(path: &Path) -> Result<Document, Failure> {
    parse(
        &read_file(path)?,
        &path.display().to_string(),
        &ReadOptions::default(),
    )
}

/// Reads and parses the input named by `args`.
pub fn read_input(args: &InputArgs) -> Result<Input, Failure> {
    let stdin = args.file.as_os_str() == "-";
    let (bytes, name) = if stdin {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| Failure::run(format!("<stdin>: cannot read: {e}")))?;
        (buf, "-".to_string())
    } else {
        (read_file(&args.file)?, args.file.display().to_string())
    };
    let opts = ReadOptions {
        format: args.format,
        select: args.select.clone(),
    };
    let doc = parse(&bytes, &name, &opts)?;
    Ok(Input {
        doc,
        path: (!stdin).then(|| args.file.clone()),
        select: args.select.clone(),
    })
}

/// Writes bytes to `out`, or to stdout when None. File writes are atomic
/// ([`condense_store::write_atomic`]), so a failed run never leaves a half-written output.
pub fn write_output(out: Option<&Path>, bytes: &[u8]) -> Result<(), Failure> {
    match out {
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(bytes)
                .and_then(|()| stdout.flush())
                .map_err(|e| Failure::run(format!("<stdout>: cannot write: {e}")))
        }
        Some(path) => condense_store::write_atomic(path, bytes).map_err(|e| {
            let reason = match e {
                condense_store::StoreError::Io { source, .. } => source.to_string(),
                other => other.to_string(),
            };
            Failure::run(format!("{}: cannot write: {reason}", path.display()))
        }),
    }
}
