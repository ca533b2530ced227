//! Commands on a folder of sessions: every session in it is processed, condense's own stores,
//! hidden folders, outputs and other files are skipped, and a broken file is named in one line
//! and skipped while the others still run (exit 1).

use crate::support::{condense, fixture, Run};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A Claude Code session and a SWE-agent trajectory, both real.
const CLAUDE: &str = "transcripts/DRMacIver__claude-reliability/transcript.jsonl";
const SWE: &str = "transcripts/SWE-agent__SWE-agent/marshmallow-code__marshmallow-1867.traj";

/// A light pipeline, so the folder tests stay quick.
const LIGHT: &str = "[[stage]]\nname = \"budget\"\nplugin = \"tool-result-budget\"\n[stage.config]\nmax_result_size_chars = 3000\npreview_bytes = 200\n";

/// A folder as a user has it, after earlier runs:
///
/// ```text
/// project/
///   session.jsonl                 a real Claude Code session
///   2025/05/01/run.traj           a real SWE-agent trajectory (nested, like ~/.codex/sessions)
///   broken.jsonl                  line 1 is not JSON
///   notes.md                      not a session
///   .condense/                    the store an earlier `compress session.jsonl` left
///   archive/                      a store kept under --store archive (with a record named *.json)
///   .hidden/copy.jsonl            a session in a hidden folder
///   .draft.jsonl                  a hidden session file
/// ```
struct Project {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    dir: PathBuf,
    pipeline: PathBuf,
}

