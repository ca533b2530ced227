//! The pipeline loader target: mutated pipeline TOML must load or be refused with one line
//! `file:line:col: message`; a loaded pipeline must print (`pipeline show`) as TOML that loads
//! again.

use crate::rng::Rng;
use crate::{Failure, FailureKind, Verdict};
use condense_host::Pipeline;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The name errors must start with.
pub const SOURCE: &str = "fuzz.toml";

/// TOML written another way, or wrong: numbers, strings, keys, tables, nesting.
pub fn mutate(input: &[u8], others: &[&[u8]], rng: &mut Rng) -> (Vec<u8>, Vec<&'static str>) {
    let mut out = input.to_vec();
    let mut ops = Vec::new();
    for _ in 0..1 + rng.below(3) {
        if rng.chance(1, 3) {
            // The JSON mutator's line and byte damage is format-blind.
            let (next, more) = crate::mutate::mutate(&out, others, rng);
            out = next;
            ops.extend(more);
            continue;
        }
        let text = String::from_utf8_lossy(&out).into_owned();
        let (next, op) = toml_op(&text, rng);
        out = next.into_bytes();
        ops.push(op);
    }
    (out, ops)
}

const NUMBERS: &[&str] = &[
    "99999999999999999999",
    "-1",
    "1e400",
    "0x10",
    "1_000",
    "inf",
    "nan",
    "-0",
    "0.5",
    "\"12\"",
    "true",
    "1979-05-27T07:32:00Z",
];

const VALUES: &[&str] = &[
    "\"\\u0000\"",
    "'''\nmulti\nline'''",
    "\"\"\"a\\\n  b\"\"\"",
    "\"\\ud800\"",
    "[]",
    "{}",
    "{ a = 1, a = 2 }",
    "\"../../../etc/passwd\"",
    "\"\"",
    "[1, \"a\"]",
];

const LINES: &[&str] = &[
    "[[stages]]",
    "[[stage]]",
    "[stage.config]",
    "[model]",
    "[model]\ncontext_window = 0",
    "plugin = \"\"",
    "plugn = \"snip\"",
    "on_error = \"maybe\"",
    "enabled = \"yes\"",
    "[summarizer]\nkind = \"carrier-pigeon\"",
    "tokenizer = \"o300k\"",
    "[plugins]\ndirs = 7",
    "=",
    "[",
    "a.b.c.d = 1\na.b = 2",
];

fn toml_op(text: &str, rng: &mut Rng) -> (String, &'static str) {
    let lines: Vec<&str> = text.lines().collect();
    let i = rng.below(lines.len().max(1));
    let line = lines.get(i).copied().unwrap_or("");
    let set = |new: String| {
        let mut v: Vec<String> = lines.iter().map(|l| (*l).to_string()).collect();
        if v.is_empty() {
            v.push(new);
        } else {
            v[i] = new;
        }
        let mut s = v.join("\n");
        s.push('\n');
        s
    };
    match rng.below(5) {
        0 => match line.split_once('=') {
            Some((k, _)) => (set(format!("{k}= {}", rng.pick(NUMBERS))), "toml-number"),
            None => (
                set(format!("{line}\nx = {}", rng.pick(NUMBERS))),
                "toml-number",
            ),
        },
        1 => match line.split_once('=') {
            Some((k, _)) => (set(format!("{k}= {}", rng.pick(VALUES))), "toml-value"),
            None => (
                set(format!("{line}\nname = {}", rng.pick(VALUES))),
                "toml-value",
            ),
        },
        2 => (set(format!("{line}\n{}", rng.pick(LINES))), "toml-line"),
        3 => {
            let depth = *rng.pick(&[10usize, 200, 5_000, 50_000]);
            let nested = if rng.chance(1, 2) {
                format!("x = {}1{}", "[".repeat(depth), "]".repeat(depth))
            } else {
                format!("x = {}1{}", "{a = ".repeat(depth), "}".repeat(depth))
            };
            (set(format!("{line}\n{nested}")), "toml-nesting")
        }
        _ => {
            let size = *rng.pick(&[70_000usize, 1 << 20]);
            (
                set(format!("{line}\nname = \"{}\"", "é".repeat(size / 2))),
                "toml-huge-string",
            )
        }
    }
}

/// Loads `bytes` as a pipeline file.
pub fn check(bytes: &[u8]) -> Verdict {
    let Ok(text) = std::str::from_utf8(bytes) else {
        // `Pipeline::from_file` refuses non-UTF-8 before parsing; nothing to test here.
        return Verdict::Rejected;
    };
    let parsed = catch_unwind(AssertUnwindSafe(|| Pipeline::parse(text, SOURCE, None)));
    let pipeline = match parsed {
        Err(panic) => return Verdict::Failed(Failure::crash("Pipeline::parse", &panic)),
        Ok(Err(e)) => {
            let msg = e.to_string();
            return match one_line_at(&msg, text) {
                Ok(()) => Verdict::Rejected,
                Err(why) => Verdict::Failed(Failure {
                    kind: FailureKind::BadError,
                    detail: format!("{why}: {msg:?}"),
                }),
            };
        }
        Ok(Ok(p)) => p,
    };
    let shown = catch_unwind(AssertUnwindSafe(|| {
        let toml = pipeline
            .to_toml()
            .map_err(|e| format!("it has no TOML form: {e}"))?;
        Pipeline::parse(&toml, SOURCE, None)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }));
    match shown {
        Err(panic) => Verdict::Failed(Failure::crash("Pipeline::to_toml", &panic)),
        Ok(Err(e)) => Verdict::Failed(Failure {
            kind: FailureKind::RoundTrip,
            detail: format!("loaded, but its `pipeline show` TOML does not load: {e}"),
        }),
        Ok(Ok(())) => Verdict::Accepted,
    }
}

/// Checks `fuzz.toml:L:C: message` on one line, with a position inside the text.
fn one_line_at(msg: &str, text: &str) -> Result<(), String> {
    if msg.contains('\n') || msg.contains('\r') {
        return Err("error is not one line".into());
    }
    let rest = msg
        .strip_prefix(SOURCE)
        .and_then(|r| r.strip_prefix(':'))
        .ok_or("error does not start with the file name")?;
    let mut parts = rest.splitn(3, ':');
    let line: usize = parts
        .next()
        .and_then(|l| l.parse().ok())
        .ok_or("no line number")?;
    let col: usize = parts
        .next()
        .and_then(|c| c.parse().ok())
        .ok_or("no column number")?;
    let lines = text.lines().count().max(1);
    if line == 0 || col == 0 || line > lines + 1 {
        return Err(format!(
            "position {line}:{col} is outside the file ({lines} lines)"
        ));
    }
    if parts.next().is_none_or(|m| m.trim().is_empty()) {
        return Err("no message".into());
    }
    Ok(())
}
