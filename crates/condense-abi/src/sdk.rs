//! The stage authoring surface: ordinary Rust over the model types.
//!
//! A stage author implements [`Stage`] and writes one [`export_stage!`](crate::export_stage)
//! line; this module does the rest (conversion, config parsing with unknown keys rejected,
//! metadata, and `catch_unwind` around every entry point). A stage that remembers its decisions
//! across runs keeps them as versioned JSON with [`StageState`].

use condense_model::Conversation;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Services the host gives a stage. Stages never do I/O, read clocks or load tokenizers
/// themselves: everything outside the conversation comes through here, which is what makes
/// every stage deterministic and snapshot-testable.
pub trait Host {
    /// Tokens in `text` with the pipeline's tokenizer.
    fn count_tokens(&self, text: &str) -> usize;
    /// The current time, Unix milliseconds (injected: tests pin it).
    fn now_ms(&self) -> i64;
    /// Stores bytes in the content-addressed store, returning their key.
    fn store_put(&self, bytes: &[u8]) -> Result<String, String>;
    /// Reads bytes stored under `key`.
    fn store_get(&self, key: &str) -> Result<Option<Vec<u8>>, String>;
    /// This stage's persistent state for this session (what it decided on earlier runs).
    fn state_get(&self) -> Result<Option<String>, String>;
    /// Replaces this stage's persistent state for this session.
    fn state_put(&self, state: &str) -> Result<(), String>;
    /// Tokens freed by the stages that ran before this one in this pipeline run.
    fn tokens_freed_before(&self) -> usize;
    /// The model's context window, in tokens.
    fn context_window(&self) -> usize;
    /// The model's maximum output tokens.
    fn max_output_tokens(&self) -> usize;
    /// Tokens kept free for the next response (the pipeline's `[model] output_reserve`): the
    /// request fits when the conversation takes at most `context_window() - output_reserve()`.
    fn output_reserve(&self) -> usize;
    /// Whether an earlier stage in this run raised `flag` (see [`StageReport::flags`]).
    fn has_flag(&self, flag: &str) -> bool;
    /// The session this conversation belongs to (stable across runs of the same session).
    fn session_id(&self) -> String;
    /// The format the conversation was read from and will be written back in: `anthropic`,
    /// `openai`, `claude-code`, `openhands` (empty when unknown). Stages that write
    /// format-specific request fields (Anthropic `context_management`) check it.
    fn source_format(&self) -> String;
    /// Tokens of the conversation as handed to this stage (system prompt, tools and messages),
    /// counted by the host with the pipeline's tokenizer and its block cache, plus the
    /// pipeline's `[model] fixed_tokens` (a system prompt and tool definitions the file does not
    /// hold): what the real request carries, so thresholds compare the request's size.
    fn conversation_tokens(&self) -> usize;
    /// Summarizes `request.messages` with the pipeline's summarizer (offline extractive by
    /// default, or an LLM the host calls). Stages never talk to a model themselves.
    fn summarize(&self, request: SummaryRequest) -> Result<String, String>;
}

/// What a stage asks the host's summarizer for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRequest {
    /// The span to summarize, oldest first.
    pub messages: Vec<condense_model::Message>,
    /// The summary this one extends (anchored iterative summarization: the new span is merged
    /// into it section by section rather than regenerated).
    pub previous_summary: Option<String>,
    /// The most the summary may take, in tokens.
    pub max_tokens: usize,
    /// Who asks: `context-collapse`, `autocompact`, ... (summarizers may adapt their prompt).
    pub purpose: String,
}

/// What a stage did, for the report. The host adds tokens before and after and the time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageReport {
    pub blocks_changed: usize,
    /// The stage's own figure of tokens freed, when it computes one.
    pub tokens_freed: Option<usize>,
    pub notes: Vec<String>,
    pub events: Vec<StageEvent>,
    /// False only for stages whose removals must NOT be kept (secret redaction).
    pub archive_removed: bool,
    /// Facts later stages can test with [`Host::has_flag`] (e.g. `context-collapse:active`).
    pub flags: Vec<String>,
}

