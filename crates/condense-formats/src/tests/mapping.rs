//! The readers map real content into the model (not everything into Opaque or Event).

use super::support::{counts, fixture, Counts};
use crate::{read, ReadOptions};
use condense_model::{Block, ContentShape, Role};

fn doc(bytes: &[u8], source: &str) -> crate::Document {
    read(bytes, source, &ReadOptions::default()).unwrap()
}

#[test]
fn claude_code_viewer_counts() {
    let bytes = fixture!(
        "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    );
    let d = doc(&bytes, "s.jsonl");
    let c = counts(d.conversations());
    assert_eq!(
        c,
        Counts {
            // The main thread; the 405 sub-agent lines are events that keep their content.
            messages: 32,
            events: 406,
            tool_uses: 167,
            tool_results: 167,
            opaque: 0,
            images: 0,
        }
    );
    let conv = &d.conversations()[0];
    // The summary line is an event kept in place; ids and timestamps come from the lines.
    assert_eq!(conv.messages[0].role, Role::Event);
    assert_eq!(conv.messages[1].id, "62e0bdc0-a1e4-4d5c-8509-3b9d0d57cc67");
    assert_eq!(
        conv.messages[1].timestamp.as_deref(),
        Some("2025-09-03T00:52:31.217Z")
    );
    assert_eq!(conv.messages[1].content.shape, ContentShape::String);
    // Every tool result answers a tool use of the session.
    let names = conv.tool_names_by_id();
    for msg in &conv.messages {
        for tr in msg.tool_results() {
            assert!(
                names.contains_key(tr.tool_use_id.as_str()),
                "{}",
                tr.tool_use_id
            );
        }
    }
    // is_error: absent 92, false 52, true 23.
    let flags: Vec<Option<bool>> = conv
        .messages
        .iter()
        .flat_map(|m| m.tool_results().map(|tr| tr.is_error))
        .collect();
    assert_eq!(flags.iter().filter(|f| f.is_none()).count(), 92);
    assert_eq!(flags.iter().filter(|f| **f == Some(false)).count(), 52);
    assert_eq!(flags.iter().filter(|f| **f == Some(true)).count(), 23);
    // The toolUseResult duplicate stays in the envelope, not in the content.
    let with_dup = conv
        .messages
        .iter()
        .filter(|m| m.envelope.as_str().contains("\"toolUseResult\""))
        .count();
    assert_eq!(with_dup, 167);
}

#[test]
fn claude_reliability_counts() {
    let bytes = fixture!("transcripts/DRMacIver__claude-reliability/transcript.jsonl");
    let c = counts(doc(&bytes, "t.jsonl").conversations());
    assert_eq!((c.messages, c.events), (117, 1));
    assert_eq!((c.tool_uses, c.tool_results, c.opaque), (54, 54, 0));
}

#[test]
fn mini_swe_agent_counts() {
    let bytes = fixture!("transcripts/SWE-agent__mini-swe-agent/sqlfluff__sqlfluff-1733.traj.json");
    let d = doc(&bytes, "m.traj.json");
    let c = counts(d.conversations());
    // 316 messages, the last the `exit` role kept whole: one opaque block, counted.
    assert_eq!((c.messages, c.events), (316, 0));
    assert_eq!((c.tool_uses, c.tool_results, c.opaque), (157, 156, 1));
    assert_eq!(
        d.warnings(),
        [
            "1 message or item condense does not understand is kept verbatim and counted as its \
          JSON: role `exit` (1)"
        ]
    );
    let conv = &d.conversations()[0];
    assert_eq!(conv.messages[0].role, Role::System);
    assert_eq!(conv.messages[2].id, "#2");
    // Top-level keys other than messages are the conversation's extra.
    let extra = conv.extra.to_map().unwrap();
    assert!(extra.contains_key("info") && extra.contains_key("trajectory_format"));
    // The arguments string is kept verbatim as the input.
    let first = conv.messages[2].tool_uses().next().unwrap();
    assert_eq!(first.name, "bash");
    assert!(first
        .input
        .as_str()
        .starts_with("{\"command\": \"find . -type f"));
    assert!(first.input_object().is_some());
}

#[test]
fn swe_agent_counts() {
    let bytes =
        fixture!("transcripts/SWE-agent__SWE-agent/marshmallow-code__marshmallow-1867.traj");
    let d = doc(&bytes, "m.traj");
    let c = counts(d.conversations());
    assert_eq!((c.messages, c.events), (28, 0));
    assert_eq!((c.tool_uses, c.tool_results), (13, 13));
    // Tool messages carry `tool_call_ids: [id]`: the id is still the tool result's.
    let conv = &d.conversations()[0];
    let names = conv.tool_names_by_id();
    let tr = conv
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .next()
        .unwrap();
    assert_eq!(names.get(tr.tool_use_id.as_str()), Some(&"bash"));

    let bytes = fixture!("transcripts/SWE-agent__SWE-agent/pydicom__pydicom-1458.traj");
    let c = counts(doc(&bytes, "p.traj").conversations());
    assert_eq!((c.messages, c.tool_uses, c.tool_results), (26, 0, 0));
}

#[test]
fn tau_bench_counts() {
    let bytes = fixture!("transcripts/sierra-research__tau-bench/gpt-4o-airline.json");
    let d = doc(&bytes, "tau.json");
    let c = counts(d.conversations());
    assert_eq!((c.messages, c.events), (5308, 0));
    assert_eq!((c.tool_uses, c.tool_results, c.opaque), (1164, 1164, 0));
    // `content: null` with tool_calls keeps the null shape.
    let null_shapes = d
        .conversations()
        .iter()
        .flat_map(|conv| &conv.messages)
        .filter(|m| m.content.shape == ContentShape::Null)
        .count();
    assert_eq!(null_shapes, 1074);
}

#[test]
fn openhands_counts() {
    let bytes = fixture!("transcripts/All-Hands-AI__OpenHands/output.jsonl");
    let d = doc(&bytes, "output.jsonl");
    let per_line: Vec<(usize, usize, usize, usize)> = d
        .conversations()
        .iter()
        .map(|conv| {
            let c = counts(std::slice::from_ref(conv));
            (c.messages + c.events, c.tool_uses, c.tool_results, c.events)
        })
        .collect();
    assert_eq!(
        per_line,
        vec![(49, 23, 22, 2), (70, 33, 32, 3), (103, 49, 49, 3)]
    );
    let conv = &d.conversations()[0];
    assert_eq!(conv.messages[0].role, Role::System);
    assert_eq!(conv.messages[1].role, Role::User);
    assert_eq!(conv.messages[1].id, "oh-1");
    assert!(conv.messages[1]
        .content
        .text()
        .starts_with("<uploaded_files>"));
    // A run action: a tool use with the event args as input, answered by the next observation.
    let call = conv
        .messages
        .iter()
        .find_map(|m| m.tool_uses().next())
        .unwrap();
    assert_eq!(
        (call.id.as_str(), call.name.as_str()),
        ("toolu_01", "execute_bash")
    );
    assert_eq!(
        call.input_object().unwrap()["command"],
        "ls -l /workspace/ponylang__ponyc__0.1"
    );
    let result = conv
        .messages
        .iter()
        .find_map(|m| m.tool_results().next())
        .unwrap();
    assert_eq!(result.tool_use_id, "toolu_01");
    assert!(result.content.text().starts_with("total 300"));
    // The mapped text is not kept twice: the envelope holds placeholders.
    assert!(!conv.messages[0]
        .envelope
        .as_str()
        .contains("You are OpenHands agent"));
}

#[test]
fn every_block_kind_is_seen_in_the_anthropic_edge_body() {
    let bytes = fixture!("edge/anthropic_body.json");
    let d = doc(&bytes, "a.json");
    assert_eq!(d.format(), crate::Format::Anthropic);
    let conv = &d.conversations()[0];
    assert_eq!(conv.system.as_ref().unwrap().blocks.len(), 2);
    assert_eq!(conv.tools.len(), 2);
    assert_eq!(conv.tools[1].name, "web_search");
    let c = counts(d.conversations());
    assert_eq!((c.tool_uses, c.tool_results), (5, 5));
    // redacted_thinking, server_tool_use, web_search_tool_result, the unknown inner block, document.
    assert_eq!(c.opaque, 5);
    assert_eq!(c.images, 4);
    let thinking = conv.messages[4]
        .content
        .blocks
        .iter()
        .find_map(|b| match b {
            Block::Thinking(t) => Some(t),
            _ => None,
        })
        .unwrap();
    assert!(thinking.extra.as_str().contains("signature"));
    let results: Vec<_> = conv
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .collect();
    let flags: Vec<_> = results.iter().map(|r| r.is_error).collect();
    assert_eq!(flags, vec![None, Some(false), None, Some(true), None]);
    assert_eq!(results[4].content.shape, ContentShape::Absent);
    let extra = conv.extra.to_map().unwrap();
    assert_eq!(extra["model"], "claude-sonnet-4-5");
}

#[test]
fn openai_edge_body_mapping() {
    let bytes = fixture!("edge/openai_body.json");
    let d = doc(&bytes, "o.json");
    assert_eq!(d.format(), crate::Format::OpenAi);
    let conv = &d.conversations()[0];
    let m = &conv.messages;
    assert_eq!((m[0].role, m[1].role), (Role::System, Role::System));
    assert_eq!(m[3].content.shape, ContentShape::Null);
    assert_eq!(m[3].tool_uses().count(), 2);
    assert_eq!(m[6].content.shape, ContentShape::String);
    assert_eq!(m[9].content.shape, ContentShape::Absent);
    // The broken arguments are kept verbatim.
    let broken = m[3].tool_uses().nth(1).unwrap();
    assert_eq!(broken.input.as_str(), "{not json");
    // role "function" and "exit" are kept whole as opaque blocks of user messages: counted.
    assert_eq!((m[12].role, m[14].role), (Role::User, Role::User));
    assert!(
        matches!(m[14].content.blocks.as_slice(), [Block::Opaque(o)] if o.json.as_str().starts_with("{\"role\":\"exit\""))
    );
    assert_eq!(d.warnings().len(), 1);
    assert!(d.warnings()[0].ends_with("role `exit` (1), role `function` (1)"));
    let c = counts(d.conversations());
    assert_eq!(
        (c.tool_uses, c.tool_results, c.images, c.opaque),
        (5, 5, 3, 3)
    );
    match &m[2].content.blocks[1] {
        Block::Image(img) => match &img.source {
            condense_model::ImageSource::Base64 { media_type, data } => {
                assert_eq!(media_type, "image/png");
                assert!(data.starts_with("iVBOR"));
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

/// The model as the readers build it, for a few small inputs: what goes to content, extra and
/// envelope (placeholders, hints) is visible at a glance.
#[test]
fn mapping_snapshots() {
    let list = doc(&fixture!("edge/anthropic_list.json"), "l.json");
    insta::assert_json_snapshot!("anthropic_list", list.conversations());
    let events = doc(&fixture!("edge/openhands_events.json"), "e.json");
    insta::assert_json_snapshot!("openhands_events", events.conversations());
    let bytes = br#"{"model":"m","messages":[{"content":"Be brief.","role":"developer"},{"role":"assistant","content":null,"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":1}","name":"search"},"id":"c1","type":"function"}]},{"role":"tool","tool_call_id":"c1","name":"search","content":"found"}]}"#;
    let openai = doc(bytes, "o.json");
    insta::assert_json_snapshot!("openai_tool_call", openai.conversations());
}

/// Every message of every shipped session packs for the store and unpacks to itself
/// (`condense_model::packed`), and a packed message cut short unpacks to nothing.
#[test]
fn every_message_of_every_fixture_packs_and_unpacks_to_itself() {
    use condense_model::packed::{pack_message, unpack_message};
    let (mut messages, mut kinds) = (0, std::collections::BTreeSet::new());
    for path in super::support::fixture_files() {
        let name = path.display().to_string();
        let Ok(doc) = crate::read(
            &std::fs::read(&path).unwrap(),
            &name,
            &ReadOptions::default(),
        ) else {
            continue; // the edge fixtures that are errors by design
        };
        for m in doc.conversations().iter().flat_map(|c| &c.messages) {
            let bytes = pack_message(m);
            assert_eq!(unpack_message(&bytes).as_ref(), Some(m), "{name}: {}", m.id);
            assert_eq!(
                unpack_message(&bytes[..bytes.len() - 1]),
                None,
                "{name}: {}",
                m.id
            );
            kinds.extend(m.content.blocks.iter().map(Block::kind));
            messages += 1;
        }
    }
    assert!(messages > 5_000, "{messages} messages");
    assert_eq!(kinds.len(), 6, "block kinds seen: {kinds:?}");
}
