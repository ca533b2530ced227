//! LLM summarizers over HTTP: `kind = "anthropic"` (Messages API) and `kind = "openai"`
//! (Chat Completions: OpenAI, and Ollama, vLLM, llama.cpp's server, LM Studio via `base_url`).
//!
//! Config keys ([`LlmConfig`]):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `model` | (required) | the model name the API expects |
//! | `base_url` | `https://api.anthropic.com` / `https://api.openai.com/v1` | the API root (`/v1/messages` or `/chat/completions` is appended unless already there) |
//! | `api_key_env` | `ANTHROPIC_API_KEY`; `OPENAI_API_KEY` with the default `base_url`, none otherwise | the *name* of the environment variable holding the key, read at build time; `""` sends no key |
//! | `max_output_tokens` | 20,000 | cap on the reply (scratchpad + summary) |
//! | `timeout_secs` | 120 | per HTTP request |
//! | `max_retries` | 3 | retries on 429, 408 and 5xx (and transport errors) |
//! | `retry_base_ms` | 1,000 | backoff: `retry_base_ms × 2^n` before retry `n+1` |
//! | `retry_max_ms` | 60,000 | cap on any wait, including a server's `retry-after` |
//!
//! The reply may use `min(max_output_tokens, max(2 × request.max_tokens, 1024))` tokens: the
//! summary's budget twice over leaves room for the `<analysis>` scratchpad, which is stripped.
//! The summary itself is asked to stay under `request.max_tokens` and cut to it if it does not.
//!
//! The request holds a system prompt (the [`NO_TOOLS_PREAMBLE`], then instructions asking for
//! an `<analysis>` scratchpad and a nine-section `<summary>`) and one user message with the
//! span as a transcript (roles, text, tool calls with their inputs, tool results; long ones
//! keep head and tail), preceded by the previous summary to merge into when there is one. It
//! has no `tools` field. When the API answers that the prompt is too long, the oldest API-turn
//! groups (a user text message and everything up to the next one) are dropped from the head of
//! the span and the request is sent again, at most 3 times. Errors are one line: the HTTP
//! status and the API's own message. The key is never part of an error, a log or a summary.

mod anthropic;
mod http;
mod openai;
mod prompt;

pub use prompt::NO_TOOLS_PREAMBLE;

use crate::text::{cut_chars, fit_tokens, one_line};
use crate::{SummarizeError, Summarizer, SummaryRequest};
use condense_model::{Block, Message, Role};
use condense_tokens::TokenCounter;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How many times the request is resent with fewer turns after "prompt too long".
pub const MAX_PROMPT_TOO_LONG_RETRIES: usize = 3;

/// The `[summarizer]` keys of the LLM kinds (see the [module docs](self) for defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    #[serde(default = "defaults::max_output_tokens")]
    pub max_output_tokens: usize,
    #[serde(default = "defaults::timeout_secs")]
    pub timeout_secs: u64,
    #[serde(default = "defaults::max_retries")]
    pub max_retries: u32,
    #[serde(default = "defaults::retry_base_ms")]
    pub retry_base_ms: u64,
    #[serde(default = "defaults::retry_max_ms")]
    pub retry_max_ms: u64,
}

mod defaults {
    pub fn max_output_tokens() -> usize {
        20_000
    }
    pub fn timeout_secs() -> u64 {
        120
    }
    pub fn max_retries() -> u32 {
        3
    }
    pub fn retry_base_ms() -> u64 {
        1_000
    }
    pub fn retry_max_ms() -> u64 {
        60_000
    }
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            model: None,
            base_url: None,
            api_key_env: None,
            max_output_tokens: defaults::max_output_tokens(),
            timeout_secs: defaults::timeout_secs(),
            max_retries: defaults::max_retries(),
            retry_base_ms: defaults::retry_base_ms(),
            retry_max_ms: defaults::retry_max_ms(),
        }
    }
}

/// Which API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiKind {
    Anthropic,
    OpenAi,
}

impl ApiKind {
    fn kind(self) -> &'static str {
        match self {
            ApiKind::Anthropic => "anthropic",
            ApiKind::OpenAi => "openai",
        }
    }
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

/// An API key; shows as `[redacted]`.
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

enum SendError {
    PromptTooLong(String),
    Fatal(String),
}

/// An LLM summarizer (either API).
pub struct LlmSummarizer {
    kind: ApiKind,
    model: String,
    url: String,
    key: Option<Secret>,
    max_output_tokens: usize,
    max_retries: u32,
    retry_base: Duration,
    retry_max: Duration,
    http: http::Http,
    counter: Arc<TokenCounter>,
    /// OpenAI: the model wants `max_completion_tokens`.
    completion_tokens_field: AtomicBool,
}

impl std::fmt::Debug for LlmSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmSummarizer")
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("url", &self.url)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

