//! The one LLM HTTP client: the summarizers' backends and `condense eval`'s judge both send
//! their requests through [`LlmClient`].

use super::{anthropic, http, openai, LlmConfig};
use condense_text::{cut_chars, one_line};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Which API: Anthropic Messages or OpenAI-compatible Chat Completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiKind {
    Anthropic,
    OpenAi,
}

impl ApiKind {
    /// `anthropic` or `openai` (the summarizer's `kind`, the judge's `--judge`).
    pub fn name(self) -> &'static str {
        match self {
            ApiKind::Anthropic => "anthropic",
            ApiKind::OpenAi => "openai",
        }
    }

    /// The API a [`name`](Self::name) stands for.
    pub fn parse(name: &str) -> Option<ApiKind> {
        match name {
            "anthropic" => Some(ApiKind::Anthropic),
            "openai" => Some(ApiKind::OpenAi),
            _ => None,
        }
    }
}

/// Why an [`LlmConfig`] cannot make a client. The messages use the pipeline file's key names;
/// a caller whose settings are named otherwise (command-line flags) words its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmConfigError {
    /// `model` is missing or blank.
    #[error("`model` is required (the model name the API expects)")]
    NoModel,
    /// `base_url` (as given) is not an http:// or https:// URL with a host.
    #[error("base_url {0:?} is not an http:// or https:// URL with a host")]
    BadBaseUrl(String),
    /// The variable (named here) that should hold the key is unset or blank.
    #[error("environment variable {0} (api_key_env) is not set; it must hold the API key")]
    KeyNotSet(String),
    /// `max_output_tokens` or `timeout_secs` is 0.
    #[error("max_output_tokens and timeout_secs must be at least 1")]
    ZeroLimit,
}

/// Why a request failed: one line (the HTTP status and the API's message, a transport error,
/// an unreadable reply), without the API's name and never holding the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// The API says the prompt is too long (`HTTP 400: prompt is too long: ...`): sending
    /// less may help.
    #[error("{0}")]
    PromptTooLong(String),
    /// Anything else, after the retries the config allows.
    #[error("{0}")]
    Failed(String),
}

/// How an error reply is handled.
pub(crate) enum Failure {
    /// Drop turns from the head and resend.
    PromptTooLong(String),
    /// Resend with `max_completion_tokens` instead of `max_tokens` (OpenAI reasoning models).
    UseMaxCompletionTokens(String),
    Other(String),
}

/// The API's own error message (`error.message`, or the body), one line.
pub(crate) fn api_message(status: u16, body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
    let msg = v
        .pointer("/error/message")
        .or_else(|| v.pointer("/message"))
        .or_else(|| v.get("error"))
        .and_then(serde_json::Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| body.to_string());
    let msg = cut_chars(&one_line(&msg), 500);
    if msg.is_empty() {
        format!("no message (HTTP {status})")
    } else {
        msg
    }
}

/// `base_url` checked and without a trailing slash; whether its host is a loopback address.
fn check_base_url(url: &str) -> Option<(String, bool)> {
    let url = url.trim().trim_end_matches('/');
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = match host.strip_prefix('[') {
        Some(v6) => format!("[{}]", v6.split(']').next().unwrap_or("")),
        None => host.split(':').next().unwrap_or("").to_string(),
    };
    if host.is_empty()
        || host == "[]"
        || url.chars().any(char::is_whitespace)
        || url.contains(['?', '#'])
    {
        return None;
    }
    let loopback = host == "localhost" || host == "[::1]" || host.starts_with("127.");
    Some((url.to_string(), loopback))
}

