//! Test helpers: messages in a line, and a deterministic generator of agent sessions.

use condense_model::{Block, Content, Message, RawJson, Role, ToolResult};

pub(crate) fn user(id: &str, text: &str) -> Message {
    Message::new(id, Role::User, vec![Block::text(text)])
}

pub(crate) fn assistant(id: &str, blocks: Vec<Block>) -> Message {
    Message::new(id, Role::Assistant, blocks)
}

pub(crate) fn call(id: &str, name: &str, input: serde_json::Value) -> Block {
    Block::tool_use(id, name, RawJson::from_value(&input))
}

pub(crate) fn result(id: &str, text: &str, is_error: Option<bool>) -> Block {
    Block::ToolResult(ToolResult {
        is_error,
        ..ToolResult::new(id, Content::string(text))
    })
}

pub(crate) fn results(id: &str, blocks: Vec<Block>) -> Message {
    Message::new(id, Role::User, blocks)
}

/// A small deterministic pseudo-random sequence (an LCG).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

/// A generated session as API rounds (each round: maybe a prompt, an assistant message with
/// calls, a user message with their results), so any split between rounds keeps every call
/// with its result.
pub(crate) fn session(seed: u64, rounds: usize) -> Vec<Vec<Message>> {
    let mut rng = Rng::new(seed);
    let paths = ["src/a.rs", "src/b.rs", "README.md", "docs/c.md", "x y.txt"];
    let prompts = [
        "Fix the build",
        "Add tests\nfor the parser",
        "Fix the build",
        "Use `cargo` not make",
    ];
    let mut out = Vec::new();
    let mut n = 0;
    for r in 0..rounds {
        let mut round = Vec::new();
        if rng.below(3) == 0 {
            round.push(user(&format!("u{r}"), prompts[rng.below(prompts.len())]));
        }
        let mut calls = Vec::new();
        let mut outs = Vec::new();
        for _ in 0..=rng.below(3) {
            n += 1;
            let id = format!("t{n}");
            let path = paths[rng.below(paths.len())];
            let failed = rng.below(4) == 0;
            let (block, text, flag) = match rng.below(8) {
                0 => (
                    call(&id, "Read", serde_json::json!({"file_path": path})),
                    "1→x",
                    None,
                ),
                1 => (
                    call(
                        &id,
                        "Write",
                        serde_json::json!({"file_path": path, "content": "x"}),
                    ),
                    if failed {
                        "<tool_use_error>File has not been read yet.</tool_use_error>"
                    } else {
                        "ok"
                    },
                    failed.then_some(true),
                ),
                2 => (
                    call(&id, "Edit", serde_json::json!({"file_path": path})),
                    if failed {
                        "String to replace not found in file."
                    } else {
                        "ok"
                    },
                    failed.then_some(true),
                ),
                3 => (
                    call(
                        &id,
                        "Bash",
                        serde_json::json!({"command": format!("rm -f '{path}'")}),
                    ),
                    "",
                    None,
                ),
                4 => (
                    call(
                        &id,
                        "Bash",
                        serde_json::json!({"command": format!("mv '{path}' src/moved.rs")}),
                    ),
                    "",
                    None,
                ),
                5 => (
                    call(&id, "Bash", serde_json::json!({"command": "cargo build"})),
                    if failed {
                        "error[E0308]: mismatched types"
                    } else {
                        "Finished"
                    },
                    Some(failed),
                ),
                6 => (
                    call(
                        &id,
                        "shell",
                        serde_json::json!({"command": ["bash", "-lc", "pytest -q"]}),
                    ),
                    if failed {
                        "Exit code: 1\nOutput:\nTraceback (most recent call last):\n  File \"t.py\"\nAssertionError: 1 != 2"
                    } else {
                        "Exit code: 0\nOutput:\n3 passed"
                    },
                    None,
                ),
                _ => (
                    call(
                        &id,
                        "apply_patch",
                        serde_json::json!({"input": format!("*** Begin Patch\n*** Add File: {path}\n+x\n*** End Patch")}),
                    ),
                    if failed {
                        "error: patch failed"
                    } else {
                        "Done"
                    },
                    failed.then_some(true),
                ),
            };
            calls.push(block);
            outs.push(result(&id, text, flag));
        }
        round.push(assistant(&format!("a{r}"), calls));
        round.push(results(&format!("r{r}"), outs));
        out.push(round);
    }
    out
}