fn config_error(kind: ApiKind, msg: String) -> SummarizeError {
    SummarizeError::Config(format!("kind = \"{}\": {msg}", kind.kind()))
}

/// `base_url` checked and without a trailing slash; whether its host is a loopback address.
fn check_base_url(url: &str) -> Option<(String, bool)> {
    let url = url.trim().trim_end_matches('/');
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = if host.starts_with('[') {
        host.split(']')
            .next()
            .map(|h| format!("{h}]"))
            .unwrap_or_default()
    } else {
        host.split(':').next().unwrap_or("").to_string()
    };
    if host.is_empty() || url.chars().any(char::is_whitespace) || url.contains(['?', '#']) {
        return None;
    }
    let loopback = host == "localhost" || host == "[::1]" || host.starts_with("127.");
    Some((url.to_string(), loopback))
}

impl LlmSummarizer {
    pub(crate) fn new(
        kind: ApiKind,
        config: &LlmConfig,
        counter: Arc<TokenCounter>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, SummarizeError> {
        let model = config
            .model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                config_error(
                    kind,
                    "`model` is required (the model name the API expects)".into(),
                )
            })?;
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
        let (base, loopback) = check_base_url(raw_url).ok_or_else(|| {
            config_error(
                kind,
                format!("base_url {raw_url:?} is not an http:// or https:// URL with a host"),
            )
        })?;
        let key_env = config.api_key_env.as_deref().or(default_key).map(str::trim);
        let key = match key_env {
            None | Some("") => None,
            Some(name) => match env(name) {
                Some(k) if !k.trim().is_empty() => Some(Secret(k.trim().to_string())),
                _ => {
                    return Err(config_error(
                        kind,
                        format!("environment variable {name} (api_key_env) is not set; it must hold the API key"),
                    ))
                }
            },
        };
        if config.max_output_tokens == 0 || config.timeout_secs == 0 {
            return Err(config_error(
                kind,
                "max_output_tokens and timeout_secs must be at least 1".into(),
            ));
        }
        let url = match kind {
            ApiKind::Anthropic => anthropic::endpoint(&base),
            ApiKind::OpenAi => openai::endpoint(&base),
        };
        Ok(LlmSummarizer {
            kind,
            model: model.to_string(),
            url,
            key,
            max_output_tokens: config.max_output_tokens,
            max_retries: config.max_retries,
            retry_base: Duration::from_millis(config.retry_base_ms),
            retry_max: Duration::from_millis(config.retry_max_ms),
            http: http::Http::new(Duration::from_secs(config.timeout_secs), loopback),
            counter,
            completion_tokens_field: AtomicBool::new(false),
        })
    }

    fn label(&self) -> String {
        format!("{} API", self.kind.kind())
    }

    /// Tokens the reply may use for a summary of `budget` tokens.
    fn output_tokens(&self, budget: usize) -> usize {
        self.max_output_tokens
            .min(budget.saturating_mul(2).max(1024))
            .max(1)
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

    /// One request, retried on 429/408/5xx and transport errors.
    fn send(&self, system: &str, user: &str, max_tokens: usize) -> Result<String, SendError> {
        let label = self.label();
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
                        return parsed.map_err(|e| SendError::Fatal(format!("{label}: {e}")));
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
                                SendError::PromptTooLong(format!("HTTP {status}: {m}"))
                            }
                            Failure::UseMaxCompletionTokens(_) if !switched => {
                                switched = true;
                                self.completion_tokens_field.store(true, Ordering::Relaxed);
                                continue;
                            }
                            Failure::UseMaxCompletionTokens(m) | Failure::Other(m) => {
                                SendError::Fatal(format!("{label}: HTTP {status}: {m}"))
                            }
                        });
                    }
                    Err(transport) => (transport, None),
                };
            if attempt >= self.max_retries {
                return Err(SendError::Fatal(format!(
                    "{label}: {message} (gave up after {} attempts)",
                    attempt + 1
                )));
            }
            std::thread::sleep(self.delay(attempt, retry_after));
            attempt += 1;
        }
    }
}

/// Where each API-turn group of `messages` starts: at 0 and at every user message with text
/// (a user message holding only tool results continues the turn).
fn group_starts(messages: &[Message]) -> Vec<usize> {
    let mut starts = vec![0];
    for (i, m) in messages.iter().enumerate().skip(1) {
        let text = m
            .content
            .blocks
            .iter()
            .any(|b| matches!(b, Block::Text(t) if !t.text.trim().is_empty()));
        if m.role == Role::User && text {
            starts.push(i);
        }
    }
    starts
}

/// How many tokens the API says the prompt is over (`213462 tokens > 200000 maximum`; OpenAI's
/// "maximum context length is 128000 tokens. However, your messages resulted in 130000").
fn overflow(message: &str) -> Option<usize> {
    let numbers: Vec<usize> = message
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .filter(|n| *n >= 1000)
        .take(2)
        .collect();
    match numbers.as_slice() {
        [a, b] if a != b => Some(a.abs_diff(*b)),
        _ => None,
    }
}

