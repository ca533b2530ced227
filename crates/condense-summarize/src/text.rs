//! Text cut to a token budget, shared by the summarizers (the general text helpers, cuts by
//! characters and one-line forms, are `condense-text`'s).

use condense_tokens::TokenCounter;

/// The longest prefix of `text` that fits `max_tokens`, cut at a line end when one is close,
/// with `marker` appended when something was cut (the marker is dropped when even it does not
/// fit). Never returns more than `max_tokens` tokens.
pub(crate) fn fit_tokens(
    counter: &TokenCounter,
    text: &str,
    max_tokens: usize,
    marker: &str,
) -> String {
    if counter.count_text(text) <= max_tokens {
        return text.to_string();
    }
    let with_marker = |prefix: &str| format!("{}{marker}", prefix.trim_end());
    // Binary search over char boundaries for the longest prefix that fits with the marker.
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect();
    let fits = |n: usize, marked: bool| {
        let prefix = &text[..bounds[n]];
        let candidate = if marked {
            with_marker(prefix)
        } else {
            prefix.to_string()
        };
        counter.count_text(&candidate) <= max_tokens
    };
    let longest = |marked: bool| -> Option<usize> {
        if !fits(0, marked) {
            return None;
        }
        let (mut lo, mut hi) = (0usize, bounds.len() - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(mid, marked) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Some(lo)
    };
    match longest(true) {
        Some(n) => {
            let prefix = &text[..bounds[n]];
            // Prefer ending at a line break if one is in the last fifth of what fits.
            let cut = match prefix.rfind('\n') {
                Some(nl) if nl >= prefix.len() * 4 / 5 => &prefix[..nl],
                _ => prefix,
            };
            with_marker(cut)
        }
        None => longest(false)
            .map(|n| text[..bounds[n]].to_string())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_tokens_never_exceeds() {
        let c = TokenCounter::default();
        let text: String = (0..200)
            .map(|i| format!("line number {i} of text\n"))
            .collect();
        for max in [0, 1, 3, 10, 50, 400] {
            let out = fit_tokens(&c, &text, max, "\n[cut]");
            assert!(c.count_text(&out) <= max, "{max}: {out}");
        }
        assert_eq!(fit_tokens(&c, "short", 10, "[cut]"), "short");
        assert!(fit_tokens(&c, &text, 50, "\n[cut]").ends_with("[cut]"));
    }
}
