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
//! envelopes = true       # also redact the raw JSON kept verbatim (envelopes, extra fields)
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
//! The raw JSON the formats keep verbatim is redacted the same way, string literal by string
//! literal (unless `envelopes = false`): each message's `envelope` (the wrapper line of a JSONL
//! format, so the second copy of every tool result that Claude Code keeps in the line's
//! `toolUseResult`; the whole line or event of a [`Role::Event`](condense_model::Role::Event)
//! message, so OpenHands observations that are not mapped to messages), the `extra` of the
//! conversation (unknown top-level keys), of every message and of every text, tool use, tool
//! result and image block, and of thinking blocks when `thinking` is on. As in tool inputs, a
//! value under a key that names the secret is recognised by its key, and a secret used as an
//! object key is replaced too. The host does not count these fields as context (most never
//! reach the model), so their events say where (`github-token: 1 (envelope)`, `... (extra)`;
//! the conversation's own fields under `(conversation)`), count no tokens, and add nothing to
//! `tokens_freed`. A file written back after this stage holds none of the secrets found.
//!
//! Image references (an image given by URL: a token in its query string, a password in it)
//! and blocks of types the model does not know (Anthropic `document` blocks with a text source,
//! search results, ...) are redacted string literal by string literal too, like tool inputs.
//! Binary payloads inside them are skipped, since a match in random base64 would corrupt the
//! file and they hold no text: `data:` URLs and base64-looking strings of 256 characters or
//! more.
//!
//! It does **not** look at:
//! - tool definitions (the agent's tool schemas): they are part of what keys a session's stage
//!   state and archive, so changing them would cut a compressed file off from its archive;
//! - tool_use ids: they pair each call with its result, and ids are generated, not secrets;
//! - inline image data and document PDFs (base64), and `data:` URLs.
//!
//! Put it **first** in the pipeline: a stage before it archives the originals it changes,
//! secrets included, in the store's `records/`; `condense pipeline check` and every run warn
//! about that order.
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

use condense_abi::{
    replace_messages, Context, Input, Stage, StageConfig, StageError, StageEvent, StageOutput,
    StageReport,
};
use condense_model::{Block, Content, ImageSource, RawJson, ReadMessage};
use condense_text::plural;
use engine::{Hit, Redactor};
use patterns::{builtin_names, valid_name, Pattern, BUILTINS};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The stage's `[stage.config]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, StageConfig)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Extra patterns, applied after the built-ins: an array of { name, regex } tables.
    /// name is the placeholder type ([REDACTED:<name>]: lowercase letters, digits, -);
    /// regex uses the Rust regex syntax and must not match the empty string. A capture
    /// group named `secret` limits the replacement to that group.
    // This text is also the key's description for users (`condense plugins --details`), where
    // `[REDACTED:<name>]` is the literal placeholder, not a link or an HTML tag.
    #[allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]
    pub patterns: Vec<UserPattern>,
    /// Names of built-in patterns to turn off: private-key, jwt, anthropic-key,
    /// openai-key, stripe-key, github-token, gitlab-token, slack-webhook, slack-token,
    /// google-api-key, aws-akid, aws-secret-key, aws-session-token, url-password.
    pub disable: Vec<String>,
    /// Whether thinking blocks are redacted too (a modified thinking block no longer
    /// matches its signature, which Anthropic checks for the current tool-use turn).
    pub thinking: bool,
    /// Whether the raw JSON the formats keep verbatim is redacted too: message envelopes
    /// (e.g. the second copy of each tool result in Claude Code's toolUseResult, whole
    /// OpenHands events) and the extra fields of the conversation, messages and blocks.
    /// Only string values change, in place; the JSON stays valid. false leaves them as
    /// they were, secrets included.
    pub envelopes: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            patterns: Vec::new(),
            disable: Vec::new(),
            thinking: true,
            envelopes: true,
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
    envelopes: bool,
}

/// The message id events use for the top-level system prompt.
pub const SYSTEM_PROMPT_ID: &str = "(system prompt)";

/// The message id events use for the conversation's own `extra` (unknown top-level keys).
pub const CONVERSATION_ID: &str = "(conversation)";

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

/// Which part of a message a secret was found in; events name the raw JSON parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// What the model sees: texts, thinking, tool inputs and results.
    Content,
    /// An `extra` field: of the message, of one of its blocks, or of the conversation.
    Extra,
    /// The message's envelope (the wrapper line of JSONL formats; the whole line of an event).
    Envelope,
}

impl Field {
    /// What an event's detail says after the count.
    fn suffix(self) -> &'static str {
        match self {
            Field::Content => "",
            Field::Extra => " (extra)",
            Field::Envelope => " (envelope)",
        }
    }
}

/// The hits in one message, by field.
#[derive(Default)]
struct Hits {
    content: Vec<Hit>,
    extra: Vec<Hit>,
    envelope: Vec<Hit>,
}

