//! What only this stage's tests need: PNG images with a real header (snip reads their size),
//! a compact summary of what changed, and the never-grows check. The test host, the runner and
//! the block builders come from `condense_testing`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use condense_model::{Block, Conversation, Image, ImageSource, RawJson, Role, ToolResult};
use condense_testing::MemoryHost;
use serde_json::{json, Value};

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Base64 of a PNG: the 8-byte signature, a real IHDR chunk (`width` x `height`, 8-bit RGBA,
/// with its CRC), then `filler` bytes standing in for the image data.
pub fn png_base64(width: u32, height: u32, filler: usize) -> String {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut chunk = b"IHDR".to_vec();
    chunk.extend(width.to_be_bytes());
    chunk.extend(height.to_be_bytes());
    chunk.extend([8, 6, 0, 0, 0]);
    bytes.extend(13u32.to_be_bytes());
    bytes.extend(&chunk);
    bytes.extend(crc32(&chunk).to_be_bytes());
    bytes.extend((0..filler).map(|i| (i % 251) as u8));
    STANDARD.encode(bytes)
}

pub fn png(width: u32, height: u32, filler: usize) -> Block {
    Block::Image(Image {
        source: ImageSource::Base64 {
            media_type: "image/png".into(),
            data: png_base64(width, height, filler),
        },
        extra: RawJson::default(),
    })
}

/// Top-level tool results of the chat messages, with their message id.
pub fn results(conv: &Conversation) -> Vec<(&str, &ToolResult)> {
    conv.tool_results()
        .filter(|r| r.role != Role::Event)
        .map(|r| (r.message_id, r.result))
        .collect()
}

fn first_line_with<'a>(text: &'a str, needle: &str) -> Option<&'a str> {
    text.lines().find(|l| l.contains(needle))
}

/// What changed, compactly: each deduplicated / truncated tool result and each stripped image,
/// checking on the way that every original is in the store.
pub fn summary(input: &Conversation, output: &Conversation, host: &MemoryHost) -> Value {
    let names = input.tool_names_by_id();
    let stored = |text: &str| host.store.borrow().values().any(|v| v == text.as_bytes());
    let (mut deduplicated, mut truncated) = (Vec::new(), Vec::new());
    for ((message_id, before), (_, after)) in results(input).into_iter().zip(results(output)) {
        assert_eq!(before.tool_use_id, after.tool_use_id);
        assert_eq!(
            (before.is_error, &before.extra),
            (after.is_error, &after.extra)
        );
        let (old, new) = (before.content.text(), after.content.text());
        let tool = names
            .get(before.tool_use_id.as_str())
            .copied()
            .unwrap_or("?");
        if let Some(marker) = first_line_with(&new, "[Duplicate file content") {
            assert!(stored(&old), "original of {} stored", before.tool_use_id);
            deduplicated.push(json!({
                "message": message_id, "id": before.tool_use_id, "tool": tool,
                "chars": old.chars().count(), "marker": marker,
            }));
        } else if let Some(notice) = first_line_with(&new, "[truncated") {
            assert!(stored(&old), "original of {} stored", before.tool_use_id);
            let kept = new.split("\n... [truncated").next().unwrap();
            assert!(old.starts_with(kept));
            truncated.push(json!({
                "message": message_id, "id": before.tool_use_id, "tool": tool,
                "chars": old.chars().count(), "bytes": old.len(), "head_bytes": kept.len(),
                "after_bytes": new.len(), "notice": notice,
            }));
        }
    }
    let mut images = Vec::new();
    for (a, b) in input.messages.iter().zip(&output.messages) {
        let inner = |m: &condense_model::Message| -> Vec<Block> {
            m.content
                .blocks
                .iter()
                .flat_map(|b| match b {
                    Block::ToolResult(r) => r.content.blocks.clone(),
                    other => vec![other.clone()],
                })
                .collect()
        };
        for (x, y) in inner(a).iter().zip(inner(b).iter()) {
            if let (Block::Image(img), Block::Text(t)) = (x, y) {
                let ImageSource::Base64 { data, .. } = &img.source else {
                    panic!()
                };
                assert!(stored(data), "image data stored");
                images.push(json!({ "message": a.id, "marker": t.text }));
            }
        }
    }
    json!({
        "tool_results": results(input).len(),
        "deduplicated": deduplicated,
        "truncated": truncated,
        "images": images,
    })
}

/// Every tool result and every block of the output is at most as long as in the input.
pub fn assert_never_grows(input: &Conversation, output: &Conversation) {
    assert_eq!(input.messages.len(), output.messages.len());
    for (a, b) in input.messages.iter().zip(&output.messages) {
        assert_eq!(a.content.blocks.len(), b.content.blocks.len(), "{}", a.id);
        for (x, y) in a.content.blocks.iter().zip(&b.content.blocks) {
            assert!(
                y.text_len() <= x.text_len(),
                "{} grew in {}",
                x.kind(),
                a.id
            );
        }
    }
}
