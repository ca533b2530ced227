//! Redacting one string: every pattern in order, placeholders that never make it longer.

use crate::patterns::Pattern;
use regex::{Regex, RegexSet, RegexSetBuilder};
use std::borrow::Cow;
use std::ops::Range;

/// One secret replaced: which pattern, and the tokens its placeholder saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub pattern: usize,
    pub tokens: usize,
}

/// A placeholder this stage writes: `[REDACTED]` or `[REDACTED:<type>]`.
const PLACEHOLDER: &str = r"\[REDACTED(?::[A-Za-z0-9_-]+)?\]";

/// The generic placeholder, when the typed one would be longer than the secret.
pub const GENERIC: &str = "[REDACTED]";

/// The compiled patterns, and a set of them to skip the strings that hold no candidate.
#[derive(Debug)]
pub struct Redactor {
    patterns: Vec<Pattern>,
    set: RegexSet,
    placeholder: Regex,
}

impl Redactor {
    pub fn new(patterns: Vec<Pattern>) -> Result<Self, String> {
        let set = RegexSetBuilder::new(patterns.iter().map(|p| p.regex.as_str()))
            .size_limit(64 * (1 << 20))
            .build()
            .map_err(|e| format!("cannot combine the patterns: {e}"))?;
        let placeholder =
            Regex::new(PLACEHOLDER).map_err(|e| format!("placeholder pattern: {e}"))?;
        Ok(Redactor {
            patterns,
            set,
            placeholder,
        })
    }

    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }

    /// `text` with every secret replaced, or `None` when it holds none.
    pub fn redact(
        &self,
        text: &str,
        count: &dyn Fn(&str) -> usize,
        hits: &mut Vec<Hit>,
    ) -> Option<String> {
        let candidates = self.set.matches(text);
        if !candidates.matched_any() {
            return None;
        }
        let mut current = Cow::Borrowed(text);
        for index in candidates.iter() {
            if let Some(next) = self.apply(index, &current, count, hits) {
                current = Cow::Owned(next);
            }
        }
        match current {
            Cow::Owned(s) => Some(s),
            Cow::Borrowed(_) => None,
        }
    }

    /// A JSON string value under object key `key`: a labelled secret (the key says what the
    /// value is) replaces the whole value; otherwise the value is redacted as text.
    pub fn redact_value(
        &self,
        value: &str,
        key: Option<&str>,
        count: &dyn Fn(&str) -> usize,
        hits: &mut Vec<Hit>,
    ) -> Option<String> {
        if let Some(key) = key {
            for (index, p) in self.patterns.iter().enumerate() {
                let Some((label, shape)) = &p.json_label else {
                    continue;
                };
                if label.is_match(key) && shape.is_match(value) && !self.is_masked(value) {
                    let (placeholder, tokens) = fit(&p.name, value, count);
                    hits.push(Hit {
                        pattern: index,
                        tokens,
                    });
                    return Some(placeholder);
                }
            }
        }
        self.redact(value, count, hits)
    }

    /// Whether `s` is already masked: all `*`, or holding a placeholder.
    fn is_masked(&self, s: &str) -> bool {
        s.bytes().all(|b| b == b'*') || self.placeholder.is_match(s)
    }

    /// One pattern over `text`: the new text, or `None` when nothing was replaced.
    fn apply(
        &self,
        index: usize,
        text: &str,
        count: &dyn Fn(&str) -> usize,
        hits: &mut Vec<Hit>,
    ) -> Option<String> {
        let p = &self.patterns[index];
        let masked: Vec<Range<usize>> = self
            .placeholder
            .find_iter(text)
            .map(|m| m.range())
            .collect();
        let mut out = String::new();
        let mut last = 0;
        for caps in p.regex.captures_iter(text) {
            let Some(m) = caps.get(p.group) else {
                continue;
            };
            let secret = m.as_str();
            if secret.is_empty()
                || secret.bytes().all(|b| b == b'*')
                || masked
                    .iter()
                    .any(|r| r.start < m.end() && m.start() < r.end)
                || m.start() < last
            {
                continue;
            }
            if let Some(continues) = p.token_char {
                let before = text[..m.start()].chars().next_back();
                let after = text[m.end()..].chars().next();
                if before.is_some_and(continues) || after.is_some_and(continues) {
                    continue;
                }
            }
            if p.check.is_some_and(|check| !check(secret)) {
                continue;
            }
            let (placeholder, tokens) = fit(&p.name, secret, count);
            out.push_str(&text[last..m.start()]);
            out.push_str(&placeholder);
            last = m.end();
            hits.push(Hit {
                pattern: index,
                tokens,
            });
        }
        if last == 0 {
            return None;
        }
        out.push_str(&text[last..]);
        Some(out)
    }
}

/// The placeholder for `secret` and the tokens it saves: `[REDACTED:<name>]` when that is no
/// longer (in bytes and in tokens) than the secret, else `[REDACTED]`, else `***` (or one `*`
/// per byte of a secret under 3 bytes). A redaction never makes a text longer.
pub fn fit(name: &str, secret: &str, count: &dyn Fn(&str) -> usize) -> (String, usize) {
    let tokens = count(secret);
    let candidates = [format!("[REDACTED:{name}]"), GENERIC.to_string()];
    let placeholder = candidates
        .into_iter()
        .find(|c| c.len() <= secret.len() && count(c) <= tokens)
        .unwrap_or_else(|| "*".repeat(secret.len().min(3)));
    let saved = tokens.saturating_sub(count(&placeholder));
    (placeholder, saved)
}
