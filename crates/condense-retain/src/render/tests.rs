//! Tests of rendering within a budget: what is never dropped (written paths, the last
//! request, the newest errors) and that the text stays under the budget when it can.

use super::*;
use crate::artifacts::FileOp;
use crate::ledger::ErrorEntry;
use crate::testing::session;
use crate::text::first_line_marked;
use condense_model::Message;
use condense_text::cut_chars;
use std::cell::Cell;

/// A rough counter: a token per 4 bytes, at least one per line (so sums are optimistic
/// sometimes, exercising the final check).
fn count(s: &str) -> usize {
    s.len().div_ceil(4) + s.matches('\n').count() / 3
}

fn entry(line: &str, resolved: Option<&str>, id: &str) -> ErrorEntry {
    ErrorEntry {
        line: line.into(),
        tool: "Bash".into(),
        about: format!("cmd {id}"),
        key: format!("k{id}"),
        first_id: id.into(),
        count: 1,
        resolved_by: resolved.map(str::to_string),
    }
}

fn sample(reads: usize, written: usize, errors: usize, requests: usize) -> Retained {
    let mut r = Retained::default();
    for i in 0..written {
        let op = [FileOp::Write, FileOp::Edit, FileOp::Delete][i % 3];
        r.artifacts
            .record(&format!("src/mod{}/file_{i}.rs", i % 4), op);
    }
    for i in 0..reads {
        r.artifacts
            .record(&format!("docs/read_{i}.md"), FileOp::Read);
    }
    for i in 0..errors {
        let resolved = (i % 2 == 0).then(|| format!("fix{i}"));
        r.errors.entries.push(entry(
            &format!("error: failure number {i} in module"),
            resolved.as_deref(),
            &format!("t{i}"),
        ));
    }
    for i in 0..requests {
        r.requests.push(format!(
            "Request {i}: {}\nwith a second line",
            "please do it ".repeat(i % 40)
        ));
    }
    r.requests
        .push("Last: fix `x` now\n## not a heading\n```\ncode\n```".into());
    r
}

fn written_paths(r: &Retained) -> Vec<String> {
    r.artifacts.written().map(|a| a.path.clone()).collect()
}

#[test]
fn written_paths_the_last_request_and_the_newest_errors_survive_any_budget() {
    for (reads, written, errors) in [(3, 5, 10), (40, 60, 50)] {
        let r = sample(reads, written, errors, 10);
        for budget in [0, 1, 10, 50] {
            let out = r.render(budget, &count);
            assert!(out.over_budget, "{budget}");
            assert!(out.tokens > budget);
            for p in written_paths(&r) {
                assert!(out.text.contains(&p), "{p} missing at budget {budget}");
            }
            assert!(out.text.contains(r.last_request().unwrap_or("?")));
            // The 40 newest errors are mandatory, the unresolved ones first: with 50 errors
            // (25 unresolved), the 10 oldest resolved ones go.
            let kept = errors.min(MANDATORY_ERRORS);
            assert_eq!(
                out.resolved_errors_omitted + out.unresolved_errors_omitted,
                errors - kept
            );
            assert_eq!(out.unresolved_errors_omitted, 0);
            for e in r.errors.entries.iter().filter(|e| e.resolved_by.is_none()) {
                assert!(out.text.contains(&e.line), "{} missing", e.line);
            }
            // Nothing optional.
            assert_eq!(out.reads_omitted, reads);
            assert_eq!(out.requests_omitted, 10);
        }
    }
}

#[test]
fn never_over_the_budget_when_the_mandatory_part_fits() {
    for (reads, written, errors, requests) in [(5, 4, 6, 5), (80, 30, 50, 40), (0, 0, 0, 0)] {
        let r = sample(reads, written, errors, requests);
        let floor = r.render(0, &count).tokens;
        let full = r.render(usize::MAX, &count);
        assert!(!full.over_budget);
        assert_eq!(
            full.requests_omitted + full.reads_omitted + full.requests_shortened,
            0
        );
        let mut budget = floor;
        while budget <= full.tokens + 10 {
            let out = r.render(budget, &count);
            assert!(out.tokens <= budget, "{} > {budget}", out.tokens);
            assert_eq!(out.tokens, count(&out.text));
            assert!(!out.over_budget);
            for p in written_paths(&r) {
                assert!(out.text.contains(&p));
            }
            budget += 1 + budget / 50;
        }
    }
}

