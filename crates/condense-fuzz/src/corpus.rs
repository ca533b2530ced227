//! The inputs campaigns start from: every shipped transcript and edge case, grouped by the
//! format condense reads them as, the shipped pipeline files and the embedded default
//! pipeline. Big transcripts are cut down first (a window of their lines, or of their largest
//! arrays' elements, every kept byte as it was), so each case stays cheap to run.

use crate::rng::Rng;
use crate::spans::{self, Kind};
use crate::FuzzError;
use condense_formats::{Format, ReadOptions};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// One starting input.
#[derive(Debug, Clone)]
pub struct Seed {
    /// Where it came from, relative to `tests/fixtures` (plus `#n` for a cut-down variant).
    pub name: String,
    /// The file name cases are written under (keeps the extension: `.jsonl` matters).
    pub file_name: String,
    pub bytes: Vec<u8>,
}

/// Cut-down variants made of each big input.
const VARIANTS: u64 = 6;

/// Every conversation fixture under `root/tests/fixtures` (edge cases and transcripts).
fn conversation_files(root: &Path) -> Result<Vec<PathBuf>, FuzzError> {
    let fixtures = root.join("tests/fixtures");
    let mut out = Vec::new();
    for dir in [fixtures.join("edge"), fixtures.join("transcripts")] {
        for entry in read_dir(&dir)? {
            if entry.is_dir() {
                out.extend(read_dir(&entry)?.into_iter().filter(|p| {
                    let name = p.file_name().map(|n| n.to_string_lossy().to_string());
                    !name.unwrap_or_default().starts_with("UPSTREAM")
                }));
            } else if entry.extension().is_some_and(|e| e != "md") {
                out.push(entry);
            }
        }
    }
    out.sort();
    Ok(out)
}

pub(crate) fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, FuzzError> {
    let io = |e| FuzzError::Io(dir.to_path_buf(), e);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        out.push(entry.map_err(io)?.path());
    }
    out.sort();
    Ok(out)
}

fn read(path: &Path) -> Result<Vec<u8>, FuzzError> {
    std::fs::read(path).map_err(|e| FuzzError::Io(path.to_path_buf(), e))
}

/// The format `bytes` read as, if they read at all.
pub fn format_of(bytes: &[u8], file_name: &str) -> Option<Format> {
    condense_formats::read(bytes, file_name, &ReadOptions::default())
        .ok()
        .map(|d| d.format())
}

/// A fixture read once: its path under tests/fixtures, file name, bytes and format.
type Fixture = (String, String, Vec<u8>, Option<Format>);

/// What is computed once per process, not once per test: every fixture read with its format
/// detected (12 MB of transcripts), and the seeds cut from them.
#[derive(Default)]
struct Cache {
    fixtures: HashMap<PathBuf, Vec<Fixture>>,
    seeds: HashMap<(PathBuf, Format, usize), Vec<Seed>>,
}
static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();

/// The seeds of `format`: its fixtures no bigger than `limit` bytes as they are, the bigger
/// ones as cut-down variants that still read as `format`.
pub fn conversations(root: &Path, format: Format, limit: usize) -> Result<Vec<Seed>, FuzzError> {
    // A poisoned lock only means another test panicked while holding it; the maps are whole.
    let mut cache = CACHE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let key = (root.to_path_buf(), format, limit);
    if let Some(seeds) = cache.seeds.get(&key) {
        return Ok(seeds.clone());
    }
    if !cache.fixtures.contains_key(root) {
        let mut all = Vec::new();
        for path in conversation_files(root)? {
            let bytes = read(&path)?;
            let file_name = path
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            let rel = path
                .strip_prefix(root.join("tests/fixtures"))
                .unwrap_or(&path)
                .display()
                .to_string();
            let detected = format_of(&bytes, &file_name);
            all.push((rel, file_name, bytes, detected));
        }
        cache.fixtures.insert(root.to_path_buf(), all);
    }
    let fixtures = cache.fixtures.get(root).cloned().unwrap_or_default();
    let seeds = seeds_of(fixtures, format, limit)?;
    cache.seeds.insert(key, seeds.clone());
    Ok(seeds)
}

fn seeds_of(fixtures: Vec<Fixture>, format: Format, limit: usize) -> Result<Vec<Seed>, FuzzError> {
    let mut seeds = Vec::new();
    for (rel, file_name, bytes, detected) in fixtures {
        if detected != Some(format) {
            continue;
        }
        if bytes.len() <= limit {
            seeds.push(Seed {
                name: rel,
                file_name,
                bytes,
            });
            continue;
        }
        for v in 0..VARIANTS {
            let cut = cut_down(&bytes, limit, &mut Rng::for_case(0x5eed, v));
            if format_of(&cut, &file_name) == Some(format) {
                seeds.push(Seed {
                    name: format!("{rel}#{v}"),
                    file_name: file_name.clone(),
                    bytes: cut,
                });
            }
        }
    }
    if seeds.is_empty() {
        return Err(FuzzError::NoSeeds(format.to_string()));
    }
    Ok(seeds)
}

