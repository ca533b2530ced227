//! Counting with the default tokenizers builds nothing: no vocabulary is deserialized and no
//! regex compiled, so a process that counts a few words allocates next to nothing (bpe-openai's
//! first count allocated its 32 MB automaton and more). Alone in its test binary so that no
//! other test's allocations interfere.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_model::{Block, Conversation, Message, Role};
use condense_tokens::{TokenCounter, TokenizerKind};

/// The anonymous (heap) memory this process holds now, in KiB. Tables read in place from the
/// binary are file-backed pages, shared and not counted; a deserialized table stays allocated
/// for the life of the process and is.
#[cfg(target_os = "linux")]
fn anon_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[cfg(target_os = "linux")]
#[test]
fn counting_a_few_words_allocates_no_tables() {
    let mut conv = Conversation::default();
    conv.messages.push(Message::new(
        "m0",
        Role::User,
        vec![Block::text("hello world, ſome Unicode: é中🎉 and 12345")],
    ));
    let before = anon_kib();
    for kind in [TokenizerKind::O200k, TokenizerKind::Cl100k] {
        let counter = TokenCounter::new(kind);
        assert!(counter.count_conversation(&conv).total > 4);
        assert_eq!(counter.count_text("hello world"), 2);
    }
    let grown = anon_kib().saturating_sub(before);
    assert!(
        grown < 4 * 1024,
        "counting a few words allocated {grown} KiB"
    );
}