/// What one run found, for the report.
#[derive(Default)]
struct Tally {
    /// Text fields looked at.
    scanned: usize,
    blocks_changed: usize,
    /// Raw JSON fields (envelopes, `extra`) that changed.
    raw_changed: usize,
    /// Per message id (in order) and field, the hits in it.
    by_message: Vec<(String, Field, Vec<Hit>)>,
}

impl Tally {
    fn push(&mut self, id: &str, hits: Hits) {
        for (field, hits) in [
            (Field::Content, hits.content),
            (Field::Extra, hits.extra),
            (Field::Envelope, hits.envelope),
        ] {
            if !hits.is_empty() {
                self.by_message.push((id.to_string(), field, hits));
            }
        }
    }
}

struct Walker<'a> {
    redactor: &'a Redactor,
    thinking: bool,
    envelopes: bool,
    count: &'a dyn Fn(&str) -> usize,
    scanned: usize,
    raw_changed: usize,
}

impl Walker<'_> {
    fn text(&mut self, text: &mut String, hits: &mut Vec<Hit>) {
        self.scanned += 1;
        if let Some(new) = self.redactor.redact(text, self.count, hits) {
            *text = new;
        }
    }

    /// Redacts JSON text in place, string literal by string literal (see [`json`]); text that
    /// is not valid JSON is redacted as plain text. Returns whether it changed.
    fn json(&mut self, raw: &mut RawJson, hits: &mut Vec<Hit>, what: &str) -> Result<bool, String> {
        if raw.is_empty() {
            return Ok(false);
        }
        self.scanned += 1;
        let text = raw.as_str();
        let new = if json::is_json(text) {
            let (redactor, count) = (self.redactor, self.count);
            json::redact_literals(text, &mut |value, key| {
                redactor.redact_value(value, key, count, hits)
            })
            .map_err(|e| format!("{what}: {e}"))?
        } else {
            self.redactor.redact(text, self.count, hits)
        };
        match new {
            Some(new) => {
                *raw = RawJson::from_string_unchecked(new);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// JSON the model sees that may carry binary payloads (image references, opaque blocks):
    /// every string literal except `data:` URLs and long base64 (see [`is_binary`]).
    fn json_text(
        &mut self,
        raw: &mut RawJson,
        hits: &mut Vec<Hit>,
        what: &str,
    ) -> Result<(), String> {
        if raw.is_empty() || !json::is_json(raw.as_str()) {
            return Ok(());
        }
        self.scanned += 1;
        let (redactor, count) = (self.redactor, self.count);
        let new = json::redact_literals(raw.as_str(), &mut |value, key| {
            if is_binary(value) {
                None
            } else {
                redactor.redact_value(value, key, count, hits)
            }
        })
        .map_err(|e| format!("{what}: {e}"))?;
        if let Some(new) = new {
            *raw = RawJson::from_string_unchecked(new);
        }
        Ok(())
    }

    /// An `extra` or `envelope` field, unless `envelopes = false`.
    fn raw(&mut self, raw: &mut RawJson, hits: &mut Vec<Hit>, what: &str) -> Result<(), String> {
        if self.envelopes && self.json(raw, hits, what)? {
            self.raw_changed += 1;
        }
        Ok(())
    }

    /// Redacts the blocks of `content` (and their `extra`); returns how many blocks had a
    /// secret in what the model sees.
    fn content(&mut self, content: &mut Content, hits: &mut Hits) -> Result<usize, String> {
        let mut changed = 0;
        for block in &mut content.blocks {
            let before = hits.content.len();
            match block {
                Block::Text(t) => {
                    self.text(&mut t.text, &mut hits.content);
                    self.raw(&mut t.extra, &mut hits.extra, "text block extra")?;
                }
                Block::Thinking(t) if self.thinking => {
                    self.text(&mut t.thinking, &mut hits.content);
                    self.raw(&mut t.extra, &mut hits.extra, "thinking block extra")?;
                }
                Block::ToolUse(t) => {
                    self.json(&mut t.input, &mut hits.content, "tool input")?;
                    self.raw(&mut t.extra, &mut hits.extra, "tool_use extra")?;
                }
                Block::ToolResult(r) => {
                    self.content(&mut r.content, hits)?;
                    self.raw(&mut r.extra, &mut hits.extra, "tool_result extra")?;
                }
                Block::Image(i) => {
                    if let ImageSource::Reference { json } = &mut i.source {
                        self.json_text(json, &mut hits.content, "image reference")?;
                    }
                    self.raw(&mut i.extra, &mut hits.extra, "image extra")?;
                }
                Block::Opaque(o) => self.json_text(&mut o.json, &mut hits.content, "block")?,
                Block::Thinking(_) => {}
            }
            if hits.content.len() > before {
                changed += 1;
            }
        }
        Ok(changed)
    }
}

/// A binary payload, not text: a `data:` URL, or 256+ characters of the base64 alphabet alone
/// (inline images and PDFs). Secrets are shorter, and PEM keys carry their header and newlines.
fn is_binary(value: &str) -> bool {
    value.starts_with("data:")
        || (value.len() >= 256
            && value.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_')
            }))
}

