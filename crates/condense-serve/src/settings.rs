//! The proxy's settings: the pipeline file's `[serve]` table, then flags over it, and the
//! table of known models' context windows the file can override (`[serve.models]`).

use crate::ServeError;
use serde::Deserialize;
use std::collections::BTreeMap;

/// What the proxy does when it cannot parse a body or a stage fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Forward the original body unchanged and log one line: an agent must never be broken by
    /// its compressor.
    #[default]
    Pass,
    /// Answer 502 with a one-line reason.
    Fail,
}

impl std::str::FromStr for OnError {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pass" => Ok(OnError::Pass),
            "fail" => Ok(OnError::Fail),
            other => Err(format!("expected `pass` or `fail`, got `{other}`")),
        }
    }
}

/// The public endpoints, used when neither the file nor a flag names an upstream.
pub const ANTHROPIC_UPSTREAM: &str = "https://api.anthropic.com";
pub const OPENAI_UPSTREAM: &str = "https://api.openai.com";
/// Bodies over this answer 413 (32 MiB: far above any model's window in text).
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 << 20;

/// Every setting of a running proxy.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where Anthropic requests go (`/v1/messages`, and other paths Anthropic clients call).
    pub anthropic_upstream: String,
    /// Where OpenAI requests go (`/v1/chat/completions`, `/v1/responses`, the rest).
    pub openai_upstream: String,
    pub on_error: OnError,
    pub max_body_bytes: usize,
    /// `[serve.models]`: model name (or name prefix) -> context window, over the built-in table.
    pub models: BTreeMap<String, usize>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            anthropic_upstream: ANTHROPIC_UPSTREAM.to_string(),
            openai_upstream: OPENAI_UPSTREAM.to_string(),
            on_error: OnError::Pass,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            models: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServe {
    anthropic_upstream: Option<String>,
    openai_upstream: Option<String>,
    on_error: Option<OnError>,
    max_body_bytes: Option<usize>,
    #[serde(default)]
    models: BTreeMap<String, usize>,
}

impl Settings {
    /// The settings of a pipeline file's `[serve]` table (`source` names the file in errors).
    pub fn from_table(table: &toml::Table, source: &str) -> Result<Settings, ServeError> {
        let bad = |m: String| ServeError::Settings(format!("{source}: [serve]: {m}"));
        let raw: RawServe = toml::Value::Table(table.clone())
            .try_into()
            .map_err(|e: toml::de::Error| bad(e.message().trim().replace('\n', " ")))?;
        let mut s = Settings::default();
        if let Some(u) = raw.anthropic_upstream {
            s.anthropic_upstream =
                check_upstream(&u).map_err(|m| bad(format!("anthropic_upstream: {m}")))?;
        }
        if let Some(u) = raw.openai_upstream {
            s.openai_upstream =
                check_upstream(&u).map_err(|m| bad(format!("openai_upstream: {m}")))?;
        }
        s.on_error = raw.on_error.unwrap_or_default();
        if let Some(n) = raw.max_body_bytes {
            if n == 0 {
                return Err(bad("max_body_bytes: must be above 0".into()));
            }
            s.max_body_bytes = n;
        }
        for (model, window) in &raw.models {
            if *window == 0 {
                return Err(bad(format!("models.\"{model}\": a window must be above 0")));
            }
        }
        s.models = raw.models;
        Ok(s)
    }

    /// The context window of `model`: `[serve.models]` first, then the built-in table, by the
    /// longest matching name prefix; `None` for a model neither knows (the pipeline's
    /// `[model] context_window` then applies). `long_context`: the request asked for the long
    /// context window (Anthropic's `context-1m-` beta); a model not in `[serve.models]` then
    /// has at least [`LONG_CONTEXT_WINDOW`], whatever the table says.
    pub fn window_for(&self, model: &str, long_context: bool) -> Option<usize> {
        self.configured(model).or_else(|| {
            let known = longest_prefix(KNOWN_MODELS.iter().copied(), model);
            if long_context {
                Some(known.map_or(LONG_CONTEXT_WINDOW, |w| w.max(LONG_CONTEXT_WINDOW)))
            } else {
                known
            }
        })
    }

