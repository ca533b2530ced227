//! `cargo xtask fuzz --minutes N [--seed S] [--targets a,b]`: the reliability campaign of the
//! CI tests (crates/condense/tests/it/fuzz.rs, kill.rs) for longer, with random seeds: builds
//! condense and the plugins, then runs the `condense-fuzz` runner, which writes minimized
//! failures to `tests/fixtures/fuzz-regressions/<target>/` (replayed by the tests from then on)
//! and prints the table of docs/reliability.md.

use anyhow::Result;

pub fn fuzz(args: &[String]) -> Result<()> {
    let bin = super::build_condense()?;
    let mut c = super::cargo();
    c.args(["run", "--quiet", "-p", "condense-fuzz", "--"])
        .arg("--condense")
        .arg(&bin)
        .arg("--root")
        .arg(super::root())
        .arg("--out")
        .arg(super::root().join("tests/fixtures/fuzz-regressions"))
        .args(args);
    super::run(c)
}
