//! The cached conversation counter.

use base64::Engine as _;
use condense_budget::image::IMAGE_FALLBACK_TOKENS;
use condense_budget::{BudgetConfig, Level, MESSAGE_OVERHEAD_TOKENS};
use condense_model::{
    Block, Content, Conversation, Image, ImageSource, Message, Opaque, RawJson, Role,
    ThinkingBlock, ToolDef, ToolResult, ToolUse,
};
use condense_tokens::{tokenizer, TokenCounter, TokenizerKind};

fn raw(s: &str) -> RawJson {
    RawJson::from_string_unchecked(s.to_string())
}

fn tool_use(id: &str, name: &str, input: &str) -> Block {
    Block::ToolUse(ToolUse {
        id: id.into(),
        name: name.into(),
        input: raw(input),
        extra: RawJson::default(),
    })
}

fn tool_result(id: &str, blocks: Vec<Block>) -> Block {
    Block::ToolResult(ToolResult {
        tool_use_id: id.into(),
        content: Content::blocks(blocks),
        is_error: None,
        extra: RawJson::default(),
    })
}

fn image(data: String) -> Block {
    Block::Image(Image {
        source: ImageSource::Base64 {
            media_type: "image/png".into(),
            data,
        },
        extra: RawJson::default(),
    })
}

fn png_base64(w: u32, h: u32) -> String {
    let mut v = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&[0u8; 10_000]);
    base64::engine::general_purpose::STANDARD.encode(v)
}

fn o200k(s: &str) -> usize {
    tokenizer(TokenizerKind::O200k).count(s)
}

