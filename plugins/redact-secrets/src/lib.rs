//! `redact-secrets`: masks secrets before anything else sees the conversation.
//!
//! API keys, access tokens, private keys and passwords end up in agent transcripts all the
//! time: a `cat .env`, an `env` dump, a `git remote -v` with a token in the URL, a key pasted
//! into the prompt. This stage replaces each one with a typed placeholder such as
//! `[REDACTED:github-token]`, so the model still knows *that* a credential was there and what
//! kind, but never sees it again.
//!
//! ```toml
//! [[stage]]
//! name = "redact"
//! plugin = "redact-secrets"
//! [stage.config]
//! patterns = [{ name = "internal-token", regex = "itk_[a-z0-9]{32}" }]
//! disable = ["jwt"]      # built-in patterns to turn off
//! thinking = true        # also redact thinking blocks
//! ```
//!
//! # Not reversible, on purpose
//!
//! Every other stage lets the host archive what it removed so `condense expand` can restore it.
//! This one sets [`StageReport::archive_removed`] to `false`: the host keeps no copy, and the
//! stage itself never writes an original to the store, its state, the report, its notes or its
//! events (an event says only `redacted`, the placeholder type and a count).
//!
//! # Where it looks
//!
//! Every text the model sees, in every message and in the system prompt: text blocks, thinking
//! blocks (unless `thinking = false`; note that Anthropic rejects a *modified* thinking block of
//! the current tool-use turn, since its signature no longer matches), tool results (nested
//! content included) and tool_use inputs. An input is JSON text: the stage decodes each JSON
//! string literal, redacts it and encodes it again in place, so the input stays valid JSON and
//! every other byte stays as it was (see [`json`]); an object value under a key that names the
//! secret (`"aws_secret_access_key": "..."`) is recognised by its key. An input that is not
//! valid JSON (OpenAI arguments can be anything) is redacted as plain text.
//!
//! It does **not** look at images, opaque blocks, tool definitions, or the raw `extra` and
//! `envelope` fields the formats keep verbatim. In particular, Claude Code JSONL keeps a second
//! copy of each tool result in the line's `toolUseResult` envelope field, which is written back
//! unchanged.
//!
//! # Placeholders never make a text longer
//!
//! A secret becomes `[REDACTED:<type>]` when that is no longer than the secret in bytes and in
//! tokens; otherwise `[REDACTED]`; otherwise `***` (one `*` per byte for a 1- or 2-byte
//! secret). A short URL password therefore reads `postgres://app:***@db`. The event still names
//! the type. Placeholders and `***` are never matched again, so a rerun changes nothing.
//!
//! # Patterns
//!
//! The built-ins are listed in [`patterns::BUILTINS`], applied in that order, then the user's.
//! A user pattern replaces its whole match, or only its capture group named `secret` when it
//! has one (`password\s*=\s*(?P<secret>\S+)` keeps the label). User pattern names are the
//! placeholder type: lowercase letters, digits and `-`.

pub mod engine;
pub mod json;
pub mod patterns;

use condense_abi::{Host, Stage, StageEvent, StageOutput, StageReport};
use condense_model::{Block, Content, Conversation, RawJson};
use engine::{Hit, Redactor};
use patterns::{builtin_names, valid_name, Pattern, BUILTINS};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The stage's `[stage.config]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Extra patterns, applied after the built-ins.
    pub patterns: Vec<UserPattern>,
    /// Names of built-in patterns to turn off.
    pub disable: Vec<String>,
    /// Whether thinking blocks are redacted too.
    pub thinking: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            patterns: Vec::new(),
            disable: Vec::new(),
            thinking: true,
        }
    }
}

/// One user pattern: `{ name = "internal-token", regex = "itk_[a-z0-9]{32}" }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserPattern {
    pub name: String,
    pub regex: String,
}

/// The stage.
#[derive(Debug)]
pub struct RedactSecrets {
    redactor: Redactor,
    thinking: bool,
}

/// The message id events use for the top-level system prompt.
pub const SYSTEM_PROMPT_ID: &str = "(system prompt)";

impl RedactSecrets {
    /// The placeholder types in the order they are applied (built-ins left on, then the user's).
    pub fn pattern_names(&self) -> Vec<&str> {
        self.redactor
            .patterns()
            .iter()
            .map(|p| p.name.as_str())
            .collect()
    }
}

/// What one run found, for the report.
#[derive(Default)]
struct Tally {
    /// Text fields looked at.
    scanned: usize,
    blocks_changed: usize,
    /// Per message id (in order), the hits in it.
    by_message: Vec<(String, Vec<Hit>)>,
}

struct Walker<'a> {
    redactor: &'a Redactor,
    thinking: bool,
    count: &'a dyn Fn(&str) -> usize,
    scanned: usize,
}

impl Walker<'_> {
    fn text(&mut self, text: &mut String, hits: &mut Vec<Hit>) {
        self.scanned += 1;
        if let Some(new) = self.redactor.redact(text, self.count, hits) {
            *text = new;
        }
    }

    fn input(&mut self, input: &mut RawJson, hits: &mut Vec<Hit>) -> Result<(), String> {
        if input.is_empty() {
            return Ok(());
        }
        self.scanned += 1;
        let raw = input.as_str();
        let new = if json::is_json(raw) {
            let (redactor, count) = (self.redactor, self.count);
            json::redact_literals(raw, &mut |value, key| {
                redactor.redact_value(value, key, count, hits)
            })?
        } else {
            self.redactor.redact(raw, self.count, hits)
        };
        if let Some(new) = new {
            *input = RawJson::from_string_unchecked(new);
        }
        Ok(())
    }

    /// Redacts the blocks of `content`; returns how many of them changed.
    fn content(&mut self, content: &mut Content, hits: &mut Vec<Hit>) -> Result<usize, String> {
        let mut changed = 0;
        for block in &mut content.blocks {
            let before = hits.len();
            match block {
                Block::Text(t) => self.text(&mut t.text, hits),
                Block::Thinking(t) if self.thinking => self.text(&mut t.thinking, hits),
                Block::ToolUse(t) => self.input(&mut t.input, hits)?,
                Block::ToolResult(r) => {
                    self.content(&mut r.content, hits)?;
                }
                Block::Thinking(_) | Block::Image(_) | Block::Opaque(_) => {}
            }
            if hits.len() > before {
                changed += 1;
            }
        }
        Ok(changed)
    }
}

