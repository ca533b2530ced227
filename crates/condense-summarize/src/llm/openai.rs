//! OpenAI-compatible Chat Completions: `POST {base_url}/chat/completions` (OpenAI, Ollama,
//! vLLM, llama.cpp's server, LM Studio, ...).

use super::client::{api_message, Failure};
use serde_json::{json, Value};

pub(crate) const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Used only with the default `base_url`: local servers usually need no key.
pub(crate) const DEFAULT_KEY_ENV: &str = "OPENAI_API_KEY";

/// The endpoint for a base URL (`https://api.openai.com/v1` or the full URL).
pub(crate) fn endpoint(base: &str) -> String {
    if base.ends_with("/chat/completions") {
        base.to_string()
    } else {
        format!("{base}/chat/completions")
    }
}

pub(crate) fn headers(key: Option<&str>) -> Vec<(&'static str, String)> {
    key.map(|k| vec![("authorization", format!("Bearer {k}"))])
        .unwrap_or_default()
}

/// The request: a system and a user message, no tools. Reasoning models reject `max_tokens`
/// and want `max_completion_tokens` (see [`Failure::UseMaxCompletionTokens`]).
pub(crate) fn body(
    model: &str,
    system: &str,
    user: &str,
    max_tokens: usize,
    completion_tokens_field: bool,
) -> Value {
    let field = if completion_tokens_field {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    let mut body = json!({
        "model": model,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ],
    });
    if let Some(obj) = body.as_object_mut() {
        obj.insert(field.to_string(), json!(max_tokens));
    }
    body
}

/// `choices[0].message.content` (a string, or an array of text parts).
pub(crate) fn parse_reply(body: &str) -> Result<String, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("unreadable reply: {e}"))?;
    let content = v
        .pointer("/choices/0/message/content")
        .ok_or("the reply has no choices[0].message.content")?;
    Ok(match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    })
}

/// An error reply. Prompt too long: OpenAI's `context_length_exceeded` code, llama.cpp's
/// `exceed_context_size_error` type, or a message about the context length (vLLM, Ollama).
pub(crate) fn classify(status: u16, body: &str) -> Failure {
    let message = api_message(status, body);
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let field = |k: &str| {
        v.pointer(&format!("/error/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let lower = message.to_lowercase();
    if status == 400
        && (field("param") == "max_tokens" || lower.contains("max_completion_tokens"))
        && !lower.contains("context")
    {
        return Failure::UseMaxCompletionTokens(message);
    }
    let too_long = field("code") == "context_length_exceeded"
        || field("type") == "exceed_context_size_error"
        || status == 413
        || (status == 400
            && [
                "maximum context length",
                "context length",
                "context window",
                "prompt is too long",
            ]
            .iter()
            .any(|p| lower.contains(p)));
    if too_long {
        Failure::PromptTooLong(message)
    } else {
        Failure::Other(message)
    }
}
