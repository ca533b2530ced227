//! What a pipeline keeps, in `condense eval`'s terms, for reviews: tokens, cut and the probes
//! per kind (artifact, errors, request, integrity), with the probes that were lost.
//!
//! The probes and the scoring are `condense-eval`'s own ([`mod@condense_eval::score`]): this
//! module only sums them over a transcript's conversations and words the change between two
//! states ("tokens -1,840; artifact 108/108 -> 105/108 (lost: src/a.rs, ...)"), so a pipeline
//! change that loses probes is visible before anyone reads a diff line.
//!
//! Unlike `condense eval`, a review scores the pipeline's output at the pipeline's own window
//! (the run the snapshots show), not at a window chosen to force a cut; and the integrity
//! probe's read-back check is not made (the output is not written), so it counts as kept.

use condense_eval::score::{score_with, Hits, Lost};
use condense_eval::Probes;
use condense_model::Conversation;
use condense_text::thousands;
use serde::{Deserialize, Serialize};

/// One transcript's retention: what `condense eval` reports for one pipeline.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    pub tokens_before: usize,
    pub tokens_after: usize,
    /// `1 - after / before`, as a percentage with one decimal (text, so snapshot files
    /// compare exactly).
    pub cut: String,
    pub artifact: Ratio,
    pub errors: Ratio,
    pub request: Ratio,
    pub integrity: Ratio,
    pub lost: LostProbes,
}

/// `hits/total`, written as such in snapshot files and JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ratio(pub Hits);

impl Serialize for Ratio {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}

impl<'de> Deserialize<'de> for Ratio {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Ratio, D::Error> {
        let text = String::deserialize(d)?;
        let parsed = text.split_once('/').and_then(|(h, t)| {
            Some(Hits {
                hits: h.trim().parse().ok()?,
                total: t.trim().parse().ok()?,
            })
        });
        parsed
            .map(Ratio)
            .ok_or_else(|| serde::de::Error::custom(format!("expected HITS/TOTAL, got `{text}`")))
    }
}

/// The probes lost, by kind (the request once per conversation that lost it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostProbes {
    #[serde(default)]
    pub artifact: Vec<String>,
    #[serde(default)]
    pub errors: Vec<String>,
    #[serde(default)]
    pub request: Vec<String>,
    #[serde(default)]
    pub integrity: Vec<String>,
}

impl LostProbes {
    fn add(&mut self, lost: Lost) {
        self.artifact.extend(lost.artifacts);
        self.errors.extend(lost.errors);
        self.request.extend(lost.request);
        self.integrity.extend(lost.integrity);
    }
}

/// The probe kinds, in the order reports list them.
pub const KINDS: [&str; 4] = ["artifact", "errors", "request", "integrity"];

impl Retention {
    /// Sums the scores of `outputs` against their `originals` (pairwise) with the token
    /// counts the run measured.
    pub fn measure(
        originals: &[Conversation],
        outputs: &[&Conversation],
        tokens_before: usize,
        tokens_after: usize,
    ) -> Retention {
        let probes: Vec<Probes> = originals.iter().map(Probes::from_original).collect();
        Retention::measure_with(&probes, originals, outputs, tokens_before, tokens_after)
    }

    /// [`Retention::measure`] with the probes of `originals` computed once (for several
    /// outputs of the same originals: each stage's, in `condense diff`).
    pub fn measure_with(
        probes: &[Probes],
        originals: &[Conversation],
        outputs: &[&Conversation],
        tokens_before: usize,
        tokens_after: usize,
    ) -> Retention {
        let mut r = Retention {
            tokens_before,
            tokens_after,
            cut: cut_text(tokens_before, tokens_after),
            ..Retention::default()
        };
        for ((probes, original), output) in probes.iter().zip(originals).zip(outputs) {
            let s = score_with(probes, original, output, Ok(()));
            r.artifact.0 += s.artifact;
            r.errors.0 += s.errors;
            r.request.0 += s.request;
            r.integrity.0 += s.integrity;
            r.lost.add(s.lost);
        }
        r
    }

    /// The hits of probe kind `kind` (one of [`KINDS`]) and what it lost.
    pub fn kind(&self, kind: &str) -> (Hits, &[String]) {
        match kind {
            "artifact" => (self.artifact.0, &self.lost.artifact),
            "errors" => (self.errors.0, &self.lost.errors),
            "request" => (self.request.0, &self.lost.request),
            _ => (self.integrity.0, &self.lost.integrity),
        }
    }

    /// "tokens 12,345 -> 3,456 (cut 72.0%); artifact 105/108 (lost: src/a.rs, ...); errors
    /// 3/3; ...": the state on its own, for a transcript with no earlier snapshot.
    pub fn summary(&self) -> String {
        let mut parts = vec![format!(
            "tokens {} -> {} (cut {})",
            thousands(self.tokens_before),
            thousands(self.tokens_after),
            self.cut
        )];
        for kind in KINDS {
            let (hits, lost) = self.kind(kind);
            if hits.total == 0 {
                continue;
            }
            parts.push(format!("{kind} {hits}{}", lost_list("lost", lost)));
        }
        parts.join("; ")
    }

