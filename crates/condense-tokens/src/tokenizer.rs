//! Tokenizers: the [`Tokenizer`] trait, the selectable [`TokenizerKind`]s and their backends.

use crate::fast::{self, Vocab};
use crate::tiktoken_guard;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Something that counts the tokens of a text.
///
/// Implementations never panic and stay linear in the input (see the crate docs for the one
/// non-default backend where this takes care).
pub trait Tokenizer: Send + Sync {
    /// The name of the tokenizer, as [`TokenizerKind`] spells it (`o200k_base`, ...).
    fn name(&self) -> &'static str;
    /// The number of tokens of `text`, special tokens counted as ordinary text.
    fn count(&self, text: &str) -> usize;

    /// Whether [`Self::count`] of a text is the sum of the counts of its parts when the text is
    /// cut right after a `\n` followed by a character that is neither whitespace nor `/`. True
    /// of the byte-pair encoders, whose pre-tokenizer never puts such a place inside a piece;
    /// not of the byte estimate, which rounds up per text. A counter uses it to count a long
    /// text line by line, counting again only the lines it has not seen.
    fn additive_at_line_starts(&self) -> bool {
        false
    }
}

/// The tokenizers condense can count with.
///
/// Names (for `FromStr`, `Display` and serde): `o200k_base` (the default), `cl100k_base`,
/// `tiktoken-o200k_base`, `tiktoken-cl100k_base`, `estimate`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub enum TokenizerKind {
    /// OpenAI's `o200k_base` (GPT-4o, GPT-4.1, o-series, GPT-5) with condense's static tables
    /// (nothing built at start-up; see `crate::fast`).
    #[default]
    #[serde(rename = "o200k_base")]
    O200k,
    /// OpenAI's `cl100k_base` (GPT-4, GPT-3.5) with condense's static tables.
    #[serde(rename = "cl100k_base")]
    Cl100k,
    /// `o200k_base` with `tiktoken-rs`, guarded (see [`crate`] docs). Same counts, slower.
    #[serde(rename = "tiktoken-o200k_base")]
    TiktokenO200k,
    /// `cl100k_base` with `tiktoken-rs`, guarded. Same counts, slower.
    #[serde(rename = "tiktoken-cl100k_base")]
    TiktokenCl100k,
    /// No tokenizer: UTF-8 bytes / 4, rounded up (what Codex CLI estimates with).
    #[serde(rename = "estimate")]
    Estimate,
}

impl TokenizerKind {
    /// Every kind, the default first.
    pub const ALL: [TokenizerKind; 5] = [
        TokenizerKind::O200k,
        TokenizerKind::Cl100k,
        TokenizerKind::TiktokenO200k,
        TokenizerKind::TiktokenCl100k,
        TokenizerKind::Estimate,
    ];

    /// The kind's name: `o200k_base`, `cl100k_base`, `tiktoken-o200k_base`,
    /// `tiktoken-cl100k_base` or `estimate`.
    pub const fn as_str(self) -> &'static str {
        match self {
            TokenizerKind::O200k => "o200k_base",
            TokenizerKind::Cl100k => "cl100k_base",
            TokenizerKind::TiktokenO200k => "tiktoken-o200k_base",
            TokenizerKind::TiktokenCl100k => "tiktoken-cl100k_base",
            TokenizerKind::Estimate => "estimate",
        }
    }

    /// The process-wide tokenizer of this kind; same as [`tokenizer`].
    pub fn tokenizer(self) -> &'static dyn Tokenizer {
        tokenizer(self)
    }
}

