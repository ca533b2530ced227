//! snip(snip(x)) == snip(x), and the same input always gives the same output.

use crate::fixture::conversation;
use condense_testing::{run, stage, MemoryHost};
use snip::Snip;

pub const CONFIGS: [&str; 5] = [
    "",
    "keep = \"last\"",
    "keep_tail_bytes = 1000",
    "protect_recent_turns = 0",
    "min_duplicate_chars = 20\nmax_tool_result_bytes = 300\nkeep_tail_bytes = 100\nprotect_recent_turns = 2",
];

#[test]
fn applying_to_its_own_output_changes_nothing() {
    for config in CONFIGS {
        let host = MemoryHost::default();
        let s = stage::<Snip>(config);
        let once = run(&s, &conversation(), &host);
        assert!(once.report.blocks_changed > 0, "{config}");
        let puts = host.puts.get();
        let twice = run(&s, &once.conversation, &host);
        assert_eq!(twice.conversation, once.conversation, "{config}");
        assert_eq!(twice.report.blocks_changed, 0, "{config}");
        assert!(once.changed && !twice.changed, "{config}");
        assert!(twice.report.events.is_empty());
        assert_eq!(twice.report.tokens_freed, Some(0));
        assert_eq!(host.puts.get(), puts, "nothing stored again ({config})");
        assert!(
            twice
                .report
                .notes
                .iter()
                .any(|n| n.ends_with("already snipped by an earlier run")),
            "{:?}",
            twice.report.notes
        );
    }
}

#[test]
fn the_same_input_gives_the_same_output() {
    for config in CONFIGS {
        let a = run(
            &stage::<Snip>(config),
            &conversation(),
            &MemoryHost::default(),
        );
        let b = run(
            &stage::<Snip>(config),
            &conversation(),
            &MemoryHost::default(),
        );
        assert_eq!(a.conversation, b.conversation);
        assert_eq!(a.report, b.report);
    }
}

#[test]
fn no_state_is_kept() {
    let host = MemoryHost::default();
    run(&stage::<Snip>(""), &conversation(), &host);
    assert_eq!(host.state_puts.get(), 0);
}

#[test]
fn a_later_config_does_not_cut_snipped_results_again() {
    // Truncated with a 4 KB head, then run with a 1 KB limit: the notice is recognised.
    let host = MemoryHost::default();
    let once = run(&stage::<Snip>(""), &conversation(), &host);
    let again = run(
        &stage::<Snip>("max_tool_result_bytes = 1024\nkeep_tail_bytes = 10"),
        &once.conversation,
        &host,
    );
    let truncated: Vec<&str> = again
        .report
        .events
        .iter()
        .filter(|e| e.kind == "truncated")
        .map(|e| e.detail.as_str())
        .collect();
    // t8 and t9 carry a notice already; t12 and t14 are still protected.
    assert!(truncated.is_empty(), "{truncated:?}");
    assert_eq!(again.conversation, once.conversation);
}
