//! Reruns: on the output nothing changes; with turns appended only the newly old results are
//! masked and the earlier masks stay byte-identical.

use crate::fixture::conversation;
use crate::support::masked_ids;
use condense_model::{Content, Message, Role};
use condense_testing::{lines, run, stage, tool_result, tool_use, MemoryHost};
use observation_mask::ObservationMask;
use serde_json::json;

#[test]
fn applying_to_its_own_output_changes_nothing() {
    for config in ["keep_last = 2", "keep_last = 1\nper_tool = false"] {
        let stage = stage::<ObservationMask>(config);
        let once = run(&stage, &conversation(), &MemoryHost::default());
        let twice = run(&stage, &once.conversation, &MemoryHost::default());
        assert_eq!(twice.conversation, once.conversation, "{config}");
        assert_eq!(twice.report.blocks_changed, 0);
        assert_eq!(twice.report.tokens_freed, None);
        assert!(twice
            .report
            .notes
            .iter()
            .any(|n| n.ends_with("already masked")));
        // Deterministic: the same input gives the same output.
        assert_eq!(
            run(&stage, &conversation(), &MemoryHost::default()).conversation,
            once.conversation
        );
    }
}

#[test]
fn appended_turns_only_add_masks() {
    let stage = stage::<ObservationMask>("keep_last = 2");
    let first = run(&stage, &conversation(), &MemoryHost::default());
    let mut longer = first.conversation.clone();
    longer.messages.push(Message::new(
        "m15",
        Role::Assistant,
        vec![
            tool_use("t10", "bash", json!({"command":"pytest"})),
            tool_use("t11", "bash", json!({"command":"git diff"})),
        ],
    ));
    longer.messages.push(Message::new(
        "m16",
        Role::User,
        vec![
            tool_result("t10", Content::string(lines("pytest", 30)), None),
            tool_result("t11", Content::string(lines("diff", 30)), None),
        ],
    ));
    let second = run(&stage, &longer, &MemoryHost::default());
    let n = first.conversation.messages.len();
    // Every earlier message is unchanged except the two bash results that fell out.
    let changed: Vec<&str> = first
        .conversation
        .messages
        .iter()
        .zip(&second.conversation.messages[..n])
        .filter(|(a, b)| a != b)
        .map(|(a, _)| a.id.as_str())
        .collect();
    assert_eq!(changed, vec!["m6", "m10"]);
    assert_eq!(
        masked_ids(&second.conversation),
        vec!["t1", "t2", "t3", "t4", "t6"]
    );
    assert_eq!(second.report.blocks_changed, 2);
}