impl Default for StageReport {
    fn default() -> Self {
        StageReport {
            blocks_changed: 0,
            tokens_freed: None,
            notes: Vec::new(),
            events: Vec::new(),
            archive_removed: true,
            flags: Vec::new(),
        }
    }
}

impl StageReport {
    /// Adds a free-form note.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }
}

/// One structured thing a stage did to one message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageEvent {
    /// What happened: `persisted`, `deduplicated`, `truncated`, `cleared`, ...
    pub kind: String,
    pub message_id: String,
    pub detail: String,
    /// Tokens this event freed (0 when not applicable).
    pub tokens: usize,
}

/// The conversation a stage is handed, read lazily.
///
/// Inside a loaded plugin the conversation stays on the host's side of the boundary until the
/// stage asks for it with [`Input::into_conversation`]; only then is it copied into the plugin.
/// A stage that decides from host services alone (a token threshold, a flag) that it has
/// nothing to do never pays for that copy: it returns [`StageOutput::unchanged`] and the host
/// keeps its own conversation.
///
/// ```
/// use condense_abi::Input;
/// use condense_model::Conversation;
/// let input = Input::from(Conversation::default());
/// assert!(input.into_conversation().unwrap().messages.is_empty());
/// ```
pub struct Input<'a> {
    source: InputSource<'a>,
}

enum InputSource<'a> {
    Owned(Conversation),
    Lazy(&'a dyn Fn() -> Result<Conversation, String>),
}

impl<'a> Input<'a> {
    /// An input that is built only if the stage asks for it (what the plugin adapter uses).
    pub fn lazy(materialize: &'a dyn Fn() -> Result<Conversation, String>) -> Self {
        Input {
            source: InputSource::Lazy(materialize),
        }
    }

    /// The conversation, as an owned value the stage may change freely. In a plugin this is
    /// where the copy across the boundary happens; the error names a malformed value.
    pub fn into_conversation(self) -> Result<Conversation, String> {
        match self.source {
            InputSource::Owned(conversation) => Ok(conversation),
            InputSource::Lazy(materialize) => materialize(),
        }
    }
}

impl From<Conversation> for Input<'static> {
    fn from(conversation: Conversation) -> Self {
        Input {
            source: InputSource::Owned(conversation),
        }
    }
}

impl std::fmt::Debug for Input<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.source {
            InputSource::Owned(_) => "Input(owned)",
            InputSource::Lazy(_) => "Input(lazy)",
        })
    }
}

/// What [`Stage::apply`] returns: the new conversation, or `None` when the stage changed
/// nothing (the host then keeps the conversation it already holds: nothing crosses back, and
/// there is nothing to check or archive).
#[derive(Debug, Clone)]
pub struct StageOutput {
    pub conversation: Option<Conversation>,
    pub report: StageReport,
}

impl StageOutput {
    /// The stage produced `conversation`.
    pub fn changed(conversation: Conversation, report: StageReport) -> Self {
        StageOutput {
            conversation: Some(conversation),
            report,
        }
    }

    /// The stage left the conversation as it was handed in.
    pub fn unchanged(report: StageReport) -> Self {
        StageOutput {
            conversation: None,
            report,
        }
    }

    /// [`changed`](Self::changed) when the report counts a changed block, otherwise
    /// [`unchanged`](Self::unchanged): for stages that count every change they make.
    pub fn from_counted(conversation: Conversation, report: StageReport) -> Self {
        if report.blocks_changed == 0 {
            Self::unchanged(report)
        } else {
            Self::changed(conversation, report)
        }
    }
}

