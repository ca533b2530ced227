//! The host against real, dynamically loaded plugins: misbehaving ones included.

use crate::support::{bin, condense, fixture, test_plugin};
use std::path::Path;

fn small_input(dir: &Path) -> String {
    let p = dir.join("in.json");
    std::fs::write(
        &p,
        r#"{"model":"gpt-4o","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"hello there"},{"role":"assistant","content":"hi"}]}"#,
    )
    .unwrap();
    p.display().to_string()
}

fn pipeline(dir: &Path, body: &str) -> String {
    let p = dir.join("p.toml");
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

fn faulty(mode: &str, extra: &str) -> String {
    format!(
        "[[stage]]\nname = \"faulty\"\nplugin = \"{}\"\n{extra}\n[stage.config]\nmode = \"{mode}\"\n",
        test_plugin("test-faulty").display()
    )
}

#[test]
fn panicking_stage_is_one_line_and_host_survives() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    let p = pipeline(dir.path(), &faulty("panic", ""));
    let run = condense(&["compress", &input, "--pipeline", &p]);
    let line = run.one_line_failure(1);
    assert!(
        line.starts_with(
            "condense: error: stage `faulty` failed: panicked: test-faulty was told to panic"
        ),
        "{line}"
    );
    assert!(run.stdout.is_empty(), "no partial output: {}", run.stdout);
}

#[test]
fn on_error_skip_continues_unchanged_and_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    let p = pipeline(dir.path(), &faulty("error", "on_error = \"skip\""));
    let run = condense(&["compress", &input, "--pipeline", &p, "--report", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&input).unwrap()).unwrap();
    assert_eq!(out, original, "the conversation continues unchanged");
    let report: serde_json::Value = serde_json::from_str(&run.stderr).unwrap();
    assert_eq!(report["stages"][0]["status"], "skipped");
    assert_eq!(
        report["runs"][0]["stages"][0]["error"],
        "test-faulty was told to fail"
    );
}

#[test]
fn rejected_config_names_the_stage_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    let p = pipeline(dir.path(), &faulty("explode", ""));
    let line = condense(&["compress", &input, "--pipeline", &p])
        .one_line_failure(2)
        .to_string();
    assert!(
        line.contains("stage `faulty`: config rejected: ")
            && line.contains("p.toml:3:10: mode must be one of"),
        "{line}"
    );
    let p = pipeline(dir.path(), &format!("{}colour = 1\n", faulty("noop", "")));
    let line = condense(&["compress", &input, "--pipeline", &p])
        .one_line_failure(2)
        .to_string();
    assert!(
        line.contains("unknown config key `colour` (known: mode)"),
        "{line}"
    );
}

#[test]
fn missing_plugin_lists_the_folders_searched() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    let p = pipeline(
        dir.path(),
        "[plugins]\ndirs = [\"nowhere\"]\n[[stage]]\nplugin = \"no-such-stage\"\n",
    );
    let run = condense(&["compress", &input, "--pipeline", &p]);
    let line = run.one_line_failure(2);
    assert!(line.contains("plugin `no-such-stage` not found"), "{line}");
    assert!(
        line.contains("nowhere"),
        "lists the pipeline's folder: {line}"
    );
    // The folder `cargo xtask plugins` fills, beside the binary's profile folder.
    let build_folder = bin().parent().unwrap().parent().unwrap().join("plugins");
    let searched = line
        .split(" in: ")
        .nth(1)
        .and_then(|rest| rest.split("); run").next())
        .unwrap_or_default();
    assert!(
        searched.contains(&build_folder.display().to_string()),
        "lists the build folder: {line}"
    );
}

#[test]
fn abi_version_mismatch_names_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    let forged = test_plugin("test-faulty-forged");
    let p = pipeline(
        dir.path(),
        &format!(
            "[[stage]]\nname = \"old\"\nplugin = \"{}\"\n",
            forged.display()
        ),
    );
    let line = condense(&["compress", &input, "--pipeline", &p])
        .one_line_failure(2)
        .to_string();
    assert!(line.contains("ABI version mismatch"), "{line}");
    assert!(
        line.contains(&format!("ABI {}", condense_abi::ABI_VERSION)) && line.contains("99.0.0"),
        "{line}"
    );
}

