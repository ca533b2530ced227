//! The store under attack (issue 12 item 20, issue 13): `condense compress` killed with SIGKILL
//! at varied moments, each kill followed by a rerun that must succeed and an exact expand, no
//! orphan temp file left at the end (the database's `-wal` and `-shm` files are not orphans:
//! SQLite replays or removes them); expand with a wrong or damaged store; two sessions whose
//! names differ only by characters the store cleans.

use crate::support::{assert_expands_to, bin, condense, copy_dir, fixture};
use condense_fuzz::binary::{Binary, NOW, PIPELINE};
use condense_fuzz::kill::{kill_loop, COMPRESS};
use std::path::Path;
use std::process::{Command, Stdio};

/// At least this many runs must be killed while running.
const KILLS: usize = 50;

fn session() -> Vec<u8> {
    std::fs::read(fixture(
        "transcripts/DRMacIver__claude-reliability/transcript.jsonl",
    ))
    .unwrap()
}

/// `compress` of `in.jsonl` in `dir` with the acting pipeline, not yet waited for.
fn compress_cmd(dir: &Path) -> Command {
    let mut c = Command::new(bin());
    c.args(COMPRESS)
        .current_dir(dir)
        .env_remove("CONDENSE_PLUGIN_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

#[test]
fn sigkill_loop_then_rerun_and_exact_expand() {
    let dir = tempfile::tempdir().unwrap();
    let seed = std::env::var("CONDENSE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0x51_6B11);
    let bin = Binary {
        path: bin(),
        timeout: None,
    };
    let report = kill_loop(&bin, &session(), KILLS, seed, dir.path())
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert!(report.kills >= KILLS, "{report:?}");
    assert!(
        report.orphans.is_empty(),
        "{} orphan temp files after {} kills and a final run: {:?}",
        report.orphans.len(),
        report.kills,
        report.orphans
    );
}

/// A compressed session, its store, and a path to expand it to.
struct Compressed {
    dir: tempfile::TempDir,
}

impl Compressed {
    fn new() -> Compressed {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in.jsonl"), session()).unwrap();
        std::fs::write(dir.path().join("p.toml"), PIPELINE).unwrap();
        let out = compress_cmd(dir.path()).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Compressed { dir }
    }

    fn path(&self, p: &str) -> String {
        self.dir.path().join(p).display().to_string()
    }

    /// Expands with `store` to a new file; asserts exit 1, one line, and no file written.
    fn expand_fails(&self, store: &Path, what: &str) -> String {
        let back = self.path(&format!("back-{what}.jsonl"));
        let run = condense(&[
            "expand",
            &self.path("out.jsonl"),
            "--store",
            store.to_str().unwrap(),
            "--out",
            &back,
        ]);
        let line = run.one_line_failure(1).to_string();
        assert!(!Path::new(&back).exists(), "{what}: {back} written");
        line
    }
}

/// The session id of [`session`].
const SESSION: &str = "bf24c85a-4669-4693-aa2c-7297dc2549f3";

/// The records of [`SESSION`] in a store (what expand reads), as (namespace, name, size),
/// biggest first.
fn records(store: &Path) -> Vec<(String, String, usize)> {
    let open = condense_store::Store::open(store).unwrap();
    let mut all = Vec::new();
    for kind in ["expand", "outputs", "retain"] {
        let namespace = format!("{kind}-{SESSION}");
        for (name, bytes) in open.records(&namespace).unwrap() {
            all.push((namespace.clone(), name, bytes.len()));
        }
    }
    all.sort_by_key(|r| std::cmp::Reverse(r.2));
    all
}

#[test]
fn expand_with_a_wrong_or_damaged_store_fails_in_one_line() {
    let c = Compressed::new();
    let store = c.dir.path().join("s");
    assert!(!records(&store).is_empty());

    let empty = c.dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    c.expand_fails(&empty, "empty");

    // Another session's store.
    let other = tempfile::tempdir().unwrap();
    let body = fixture("edge/openai-big-tool-results.json");
    std::fs::write(other.path().join("p.toml"), PIPELINE).unwrap();
    let o = |p: &str| other.path().join(p).display().to_string();
    let run = condense(&[
        "compress",
        body.to_str().unwrap(),
        "--pipeline",
        &o("p.toml"),
        "--store",
        &o("s"),
        "--out",
        &o("out.json"),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    c.expand_fails(&other.path().join("s"), "wrong");

    // A record deleted, a record cut in half, the database file cut in half, its log cut in half.
    let deleted = c.dir.path().join("deleted");
    copy_dir(&store, &deleted);
    let (namespace, name, _) = &records(&deleted)[0];
    condense_store::Store::open(&deleted)
        .unwrap()
        .record_remove(namespace, name)
        .unwrap();
    c.expand_fails(&deleted, "deleted");
    let cut = c.dir.path().join("cut");
    copy_dir(&store, &cut);
    let (namespace, name, _) = &records(&cut)[0];
    let damaged = condense_store::Store::open(&cut).unwrap();
    let bytes = damaged.record_get(namespace, name).unwrap().unwrap();
    damaged
        .record_put(namespace, name, &bytes[..bytes.len() / 2])
        .unwrap();
    drop(damaged);
    c.expand_fails(&cut, "cut");
    let broken = c.dir.path().join("broken");
    copy_dir(&store, &broken);
    // The database file cut in half, once it holds the records: a small store is mostly in
    // the log its runs leave, which SQLite reads first. A write of more than the log kept
    // (1 MiB) makes the close copy the log into the file.
    let filler: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    condense_store::Store::open(&broken)
        .unwrap()
        .put(&filler)
        .unwrap();
    assert!(
        !broken.join("store.db-wal").exists(),
        "checkpointed at close"
    );
    let db = broken.join(condense_store::DB_FILE);
    let bytes = std::fs::read(&db).unwrap();
    std::fs::write(&db, &bytes[..bytes.len() / 2]).unwrap();
    let line = c.expand_fails(&broken, "broken");
    assert!(line.contains(&db.display().to_string()), "{line}");
    // The log a run leaves beside the database (a small store is mostly in it) cut in half:
    // the run's commit is gone, and what it archived with it.
    let cut_log = c.dir.path().join("cut-log");
    copy_dir(&store, &cut_log);
    let log = cut_log.join("store.db-wal");
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..bytes.len() / 2]).unwrap();
    let line = c.expand_fails(&cut_log, "cut-log");
    assert!(line.contains("not restored"), "{line}");

    // --partial allows it explicitly: what can be restored is written.
    let back = c.path("back-partial.jsonl");
    let run = condense(&[
        "expand",
        &c.path("out.jsonl"),
        "--store",
        deleted.to_str().unwrap(),
        "--out",
        &back,
        "--partial",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(Path::new(&back).exists());

    // The intact store still restores exactly.
    let run = condense(&[
        "expand",
        &c.path("out.jsonl"),
        "--store",
        store.to_str().unwrap(),
        "--out",
        &c.path("back.jsonl"),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(std::fs::read(c.path("back.jsonl")).unwrap() == session());
}

/// The session with every `sessionId` replaced by `id` (also the store tests' input).
pub fn session_named(id: &str) -> Vec<u8> {
    let text = String::from_utf8(session()).unwrap();
    let named = text.replace(
        "\"sessionId\":\"bf24c85a-4669-4693-aa2c-7297dc2549f3\"",
        &format!("\"sessionId\":{}", serde_json::to_string(id).unwrap()),
    );
    assert_ne!(named, text, "the fixture's session id changed");
    named.into_bytes()
}

#[test]
fn colliding_session_names_do_not_share_a_store_folder() {
    let dir = tempfile::tempdir().unwrap();
    let d = |p: &str| dir.path().join(p).display().to_string();
    std::fs::write(d("p.toml"), PIPELINE).unwrap();
    let names = [("dot.jsonl", ".s"), ("underscore.jsonl", "_s")];
    for (file, id) in names {
        let input = session_named(id);
        assert_ne!(input, session());
        std::fs::write(d(file), &input).unwrap();
        let run = condense(&[
            "compress",
            &d(file),
            "--pipeline",
            &d("p.toml"),
            "--store",
            &d("s"),
            "--out",
            &d(&format!("out-{file}")),
            "--now",
            NOW,
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    // One namespace of expansion records per session.
    let store = condense_store::Store::open(dir.path().join("s")).unwrap();
    let records = store.records_by_prefix("expand-").unwrap();
    assert_eq!(records.len(), 2, "{records:?}");
    drop(store);
    for (file, id) in names {
        assert_expands_to(
            &d(&format!("out-{file}")),
            &d("s"),
            &d(&format!("back-{file}")),
            &session_named(id),
        );
    }
}