/// A compression stage.
///
/// ```
/// use condense_abi::{Host, Input, Stage, StageOutput, StageReport};
///
/// #[derive(serde::Serialize, serde::Deserialize, Default)]
/// #[serde(deny_unknown_fields, default)]
/// struct Config { min_tokens: usize }
///
/// /// Drops every message once the conversation reaches `min_tokens`.
/// struct DropAll(Config);
/// impl Stage for DropAll {
///     type Config = Config;
///     const NAME: &'static str = "drop-all";
///     const DESCRIPTION: &'static str = "Drops every message past a size.";
///     fn new(config: Config) -> Result<Self, String> { Ok(DropAll(config)) }
///     fn apply(&self, input: Input<'_>, host: &dyn Host) -> Result<StageOutput, String> {
///         if host.conversation_tokens() < self.0.min_tokens {
///             // Decided without reading the conversation: nothing crosses the boundary.
///             return Ok(StageOutput::unchanged(StageReport::default()));
///         }
///         let mut conversation = input.into_conversation()?;
///         let report = StageReport { blocks_changed: conversation.messages.len(), ..StageReport::default() };
///         conversation.messages.clear();
///         Ok(StageOutput::changed(conversation, report))
///     }
/// }
/// // In a plugin crate: condense_abi::export_stage!(DropAll);
/// ```
pub trait Stage: Sized + Send + Sync + 'static {
    /// The `[stage.config]` table. Its `Default` gives the defaults; every key it serializes is
    /// a known key, and any other key a user writes is rejected.
    type Config: DeserializeOwned + Serialize + Default;
    /// The plugin name users write in pipeline files.
    const NAME: &'static str;
    /// One line saying what the stage does.
    const DESCRIPTION: &'static str;
    /// `(key, description)` for each config key, for `condense plugins --details`. Keys listed
    /// here are accepted even when their default does not serialize (an `Option` set to None).
    const CONFIG_DOCS: &'static [(&'static str, &'static str)] = &[];

    /// Builds the stage, validating the config ("max_result_bytes must be > 0, got 0").
    fn new(config: Self::Config) -> Result<Self, String>;

    /// Runs the stage over one conversation. Read it with [`Input::into_conversation`] only
    /// when needed, and return [`StageOutput::unchanged`] whenever nothing changed.
    fn apply(&self, input: Input<'_>, host: &dyn Host) -> Result<StageOutput, String>;
}

/// One config key, as documented by a plugin's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigKey {
    pub name: String,
    /// TOML type of the default: `integer`, `string`, `boolean`, `array`, `table`, `float`.
    pub ty: String,
    /// The default as TOML text (empty when there is none).
    pub default: String,
    pub description: String,
}

/// What a plugin says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageMetadata {
    pub name: String,
    pub version: String,
    pub description: String,
    pub config_keys: Vec<ConfigKey>,
}

fn toml_type(value: &toml::Value) -> &'static str {
    match value {
        toml::Value::String(_) => "string",
        toml::Value::Integer(_) => "integer",
        toml::Value::Float(_) => "float",
        toml::Value::Boolean(_) => "boolean",
        toml::Value::Datetime(_) => "datetime",
        toml::Value::Array(_) => "array",
        toml::Value::Table(_) => "table",
    }
}

fn default_table<S: Stage>() -> toml::Table {
    toml::Table::try_from(S::Config::default()).unwrap_or_default()
}

/// The metadata of stage type `S`, built from its constants and its config's defaults.
pub fn metadata_of<S: Stage>(version: &str) -> StageMetadata {
    let defaults = default_table::<S>();
    let mut keys: Vec<ConfigKey> = defaults
        .iter()
        .map(|(name, value)| ConfigKey {
            name: name.clone(),
            ty: toml_type(value).to_string(),
            default: value.to_string(),
            description: doc_for::<S>(name).to_string(),
        })
        .collect();
    for (name, description) in S::CONFIG_DOCS {
        if !defaults.contains_key(*name) {
            keys.push(ConfigKey {
                name: name.to_string(),
                ty: "optional".to_string(),
                default: String::new(),
                description: description.to_string(),
            });
        }
    }
    StageMetadata {
        name: S::NAME.to_string(),
        version: version.to_string(),
        description: S::DESCRIPTION.to_string(),
        config_keys: keys,
    }
}

fn doc_for<S: Stage>(key: &str) -> &'static str {
    S::CONFIG_DOCS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or("", |(_, d)| *d)
}

