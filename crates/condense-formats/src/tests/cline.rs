//! Cline / Roo Code histories: XML calls and result markers become tool uses and results that
//! count no more than the text they stand for, and are written back exactly.

use super::support::{counts, fixture, round_trip, writes_back, Counts};
use crate::{read, Format, ReadOptions};
use condense_model::{Block, Content, ContentShape, RawJson, Role};
use condense_tokens::TokenCounter;
use serde_json::{json, Value};

fn auto() -> ReadOptions {
    ReadOptions::default()
}

fn history() -> Vec<u8> {
    fixture!("edge/cline_api_conversation_history.json")
}

fn as_format(format: Format) -> ReadOptions {
    ReadOptions {
        format: Some(format),
        select: None,
    }
}

#[test]
fn the_history_gets_real_tool_results() {
    let bytes = history();
    let doc = round_trip(&bytes, "api_conversation_history.json", &auto());
    assert!(writes_back(&doc, &bytes));
    assert_eq!(doc.format(), Format::Cline);
    assert!(doc.warnings().is_empty(), "{:?}", doc.warnings());
    // 9 calls in the assistant texts; the last (attempt_completion) has no result yet.
    assert_eq!(
        counts(doc.conversations()),
        Counts {
            messages: 18,
            events: 0,
            tool_uses: 8,
            tool_results: 8,
            opaque: 0,
            images: 0,
        }
    );
    let conv = &doc.conversations()[0];
    let calls: Vec<(&str, &str)> = conv
        .messages
        .iter()
        .flat_map(|m| m.tool_uses())
        .map(|tu| (tu.id.as_str(), tu.name.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("cline-1-0", "read_file"),
            ("cline-3-0", "search_files"),
            ("cline-5-0", "read_file"),
            ("cline-7-0", "replace_in_file"),
            ("cline-9-0", "execute_command"),
            ("cline-11-0", "attempt_completion"),
            ("cline-13-0", "write_to_file"),
            ("cline-15-0", "execute_command"),
        ]
    );
    let read_file = conv.messages[1].tool_uses().next().unwrap();
    assert_eq!(read_file.input.as_str(), r#"{"path":"src/math.ts"}"#);
    // The result is the block after the marker; the environment details stay text.
    let result = conv.messages[2].tool_results().next().unwrap();
    assert_eq!(result.tool_use_id, "cline-1-0");
    assert!(result
        .content
        .text()
        .starts_with("export function add(a: number, b: number)"));
    assert!(
        matches!(&conv.messages[2].content.blocks[1], Block::Text(t) if t.text.starts_with("<environment_details>"))
    );
    // The text around a call stays text; the call is cut out of it.
    assert!(
        matches!(&conv.messages[1].content.blocks[0], Block::Text(t) if t.text.ends_with("</thinking>\n\n"))
    );
    // Escaped as JSON, the new file would be longer than its XML: the input is the XML.
    let write = conv.messages[13].tool_uses().next().unwrap();
    assert!(write
        .input
        .as_str()
        .starts_with("\n<path>src/math.test.ts</path>\n<content>"));
    let names = conv.tool_names_by_id();
    for tr in conv.messages.iter().flat_map(|m| m.tool_results()) {
        assert!(names.contains_key(tr.tool_use_id.as_str()));
    }
}

#[test]
fn the_lifted_history_counts_no_more_than_its_text() {
    let bytes = history();
    let counter = TokenCounter::default();
    let cline = read(&bytes, "h.json", &auto()).unwrap();
    let plain = read(&bytes, "h.json", &as_format(Format::Anthropic)).unwrap();
    assert_eq!(plain.format(), Format::Anthropic);
    let lifted = counter.count_conversation(&cline.conversations()[0]).total;
    let text = counter.count_conversation(&plain.conversations()[0]).total;
    assert!(lifted <= text, "{lifted} > {text}");
    // What it does not count: the result markers (kept in hints, the results are the text after
    // them) and the XML tags around the parameters. Here 2,770 of 2,935 tokens.
    assert!(lifted * 100 >= text * 90, "{lifted} vs {text}");
    // Call by call: a tool use counts at most what its XML counts.
    for tu in cline.conversations()[0]
        .messages
        .iter()
        .flat_map(|m| m.tool_uses())
    {
        let xml = tu.extra.to_map().unwrap()["condense:cline_xml"]
            .as_str()
            .unwrap()
            .to_string();
        let used = counter.count_block(&Block::ToolUse(tu.clone()));
        assert!(used <= counter.count_text(&xml), "{}: {used}", tu.name);
    }
}

#[test]
fn stage_edits_are_written_as_cline_writes() {
    let mut doc = read(&history(), "h.json", &auto()).unwrap();
    let conv = &mut doc.conversations_mut()[0];
    if let Block::ToolResult(tr) = &mut conv.messages[2].content.blocks[0] {
        tr.content = Content::string("[read earlier: 7 lines]");
    }
    if let Block::ToolUse(tu) = &mut conv.messages[9].content.blocks[0] {
        tu.input = RawJson::from_string_unchecked(r#"{"command":"npm test -- --run"}"#.into());
    }
    let v: Value = serde_json::from_slice(&doc.write().unwrap()).unwrap();
    assert_eq!(
        v[2]["content"][0],
        json!({"type": "text", "text": "[read_file for 'src/math.ts'] Result:"})
    );
    assert_eq!(
        v[2]["content"][1],
        json!({"type": "text", "text": "[read earlier: 7 lines]"})
    );
    assert!(v[2]["content"][2]["text"]
        .as_str()
        .unwrap()
        .starts_with("<environment_details>"));
    assert_eq!(
        v[9]["content"],
        json!([{"type": "text", "text": "<execute_command>\n<command>npm test -- --run</command>\n</execute_command>"}])
    );
    // What was not edited is as it was.
    let original: Value = serde_json::from_slice(&history()).unwrap();
    assert_eq!(v[1], original[1]);
    assert_eq!(v[13], original[13]);
}

#[test]
fn a_result_in_its_markers_block_and_images_after_a_marker() {
    let list = json!([
        {"role": "user", "content": [{"type": "text", "text": "<task>look at the page</task>"}]},
        {"role": "assistant", "content": "<browser_action>\n<action>launch</action>\n<url>http://localhost:3000</url>\n</browser_action>"},
        {"role": "user", "content": [
            {"type": "text", "text": "[browser_action for 'launch'] Result:"},
            {"type": "text", "text": "The browser action has been executed."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "text", "text": "<environment_details>x</environment_details>"}
        ], "ts": 1746950000000u64},
        {"role": "assistant", "content": [{"type": "text", "text": "<read_file>\n<path>a.ts</path>\n</read_file>"}]},
        {"role": "user", "content": "[read_file for 'a.ts'] Result:\nconst a = 1;\n"},
    ]);
    let bytes = serde_json::to_vec(&list).unwrap();
    let mut doc = round_trip(&bytes, "roo.json", &auto());
    assert!(writes_back(&doc, &bytes));
    assert_eq!(doc.format(), Format::Cline);
    let conv = &doc.conversations()[0];
    let shot = conv.messages[2].tool_results().next().unwrap();
    assert_eq!(shot.content.blocks.len(), 2);
    assert!(matches!(shot.content.blocks[1], Block::Image(_)));
    // A string-shaped assistant message keeps its shape around the cut.
    assert_eq!(conv.messages[1].content.shape, ContentShape::String);
    // The result shares the marker's (string) block: the text after `Result:` is the result.
    let inline = conv.messages[4].tool_results().next().unwrap();
    assert_eq!(inline.content.text(), "const a = 1;\n");
    if let Block::ToolResult(tr) = &mut doc.conversations_mut()[0].messages[4].content.blocks[0] {
        tr.content = Content::string("[cleared]");
    }
    let v: Value = serde_json::from_slice(&doc.write().unwrap()).unwrap();
    assert_eq!(v[4]["content"], "[read_file for 'a.ts'] Result:\n[cleared]");
}

#[test]
fn a_marker_without_its_call_stays_text_and_is_reported() {
    let list = json!([
        {"role": "assistant", "content": [{"type": "text", "text": "<read_file>\n<path>a.ts</path>\n</read_file>"}]},
        {"role": "user", "content": [
            {"type": "text", "text": "[read_file for 'a.ts'] Result:"},
            {"type": "text", "text": "const a = 1;"},
            {"type": "text", "text": "[list_files for '.'] Result:"},
            {"type": "text", "text": "a.ts"}
        ]},
    ]);
    let bytes = serde_json::to_vec(&list).unwrap();
    let doc = round_trip(&bytes, "h.json", &auto());
    assert!(writes_back(&doc, &bytes));
    let c = counts(doc.conversations());
    assert_eq!((c.tool_uses, c.tool_results), (1, 1));
    assert_eq!(
        doc.warnings(),
        [
            "1 Cline tool result marker has no `<tool>` call in the assistant message before it: \
          kept as text"
        ]
    );
    assert_eq!(doc.conversations()[0].messages[1].role, Role::User);
}

#[test]
fn near_misses_are_not_cline() {
    // A plain Anthropic list whose user mentions a result.
    let plain = json!([
        {"role": "user", "content": [{"type": "text", "text": "[read_file for 'a.ts'] Result: it was empty, why?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.ts"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Result: empty"}]},
    ]);
    let doc = read(&serde_json::to_vec(&plain).unwrap(), "p.json", &auto()).unwrap();
    assert_eq!(doc.format(), Format::Anthropic);
    // A marker whose call the assistant never wrote.
    let orphan = json!([
        {"role": "assistant", "content": "Let me check the file."},
        {"role": "user", "content": [{"type": "text", "text": "[read_file for 'a.ts'] Result:"}, {"type": "text", "text": "x"}]},
    ]);
    let doc = read(&serde_json::to_vec(&orphan).unwrap(), "o.json", &auto()).unwrap();
    assert_ne!(doc.format(), Format::Cline);
    // Forced, an Anthropic list without markers reads as Cline with nothing lifted.
    let doc = read(
        &serde_json::to_vec(&plain).unwrap(),
        "p.json",
        &as_format(Format::Cline),
    )
    .unwrap();
    assert_eq!(counts(doc.conversations()).tool_uses, 1);
}

/// The model as the reader builds it from one call and its result.
#[test]
fn mapping_snapshot() {
    let list = json!([
        {"role": "user", "content": [{"type": "text", "text": "<task>\nWhat is in a.ts?\n</task>"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "<thinking>Read it.</thinking>\n<read_file>\n<path>a.ts</path>\n</read_file>"}]},
        {"role": "user", "content": [{"type": "text", "text": "[read_file for 'a.ts'] Result:"}, {"type": "text", "text": "export const a = 1;\n"}, {"type": "text", "text": "<environment_details>\n# Current Mode\nACT MODE\n</environment_details>"}]},
    ]);
    let bytes = serde_json::to_vec(&list).unwrap();
    let doc = round_trip(&bytes, "h.json", &auto());
    assert!(writes_back(&doc, &bytes));
    insta::assert_json_snapshot!("cline_small", doc.conversations());
}
