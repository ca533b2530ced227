//! Where the next byte is that a JSON string must escape: a quote, a backslash or a control
//! character (below 0x20); and a string written as serde_json writes it, found that way
//! ([`quoted_pieces`], [`write_quoted`]).
//!
//! Every JSON text condense reads or writes is mostly strings (a transcript's tool outputs and
//! file contents), so the scan for the next such byte is the inner loop of checking a text's
//! canonical form, of writing a value compact, of writing one through a formatter and of
//! hashing a message for its archive key. On x86-64 it looks at sixteen bytes at a time with
//! SSE2 (part of every x86-64 processor); elsewhere, and for the last bytes, at eight at a time
//! in a machine word. The one table of how JSON spells an escape is here too.
//!
//! ```
//! use condense_model::escape::next_escape;
//!
//! let text = br#"a long line of a tool's output, then "a quote""#;
//! assert_eq!(next_escape(text, 0), 37);
//! assert_eq!(next_escape(b"nothing to escape", 0), 17);
//! ```

/// A piece of a JSON string as serde_json writes it ([`quoted_pieces`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A run of the string between two bytes that JSON escapes, as it is (what serde_json hands
    /// its formatter's `write_string_fragment`).
    Run(&'a str),
    /// A quote around the string, or an escape as serde_json spells it.
    Spelled(&'static str),
}

/// `s` as serde_json writes a JSON string, in order: the opening quote, each run between two
/// bytes that must be escaped and each escape's spelling, the closing quote. Joined, the pieces
/// are serde_json's bytes for the string; a writer that spells runs its own way (every
/// non-ASCII character as `\uXXXX`) gets them cut where serde_json cuts them.
///
/// ```
/// use condense_model::escape::{quoted_pieces, Piece};
///
/// let mut out = String::new();
/// quoted_pieces(
///     "say \"hi\"\n",
///     |piece| -> Result<(), ()> {
///         out.push_str(match piece {
///             Piece::Run(run) => run,
///             Piece::Spelled(spelled) => spelled,
///         });
///         Ok(())
///     },
/// )
/// .unwrap();
/// assert_eq!(out, serde_json::to_string("say \"hi\"\n").unwrap());
/// ```
pub fn quoted_pieces<'a, E>(
    s: &'a str,
    mut emit: impl FnMut(Piece<'a>) -> Result<(), E>,
) -> Result<(), E> {
    emit(Piece::Spelled("\""))?;
    let bytes = s.as_bytes();
    let mut start = 0;
    // `next_escape` stops only at a byte JSON escapes, or at the end.
    loop {
        let i = next_escape(bytes, start);
        let Some(spelled) = bytes.get(i).and_then(|&byte| spelling(byte)) else {
            break;
        };
        if start < i {
            // Cut before and after an ASCII byte: both ends are character boundaries.
            emit(Piece::Run(&s[start..i]))?;
        }
        emit(Piece::Spelled(spelled))?;
        start = i + 1;
    }
    if start < bytes.len() {
        emit(Piece::Run(&s[start..]))?;
    }
    emit(Piece::Spelled("\""))
}

/// `s` as serde_json writes a JSON string, written to `out` ([`quoted_pieces`]).
pub fn write_quoted<W: std::io::Write + ?Sized>(out: &mut W, s: &str) -> std::io::Result<()> {
    quoted_pieces(s, |piece| match piece {
        Piece::Run(run) => out.write_all(run.as_bytes()),
        Piece::Spelled(spelled) => out.write_all(spelled.as_bytes()),
    })
}

/// How a JSON string spells `byte` when it must escape it, as serde_json does: `"` and `\`
/// backslashed, `\b \t \n \f \r` by name, the other control characters as `\u00xx`
/// (lowercase hex).
fn spelling(byte: u8) -> Option<&'static str> {
    const CONTROL: [&str; 32] = [
        "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
        "\\b", "\\t", "\\n", "\\u000b", "\\f", "\\r", "\\u000e", "\\u000f", "\\u0010", "\\u0011",
        "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017", "\\u0018", "\\u0019",
        "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
    ];
    match byte {
        b'"' => Some("\\\""),
        b'\\' => Some("\\\\"),
        0x00..=0x1f => Some(CONTROL[usize::from(byte)]),
        _ => None,
    }
}

/// The position of the first byte at or after `i` that a JSON string escapes (`bytes.len()`
/// when none does).
#[inline]
pub fn next_escape(bytes: &[u8], i: usize) -> usize {
    // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it, and every
    // build for x86-64 targets it.
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    let i = match unsafe { sse2::next_escape(bytes, i) } {
        Ok(found) => return found,
        Err(tail) => tail,
    };
    words(bytes, i)
}