    /// The output `model`'s window keeps for the answer whatever the request asks for
    /// ([`KNOWN_OUTPUTS`]): none for a model `[serve.models]` names, whose window stands as the
    /// user gave it.
    pub fn output_kept_for(&self, model: &str) -> Option<usize> {
        match self.configured(model) {
            Some(_) => None,
            None => longest_prefix(KNOWN_OUTPUTS.iter().copied(), model),
        }
    }

    /// The window `[serve.models]` gives `model`.
    fn configured(&self, model: &str) -> Option<usize> {
        longest_prefix(self.models.iter().map(|(k, v)| (k.as_str(), *v)), model)
    }
}

/// The value of the longest of `pairs`' name prefixes that `model` starts with.
fn longest_prefix<'a>(pairs: impl Iterator<Item = (&'a str, usize)>, model: &str) -> Option<usize> {
    pairs
        .filter(|(prefix, _)| model.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, value)| value)
}

/// The output some models' windows keep for the answer whatever the request says, by name
/// prefix: OpenAI's GPT-5 family takes a prompt of at most its window less its 128,000 output
/// tokens ("Input tokens exceed the configured limit of 272000 tokens" at 400,000); its chat
/// variants, 16,384 of 128,000.
pub const KNOWN_OUTPUTS: &[(&str, usize)] = &[
    ("gpt-5", 128_000),
    ("gpt-5-chat", 16_384),
    ("gpt-5.1-chat", 16_384),
    ("gpt-5.2-chat", 16_384),
];

/// An upstream base URL: `http://` or `https://`, a host, an optional path prefix; kept
/// without its trailing slash (the request's path is appended).
pub fn check_upstream(url: &str) -> Result<String, String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some("http" | "https"), Some(_)) => Ok(url.trim_end_matches('/').to_string()),
        _ => Err(format!(
            "`{url}` is not an http:// or https:// URL with a host"
        )),
    }
}

/// The `anthropic-beta` value (a prefix: `context-1m-2025-08-07`) with which a request asks
/// for the long context window of a model that has a shorter one by default.
pub const LONG_CONTEXT_BETA: &str = "context-1m-";

/// The long context window ([`LONG_CONTEXT_BETA`]).
pub const LONG_CONTEXT_WINDOW: usize = 1_000_000;

