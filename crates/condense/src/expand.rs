//! `condense expand`: rebuilds the original conversation from a compressed file and its store.
//!
//! 1. **Read it as it was compressed.** The store records how each session was read (format and
//!    `--select` pointer) and which output messages its archive knows, per format
//!    ([`condense_host::ReadIndex`]). The file is read each way the store knows; the way whose
//!    conversations' sessions are recorded with it wins, then the one whose messages the archive
//!    knows most; detection is only the fallback. An Anthropic request holding an image, once
//!    compressed, can look like an OpenAI one: detecting again would write it back as OpenAI.
//!    An explicit `--format` always wins.
//! 2. **Replay the archive** ([`condense_host::expand`]).
//! 3. **Never succeed silently with markers left.** A message that is a recorded output whose
//!    record is lost, or a placeholder condense writes with no entry, makes expand name the
//!    first few and their count in one line and exit 1 without writing; `--partial` writes what
//!    was restored and still warns.

use crate::cli::ExpandArgs;
use crate::output::write_output;
use crate::Failure;
use condense_formats::{Document, Format, ReadOptions};
use condense_host::archive::{Expander, Unresolved, UnresolvedKind};
use condense_host::{session_key, ReadIndex};
use condense_store::Store;
use std::io::Read;

/// How many unresolved messages the error line names.
const NAMED: usize = 3;

pub fn expand(args: ExpandArgs) -> Result<(), Failure> {
    let (bytes, name) = read_bytes(&args)?;
    // The store is found before the file is read: where it is does not depend on the format.
    let store_dir = args
        .store
        .clone()
        .unwrap_or_else(|| default_store_dir(&args));
    if !store_dir.is_dir() {
        return Err(Failure::usage(format!(
            "store {} does not exist (pass --store DIR)",
            store_dir.display()
        )));
    }
    let store = Store::open(&store_dir).map_err(|e| Failure::run(e.to_string()))?;
    let mut doc = read_as_compressed(&bytes, &name, &args, &store)?;

    let mut applied = 0;
    let mut unresolved: Vec<(String, Unresolved)> = Vec::new();
    let labels = doc.labels();
    let mut expander = Expander::new(&store);
    let mut texts = Vec::new();
    for (i, conv) in doc.conversations_mut().iter_mut().enumerate() {
        let label = labels.get(i).map_or("", String::as_str);
        let session = session_key(conv, label, args.session.as_deref());
        let expansion = expander
            .expand(&session, conv)
            .map_err(|e| Failure::run(format!("{}: {e}", store_dir.display())))?;
        applied += expansion.applied;
        // The original bytes of restored messages, so they are written back exactly as read.
        texts.extend(expansion.texts.into_iter().map(|(m, text)| (i, m, text)));
        unresolved.extend(
            expansion
                .unresolved
                .into_iter()
                .map(|u| (label.to_string(), u)),
        );
    }
    if !unresolved.is_empty() {
        let line = describe(&unresolved, &store_dir);
        if !args.partial {
            return Err(Failure::run(format!(
                "{name}: {line}; nothing written (--partial writes what was restored)"
            )));
        }
        crate::term::warn(&format!(
            "{name}: {line}; written as far as restored (--partial)"
        ));
    }
    for (i, message, text) in texts {
        // A text that cannot stand in its place (not one JSON value, or not one line of a
        // JSONL session) is refused; the message is then written from the model, equal in
        // value.
        doc.set_original_text(i, &message, text);
    }
    let out = doc.write().map_err(|e| Failure::run(e.to_string()))?;
    write_output(args.out.as_deref(), &out)?;
    eprintln!(
        "condense: expanded {applied} archived change{} from {}",
        if applied == 1 { "" } else { "s" },
        store_dir.display()
    );
    Ok(())
}

/// `.condense/` beside the input (the current folder for standard input), as compress uses.
fn default_store_dir(args: &ExpandArgs) -> std::path::PathBuf {
    let file = &args.input.file;
    let dir = if file.as_os_str() == "-" {
        None
    } else {
        file.parent().filter(|p| !p.as_os_str().is_empty())
    };
    dir.unwrap_or(std::path::Path::new(".")).join(".condense")
}