impl Project {
    fn new() -> Project {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let dir = root.join("project");
        let nested = dir.join("2025/05/01");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::copy(fixture(CLAUDE), dir.join("session.jsonl")).unwrap();
        std::fs::copy(fixture(SWE), nested.join("run.traj")).unwrap();
        std::fs::write(
            dir.join("broken.jsonl"),
            "{not json\n{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n",
        )
        .unwrap();
        std::fs::write(dir.join("notes.md"), "# notes\n").unwrap();
        std::fs::create_dir_all(dir.join(".hidden")).unwrap();
        std::fs::copy(fixture(CLAUDE), dir.join(".hidden/copy.jsonl")).unwrap();
        std::fs::copy(fixture(CLAUDE), dir.join(".draft.jsonl")).unwrap();
        let pipeline = root.join("light.toml");
        std::fs::write(&pipeline, LIGHT).unwrap();
        let p = Project {
            _tmp: tmp,
            root,
            dir,
            pipeline,
        };
        // The stores of earlier runs: .condense/ beside the session, and one under --store.
        let session = p.dir.join("session.jsonl");
        let earlier = p.root.join("earlier.jsonl");
        for store in [None, Some(p.dir.join("archive"))] {
            let mut args = vec![
                "compress".to_string(),
                session.display().to_string(),
                "-p".into(),
                p.pipeline.display().to_string(),
                "--out".into(),
                earlier.display().to_string(),
            ];
            if let Some(s) = &store {
                args.extend(["--store".into(), s.display().to_string()]);
            }
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let run = condense(&refs);
            assert_eq!(run.code, 0, "{}", run.stderr);
        }
        assert!(p
            .dir
            .join(".condense")
            .join(condense_store::DB_FILE)
            .is_file());
        // A store may hold records with any name: one that looks like a session must not be
        // taken for one.
        condense_store::Store::open(p.dir.join("archive"))
            .unwrap()
            .record_put("notes", "saved.json", br#"{"messages": []}"#)
            .unwrap();
        assert!(condense_store::looks_like_store(&p.dir.join("archive")));
        p
    }

    fn path(&self) -> &str {
        self.dir.to_str().unwrap()
    }

    fn light(&self) -> &str {
        self.pipeline.to_str().unwrap()
    }

    /// The two sessions, as the commands name them.
    fn sessions(&self) -> Vec<String> {
        vec![
            self.dir.join("2025/05/01/run.traj").display().to_string(),
            self.dir.join("session.jsonl").display().to_string(),
        ]
    }
}

/// The run skipped `broken.jsonl`, saying so in one line, and exited 1 after the others.
fn skipped_the_broken_file(run: &Run, dir: &Path) {
    assert_eq!(run.code, 1, "{}", run.stderr);
    let skips: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("condense: warning: skipped "))
        .collect();
    let broken = dir.join("broken.jsonl").display().to_string();
    assert_eq!(skips.len(), 1, "{}", run.stderr);
    assert!(
        skips[0].starts_with(&format!(
            "condense: warning: skipped {broken}:1: invalid JSON"
        )),
        "{}",
        skips[0]
    );
    let last = run.stderr.lines().last().unwrap();
    assert!(last.contains("1 file skipped"), "{}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x[key].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

#[test]
fn stats_on_a_folder_gives_each_session_and_a_total() {
    let p = Project::new();
    let run = condense(&["stats", p.path(), "--json"]);
    skipped_the_broken_file(&run, &p.dir);
    let v = json(&run.stdout);
    assert_eq!(strings(&v["files"], "source"), p.sessions());
    let sum: u64 = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["total_tokens"].as_u64().unwrap())
        .sum();
    assert!(sum > 10_000);
    assert_eq!(v["total"]["total_tokens"], sum);
    assert_eq!(v["total"]["files"], 2);
    assert_eq!(v["skipped"].as_array().unwrap().len(), 1);
    assert!(v["skipped"][0]["file"]
        .as_str()
        .unwrap()
        .ends_with("broken.jsonl"));

    // The table: each file's own table, then a row per file and the total.
    let run = condense(&["stats", p.path()]);
    skipped_the_broken_file(&run, &p.dir);
    let total_table = run.stdout.split("\n\n").last().unwrap();
    let rows: Vec<&str> = total_table.lines().collect();
    assert!(
        rows[0].ends_with("project: 2 files, 1 file skipped"),
        "{}",
        rows[0]
    );
    assert!(rows[2].trim_start().starts_with("2025/05/01/run.traj"));
    assert!(rows[3].trim_start().starts_with("session.jsonl"));
    assert!(rows[4].trim_start().starts_with("total"), "{total_table}");
    assert_eq!(rows.len(), 5, "{total_table}");
    assert_eq!(
        run.stdout.matches("Budget").count(),
        2,
        "one table per file"
    );
}

#[test]
fn compress_on_a_folder_writes_beside_each_input_and_never_rereads_its_outputs() {
    let p = Project::new();
    let run = condense(&["compress", p.path(), "-p", p.light()]);
    skipped_the_broken_file(&run, &p.dir);
    let outputs = [
        p.dir.join("session.condensed.jsonl"),
        p.dir.join("2025/05/01/run.condensed.traj"),
    ];
    for out in &outputs {
        assert!(out.is_file(), "{} missing: {}", out.display(), run.stderr);
    }
    assert!(!p.dir.join(".hidden/copy.condensed.jsonl").exists());
    assert!(!p
        .dir
        .join("archive/records/notes/saved.condensed.json")
        .exists());
    // The summary table: a row per file (the broken one too, as skipped) and the total.
    let table: Vec<&str> = run
        .stderr
        .lines()
        .skip_while(|l| !l.starts_with("condense: 2 files in "))
        .collect();
    assert!(table[0].contains("NAME.condensed.EXT"), "{}", run.stderr);
    assert!(table[1].contains("before") && table[1].contains("status"));
    assert!(table[2].trim_start().starts_with("2025/05/01/run.traj"));
    assert!(table[2].ends_with("written"), "{}", table[2]);
    assert!(table[3].trim_start().starts_with("broken.jsonl") && table[3].ends_with("skipped"));
    assert!(table[4].trim_start().starts_with("session.jsonl") && table[4].ends_with("written"));
    assert!(table[5].trim_start().starts_with("total"));

    // Each output expands back to its input with the store beside the input.
    for (out, input, store) in [
        (
            &outputs[0],
            p.dir.join("session.jsonl"),
            p.dir.join(".condense"),
        ),
        (
            &outputs[1],
            p.dir.join("2025/05/01/run.traj"),
            p.dir.join("2025/05/01/.condense"),
        ),
    ] {
        let restored = p.root.join("restored");
        let run = condense(&[
            "expand",
            out.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--out",
            restored.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(
            std::fs::read(&restored).unwrap(),
            std::fs::read(&input).unwrap(),
            "{}",
            input.display()
        );
    }

    // A second run reads the same two sessions, not the outputs of the first.
    let before: Vec<Vec<u8>> = outputs.iter().map(|o| std::fs::read(o).unwrap()).collect();
    let again = condense(&["compress", p.path(), "-p", p.light(), "--report", "json"]);
    skipped_the_broken_file(&again, &p.dir);
    let json_start = again.stderr.find("[\n").unwrap();
    let json_end = again.stderr.rfind("]\n").unwrap() + 1;
    let rows = json(&again.stderr[json_start..json_end]);
    let mut files = strings(&rows, "file");
    files.retain(|f| !f.ends_with("broken.jsonl"));
    assert_eq!(files, p.sessions());
    assert!(!p.dir.join("session.condensed.condensed.jsonl").exists());
    let after: Vec<Vec<u8>> = outputs.iter().map(|o| std::fs::read(o).unwrap()).collect();
    assert_eq!(before, after, "the same inputs give the same outputs");
}

#[test]
fn compress_out_dir_mirrors_the_folder_and_is_not_walked() {
    let p = Project::new();
    // --out inside the folder: the next run must not take the outputs for sessions.
    let out = p.dir.join("small");
    let out_s = out.to_str().unwrap();
    for _ in 0..2 {
        let run = condense(&["compress", p.path(), "-p", p.light(), "--out", out_s]);
        skipped_the_broken_file(&run, &p.dir);
        assert!(run.stderr.contains("2 files in "), "{}", run.stderr);
        assert!(
            run.stderr.contains(&format!("outputs under {out_s}")),
            "{}",
            run.stderr
        );
    }
    let mut written: Vec<String> = Vec::new();
    let mut stack = vec![out.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(&out).unwrap();
                written.push(rel.display().to_string());
            }
        }
    }
    written.sort();
    assert_eq!(written, ["2025/05/01/run.traj", "session.jsonl"]);
    assert!(!p.dir.join("session.condensed.jsonl").exists());
}

#[test]
fn compress_on_a_folder_refuses_stdout_and_one_session_id() {
    let p = Project::new();
    let a_file = fixture(CLAUDE).display().to_string();
    let cases: [(&[&str], &str); 3] = [
        (&["--out", "-"], "not to standard output"),
        (&["--session", "s"], "--session names one session"),
        (&["--out", &a_file], "is a file; give a folder"),
    ];
    for (extra, expected) in cases {
        let run = condense(&[&["compress", p.path(), "-p", p.light()], extra].concat());
        let line = run.one_line_failure(2);
        assert!(line.contains(expected), "{extra:?}: {line}");
    }
    assert!(
        !p.dir.join("session.condensed.jsonl").exists(),
        "nothing ran"
    );

    // A folder without sessions is a usage error too.
    let empty = p.root.join("empty");
    std::fs::create_dir_all(empty.join(".condense")).unwrap();
    let run = condense(&["stats", empty.to_str().unwrap()]);
    assert!(run.one_line_failure(2).contains("no session files"));
}

#[test]
fn eval_compare_snapshot_and_diff_take_the_same_files() {
    let p = Project::new();
    let run = condense(&[
        "eval",
        p.path(),
        "-p",
        p.light(),
        "--baseline",
        "none",
        "--min-tokens",
        "0",
        "--json",
    ]);
    skipped_the_broken_file(&run, &p.dir);
    let v = json(&run.stdout);
    assert_eq!(strings(&v["inputs"], "file"), p.sessions());
    assert_eq!(v["unreadable"].as_array().unwrap().len(), 1);

    let run = condense(&[
        "compare",
        p.path(),
        "-p",
        p.light(),
        "-p",
        p.light(),
        "--json",
    ]);
    skipped_the_broken_file(&run, &p.dir);
    assert_eq!(strings(&json(&run.stdout), "transcript"), p.sessions());

    let snaps = p.root.join("snaps");
    let args = [
        "snapshot",
        p.path(),
        "-p",
        p.light(),
        "--snapshots",
        snaps.to_str().unwrap(),
        "--color",
        "never",
    ];
    let run = condense(&[&args[..], &["--accept"]].concat());
    skipped_the_broken_file(&run, &p.dir);
    let mut folders: Vec<String> = std::fs::read_dir(&snaps)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    assert_eq!(
        folders,
        ["01__run.traj", "Cargo.toml", "project__session.jsonl"]
    );
    assert!(run.stderr.contains("2 transcripts"), "{}", run.stderr);
    // Snapshots that match: still exit 1, for the broken file.
    let run = condense(&args);
    skipped_the_broken_file(&run, &p.dir);
    assert!(
        run.stderr.contains("4 unchanged, 0 changed"),
        "{}",
        run.stderr
    );

    let run = condense(&["diff", p.path(), "-p", p.light(), "--color", "never"]);
    skipped_the_broken_file(&run, &p.dir);
    let headers: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("════ "))
        .collect();
    assert_eq!(
        headers,
        p.sessions()
            .iter()
            .map(|s| format!("════ {s} ════"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn every_folder_command_says_so_in_its_help() {
    for command in ["stats", "compress", "diff", "snapshot", "compare", "eval"] {
        let run = condense(&[command, "--help"]);
        assert_eq!(run.code, 0, "{command}");
        // clap wraps the text to the terminal: compare with the words only.
        let words = run.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
        for needle in [
            "Folders: given a folder",
            ".json, .jsonl and .traj",
            "Hidden folders, condense's stores",
            "named on stderr in one line and skipped",
            "1 when a file was skipped",
        ] {
            assert!(words.contains(needle), "{command}: {needle}");
        }
    }
    let run = condense(&["compress", "--help"]);
    let words = run.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("as NAME.condensed.EXT") && words.contains("with --out DIR under DIR"));
}

#[test]
fn compress_fit_on_a_folder_writes_what_does_not_fit_and_exits_1() {
    let p = Project::new();
    std::fs::remove_file(p.dir.join("broken.jsonl")).unwrap();
    // No stage can shrink anything, and neither session fits 6,000 less the 500 output reserve.
    let empty = p.root.join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let run = condense(&[
        "compress",
        p.path(),
        "--fit",
        "-p",
        empty.to_str().unwrap(),
        "--context-window",
        "6000",
        "--max-output-tokens",
        "500",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let last = run.stderr.lines().last().unwrap();
    assert!(
        last.starts_with(
            "condense: error: 2 files do not fit the window after forcing every level"
        ),
        "{last}"
    );
    let rows: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.ends_with("does not fit"))
        .collect();
    assert_eq!(rows.len(), 2, "{}", run.stderr);
    assert!(
        p.dir.join("session.condensed.jsonl").is_file(),
        "the best result is written"
    );

    // Without the broken file and with room, a folder run exits 0.
    let run = condense(&["compress", p.path(), "-p", p.light(), "--fit"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains("skipped"), "{}", run.stderr);
}