impl fmt::Display for TokenizerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tokenizer name that is none of [`TokenizerKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tokenizer `{name}`; expected one of: o200k_base, cl100k_base, tiktoken-o200k_base, tiktoken-cl100k_base, estimate")]
pub struct ParseTokenizerKindError {
    /// The name that was given.
    pub name: String,
}

impl FromStr for TokenizerKind {
    type Err = ParseTokenizerKindError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TokenizerKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| ParseTokenizerKindError { name: s.to_owned() })
    }
}

/// The process-wide tokenizer of a kind. The default kinds read static tables in place: getting
/// one and counting a word costs microseconds. The `tiktoken-rs` kinds build their tables once
/// per process, on first use (0.3-0.4 s in a debug build).
pub fn tokenizer(kind: TokenizerKind) -> &'static dyn Tokenizer {
    match kind {
        TokenizerKind::O200k => &FAST_O200K,
        TokenizerKind::Cl100k => &FAST_CL100K,
        TokenizerKind::TiktokenO200k => &TIKTOKEN_O200K,
        TokenizerKind::TiktokenCl100k => &TIKTOKEN_CL100K,
        TokenizerKind::Estimate => &Estimate,
    }
}

/// The two OpenAI encodings both libraries implement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    O200k,
    Cl100k,
}

/// The default backend ([`crate::fast`]): static tables, nothing built at start-up; the same
/// counts as `bpe-openai` and `tiktoken-rs`.
struct Fast {
    vocab: &'static Vocab,
    name: &'static str,
}

static FAST_O200K: Fast = Fast {
    vocab: &fast::O200K,
    name: TokenizerKind::O200k.as_str(),
};
static FAST_CL100K: Fast = Fast {
    vocab: &fast::CL100K,
    name: TokenizerKind::Cl100k.as_str(),
};

impl Tokenizer for Fast {
    fn name(&self) -> &'static str {
        self.name
    }

    fn count(&self, text: &str) -> usize {
        self.vocab.count(text)
    }

    fn additive_at_line_starts(&self) -> bool {
        true
    }
}

/// Counts with the default engine ([`crate::fast`]) of the same encoding: what the
/// `tiktoken-rs` guard falls back to on the inputs it keeps away from `tiktoken-rs`. The same
/// counts, and linear.
pub(crate) fn bpe_count(encoding: Encoding, text: &str) -> usize {
    match encoding {
        Encoding::O200k => fast::O200K.count(text),
        Encoding::Cl100k => fast::CL100K.count(text),
    }
}

/// `tiktoken-rs`, guarded against its pathological inputs (see [`tiktoken_guard`]).
struct Tiktoken {
    encoding: Encoding,
    name: &'static str,
}

static TIKTOKEN_O200K: Tiktoken = Tiktoken {
    encoding: Encoding::O200k,
    name: TokenizerKind::TiktokenO200k.as_str(),
};
static TIKTOKEN_CL100K: Tiktoken = Tiktoken {
    encoding: Encoding::Cl100k,
    name: TokenizerKind::TiktokenCl100k.as_str(),
};

impl Tokenizer for Tiktoken {
    fn name(&self) -> &'static str {
        self.name
    }

    fn count(&self, text: &str) -> usize {
        tiktoken_guard::count(self.encoding, text)
    }
}

/// Bytes per token of the [`TokenizerKind::Estimate`] backend (Codex CLI's
/// `APPROX_BYTES_PER_TOKEN`).
pub const ESTIMATE_BYTES_PER_TOKEN: usize = 4;

/// UTF-8 bytes / [`ESTIMATE_BYTES_PER_TOKEN`], rounded up.
pub fn estimate_count(text: &str) -> usize {
    text.len().div_ceil(ESTIMATE_BYTES_PER_TOKEN)
}

struct Estimate;

impl Tokenizer for Estimate {
    fn name(&self) -> &'static str {
        TokenizerKind::Estimate.as_str()
    }

    fn count(&self, text: &str) -> usize {
        estimate_count(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in TokenizerKind::ALL {
            assert_eq!(kind.to_string().parse::<TokenizerKind>(), Ok(kind));
            assert_eq!(tokenizer(kind).name(), kind.as_str());
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            assert_eq!(serde_json::from_str::<TokenizerKind>(&json).unwrap(), kind);
        }
        assert_eq!(TokenizerKind::default(), TokenizerKind::O200k);
        let err = "gpt2".parse::<TokenizerKind>().unwrap_err();
        assert!(
            err.to_string().contains("unknown tokenizer `gpt2`"),
            "{err}"
        );
        assert!(serde_json::from_str::<TokenizerKind>("\"O200k\"").is_err());
    }

    #[test]
    fn estimate_rounds_up() {
        let est = tokenizer(TokenizerKind::Estimate);
        assert_eq!(est.count(""), 0);
        assert_eq!(est.count("a"), 1);
        assert_eq!(est.count("abcd"), 1);
        assert_eq!(est.count("abcde"), 2);
        // Bytes, not chars: "é" is two bytes, "🎉" four.
        assert_eq!(est.count("éé🎉"), 2);
    }

    #[test]
    fn empty_text_is_zero_everywhere() {
        for kind in TokenizerKind::ALL {
            assert_eq!(tokenizer(kind).count(""), 0, "{kind}");
        }
    }
}
