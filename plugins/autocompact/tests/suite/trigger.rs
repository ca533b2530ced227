//! The threshold arithmetic: the seeds' numbers, threshold_pct both ways, the snip correction.

use crate::fixture::conversation;
use autocompact::{Autocompact, Trigger};
use condense_abi::Signal;
use condense_testing::{has_note, run, stage, MemoryHost};

fn trigger(config: &str, host: &MemoryHost) -> Trigger {
    Trigger::compute(stage::<Autocompact>(config).config(), &host.run)
}

fn fires(config: &str, host: &MemoryHost) -> bool {
    let out = run(&stage::<Autocompact>(config), &conversation(), host);
    out.report.signals == vec![Signal::Compacted]
}

#[test]
fn a_200k_window_gives_167000_or_179000() {
    // max output >= 20k: 200,000 - 20,000 = 180,000 effective, - 13,000 = 167,000.
    let h = MemoryHost::default()
        .with_window(200_000, 32_000)
        .with_conversation_tokens(171_230);
    let t = trigger("", &h);
    assert_eq!((t.effective, t.threshold), (180_000, 167_000));
    assert_eq!(
        t.note(),
        "167,000 threshold = 180,000 effective - 13,000 buffer; 171,230 tokens (effective = \
         200,000 window - 20,000 reserved for output; 171,230 = 171,230 before this pipeline - 0 \
         freed by earlier stages)"
    );
    // max output 8k (slot cap): 192,000 effective, 179,000.
    let h = MemoryHost::default().with_window(200_000, 8_000);
    let t = trigger("", &h);
    assert_eq!((t.effective, t.threshold), (192_000, 179_000));
    // Exactly at the threshold fires, one below does not.
    let at = MemoryHost::default()
        .with_window(200_000, 8_000)
        .with_conversation_tokens(179_000);
    assert!(fires("", &at));
    let below = MemoryHost::default()
        .with_window(200_000, 8_000)
        .with_conversation_tokens(178_999);
    let out = run(&stage::<Autocompact>(""), &conversation(), &below);
    // Decided from the host's figures alone: the conversation never crossed the boundary.
    assert!(!out.read && !out.changed);
    assert!(out.report.signals.is_empty());
    assert!(has_note(
        &out.report,
        "below the threshold by 1 tokens: not compacting"
    ));
    assert!(below.summary_requests.borrow().is_empty());
}

#[test]
fn threshold_pct_moves_the_trigger_down_or_up() {
    let h = MemoryHost::default()
        .with_window(200_000, 32_000)
        .with_conversation_tokens(160_000);
    // Down: 0.85 × 180,000 = 153,000 < 160,000: fires where the default (167,000) would not.
    let t = trigger("threshold_pct = 0.85", &h);
    assert_eq!(t.threshold, 153_000);
    assert!(t
        .note()
        .starts_with("153,000 threshold = 85% (threshold_pct) of 180,000 effective;"));
    assert!(fires("threshold_pct = 0.85", &h));
    assert!(!fires("", &h));
    // Up: 0.98 × 180,000 = 176,400 > 171,230: does not fire where the default would.
    let h = MemoryHost::default()
        .with_window(200_000, 32_000)
        .with_conversation_tokens(171_230);
    assert_eq!(trigger("threshold_pct = 0.98", &h).threshold, 176_400);
    assert!(!fires("threshold_pct = 0.98", &h));
    assert!(fires("", &h));
}

#[test]
fn tokens_freed_by_earlier_stages_are_counted_once() {
    // The agent reported 171,000 before the pipeline; snip and microcompact freed 5,000, so the
    // stage is handed 166,000. The seed's `tokenCount - snipTokensFreed` is 171,000 - 5,000 =
    // 166,000 < 167,000: no compaction.
    let h = MemoryHost::default()
        .with_conversation_tokens(166_000)
        .with_tokens_freed_before(5_000);
    let t = trigger("", &h);
    assert_eq!(t.tokens, 166_000);
    assert!(!t.reached());
    assert!(t.note().ends_with(
        "166,000 tokens (effective = 200,000 window - 20,000 reserved for output; 166,000 = \
         171,000 before this pipeline - 5,000 freed by earlier stages)"
    ));
    assert!(!fires("", &h));
    // 172,500 before the pipeline, 5,000 freed: 167,500 >= 167,000 fires.
    let h = MemoryHost::default()
        .with_conversation_tokens(167_500)
        .with_tokens_freed_before(5_000);
    assert!(fires("", &h));
}

#[test]
fn a_window_without_room_for_the_buffer_never_fires_on_its_own() {
    // 30,000 - 20,000 = 10,000 effective would not be larger than the 13,000 buffer: a small
    // window scales the reserve to a quarter of it instead (issue 12), 22,500 effective, so
    // the threshold is 22,500 - 13,000 = 9,500.
    let h = MemoryHost::default()
        .with_window(30_000, 32_000)
        .with_conversation_tokens(9_000);
    let out = run(&stage::<Autocompact>(""), &conversation(), &h);
    assert!(out.report.signals.is_empty());
    assert!(has_note(
        &out.report,
        "below the threshold by 500 tokens: not compacting"
    ));
    assert_eq!(trigger("", &h).threshold, 9_500);
    // With threshold_pct: 0.5 × 22,500.
    assert_eq!(trigger("threshold_pct = 0.5", &h).threshold, 11_250);
    // Smaller still, where even the scaled reserve leaves no room for buffer_tokens: no
    // threshold of its own.
    let tiny = MemoryHost::default()
        .with_window(12_000, 32_000)
        .with_conversation_tokens(9_000);
    let out = run(&stage::<Autocompact>(""), &conversation(), &tiny);
    assert!(out.report.signals.is_empty());
    assert!(has_note(
        &out.report,
        "no threshold: the effective window (9,000) is not larger than buffer_tokens (13,000)"
    ));
}