/// The new start of the span after "prompt too long" at `start`: whole groups dropped from the
/// head until their tokens cover the overflow (plus 10%) or, when the API does not say, a
/// fifth of what is left; single messages when only one group is left. `None` when nothing
/// more can go.
fn next_start(
    messages: &[Message],
    costs: &[usize],
    start: usize,
    over: Option<usize>,
) -> Option<usize> {
    let rest = &messages[start..];
    let total: usize = costs[start..].iter().sum();
    let target = over.map_or((total / 5).max(1), |g| g + g / 10 + 1);
    let groups = group_starts(rest);
    let cuts: Vec<usize> = if groups.len() >= 2 {
        groups[1..].to_vec()
    } else {
        (1..rest.len()).collect()
    };
    let mut end = None;
    for cut in cuts {
        end = Some(start + cut);
        if costs[start..start + cut].iter().sum::<usize>() >= target {
            break;
        }
    }
    end
}

impl Summarizer for LlmSummarizer {
    fn name(&self) -> &str {
        self.kind.kind()
    }

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        let label = self.label();
        let rendered: Vec<String> = request
            .messages
            .iter()
            .map(prompt::render_message)
            .collect();
        let costs: Vec<usize> = rendered
            .iter()
            .map(|r| self.counter.count_text(r))
            .collect();
        let system = prompt::system_prompt(request.purpose);
        let max_out = self.output_tokens(request.max_tokens);
        let mut start = 0;
        let mut retries = 0;
        loop {
            let user = prompt::user_message(
                &rendered[start..],
                start,
                request.previous_summary,
                request.max_tokens,
            );
            match self.send(&system, &user, max_out) {
                Ok(reply) => {
                    let summary = prompt::extract_summary(&reply);
                    if summary.is_empty() {
                        return Err(SummarizeError::Failed(format!(
                            "{label}: the reply held no summary text"
                        )));
                    }
                    return Ok(fit_tokens(
                        &self.counter,
                        &summary,
                        request.max_tokens,
                        "\n[summary cut to its token budget]",
                    ));
                }
                Err(SendError::Fatal(m)) => return Err(SummarizeError::Failed(self.redact(m))),
                Err(SendError::PromptTooLong(m)) => {
                    let n = request.messages.len();
                    let next = (retries < MAX_PROMPT_TOO_LONG_RETRIES)
                        .then(|| next_start(request.messages, &costs, start, overflow(&m)))
                        .flatten();
                    match next {
                        Some(s) => start = s,
                        None => {
                            return Err(SummarizeError::Failed(self.redact(format!(
                                "{label}: prompt too long even after dropping {start} of {n} messages from the head ({retries} retries): {m}"
                            ))))
                        }
                    }
                    retries += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Message {
        Message::new("u", Role::User, vec![Block::text(text)])
    }

    fn assistant(text: &str) -> Message {
        Message::new("a", Role::Assistant, vec![Block::text(text)])
    }

    #[test]
    fn groups_start_at_user_text() {
        let msgs = vec![
            assistant("x"),
            user("a"),
            assistant("b"),
            user("c"),
            assistant("d"),
        ];
        assert_eq!(group_starts(&msgs), vec![0, 1, 3]);
    }

    #[test]
    fn drops_whole_groups_until_the_overflow_is_covered() {
        let msgs = vec![
            user("a"),
            assistant("b"),
            user("c"),
            assistant("d"),
            user("e"),
        ];
        let costs = vec![100, 100, 100, 100, 100];
        assert_eq!(next_start(&msgs, &costs, 0, Some(250)), Some(4));
        assert_eq!(next_start(&msgs, &costs, 0, None), Some(2));
        assert_eq!(next_start(&msgs, &costs, 4, None), None);
        // One group left: single messages go, the last stays.
        let one = vec![user("a"), assistant("b"), assistant("c")];
        assert_eq!(next_start(&one, &[10, 10, 10], 0, Some(5)), Some(1));
    }

    #[test]
    fn overflow_from_messages() {
        assert_eq!(
            overflow("prompt is too long: 213462 tokens > 200000 maximum"),
            Some(13462)
        );
        assert_eq!(
            overflow("This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."),
            Some(2000)
        );
        assert_eq!(overflow("too long"), None);
    }

    #[test]
    fn debug_hides_the_key() {
        let config = LlmConfig {
            model: Some("m".into()),
            ..LlmConfig::default()
        };
        let s = LlmSummarizer::new(ApiKind::Anthropic, &config, Arc::default(), &|_| {
            Some("sk-secret-key".into())
        });
        let text = format!("{s:?}");
        assert!(
            text.contains("[redacted]") && !text.contains("sk-secret-key"),
            "{text}"
        );
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
        assert_eq!(check_base_url("localhost:11434"), None);
    }
}