/// Builds stage `S` from its `[stage.config]` table given as TOML text: the config is parsed
/// with [`parse_config`], then validated by [`Stage::new`], whose error gets the stage's name.
/// This is what the host's constructor call runs inside the plugin.
pub fn build_stage<S: Stage>(config_toml: &str) -> Result<S, String> {
    let config = parse_config::<S>(config_toml)?;
    S::new(config).map_err(|e| format!("{}: {e}", S::NAME))
}

/// Parses a `[stage.config]` table given as TOML text into `S::Config`, rejecting unknown keys.
pub fn parse_config<S: Stage>(toml_text: &str) -> Result<S::Config, String> {
    let table: toml::Table = toml::from_str(toml_text)
        .map_err(|e| format!("{}: config is not valid TOML: {}", S::NAME, e.message()))?;
    let defaults = default_table::<S>();
    let mut unknown: Vec<&str> = table
        .keys()
        .map(String::as_str)
        .filter(|k| !defaults.contains_key(*k) && !S::CONFIG_DOCS.iter().any(|(d, _)| d == k))
        .collect();
    if !unknown.is_empty() {
        unknown.sort_unstable();
        let mut known: Vec<&str> = defaults.keys().map(String::as_str).collect();
        known.extend(
            S::CONFIG_DOCS
                .iter()
                .map(|(k, _)| *k)
                .filter(|k| !defaults.contains_key(*k)),
        );
        return Err(format!(
            "{}: unknown config key{} `{}` (known: {})",
            S::NAME,
            if unknown.len() > 1 { "s" } else { "" },
            unknown.join("`, `"),
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    }
    S::Config::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
        let words =
            crate::config_words::explain::<S::Config>(&table, &defaults, e.message().trim_end());
        format!("{}: {words}", S::NAME)
    })
}

/// A stage's persistent state, kept as versioned JSON through [`Host::state_get`] and
/// [`Host::state_put`]. In a stage, read it with [`load_state`] and write it with
/// [`save_state`] (which skips writes that change nothing); [`parse_state`] and [`state_json`]
/// are the text conversions underneath.
///
/// ```
/// use condense_abi::{parse_state, state_json, StageState};
///
/// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
/// struct State { version: u32, seen: usize }
/// impl Default for State {
///     fn default() -> Self { State { version: Self::VERSION, seen: 0 } }
/// }
/// impl StageState for State {
///     const VERSION: u32 = 1;
///     fn version(&self) -> u32 { self.version }
/// }
///
/// let state: State = parse_state("my-stage", None)?;
/// assert_eq!(state_json("my-stage", &state)?, r#"{"version":1,"seen":0}"#);
/// # Ok::<(), String>(())
/// ```
pub trait StageState: Serialize + DeserializeOwned + Default {
    /// The format version this stage reads and writes.
    const VERSION: u32;
    /// The version the parsed value carries.
    fn version(&self) -> u32;
}

/// Parses a stage's stored state text: none yet (or blank) gives `S::default()`; otherwise
/// the text must be valid JSON for `S` and carry version `S::VERSION`. `stage` names the stage
/// in the errors.
pub fn parse_state<S: StageState>(stage: &str, text: Option<&str>) -> Result<S, String> {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Ok(S::default());
    };
    let state: S = serde_json::from_str(text)
        .map_err(|e| format!("{stage}: stored state is not valid: {e}"))?;
    if state.version() != S::VERSION {
        return Err(format!(
            "{stage}: stored state has version {}, this stage reads version {}",
            state.version(),
            S::VERSION
        ));
    }
    Ok(state)
}

/// The JSON text [`parse_state`] reads back (compact, fields in declaration order). `stage`
/// names the stage in the error.
pub fn state_json<S: Serialize>(stage: &str, state: &S) -> Result<String, String> {
    serde_json::to_string(state).map_err(|e| format!("{stage}: cannot serialize state: {e}"))
}

