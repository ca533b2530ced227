//! Tests of reading rendered sections back: round trips of generated and awkward records,
//! and the older extractive summaries' sections.

use super::*;
use crate::testing::session;
use crate::FileOp;
use condense_model::Message;
use std::collections::BTreeMap;

fn count(s: &str) -> usize {
    s.len().div_ceil(4)
}

fn written(r: &Retained) -> BTreeMap<String, FileStatus> {
    r.artifacts
        .written()
        .map(|a| (a.path.clone(), a.status))
        .collect()
}

fn lines(r: &Retained) -> Vec<String> {
    r.errors.entries.iter().map(|e| e.line.clone()).collect()
}

fn assert_round_trip(r: &Retained) {
    let out = r.render(usize::MAX / 2, &count);
    let back = Retained::parse(&out.text);
    assert_eq!(written(&back), written(r), "{}", out.text);
    let reads = |r: &Retained| -> Vec<String> {
        let mut v: Vec<String> = r.artifacts.read_only().map(|a| a.path.clone()).collect();
        v.sort();
        v
    };
    assert_eq!(reads(&back), reads(r));
    assert_eq!(lines(&back), lines(r));
    assert_eq!(back.requests, r.requests);
    for (a, b) in r.errors.entries.iter().zip(&back.errors.entries) {
        assert_eq!(
            (&a.tool, &a.about, &a.first_id, a.count),
            (&b.tool, &b.about, &b.first_id, b.count)
        );
        assert_eq!(a.resolved_by, b.resolved_by);
    }
    if !out.compact_files {
        for a in r.artifacts.entries() {
            let b = back.artifacts.get(&a.path);
            assert_eq!(
                b.map(|b| (b.ops, b.last_op, b.created_here)),
                Some((a.ops, a.last_op, a.created_here))
            );
        }
    }
}

#[test]
fn round_trip_on_generated_sessions() {
    for seed in 0..60 {
        let all: Vec<Message> = session(seed, 25).into_iter().flatten().collect();
        assert_round_trip(&Retained::from_messages(&all));
    }
}

#[test]
fn round_trip_of_awkward_text() {
    let mut r = Retained::default();
    for p in [
        "a`b.rs",
        "`x`",
        " spaced name ",
        "dir/sub dir/f.txt",
        "Ünïcode/файл.md",
        "d/",
    ] {
        r.artifacts.record(p, FileOp::Write);
    }
    r.artifacts.record("ro.md", FileOp::Read);
    r.requests = vec![
        "## looks like a heading\n- and a bullet\n  indented\n\n\nafter blanks".into(),
        "```rust\nfn main() {}\n```\n````".into(),
        "Last:\r\nwindows\r\nline ends".into(),
    ];
    r.errors.entries.push(crate::ErrorEntry {
        line: "error: `a` — b (first x) ×2".into(),
        tool: "Bash".into(),
        about: "echo `a` — b".into(),
        key: String::new(),
        first_id: "id with space".into(),
        count: 2,
        resolved_by: Some("fix (1)".into()),
    });
    assert_round_trip(&r);
    // The compact layout too.
    for i in 0..25 {
        r.artifacts.record(&format!("many/f{i}.rs"), FileOp::Edit);
    }
    assert_round_trip(&r);
}

#[test]
fn keys_are_rebuilt_for_shell_and_file_tools() {
    let text = "## Errors\n- Bash: `cargo build` — unresolved (first t1)\n  error[E0308]: mismatched types\n- Edit: `src/a.rs` — unresolved (first t2)\n  String to replace not found\n- Bash: `make…` — unresolved (first t3)\n  make: *** Error 2\n";
    let r = Retained::parse(text);
    let keys: Vec<&str> = r.errors.entries.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [shell_key("cargo build").as_str(), "file:edit:src/a.rs", ""]
    );
    // So a later span's success resolves them.
    let mut merged = r;
    let later = crate::Retained::from_messages(&[
        crate::testing::assistant(
            "a",
            vec![crate::testing::call(
                "t9",
                "Bash",
                serde_json::json!({"command": "cargo build"}),
            )],
        ),
        crate::testing::results("r", vec![crate::testing::result("t9", "Finished", None)]),
    ]);
    merged.merge_later(later);
    assert_eq!(merged.errors.entries[0].resolved_by.as_deref(), Some("t9"));
    assert_eq!(merged.errors.entries[1].resolved_by, None);
}

#[test]
fn older_extractive_summaries() {
    let old = "## Session intent\n- /orchestrator create TODO app\n- Thanks! Please update CLAUDE.md\n  for current changes\n\n## Files\n### Created\n- `/p/types/todo.ts`\n- `/p/CLAUDE.md`\n### Modified\n- `/p/src/app/page.tsx`\n### Read\n- `/p/package.json`\n- `/p/README.md`\n\n## Errors and fixes\n- `toolu_1` Bash `npm run build`: (same command succeeded later: `toolu_9`)\n  > Build error occurred\n  [TypeError: generate is not a function]\n- `toolu_2` Write `/p/x.ts`:\n  File has not been read yet.\n(3 more omitted)\n\n## Decisions\n- We will use hooks.\n";
    let r = Retained::parse(old);
    assert_eq!(
        r.requests,
        [
            "/orchestrator create TODO app",
            "Thanks! Please update CLAUDE.md\nfor current changes"
        ]
    );
    let w = written(&r);
    assert_eq!(w.get("/p/types/todo.ts"), Some(&FileStatus::Created));
    assert_eq!(w.get("/p/src/app/page.tsx"), Some(&FileStatus::Modified));
    assert_eq!(
        r.artifacts.get("/p/README.md").map(|a| a.status),
        Some(FileStatus::Read)
    );
    let e = &r.errors.entries;
    assert_eq!(e.len(), 3);
    assert_eq!(
        (e[0].line.as_str(), e[0].tool.as_str(), e[0].about.as_str()),
        ("> Build error occurred", "Bash", "npm run build")
    );
    assert_eq!(e[1].resolved_by.as_deref(), Some("toolu_9"));
    assert_eq!(
        (e[2].first_id.as_str(), e[2].key.as_str()),
        ("toolu_2", "file:write:/p/x.ts")
    );
    assert_eq!(e[2].resolved_by, None);
}

#[test]
fn other_sections_are_ignored_and_kept_by_strip() {
    let mut r = Retained::default();
    r.requests.push("Do it\n## Decisions\nnot a section".into());
    r.artifacts.record("a.rs", FileOp::Edit);
    let text = format!(
        "Intro line.\n\n{}\n## Decisions\n- Use X.\n\n```\n## Errors\n```\n",
        r.render(1000, &count).text
    );
    let back = Retained::parse(&text);
    assert_eq!(back.requests, r.requests);
    assert_eq!(written(&back), written(&r));
    assert!(back.errors.is_empty());
    assert_eq!(
        strip_rendered(&text),
        "Intro line.\n\n## Decisions\n- Use X.\n\n```\n## Errors\n```"
    );
    assert_eq!(Retained::parse("no sections at all"), Retained::default());
}
