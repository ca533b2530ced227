//! Which session a request belongs to: the `x-condense-session` header if sent; otherwise the
//! session id Claude Code puts in `metadata.user_id` (read by
//! `condense_formats::claude_code::session_from_user_id`); otherwise a stable hash of the system
//! prompt and the first user message (both stay fixed while a conversation grows).

use condense_formats::claude_code::session_from_user_id;
use condense_model::{Conversation, Role};
use serde::{Deserialize, Serialize};
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
    session_from_user_id(user_id).map(|s| format!("cc-{s}"))
}

/// A stable hash of the system prompt (top-level, or the system messages before the first
/// user message) and the first user message.
pub fn hashed_session(conv: &Conversation) -> String {
    let mut basis = model_bytes(&conv.system);
    for m in &conv.messages {
        match m.role {
            Role::System => basis.extend(model_bytes(&m.content)),
            Role::User => {
                basis.extend(model_bytes(&m.content));
                break;
            }
            _ => {}
        }
    }
    format!("h{:016x}", xxh3_64(&basis))
}

/// The JSON bytes of a part of the model, hashed into a session id. The model's serialization
/// cannot fail (derived impls, string keys, `RawJson` is text), and the ids of existing
/// sessions are hashes of exactly these bytes.
fn model_bytes(part: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(part).unwrap_or_default() // tidy: the model always serializes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(json: &str) -> Head {
        serde_json::from_str(json).unwrap()
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
