//! The stage on a hand-made session covering each case, snapshotted.

use crate::support::{masked_ids, tokens};
use condense_model::{render, Block, Content, Conversation, Message, RawJson, Role, TextBlock};
use condense_testing::{image, lines, run, stage, tool_result, tool_use, MemoryHost};
use observation_mask::ObservationMask;
use serde_json::json;

/// bash: t1 t3 t4 t6; Read: t2 t5 (short) t8 t9; Screenshot: t7 (text + image); t99 has no
/// call in the conversation; an event line holds a result too.
pub fn conversation() -> Conversation {
    let u = |id: &str, blocks| Message::new(id, Role::User, blocks);
    let a = |id: &str, blocks| Message::new(id, Role::Assistant, blocks);
    let t4 = Block::ToolResult(condense_model::ToolResult {
        tool_use_id: "t4".into(),
        content: Content::blocks(vec![
            Block::text(lines("stdout", 30)),
            Block::Text(TextBlock {
                text: lines("stderr", 30),
                extra: RawJson::from_string_unchecked(
                    r#"{"cache_control":{"type":"ephemeral"}}"#.into(),
                ),
            }),
        ]),
        is_error: Some(true),
        extra: RawJson::from_string_unchecked(r#"{"x_exit_code":1}"#.into()),
    });
    Conversation {
        messages: vec![
            u("m0", vec![Block::text("Fix the failing test in parser.py")]),
            a(
                "m1",
                vec![tool_use("t1", "bash", json!({"command":"ls -R"}))],
            ),
            u(
                "m2",
                vec![tool_result("t1", Content::string(lines("ls", 40)), None)],
            ),
            a(
                "m3",
                vec![
                    Block::text("Reading the parser and searching for the error."),
                    tool_use("t2", "Read", json!({"file_path":"parser.py"})),
                    tool_use("t3", "bash", json!({"command":"grep -rn Error ."})),
                ],
            ),
            u(
                "m4",
                vec![
                    tool_result(
                        "t2",
                        Content::blocks(vec![Block::text(lines("parser.py", 80))]),
                        None,
                    ),
                    tool_result("t3", Content::string(lines("grep", 25)), Some(false)),
                ],
            ),
            a(
                "m5",
                vec![tool_use("t4", "bash", json!({"command":"pytest -x"}))],
            ),
            u("m6", vec![t4]),
            a(
                "m7",
                vec![tool_use("t5", "Read", json!({"file_path":"VERSION"}))],
            ),
            u(
                "m8",
                vec![tool_result("t5", Content::string("1.2.3"), None)],
            ),
            Message::new(
                "e0",
                Role::Event,
                vec![tool_result("t1", Content::string(lines("event", 50)), None)],
            ),
            a(
                "m9",
                vec![
                    tool_use("t6", "bash", json!({"command":"cat setup.cfg"})),
                    tool_use("t7", "Screenshot", json!({})),
                ],
            ),
            u(
                "m10",
                vec![
                    tool_result("t6", Content::string(lines("setup.cfg", 20)), None),
                    tool_result(
                        "t7",
                        Content::blocks(vec![Block::text(lines("window", 10)), image()]),
                        None,
                    ),
                ],
            ),
            u(
                "m11",
                vec![tool_result(
                    "t99",
                    Content::string(lines("orphan", 12)),
                    None,
                )],
            ),
            a(
                "m12",
                vec![
                    tool_use("t8", "Read", json!({"file_path":"lexer.py"})),
                    tool_use("t9", "Read", json!({"file_path":"tokens.py"})),
                ],
            ),
            u(
                "m13",
                vec![
                    tool_result("t8", Content::string(lines("lexer.py", 60)), None),
                    tool_result("t9", Content::string(lines("tokens.py", 15)), None),
                ],
            ),
            a(
                "m14",
                vec![Block::text("Fixed: the lexer dropped the last token.")],
            ),
        ],
        ..Conversation::default()
    }
}

#[test]
fn fixture_per_tool() {
    let out = run(
        &stage::<ObservationMask>("keep_last = 2"),
        &conversation(),
        &MemoryHost::default(),
    );
    insta::assert_snapshot!("fixture_per_tool_output", render::render(&out.conversation));
    insta::assert_json_snapshot!("fixture_per_tool_report", out.report);
    // bash keeps t4, t6; Read keeps t8, t9 (t5 is too short to mask); Screenshot and the
    // orphan are alone in their groups.
    assert_eq!(masked_ids(&out.conversation), vec!["t1", "t2", "t3"]);
}

#[test]
fn fixture_all_tools_together() {
    let out = run(
        &stage::<ObservationMask>("keep_last = 2\nper_tool = false"),
        &conversation(),
        &MemoryHost::default(),
    );
    insta::assert_snapshot!("fixture_in_all_output", render::render(&out.conversation));
    insta::assert_json_snapshot!("fixture_in_all_report", out.report);
    assert_eq!(
        masked_ids(&out.conversation),
        vec!["t1", "t2", "t3", "t4", "t6", "t7", "t99"]
    );
}

#[test]
fn masked_results_keep_their_flags_extra_and_images() {
    let out = run(
        &stage::<ObservationMask>("keep_last = 1\nper_tool = false"),
        &conversation(),
        &MemoryHost::default(),
    );
    let results: Vec<_> = out
        .conversation
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .collect();
    let t4 = results.iter().find(|r| r.tool_use_id == "t4").unwrap();
    assert_eq!(t4.is_error, Some(true));
    assert_eq!(t4.extra.as_str(), r#"{"x_exit_code":1}"#);
    assert_eq!(t4.content.blocks.len(), 1);
    let Block::Text(t) = &t4.content.blocks[0] else {
        panic!()
    };
    assert_eq!(
        t.extra.as_str(),
        r#"{"cache_control":{"type":"ephemeral"}}"#
    );
    assert_eq!(
        t.text,
        format!(
            "[Observation masked: bash result, {} chars; see condense store]",
            observation_mask::thousands(lines("stdout", 30).len() + 1 + lines("stderr", 30).len())
        )
    );
    let t7 = results.iter().find(|r| r.tool_use_id == "t7").unwrap();
    assert_eq!(t7.content.blocks[1], image());
    let t1 = results.iter().find(|r| r.tool_use_id == "t1").unwrap();
    assert_eq!(t1.content.shape, condense_model::ContentShape::String);
    // Event lines are never touched.
    assert_eq!(out.conversation.messages[9], conversation().messages[9]);
}

#[test]
fn tools_and_exclude_tools_restrict_what_is_masked_and_counted() {
    let out = run(
        &stage::<ObservationMask>("keep_last = 1\ntools = [\"bash\"]"),
        &conversation(),
        &MemoryHost::default(),
    );
    assert_eq!(masked_ids(&out.conversation), vec!["t1", "t3", "t4"]);
    let out = run(
        &stage::<ObservationMask>(
            "keep_last = 1\nper_tool = false\nexclude_tools = [\"Read\", \"Screenshot\"]",
        ),
        &conversation(),
        &MemoryHost::default(),
    );
    // Eligible in order: t1 t3 t4 t6 t99 -> all but t99 masked.
    assert_eq!(masked_ids(&out.conversation), vec!["t1", "t3", "t4", "t6"]);
}

#[test]
fn a_large_window_masks_nothing_and_says_so() {
    let out = run(
        &stage::<ObservationMask>(""),
        &conversation(),
        &MemoryHost::default(),
    );
    assert_eq!(out.conversation, conversation());
    assert_eq!(out.report.blocks_changed, 0);
    assert_eq!(out.report.tokens_freed, None);
    assert_eq!(
        out.report.notes,
        vec!["nothing masked (10 tool results, 10 eligible, keep_last = 5 per tool)"]
    );
}

#[test]
fn never_grows_and_leaves_short_results_whole() {
    for config in [
        "keep_last = 1",
        "keep_last = 1\nper_tool = false",
        "keep_last = 3",
    ] {
        let input = conversation();
        let out = run(
            &stage::<ObservationMask>(config),
            &input,
            &MemoryHost::default(),
        );
        assert!(tokens(&out.conversation) <= tokens(&input), "{config}");
        for (before, after) in input.messages.iter().zip(&out.conversation.messages) {
            for (b, a) in before.tool_results().zip(after.tool_results()) {
                assert!(a.content.text().len() <= b.content.text().len());
            }
        }
    }
    let out = run(
        &stage::<ObservationMask>("keep_last = 1\nper_tool = false"),
        &conversation(),
        &MemoryHost::default(),
    );
    assert_eq!(
        out.conversation.messages[8],
        conversation().messages[8],
        "t5 is shorter than a placeholder"
    );
    assert!(out
        .report
        .notes
        .contains(&"kept 1 older result whole: the placeholder would not be shorter".to_string()));
}