#[test]
fn optional_content_in_priority_order() {
    // A nearly additive counter here: the point is the order, not the final check.
    let count = |s: &str| s.len() / 4;
    // 46 errors: the 40 newest are mandatory (all 23 unresolved, the 17 newest resolved ones);
    // the 6 oldest resolved ones are optional.
    let r = sample(6, 2, 46, 4);
    let floor = r.render(0, &count);
    assert!(!floor.over_budget || floor.tokens > 0);
    assert_eq!(floor.resolved_errors_omitted, 6);
    assert_eq!(floor.unresolved_errors_omitted, 0);
    let floor = floor.tokens;

    // Earlier requests come first among the optional content, as their first line, newest
    // first; the optional resolved errors after them.
    let out = r.render(floor + 40, &count);
    assert_eq!(out.resolved_errors_omitted, 6);
    assert!(out.requests_omitted < 4);
    assert!(
        out.text.contains("- Request 3: please do it"),
        "{}",
        out.text
    );
    assert!(!out.text.contains("- Request 0:"), "the oldest go first");
    assert!(out
        .text
        .contains("(6 more errors omitted: 6 resolved, 0 unresolved)"));
    assert!(out.text.contains("(6 read files omitted)"));

    // Every request's first line, then the resolved errors, before any read path.
    let lines: usize = (0..4)
        .map(|i| {
            count(&bullet(&first_line_marked(
                &r.requests[i],
                REQUEST_LINE_CHARS,
            )))
        })
        .sum();
    let resolved: usize = r.errors.entries[..12]
        .iter()
        .filter(|e| e.resolved_by.is_some())
        .map(|e| count(&error_bullet(e)))
        .sum();
    let out = r.render(floor + lines + resolved + 3, &count);
    assert_eq!(out.requests_omitted, 0);
    assert_eq!(out.resolved_errors_omitted, 0);
    assert_eq!(out.reads_omitted, 6);

    // Everything fits: every earlier request whole, every read path.
    let out = r.render(100_000, &count);
    for req in &r.requests {
        assert!(out.text.contains(&bullet(req)) || out.text.contains(req.as_str()));
    }
    assert_eq!(out.reads_omitted, 0);
}