/// The input's bytes and its name in messages.
fn read_bytes(args: &ExpandArgs) -> Result<(Vec<u8>, String), Failure> {
    let file = &args.input.file;
    if file.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| Failure::run(format!("<stdin>: cannot read: {e}")))?;
        return Ok((buf, "-".to_string()));
    }
    let name = file.display().to_string();
    let bytes =
        std::fs::read(file).map_err(|e| Failure::run(format!("{name}: cannot read: {e}")))?;
    Ok((bytes, name))
}

/// Reads the compressed file the way it was compressed (see the module docs).
fn read_as_compressed(
    bytes: &[u8],
    name: &str,
    args: &ExpandArgs,
    store: &Store,
) -> Result<Document, Failure> {
    let given = ReadOptions {
        format: args.input.format,
        select: args.input.select.clone(),
    };
    let detected = read(bytes, name, &given);
    if args.input.format.is_some() {
        return detected;
    }
    let index = ReadIndex::load(store).map_err(|e| Failure::run(e.to_string()))?;
    // How many of the document's sessions are recorded as read this way.
    let recorded = |doc: &Document, select: &Option<String>| {
        let format = doc.format().as_str();
        let labels = doc.labels();
        doc.conversations()
            .iter()
            .enumerate()
            .filter(|(i, conv)| {
                let label = labels.get(*i).map_or("", String::as_str);
                let session = session_key(conv, label, args.session.as_deref());
                index.recorded(&session).is_some_and(|r| {
                    r.format == format && (r.select.is_none() || r.select == *select)
                })
            })
            .count()
    };
    // (sessions recorded as read this way, messages the archive knows in this format)
    let score = |doc: &Document, select: &Option<String>| {
        let format = doc.format().as_str();
        let hits = doc
            .conversations()
            .iter()
            .map(|c| index.hits(format, c))
            .sum();
        (recorded(doc, select), hits)
    };
    // Every session recorded as detection read it (the common case): nothing to choose.
    if let Ok(doc) = &detected {
        let n = doc.conversations().len();
        if n > 0 && recorded(doc, &given.select) == n {
            return detected;
        }
    }
    // Detection wins ties, and its error is the one shown when no way reads the file.
    let mut best = detected
        .as_ref()
        .ok()
        .map_or((0, 0), |doc| score(doc, &given.select));
    let mut chosen = None;
    for candidate in index.candidates() {
        let Ok(format) = candidate.format.parse::<Format>() else {
            continue;
        };
        let opts = ReadOptions {
            format: Some(format),
            select: candidate.select.or_else(|| given.select.clone()),
        };
        let Ok(doc) = read(bytes, name, &opts) else {
            continue;
        };
        let s = score(&doc, &opts.select);
        if s > best {
            best = s;
            chosen = Some(doc);
        }
    }
    match chosen {
        Some(doc) => Ok(doc),
        None => detected,
    }
}

fn read(bytes: &[u8], name: &str, opts: &ReadOptions) -> Result<Document, Failure> {
    condense_formats::read(bytes, name, opts).map_err(|e| Failure::run(e.to_string()))
}

/// One line: how many messages were not restored, why, and the first few.
fn describe(unresolved: &[(String, Unresolved)], store: &std::path::Path) -> String {
    let lost = unresolved
        .iter()
        .filter(|(_, u)| u.kind == UnresolvedKind::MissingRecord)
        .count();
    let mut why = Vec::new();
    if lost > 0 {
        why.push(format!("{lost} whose record is missing"));
    }
    let mut placeholders: Vec<&str> = unresolved
        .iter()
        .filter_map(|(_, u)| match u.kind {
            UnresolvedKind::Placeholder(p) => Some(p.trim_end()),
            UnresolvedKind::MissingRecord => None,
        })
        .collect();
    if !placeholders.is_empty() {
        let count = placeholders.len();
        placeholders.sort_unstable();
        placeholders.dedup();
        why.push(format!(
            "{count} placeholder{} with no entry (`{}`)",
            if count == 1 { "" } else { "s" },
            placeholders.join("`, `")
        ));
    }
    let named: Vec<String> = unresolved
        .iter()
        .take(NAMED)
        .map(|(label, u)| {
            let label = if label.is_empty() {
                String::new()
            } else {
                format!("{label} ")
            };
            format!("{label}message {} (id {})", u.position + 1, u.id)
        })
        .collect();
    let more = unresolved.len().saturating_sub(NAMED);
    format!(
        "{} message{} not restored from {}, {}: {}{}",
        unresolved.len(),
        if unresolved.len() == 1 { "" } else { "s" },
        store.display(),
        why.join(" and "),
        named.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}
