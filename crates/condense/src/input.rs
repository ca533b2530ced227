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
        let bytes = std::fs::read(&args.file)
            .map_err(|e| Failure::run(format!("{}: cannot read: {e}", args.file.display())))?;
        (bytes, args.file.display().to_string())
    };
    let opts = ReadOptions {
        format: args.format,
        select: args.select.clone(),
    };
    let doc =
        condense_formats::read(&bytes, &name, &opts).map_err(|e| Failure::run(e.to_string()))?;
    Ok(Input {
        doc,
        path: (!stdin).then(|| args.file.clone()),
        select: args.select.clone(),
    })
}

/// Writes bytes to `out`, or to stdout when None. File writes are atomic (temp file + rename),
/// so a failed run never leaves a half-written output.
pub fn write_output(out: Option<&Path>, bytes: &[u8]) -> Result<(), Failure> {
    match out {
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(bytes)
                .and_then(|()| stdout.flush())
                .map_err(|e| Failure::run(format!("<stdout>: cannot write: {e}")))
        }
        Some(path) => {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let tmp = dir.join(format!(
                ".{}.condense-tmp",
                path.file_name()
                    .map_or("out".into(), |n| n.to_string_lossy())
            ));
            std::fs::write(&tmp, bytes)
                .and_then(|()| std::fs::rename(&tmp, path))
                .map_err(|e| Failure::run(format!("{}: cannot write: {e}", path.display())))
        }
    }
}
