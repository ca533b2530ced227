//! `condense plugin new`: generate, build, load by path, compress — end to end.

use crate::support::{bin, condense, fixture, repo};
use std::process::Command;

#[test]
fn scaffolded_plugin_builds_loads_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let run = condense(&[
        "plugin",
        "new",
        "cut-long-lines",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let crate_dir = dir.path().join("cut-long-lines");
    for f in [
        "Cargo.toml",
        "src/lib.rs",
        "tests/stage.rs",
        "pipeline.toml",
    ] {
        assert!(crate_dir.join(f).is_file(), "{f} generated");
    }
    // The generated lib.rs is exactly the code docs/writing-a-stage.md walks through.
    let lib = std::fs::read_to_string(crate_dir.join("src/lib.rs")).unwrap();
    let guide = std::fs::read_to_string(repo().join("docs/writing-a-stage.md")).unwrap();
    assert!(
        guide.contains(lib.trim()),
        "docs/writing-a-stage.md shows the generated src/lib.rs"
    );

    // Build it (and run its own tests) sharing this workspace's target directory and lock file,
    // so nothing already built is rebuilt.
    std::fs::copy(repo().join("Cargo.lock"), crate_dir.join("Cargo.lock")).unwrap();
    let target = bin().parent().unwrap().parent().unwrap().to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args(["test", "--quiet", "--offline"])
        .current_dir(&crate_dir)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .unwrap();
    assert!(status.success(), "the scaffold's own tests pass");
    let status = Command::new(&cargo)
        .args(["build", "--quiet", "--offline"])
        .current_dir(&crate_dir)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .unwrap();
    assert!(status.success(), "the scaffold builds");

    // Load it by path from its pipeline file (pointed at the shared target directory).
    let lib_file = condense_host::discover::library_file_name("cut-long-lines");
    let pipeline = std::fs::read_to_string(crate_dir.join("pipeline.toml"))
        .unwrap()
        .replace(
            &format!("target/debug/{lib_file}"),
            &target.join("debug").join(&lib_file).display().to_string(),
        );
    std::fs::write(crate_dir.join("pipeline.toml"), pipeline).unwrap();
    let input = fixture("transcripts/SWE-agent__mini-swe-agent/sqlfluff__sqlfluff-1733.traj.json");
    let p = crate_dir.join("pipeline.toml");
    let run = condense(&[
        "compress",
        input.to_str().unwrap(),
        "--pipeline",
        p.to_str().unwrap(),
        "--report",
        "json",
        "--store",
        dir.path().join("store").to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report: serde_json::Value = serde_json::from_str(&run.stderr).unwrap();
    let last = &report["stages"][2];
    assert_eq!(last["name"], "cut-long-lines");
    assert_eq!(last["status"], "ran");
    assert!(!run.stdout.is_empty());
}
