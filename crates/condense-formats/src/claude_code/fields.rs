//! What other crates need to know of Claude Code's lines and requests, without reading a
//! file: the flags of a line ([`line_flags`], [`is_sidechain_work`]), the template of a line a
//! stage writes in a session ([`line_template`], reached through
//! [`envelope_template`](crate::envelope_template)) and the session a request names
//! ([`session_from_user_id`]).
//!
//! ```
//! use condense_formats::claude_code::{line_flags, session_from_user_id};
//! use condense_model::RawJson;
//!
//! let line = RawJson::from_string_unchecked(r#"{"type":"user","isMeta":true}"#.into());
//! assert!(line_flags(&line).meta && !line_flags(&line).sidechain);
//! let user_id = serde_json::json!("user_ab12_account_11-22_session_5f3e-9a");
//! assert_eq!(session_from_user_id(&user_id).as_deref(), Some("5f3e-9a"));
//! ```

use condense_model::{Message, RawJson, Role};
use serde::Deserialize;
use serde_json::Value;

/// The flags of a Claude Code line that say it is not the user's own turn of the main thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineFlags {
    /// `isMeta: true`: a line Claude Code wrote for the model (an expanded slash-command
    /// prompt, a caveat), not typed by the user.
    pub meta: bool,
    /// `isSidechain: true`: a sub-agent's (`Task`) own conversation.
    pub sidechain: bool,
}

/// The [`LineFlags`] of a message's envelope (its Claude Code line); both false for other
/// formats, and for a line that is not a JSON object.
pub fn line_flags(envelope: &RawJson) -> LineFlags {
    /// The two flags only: the rest of the line (for an event, its whole message) is skipped
    /// by the parser, not built into a map.
    #[derive(Deserialize)]
    struct Flags {
        #[serde(rename = "isMeta")]
        meta: Option<Value>,
        #[serde(rename = "isSidechain")]
        sidechain: Option<Value>,
    }
    let env = envelope.as_str();
    // Most lines have neither: a substring test is far cheaper than parsing the line.
    if !env.contains("isMeta") && !env.contains("isSidechain") {
        return LineFlags::default();
    }
    let Ok(flags) = serde_json::from_str::<Flags>(env) else {
        return LineFlags::default();
    };
    let flag = |v: Option<Value>| v.and_then(|v| v.as_bool()).unwrap_or(false);
    LineFlags {
        meta: flag(flags.meta),
        sidechain: flag(flags.sidechain),
    }
}

/// Whether `message` is a sub-agent's work carried beside the context: a [`Role::Event`] with
/// content whose envelope says `isSidechain: true` (how the Claude Code reader keeps a `Task`
/// agent's lines, which the model never sees). Its tool calls and results are the session's:
/// the files it wrote are on disk, its errors happened.
pub fn is_sidechain_work(message: &Message) -> bool {
    message.role == Role::Event
        && !message.content.blocks.is_empty()
        && line_flags(&message.envelope).sidechain
}

/// Line fields that describe one Claude Code line rather than the session.
const LINE_ONLY_KEYS: &[&str] = &[
    "toolUseResult",
    "isMeta",
    "isCompactSummary",
    "isVisibleInTranscriptOnly",
    "isApiErrorMessage",
    "requestId",
];

/// The wrapper line of `message` as the template of a user message a stage writes in its
/// place: the session's fields (`sessionId`, `cwd`, `version`, `gitBranch`, ...) without those
/// describing that one line (`toolUseResult`, `isMeta`, ...), and `type` `user`. The host finds
/// a session by the `sessionId` of its first lines, so a summary written without it would lose
/// the session's state and archive. Empty for an event line and a message without a wrapper.
///
/// `new` is the message being written: its id and timestamp go where the line has them, as the
/// writer will put them, so the message reads back exactly as the stage wrote it (the host's
/// expansion archive finds messages by their content, envelope included).
pub fn line_template(message: &Message, new: &Message) -> RawJson {
    if !message.is_chat() {
        return RawJson::default();
    }
    let Ok(mut map) = message.envelope.to_map() else {
        return RawJson::default();
    };
    if map.is_empty() {
        return RawJson::default();
    }
    for key in LINE_ONLY_KEYS {
        map.shift_remove(*key);
    }
    if map.contains_key("type") {
        map.insert("type".into(), "user".into());
    }
    if let Some(Value::String(uuid)) = map.get_mut("uuid") {
        uuid.clone_from(&new.id);
    }
    match &new.timestamp {
        Some(ts) => {
            if let Some(Value::String(t)) = map.get_mut("timestamp") {
                t.clone_from(ts);
            } else if !map.contains_key("timestamp") {
                map.insert("timestamp".into(), ts.clone().into());
            }
        }
        None => {
            if matches!(map.get("timestamp"), Some(Value::String(_))) {
                map.shift_remove("timestamp");
            }
        }
    }
    RawJson::from_map(map)
}

