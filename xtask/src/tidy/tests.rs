//! Each tidy check on small synthetic inputs: one that breaks the rule (a finding, at the
//! right line) and one that keeps it (none).

use super::*;
use std::path::PathBuf;

// The call the unwrap_or_default rule looks for, kept out of this file's own lines so tidy
// does not flag its tests.
const UOD: &str = "unwrap_or_default()";

#[test]
fn module_doc_is_required_first() {
    let f = module_doc("a.rs", "use std::fs;\n//! late\n").expect("a finding");
    assert_eq!(
        f.to_string().split(':').take(2).collect::<Vec<_>>(),
        ["a.rs", "1"]
    );
    let f = module_doc("b.rs", "\n\n// plain comment\n").expect("a finding");
    assert_eq!(f.line, 3);
    assert!(module_doc("c.rs", "").is_some());
}

#[test]
fn module_doc_after_blank_lines_and_inner_attributes() {
    assert_eq!(module_doc("a.rs", "//! What it is for.\nuse x;\n"), None);
    assert_eq!(
        module_doc("b.rs", "\n#![cfg(unix)]\n#![allow(dead_code)]\n//! Doc.\n"),
        None
    );
}

const MAIN_RS: &str = r#"
fn main() {
    match task {
        "plugins" => build(),
        "test" => test(rest),
        "tidy" => tidy::tidy(&root()),
        _ => {
            eprintln!("usage");
            if task == "help" { }
        }
    }
}
"#;

#[test]
fn tasks_are_read_from_the_dispatch_match() {
    let tasks = xtask_tasks(MAIN_RS);
    assert_eq!(
        tasks,
        [
            (4, "plugins".to_string()),
            (5, "test".to_string()),
            (6, "tidy".to_string())
        ]
    );
}

#[test]
fn architecture_names_every_package_and_task() {
    let packages = [
        (
            "crates/condense-model/Cargo.toml".to_string(),
            "condense-model".to_string(),
        ),
        ("plugins/snip/Cargo.toml".to_string(), "snip".to_string()),
    ];
    let good = "condense-model  no I/O\nsnip  level 2\nxtask: cargo xtask plugins | test | tidy\n";
    assert_eq!(
        architecture(good, &packages, "xtask/src/main.rs", MAIN_RS),
        []
    );

    // `snip` only inside a longer name, `tidy` only on a line without xtask.
    let bad = "condense-model\nsnippets; snip-x\ncargo xtask plugins | test\nthe tidy task\n";
    let found = architecture(bad, &packages, "xtask/src/main.rs", MAIN_RS);
    let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "plugins/snip/Cargo.toml:1: `snip` is not named in docs/ARCHITECTURE.md",
            "xtask/src/main.rs:6: task `tidy` is not named in docs/ARCHITECTURE.md (on a line mentioning xtask)",
        ]
    );
}

#[test]
fn architecture_without_a_dispatch_is_a_finding() {
    let found = architecture("", &[], "xtask/src/main.rs", "fn main() {}\n");
    assert_eq!(found.len(), 1);
    assert!(found[0].what.contains("dispatch"));
}

#[test]
fn plugin_dependencies_outside_the_allowlist_are_refused_with_the_reason() {
    let manifest = "[package]\nname = \"p\"\n\n[dependencies]\ncondense-abi.workspace = true\n\
                    condense-tokens.workspace = true\nweird = \"1\"\n\n[dev-dependencies]\n\
                    tempfile = \"3\"\n\n[target.'cfg(unix)'.dependencies]\nsql = { package = \"rusqlite\", version = \"0.3\" }\n";
    let found = plugin_deps("plugins/p/Cargo.toml", manifest).expect("parses");
    let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "plugins/p/Cargo.toml:6: plugin depends on `condense-tokens`: plugins count tokens only through the host (Host::count_tokens)",
            "plugins/p/Cargo.toml:7: plugin depends on `weird`: not on the plugin allowlist (PLUGIN_DEPS in xtask/src/tidy.rs)",
            "plugins/p/Cargo.toml:13: plugin depends on `rusqlite`: plugins reach the store only through the host",
        ]
    );
}

#[test]
fn allowed_plugin_dependencies_pass() {
    let manifest =
        "[dependencies]\ncondense-abi.workspace = true\ncondense-budget.workspace = true\n\
                    serde = { workspace = true }\n[dev-dependencies]\ninsta.workspace = true\n";
    assert_eq!(
        plugin_deps("plugins/p/Cargo.toml", manifest).expect("parses"),
        []
    );
}

#[test]
fn plugin_io_is_flagged_outside_tests() {
    let src = "//! A stage.\nuse std::fs;\n// std::net in a comment\nfn f() { let t = std::time::Instant::now(); }\n\
               fn g() { std::env::var(\"X\"); } // tidy: read once for a reason\n\
               #[cfg(test)]\nmod tests { fn h() { std::fs::read(\"x\"); } }\n";
    let lines: Vec<usize> = plugin_io("plugins/p/src/lib.rs", src)
        .iter()
        .map(|f| f.line)
        .collect();
    assert_eq!(lines, [2, 4]);
    assert_eq!(plugin_io("plugins/p/src/a/tests.rs", src), []);
    assert_eq!(plugin_io("plugins/p/src/tests/x.rs", src), []);
}

