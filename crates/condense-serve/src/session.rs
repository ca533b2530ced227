//! Which session a request belongs to: the `x-condense-session` header if sent; otherwise the
//! session id Claude Code puts in `metadata.user_id`; otherwise a stable hash of the system
//! prompt and the first user message (both stay fixed while a conversation grows).

use condense_model::{Conversation, Role};
use serde::Deserialize;
use xxhash_rust::xxh3::xxh3_64;

/// The header a client sets to name its session.
pub const SESSION_HEADER: &str = "x-condense-session";

/// The top-level fields the proxy reads itself (the rest of the body is skipped, not kept).
#[derive(Debug, Default, Deserialize)]
pub struct Head {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Metadata {
    #[serde(default)]
    pub user_id: Option<serde_json::Value>,
}

/// The session from the header or Claude Code's `metadata.user_id`, when either names one.
pub fn named_session(header: Option<&str>, head: &Head) -> Option<String> {
    if let Some(h) = header.map(str::trim).filter(|h| !h.is_empty()) {
        return Some(h.to_string());
    }
    let user_id = head.metadata.as_ref()?.user_id.as_ref()?;
    claude_code_session(user_id).map(|s| format!("cc-{s}"))
}

/// Claude Code's `user_id`: `user_<hash>_account_<uuid>_session_<uuid>`, or in newer
/// versions a JSON object (or its text) with `session_id`.
fn claude_code_session(user_id: &serde_json::Value) -> Option<String> {
    let from_object = |v: &serde_json::Value| {
        v.get("session_id")
            .and_then(|s| s.as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    match user_id {
        serde_json::Value::String(s) => {
            if let Some((_, id)) = s.rsplit_once("_session_") {
                return (!id.is_empty()).then(|| id.to_string());
            }
            serde_json::from_str::<serde_json::Value>(s)
                .ok()
                .as_ref()
                .and_then(from_object)
        }
        v => from_object(v),
    }
}

/// A stable hash of the system prompt (top-level, or the system messages before the first
/// user message) and the first user message.
pub fn hashed_session(conv: &Conversation) -> String {
    let mut basis = serde_json::to_vec(&conv.system).unwrap_or_default();
    for m in &conv.messages {
        match m.role {
            Role::System => basis.extend(serde_json::to_vec(&m.content).unwrap_or_default()),
            Role::User => {
                basis.extend(serde_json::to_vec(&m.content).unwrap_or_default());
                break;
            }
            _ => {}
        }
    }
    format!("h{:016x}", xxh3_64(&basis))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(json: &str) -> Head {
        serde_json::from_str(json).unwrap_or_default()
    }

    #[test]
    fn header_then_claude_code_then_none() {
        let cc = head(r#"{"metadata":{"user_id":"user_ab12_account_11-22_session_5f3e-9a"}}"#);
        assert_eq!(named_session(Some(" mine "), &cc).as_deref(), Some("mine"));
        assert_eq!(named_session(None, &cc).as_deref(), Some("cc-5f3e-9a"));
        let json =
            head(r#"{"metadata":{"user_id":"{\"device_id\":\"d\",\"session_id\":\"77\"}"}}"#);
        assert_eq!(named_session(None, &json).as_deref(), Some("cc-77"));
        assert_eq!(named_session(Some(""), &head(r#"{"model":"x"}"#)), None);
        assert_eq!(
            named_session(None, &head(r#"{"metadata":{"user_id":"alice"}}"#)),
            None
        );
    }
}
