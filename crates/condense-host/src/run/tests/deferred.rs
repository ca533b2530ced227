//! A run whose resume point is kept after its output is handed on
//! ([`LoadedPipeline::run_with_texts_deferring`], `condense serve`'s): the output of a run in
//! one transaction, its archive committed when it returns, and the next run resumed from it
//! once [`LoadedPipeline::keep_point`] kept its point, as after a run in one transaction; a
//! point never kept leaves the next run to start from the whole input.

use super::*;

/// The first turn run deferred on `st`, its point kept when `keep`.
fn deferred_first(loaded: &LoadedPipeline, st: &Store, keep: bool) -> RunResult {
    let nothing = ReadFrom::nothing();
    let (result, point) = loaded
        .run_with_texts_deferring(conversation(), st, "s", &resuming(), &nothing)
        .unwrap();
    // Committed already: what the stages removed comes back before the point is kept.
    let mut restored = result.conversation.clone();
    crate::expand(st, "s", &mut restored).unwrap();
    assert_eq!(restored, conversation());
    if keep {
        loaded.keep_point(st, "s", point, &result).unwrap();
    }
    result
}

#[test]
fn a_deferred_run_gives_the_same_output_and_resumes_the_next_once_its_point_is_kept() {
    let loaded = pipeline(&[("cut", "shrink", "fail"), ("watch", "observe", "fail")]);
    let (_d, one) = store();
    let first = loaded.run(conversation(), &one, "s", &resuming()).unwrap();
    let next = with_turn(conversation(), 2);
    let second = loaded.run(next.clone(), &one, "s", &resuming()).unwrap();
    assert!(second.resumed.is_some());

    let (_d, kept) = store();
    let deferred = deferred_first(&loaded, &kept, true);
    assert_eq!(deferred.conversation, first.conversation);
    assert_eq!(deferred.tokens_after, first.tokens_after);
    let after_kept = loaded.run(next.clone(), &kept, "s", &resuming()).unwrap();
    assert_eq!(after_kept.resumed, second.resumed);
    assert_eq!(after_kept.conversation, second.conversation);

    // Never kept: the next turn runs over its whole input, to the same output.
    let (_d, dropped) = store();
    deferred_first(&loaded, &dropped, false);
    let after_dropped = loaded
        .run(next.clone(), &dropped, "s", &resuming())
        .unwrap();
    assert_eq!(after_dropped.resumed, None);
    assert_eq!(after_dropped.conversation, second.conversation);
    let mut restored = after_dropped.conversation.clone();
    crate::expand(&dropped, "s", &mut restored).unwrap();
    assert_eq!(restored, next);
}
