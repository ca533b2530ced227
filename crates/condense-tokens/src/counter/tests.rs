//! The counter's own tests: when a batch goes to the thread pool, and the text cache behind
//! `CountTokens` (the rest is in `tests/`).

use super::*;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

#[test]
fn big_batches_run_on_two_threads_at_once() {
    // Each item waits until both are in flight: on one thread the first would wait alone
    // until the (deadlock-guard) timeout and report false.
    let started = Mutex::new(0);
    let both = Condvar::new();
    let meet = || {
        let mut n = started.lock().unwrap();
        *n += 1;
        both.notify_all();
        let (n, timeout) = both
            .wait_timeout_while(n, Duration::from_secs(30), |n| *n < 2)
            .unwrap();
        usize::from(!timeout.timed_out() && *n >= 2)
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let counter = TokenCounter::new(TokenizerKind::Estimate);
    let items = [PARALLEL_MIN_BYTES, PARALLEL_MIN_BYTES];
    let met = pool.install(|| counter.costs(&items, |n| *n, |_| meet()));
    assert_eq!(met, vec![1, 1]);
}

#[test]
fn small_batches_stay_on_the_calling_thread() {
    let me = std::thread::current().id();
    let counter = TokenCounter::new(TokenizerKind::Estimate);
    let items = vec![100usize; 50];
    let on_me = counter.costs(
        &items,
        |n| *n,
        |_| usize::from(std::thread::current().id() == me),
    );
    assert_eq!(on_me, vec![1; 50]);
    // One big item has nothing to share either.
    let on_me = counter.costs(
        &[10 * PARALLEL_MIN_BYTES],
        |n| *n,
        |_| usize::from(std::thread::current().id() == me),
    );
    assert_eq!(on_me, vec![1]);
}

#[test]
fn count_tokens_counts_through_the_text_cache() {
    let counter = TokenCounter::new(TokenizerKind::O200k);
    let text = "a sentence long enough to be cached by the counter";
    let counted = CountTokens::count_tokens(&counter, text);
    assert_eq!(counted, counter.count_text(text));
    let misses = counter.stats().misses;
    assert_eq!(CountTokens::count_tokens(&counter, text), counted);
    assert_eq!(
        counter.stats().misses,
        misses,
        "the second count is a cache hit"
    );
    // Through a trait object too, the way the measuring helpers take it.
    let dynamic: &dyn CountTokens = &counter;
    assert_eq!(dynamic.count_tokens(text), counted);
}
