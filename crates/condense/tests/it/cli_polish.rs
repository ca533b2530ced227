//! The CLI behaviour users expect from cargo and ripgrep (issue 12, items 11-18): small
//! windows, closed pipes, readable time gaps, escaped control characters, the clock for
//! `diff`/`compare`, going on past bad files, `--out`, one-line argument errors, completions
//! and the manual page.

use crate::support::{bin, condense, condense_env, fixture};
use std::process::Stdio;

const CC: &str =
    "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl";
/// A Claude Code session from January 2026: its last message is long before the clock.
const OLD: &str = "transcripts/DRMacIver__claude-reliability/transcript.jsonl";

fn path(rel: &str) -> String {
    fixture(rel).to_str().unwrap().to_string()
}

#[test]
fn a_32000_window_works_and_says_what_it_scaled() {
    // The README's own example exited 2: a 20,000 reserve + 13,000 buffer exceed 32,000.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("small.jsonl");
    let store = dir.path().join("store");
    let run = condense(&[
        "compress",
        &path(CC),
        "--fit",
        "--context-window",
        "32000",
        "--out",
        out.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("window 32,000: output reserve scaled to 8,000"),
        "{}",
        run.stderr
    );
    // stats: one output reserve, explained once, the same everywhere in the budget.
    let run = condense(&["stats", &path(CC), "--context-window", "32000"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let budget: String = run
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Budget"))
        .map(|l| format!("{}\n", l.trim_end()))
        .collect();
    insta::assert_snapshot!("small_window_budget", budget);
    let run = condense(&["stats", &path(CC), "--context-window", "32000", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["budget"]["output_reserve"], 8_000);
    assert_eq!(v["budget"]["effective_window"], 24_000);
    assert_eq!(v["budget_model"]["notes"].as_array().unwrap().len(), 1);
}

/// Runs condense with its stdout a pipe whose reader is gone: the read end is dropped right
/// after the spawn, long before condense has read its input and prints.
fn into_closed_pipe(args: &[&str]) -> (i32, String) {
    let mut child = std::process::Command::new(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn a_closed_pipe_ends_quietly_with_exit_0() {
    for mut args in [
        vec!["plugins", "--details"],
        vec!["diff", &path(CC), "--color", "never"],
        vec!["stats", &path(CC)],
        vec!["stats", &path(CC), "--json"],
        vec!["pipeline", "show"],
        vec!["compress", &path(CC), "--store"],
    ] {
        let store = tempfile::tempdir().unwrap();
        let store_path = store.path().to_str().unwrap().to_string();
        if args.last() == Some(&"--store") {
            args.push(&store_path);
        }
        let (code, stderr) = into_closed_pipe(&args);
        assert!(
            !stderr.contains("Broken pipe") && !stderr.contains("internal error"),
            "{args:?}: {stderr}"
        );
        assert_eq!(code, 0, "{args:?}: {stderr}");
    }
}

#[test]
fn long_time_gaps_read_in_days_and_hours() {
    let dir = tempfile::tempdir().unwrap();
    let run = condense(&[
        "compress",
        &path(OLD),
        "--now",
        "2027-04-20T07:00:00Z",
        "--store",
        dir.path().to_str().unwrap(),
        "--out",
        dir.path().join("o.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The last assistant message is at 2026-01-20T13:20:35Z: 454 days and 17 hours before.
    // 454 d 17 h 39 min, the hours rounded.
    assert!(
        run.stderr.contains("gap 454 d 18 h > 60 min"),
        "{}",
        run.stderr
    );
}

#[test]
fn diff_shows_control_characters_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(5_000);
    let body = serde_json::json!({
        "model": "m", "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                "content": format!("\u{1b}[?25lhidden cursor\u{7}\r\n{long}")}]},
            {"role": "assistant", "content": "done"}
        ]
    });
    let file = dir.path().join("req.json");
    std::fs::write(&file, body.to_string()).unwrap();
    let pipeline = dir.path().join("p.toml");
    std::fs::write(
        &pipeline,
        "[[stage]]\nplugin = \"tool-result-budget\"\n[stage.config]\nmax_result_size_chars = 100\npreview_bytes = 20\n",
    )
    .unwrap();
    for color in ["never", "always"] {
        let run = condense(&[
            "diff",
            file.to_str().unwrap(),
            "-p",
            pipeline.to_str().unwrap(),
            "--color",
            color,
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stdout.contains("\\e[?25lhidden cursor\\x07\\r"),
            "{}",
            run.stdout
        );
        assert!(
            !run.stdout.contains("\u{1b}[?25l"),
            "{color}: {}",
            run.stdout
        );
        assert!(!run.stdout.contains('\u{7}'));
    }
}

#[test]
fn diff_and_compare_run_at_the_clock_like_compress() {
    // An old session: at the clock's time the prompt cache is cold and microcompact clears old
    // results, in compress and in diff alike (diff used to run in 1970: "(no change)").
    let run = condense(&[
        "diff",
        &path(OLD),
        "--stage",
        "microcompact",
        "--color",
        "never",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("(no change)"), "{}", run.stdout);
    assert!(run.stdout.contains("[Old tool result content cleared]"));
    // snapshot stays pinned, and says so.
    let help = words(&condense(&["snapshot", "--help"]).stdout);
    assert!(
        help.contains("pinned (not the clock) so snapshots are reproducible"),
        "{help}"
    );
    let p = path("pipelines/budget-then-snip.toml");
    let dir = tempfile::tempdir().unwrap();
    let mc = dir.path().join("mc.toml");
    std::fs::write(&mc, "[[stage]]\nplugin = \"microcompact\"\n").unwrap();
    let run = condense(&[
        "compare",
        &path(OLD),
        "-p",
        mc.to_str().unwrap(),
        "-p",
        &p,
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let mc_result = &v[0]["pipelines"][0];
    assert!(
        mc_result["tokens_saved"].as_u64().unwrap() > 0,
        "microcompact at the clock clears: {mc_result}"
    );
}

#[test]
fn compare_and_snapshot_go_on_past_a_bad_file_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    std::fs::create_dir_all(sessions.join("store/records")).unwrap();
    std::fs::copy(fixture("edge/anthropic_body.json"), sessions.join("a.json")).unwrap();
    std::fs::write(sessions.join("broken.json"), "{not json").unwrap();
    std::fs::copy(fixture("edge/openai_body.json"), sessions.join("z.json")).unwrap();
    let p = path("pipelines/budget-then-snip.toml");
    let q = path("pipelines/snip-then-budget.toml");
    let run = condense(&["compare", sessions.to_str().unwrap(), "-p", &p, "-p", &q]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout.contains("a.json") && run.stdout.contains("z.json"),
        "{}",
        run.stdout
    );
    let skipped: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("condense: warning: skipped"))
        .collect();
    assert_eq!(skipped.len(), 1, "{}", run.stderr);
    assert!(skipped[0].contains("broken.json"), "{}", run.stderr);
    let snaps = dir.path().join("snaps");
    let run = condense(&[
        "snapshot",
        sessions.to_str().unwrap(),
        "--snapshots",
        snaps.to_str().unwrap(),
        "--accept",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("2 transcripts"), "{}", run.stderr);
    assert!(
        run.stderr
            .lines()
            .last()
            .unwrap()
            .contains("1 file skipped"),
        "{}",
        run.stderr
    );
}

#[test]
fn out_dash_is_stdout_and_out_files_keep_usual_modes() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    let run = condense_env(
        &["compress", &path(CC), "-o", "-", "--store", store],
        &[],
        Some(dir.path()),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !dir.path().join("-").exists(),
        "a file named `-` was written"
    );
    assert!(run.stdout.lines().count() > 10);
    // A new file: 0666 less the umask (022 here), like any new file; a replaced one keeps its mode.
    let out = dir.path().join("small.jsonl");
    let sh = |extra: &str| {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "umask 022; exec \"$0\" compress \"$1\" --store \"$2\" --out \"$3\" {extra}"
            ))
            .arg(bin())
            .arg(fixture(CC))
            .arg(store)
            .arg(&out)
            .output()
            .unwrap()
    };
    assert!(sh("").status.success());
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out), 0o644);
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert!(sh("").status.success());
    assert_eq!(mode(&out), 0o640);
    // A device is written into, never replaced by a file (the atomic rename would).
    let run = condense(&[
        "compress",
        &path(CC),
        "--store",
        store,
        "--out",
        "/dev/null",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!std::fs::metadata("/dev/null").unwrap().is_file());
    // A folder is not a file name: one line saying so.
    for target in [
        dir.path().to_str().unwrap().to_string(),
        format!("{}/nowhere/", dir.path().display()),
    ] {
        let run = condense(&["compress", &path(CC), "--store", store, "--out", &target]);
        let line = run.one_line_failure(2);
        assert!(
            line.contains("folder") && line.contains("give a file name"),
            "{line}"
        );
    }
}

#[test]
fn help_lists_the_formats_and_argument_errors_are_one_line() {
    let help = words(&condense(&["stats", "--help"]).stdout);
    assert!(
        help.contains(
            "[possible values: anthropic, openai, claude-code, openhands, codex, responses, cline]"
        ),
        "{help}"
    );
    for (args, says) in [
        (vec!["stats", "--bogus"], "unexpected argument '--bogus'"),
        (
            vec!["stats", "--top", "x"],
            "invalid value 'x' for '--top <TOP>'",
        ),
        (vec!["bogus"], "unrecognized subcommand 'bogus'"),
        (
            vec!["stats", "--format", "gemini"],
            "[possible values: anthropic,",
        ),
    ] {
        let run = condense(&args);
        let line = run.one_line_failure(2);
        assert!(line.starts_with("condense: error: "), "{line}");
        assert!(line.contains(says) && line.contains("--help`"), "{line}");
    }
}

#[test]
fn top_0_prints_no_tool_table_and_json_is_rounded() {
    let run = condense(&["stats", &path(CC), "--top", "0"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("Top tools"), "{}", run.stdout);
    let run = condense(&["stats", &path(CC), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(v.get("budget_for").is_none(), "{}", run.stdout);
    let dir = tempfile::tempdir().unwrap();
    let run = condense(&[
        "compress",
        &path(CC),
        "--store",
        dir.path().to_str().unwrap(),
        "--out",
        dir.path().join("o.jsonl").to_str().unwrap(),
        "--report",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report: serde_json::Value = serde_json::from_str(&run.stderr).unwrap();
    let mut floats = Vec::new();
    collect_floats(&report, &mut floats);
    assert!(!floats.is_empty());
    for f in floats {
        let text = f.to_string();
        let decimals = text.split_once('.').map_or(0, |(_, d)| d.len());
        assert!(decimals <= 3, "{text}");
    }
}

/// `text` with every run of whitespace one space (help text is wrapped to the terminal).
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn collect_floats(v: &serde_json::Value, out: &mut Vec<f64>) {
    match v {
        serde_json::Value::Number(n) if n.is_f64() => out.push(n.as_f64().unwrap()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_floats(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| collect_floats(x, out)),
        _ => {}
    }
}

#[test]
fn completions_and_the_manual_page() {
    for (shell, mark) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef condense"),
        ("fish", "complete -c condense"),
    ] {
        let run = condense(&["completions", shell]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(run.stdout.contains(mark), "{shell}");
        assert!(run.stdout.contains("compress"), "{shell}");
    }
    let run = condense(&["man"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.starts_with(".ie") || run.stdout.contains(".TH condense"),
        "{}",
        &run.stdout[..200.min(run.stdout.len())]
    );
    assert!(
        run.stdout.contains("CONDENSE COMPRESS") && run.stdout.contains("\\-\\-context\\-window")
    );
}

#[test]
fn errors_are_not_coloured_when_piped_or_with_no_color() {
    let run = condense_env(&["stats", "/no/such/file"], &[("NO_COLOR", "1")], None);
    assert!(
        run.stderr.starts_with("condense: error: "),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains('\u{1b}'));
    let run = condense(&["stats", "/no/such/file"]);
    assert!(!run.stderr.contains('\u{1b}'), "{}", run.stderr);
}

/// The standard output of `condense ARGS` run on a terminal: `script` (util-linux) gives it a
/// pseudo-terminal, whose input ends at once. Its typescript goes to a temporary file, never to
/// /dev/null.
fn on_a_terminal(args: &str, no_color: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let typescript = dir.path().join("typescript");
    let mut cmd = std::process::Command::new("script");
    cmd.args([
        "-qec",
        &format!("{} {args}", bin().display()),
        typescript.to_str().unwrap(),
    ])
    .env("TERM", "xterm")
    .stdin(Stdio::null());
    if no_color {
        cmd.env("NO_COLOR", "1");
    } else {
        cmd.env_remove("NO_COLOR");
    }
    let out = cmd
        .output()
        .expect("this test needs `script` (util-linux) to give condense a terminal");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn errors_are_coloured_on_a_terminal() {
    let text = on_a_terminal("stats --bogus", false);
    assert!(
        text.contains("condense: \u{1b}[1;31merror:\u{1b}[0m unexpected argument '--bogus'"),
        "{text:?}"
    );
    let text = on_a_terminal("stats --bogus", true);
    assert!(
        text.contains("condense: error: unexpected argument"),
        "{text:?}"
    );
}

#[test]
fn stats_says_it_is_reading_a_terminal_and_not_a_pipe() {
    // On a terminal the user may not know condense waits for them: it says so, once.
    let text = on_a_terminal("stats", true);
    assert!(
        text.contains("condense: reading a conversation from standard input (end it with Ctrl-D"),
        "{text:?}"
    );
    // Piped (here: empty), the message would be noise: only the error.
    let run = condense(&["stats", "-"]);
    assert!(
        !run.stderr.contains("reading a conversation"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("the input is empty"), "{}", run.stderr);
}