impl Stage for RedactSecrets {
    type Config = Config;
    const NAME: &'static str = "redact-secrets";
    const DESCRIPTION: &'static str =
        "Masks API keys, tokens, private keys and URL passwords with typed placeholders; the originals are not archived. \
         Looks at texts, thinking, tool inputs and results, the system prompt, image URLs, unknown blocks (documents) and the raw JSON kept verbatim; \
         not at tool definitions, tool_use ids, base64 image or PDF data, or data: URLs. \
         Put it first: stages before it archive the originals they change, secrets included (`condense pipeline check` warns).";

    fn new(config: Config) -> Result<Self, StageError> {
        let known = builtin_names();
        if let Some(unknown) = config.disable.iter().find(|d| !known.contains(&d.as_str())) {
            return Err(format!(
                "disable: unknown built-in pattern `{unknown}` (known: {})",
                known.join(", ")
            )
            .into());
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
                )
                .into());
            }
            if known.contains(&p.name.as_str()) || !names.insert(p.name.as_str()) {
                return Err(format!(
                    "patterns[{i}]: name `{}` is already taken by another pattern",
                    p.name
                )
                .into());
            }
            patterns.push(Pattern::user(i, &p.name, &p.regex)?);
        }
        Ok(RedactSecrets {
            redactor: Redactor::new(patterns)?,
            thinking: config.thinking,
            envelopes: config.envelopes,
        })
    }

    fn apply(&self, input: Input<'_>, cx: &Context<'_>) -> Result<StageOutput, StageError> {
        // Every text is scanned, one message copied at a time: a message that had a secret is
        // handed back replaced in place, the others are dropped again. Only a secret in the
        // request's own fields or the system prompt hands back the whole conversation.
        let view = input.view()?;
        let count = |text: &str| cx.count_tokens(text);
        let mut walker = Walker {
            redactor: &self.redactor,
            thinking: self.thinking,
            envelopes: self.envelopes,
            count: &count,
            scanned: 0,
            raw_changed: 0,
        };
        let mut tally = Tally::default();
        let mut hits = Hits::default();
        let original = view.header();
        let mut header = original.clone();
        walker.raw(&mut header.extra, &mut hits.extra, "conversation extra")?;
        tally.push(CONVERSATION_ID, hits);
        if let Some(system) = &mut header.system {
            let mut hits = Hits::default();
            tally.blocks_changed += walker.content(system, &mut hits)?;
            tally.push(SYSTEM_PROMPT_ID, hits);
        }
        let mut replaced = Vec::new();
        for (i, read) in view.messages().enumerate() {
            let mut message = read.to_message();
            let mut hits = Hits::default();
            let at = |what: &str| format!("message {}: {what}", message.id);
            tally.blocks_changed += walker
                .content(&mut message.content, &mut hits)
                .map_err(|e| format!("{}{e}", at("")))?;
            walker.raw(&mut message.extra, &mut hits.extra, &at("extra"))?;
            walker.raw(&mut message.envelope, &mut hits.envelope, &at("envelope"))?;
            tally.push(&message.id, hits);
            if !read.is(&message) {
                replaced.push((i, message));
            }
        }
        tally.scanned = walker.scanned;
        tally.raw_changed = walker.raw_changed;
        let report = self.report(&tally);
        if header == original {
            return Ok(StageOutput::replaced(replaced, report));
        }
        let mut conversation = input.into_conversation()?;
        (conversation.extra, conversation.system) = (header.extra, header.system);
        replace_messages(&mut conversation, replaced)?;
        Ok(StageOutput::changed(conversation, report))
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
        // Pattern index -> (count, tokens), over the whole conversation. Envelopes and `extra`
        // fields are not counted as context by the host: their hits free no tokens.
        let mut totals: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
        for (message_id, field, hits) in &tally.by_message {
            let mut per: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
            for hit in hits {
                let tokens = if *field == Field::Content {
                    hit.tokens
                } else {
                    0
                };
                for map in [&mut per, &mut totals] {
                    let entry = map.entry(hit.pattern).or_default();
                    entry.0 += 1;
                    entry.1 += tokens;
                }
            }
            for (pattern, (n, tokens)) in per {
                report.events.push(StageEvent {
                    kind: "redacted".to_string(),
                    message_id: message_id.clone(),
                    detail: format!("{}: {n}{}", names[pattern], field.suffix()),
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
        let raw = match tally.raw_changed {
            0 => String::new(),
            n => format!(
                " and {}",
                plural(n, "envelope or extra field", "envelope or extra fields")
            ),
        };
        report.note(format!(
            "redacted {} in {}{raw} ({} texts scanned): {}",
            plural(found, "secret", "secrets"),
            plural(tally.blocks_changed, "block", "blocks"),
            tally.scanned,
            kinds.join(", ")
        ));
        report.note("the originals are not archived: redaction cannot be expanded back");
        report
    }
}

condense_abi::export_stage!(RedactSecrets);
