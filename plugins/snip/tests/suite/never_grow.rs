//! A replacement is only made when it is shorter than what it replaces.

use crate::support::png;
use condense_model::{Block, Content, Conversation, Message, Role};
use condense_testing::{run, stage, tool_result, tool_use, MemoryHost};
use serde_json::json;
use snip::Snip;

fn conversation(results: Vec<Block>) -> Conversation {
    let calls = results
        .iter()
        .filter_map(|b| match b {
            Block::ToolResult(r) => Some(tool_use(&r.tool_use_id, "Bash", json!({}))),
            _ => None,
        })
        .collect();
    Conversation {
        messages: vec![
            Message::new("a0", Role::Assistant, calls),
            Message::new("u0", Role::User, results),
            // A later tool-calling turn, so the results above are not protected.
            Message::new(
                "a1",
                Role::Assistant,
                vec![tool_use("z", "Bash", json!({}))],
            ),
            Message::new(
                "u1",
                Role::User,
                vec![tool_result("z", Content::string("done"), None)],
            ),
        ],
        ..Conversation::default()
    }
}

#[test]
fn short_duplicates_shorter_than_their_marker_stay() {
    let conv = conversation(vec![
        tool_result("x1", Content::string("ok"), None),
        tool_result("x2", Content::string("ok"), None),
    ]);
    let host = MemoryHost::default();
    let out = run(&stage::<Snip>("min_duplicate_chars = 1"), &conv, &host);
    assert_eq!(out.conversation, conv);
    assert_eq!(out.report.blocks_changed, 0);
    assert_eq!(
        out.report.notes,
        [
            "0 duplicate tool results, 0 truncated, 0 images; 0 tokens freed",
            "left 1 block as it was: the replacement would not be shorter"
        ]
    );
    assert_eq!(host.puts.get(), 0);
}

#[test]
fn a_result_just_over_the_limit_stays_whole() {
    // 120 bytes over a 100-byte limit: the notice alone is longer than the 20 bytes cut.
    let conv = conversation(vec![tool_result(
        "x1",
        Content::string("y".repeat(120)),
        None,
    )]);
    let host = MemoryHost::default();
    let out = run(&stage::<Snip>("max_tool_result_bytes = 100"), &conv, &host);
    assert_eq!(out.conversation, conv);
    assert_eq!(host.puts.get(), 0, "nothing stored for a result left whole");
    // Far enough over, it is cut.
    let conv = conversation(vec![tool_result(
        "x1",
        Content::string("y".repeat(400)),
        None,
    )]);
    let out = run(&stage::<Snip>("max_tool_result_bytes = 100"), &conv, &host);
    assert_eq!(out.report.blocks_changed, 1);
}

#[test]
fn a_tiny_image_stays() {
    // 33 bytes of PNG header: 44 base64 chars, less than the marker.
    let conv = Conversation {
        messages: vec![
            Message::new("u0", Role::User, vec![png(1, 1, 0)]),
            Message::new("a0", Role::Assistant, vec![Block::text("I see a pixel.")]),
        ],
        ..Conversation::default()
    };
    let host = MemoryHost::default();
    let out = run(&stage::<Snip>(""), &conv, &host);
    assert_eq!(out.conversation, conv);
    assert_eq!(host.puts.get(), 0);
    // A bigger image of only 1x1 pixel costs 1 token as an image: the ~25-token marker
    // would cost more, so it stays too.
    let mut conv = conv;
    conv.messages[0].content.blocks[0] = png(1, 1, 5_000);
    let out = run(&stage::<Snip>(""), &conv, &host);
    assert_eq!(out.conversation, conv);
}

#[test]
fn image_references_are_left_alone() {
    let image = Block::Image(condense_model::Image {
        source: condense_model::ImageSource::Reference {
            json: condense_model::RawJson::from_string_unchecked(
                r#"{"type":"url","url":"https://example.com/a.png"}"#.into(),
            ),
        },
        extra: Default::default(),
    });
    let conv = Conversation {
        messages: vec![
            Message::new("u0", Role::User, vec![image]),
            Message::new("a0", Role::Assistant, vec![Block::text("ok")]),
        ],
        ..Conversation::default()
    };
    let out = run(&stage::<Snip>(""), &conv, &MemoryHost::default());
    assert_eq!(out.conversation, conv);
}

#[test]
fn the_fixture_never_grows_under_any_config() {
    for config in [
        "",
        "keep = \"last\"",
        "keep_tail_bytes = 3000",
        "min_duplicate_chars = 1\nmax_tool_result_bytes = 1",
        "protect_recent_turns = 0\nkeep_tail_bytes = 100000",
    ] {
        let input = crate::fixture::conversation();
        let out = run(&stage::<Snip>(config), &input, &MemoryHost::default());
        crate::support::assert_never_grows(&input, &out.conversation);
    }
}

#[test]
fn a_duplicate_that_costs_fewer_tokens_than_the_marker_stays_whole() {
    // 300 newlines: longer than the marker in bytes, but only a few tokens (with a
    // tokenizer-like counter where runs of whitespace are cheap).
    let blank = "\n".repeat(300);
    let mut conv = condense_model::Conversation::default();
    for id in ["a", "b"] {
        conv.messages.push(condense_model::Message::new(
            format!("call-{id}"),
            condense_model::Role::Assistant,
            vec![tool_use(
                id,
                "Read",
                serde_json::json!({"file_path": "blank.txt"}),
            )],
        ));
        conv.messages.push(condense_model::Message::new(
            format!("result-{id}"),
            condense_model::Role::User,
            vec![tool_result(
                id,
                condense_model::Content::string(blank.clone()),
                None,
            )],
        ));
    }
    let host = MemoryHost::default().with_counter(|t: &str| t.split_whitespace().count() + 1);
    let out = run(&stage::<Snip>(""), &conv, &host);
    assert_eq!(
        out.conversation, conv,
        "the marker would cost more tokens than the blank result"
    );
}
