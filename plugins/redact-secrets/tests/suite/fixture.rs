//! A session that leaks a dozen secrets, snapshotted; the report and output hold none of them;
//! reruns change nothing; nothing grows.

use crate::samples::{pem, samples};
use crate::support::{rand, text_tokens, ALNUM, BASE64};
use condense_model::{render, Block, Content, Conversation, Message, Role};
use condense_testing::{changed_messages, run, stage, tool_result, tool_use, MemoryHost};
use redact_secrets::RedactSecrets;
use serde_json::json;

/// The fixture and every secret planted in it.
pub fn conversation() -> (Conversation, Vec<String>) {
    let anthropic = format!("sk-ant-api03-{}AA", rand(1, 93, crate::support::BASE64URL));
    let openai = format!(
        "sk-proj-{}T3BlbkFJ{}",
        rand(2, 40, ALNUM),
        rand(3, 40, ALNUM)
    );
    let stripe = format!("sk_live_51{}", rand(4, 40, ALNUM));
    let db_password = format!("{}{}", rand(5, 24, ALNUM), "#x");
    let ghp = format!("ghp_{}", rand(6, 36, ALNUM));
    let akid = format!(
        "ASIA{}",
        rand(7, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    );
    let aws_secret = rand(8, 40, BASE64);
    let session = format!("IQoJb3JpZ2luX2Vj{}==", rand(14, 300, BASE64));
    let google = format!("AIzaSy{}", rand(13, 33, crate::support::BASE64URL));
    let key = pem("RSA PRIVATE KEY", 9, "\n");
    let jwt = samples()
        .into_iter()
        .find(|s| s.kind == "jwt")
        .unwrap()
        .secret;
    let slack = format!(
        "xoxb-{}-{}-{}",
        rand(10, 12, "0123456789"),
        rand(11, 13, "0123456789"),
        rand(12, 24, ALNUM)
    );

    let env = format!(
        "ANTHROPIC_API_KEY={anthropic}\nOPENAI_API_KEY={openai}\nSTRIPE_SECRET_KEY={stripe}\n\
         DATABASE_URL=postgres://shop:{db_password}@db.internal:5432/shop\nSHORT_URL=redis://:pw@cache\n\
         DEBUG=true\n"
    );
    let sts = serde_json::to_string_pretty(&json!({
        "Credentials": {
            "AccessKeyId": akid,
            "SecretAccessKey": aws_secret,
            "SessionToken": session,
            "Expiration": "2025-06-01T12:00:00Z"
        }
    }))
    .unwrap();
    let git_log = "commit 3f786850e387550fdab836ed7e6dc881de23001b\n\
                   Author: Dev <dev@example.com>\n\n    fix task-sk-list ordering (550e8400-e29b-41d4-a716-446655440000)\n";
    let messages = vec![
        Message::new(
            "m0",
            Role::User,
            vec![Block::text(format!(
                "The deploy fails. My token is {ghp}, the bot uses {slack}. Please check .env"
            ))],
        ),
        Message::new(
            "m1",
            Role::Assistant,
            vec![
                Block::Thinking(condense_model::ThinkingBlock {
                    thinking: format!("I should not echo {ghp} back."),
                    extra: Default::default(),
                }),
                tool_use("t1", "Bash", json!({"command":"cat .env"})),
            ],
        ),
        Message::new(
            "m2",
            Role::User,
            vec![tool_result("t1", Content::string(env), None)],
        ),
        Message::new(
            "m3",
            Role::Assistant,
            vec![
                tool_use("t2", "Read", json!({"file_path":"/home/dev/.ssh/id_rsa"})),
                tool_use(
                    "t3",
                    "Bash",
                    json!({"command": format!("curl -H 'Authorization: Bearer {jwt}' https://api.internal/v1/me && aws sts assume-role --role-arn arn:aws:iam::123456789012:role/deploy")}),
                ),
            ],
        ),
        Message::new(
            "m4",
            Role::User,
            vec![
                tool_result("t2", Content::string(format!("{key}\n")), None),
                tool_result(
                    "t3",
                    Content::blocks(vec![Block::text("{\"id\": 7}"), Block::text(sts)]),
                    None,
                ),
            ],
        ),
        Message::new(
            "m5",
            Role::Assistant,
            vec![tool_use("t4", "Bash", json!({"command":"git log -1"}))],
        ),
        Message::new(
            "m6",
            Role::User,
            vec![tool_result("t4", Content::string(git_log), None)],
        ),
        Message::new(
            "m7",
            Role::Assistant,
            vec![Block::text(
                "The DATABASE_URL host is wrong; rotate the keys you pasted.",
            )],
        ),
    ];
    let conv = Conversation {
        system: Some(Content::string(format!(
            "You are a deploy assistant. Internal key: {google}"
        ))),
        messages,
        ..Conversation::default()
    };
    let secrets = vec![
        anthropic,
        openai,
        stripe,
        db_password,
        ghp,
        akid,
        aws_secret,
        key,
        jwt,
        slack,
        google,
    ];
    (conv, secrets)
}

#[test]
fn fixture_rendering_and_report() {
    let (conv, _) = conversation();
    let out = run(&stage::<RedactSecrets>(""), &conv, &MemoryHost::default());
    insta::assert_snapshot!("fixture_output", render::render(&out.conversation));
    insta::assert_json_snapshot!("fixture_report", out.report);
}

/// Every text of the conversation (tool inputs as their raw JSON), joined.
fn all_text(conv: &Conversation) -> String {
    fn content(c: &Content, out: &mut String) {
        for b in &c.blocks {
            match b {
                Block::Text(t) => out.push_str(&t.text),
                Block::Thinking(t) => out.push_str(&t.thinking),
                Block::ToolUse(t) => out.push_str(t.input.as_str()),
                Block::ToolResult(r) => content(&r.content, out),
                Block::Image(_) | Block::Opaque(_) => {}
            }
            out.push('\n');
        }
    }
    let mut out = String::new();
    if let Some(system) = &conv.system {
        content(system, &mut out);
    }
    for m in &conv.messages {
        content(&m.content, &mut out);
    }
    out
}

#[test]
fn no_original_appears_in_the_report_or_the_output() {
    let (conv, secrets) = conversation();
    let out = run(&stage::<RedactSecrets>(""), &conv, &MemoryHost::default());
    let report = serde_json::to_string(&out.report).unwrap();
    let output = serde_json::to_string(&out.conversation).unwrap();
    for secret in &secrets {
        assert!(all_text(&conv).contains(secret.as_str()), "not planted");
        // Any 8-char piece of a secret would already be a leak.
        let chars: Vec<char> = secret.chars().collect();
        for piece in chars.windows(8).step_by(4) {
            let piece: String = piece.iter().collect();
            if piece.contains('\n') || piece.starts_with("-----") {
                continue;
            }
            assert!(!report.contains(&piece), "report leaks {piece:?}");
            assert!(!output.contains(&piece), "output leaks {piece:?}");
        }
    }
    assert!(!out.report.archive_removed);
    assert_eq!(
        out.report
            .events
            .iter()
            .map(|e| e.kind.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        1
    );
}

#[test]
fn rerunning_on_the_output_changes_nothing() {
    let (conv, _) = conversation();
    let stage = stage::<RedactSecrets>("");
    let once = run(&stage, &conv, &MemoryHost::default());
    // A secret in the system prompt hands the whole conversation back; without one there,
    // only the messages with a secret cross back, redacted the same.
    assert!(once.copied && once.replaced.is_empty());
    let bare = Conversation {
        system: None,
        ..conv.clone()
    };
    let messages_only = run(&stage, &bare, &MemoryHost::default());
    assert!(!messages_only.copied && !messages_only.replaced.is_empty());
    assert_eq!(
        messages_only.replaced,
        changed_messages(&bare, &messages_only.conversation)
    );
    assert_eq!(
        messages_only.conversation.messages,
        once.conversation.messages
    );
    let twice = run(&stage, &once.conversation, &MemoryHost::default());
    assert_eq!(twice.conversation, once.conversation);
    assert!(!twice.changed);
    assert!(twice.report.events.is_empty());
    assert_eq!(twice.report.blocks_changed, 0);
    assert_eq!(twice.report.tokens_freed, None);
    // And on the input again: the same output (deterministic).
    assert_eq!(
        run(&stage, &conv, &MemoryHost::default()).conversation,
        once.conversation
    );
}

#[test]
fn never_grows_not_even_for_short_secrets() {
    let (conv, _) = conversation();
    let out = run(&stage::<RedactSecrets>(""), &conv, &MemoryHost::default());
    assert!(text_tokens(&out.conversation) < text_tokens(&conv));
    for s in samples() {
        let conv = crate::support::text_conv(&s.text);
        let out = run(&stage::<RedactSecrets>(""), &conv, &MemoryHost::default());
        assert!(
            text_tokens(&out.conversation) <= text_tokens(&conv),
            "{}",
            s.kind
        );
        assert!(out.conversation.messages[0].content.text().len() <= s.text.len());
    }
    // One-byte password: one `*`.
    let out = run(
        &stage::<RedactSecrets>(""),
        &crate::support::text_conv("ftp://u:x@h"),
        &MemoryHost::default(),
    );
    assert_eq!(out.conversation.messages[0].content.text(), "ftp://u:*@h");
}