#[test]
fn what_blocks_cost() {
    let c = TokenCounter::new(TokenizerKind::O200k);
    assert_eq!(c.count_block(&Block::text("hello world")), 2);
    let thinking = Block::Thinking(ThinkingBlock {
        thinking: "Let me think about it.".into(),
        extra: raw(r#"{"signature":"a very long signature that is not counted"}"#),
    });
    assert_eq!(c.count_block(&thinking), o200k("Let me think about it."));
    let input = r#"{"command":"cargo test -p condense-tokens"}"#;
    assert_eq!(
        c.count_block(&tool_use("t1", "Bash", input)),
        o200k("Bash") + o200k(input)
    );
    let result = tool_result("t1", vec![Block::text("ok: 3 passed"), Block::text("done")]);
    assert_eq!(
        c.count_block(&result),
        o200k("ok: 3 passed") + o200k("done")
    );
    // 200 x 300 px = 80 tokens, whatever the size of the base64.
    let img = image(png_base64(200, 300));
    assert!(img.text_len() > 13_000);
    assert_eq!(c.count_block(&img), 80);
    assert_eq!(
        c.count_block(&image("bm90IGFuIGltYWdl".into())),
        IMAGE_FALLBACK_TOKENS
    );
    let reference = Block::Image(Image {
        source: ImageSource::Reference {
            json: raw(r#"{"type":"url","url":"https://x/y.png"}"#),
        },
        extra: RawJson::default(),
    });
    assert_eq!(c.count_block(&reference), IMAGE_FALLBACK_TOKENS);
    // An image nested in a tool result costs the same estimate.
    assert_eq!(c.count_block(&tool_result("t2", vec![img.clone()])), 80);
    let opaque = r#"{"type":"server_tool_use","id":"x","name":"web_search"}"#;
    assert_eq!(
        c.count_block(&Block::Opaque(Opaque { json: raw(opaque) })),
        o200k(opaque)
    );
}

fn conversation() -> Conversation {
    let mut conv = Conversation {
        system: Some(Content::string("You are a careful coding agent.")),
        tools: vec![ToolDef {
            name: "Bash".into(),
            raw: raw(
                r#"{"name":"Bash","description":"Run a shell command","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}}"#,
            ),
        }],
        ..Conversation::default()
    };
    conv.messages = vec![
        Message::new(
            "m0",
            Role::System,
            vec![Block::text("Project rules: no unwrap.")],
        ),
        Message::new(
            "m1",
            Role::User,
            vec![Block::text("Fix the failing test in src/lib.rs")],
        ),
        Message::new(
            "m2",
            Role::Assistant,
            vec![
                Block::text("Running the tests."),
                tool_use("t1", "Bash", r#"{"command":"cargo test"}"#),
            ],
        ),
        Message::new(
            "m3",
            Role::User,
            vec![tool_result(
                "t1",
                vec![Block::text(
                    "test a ... FAILED\nassertion failed: x == 2\n".repeat(40),
                )],
            )],
        ),
        Message::new(
            "m4",
            Role::Event,
            vec![Block::text("queue-operation: never sent to the model")],
        ),
        Message::new(
            "m5",
            Role::Assistant,
            vec![Block::text("The assertion is off by one; fixing it.")],
        ),
    ];
    conv
}

#[test]
fn conversation_count_adds_up() {
    let conv = conversation();
    let c = TokenCounter::new(TokenizerKind::O200k);
    let n = c.count_conversation(&conv);
    assert_eq!(
        n.system,
        MESSAGE_OVERHEAD_TOKENS + o200k("You are a careful coding agent.")
    );
    assert_eq!(n.tools, o200k(conv.tools[0].raw.as_str()));
    assert_eq!(n.messages.len(), conv.messages.len());
    assert_eq!(
        n.messages[1],
        MESSAGE_OVERHEAD_TOKENS + o200k("Fix the failing test in src/lib.rs")
    );
    assert_eq!(n.messages[4], 0, "events are never counted");
    for (i, m) in conv.messages.iter().enumerate() {
        assert_eq!(n.messages[i], c.count_message(m));
    }
    assert_eq!(n.system_messages, n.messages[0]);
    let chat_blocks: Vec<&Block> = conv
        .messages
        .iter()
        .filter(|m| m.is_chat())
        .flat_map(|m| m.content.blocks.iter())
        .collect();
    let each: Vec<usize> = chat_blocks.iter().map(|b| c.count_block(b)).collect();
    assert_eq!(n.blocks, each, "one count per chat block, in order");
    assert_eq!(
        n.total,
        n.system + n.tools + n.messages.iter().sum::<usize>()
    );
    assert_eq!(n.fixed(), n.system + n.tools + n.messages[0]);

    let budget = c.budget(&conv, &BudgetConfig::default());
    assert_eq!(budget.fixed, n.fixed());
    assert_eq!(budget.messages, n.conversation());
    assert_eq!(budget.used, n.total);
    assert_eq!(budget.available, 200_000 - n.total as i64 - 20_000);
    assert_eq!(budget.level, Level::Normal);
    let tiny = BudgetConfig {
        context_window: n.total,
        max_output_tokens: 1,
        autocompact_buffer: 1,
        output_reserve: 0,
        ..BudgetConfig::default()
    };
    let full = c.budget(&conv, &tiny);
    assert_eq!(full.level, Level::Critical);
    assert_eq!(full.available, 0);
    assert!(full.over_autocompact_threshold());

    // Other backends count the same conversation without trouble.
    for kind in TokenizerKind::ALL {
        let n = TokenCounter::new(kind).count_conversation(&conv);
        assert!(n.total > 0 && n.messages[4] == 0, "{kind}");
    }
}

#[test]
fn second_count_is_all_hits() {
    let conv = conversation();
    let c = TokenCounter::new(TokenizerKind::O200k);
    let first = c.count_conversation(&conv);
    let after_first = c.stats();
    assert!(after_first.misses > 0);
    let second = c.count_conversation(&conv);
    let after_second = c.stats();
    assert_eq!(first, second);
    assert_eq!(after_second.misses, after_first.misses, "no re-counting");
    assert_eq!(
        after_second.entries, after_first.entries,
        "no new cache entries"
    );
    assert!(after_second.hits > after_first.hits);
    assert_eq!(c.cache_len(), after_second.entries);
}

#[test]
fn changing_one_block_recounts_only_that_block() {
    let mut conv = conversation();
    let c = TokenCounter::new(TokenizerKind::O200k);
    let before = c.count_conversation(&conv);
    c.reset_stats();
    let entries = c.cache_len();

    conv.messages[5].content.blocks[0] = Block::text("The assertion is off by two; fixing it now.");
    let after = c.count_conversation(&conv);
    let stats = c.stats();
    assert_eq!(stats.misses, 1);
    assert_eq!(stats.entries, entries + 1);
    assert_eq!(after.messages[..5], before.messages[..5]);
    assert_eq!(
        after.messages[5],
        MESSAGE_OVERHEAD_TOKENS + o200k("The assertion is off by two; fixing it now.")
    );

    // Dropping a message costs no counting at all.
    c.reset_stats();
    conv.messages.remove(3);
    let dropped = c.count_conversation(&conv);
    assert_eq!(c.stats().misses, 0);
    assert_eq!(dropped.total, after.total - after.messages[3]);

    c.clear_cache();
    assert_eq!(c.cache_len(), 0);
    c.reset_stats();
    assert_eq!(c.count_conversation(&conv), dropped);
    assert!(c.stats().misses > 0);
}

#[test]
fn a_text_counted_alone_shares_the_cache_entry_of_its_block() {
    // What stages do: the host counts the conversation, then a stage measures a tool result's
    // text through the host. The text is not tokenized a second time.
    let text = "line of build output\n".repeat(40);
    let mut conv = Conversation::default();
    conv.messages.push(Message::new(
        "r1",
        Role::User,
        vec![tool_result("c1", vec![Block::text(text.clone())])],
    ));
    let c = TokenCounter::new(TokenizerKind::O200k);
    let _ = c.count_conversation(&conv);
    c.reset_stats();
    assert_eq!(c.count_text_cached(&text), o200k(&text));
    assert_eq!((c.stats().hits, c.stats().misses), (1, 0));
}

#[test]
fn a_long_text_is_counted_again_only_in_its_new_lines() {
    // A running summary rewritten at a commit: the same sections, one new bullet, one changed.
    let bullets = |n: usize, changed: &str| -> String {
        let mut text = String::from("## User requests\n");
        for i in 0..n {
            text.push_str(&format!(
                "- request {i}: fix the parser for `src/mod_{i}.rs`, then run the tests\n"
            ));
        }
        text.push_str(&format!(
            "\n## Errors\n- Bash: `cargo test` — unresolved ({changed})\n  error[E0308]\n"
        ));
        text
    };
    let c = TokenCounter::new(TokenizerKind::O200k);
    let first = bullets(40, "first toolu_1");
    assert!(first.len() >= condense_tokens::LINE_PARTS_FROM);
    assert_eq!(c.count_text_cached(&first), o200k(&first));
    // About four lines a part (where the lines say: see `line_parts`).
    let parts = c.stats().line_parts;
    assert!(parts >= 5, "{parts} parts");

    let second = bullets(41, "first toolu_2");
    assert_eq!(c.count_text_cached(&second), o200k(&second));
    let added = c.stats().line_parts - parts;
    assert!((1..=4).contains(&added), "{added} new parts of {parts}");

    // The estimate is no sum of its parts: it counts whole.
    let e = TokenCounter::new(TokenizerKind::Estimate);
    assert_eq!(
        e.count_text_cached(&second),
        tokenizer(TokenizerKind::Estimate).count(&second)
    );
    assert_eq!(e.stats().line_parts, 0);
}

#[test]
fn cache_capacity_is_bounded() {
    let c = TokenCounter::with_capacity(TokenizerKind::O200k, 3);
    for i in 0..20 {
        assert_eq!(
            c.count_block(&Block::text(format!("block {i}"))),
            o200k(&format!("block {i}"))
        );
        assert!(c.cache_len() <= 3);
    }
}

#[test]
fn counter_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<TokenCounter>();
    let c = std::sync::Arc::new(TokenCounter::default());
    let conv = std::sync::Arc::new(conversation());
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (c, conv) = (c.clone(), conv.clone());
            std::thread::spawn(move || c.count_conversation(&conv))
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(results[0], results[1]);
}

/// A large conversation (counted on all cores) counts as its texts joined, and a second count
/// is answered from the cache. (Speed is the bench's: `cargo xtask bench`.)
#[test]
fn a_large_conversation_counts_as_its_text_and_again_from_the_cache() {
    let line = "error[E0308]: mismatched types --> src/main.rs:10:5 expected `u32`, found `&str`\n";
    let mut conv = Conversation::default();
    for i in 0..400 {
        let text = format!("{i}: {}", line.repeat(40));
        conv.messages.push(Message::new(
            format!("m{i}"),
            Role::User,
            vec![tool_result("t", vec![Block::text(text)])],
        ));
    }
    let joined: String = conv.messages.iter().map(|m| m.content.text()).collect();
    let c = TokenCounter::new(TokenizerKind::O200k);
    let cold = c.count_conversation(&conv);
    assert_eq!(cold.total, o200k(&joined) + 400 * MESSAGE_OVERHEAD_TOKENS);
    let misses = c.stats().misses;
    assert_eq!(c.count_conversation(&conv), cold);
    assert_eq!(c.stats().misses, misses);
}