#[test]
fn plugin_without_io_passes() {
    let src = "//! A stage.\nuse condense_abi::Host;\nfn now(h: &dyn Host) -> u64 { h.now_ms() }\n";
    assert_eq!(plugin_io("plugins/p/src/lib.rs", src), []);
}

#[test]
fn unwrap_or_default_on_serialization_and_hashing_is_flagged() {
    let src = [
        format!("let a = serde_json::to_vec(&m).{UOD};"),
        format!("let k = xxh3_128(&serde_json::to_vec(h).{UOD});"),
        "let body = serde_json::to_vec(&(&m.role, &m.content))".to_string(),
        format!("    .{UOD};"),
        "let t: toml::Table = toml::from_str(".to_string(),
        "    \"a = 1\",".to_string(),
        ")".to_string(),
        format!(".{UOD};"),
        format!("let h = content_hash(&m).{UOD};"),
        format!("let s = to_string_pretty(&r).{UOD};"),
    ]
    .join("\n");
    let found = unwrap_or_default("x.rs", &src);
    let lines: Vec<usize> = found.iter().map(|f| f.line).collect();
    assert_eq!(lines, [1, 2, 4, 8, 9, 10]);
    assert!(found[0].what.contains("serialization"));
    assert!(found[3].what.contains("deserialization"));
    assert!(found[4].what.contains("hash"));
}

#[test]
fn unwrap_or_default_elsewhere_passes() {
    let src = [
        format!("let name = path.file_name().map(|n| n.to_string()).{UOD};"),
        format!("let first = list.first().map(ToString::to_string).{UOD};"),
        format!("let n: u64 = text.parse().ok().{UOD};"),
        // A parse not through serde_json or toml.
        format!("let v = Version::from_str(s).ok().{UOD};"),
        // Four lines up is not the same expression.
        "let x = serde_json::to_vec(&m)?;".to_string(),
        "foo(".to_string(),
        "    a,".to_string(),
        "    b,".to_string(),
        format!(").{UOD};"),
        format!("let a = serde_json::to_vec(&m).{UOD}; // tidy: a Value always serializes"),
        format!("// serde_json::to_vec(&m).{UOD} in a comment"),
    ]
    .join("\n");
    assert_eq!(unwrap_or_default("x.rs", &src), []);
}

/// Writes `files` (path, text) under a fresh folder and returns it.
fn tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let root = std::env::temp_dir().join(format!("xtask-tidy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    root
}

#[test]
fn the_whole_tree_is_walked_and_each_check_scoped() {
    let main_rs = format!("//! Chores.\n{MAIN_RS}");
    let manifest = "[package]\nname = \"x\"\n[dependencies]\nserde = \"1\"\n";
    let root = tree(
        "walk",
        &[
            ("crates/core/Cargo.toml", manifest),
            ("crates/core/src/lib.rs", "//! Core.\nuse std::fs;\n"),
            ("crates/core/src/deep/inner.rs", "fn undocumented() {}\n"),
            ("crates/core/build.rs", "fn main() {}\n"),
            ("plugins/stage/Cargo.toml", manifest),
            ("plugins/stage/src/lib.rs", "//! A stage.\nuse std::fs;\n"),
            // I/O in a plugin's tests is allowed.
            ("plugins/stage/tests/t.rs", "//! Its tests.\nuse std::fs;\n"),
            ("xtask/src/main.rs", &main_rs),
            (
                "docs/ARCHITECTURE.md",
                "core and stage; cargo xtask plugins | test | tidy\n",
            ),
            // Not a package: ignored.
            ("crates/notes/README.md", "no manifest here\n"),
        ],
    );
    let found: Vec<String> = check_tree(&root)
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    let _ = std::fs::remove_dir_all(&root);
    assert_eq!(
        found,
        [
            "crates/core/build.rs:1: module does not open with a `//!` comment saying what it is for",
            "crates/core/src/deep/inner.rs:1: module does not open with a `//!` comment saying what it is for",
            "plugins/stage/src/lib.rs:2: plugin uses `std::fs` (file I/O): plugins do no I/O, the host provides it",
        ]
    );
}

#[test]
fn a_clean_tree_has_no_findings() {
    let main_rs = format!("//! Chores.\n{MAIN_RS}");
    let root = tree(
        "clean",
        &[
            ("crates/core/Cargo.toml", "[package]\nname = \"core\"\n"),
            ("crates/core/src/lib.rs", "//! Core.\n"),
            (
                "plugins/stage/Cargo.toml",
                "[dependencies]\ncondense-abi.workspace = true\n",
            ),
            ("plugins/stage/src/lib.rs", "//! A stage.\n"),
            ("xtask/src/main.rs", &main_rs),
            (
                "docs/ARCHITECTURE.md",
                "core and stage; cargo xtask plugins | test | tidy\n",
            ),
        ],
    );
    let found = check_tree(&root).unwrap();
    let _ = std::fs::remove_dir_all(&root);
    assert_eq!(found, []);
}
