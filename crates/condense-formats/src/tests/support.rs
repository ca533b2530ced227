//! Test helpers: fixture loading and the round-trip check.

use crate::{read, Document, ReadOptions};
use condense_model::{Block, Conversation, Role};
use serde_json::Value;

/// Reads a fixture under `tests/fixtures/` of the workspace.
macro_rules! fixture {
    ($path:literal) => {
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/",
            $path
        ))
        .unwrap()
    };
}
pub(crate) use fixture;

/// Every session file under `tests/fixtures/edge` and `tests/fixtures/transcripts`.
pub fn fixture_files() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let mut files = Vec::new();
    let mut dirs = vec![root.join("edge"), root.join("transcripts")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if ["json", "jsonl", "traj"]
                .iter()
                .any(|e| path.extension().is_some_and(|x| x == *e))
            {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 15, "{files:?}");
    files.sort();
    files
}

/// The JSON values of a file: one for JSON, one per non-empty line for JSONL.
pub fn values(bytes: &[u8], jsonl: bool) -> Vec<Value> {
    let text = std::str::from_utf8(bytes).unwrap();
    if jsonl {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    } else {
        vec![serde_json::from_str(text).unwrap()]
    }
}

/// Reads, writes back unchanged, and checks the output is the same JSON; writing a re-read of the
/// output gives the same bytes again. Returns the document.
pub fn round_trip(bytes: &[u8], source: &str, opts: &ReadOptions) -> Document {
    let doc = read(bytes, source, opts).unwrap_or_else(|e| panic!("{e}"));
    let out = doc.write().unwrap_or_else(|e| panic!("{e}"));
    let jsonl = matches!(doc.layout, crate::container::Layout::Json { .. }).then_some(false);
    let jsonl = jsonl.unwrap_or(true);
    let (want, got) = (values(bytes, jsonl), values(&out, jsonl));
    assert_eq!(want.len(), got.len(), "{source}: number of JSON values");
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        if w != g {
            panic!(
                "{source}: value {i} differs after the round trip:\n{}",
                first_difference(w, g, "")
            );
        }
    }
    let again = read(&out, source, opts).unwrap().write().unwrap();
    assert!(again == out, "{source}: writing is not stable");
    doc
}

/// Whether writing the document gives back exactly `bytes`.
pub fn writes_back(doc: &Document, bytes: &[u8]) -> bool {
    doc.write().unwrap() == bytes
}

/// The pointer and values of the first difference between two JSON values.
fn first_difference(a: &Value, b: &Value, ptr: &str) -> String {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) if v != w => return first_difference(v, w, &format!("{ptr}/{k}")),
                    None => return format!("{ptr}/{k}: missing in output"),
                    _ => {}
                }
            }
            let extra: Vec<_> = y.keys().filter(|k| !x.contains_key(*k)).collect();
            format!("{ptr}: extra keys in output: {extra:?}")
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find(|(_, (v, w))| v != w)
            .map(|(i, (v, w))| first_difference(v, w, &format!("{ptr}/{i}")))
            .unwrap_or_default(),
        _ => format!("{ptr}: {a} != {b}"),
    }
}

/// Counts over every conversation of a document.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub messages: usize,
    pub events: usize,
    pub tool_uses: usize,
    pub tool_results: usize,
    pub opaque: usize,
    pub images: usize,
}

pub fn counts(convs: &[Conversation]) -> Counts {
    let mut c = Counts::default();
    for conv in convs {
        for msg in &conv.messages {
            if msg.role == Role::Event {
                c.events += 1;
            } else {
                c.messages += 1;
            }
            count_blocks(&msg.content.blocks, &mut c);
        }
    }
    c
}

fn count_blocks(blocks: &[Block], c: &mut Counts) {
    for block in blocks {
        match block {
            Block::ToolUse(_) => c.tool_uses += 1,
            Block::ToolResult(tr) => {
                c.tool_results += 1;
                count_blocks(&tr.content.blocks, c);
            }
            Block::Opaque(_) => c.opaque += 1,
            Block::Image(_) => c.images += 1,
            _ => {}
        }
    }
}