impl Stage for RedactSecrets {
    type Config = Config;
    const NAME: &'static str = "redact-secrets";
    const DESCRIPTION: &'static str =
        "Masks API keys, tokens, private keys and URL passwords with typed placeholders; the originals are not archived.";
    const CONFIG_DOCS: &'static [(&'static str, &'static str)] = &[
        (
            "patterns",
            "Extra patterns, applied after the built-ins: an array of { name, regex } tables. \
             name is the placeholder type ([REDACTED:<name>]: lowercase letters, digits, -); \
             regex uses the Rust regex syntax and must not match the empty string. A capture \
             group named `secret` limits the replacement to that group.",
        ),
        (
            "disable",
            "Names of built-in patterns to turn off: private-key, jwt, anthropic-key, \
             openai-key, stripe-key, github-token, gitlab-token, slack-webhook, slack-token, \
             google-api-key, aws-akid, aws-secret-key, aws-session-token, url-password.",
        ),
        (
            "thinking",
            "Whether thinking blocks are redacted too (a modified thinking block no longer \
             matches its signature, which Anthropic checks for the current tool-use turn).",
        ),
    ];

    fn new(config: Config) -> Result<Self, String> {
        let known = builtin_names();
        if let Some(unknown) = config.disable.iter().find(|d| !known.contains(&d.as_str())) {
            return Err(format!(
                "disable: unknown built-in pattern `{unknown}` (known: {})",
                known.join(", ")
            ));
        }
        let mut patterns = Vec::new();
        for b in BUILTINS {
            if !config.disable.iter().any(|d| d == b.name) {
                patterns.push(Pattern::builtin(b)?);
            }
        }
        let mut names = BTreeSet::new();
        for (i, p) in config.patterns.iter().enumerate() {
            if !valid_name(&p.name) {
                return Err(format!(
                    "patterns[{i}]: name must be lowercase letters, digits and -, got {:?}",
                    p.name
                ));
            }
            if known.contains(&p.name.as_str()) || !names.insert(p.name.as_str()) {
                return Err(format!(
                    "patterns[{i}]: name `{}` is already taken by another pattern",
                    p.name
                ));
            }
            patterns.push(Pattern::user(i, &p.name, &p.regex)?);
        }
        Ok(RedactSecrets {
            redactor: Redactor::new(patterns)?,
            thinking: config.thinking,
        })
    }

    fn apply(
        &self,
        mut conversation: Conversation,
        host: &dyn Host,
    ) -> Result<StageOutput, String> {
        let count = |text: &str| host.count_tokens(text);
        let mut walker = Walker {
            redactor: &self.redactor,
            thinking: self.thinking,
            count: &count,
            scanned: 0,
        };
        let mut tally = Tally::default();
        if let Some(system) = &mut conversation.system {
            let mut hits = Vec::new();
            tally.blocks_changed += walker.content(system, &mut hits)?;
            tally.by_message.push((SYSTEM_PROMPT_ID.to_string(), hits));
        }
        for message in &mut conversation.messages {
            let mut hits = Vec::new();
            tally.blocks_changed += walker.content(&mut message.content, &mut hits)?;
            if !hits.is_empty() {
                tally.by_message.push((message.id.clone(), hits));
            }
        }
        tally.scanned = walker.scanned;
        Ok(StageOutput {
            conversation,
            report: self.report(&tally),
        })
    }
}

impl RedactSecrets {
    fn report(&self, tally: &Tally) -> StageReport {
        let names = self.pattern_names();
        let mut report = StageReport {
            archive_removed: false,
            blocks_changed: tally.blocks_changed,
            ..StageReport::default()
        };
        // Pattern index -> (count, tokens), over the whole conversation.
        let mut totals: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
        for (message_id, hits) in &tally.by_message {
            let mut per: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
            for hit in hits {
                for map in [&mut per, &mut totals] {
                    let entry = map.entry(hit.pattern).or_default();
                    entry.0 += 1;
                    entry.1 += hit.tokens;
                }
            }
            for (pattern, (n, tokens)) in per {
                report.events.push(StageEvent {
                    kind: "redacted".to_string(),
                    message_id: message_id.clone(),
                    detail: format!("{}: {n}", names[pattern]),
                    tokens,
                });
            }
        }
        let found: usize = totals.values().map(|(n, _)| n).sum();
        if found == 0 {
            report.note(format!("no secret found ({} texts scanned)", tally.scanned));
            return report;
        }
        report.tokens_freed = Some(totals.values().map(|(_, t)| t).sum());
        let kinds: Vec<String> = totals
            .iter()
            .map(|(p, (n, _))| format!("{} {n}", names[*p]))
            .collect();
        report.note(format!(
            "redacted {found} secret{} in {} block{} ({} texts scanned): {}",
            if found == 1 { "" } else { "s" },
            tally.blocks_changed,
            if tally.blocks_changed == 1 { "" } else { "s" },
            tally.scanned,
            kinds.join(", ")
        ));
        report.note("the originals are not archived: redaction cannot be expanded back");
        report
    }
}

condense_abi::export_stage!(RedactSecrets);