/// The pipeline files: the embedded default and every `.toml` under `tests/fixtures/pipelines`
/// and `examples`.
pub fn pipelines(root: &Path) -> Result<Vec<Seed>, FuzzError> {
    let mut seeds = vec![Seed {
        name: "<default>".into(),
        file_name: "default.toml".into(),
        bytes: condense_host::pipeline::DEFAULT_PIPELINE
            .as_bytes()
            .to_vec(),
    }];
    for dir in [root.join("tests/fixtures/pipelines"), root.join("examples")] {
        for path in read_dir(&dir)? {
            if path.extension().is_some_and(|e| e == "toml") {
                seeds.push(Seed {
                    name: path
                        .strip_prefix(root)
                        .unwrap_or(&path)
                        .display()
                        .to_string(),
                    file_name: "pipeline.toml".into(),
                    bytes: read(&path)?,
                });
            }
        }
    }
    Ok(seeds)
}

/// A smaller input of the same shape: a window of lines (JSONL), or of the elements of the
/// largest arrays, with long strings shortened; every byte kept is as it was.
pub fn cut_down(bytes: &[u8], limit: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if !is_one_value(&out) {
        // JSONL: a window of lines, from the first line half the time (headers live there).
        let lines: Vec<&[u8]> = out.split_inclusive(|&b| b == b'\n').collect();
        let start = if rng.chance(1, 2) {
            0
        } else {
            rng.below(lines.len())
        };
        let mut cut = Vec::new();
        for line in &lines[start..] {
            if !cut.is_empty() && cut.len() + line.len() > limit {
                break;
            }
            cut.extend_from_slice(line);
        }
        out = cut;
    }
    for _ in 0..64 {
        if out.len() <= limit {
            break;
        }
        let nodes = spans::scan(&out);
        // The biggest array with elements to drop, else the longest string.
        let array = nodes
            .iter()
            .filter(|n| n.kind == Kind::Array && n.children.len() > 1)
            .max_by_key(|n| n.end - n.start);
        let string = nodes
            .iter()
            .filter(|n| n.kind == Kind::String && n.end - n.start > 256)
            .max_by_key(|n| n.end - n.start);
        match (array, string) {
            (Some(a), s) if s.is_none_or(|s| a.end - a.start > 2 * (s.end - s.start)) => {
                let kids = &a.children;
                // Aim at the limit in one step (elements are of similar size, roughly).
                let size = a.end - a.start;
                let want = kids.len() * limit / size.max(1);
                let keep = want.clamp(1, (kids.len() / 2).max(1));
                let first = rng.below(kids.len() - keep + 1);
                let (from, to) = (kids[first].0, kids[first + keep - 1].1);
                let mut next = out[..kids[0].0].to_vec();
                next.extend_from_slice(&out[from..to]);
                next.extend_from_slice(&out[kids[kids.len() - 1].1..]);
                out = next;
            }
            (_, Some(s)) => {
                let inner = &out[s.start + 1..s.end - 1];
                let keep = string_cut(inner, (s.end - s.start) / 4);
                out.drain(s.start + 1 + keep..s.end - 1);
            }
            _ => break,
        }
    }
    out
}

fn is_one_value(bytes: &[u8]) -> bool {
    let nodes = spans::scan(bytes);
    nodes.first().is_some_and(|n| {
        bytes[..n.start].iter().all(u8::is_ascii_whitespace)
            && bytes[n.end..].iter().all(u8::is_ascii_whitespace)
    })
}

/// Whether `s` starts with the escape of a high surrogate (`\ud83d`).
fn high_surrogate(s: &[u8]) -> bool {
    s.len() >= 6 && s[1] == b'u' && matches!(s[2], b'd' | b'D') && b"89abAB".contains(&s[3])
}

/// The longest prefix of a JSON string's inner bytes, at most `max`, that ends between
/// characters and escapes.
fn string_cut(inner: &[u8], max: usize) -> usize {
    let mut i = 0;
    while i < inner.len() {
        let step = match inner[i] {
            // A high surrogate's escape goes with the low one after it.
            b'\\' if high_surrogate(&inner[i..]) => 12,
            b'\\' if inner.get(i + 1) == Some(&b'u') => 6,
            b'\\' => 2,
            b if b < 0x80 => 1,
            b if b >= 0xF0 => 4,
            b if b >= 0xE0 => 3,
            _ => 2,
        };
        if i + step > max {
            break;
        }
        i += step;
    }
    i
}
