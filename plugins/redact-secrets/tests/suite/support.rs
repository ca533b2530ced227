//! What only this stage's tests need: fake-but-realistic secret generators, a one-text run and
//! a total of the texts the stage can touch (the test host, runner and builders are
//! `condense_testing`'s).

use condense_model::{Block, Content, Conversation, Role};
use condense_testing::{run, text, Applied, MemoryHost};
use redact_secrets::RedactSecrets;

pub const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
pub const UPPER_ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
pub const LOWER_ALNUM: &str = "abcdefghijklmnopqrstuvwxyz0123456789";
pub const BASE64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub const BASE64URL: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
pub const DIGITS: &str = "0123456789";

/// `n` pseudo-random characters of `alphabet`, the same for the same seed.
pub fn rand(seed: u64, n: usize, alphabet: &str) -> String {
    let chars: Vec<char> = alphabet.chars().collect();
    let mut x = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            chars[((x >> 33) % chars.len() as u64) as usize]
        })
        .collect()
}

/// One user message holding `content`.
pub fn text_conv(content: &str) -> Conversation {
    Conversation {
        messages: vec![text("m0", Role::User, content)],
        ..Conversation::default()
    }
}

/// The stage's output for one text, with the report.
pub fn redact_text(stage: &RedactSecrets, text: &str) -> (String, Applied) {
    let out = run(stage, &text_conv(text), &MemoryHost::default());
    (out.conversation.messages[0].content.text(), out)
}

/// Total tokens of every text the stage can touch, with the test host's counter.
pub fn text_tokens(conv: &Conversation) -> usize {
    fn content(c: &Content) -> usize {
        c.blocks.iter().map(block).sum()
    }
    fn block(b: &Block) -> usize {
        let n = |s: &str| s.len().div_ceil(4);
        match b {
            Block::Text(t) => n(&t.text),
            Block::Thinking(t) => n(&t.thinking),
            Block::ToolUse(t) => n(t.input.as_str()),
            Block::ToolResult(r) => content(&r.content),
            Block::Image(_) | Block::Opaque(_) => 0,
        }
    }
    conv.system.as_ref().map_or(0, content)
        + conv
            .messages
            .iter()
            .map(|m| content(&m.content))
            .sum::<usize>()
}
