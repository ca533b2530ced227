//! Where the stage looks: tool inputs (JSON kept valid and otherwise byte-identical), thinking,
//! tool results, the system prompt, event lines.

use crate::samples::pem;
use crate::support::{rand, ALNUM, BASE64};
use condense_model::{Block, Content, Conversation, Message, RawJson, Role, ThinkingBlock};
use condense_testing::{run, stage, tool_result, MemoryHost};
use redact_secrets::RedactSecrets;

fn ghp(seed: u64) -> String {
    format!("ghp_{}", rand(seed, 36, ALNUM))
}

fn input_after(stage_toml: &str, input: &str) -> String {
    let conv = Conversation {
        messages: vec![Message::new(
            "a",
            Role::Assistant,
            // Any text, valid JSON or not (OpenAI arguments can be anything).
            vec![Block::tool_use(
                "t1",
                "Bash",
                RawJson::from_string_unchecked(input.to_string()),
            )],
        )],
        ..Conversation::default()
    };
    let out = run(
        &stage::<RedactSecrets>(stage_toml),
        &conv,
        &MemoryHost::default(),
    );
    match &out.conversation.messages[0].content.blocks[0] {
        Block::ToolUse(t) => t.input.as_str().to_string(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_token_in_a_command_is_replaced_inside_the_json_string() {
    let token = ghp(1);
    let input =
        format!(r#"{{"command":"git push https://{token}@github.com/o/r.git","timeout":60000}}"#);
    let out = input_after("", &input);
    assert_eq!(
        out,
        r#"{"command":"git push https://[REDACTED:github-token]@github.com/o/r.git","timeout":60000}"#
    );
}

#[test]
fn only_the_changed_string_is_reencoded_everything_else_is_byte_identical() {
    let secret = rand(2, 40, BASE64);
    // Pretty-printed, an escaped non-ASCII char in an untouched string, an exponent number,
    // escaped newlines and quotes around the secret.
    let input = format!(
        "{{\n  \"description\": \"caf\\u00e9 \\ud83d\\ude00\",\n  \"ratio\": 1.50e3,\n  \
         \"content\": \"[default]\\naws_secret_access_key = {secret}\\nnote=\\\"x\\\"\\n\"\n}}"
    );
    let out = input_after("", &input);
    assert_eq!(
        out,
        "{\n  \"description\": \"caf\\u00e9 \\ud83d\\ude00\",\n  \"ratio\": 1.50e3,\n  \
         \"content\": \"[default]\\naws_secret_access_key = [REDACTED:aws-secret-key]\\nnote=\\\"x\\\"\\n\"\n}"
    );
    serde_json::from_str::<serde_json::Value>(&out).unwrap();
}

#[test]
fn a_value_under_a_labelling_key_is_recognised() {
    let secret = rand(3, 40, BASE64);
    let akid = format!("AKIA{}", rand(4, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"));
    let input = format!(
        r#"{{"aws_access_key_id": "{akid}", "aws_secret_access_key": "{secret}", "region": "eu-west-1"}}"#
    );
    let out = input_after("", &input);
    assert_eq!(
        out,
        r#"{"aws_access_key_id": "[REDACTED:aws-akid]", "aws_secret_access_key": "[REDACTED:aws-secret-key]", "region": "eu-west-1"}"#
    );
}

#[test]
fn a_private_key_written_by_a_tool_keeps_the_json_valid() {
    let key = pem("OPENSSH PRIVATE KEY", 5, "\n");
    let input =
        serde_json::json!({"file_path": "/home/u/.ssh/id_ed25519", "content": format!("{key}\n")})
            .to_string();
    let out = input_after("", &input);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["content"], "[REDACTED:private-key]\n");
    assert_eq!(v["file_path"], "/home/u/.ssh/id_ed25519");
}

#[test]
fn a_secret_in_an_object_key_is_replaced_too() {
    let token = ghp(6);
    let out = input_after("", &format!(r#"{{"{token}": true}}"#));
    assert_eq!(out, r#"{"[REDACTED:github-token]": true}"#);
}

#[test]
fn input_that_is_not_json_is_redacted_as_text() {
    let token = ghp(7);
    // OpenAI arguments cut off mid-string.
    let out = input_after("", &format!(r#"{{"command": "echo {token}"#));
    assert_eq!(out, r#"{"command": "echo [REDACTED:github-token]"#);
}

fn thinking(text: &str) -> Block {
    Block::Thinking(ThinkingBlock {
        thinking: text.into(),
        extra: RawJson::from_string_unchecked(r#"{"signature":"c2ln"}"#.into()),
    })
}

fn rich_conversation(token: &str) -> Conversation {
    Conversation {
        system: Some(Content::string(format!(
            "Use the token {token} for GitHub."
        ))),
        messages: vec![
            Message::new(
                "a",
                Role::Assistant,
                vec![thinking(&format!("The user gave {token}."))],
            ),
            Message::new(
                "u",
                Role::User,
                vec![tool_result(
                    "t",
                    Content::blocks(vec![
                        Block::text("stdout"),
                        tool_result("nested", Content::string(format!("GH={token}")), None),
                    ]),
                    None,
                )],
            ),
            Message::new(
                "e",
                Role::Event,
                vec![Block::text(format!("event {token}"))],
            ),
        ],
        ..Conversation::default()
    }
}

#[test]
fn system_prompt_thinking_nested_results_and_events_are_redacted() {
    let token = ghp(8);
    let conv = rich_conversation(&token);
    let out = run(&stage::<RedactSecrets>(""), &conv, &MemoryHost::default());
    let json = serde_json::to_string(&out.conversation).unwrap();
    assert!(!json.contains(&token), "{json}");
    assert_eq!(json.matches("[REDACTED:github-token]").count(), 4);
    // The thinking signature is kept as it was.
    assert!(json.contains("c2ln"));
    let ids: Vec<&str> = out
        .report
        .events
        .iter()
        .map(|e| e.message_id.as_str())
        .collect();
    assert_eq!(ids, vec!["(system prompt)", "a", "u", "e"]);
    assert_eq!(out.report.blocks_changed, 4);
    assert_eq!(
        out.conversation.system.as_ref().unwrap().shape,
        condense_model::ContentShape::String
    );
}

#[test]
fn thinking_can_be_left_alone() {
    let token = ghp(9);
    let conv = rich_conversation(&token);
    let out = run(
        &stage::<RedactSecrets>("thinking = false"),
        &conv,
        &MemoryHost::default(),
    );
    assert_eq!(out.conversation.messages[0], conv.messages[0]);
    assert_eq!(out.report.blocks_changed, 3);
}
