//! Lays out, as static tables in OUT_DIR, what the fast tokenizer (src/fast.rs) reads without
//! deserializing anything at start-up:
//!
//! - for `o200k_base` and `cl100k_base`, from the rank files tiktoken-rs ships: every token's
//!   bytes (`NAME.bytes`), where each starts (`NAME.offsets`, u32 LE, one more than tokens) and
//!   an open-addressing hash table of ranks (`NAME.table`, u32 LE: rank + 1 and a tag of the
//!   hash, 0 for empty; the hash and the slot layout are src/vocab_hash.rs, probing is
//!   linear);
//! - the Unicode classes of the pre-tokenizer patterns, from regex-syntax (the tables the regex
//!   engines of bpe-openai and tiktoken use): a flag byte per ASCII character (`ascii.bin`) and
//!   runs of equal flags above ASCII (`classes.bin`: u32 LE first, last, flags).

use std::error::Error;
use std::path::{Path, PathBuf};

#[path = "src/vocab_hash.rs"]
mod vocab_hash;

// Keep in step with src/fast.rs.
const LETTER: u32 = 1;
const NUMBER: u32 = 2;
const SPACE: u32 = 4;
const UPPERISH: u32 = 8;
const LOWERISH: u32 = 16;

fn main() -> Result<(), Box<dyn Error>> {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    vocab(&out, "o200k_base", &tiktoken_rs::o200k_base()?, 199_998)?;
    vocab(&out, "cl100k_base", &tiktoken_rs::cl100k_base()?, 100_256)?;
    classes(&out)?;
    check_case_folds()?;
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/vocab_hash.rs");
    Ok(())
}

/// Writes the three tables of one vocabulary; `expected` is its number of ordinary tokens
/// (ranks 0..expected, all present), checked so that a changed rank file fails the build.
fn vocab(
    out: &Path,
    name: &str,
    bpe: &tiktoken_rs::CoreBPE,
    expected: usize,
) -> Result<(), Box<dyn Error>> {
    let mut tokens: Vec<Vec<u8>> = Vec::with_capacity(expected);
    // Ordinary ranks are contiguous from 0; the special tokens come after a gap.
    while let Ok(bytes) = bpe.decode_bytes(&[tokens.len() as u32]) {
        tokens.push(bytes);
    }
    if tokens.len() != expected {
        return Err(format!("{name}: {} tokens, expected {expected}", tokens.len()).into());
    }
    let mut all = Vec::new();
    let mut offsets = Vec::with_capacity((tokens.len() + 1) * 4);
    for t in &tokens {
        offsets.extend_from_slice(&(all.len() as u32).to_le_bytes());
        all.extend_from_slice(t);
    }
    offsets.extend_from_slice(&(all.len() as u32).to_le_bytes());

    let slots = (tokens.len() * 2).next_power_of_two();
    let mut table = vec![0u32; slots];
    if tokens.len() + 1 >= 1 << vocab_hash::RANK_BITS {
        return Err(format!(
            "{name}: too many tokens for a {}-bit rank",
            vocab_hash::RANK_BITS
        )
        .into());
    }
    for (rank, t) in tokens.iter().enumerate() {
        let h = vocab_hash::hash(t);
        let mut i = (h as usize) & (slots - 1);
        while table[i] != 0 {
            i = (i + 1) & (slots - 1);
        }
        table[i] = vocab_hash::slot(rank as u32, h);
    }
    let table: Vec<u8> = table.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(out.join(format!("{name}.bytes")), all)?;
    std::fs::write(out.join(format!("{name}.offsets")), offsets)?;
    std::fs::write(out.join(format!("{name}.table")), table)?;
    Ok(())
}

/// The code point ranges of a regex-syntax class expression.
fn ranges(class: &str) -> Result<Vec<(u32, u32)>, Box<dyn Error>> {
    let hir = regex_syntax::parse(class)?;
    match hir.kind() {
        regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(c)) => Ok(c
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect()),
        other => Err(format!("{class}: not a Unicode class: {other:?}").into()),
    }
}

fn classes(out: &Path) -> Result<(), Box<dyn Error>> {
    let mut flags = vec![0u8; 0x11_0000];
    for (class, flag) in [
        (r"\p{L}", LETTER),
        (r"\p{N}", NUMBER),
        (r"\s", SPACE),
        (r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", UPPERISH),
        (r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]", LOWERISH),
    ] {
        for (first, last) in ranges(class)? {
            for f in &mut flags[first as usize..=last as usize] {
                *f |= flag as u8;
            }
        }
    }
    std::fs::write(out.join("ascii.bin"), &flags[..128])?;
    let mut runs = Vec::new();
    let mut start = 128usize;
    for cp in 129..=flags.len() {
        if cp == flags.len() || flags[cp] != flags[start] {
            if flags[start] != 0 {
                for v in [start as u32, cp as u32 - 1, u32::from(flags[start])] {
                    runs.extend_from_slice(&v.to_le_bytes());
                }
            }
            start = cp;
        }
    }
    std::fs::write(out.join("classes.bin"), runs)?;
    Ok(())
}

/// src/fast.rs matches the contractions `(?i:'s|'t|'re|'ve|'m|'ll|'d)` by hand, knowing that
/// the only case fold beyond ASCII is `ſ` (U+017F) for `s`: checked here against regex-syntax.
fn check_case_folds() -> Result<(), Box<dyn Error>> {
    for letter in ['s', 't', 'r', 'e', 'v', 'm', 'l', 'd'] {
        let mut want = vec![
            (
                u32::from(letter.to_ascii_uppercase()),
                u32::from(letter.to_ascii_uppercase()),
            ),
            (u32::from(letter), u32::from(letter)),
        ];
        if letter == 's' {
            want.push((0x17F, 0x17F));
        }
        let got = ranges(&format!("(?i:[{letter}])"))?;
        if got != want {
            return Err(
                format!("(?i){letter} folds to {got:?}, src/fast.rs expects {want:?}").into(),
            );
        }
    }
    Ok(())
}