/// The session a request body's `metadata.user_id` names, as Claude Code sends it:
/// `user_<hash>_account_<uuid>_session_<uuid>`, or in newer versions a JSON object (or its
/// text) with `session_id`. `None` when it names none.
pub fn session_from_user_id(user_id: &Value) -> Option<String> {
    let from_object = |v: &Value| {
        v.get("session_id")
            .and_then(|s| s.as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    match user_id {
        Value::String(s) => {
            if let Some((_, id)) = s.rsplit_once("_session_") {
                return (!id.is_empty()).then(|| id.to_string());
            }
            serde_json::from_str::<Value>(s)
                .ok()
                .as_ref()
                .and_then(from_object)
        }
        v => from_object(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::Block;
    use serde_json::json;

    fn text(id: &str, role: Role) -> Message {
        Message::new(id, role, vec![Block::text(id)])
    }

    fn with_envelope(mut m: Message, envelope: &str) -> Message {
        m.envelope = RawJson::from_string_unchecked(envelope.into());
        m
    }

    #[test]
    fn templates_keep_the_session_fields() {
        let m = with_envelope(
            text("x", Role::User),
            r#"{"parentUuid":"p","sessionId":"s1","type":"user","message":null,"uuid":"x","isMeta":true,"toolUseResult":{"a":1}}"#,
        );
        let new = Message {
            timestamp: Some("2025-01-01T00:00:00Z".into()),
            ..text("summary-1", Role::User)
        };
        assert_eq!(
            line_template(&m, &new).as_str(),
            r#"{"parentUuid":"p","sessionId":"s1","type":"user","message":null,"uuid":"summary-1","timestamp":"2025-01-01T00:00:00Z"}"#
        );
        // A line's timestamp goes when the new message has none; an event gives no template.
        let dated = with_envelope(
            text("y", Role::Assistant),
            r#"{"timestamp":"t","uuid":"y"}"#,
        );
        assert_eq!(
            line_template(&dated, &text("n", Role::User)).as_str(),
            r#"{"uuid":"n"}"#
        );
        let event = with_envelope(text("e", Role::Event), r#"{"type":"summary"}"#);
        assert!(line_template(&event, &new).is_empty());
        assert!(line_template(&text("z", Role::User), &new).is_empty());
    }

    #[test]
    fn flags_are_read_only_when_true() {
        let flags = |env: &str| line_flags(&RawJson::from_string_unchecked(env.into()));
        assert_eq!(flags(r#"{"type":"user"}"#), LineFlags::default());
        assert_eq!(
            flags(r#"{"isMeta":true,"isSidechain":false}"#),
            LineFlags {
                meta: true,
                sidechain: false
            }
        );
        assert!(flags(r#"{"isSidechain":true}"#).sidechain);
        assert!(!flags(r#"{"isSidechain":"yes"}"#).sidechain);
        assert_eq!(flags("not json isMeta"), LineFlags::default());
        let side = r#"{"isSidechain":true}"#;
        assert!(is_sidechain_work(&with_envelope(
            text("e", Role::Event),
            side
        )));
        // Context messages and event lines without content are not a sub-agent's work.
        assert!(!is_sidechain_work(&with_envelope(
            text("u", Role::User),
            side
        )));
        let empty = with_envelope(Message::new("e", Role::Event, vec![]), side);
        assert!(!is_sidechain_work(&empty));
    }

    #[test]
    fn sessions_from_both_user_id_forms() {
        let id = |v: Value| session_from_user_id(&v);
        assert_eq!(
            id(json!("user_ab12_account_11-22_session_5f3e-9a")).as_deref(),
            Some("5f3e-9a")
        );
        assert_eq!(
            id(json!(r#"{"device_id":"d","session_id":"77"}"#)).as_deref(),
            Some("77")
        );
        assert_eq!(id(json!({"session_id": "88"})).as_deref(), Some("88"));
        assert_eq!(id(json!("user_x_session_")), None);
        assert_eq!(id(json!("alice")), None);
        assert_eq!(id(json!({"session_id": ""})), None);
    }
}
