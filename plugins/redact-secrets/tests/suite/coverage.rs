//! The blocks beyond text and tools: image references, opaque blocks (documents), and what is
//! left alone on purpose (binary payloads, tool definitions, tool_use ids).

use crate::support::{rand, ALNUM, BASE64};
use condense_model::{
    Block, Content, Conversation, Image, ImageSource, Message, Opaque, RawJson, Role, ToolDef,
};
use condense_testing::{run, stage, tool_result, tool_use, MemoryHost};
use redact_secrets::RedactSecrets;
use serde_json::json;

fn ghp(seed: u64) -> String {
    format!("ghp_{}", rand(seed, 36, ALNUM))
}

fn raw(text: String) -> RawJson {
    RawJson::from_string_unchecked(text)
}

fn conv(blocks: Vec<Block>) -> Conversation {
    Conversation {
        messages: vec![Message::new("u", Role::User, blocks)],
        ..Conversation::default()
    }
}

#[test]
fn a_token_in_an_image_url_is_redacted_but_data_urls_are_left_alone() {
    let token = ghp(11);
    let data = format!("data:image/png;base64,{}", rand(12, 400, BASE64));
    let image = |url: &str| {
        Block::Image(Image {
            source: ImageSource::Reference {
                json: raw(format!(r#"{{"type":"url","url":"{url}"}}"#)),
            },
            extra: RawJson::default(),
        })
    };
    let input = conv(vec![
        image(&format!("https://example.com/a.png?access_token={token}")),
        image(&data),
    ]);
    let out = run(&stage::<RedactSecrets>(""), &input, &MemoryHost::default());
    let refs: Vec<String> = out.conversation.messages[0]
        .content
        .blocks
        .iter()
        .map(|b| match b {
            Block::Image(Image {
                source: ImageSource::Reference { json },
                ..
            }) => json.as_str().to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        refs[0],
        r#"{"type":"url","url":"https://example.com/a.png?access_token=[REDACTED:github-token]"}"#
    );
    assert!(refs[1].contains(&data), "the data URL is untouched");
}

#[test]
fn a_document_block_with_a_text_source_is_redacted() {
    let token = ghp(13);
    let pdf = rand(14, 2000, BASE64);
    let doc = |source: String| {
        Block::Opaque(Opaque {
            json: raw(format!(r#"{{"type":"document","source":{source}}}"#)),
        })
    };
    let input = conv(vec![
        doc(format!(
            r#"{{"type":"text","media_type":"text/plain","data":"deploy with {token}"}}"#
        )),
        doc(format!(
            r#"{{"type":"base64","media_type":"application/pdf","data":"{pdf}"}}"#
        )),
    ]);
    let out = run(&stage::<RedactSecrets>(""), &input, &MemoryHost::default());
    let blocks = &out.conversation.messages[0].content.blocks;
    let Block::Opaque(text_doc) = &blocks[0] else {
        panic!("{blocks:?}")
    };
    assert!(
        text_doc
            .json
            .as_str()
            .contains(r#""data":"deploy with [REDACTED:github-token]""#),
        "{}",
        text_doc.json.as_str()
    );
    assert_eq!(
        blocks[1], input.messages[0].content.blocks[1],
        "a PDF is left alone"
    );
}

#[test]
fn tool_definitions_and_tool_use_ids_are_not_touched() {
    let token = ghp(15);
    let mut input = conv(vec![tool_use("call_1", "Bash", json!({"command":"ls"}))]);
    input.messages.push(Message::new(
        "r",
        Role::User,
        vec![tool_result("call_1", Content::string("ok"), None)],
    ));
    input.tools = vec![ToolDef {
        name: "Bash".into(),
        raw: raw(format!(
            r#"{{"name":"Bash","description":"example: curl -H 'Authorization: token {token}'"}}"#
        )),
    }];
    let out = run(&stage::<RedactSecrets>(""), &input, &MemoryHost::default());
    assert_eq!(
        out.conversation.tools, input.tools,
        "tool definitions stay as they were"
    );
}