    /// What changed from `old` to `self`: "tokens -1,840; artifact 108/108 -> 105/108 (lost:
    /// src/a.rs, src/b.rs, src/c.rs)". Probe kinds whose score did not change are left out;
    /// "probes unchanged" when none changed.
    pub fn delta(&self, old: &Retention) -> String {
        let mut parts = vec![format!(
            "tokens {}",
            signed(self.tokens_after as i64 - old.tokens_after as i64)
        )];
        if self.tokens_before != old.tokens_before {
            parts[0].push_str(&format!(
                " (before: {} -> {})",
                thousands(old.tokens_before),
                thousands(self.tokens_before)
            ));
        }
        let probes = self.probe_changes(old);
        if probes.is_empty() {
            parts.push("probes unchanged".into());
        }
        parts.extend(probes);
        parts.join("; ")
    }

    /// Each probe kind whose score changed from `old`: "artifact 108/108 -> 105/108 (lost:
    /// src/a.rs)".
    pub fn probe_changes(&self, old: &Retention) -> Vec<String> {
        let mut parts = Vec::new();
        for kind in KINDS {
            let ((new_hits, new_lost), (old_hits, old_lost)) = (self.kind(kind), old.kind(kind));
            let newly_lost: Vec<String> = new_lost
                .iter()
                .filter(|p| !old_lost.contains(p))
                .cloned()
                .collect();
            let kept_again: Vec<String> = old_lost
                .iter()
                .filter(|p| !new_lost.contains(p))
                .cloned()
                .collect();
            if new_hits == old_hits && newly_lost.is_empty() && kept_again.is_empty() {
                continue;
            }
            parts.push(format!(
                "{kind} {old_hits} -> {new_hits}{}{}",
                lost_list("lost", &newly_lost),
                lost_list("kept again", &kept_again)
            ));
        }
        parts
    }

    /// Whether `self` keeps fewer probes of some kind than `old`.
    pub fn loses_probes(&self, old: &Retention) -> bool {
        KINDS.iter().any(|k| {
            let (new, new_lost) = self.kind(k);
            let (was, old_lost) = old.kind(k);
            new.hits < was.hits || new_lost.iter().any(|p| !old_lost.contains(p))
        })
    }
}

/// " (lost: a, b, c)" or nothing; probes are quoted as they are (paths, error lines) but cut
/// to one line.
fn lost_list(word: &str, items: &[String]) -> String {
    if items.is_empty() {
        return String::new();
    }
    format!(" ({word}: {})", listed(items))
}

/// How many probes a line names before counting the rest (the JSON has them all).
const SHOW: usize = 10;

/// "a, b, c", or the first [`SHOW`] and "and N more", each on one line.
pub fn listed(items: &[String]) -> String {
    let mut shown: Vec<String> = items.iter().take(SHOW).map(|s| one_line(s)).collect();
    if items.len() > SHOW {
        shown.push(format!("and {} more", items.len() - SHOW));
    }
    shown.join(", ")
}

/// `s` on one line, at most 80 characters.
pub fn one_line(s: &str) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() > 80 {
        let cut: String = flat.chars().take(79).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// "-1,840", "+12", "0".
pub fn signed(n: i64) -> String {
    let abs = thousands(n.unsigned_abs() as usize);
    match n.signum() {
        -1 => format!("-{abs}"),
        1 => format!("+{abs}"),
        _ => abs,
    }
}

/// "72.0%".
pub fn cut_text(before: usize, after: usize) -> String {
    format!("{:.1}%", condense_eval::run::cut(before, after) * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(after: usize, artifact: (usize, usize), lost: &[&str]) -> Retention {
        Retention {
            tokens_before: 10_000,
            tokens_after: after,
            cut: cut_text(10_000, after),
            artifact: Ratio(Hits {
                hits: artifact.0,
                total: artifact.1,
            }),
            request: Ratio(Hits { hits: 1, total: 1 }),
            lost: LostProbes {
                artifact: lost.iter().map(|s| s.to_string()).collect(),
                ..LostProbes::default()
            },
            ..Retention::default()
        }
    }

    #[test]
    fn the_delta_names_what_was_lost_and_what_came_back() {
        let old = state(5_000, (108, 108), &[]);
        let new = state(3_160, (105, 108), &["src/a.rs", "src/b.rs", "src/c.rs"]);
        assert_eq!(
            new.delta(&old),
            "tokens -1,840; artifact 108/108 -> 105/108 (lost: src/a.rs, src/b.rs, src/c.rs)"
        );
        assert!(new.loses_probes(&old));
        assert_eq!(
            old.delta(&new),
            "tokens +1,840; artifact 105/108 -> 108/108 (kept again: src/a.rs, src/b.rs, src/c.rs)"
        );
        assert!(!old.loses_probes(&new));
        let many: Vec<String> = (0..12).map(|i| format!("f{i}")).collect();
        assert_eq!(
            listed(&many),
            "f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, and 2 more"
        );
        assert_eq!(old.delta(&old), "tokens 0; probes unchanged");
        assert_eq!(
            new.summary(),
            "tokens 10,000 -> 3,160 (cut 68.4%); artifact 105/108 (lost: src/a.rs, src/b.rs, src/c.rs); request 1/1"
        );
    }

    #[test]
    fn ratios_read_back_as_written() {
        let r = state(5_000, (3, 4), &["x"]);
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"artifact\":\"3/4\""), "{text}");
        let back: Retention = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
    }
}