/// Known models' context windows (input + output), by name prefix; the longest prefix wins.
/// From the providers' model pages (as of 2026-12); a model not listed uses the pipeline's
/// window. Claude models from Opus and Sonnet 4.6 on, Haiku 5.5 and Fable have 1M natively;
/// older ones 200k, or 1M with [`LONG_CONTEXT_BETA`].
pub const KNOWN_MODELS: &[(&str, usize)] = &[
    ("claude-", 200_000),
    ("claude-opus-4-6", 1_000_000),
    ("claude-sonnet-4-6", 1_000_000),
    ("claude-opus-5", 1_000_000),
    ("claude-sonnet-5", 1_000_000),
    ("claude-haiku-5", 1_000_000),
    ("claude-fable-", 1_000_000),
    ("gpt-5.4", 1_050_000),
    ("gpt-5.5", 1_050_000),
    ("gpt-5-chat", 128_000),
    ("gpt-5.1-chat", 128_000),
    ("gpt-5.2-chat", 128_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4-", 8_192),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("codex-mini", 200_000),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_by_longest_prefix_with_overrides_first() {
        let mut s = Settings::default();
        let window = |s: &Settings, model: &str| s.window_for(model, false);
        assert_eq!(window(&s, "claude-sonnet-4-5-20250929"), Some(200_000));
        assert_eq!(window(&s, "claude-haiku-4-5"), Some(200_000));
        assert_eq!(window(&s, "gpt-4o-mini"), Some(128_000));
        assert_eq!(window(&s, "gpt-4-turbo-2024-04-09"), Some(128_000));
        assert_eq!(window(&s, "gpt-4-0613"), Some(8_192));
        assert_eq!(window(&s, "gpt-4.1-mini"), Some(1_047_576));
        assert_eq!(window(&s, "gpt-5.2"), Some(400_000));
        assert_eq!(window(&s, "my-local-model"), None);
        s.models.insert("claude-sonnet-4-5".into(), 1_000_000);
        assert_eq!(window(&s, "claude-sonnet-4-5-20250929"), Some(1_000_000));
        assert_eq!(window(&s, "claude-opus-4-1"), Some(200_000));
    }

    /// The models whose window is 1M natively: a proxy that took them for 200k would compress
    /// conversations they hold whole (and peers' users report exactly that).
    #[test]
    fn current_models_have_their_long_windows() {
        let s = Settings::default();
        for model in [
            "claude-opus-4-6",
            "claude-sonnet-4-6",
            "claude-opus-5",
            "claude-opus-5-5",
            "claude-sonnet-5",
            "claude-sonnet-5-5",
            "claude-haiku-5-5",
            "claude-fable-5-1",
        ] {
            assert_eq!(s.window_for(model, false), Some(1_000_000), "{model}");
        }
        assert_eq!(s.window_for("gpt-5.4", false), Some(1_050_000));
        assert_eq!(s.window_for("gpt-5.5-2026-04-23", false), Some(1_050_000));
    }

    /// The GPT-5 family keeps 128,000 of its window for the answer; a model `[serve.models]`
    /// names keeps what its window says.
    #[test]
    fn some_models_keep_their_output_whatever_the_request_says() {
        let mut s = Settings::default();
        assert_eq!(s.output_kept_for("gpt-5"), Some(128_000));
        assert_eq!(s.output_kept_for("gpt-5.5-2026-04-23"), Some(128_000));
        assert_eq!(s.output_kept_for("gpt-4o"), None);
        // The chat variants: 128k windows, 16k outputs.
        assert_eq!(s.window_for("gpt-5.2-chat-latest", false), Some(128_000));
        assert_eq!(s.output_kept_for("gpt-5-chat-latest"), Some(16_384));
        assert_eq!(s.output_kept_for("claude-sonnet-5"), None);
        s.models.insert("gpt-5.2".into(), 272_000);
        assert_eq!(s.output_kept_for("gpt-5.2-codex"), None);
        assert_eq!(s.output_kept_for("gpt-5.4"), Some(128_000));
    }

    /// A request that asks for the long context window has it, over the table, not over what
    /// `[serve.models]` says of the model.
    #[test]
    fn the_long_context_beta_widens_the_window_unless_the_models_table_says() {
        let mut s = Settings::default();
        assert_eq!(s.window_for("claude-sonnet-4-5", true), Some(1_000_000));
        assert_eq!(s.window_for("claude-opus-4-1", true), Some(1_000_000));
        assert_eq!(s.window_for("gpt-5.5", true), Some(1_050_000));
        assert_eq!(s.window_for("some-model", true), Some(1_000_000));
        s.models.insert("claude-sonnet-4-5".into(), 300_000);
        assert_eq!(s.window_for("claude-sonnet-4-5", true), Some(300_000));
    }

    #[test]
    fn serve_table_is_checked_key_by_key() {
        let table: toml::Table = toml::from_str(
            "openai_upstream = \"http://127.0.0.1:9/v1/\"\non_error = \"fail\"\n[models]\nx = 8000\n",
        )
        .unwrap();
        let s = Settings::from_table(&table, "p.toml").map_err(|e| e.to_string());
        let s = s.as_ref().map(|s| {
            (
                s.openai_upstream.as_str(),
                s.on_error,
                s.window_for("x1", false),
            )
        });
        assert_eq!(s, Ok(("http://127.0.0.1:9/v1", OnError::Fail, Some(8000))));

        let table: toml::Table = toml::from_str("upstream = 1").unwrap();
        let err = Settings::from_table(&table, "p.toml")
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert!(
            matches!(&err, Err(m) if m.starts_with("p.toml: [serve]: unknown field `upstream`") && !m.contains('\n')),
            "{err:?}"
        );
        let table: toml::Table = toml::from_str("anthropic_upstream = \"ftp://x\"").unwrap();
        assert!(Settings::from_table(&table, "p.toml").is_err());
    }
}
