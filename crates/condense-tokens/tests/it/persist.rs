//! Counts that outlive the process: `TokenCounter::preload` and `TokenCounter::take_fresh`.

use condense_model::{Block, Content, Conversation, Message, RawJson, Role, ToolDef};
use condense_tokens::{CacheStats, TokenCounter, TokenizerKind};
use std::collections::HashMap;

fn conversation() -> Conversation {
    let mut conv = Conversation {
        system: Some(Content::string("You are a careful coding agent.")),
        tools: vec![ToolDef {
            name: "Bash".into(),
            raw: RawJson::from_string_unchecked(
                r#"{"name":"Bash","description":"Run a shell command"}"#.to_string(),
            ),
        }],
        ..Conversation::default()
    };
    conv.messages = vec![
        Message::new("m0", Role::User, vec![Block::text("Fix the failing test")]),
        Message::new(
            "m1",
            Role::Assistant,
            vec![
                Block::text("Running the tests now."),
                Block::text("And reading src/lib.rs."),
            ],
        ),
        Message::new(
            "m2",
            Role::Event,
            vec![Block::text("never sent or counted")],
        ),
    ];
    conv
}

#[test]
fn take_fresh_returns_what_was_computed_once() {
    let conv = conversation();
    let c = TokenCounter::new(TokenizerKind::O200k);
    assert!(c.take_fresh().is_empty());
    let count = c.count_conversation(&conv);
    let fresh = c.take_fresh();
    // System block, tool definition, three message blocks; the event line is not counted.
    assert_eq!(fresh.len(), 5, "{fresh:?}");
    assert_eq!(c.stats().misses, 5);
    let sum: u32 = fresh.iter().map(|(_, n)| n).sum();
    // Every counted token is in a fresh entry, plus 4 per chat message and the system prompt.
    assert_eq!(
        sum as usize + 3 * condense_budget::MESSAGE_OVERHEAD_TOKENS,
        count.total
    );
    // Taken means forgotten; a warm count adds nothing.
    assert!(c.take_fresh().is_empty());
    c.count_conversation(&conv);
    assert!(c.take_fresh().is_empty());
    // A cached text count is fresh too.
    let text = "a text long enough to go through the cache";
    let n = c.count_text_cached(text);
    assert_eq!(c.take_fresh(), vec![(Block::text_hash(text), n as u32)]);
}

/// Drafts (a summary rendered again after each trim) count as the whole text does, reuse the
/// lines counted before, and leave nothing to store.
#[test]
fn drafted_texts_count_whole_and_are_not_kept() {
    let c = TokenCounter::new(TokenizerKind::O200k);
    let lines: Vec<String> = (0..200)
        .map(|i| format!("- Step {i}: look at module {i} and fix what fails.\n"))
        .collect();
    let draft = lines.concat();
    assert!(draft.len() > condense_tokens::LINE_PARTS_FROM);
    let trimmed = lines[..150].concat() + "(3 more omitted)\n";
    assert_eq!(c.count_text_drafted(&draft), c.count_text(&draft));
    let first = c.stats();
    assert!(first.line_parts > 1, "{first:?}");
    assert_eq!(c.count_text_drafted(&trimmed), c.count_text(&trimmed));
    // The second draft shares its first lines with the first: only its new end was added.
    let second = c.stats();
    assert!(
        second.line_parts - first.line_parts <= 2,
        "{first:?} {second:?}"
    );
    // Neither draft is in the cache whole, nor fresh for the store.
    assert_eq!((second.entries, second.misses), (0, 0));
    assert!(c.take_fresh().is_empty());
    assert_eq!(c.count_text_drafted("short"), 1);
}

#[test]
fn preloaded_counts_answer_a_new_process_without_counting() {
    let conv = conversation();
    let first = TokenCounter::new(TokenizerKind::O200k);
    let expected = first.count_conversation(&conv);
    let saved = first.take_fresh();

    let second = TokenCounter::new(TokenizerKind::O200k);
    second.preload(saved.iter().copied());
    // Preloading is neither a hit nor a miss, and is not fresh.
    assert_eq!(
        second.stats(),
        CacheStats {
            hits: 0,
            misses: 0,
            entries: saved.len(),
            line_parts: 0,
        }
    );
    assert!(second.take_fresh().is_empty());
    assert_eq!(second.count_conversation(&conv), expected);
    assert_eq!(second.stats().misses, 0);
    assert_eq!(second.stats().hits, 5);
    assert!(second.take_fresh().is_empty());
}

#[test]
fn preloaded_values_are_used_and_only_new_blocks_are_fresh() {
    let mut conv = conversation();
    let first = TokenCounter::new(TokenizerKind::O200k);
    first.count_conversation(&conv);
    // A wrong stored count shows through: proof the preloaded value is what answers.
    let saved: Vec<(u64, u32)> = first
        .take_fresh()
        .into_iter()
        .map(|(k, n)| (k, n + 1000))
        .collect();

    let second = TokenCounter::new(TokenizerKind::O200k);
    second.preload(saved);
    let inflated = second.count_conversation(&conv);
    let honest = TokenCounter::new(TokenizerKind::O200k).count_conversation(&conv);
    assert_eq!(inflated.total, honest.total + 5 * 1000);

    // A new turn: only its block is computed and fresh.
    let turn = Block::text("The assertion is off by one.");
    let key = turn.content_hash();
    conv.messages
        .push(Message::new("m3", Role::Assistant, vec![turn.clone()]));
    second.count_conversation(&conv);
    let fresh: HashMap<u64, u32> = second.take_fresh().into_iter().collect();
    assert_eq!(fresh.len(), 1);
    assert_eq!(
        fresh[&key] as usize,
        TokenCounter::new(TokenizerKind::O200k).count_block(&turn)
    );
}

#[test]
fn preload_respects_the_capacity() {
    let c = TokenCounter::with_capacity(TokenizerKind::O200k, 3);
    c.preload((0..10u64).map(|k| (k, 1)));
    assert!(c.cache_len() <= 3);
}