/// Whether a JSON string escapes `b`.
#[inline]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// [`next_escape`] eight bytes at a time, then byte by byte.
fn words(bytes: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of `word` equal to `byte` (the classic SWAR zero-byte test; a
    // borrow can flag a byte above a true one, never below, so the lowest flag is exact).
    let equal = |word: u64, byte: u8| {
        let x = word ^ (ONES * u64::from(byte));
        x.wrapping_sub(ONES) & !x & HIGH
    };
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        // Bytes below 0x20: subtracting 0x20 borrows into their high bit (bytes from 0x80 up
        // are masked out by `!word`); the lowest flag is exact here too.
        let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
        let flags = control | equal(word, b'"') | equal(word, b'\\');
        if flags != 0 {
            // Little-endian: the lowest flagged byte is the first one in the text.
            return i + (flags.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < bytes.len() && !needs_escape(bytes[i]) {
        i += 1;
    }
    i
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };

    /// The first byte to escape at or after `i`, sixteen bytes at a time: `Ok` with its
    /// position, or `Err` with where the last bytes (fewer than sixteen) start.
    #[inline]
    #[target_feature(enable = "sse2")]
    pub(super) fn next_escape(bytes: &[u8], mut i: usize) -> Result<usize, usize> {
        // `as i8`: the intrinsics take bytes as i8; the bit patterns are what count.
        #[allow(clippy::cast_possible_wrap)]
        let (quote, backslash, control) = (
            _mm_set1_epi8(b'"' as i8),
            _mm_set1_epi8(b'\\' as i8),
            _mm_set1_epi8(0x1f),
        );
        while i + 16 <= bytes.len() {
            // SAFETY: `i + 16 <= bytes.len()`, so the sixteen bytes read (unaligned) are all
            // inside `bytes`.
            #[allow(unsafe_code)]
            let v = unsafe { _mm_loadu_si128(bytes.as_ptr().add(i).cast()) };
            // A byte is below 0x20 when its unsigned minimum with 0x1f is itself.
            let flags = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                _mm_cmpeq_epi8(_mm_min_epu8(v, control), v),
            );
            let mask = _mm_movemask_epi8(flags);
            if mask != 0 {
                return Ok(i + mask.trailing_zeros() as usize);
            }
            i += 16;
        }
        Err(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ASCII byte and some wider characters, alone, at every offset of runs longer than
    /// both scan strides, and into a writer that takes a piece at a time: serde_json's bytes.
    #[test]
    fn a_quoted_string_is_serde_jsons() {
        let mut wide: Vec<String> = (0u8..0x80).map(|b| char::from(b).to_string()).collect();
        wide.extend(["é", "😀", "\u{2028}", "\u{7f}"].map(String::from));
        for c in &wide {
            for pad in [0, 1, 15, 16, 17, 40] {
                let s = format!("{}{c}{}{c}", "a".repeat(pad), "é".repeat(pad));
                let mut out = Vec::new();
                write_quoted(&mut out, &s).unwrap();
                assert_eq!(out, serde_json::to_vec(&s).unwrap(), "{s:?}");
            }
        }
    }

    fn naive(bytes: &[u8], i: usize) -> usize {
        (i..bytes.len())
            .find(|&j| needs_escape(bytes[j]))
            .unwrap_or(bytes.len())
    }

    /// Every byte value that matters, at every offset of texts longer than both strides, found
    /// from every start: the same answer as a byte-by-byte scan.
    #[test]
    fn finds_what_a_byte_by_byte_scan_finds() {
        let plain = b"abcdefghijklmnopqrstuvwxyz0123456789 ~\x7f\xc3\xa9\xff\x80\x20";
        let text: Vec<u8> = plain.iter().copied().cycle().take(70).collect();
        assert_eq!(next_escape(&text, 0), text.len());
        for odd in [b'"', b'\\', 0x00, 0x08, b'\n', 0x1f] {
            for at in 0..text.len() {
                let mut bytes = text.clone();
                bytes[at] = odd;
                for start in 0..=bytes.len() {
                    assert_eq!(
                        next_escape(&bytes, start),
                        naive(&bytes, start),
                        "{odd:#x} at {at}, from {start}"
                    );
                }
            }
        }
        // Two in one stride: the first is found.
        let mut bytes = text.clone();
        bytes[20] = b'\\';
        bytes[18] = b'"';
        assert_eq!(next_escape(&bytes, 16), 18);
        assert_eq!(next_escape(&[], 0), 0);
    }
}
