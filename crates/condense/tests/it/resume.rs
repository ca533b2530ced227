//! Compressing once per turn: a run on a session that only grew since the last run starts from
//! that run's output plus the new lines, on real Claude Code and Codex sessions, and `expand`
//! still gives back the whole input, byte for byte.

use crate::support::{assert_expands_to, built_plugin, condense, condense_env, fixture};
use std::path::Path;

const SESSIONS: [&str; 2] = [
    "transcripts/DRMacIver__claude-reliability/transcript.jsonl",
    "transcripts/codemie-ai__codemie-code/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl",
];

/// The session's first `share` of lines (whole lines), written to `path`.
fn first_lines(session: &[u8], share: f64, path: &Path) {
    let lines: Vec<&[u8]> = session.split_inclusive(|&b| b == b'\n').collect();
    let keep = (lines.len() as f64 * share) as usize;
    std::fs::write(path, lines[..keep].concat()).unwrap();
}

/// Compresses `input` with the store at `store` into `out` (a 32,000-token window unless
/// `extra` names another); its standard error.
pub(crate) fn compress(input: &Path, store: &Path, out: &Path, extra: &[&str]) -> String {
    compress_with(input, store, out, extra, &[])
}

/// [`compress`] with extra environment variables.
fn compress_with(
    input: &Path,
    store: &Path,
    out: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> String {
    let mut args = vec![
        "compress",
        input.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    if !extra.contains(&"--context-window") {
        args.extend_from_slice(&["--context-window", "32000"]);
    }
    args.extend_from_slice(extra);
    let run = condense_env(&args, env, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stderr
}

#[test]
fn each_turn_resumes_from_the_previous_output_and_expands_to_the_whole_input() {
    let dir = tempfile::tempdir().unwrap();
    for rel in SESSIONS {
        let whole = std::fs::read(fixture(rel)).unwrap();
        let name = Path::new(rel).file_name().unwrap().to_str().unwrap();
        let (store, input, out) = (
            dir.path().join(format!("{name}.store")),
            dir.path().join(name),
            dir.path().join(format!("{name}.out")),
        );
        // The session as it was two turns ago, one turn ago, and now (the same file growing).
        for (turn, share) in [0.6, 0.8].into_iter().enumerate() {
            first_lines(&whole, share, &input);
            let report = compress(&input, &store, &out, &[]);
            // Nothing to resume from on the first run; the second extends the first's input.
            assert_eq!(
                report.contains("resumed: the first "),
                turn == 1,
                "{rel}: {report}"
            );
        }
        std::fs::write(&input, &whole).unwrap();
        let report = compress(&input, &store, &out, &["--report", "json"]);
        let report: serde_json::Value = serde_json::from_str(&report).unwrap();
        let resumed = &report["runs"][0]["resumed"];
        assert!(
            resumed["input_messages"].as_u64().unwrap() > 0,
            "{rel}: {report}"
        );
        assert!(
            resumed["new_messages"].as_u64().unwrap() > 0,
            "{rel}: {report}"
        );
        let (before, after) = (
            report["tokens_before"].as_u64().unwrap(),
            report["tokens_after"].as_u64().unwrap(),
        );
        assert!(after < before, "{rel}: {before} -> {after}");
        // The report's "before" is the whole input's count, not what the stages started from.
        let stats = condense(&["stats", input.to_str().unwrap(), "--json"]);
        let stats: serde_json::Value = serde_json::from_str(&stats.stdout).unwrap();
        assert_eq!(stats["total_tokens"].as_u64(), Some(before), "{rel}");
        assert!(
            resumed["tokens_started"].as_u64().unwrap() < before,
            "{rel}"
        );
        assert_expands_to(
            out.to_str().unwrap(),
            store.to_str().unwrap(),
            dir.path().join(format!("{name}.back")).to_str().unwrap(),
            &whole,
        );

        // --no-resume runs the stages over the whole input, on the same store.
        let report = compress(&input, &store, &out, &["--no-resume"]);
        assert!(!report.contains("resumed"), "{rel}: {report}");
        assert_expands_to(
            out.to_str().unwrap(),
            store.to_str().unwrap(),
            dir.path().join(format!("{name}.back2")).to_str().unwrap(),
            &whole,
        );
    }
}

#[test]
fn two_runs_over_a_growing_session_each_expand_to_their_own_input() {
    // truncate-oldest over the whole session at 60% and then at 100% (`--no-resume`, as every
    // run was before resume points): the second removes more of the same head. Each output
    // expands to its own input, not with the first run's removals put back a second time.
    let dir = tempfile::tempdir().unwrap();
    let pipeline = dir.path().join("trunc.toml");
    std::fs::write(
        &pipeline,
        "[[stage]]\nplugin = \"truncate-oldest\"\n[stage.config]\nmax_tokens = 20000\n",
    )
    .unwrap();
    let whole = std::fs::read(fixture(SESSIONS[1])).unwrap();
    let store = dir.path().join("store");
    let mut runs = Vec::new();
    for (i, share) in [0.6, 1.0].into_iter().enumerate() {
        let input = dir.path().join(format!("in{i}.jsonl"));
        let out = dir.path().join(format!("out{i}.jsonl"));
        first_lines(&whole, share, &input);
        let args = ["-p", pipeline.to_str().unwrap(), "--no-resume"];
        compress(&input, &store, &out, &args);
        runs.push((std::fs::read(&input).unwrap(), out));
    }
    for (i, (input, out)) in runs.iter().enumerate() {
        assert_expands_to(
            out.to_str().unwrap(),
            store.to_str().unwrap(),
            dir.path().join(format!("back{i}.jsonl")).to_str().unwrap(),
            input,
        );
    }
}

#[test]
fn a_rebuilt_plugin_makes_the_next_turn_run_whole() {
    // A resume point is kept under the plugins' files as they were loaded (their size and
    // modification time): the same file resumes, a rebuilt one (here: touched) runs whole, and
    // the run after it resumes again from what the rebuilt plugin made.
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let snip = built_plugin("snip");
    let copy = plugins.join(snip.file_name().unwrap());
    std::fs::copy(&snip, &copy).unwrap();
    let pipeline = dir.path().join("snip.toml");
    std::fs::write(&pipeline, "[[stage]]\nplugin = \"snip\"\n").unwrap();
    let whole = std::fs::read(fixture(SESSIONS[0])).unwrap();
    let (store, input, out) = (
        dir.path().join("store"),
        dir.path().join("session.jsonl"),
        dir.path().join("out.jsonl"),
    );
    let turn = |share: f64| {
        first_lines(&whole, share, &input);
        let extra = ["-p", pipeline.to_str().unwrap()];
        let env = [("CONDENSE_PLUGIN_PATH", plugins.to_str().unwrap())];
        compress_with(&input, &store, &out, &extra, &env).contains("resumed: the first ")
    };
    assert!(!turn(0.6), "nothing to resume from yet");
    assert!(turn(0.7), "the same plugin file resumes");
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    let file = std::fs::File::options().write(true).open(&copy).unwrap();
    file.set_modified(later).unwrap();
    drop(file);
    assert!(!turn(0.8), "a rebuilt plugin runs the turn whole");
    assert!(turn(0.9), "and the next turn resumes from its output");
}

#[test]
fn a_resumed_turn_after_a_collapse_knows_the_time_since_the_previous_run() {
    // Microcompact has no timestamps to read in a request body: the gap is the time since its
    // previous run, as long as the conversation continues the one it saw. A resumed run starts
    // from the previous output, which context-collapse made shorter than what microcompact saw:
    // it still holds the last message seen, so two hours later the cache is known cold and the
    // old results are cleared, as over the whole input (--no-resume).
    let dir = tempfile::tempdir().unwrap();
    let (input, store, out) = (
        dir.path().join("body.json"),
        dir.path().join("store"),
        dir.path().join("out.json"),
    );
    // A real Claude Code session as the Anthropic request bodies of two turns, two hours apart.
    let messages = crate::known_lists::messages();
    let n = messages.len();
    std::fs::write(&input, crate::known_lists::body(&messages, n - 2)).unwrap();
    let at = |t: &'static str| ["--now", t];
    let first = compress(&input, &store, &out, &at("2030-01-01T00:00:00Z"));
    assert!(first.contains("committed"), "{first}");
    assert!(first.contains("gap unknown"), "{first}");
    let whole = crate::known_lists::body(&messages, n);
    std::fs::write(&input, &whole).unwrap();
    let turn = compress(&input, &store, &out, &at("2030-01-01T02:00:00Z"));
    assert!(turn.contains("resumed: the first "), "{turn}");
    assert!(
        turn.contains("gap 2 h > 60 min: cleared") && turn.contains("time since the previous run"),
        "{turn}"
    );
    assert_expands_to(
        out.to_str().unwrap(),
        store.to_str().unwrap(),
        dir.path().join("back.json").to_str().unwrap(),
        &whole,
    );
}

/// The packs a session's resume point names, and every pack of the session's block namespace
/// (there is one session in `store`), with that namespace.
fn packs(store: &Path) -> (Vec<String>, Vec<String>, String) {
    let store = condense_store::Store::open(store).unwrap();
    let [namespace] = store
        .namespaces("resume-blocks-")
        .unwrap()
        .try_into()
        .unwrap();
    let records: Vec<String> = store
        .records(&namespace)
        .unwrap()
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| name.starts_with('p'))
        .collect();
    let [(_, point)] = store.records("resume").unwrap().try_into().unwrap();
    let point: serde_json::Value = serde_json::from_slice(&point).unwrap();
    assert_eq!(
        point["output"],
        serde_json::json!([]),
        "records of their own"
    );
    let named = point["packs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    (named, records, namespace)
}

#[test]
fn a_turn_writes_only_the_packs_new_to_its_output_and_a_lost_one_means_a_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    // A real Claude Code session as the Anthropic request bodies of its turns: the output's
    // input messages are packed too (a later read leaves them unread).
    let messages = crate::known_lists::messages();
    let n = messages.len();
    let (store, input, out) = (
        dir.path().join("store"),
        dir.path().join("body.json"),
        dir.path().join("out.json"),
    );
    // Under the window the default pipeline has (the 32k of [`compress`] would collapse the
    // output into one pack): snip cuts a few results.
    let window = ["--context-window", "200000"];
    std::fs::write(&input, crate::known_lists::body(&messages, n * 3 / 5)).unwrap();
    let report = compress(&input, &store, &out, &window);
    assert!(report.contains("duplicate tool results"), "{report}");
    let (named_before, records_before, namespace) = packs(&store);
    assert!(named_before.len() > 2, "{named_before:?}");
    assert!(!named_before.is_empty(), "the first run changed nothing");
    let mut sorted = named_before.clone();
    sorted.sort();
    assert_eq!(sorted, records_before);
    // Each pack rewritten with its count spelled in two bytes (a packed length is LEB128, and
    // `0x85 0x00` reads as 5 as `0x05` does): the same messages, other bytes. A pack the turn
    // writes again comes back spelled as usual; one it only names keeps the long spelling.
    let long_spelled = |bytes: &[u8]| bytes.first().is_some_and(|b| b & 0x80 != 0);
    {
        let s = condense_store::Store::open(&store).unwrap();
        for (name, bytes) in s.records(&namespace).unwrap() {
            if name.starts_with('p') {
                assert!(bytes[0] < 0x80, "{name}: a pack of 128 messages or more");
                let respelled = [&[bytes[0] | 0x80, 0][..], &bytes[1..]].concat();
                s.record_put(&namespace, &name, &respelled).unwrap();
            }
        }
    }

    std::fs::write(&input, crate::known_lists::body(&messages, n * 4 / 5)).unwrap();
    let report = compress(&input, &store, &out, &window);
    assert!(report.contains("resumed: the first "), "{report}");
    let (named, records, _) = packs(&store);
    // The turn names packs the first run wrote (the messages it starts from unchanged) without
    // writing them again, writes a pack only for messages new to its output, and removes the
    // packs it no longer names.
    let reused: Vec<&String> = named
        .iter()
        .filter(|n| records_before.contains(n))
        .collect();
    assert!(!reused.is_empty(), "no pack reused: {named:?}");
    assert!(reused.len() < named.len(), "no pack written: {named:?}");
    let s = condense_store::Store::open(&store).unwrap();
    for name in &named {
        let bytes = s.record_get(&namespace, name).unwrap().unwrap();
        assert_eq!(long_spelled(&bytes), reused.contains(&name), "{name}");
    }
    drop(s);
    let mut expected = named.clone();
    expected.sort();
    assert_eq!(records, expected);

    // A pack gone from the store (a damaged store): the next turn runs over its whole input,
    // and its output still expands to it.
    condense_store::Store::open(&store)
        .unwrap()
        .record_remove(&namespace, &named[0])
        .unwrap();
    let whole = crate::known_lists::body(&messages, n);
    std::fs::write(&input, &whole).unwrap();
    let report = compress(&input, &store, &out, &window);
    assert!(!report.contains("resumed"), "{report}");
    assert_expands_to(
        out.to_str().unwrap(),
        store.to_str().unwrap(),
        dir.path().join("back.json").to_str().unwrap(),
        &whole,
    );
}
