//! `cargo xtask fuzz --minutes N [--seed S] [--kills K] [--targets a,b]` (`--help` lists them):
//! the reliability campaign of the CI tests (crates/condense/tests/it/fuzz.rs, kill.rs) for
//! longer, with random seeds: builds condense and the plugins, then runs the `condense-fuzz`
//! runner, which writes minimized failures to `tests/fixtures/fuzz-regressions/<target>/`
//! (replayed by the tests from then on) and prints the table of docs/reliability.md.

use anyhow::Result;

pub fn fuzz(args: &[String]) -> Result<()> {
    let mut c = super::cargo();
    c.args(["run", "--quiet", "-p", "condense-fuzz", "--"]);
    // `--help` needs no build of condense and the plugins.
    if !args.iter().any(|a| a == "--help" || a == "-h") {
        let bin = super::build_condense()?;
        c.arg("--condense")
            .arg(&bin)
            .arg("--root")
            .arg(super::root())
            .arg("--out")
            .arg(super::root().join("tests/fixtures/fuzz-regressions"));
    }
    c.args(args);
    super::run(c)
}