#[test]
fn a_library_that_is_not_a_plugin_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    let fake = dir
        .path()
        .join(format!("libfake{}", std::env::consts::DLL_SUFFIX));
    std::fs::write(&fake, b"not a library at all").unwrap();
    let p = pipeline(
        dir.path(),
        &format!("[[stage]]\nplugin = \"{}\"\n", fake.display()),
    );
    // A configuration problem (exit 2), refused before the dynamic loader sees it.
    let line = condense(&["compress", &input, "--pipeline", &p])
        .one_line_failure(2)
        .to_string();
    assert!(
        line.contains("not a usable plugin library: not a shared library (it is a text file)"),
        "{line}"
    );
}

#[test]
fn a_stage_that_grows_the_conversation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    let p = pipeline(dir.path(), &faulty("grow", ""));
    let line = condense(&["compress", &input, "--pipeline", &p])
        .one_line_failure(1)
        .to_string();
    assert!(line.contains("made the conversation bigger"), "{line}");
}

#[test]
fn pipeline_errors_carry_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    let p = pipeline(
        dir.path(),
        "[[stage]]\nplugin = \"snip\"\nenabled = \"yes\"\n",
    );
    let line = condense(&["compress", &input, "--pipeline", &p])
        .one_line_failure(2)
        .to_string();
    assert!(line.contains("p.toml:3:11:"), "{line}");
    let line = condense(&["pipeline", "check", &p])
        .one_line_failure(2)
        .to_string();
    assert!(line.contains("p.toml:3:11:"), "{line}");
}

#[test]
fn disabled_reordered_and_duplicated_stages_follow_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("edge/openai-big-tool-results.json");
    let faulty_path = test_plugin("test-faulty");
    let body = format!(
        r#"
[[stage]]
name = "boom"
plugin = "{faulty}"
enabled = false
[stage.config]
mode = "panic"

[[stage]]
name = "budget-tight"
plugin = "tool-result-budget"
[stage.config]
max_result_size_chars = 3000

[[stage]]
name = "budget-loose"
plugin = "tool-result-budget"
[stage.config]
max_result_size_chars = 1000
preview_bytes = 500
"#,
        faulty = faulty_path.display()
    );
    let p = pipeline(dir.path(), &body);
    let store = dir.path().join("store");
    let run = condense(&[
        "compress",
        input.to_str().unwrap(),
        "--pipeline",
        &p,
        "--report",
        "json",
        "--store",
        store.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report: serde_json::Value = serde_json::from_str(&run.stderr).unwrap();
    let stages = report["stages"].as_array().unwrap();
    let names: Vec<&str> = stages.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["boom", "budget-tight", "budget-loose"]);
    assert_eq!(stages[0]["status"], "disabled");
    assert!(
        stages[1]["tokens_saved"].as_u64().unwrap() > 0,
        "first instance acts: {stages:?}"
    );
    assert!(
        stages[2]["tokens_saved"].as_u64().unwrap() > 0,
        "second instance, lower limit, acts too: {stages:?}"
    );
}