/// This stage's state for this session, read through the host and parsed with
/// [`parse_state`] (the default when there is none), with the stored text, which
/// [`save_state`] compares against.
pub fn load_state<S: StageState>(
    stage: &str,
    host: &dyn Host,
) -> Result<(S, Option<String>), String> {
    let stored = host
        .state_get()
        .map_err(|e| format!("{stage}: cannot read the stage state: {e}"))?;
    let state = parse_state(stage, stored.as_deref())?;
    Ok((state, stored))
}

/// Writes `state` through the host unless that would change nothing: its text is `stored` (what
/// [`load_state`] read), or nothing was stored and `state` is the default. Returns whether it
/// wrote.
pub fn save_state<S: StageState>(
    stage: &str,
    host: &dyn Host,
    state: &S,
    stored: Option<&str>,
) -> Result<bool, String> {
    let text = state_json(stage, state)?;
    let unchanged = match stored {
        Some(old) => old == text,
        None => text == state_json(stage, &S::default())?,
    };
    if unchanged {
        return Ok(false);
    }
    host.state_put(&text)
        .map_err(|e| format!("{stage}: cannot write the stage state: {e}"))?;
    Ok(true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct State {
        version: u32,
        #[serde(default)]
        seen: BTreeMap<String, usize>,
    }

    impl Default for State {
        fn default() -> Self {
            State {
                version: Self::VERSION,
                seen: BTreeMap::new(),
            }
        }
    }

    impl StageState for State {
        const VERSION: u32 = 3;
        fn version(&self) -> u32 {
            self.version
        }
    }

    #[test]
    fn no_state_or_blank_state_is_the_default() {
        for text in [None, Some(""), Some(" \n\t")] {
            assert_eq!(parse_state::<State>("s", text), Ok(State::default()));
        }
    }

    #[test]
    fn invalid_json_names_the_stage_and_the_parse_error() {
        assert_eq!(
            parse_state::<State>("my-stage", Some("{")).unwrap_err(),
            "my-stage: stored state is not valid: EOF while parsing an object at line 1 column 1"
        );
        let err = parse_state::<State>("my-stage", Some(r#"{"version":3,"x":1}"#)).unwrap_err();
        assert!(
            err.starts_with("my-stage: stored state is not valid: unknown field `x`"),
            "{err}"
        );
    }

    #[test]
    fn another_version_is_refused() {
        assert_eq!(
            parse_state::<State>("my-stage", Some(r#"{"version":7}"#)).unwrap_err(),
            "my-stage: stored state has version 7, this stage reads version 3"
        );
    }

    #[test]
    fn round_trip() {
        let mut state = State::default();
        state.seen.insert("b".into(), 2);
        state.seen.insert("a".into(), 1);
        let json = state_json("s", &state).unwrap();
        assert_eq!(json, r#"{"version":3,"seen":{"a":1,"b":2}}"#);
        assert_eq!(parse_state::<State>("s", Some(&json)), Ok(state));
    }

    #[test]
    fn save_writes_only_what_changes_and_load_reads_it_back() {
        let host = crate::testing::MemoryHost::default();
        let (mut state, stored) = load_state::<State>("s", &host).unwrap();
        assert_eq!((state.clone(), stored.clone()), (State::default(), None));
        // Nothing stored and nothing to store: no write.
        assert!(!save_state("s", &host, &state, stored.as_deref()).unwrap());
        state.seen.insert("a".into(), 1);
        assert!(save_state("s", &host, &state, stored.as_deref()).unwrap());
        let (again, stored) = load_state::<State>("s", &host).unwrap();
        assert_eq!(again, state);
        // The same state again: no write.
        assert!(!save_state("s", &host, &again, stored.as_deref()).unwrap());
        assert_eq!(host.state_puts.get(), 1);
    }

    #[test]
    fn a_serialize_failure_names_the_stage() {
        // serde_json refuses maps whose keys are not strings.
        let state = BTreeMap::from([((1, 2), 0)]);
        let err = state_json("my-stage", &state).unwrap_err();
        assert_eq!(
            err,
            "my-stage: cannot serialize state: key must be a string"
        );
    }
}
