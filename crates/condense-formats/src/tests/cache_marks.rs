//! A message read with its prompt-cache marks fingerprints, unmarked
//! ([`condense_model::cache_marks`]), as the same message read without them: what lets a
//! resume point match a turn whose client moved its marks. Every way a body is read: through
//! a JSON tree, quick (a long list, keys in the API's order or in Claude Code's), and an
//! OpenAI Chat body's content parts.

use crate::{read, ReadOptions};
use condense_model::cache_marks::{self, unmarked_fingerprint, ORDER_HINT};
use condense_model::fingerprint::fingerprint;
use condense_model::Message;

const MARK: &str = r#","cache_control":{"type":"ephemeral"}"#;

/// Four messages, each with `mark` where a client puts its mark (`mark` empty: none), last in
/// its block as clients add it (Python's `block["cache_control"] = ...`, JavaScript's
/// `{...block, cache_control}`), in the key orders the Anthropic API's clients send.
fn anthropic_messages(i: usize, mark: &str) -> Vec<String> {
    vec![
        format!(r#"{{"role":"user","content":[{{"type":"text","text":"step {i}"{mark}}}]}}"#),
        format!(
            r#"{{"role":"assistant","content":[{{"type":"text","text":"ok"}},{{"type":"tool_use","id":"t{i}","name":"Read","input":{{"path":"/a/{i}"}}{mark}}}]}}"#
        ),
        // Claude Code's order: the result's id first, its mark last.
        format!(
            r#"{{"role":"user","content":[{{"tool_use_id":"t{i}","type":"tool_result","content":"out {i}"{mark}}}]}}"#
        ),
        format!(
            r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t{i}","content":[{{"type":"text","text":"inner {i}"{mark}}}],"is_error":true}}]}}"#
        ),
    ]
}

fn messages_of(body: &str) -> Vec<Message> {
    let doc = read(body.as_bytes(), "body.json", &ReadOptions::default()).unwrap();
    doc.conversations()[0].messages.clone()
}

/// Reads each body both ways and checks message by message: the marked one's unmarked
/// fingerprint is the unmarked one's, and a message without marks has none.
fn check(marked: &str, unmarked: &str) -> usize {
    let (marked, unmarked) = (messages_of(marked), messages_of(unmarked));
    assert_eq!(marked.len(), unmarked.len());
    let mut with_marks = 0;
    for (m, u) in marked.iter().zip(&unmarked) {
        assert_eq!(unmarked_fingerprint(u), None, "{u:?}");
        if m == u {
            assert_eq!(unmarked_fingerprint(m), None);
        } else {
            // What `u` compares as: a content of one plain text block as a string.
            let u_compared =
                cache_marks::unmarked(u).map_or_else(|| fingerprint(u), |u| fingerprint(&u));
            assert_eq!(unmarked_fingerprint(m), Some(u_compared), "{m:?}\n{u:?}");
            with_marks += 1;
        }
    }
    with_marks
}

#[test]
fn a_marked_message_read_fingerprints_unmarked_as_read_without_marks() {
    let body = |n: usize, mark: &str| {
        let messages: Vec<String> = (0..n).flat_map(|i| anthropic_messages(i, mark)).collect();
        format!(
            r#"{{"model":"m","max_tokens":5,"messages":[{}]}}"#,
            messages.join(",")
        )
    };
    // A short body (read through a tree) and a long one (read quick, on every core).
    for n in [1, 200] {
        let (marked, unmarked) = (body(n, MARK), body(n, ""));
        assert_eq!(check(&marked, &unmarked), 4 * n, "{n} exchanges");
        if n > 1 {
            let listed = |b: &str| super::quick::quick_messages(b);
            assert_eq!(
                (listed(&marked), listed(&unmarked)),
                (Some(4 * n), Some(4 * n))
            );
        }
    }

    // OpenAI Chat content parts, as some routers take marks.
    let chat = |mark: &str| {
        format!(
            r#"{{"model":"gpt-4o","messages":[{{"role":"system","content":"be brief"}},{{"role":"user","content":[{{"type":"text","text":"hello"{mark}}}]}}]}}"#
        )
    };
    assert_eq!(check(&chat(MARK), &chat("")), 1);

    // mini-swe-agent's way: its newest user and tool messages' string contents sent as one
    // marked text block (a tool message marked itself), the others as the strings they are.
    let mini = |marked: bool| {
        let (user, tool) = if marked {
            (
                r#"[{"type":"text","text":"fix it","cache_control":{"type":"ephemeral"}}]"#,
                r#"[{"type":"text","text":"ok"}],"cache_control":{"type":"ephemeral"}"#,
            )
        } else {
            (r#""fix it""#, r#""ok""#)
        };
        format!(
            r#"{{"model":"m","messages":[{{"role":"system","content":"be brief"}},{{"role":"user","content":{user}}},{{"role":"assistant","content":null,"tool_calls":[{{"id":"c1","type":"function","function":{{"name":"bash","arguments":"{{}}"}}}}]}},{{"role":"tool","tool_call_id":"c1","content":{tool}}}]}}"#
        )
    };
    assert_eq!(check(&mini(true), &mini(false)), 2);
}

/// The name the formats' readers give their order hint is the one the model leaves a mark's
/// name out of.
#[test]
fn the_order_hint_is_the_models() {
    assert_eq!(
        format!("{}{}", crate::json::HINT_PREFIX, crate::json::HINT_ORDER),
        ORDER_HINT
    );
}
