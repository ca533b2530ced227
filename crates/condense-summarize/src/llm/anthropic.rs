//! Anthropic Messages API: `POST {base_url}/v1/messages`.

use super::client::{api_message, Failure};
use serde_json::{json, Value};

pub(crate) const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub(crate) const DEFAULT_KEY_ENV: &str = "ANTHROPIC_API_KEY";
/// The `anthropic-version` header.
pub(crate) const API_VERSION: &str = "2023-06-01";

/// The endpoint for a base URL (`https://api.anthropic.com`, `.../v1` or the full URL).
pub(crate) fn endpoint(base: &str) -> String {
    if base.ends_with("/v1/messages") {
        base.to_string()
    } else if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

pub(crate) fn headers(key: Option<&str>) -> Vec<(&'static str, String)> {
    let mut h = vec![("anthropic-version", API_VERSION.to_string())];
    if let Some(k) = key {
        h.push(("x-api-key", k.to_string()));
    }
    h
}

/// The request: one user message, the system prompt, no tools.
pub(crate) fn body(model: &str, system: &str, user: &str, max_tokens: usize) -> Value {
    json!({
        "model": model,
        "max_tokens": max_tokens,
        "system": system,
        "messages": [{"role": "user", "content": user}],
    })
}

/// The reply's text blocks, joined.
pub(crate) fn parse_reply(body: &str) -> Result<String, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("unreadable reply: {e}"))?;
    let blocks = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or("the reply has no `content` array")?;
    Ok(blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// An error reply: prompt too long is a 400 `invalid_request_error` whose message contains
/// "prompt is too long" (`prompt is too long: 213462 tokens > 200000 maximum`).
pub(crate) fn classify(status: u16, body: &str) -> Failure {
    let message = api_message(status, body);
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let kind = v
        .pointer("/error/type")
        .and_then(Value::as_str)
        .unwrap_or("");
    // 413 `request_too_large` (over the byte limit) is helped by dropping turns too.
    let too_long = kind == "request_too_large"
        || ((status == 400 || status == 413)
            && message.to_lowercase().contains("prompt is too long"));
    if too_long {
        Failure::PromptTooLong(message)
    } else {
        Failure::Other(message)
    }
}