/// An API key; shows as `[redacted]`.
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// A checked connection to one model behind one API: the one LLM HTTP client.
///
/// Built from an [`ApiKind`] and an [`LlmConfig`], it checks the config (a model, an http or
/// https `base_url` with a host, the key in the variable `api_key_env` names), then sends one
/// system prompt and one user message per call and returns the reply's text. It retries on
/// 408, 429, 5xx and transport errors with exponential backoff (or the server's
/// `retry-after`), switches an OpenAI-compatible request to `max_completion_tokens` when the
/// model refuses `max_tokens`, and reports every failure as one line holding the HTTP status
/// and the API's own message, never the key.
///
/// ```
/// use condense_summarize::llm::{ApiKind, LlmClient, LlmConfig, LlmConfigError};
///
/// let config = LlmConfig {
///     model: Some("qwen2.5-coder:7b".into()),
///     base_url: Some("http://localhost:11434/v1".into()),
///     ..LlmConfig::default()
/// };
/// // A local OpenAI-compatible server needs no key.
/// let client = LlmClient::new(ApiKind::OpenAi, &config, &|_| None)?;
/// assert_eq!(client.url(), "http://localhost:11434/v1/chat/completions");
/// // `client.send(system, user, max_tokens)` would POST and return the reply's text.
///
/// // Anthropic always wants one, from ANTHROPIC_API_KEY unless `api_key_env` names another.
/// let missing = LlmClient::new(ApiKind::Anthropic, &config, &|_| None);
/// assert!(matches!(missing, Err(LlmConfigError::KeyNotSet(v)) if v == "ANTHROPIC_API_KEY"));
/// # Ok::<(), LlmConfigError>(())
/// ```
pub struct LlmClient {
    kind: ApiKind,
    model: String,
    url: String,
    key: Option<Secret>,
    max_retries: u32,
    retry_base: Duration,
    retry_max: Duration,
    http: http::Http,
    /// OpenAI: the model wants `max_completion_tokens`.
    completion_tokens_field: AtomicBool,
}

