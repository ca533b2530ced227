//! Cold blocks counted on all cores give the counts one thread gives.

use condense_budget::MESSAGE_OVERHEAD_TOKENS;
use condense_model::{Block, Content, Conversation, Message, RawJson, Role, ToolDef, ToolResult};
use condense_tokens::{TokenCounter, TokenizerKind, PARALLEL_MIN_BYTES};

fn result(id: &str, blocks: Vec<Block>) -> Block {
    Block::ToolResult(ToolResult {
        tool_use_id: id.into(),
        content: Content::blocks(blocks),
        is_error: None,
        extra: RawJson::default(),
    })
}

/// Well over [`PARALLEL_MIN_BYTES`] of text: distinct blocks, repeated blocks, nested tool
/// results, an event line and system messages.
fn big() -> Conversation {
    let mut conv = Conversation {
        system: Some(Content::string("You are a careful agent.")),
        tools: (0..40)
            .map(|i| ToolDef {
                name: format!("tool{i}"),
                raw: RawJson::from_string_unchecked(format!(
                    r#"{{"name":"tool{i}","description":"{}"}}"#,
                    "Runs a thing and reports back. ".repeat(60)
                )),
            })
            .collect(),
        ..Conversation::default()
    };
    for i in 0..300 {
        let text = format!(
            "{i}: error[E0308]: mismatched types, line {} é中 🎉\n",
            i * 7
        )
        .repeat(1 + i % 13);
        let role = match i % 10 {
            0 => Role::System,
            9 => Role::Event,
            n if n % 2 == 0 => Role::User,
            _ => Role::Assistant,
        };
        let blocks = if i % 3 == 0 {
            vec![result(
                &format!("t{i}"),
                vec![Block::text(text.clone()), Block::text("same every time")],
            )]
        } else {
            vec![
                Block::text(text),
                Block::text("a repeated block, ".repeat(20)),
            ]
        };
        conv.messages
            .push(Message::new(format!("m{i}"), role, blocks));
    }
    conv
}

#[test]
fn parallel_cold_count_equals_one_thread() {
    let conv = big();
    let bytes: usize = conv.messages.iter().map(|m| m.content.text().len()).sum();
    assert!(bytes > 2 * PARALLEL_MIN_BYTES, "{bytes}");

    for kind in [TokenizerKind::O200k, TokenizerKind::Cl100k] {
        let parallel = TokenCounter::new(kind).count_conversation(&conv);
        // One block at a time, on this thread, each on a fresh counter: no batch, no pool.
        let alone = |b: &Block| TokenCounter::new(kind).count_block(b);
        let messages: Vec<usize> = conv
            .messages
            .iter()
            .map(|m| match m.is_chat() {
                true => MESSAGE_OVERHEAD_TOKENS + m.content.blocks.iter().map(alone).sum::<usize>(),
                false => 0,
            })
            .collect();
        let one = TokenCounter::new(kind);
        let tools: usize = conv.tools.iter().map(|t| one.count_tool(t)).sum();
        assert_eq!(parallel.messages, messages, "{kind}");
        assert_eq!(parallel.tools, tools, "{kind}");
        assert_eq!(
            parallel.total,
            parallel.system + tools + messages.iter().sum::<usize>()
        );
    }
}

#[test]
fn parallel_cold_count_caches_like_one_thread() {
    let conv = big();
    let c = TokenCounter::new(TokenizerKind::O200k);
    let cold = c.count_conversation(&conv);
    let after_cold = c.stats();
    // Every chat block is a lookup (nested tool result blocks too, on their own).
    assert!(after_cold.misses > 0);
    // Warm: all hits, the same counts, nothing fresh beyond the cold run's.
    let fresh = c.take_fresh();
    assert_eq!(c.count_conversation(&conv), cold);
    assert_eq!(c.stats().misses, after_cold.misses);
    assert!(c.take_fresh().is_empty());
    // The fresh counts seed a new counter that answers without counting.
    let next = TokenCounter::new(TokenizerKind::O200k);
    next.preload(fresh);
    assert_eq!(next.count_conversation(&conv), cold);
    assert_eq!(next.stats().misses, 0);
}

#[test]
fn many_conversations_count_as_each_alone() {
    // 60 conversations of a few KB each: together over the threshold, each under it.
    let base = big();
    let convs: Vec<Conversation> = (0..60)
        .map(|i| Conversation {
            messages: base.messages[i * 5..i * 5 + 5].to_vec(),
            ..Conversation::default()
        })
        .collect();
    let counter = TokenCounter::new(TokenizerKind::O200k);
    let together = counter.count_conversations(&convs);
    let alone: Vec<_> = convs
        .iter()
        .map(|c| TokenCounter::new(TokenizerKind::O200k).count_conversation(c))
        .collect();
    assert_eq!(together, alone);
    assert!(counter.count_conversations(&[]).is_empty());
}
