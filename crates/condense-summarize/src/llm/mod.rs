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
//! has no `tools` field. When the API answers that the prompt is too long, the oldest API turns
//! (`condense_turns::group`, the turns the stages see: one model call with the results that
//! answer it, opened by its user prompt) are dropped from the head of the span and the request
//! is sent again, at most 3 times. Errors are one line: the HTTP
//! status and the API's own message. The key is never part of an error, a log or a summary.
//!
//! The HTTP side (endpoints, key, retries, reply text) is [`LlmClient`], public so that
//! `condense eval`'s judge sends its requests through the same client.

mod anthropic;
mod client;
mod http;
mod openai;
mod prompt;

pub use client::{ApiKind, LlmClient, LlmConfigError, LlmError};
pub use prompt::NO_TOOLS_PREAMBLE;

use crate::text::fit_tokens;
use crate::{SummarizeError, Summarizer, SummaryRequest};
use condense_model::Message;
use condense_tokens::TokenCounter;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

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

/// An LLM summarizer (either API): the prompt, the head-drop on "prompt too long" and the
/// budget; the requests go through its [`LlmClient`].
pub struct LlmSummarizer {
    client: LlmClient,
    max_output_tokens: usize,
    counter: Arc<TokenCounter>,
}

impl std::fmt::Debug for LlmSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmSummarizer")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl LlmSummarizer {
    pub(crate) fn new(
        kind: ApiKind,
        config: &LlmConfig,
        counter: Arc<TokenCounter>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, SummarizeError> {
        let client = LlmClient::new(kind, config, env)
            .map_err(|e| SummarizeError::Config(format!("kind = \"{}\": {e}", kind.name())))?;
        Ok(LlmSummarizer {
            client,
            max_output_tokens: config.max_output_tokens,
            counter,
        })
    }

    fn label(&self) -> String {
        format!("{} API", self.client.kind().name())
    }

    /// Tokens the reply may use for a summary of `budget` tokens.
    fn output_tokens(&self, budget: usize) -> usize {
        self.max_output_tokens
            .min(budget.saturating_mul(2).max(1024))
            .max(1)
    }
}

/// Where the API turns of `messages` after the first start ([`condense_turns::group`]: one
/// model call and what answers it, opened by the user prompt it answers; a turn never separates
/// a tool call from its result): where a "prompt too long" retry may cut the head off.
fn turn_starts(messages: &[Message]) -> Vec<usize> {
    condense_turns::group(messages)
        .turns
        .iter()
        .map(|t| t.start)
        .filter(|&start| start > 0)
        .collect()
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

/// The new start of the span after "prompt too long" at `start`: whole API turns dropped from
/// the head until their tokens cover the overflow (plus 10%) or, when the API does not say, a
/// fifth of what is left; single messages when only one turn is left. `None` when nothing
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
    let turns = turn_starts(rest);
    let cuts: Vec<usize> = if turns.is_empty() {
        (1..rest.len()).collect()
    } else {
        turns
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
        self.client.kind().name()
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
            match self.client.send(&system, &user, max_out) {
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
                Err(LlmError::Failed(m)) => {
                    return Err(SummarizeError::Failed(format!("{label}: {m}")))
                }
                Err(LlmError::PromptTooLong(m)) => {
                    let n = request.messages.len();
                    let next = (retries < MAX_PROMPT_TOO_LONG_RETRIES)
                        .then(|| next_start(request.messages, &costs, start, overflow(&m)))
                        .flatten();
                    match next {
                        Some(s) => start = s,
                        None => {
                            return Err(SummarizeError::Failed(format!(
                                "{label}: prompt too long even after dropping {start} of {n} messages from the head ({retries} retries): {m}"
                            )))
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
    use condense_model::{Block, Role};

    fn user(text: &str) -> Message {
        Message::new("u", Role::User, vec![Block::text(text)])
    }

    fn assistant(text: &str) -> Message {
        Message::new("a", Role::Assistant, vec![Block::text(text)])
    }

    #[test]
    fn cuts_fall_where_api_turns_start() {
        let msgs = vec![
            assistant("x"),
            user("a"),
            assistant("b"),
            user("c"),
            assistant("d"),
        ];
        assert_eq!(turn_starts(&msgs), vec![1, 3]);
        // The next model call of an autonomous stretch opens a turn; its result stays with
        // its call.
        let call = Message::new(
            "a1",
            Role::Assistant,
            vec![Block::tool_use("c1", "Bash", Default::default())],
        );
        let result = Message::new(
            "r1",
            Role::User,
            vec![Block::tool_result(
                "c1",
                condense_model::Content::string("ok"),
            )],
        );
        let stretch = vec![user("a"), call, result, assistant("done")];
        assert_eq!(turn_starts(&stretch), vec![3]);
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
}