impl std::fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmClient")
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("url", &self.url)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl LlmClient {
    /// Checks `config` and reads the key with `env` (`std::env::var` in the binary) now, so a
    /// missing key fails here, not at the first request. The key variable defaults to
    /// `ANTHROPIC_API_KEY`, and to `OPENAI_API_KEY` with OpenAI's own `base_url` only (local
    /// servers usually need none); `api_key_env = ""` sends no key.
    pub fn new(
        kind: ApiKind,
        config: &LlmConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<LlmClient, LlmConfigError> {
        let model = config
            .model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .ok_or(LlmConfigError::NoModel)?;
        let (default_url, default_key) = match kind {
            ApiKind::Anthropic => (
                anthropic::DEFAULT_BASE_URL,
                Some(anthropic::DEFAULT_KEY_ENV),
            ),
            ApiKind::OpenAi => (
                openai::DEFAULT_BASE_URL,
                config.base_url.is_none().then_some(openai::DEFAULT_KEY_ENV),
            ),
        };
        let raw_url = config.base_url.as_deref().unwrap_or(default_url);
        let (base, loopback) = check_base_url(raw_url)
            .ok_or_else(|| LlmConfigError::BadBaseUrl(raw_url.to_string()))?;
        let key_env = config.api_key_env.as_deref().or(default_key).map(str::trim);
        let key = match key_env {
            None | Some("") => None,
            Some(name) => match env(name) {
                Some(k) if !k.trim().is_empty() => Some(Secret(k.trim().to_string())),
                _ => return Err(LlmConfigError::KeyNotSet(name.to_string())),
            },
        };
        if config.max_output_tokens == 0 || config.timeout_secs == 0 {
            return Err(LlmConfigError::ZeroLimit);
        }
        let url = match kind {
            ApiKind::Anthropic => anthropic::endpoint(&base),
            ApiKind::OpenAi => openai::endpoint(&base),
        };
        Ok(LlmClient {
            kind,
            model: model.to_string(),
            url,
            key,
            max_retries: config.max_retries,
            retry_base: Duration::from_millis(config.retry_base_ms),
            retry_max: Duration::from_millis(config.retry_max_ms),
            http: http::Http::new(Duration::from_secs(config.timeout_secs), loopback),
            completion_tokens_field: AtomicBool::new(false),
        })
    }

    /// Which API.
    pub fn kind(&self) -> ApiKind {
        self.kind
    }

    /// The model name sent with every request.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The wait before retry `attempt + 1`: the server's `retry-after` when sent, otherwise
    /// exponential; never above `retry_max_ms`.
    fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self
            .retry_base
            .saturating_mul(2u32.saturating_pow(attempt.min(30)));
        retry_after.unwrap_or(exp).min(self.retry_max)
    }

    /// Removes the key from a message, should an API or a transport error echo it.
    fn redact(&self, msg: String) -> String {
        match &self.key {
            Some(Secret(k)) if k.len() >= 4 => msg.replace(k.as_str(), "[redacted]"),
            _ => msg,
        }
    }

    /// Sends `system` and one `user` message, the reply capped at `max_tokens`, and returns
    /// the reply's text (Anthropic's text blocks, or `choices[0].message.content`). Retried on
    /// 429/408/5xx and transport errors as the config allows.
    pub fn send(&self, system: &str, user: &str, max_tokens: usize) -> Result<String, LlmError> {
        self.post_with_retries(system, user, max_tokens)
            .map_err(|e| match e {
                LlmError::PromptTooLong(m) => LlmError::PromptTooLong(self.redact(m)),
                LlmError::Failed(m) => LlmError::Failed(self.redact(m)),
            })
    }

    fn post_with_retries(
        &self,
        system: &str,
        user: &str,
        max_tokens: usize,
    ) -> Result<String, LlmError> {
        let key = self.key.as_ref().map(|s| s.0.as_str());
        let headers = match self.kind {
            ApiKind::Anthropic => anthropic::headers(key),
            ApiKind::OpenAi => openai::headers(key),
        };
        let mut attempt = 0u32;
        let mut switched = false;
        loop {
            let body = match self.kind {
                ApiKind::Anthropic => anthropic::body(&self.model, system, user, max_tokens),
                ApiKind::OpenAi => openai::body(
                    &self.model,
                    system,
                    user,
                    max_tokens,
                    self.completion_tokens_field.load(Ordering::Relaxed),
                ),
            };
            let (message, retry_after) =
                match self.http.post_json(&self.url, &headers, &body.to_string()) {
                    Ok(r) if (200..300).contains(&r.status) => {
                        let parsed = match self.kind {
                            ApiKind::Anthropic => anthropic::parse_reply(&r.body),
                            ApiKind::OpenAi => openai::parse_reply(&r.body),
                        };
                        return parsed.map_err(LlmError::Failed);
                    }
                    Ok(r) if matches!(r.status, 408 | 429 | 500..=599) => (
                        format!("HTTP {}: {}", r.status, api_message(r.status, &r.body)),
                        r.retry_after,
                    ),
                    Ok(r) => {
                        let failure = match self.kind {
                            ApiKind::Anthropic => anthropic::classify(r.status, &r.body),
                            ApiKind::OpenAi => openai::classify(r.status, &r.body),
                        };
                        let status = r.status;
                        return Err(match failure {
                            Failure::PromptTooLong(m) => {
                                LlmError::PromptTooLong(format!("HTTP {status}: {m}"))
                            }
                            Failure::UseMaxCompletionTokens(_) if !switched => {
                                switched = true;
                                self.completion_tokens_field.store(true, Ordering::Relaxed);
                                continue;
                            }
                            Failure::UseMaxCompletionTokens(m) | Failure::Other(m) => {
                                LlmError::Failed(format!("HTTP {status}: {m}"))
                            }
                        });
                    }
                    Err(transport) => (transport, None),
                };
            if attempt >= self.max_retries {
                return Err(LlmError::Failed(format!(
                    "{message} (gave up after {} attempts)",
                    attempt + 1
                )));
            }
            std::thread::sleep(self.delay(attempt, retry_after));
            attempt += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_key() {
        let config = LlmConfig {
            model: Some("m".into()),
            ..LlmConfig::default()
        };
        let client = LlmClient::new(ApiKind::Anthropic, &config, &|_| {
            Some("sk-secret-key".into())
        });
        let text = format!("{client:?}");
        assert!(
            text.contains("[redacted]") && !text.contains("sk-secret-key"),
            "{text}"
        );
    }

    #[test]
    fn kinds_by_name() {
        for kind in [ApiKind::Anthropic, ApiKind::OpenAi] {
            assert_eq!(ApiKind::parse(kind.name()), Some(kind));
        }
        assert_eq!(ApiKind::parse("gemini"), None);
    }

    #[test]
    fn api_messages_are_one_line() {
        assert_eq!(
            api_message(401, r#"{"error":{"message":"invalid\nkey"}}"#),
            "invalid key"
        );
        assert_eq!(api_message(502, ""), "no message (HTTP 502)");
    }

    #[test]
    fn base_urls() {
        assert_eq!(
            check_base_url("http://127.0.0.1:8080/"),
            Some(("http://127.0.0.1:8080".into(), true))
        );
        assert_eq!(
            check_base_url("https://api.openai.com/v1"),
            Some(("https://api.openai.com/v1".into(), false))
        );
        assert_eq!(
            check_base_url("http://[::1]:11434/v1").map(|u| u.1),
            Some(true)
        );
        assert_eq!(check_base_url("ftp://x"), None);
        assert_eq!(check_base_url("https://"), None);
        assert_eq!(check_base_url("http://[]:80"), None);
        assert_eq!(check_base_url("localhost:11434"), None);
    }
}
