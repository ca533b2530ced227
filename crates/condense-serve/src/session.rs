//! Which session a request belongs to: the `x-condense-session` header if sent; otherwise the
//! session id Claude Code puts in `metadata.user_id` (read by
//! `condense_formats::claude_code::session_from_user_id`); otherwise a stable hash of the system
//! prompt and the first user message (both stay fixed while a conversation grows).
//!
//! [`quick_session`] finds the same id before the body is read whole, so a request can take
//! its place in its session's line first (requests of one session are handled in the order
//! they arrived, however long each takes to read): it reads the body with its message list cut
//! after the first user message, through the same reader and the same derivation. Finding
//! where the list ends costs a byte scan of the messages the proxy has not seen before
//! ([`condense_formats::cut::ListCut`]): the prefix an earlier request sent is matched by its
//! hash, and the read of the whole body takes that match ([`Looked::matched`]). The cut body is
//! the same at every turn of a session (its system prompt and first messages), so the session
//! read from it is kept by its hash ([`LookMemo`]) and the next turn does not read it again.

use crate::compress;
use crate::Api;
use condense_formats::claude_code::session_from_user_id;
use condense_formats::cut::ListCut;
use condense_formats::frames::FrameMemo;
use condense_formats::known::{Lists, Matched};
use condense_model::recent::Recent;
use condense_model::{Conversation, Role};
use serde::{Deserialize, Serialize};
use twox_hash::XxHash3_64;

/// The header a client sets to name its session.
pub const SESSION_HEADER: &str = "x-condense-session";

/// The header Claude Code (2.1.86 on) names its session with, beside `metadata.user_id`.
pub const CLAUDE_CODE_SESSION_HEADER: &str = "x-claude-code-session-id";

/// The session a request's headers name: [`SESSION_HEADER`] as it is, else Claude Code's
/// [`CLAUDE_CODE_SESSION_HEADER`] as the session its `metadata.user_id` gives (`cc-<id>`), so
/// that a session is the same whichever the client sends.
pub fn header_session(headers: &http::HeaderMap) -> Option<String> {
    let value = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    value(SESSION_HEADER)
        .map(str::to_string)
        .or_else(|| value(CLAUDE_CODE_SESSION_HEADER).map(|id| format!("cc-{id}")))
}

/// The top-level fields the proxy reads itself (the rest of the body is skipped, not kept).
#[derive(Debug, Default, Deserialize)]
pub struct Head {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// The output limit, by its name in each API (Anthropic and older OpenAI Chat;
    /// OpenAI Chat; Responses): kept as sent, read by [`Head::max_output`].
    #[serde(default)]
    max_tokens: Option<serde_json::Value>,
    #[serde(default)]
    max_completion_tokens: Option<serde_json::Value>,
    #[serde(default)]
    max_output_tokens: Option<serde_json::Value>,
}