#[test]
fn pipeline_show_prints_the_embedded_default() {
    let run = condense(&["pipeline", "show"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("plugin = \"tool-result-budget\""),
        "{}",
        run.stdout
    );
    // The setting for the system prompt and tools a file does not hold is there to edit.
    assert!(
        run.stdout.contains("\nfixed_tokens = 0\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn plugins_lists_shipped_plugins_with_versions() {
    let run = condense(&["plugins", "--details"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("tool-result-budget"), "{}", run.stdout);
    assert!(
        run.stdout.contains("max_result_size_chars"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("test-faulty"),
        "test plugins stay out of the list: {}",
        run.stdout
    );
}

#[test]
fn a_stage_that_orphans_a_tool_result_is_caught_by_the_guard() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    let p = pipeline(dir.path(), &faulty("orphan-tool-result", ""));
    let line = condense(&["compress", &input, "--pipeline", &p])
        .one_line_failure(1)
        .to_string();
    assert!(
        line.contains(
            "stage `faulty` failed: broke an invariant: orphaned tool_result for `no-such-call`"
        ),
        "{line}"
    );
    // With on_error = "skip" the broken output is discarded and the pipeline goes on.
    let p = pipeline(
        dir.path(),
        &faulty("orphan-tool-result", "on_error = \"skip\""),
    );
    let run = condense(&["compress", &input, "--pipeline", &p]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !run.stdout.contains("no-such-call"),
        "the orphan never reaches the output"
    );
    assert!(
        run.stderr.contains("skipped: broke an invariant"),
        "{}",
        run.stderr
    );
}

// Build ids are read from ELF files only: elsewhere every load is checked.
#[cfg(target_os = "linux")]
#[test]
fn a_layout_check_passed_once_is_not_run_again_for_the_same_library() {
    use condense_abi::{CheckedLayouts, Plugin};
    let faulty = test_plugin("test-faulty");
    let mut checked = CheckedLayouts::default();
    Plugin::load_with(&faulty, &mut checked).unwrap();
    assert_eq!((checked.checks_run(), checked.len()), (1, 1));
    assert!(checked.changed(), "a new pass is worth writing");

    // The next process reads the record back: the same library loads without the check.
    let mut next = CheckedLayouts::parse(&checked.to_text());
    Plugin::load_with(&faulty, &mut next).unwrap();
    // A copy under another name holds the same linked content (same build id): no check.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join(faulty.file_name().unwrap());
    std::fs::copy(&faulty, &copy).unwrap();
    let plugin = Plugin::load_with(&copy, &mut next).unwrap();
    assert_eq!(next.checks_run(), 0);
    assert!(!next.changed());
    assert_eq!(plugin.metadata(&copy).unwrap().name, "test-faulty");

    // Another library is checked; one that fails to load is not recorded.
    Plugin::load_with(&crate::support::built_plugin("snip"), &mut next).unwrap();
    let forged = Plugin::load_with(&test_plugin("test-faulty-forged"), &mut next);
    assert!(forged.is_err());
    assert_eq!((next.checks_run(), next.len()), (2, 2));
}

// Build ids are read from ELF files only: elsewhere every load is checked.
#[cfg(target_os = "linux")]
#[test]
fn the_record_of_checks_lives_in_the_user_cache_and_is_written_only_when_new() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    let p = pipeline(
        dir.path(),
        "[[stage]]\nname = \"snip\"\nplugin = \"snip\"\n[[stage]]\nname = \"mc\"\nplugin = \"microcompact\"\n[[stage]]\nname = \"snip2\"\nplugin = \"snip\"\n",
    );
    let cache = dir.path().join("cache");
    let home = dir.path().join("home");
    let env = [
        ("XDG_CACHE_HOME", cache.to_str().unwrap()),
        ("HOME", home.to_str().unwrap()),
    ];
    let record = cache.join("condense").join("checked-plugin-layouts");
    // What a write killed half-way would have left (a temp file of a process that is gone).
    std::fs::create_dir_all(record.parent().unwrap()).unwrap();
    let orphan = record.with_file_name(".tmp-4000000000-abcdef");
    std::fs::write(&orphan, "half").unwrap();
    let compress = || {
        let run = crate::support::condense_env(&["compress", &input, "--pipeline", &p], &env, None);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.stdout
    };
    let first = compress();
    assert!(
        !orphan.exists(),
        "the orphan temp file is removed when the record is written"
    );
    let text = std::fs::read_to_string(&record).unwrap();
    // Two libraries (snip twice is one library): a header line and one line each.
    assert_eq!(text.lines().count(), 3, "{text}");
    let written = std::fs::metadata(&record).unwrap().modified().unwrap();
    assert_eq!(compress(), first);
    assert_eq!(std::fs::read_to_string(&record).unwrap(), text);
    assert_eq!(
        std::fs::metadata(&record).unwrap().modified().unwrap(),
        written
    );

    // A damaged record costs only the checks, and is written again.
    std::fs::write(&record, "not a record\n").unwrap();
    assert_eq!(compress(), first);
    assert_eq!(std::fs::read_to_string(&record).unwrap(), text);
}
