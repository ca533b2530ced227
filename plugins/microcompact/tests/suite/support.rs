//! What only this stage's tests need: a hand-made coding session with timestamps, a host whose
//! clock reads some minutes after it, and lookups by tool_use id. The test host, the runner
//! and the block builders come from `condense_testing`.

use condense_model::{Block, Content, Conversation, Message, RawJson, Role, ToolResult, ToolUse};
use condense_testing::{tool_result, tool_use, MemoryHost};
use microcompact::time::parse_rfc3339_ms;
use serde_json::json;

/// When the fixture's last assistant message was written.
pub const LAST_ASSISTANT: &str = "2025-06-15T10:30:00Z";

pub const MINUTE: i64 = 60_000;

/// Unix ms of the fixture's last assistant message.
pub fn last_assistant_ms() -> i64 {
    parse_rfc3339_ms(LAST_ASSISTANT).unwrap()
}

/// A host whose clock reads `minutes` after the fixture's last assistant message.
pub fn host_after(minutes: i64) -> MemoryHost {
    MemoryHost::default().with_now_ms(last_assistant_ms() + minutes * MINUTE)
}

/// `n` numbered lines of `what`, joined by newlines (not `condense_testing::lines`: the
/// snapshots hold these).
pub fn lines(what: &str, n: usize) -> String {
    (1..=n)
        .map(|i| format!("{what} line {i:03}: some output that the model read a while ago"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn at(minute: u32) -> Option<String> {
    Some(format!("2025-06-15T10:{minute:02}:00Z"))
}

fn msg(id: &str, role: Role, minute: u32, blocks: Vec<Block>) -> Message {
    let mut m = Message::new(id, role, blocks);
    m.timestamp = at(minute);
    m
}

/// A coding session: 9 tool calls (ls, Read, Bash, TodoWrite, WebFetch, Write, Grep, Read,
/// Bash), the last assistant message at [`LAST_ASSISTANT`]. With the defaults, the 3 most
/// recent compressible results are t6 (Grep), t7 (Read), t8 (Bash); t3 (TodoWrite) is not
/// compressible; t0 (ls) is smaller than the marker.
pub fn fixture() -> Conversation {
    use Role::{Assistant, User};
    let grep_result = ToolResult {
        tool_use_id: "t6".into(),
        content: Content::blocks(vec![Block::text(lines("grep", 20))]),
        is_error: Some(false),
        extra: RawJson::from_value(&json!({"cache_control": {"type": "ephemeral"}})),
    };
    let written_file = lines("fn new_module()", 50);
    let mut conv = Conversation {
        system: Some(Content::string("You are a coding agent.")),
        extra: RawJson::from_value(&json!({"model": "claude-sonnet-4-5", "max_tokens": 8192})),
        ..Conversation::default()
    };
    conv.messages = vec![
        msg(
            "m00",
            User,
            0,
            vec![Block::text("Fix the failing parser test.")],
        ),
        msg(
            "m01",
            Assistant,
            1,
            vec![tool_use("t0", "ls", json!({"path": "."}))],
        ),
        msg(
            "m02",
            User,
            1,
            vec![tool_result("t0", Content::string("a.rs"), None)],
        ),
        msg(
            "m03",
            Assistant,
            2,
            vec![
                Block::text("Reading the parser."),
                tool_use("t1", "Read", json!({"file_path": "src/parser.rs"})),
            ],
        ),
        msg(
            "m04",
            User,
            2,
            vec![tool_result(
                "t1",
                Content::blocks(vec![Block::text(lines("parser.rs", 40))]),
                None,
            )],
        ),
        msg(
            "m05",
            Assistant,
            4,
            vec![tool_use("t2", "Bash", json!({"command": "cargo test"}))],
        ),
        msg(
            "m06",
            User,
            5,
            vec![tool_result(
                "t2",
                Content::string(lines("cargo test", 25)),
                Some(true),
            )],
        ),
        msg(
            "m07",
            Assistant,
            6,
            vec![tool_use(
                "t3",
                "TodoWrite",
                json!({"todos": [{"content": "fix parser", "status": "in_progress"}]}),
            )],
        ),
        msg(
            "m08",
            User,
            6,
            vec![tool_result("t3", Content::string(lines("todo", 15)), None)],
        ),
        msg(
            "m09",
            Assistant,
            8,
            vec![tool_use(
                "t4",
                "WebFetch",
                json!({"url": "https://doc.rust-lang.org/std/str/"}),
            )],
        ),
        msg(
            "m10",
            User,
            9,
            vec![tool_result("t4", Content::string(lines("docs", 30)), None)],
        ),
        msg(
            "m11",
            Assistant,
            12,
            vec![tool_use(
                "t5",
                "Write",
                json!({"file_path": "src/new_module.rs", "content": written_file}),
            )],
        ),
        msg(
            "m12",
            User,
            12,
            vec![tool_result(
                "t5",
                Content::string("File created successfully at: src/new_module.rs"),
                None,
            )],
        ),
        msg(
            "m13",
            Assistant,
            15,
            vec![tool_use("t6", "Grep", json!({"pattern": "parse_"}))],
        ),
        msg("m14", User, 15, vec![Block::ToolResult(grep_result)]),
        msg(
            "m15",
            Assistant,
            20,
            vec![tool_use("t7", "Read", json!({"file_path": "src/lexer.rs"}))],
        ),
        msg(
            "m16",
            User,
            20,
            vec![tool_result(
                "t7",
                Content::string(lines("lexer.rs", 30)),
                None,
            )],
        ),
        msg(
            "m17",
            Assistant,
            25,
            vec![tool_use("t8", "Bash", json!({"command": "cargo test"}))],
        ),
        msg(
            "m18",
            User,
            26,
            vec![tool_result("t8", Content::string("test result: ok"), None)],
        ),
        msg(
            "m19",
            Assistant,
            30,
            vec![Block::text("The parser test passes now.")],
        ),
    ];
    conv
}

/// The tool result with this tool_use id.
pub fn result_of<'c>(conv: &'c Conversation, id: &str) -> &'c ToolResult {
    let found = conv.tool_results().find(|r| r.result.tool_use_id == id);
    found.unwrap().result
}

/// The tool_use with this id.
pub fn call_of<'c>(conv: &'c Conversation, id: &str) -> &'c ToolUse {
    conv.messages
        .iter()
        .flat_map(|m| m.tool_uses())
        .find(|t| t.id == id)
        .unwrap()
}

/// `conv` without any timestamps.
pub fn without_timestamps(mut conv: Conversation) -> Conversation {
    for m in &mut conv.messages {
        m.timestamp = None;
    }
    conv
}