impl Head {
    /// The most the request lets the model write, when it says (a whole number).
    pub fn max_output(&self) -> Option<usize> {
        [
            &self.max_output_tokens,
            &self.max_completion_tokens,
            &self.max_tokens,
        ]
        .into_iter()
        .find_map(|v| v.as_ref()?.as_u64())
        .and_then(|n| usize::try_from(n).ok())
    }
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

/// The fields the proxy reads of a conversation read from a body. The top-level fields condense
/// does not map (`model`, `metadata`, `stream`) are the conversation's `extra`: read there, not
/// by parsing the body again. An empty extra, or one of another shape, reads as no head.
pub fn head_of(conv: &Conversation) -> Head {
    serde_json::from_str(conv.extra.as_str()).unwrap_or_default() // tidy: names nothing
}

/// The session of a conversation read from a body: the header's, Claude Code's, else the hash.
pub fn session_of(conv: &Conversation, head: &Head, header: Option<&str>) -> String {
    named_session(header, head).unwrap_or_else(|| hashed_session(conv))
}

/// What [`quick_session`] found.
#[derive(Debug, Default)]
pub struct Looked {
    /// The session, when the look found it.
    pub session: Option<String>,
    /// The known list the look matched the message list's prefix on, for the read of the same
    /// body to take (`compress::read_body`).
    pub matched: Option<Matched>,
}

/// The session [`session_of`] gives for `body`, found without reading the whole body: from the
/// header alone when it names one, else from the body read with its message list (`messages`,
/// or `input`) cut after the first user message ([`ListCut`]: the list is stepped over by a
/// byte scan, not parsed, and the prefix `known` knows from an earlier request is hashed, not
/// scanned; the tool definitions are left out). An Anthropic body whose `metadata.user_id`
/// names its session (Claude Code's) is not read further; another Anthropic body's system
/// prompt is taken from `frames` when it was read before ([`condense_formats::frames`]), and a
/// cut body a look read before gives the session `looks` kept of it. No session when the body
/// is not one JSON object or that cut body cannot be read (the caller then finds the session
/// after reading the whole body).
pub fn quick_session(
    body: &[u8],
    api: Api,
    header: Option<&str>,
    (known, frames, looks): (Option<Lists<'_>>, Option<&FrameMemo>, Option<&LookMemo>),
) -> Looked {
    if let Some(named) = named_session(header, &Head::default()) {
        return Looked {
            session: Some(named),
            matched: None,
        };
    }
    let Some(cut) = ListCut::of_knowing(body, api.format(), known) else {
        return Looked::default();
    };
    // Claude Code names its session in `metadata.user_id`: then nothing else is read (its
    // system prompt and tool definitions are tens of kilobytes).
    if let Some(named) = (api == Api::Anthropic)
        .then(|| head_of_members(&cut))
        .flatten()
        .and_then(|head| named_session(None, &head))
    {
        return Looked {
            session: Some(named),
            matched: cut.into_matched(),
        };
    }
    // Most first user messages are the first or second element; a longer lead of system or
    // assistant elements is read again with a longer cut. The tool definitions (often the
    // largest part left) name no session: they are left out of the cut.
    let mut keep = 2;
    let session = loop {
        let cut_body = cut.first_without(keep, &["tools"]);
        let memo = looks.map(|memo| (&memo.0, LookMemo::key(api, &cut_body)));
        if let Some(session) = memo.and_then(|(kept, key)| kept.get(&key)) {
            break Some(session);
        }
        let Ok(doc) = compress::read_framed(cut_body, api, frames) else {
            break None;
        };
        let Some(conv) = doc.conversations().first() else {
            break None;
        };
        let has_user = conv.messages.iter().any(|m| m.role == Role::User);
        if keep >= cut.len() || has_user {
            let session = session_of(conv, &head_of(conv), None);
            // Kept only when the cut holds a user message: the session is then the cut's
            // alone. (Without one, a longer list cut to the same bytes would read on.)
            if let (Some((kept, key)), true) = (memo, has_user) {
                kept.keep(key, session.clone());
            }
            break Some(session);
        }
        keep = keep.saturating_mul(8);
    };
    Looked {
        session,
        matched: cut.into_matched(),
    }
}

/// The sessions looks read from cut bodies ([`quick_session`]), by the xxh3-128 of the API
/// and the cut body's bytes: a session's turns send the same system prompt and first messages,
/// and the session is a function of those bytes. At most 64, the least recently used going
/// first (`condense_model::recent::Recent`).
#[derive(Debug)]
pub struct LookMemo(Recent<u128, String>);

/// How many cut bodies a [`LookMemo`] keeps: one per session a proxy serves at once, about.
const LOOKS: usize = 64;

impl Default for LookMemo {
    fn default() -> Self {
        LookMemo(Recent::new(LOOKS))
    }
}

impl LookMemo {
    fn key(api: Api, cut: &[u8]) -> u128 {
        let mut state = condense_model::fingerprint::Fingerprinter::new();
        std::hash::Hasher::write(&mut state, &[api as u8]);
        std::hash::Hasher::write(&mut state, cut);
        state.digest128()
    }

    /// How many cut bodies are kept.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The [`Head`] of an Anthropic body read from its top-level `model`, `stream` and `metadata`
/// alone: what [`head_of`] reads from the conversation's `extra`, where the reader leaves those
/// members as written (a value of the wrong type gives the default head there and here).
/// `None` when one of them is written twice.
fn head_of_members(cut: &ListCut<'_>) -> Option<Head> {
    let mut object = b"{".to_vec();
    for name in ["model", "stream", "metadata"] {
        match cut.member_values(name).as_slice() {
            [] => {}
            [value] => {
                if object.len() > 1 {
                    object.push(b',');
                }
                object.extend_from_slice(format!("\"{name}\":").as_bytes());
                object.extend_from_slice(value);
            }
            _ => return None,
        }
    }
    object.push(b'}');
    Some(serde_json::from_slice(&object).unwrap_or_default()) // tidy: as head_of reads it
}

/// A stable hash of the system prompt (top-level, or the system messages before the first
/// user message) and the first user message, that one without its prompt-cache marks
/// ([`condense_model::cache_marks::unmarked`]): a client that marks its newest message marks
/// the first one at the first turn only, and its session stays one.
pub fn hashed_session(conv: &Conversation) -> String {
    let mut basis = model_bytes(&conv.system);
    for m in &conv.messages {
        match m.role {
            Role::System => basis.extend(model_bytes(&m.content)),
            Role::User => {
                match condense_model::cache_marks::unmarked(m) {
                    Some(unmarked) => basis.extend(model_bytes(&unmarked.content)),
                    None => basis.extend(model_bytes(&m.content)),
                }
                break;
            }
            _ => {}
        }
    }
    format!("h{:016x}", XxHash3_64::oneshot(&basis))
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

    /// The proxy's own header first, as it is; else Claude Code's, as its body's session.
    #[test]
    fn a_session_named_by_header() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = http::HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, http::HeaderValue::from_static(v));
            }
            h
        };
        let cc = ("x-claude-code-session-id", "5f3e");
        assert_eq!(header_session(&headers(&[cc])).as_deref(), Some("cc-5f3e"));
        let both = [cc, ("x-condense-session", "mine")];
        assert_eq!(header_session(&headers(&both)).as_deref(), Some("mine"));
        let blank = [("x-claude-code-session-id", " ")];
        assert_eq!(header_session(&headers(&blank)), None);
    }

    /// The output limit by each API's name for it; a value that is not a whole number is
    /// none, and leaves the rest of the head as read.
    #[test]
    fn a_heads_output_limit_by_each_apis_name() {
        let limit = |json: &str| head(json).max_output();
        assert_eq!(limit(r#"{"max_tokens":64000}"#), Some(64_000));
        assert_eq!(limit(r#"{"max_completion_tokens":900}"#), Some(900));
        assert_eq!(limit(r#"{"max_output_tokens":128000}"#), Some(128_000));
        assert_eq!(limit(r#"{"model":"m"}"#), None);
        let odd = head(r#"{"model":"m","max_tokens":"many"}"#);
        assert_eq!((odd.max_output(), odd.model.as_deref()), (None, Some("m")));
    }

    fn head(json: &str) -> Head {
        serde_json::from_str(json).unwrap()
    }

    /// The session the whole body gives, as the proxy finds it after reading it.
    fn full_session(body: &str, api: Api) -> String {
        let doc = compress::read(body.as_bytes(), api).unwrap();
        let conv = &doc.conversations()[0];
        session_of(conv, &head_of(conv), None)
    }

    #[test]
    fn the_quick_look_finds_the_session_reading_the_whole_body_gives() {
        let long_tail: Vec<String> = (0..40)
            .map(|i| format!(r#"{{"role":"assistant","content":"answer {i}"}}"#))
            .collect();
        let tail = long_tail.join(",");
        let lead: Vec<String> = (0..20)
            .map(|i| format!(r#"{{"role":"system","content":"rule {i}"}}"#))
            .collect();
        let lead = lead.join(",");
        let cases = [
            (
                Api::Anthropic,
                format!(r#"{{"model":"claude-x","system":[{{"type":"text","text":"S"}}],"messages":[{{"role":"user","content":[{{"type":"text","text":"hi \u00e9"}}]}},{tail}],"tools":[{{"name":"t","input_schema":{{}}}}]}}"#),
            ),
            (
                Api::Anthropic,
                format!(r#"{{"metadata":{{"user_id":"user_a_account_b_session_77"}},"messages":[{tail}]}}"#),
            ),
            // No user message at all: the hash of the system prompt alone.
            (Api::Anthropic, format!(r#"{{"system":"S","messages":[{tail}]}}"#)),
            // Twenty system messages before the first user message: cut longer, twice.
            (
                Api::OpenAiChat,
                format!(r#"{{"model":"gpt-4o","messages":[{lead},{{"role":"function","name":"f","content":"x"}},{{"role":"user","content":"u"}},{tail}]}}"#),
            ),
            // Claude Code's metadata after the list and a large tool list: the session from
            // the metadata alone.
            (
                Api::Anthropic,
                format!(r#"{{"model":"claude-x","messages":[{{"role":"user","content":"go"}},{tail}],"system":"S2","tools":[{}],"metadata":{{"user_id":"user_a_account_b_session_88"}}}}"#,
                    vec![r#"{"name":"t","description":"a tool","input_schema":{}}"#; 50].join(",")),
            ),
            // A head of the wrong type reads as no head, whole or cut: the hash.
            (
                Api::Anthropic,
                r#"{"model":5,"metadata":{"user_id":"user_a_account_b_session_99"},"messages":[{"role":"user","content":"m5"}]}"#.to_string(),
            ),
            (Api::Responses, r#"{"model":"gpt-5","instructions":"I","input":"just this"}"#.to_string()),
            // An SDK agent's long system prompt, a string and blocks, over a frame memo's
            // threshold: read from the memo at the second look.
            (
                Api::Anthropic,
                format!(r#"{{"model":"claude-x","messages":[{{"role":"user","content":"go \"on\""}},{tail}],"system":"{}","tools":[{}]}}"#,
                "Follow the conventions.\\n".repeat(80),
                vec![r#"{"name":"t","description":"a tool","input_schema":{}}"#; 50].join(",")),
            ),
            (
                Api::Anthropic,
                format!(r#"{{"model":"claude-x","system":[{{"type":"text","text":"{}","cache_control":{{"type":"ephemeral"}}}}],"messages":[{{"role":"user","content":"go"}},{tail}]}}"#,
                "Be brief, \\u00e9. ".repeat(100)),
            ),
            (
                Api::Responses,
                r#"{"instructions":"I","input":[{"type":"reasoning","summary":[]},{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},{"type":"function_call","name":"f","arguments":"{}","call_id":"c"}]}"#.to_string(),
            ),
        ];
        let mut seen = std::collections::HashSet::new();
        let frames = FrameMemo::default();
        for (api, body) in &cases {
            let full = full_session(body, *api);
            assert_eq!(
                quick_session(body.as_bytes(), *api, None, (None, None, None)).session,
                Some(full.clone()),
                "{body}"
            );
            // With the proxy's frame memo: the first look keeps the frame, the second takes it.
            for _ in 0..2 {
                let with_memo = (None, Some(&frames), None);
                assert_eq!(
                    quick_session(body.as_bytes(), *api, None, with_memo).session,
                    Some(full.clone()),
                    "{body}"
                );
            }
            seen.insert(full);
        }
        assert_eq!(seen.len(), cases.len(), "the cases name different sessions");
        // The two long system prompts (the tools are left out of the look), each taken at
        // its second look.
        assert_eq!((frames.len(), frames.taken()), (2, 2));
        assert!(seen.contains("cc-77") && seen.contains("cc-88"));
        assert!(!seen.contains("cc-99"));
        assert_eq!(
            quick_session(
                b"not json",
                Api::Anthropic,
                Some(" s1 "),
                (None, None, None)
            )
            .session
            .as_deref(),
            Some("s1")
        );
        assert_eq!(
            quick_session(b"not json", Api::Anthropic, None, (None, None, None)).session,
            None
        );
        assert_eq!(
            quick_session(
                br#"{"messages":[]} x"#,
                Api::Anthropic,
                None,
                (None, None, None)
            )
            .session,
            None
        );
    }

    /// The look memo gives the session a look read from the same cut body, and never one
    /// read from a cut without a user message (a longer list cut to the same bytes reads on).
    #[test]
    fn the_look_memo_keeps_what_a_cut_with_a_user_message_names() {
        let looks = LookMemo::default();
        let with = |body: &str, api| {
            quick_session(body.as_bytes(), api, None, (None, None, Some(&looks))).session
        };
        let tail: Vec<String> = (0..30)
            .map(|i| format!(r#"{{"role":"assistant","content":"answer {i}"}}"#))
            .collect();
        let body = |turns: usize| {
            format!(
                r#"{{"model":"claude-x","system":"S","messages":[{{"role":"user","content":"go"}},{}]}}"#,
                tail[..turns].join(",")
            )
        };
        let first = full_session(&body(5), Api::Anthropic);
        assert_eq!(with(&body(5), Api::Anthropic), Some(first.clone()));
        assert_eq!(looks.len(), 1);
        // Later turns cut to the same bytes: the kept session, nothing read or kept again.
        assert_eq!(with(&body(30), Api::Anthropic), Some(first.clone()));
        assert_eq!(looks.len(), 1);
        // The same bytes under another API are another key.
        let chat = body(5);
        assert_eq!(
            with(&chat, Api::OpenAiChat),
            Some(full_session(&chat, Api::OpenAiChat))
        );
        assert_eq!(looks.len(), 2);
        // What the memo holds is what a look of those bytes gives (planted here to show the
        // look takes it).
        let ninth = body(9).replace("\"go\"", "\"went\"");
        let cut = ListCut::of(ninth.as_bytes(), "messages").unwrap();
        let key = LookMemo::key(Api::Anthropic, &cut.first_without(2, &["tools"]));
        looks.0.keep(key, "planted".into());
        assert_eq!(with(&ninth, Api::Anthropic).as_deref(), Some("planted"));
        // Two assistant messages and no user message: not kept, so a longer list whose first
        // two are those bytes reads on to its user message.
        let no_user = r#"{"system":"S","messages":[{"role":"assistant","content":"a"},{"role":"assistant","content":"b"}]}"#;
        let longer = r#"{"system":"S","messages":[{"role":"assistant","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"u"}]}"#;
        let kept = looks.len();
        assert_eq!(
            with(no_user, Api::Anthropic),
            Some(full_session(no_user, Api::Anthropic))
        );
        assert_eq!(looks.len(), kept);
        let expected = full_session(longer, Api::Anthropic);
        assert_ne!(expected, full_session(no_user, Api::Anthropic));
        assert_eq!(with(longer, Api::Anthropic), Some(expected));
    }

    /// A client that marks its newest message: at the first turn that is the first user
    /// message (a string sent as one marked text block), at the next it comes back unmarked,
    /// as a string or as the block. One session throughout, found quick or read whole; another
    /// first message is another session.
    #[test]
    fn a_first_message_marked_at_the_first_turn_only_stays_one_session() {
        let body = |first: &str, more: &str| {
            format!(
                r#"{{"model":"claude-x","system":"S","messages":[{{"role":"user","content":{first}}}{more}]}}"#
            )
        };
        let marked = r#"[{"type":"text","text":"fix it","cache_control":{"type":"ephemeral"}}]"#;
        let more = r#",{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"text","text":"go","cache_control":{"type":"ephemeral"}}]}"#;
        let turns = [
            body(marked, ""),
            body(r#""fix it""#, more),
            body(r#"[{"type":"text","text":"fix it"}]"#, more),
        ];
        let first = full_session(&turns[0], Api::Anthropic);
        for turn in &turns {
            assert_eq!(full_session(turn, Api::Anthropic), first, "{turn}");
            let quick = quick_session(turn.as_bytes(), Api::Anthropic, None, (None, None, None));
            assert_eq!(quick.session.as_deref(), Some(first.as_str()), "{turn}");
        }
        assert_ne!(
            full_session(&body(r#""fix that""#, more), Api::Anthropic),
            first
        );
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