#[test]
fn detailed_format() {
    let mut r = Retained::default();
    r.artifacts.record("src/a.rs", FileOp::Read);
    r.artifacts.record("src/a.rs", FileOp::Edit);
    r.artifacts.record("new.rs", FileOp::Create);
    r.artifacts.record("new.rs", FileOp::Delete);
    r.artifacts.record("odd`name.rs", FileOp::Write);
    r.artifacts.record("README.md", FileOp::Read);
    r.errors.entries.push(ErrorEntry {
        count: 3,
        ..entry("npm ERR! missing script: build", None, "toolu_1")
    });
    r.errors.entries.push(ErrorEntry {
        tool: String::new(),
        about: String::new(),
        ..entry(
            "fatal: `x` is not a `git` command",
            Some("toolu_9"),
            "toolu_2",
        )
    });
    r.requests = vec!["First ask".into(), "Then:\n  1. this\n\n  2. that".into()];
    let out = r.render(10_000, &count);
    insta::assert_snapshot!(out.text, @r"
    ## User requests
    - First ask
    Last request (verbatim):
    ```
    Then:
      1. this

      2. that
    ```

    ## Files (artifact trail)
    - `src/a.rs` — modified (2 ops, last: edit)
    - `new.rs` — deleted (created here, 2 ops, last: delete)
    - ``odd`name.rs`` — created (1 op, last: write)
    - `README.md` — read (1 op, last: read)

    ## Errors
    - Bash: `cmd toolu_1` — ×3, unresolved (first toolu_1)
      npm ERR! missing script: build
    - tool — resolved by toolu_9 (first toolu_2)
      fatal: `x` is not a `git` command
    ");
    assert!(!out.compact_files);
    let empty = Retained::default().render(100, &count);
    assert_eq!(
        empty.text,
        "## User requests\n(none)\n\n## Files (artifact trail)\n(none)\n\n## Errors\n(none)\n"
    );
}

#[test]
fn compact_format_for_long_trails() {
    let r = sample(4, 24, 0, 0);
    let out = r.render(100_000, &count);
    assert!(out.compact_files);
    let files = out
        .text
        .split("## Files (artifact trail)\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or("");
    insta::assert_snapshot!(files, @r"
    - `src/mod0/`: created `src/mod0/file_0.rs`, `src/mod0/file_12.rs`; modified `src/mod0/file_4.rs`, `src/mod0/file_16.rs`; deleted `src/mod0/file_8.rs`, `src/mod0/file_20.rs`
    - `src/mod1/`: created `src/mod1/file_9.rs`, `src/mod1/file_21.rs`; modified `src/mod1/file_1.rs`, `src/mod1/file_13.rs`; deleted `src/mod1/file_5.rs`, `src/mod1/file_17.rs`
    - `src/mod2/`: created `src/mod2/file_6.rs`, `src/mod2/file_18.rs`; modified `src/mod2/file_10.rs`, `src/mod2/file_22.rs`; deleted `src/mod2/file_2.rs`, `src/mod2/file_14.rs`
    - `src/mod3/`: created `src/mod3/file_3.rs`, `src/mod3/file_15.rs`; modified `src/mod3/file_7.rs`, `src/mod3/file_19.rs`; deleted `src/mod3/file_11.rs`, `src/mod3/file_23.rs`
    - read (most recent first): `docs/read_3.md`, `docs/read_2.md`, `docs/read_1.md`, `docs/read_0.md`
    ");
    // A short trail goes compact too when only that fits the budget.
    let r = sample(2, 12, 0, 0);
    let detailed = r.render(100_000, &count);
    assert!(!detailed.compact_files);
    let compact_floor = {
        let mut plain = r.clone();
        for _ in 0..30 {
            plain.artifacts.record("zz/pad.rs", FileOp::Read);
        }
        plain.render(0, &count).tokens
    };
    let tight = r.render(compact_floor, &count);
    assert!(tight.compact_files && !tight.over_budget, "{}", tight.text);
    for p in written_paths(&r) {
        assert!(tight.text.contains(&p));
    }
}

#[test]
fn count_is_called_once_per_candidate() {
    let r = sample(300, 50, 200, 100);
    let calls = Cell::new(0usize);
    let counting = |s: &str| {
        calls.set(calls.get() + 1);
        count(s)
    };
    let full = r.render(usize::MAX / 2, &counting);
    assert!(!full.over_budget);
    // 300 reads + 200 errors + 100 requests × 3 forms + a few whole counts.
    assert!(calls.get() <= 300 + 200 + 300 + 6, "{}", calls.get());
    calls.set(0);
    let tight = r.render(full.tokens / 3, &counting);
    assert!(tight.tokens <= full.tokens / 3);
    assert!(calls.get() <= 300 + 200 + 300 + 10, "{}", calls.get());
}

#[test]
fn generated_sessions_render_within_budget() {
    for seed in 0..40 {
        let all: Vec<Message> = session(seed, 30).into_iter().flatten().collect();
        let r = Retained::from_messages(&all);
        let floor = r.render(0, &count).tokens;
        for extra in [0, 7, 40, 150, 1000] {
            let out = r.render(floor + extra, &count);
            assert!(out.tokens <= floor + extra);
            for p in written_paths(&r) {
                assert!(out.text.contains(&p));
            }
            for e in r.errors.unresolved() {
                if extra >= 1000 {
                    assert!(out.text.contains(&e.line));
                }
            }
        }
    }
}

#[test]
fn earlier_requests_shorten_then_lengthen() {
    let long = format!(
        "Refactor the parser\n{}",
        "and keep every test green. ".repeat(40)
    );
    let r = Retained {
        requests: vec![long.clone(), "go".into()],
        ..Retained::default()
    };
    let count = |s: &str| s.len().div_ceil(4);
    let floor = r.render(0, &count).tokens;
    let line = bullet(&first_line_marked(&long, REQUEST_LINE_CHARS));
    let short = bullet(&cut_chars(&long, REQUEST_CHARS));
    assert_eq!(line, "- Refactor the parser…\n");
    assert!(short.ends_with("…\n") && short.len() < long.len());

    let at_line = r.render(floor + count(&line), &count);
    assert!(at_line.text.contains(&line));
    assert_eq!(
        (at_line.requests_omitted, at_line.requests_shortened),
        (0, 1)
    );
    let at_short = r.render(floor + count(&short) + 2, &count);
    assert!(at_short.text.contains(&short), "{}", at_short.text);
    assert_eq!(at_short.requests_shortened, 1);
    let whole = r.render(floor + count(&bullet(&long)) + 2, &count);
    assert!(whole.text.contains(&bullet(&long)));
    assert_eq!(whole.requests_shortened, 0);
    let none = r.render(floor + 2, &count);
    assert!(none.text.contains("(1 earlier request omitted)"));
    assert_eq!(none.requests_omitted, 1);
}

#[test]
fn omitted_requests_are_never_formed_or_counted() {
    // 500 earlier requests, a budget for a few (a bullet is about 10 tokens here): only the
    // newest ones, those the fill tried, may be made into bullets and counted.
    let mut r = Retained::default();
    for i in 0..500 {
        r.requests
            .push(format!("request number {i:03} with a second\nline"));
    }
    r.requests.push("the last one".into());
    let counted = std::cell::RefCell::new(Vec::<String>::new());
    let count = |s: &str| {
        counted.borrow_mut().push(s.to_string());
        s.len().div_ceil(4)
    };
    let floor = r.render(0, &count).tokens;
    counted.borrow_mut().clear();
    let rendered = r.render(floor + 60, &count);
    assert!(
        (490..500).contains(&rendered.requests_omitted),
        "{rendered:?}"
    );
    let tried: Vec<usize> = (0..500)
        .filter(|i| {
            let needle = format!("request number {i:03} ");
            counted.borrow().iter().any(|t| t.contains(&needle))
        })
        .collect();
    assert!(tried.iter().all(|i| *i >= 480), "{tried:?}");
    assert!(tried.contains(&499));
    // The kept ones are the newest.
    assert!(rendered.text.contains("- request number 499 with a second"));
    assert!(!rendered.text.contains("request number 000"));
}

/// A memo carried from rendering to rendering (a running summary's, commit after commit)
/// changes nothing in what is rendered, whatever the budget, and spares the counter the
/// pieces it counted before.
#[test]
fn a_memo_renders_the_same_and_counts_only_new_pieces() {
    let calls = Cell::new(0);
    let counting = |s: &str| {
        calls.set(calls.get() + 1);
        count(s)
    };
    let mut memo = RenderMemo::default();
    let mut r = Retained::default();
    for step in 0..12 {
        r.merge_later(sample(step * 3, step % 4, step * 2, step * 5));
        for budget in [0, 40, 400, 4_000] {
            let fresh = r.render(budget, &count);
            assert_eq!(
                r.render_memo(budget, &count, &mut memo),
                fresh,
                "{step} {budget}"
            );
        }
    }
    let record = sample(60, 30, 40, 200);
    let first = {
        calls.set(0);
        record.render_memo(3_000, &counting, &mut memo);
        calls.get()
    };
    calls.set(0);
    let again = record.render_memo(3_000, &counting, &mut memo);
    assert_eq!(again, record.render(3_000, &count));
    // Only the whole texts are counted again, not a piece.
    assert!(calls.get() * 10 < first, "{} of {first}", calls.get());
}
