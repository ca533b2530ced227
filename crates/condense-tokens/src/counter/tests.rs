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

/// A count after messages were replaced in place is the whole count, whatever the replaced
/// messages became (more blocks, fewer, none, a tool result, an event line, a system message),
/// and a count before that does not fit is not used.
#[test]
fn a_recount_after_replacements_is_the_whole_count() {
    use condense_model::{Content, RawJson};
    let counter = TokenCounter::new(TokenizerKind::O200k);
    let text = |t: &str| Block::text(t);
    let m = |id: &str, role: Role, blocks: Vec<Block>| Message::new(id, role, blocks);
    let conv = Conversation {
        system: Some(Content::string("be brief")),
        messages: vec![
            m("s", Role::System, vec![text("rules of the house")]),
            m(
                "u1",
                Role::User,
                vec![text("list the files"), text("and sizes")],
            ),
            m(
                "a1",
                Role::Assistant,
                vec![Block::tool_use(
                    "c1",
                    "Bash",
                    RawJson::from_string_unchecked("{}".into()),
                )],
            ),
            m(
                "r1",
                Role::User,
                vec![Block::tool_result(
                    "c1",
                    Content::string("a.rs\nb.rs\n".repeat(50)),
                )],
            ),
            m("e1", Role::Event, vec![text("a line not sent")]),
            m("u2", Role::User, vec![text("thanks")]),
        ],
        ..Conversation::default()
    };
    let before = counter.count_conversation(&conv);
    let cases: Vec<Vec<(usize, Message)>> = vec![
        vec![(
            3,
            m(
                "r1",
                Role::User,
                vec![Block::tool_result("c1", Content::string("[cut]"))],
            ),
        )],
        vec![(1, m("u1", Role::User, vec![text("list")]))],
        vec![(
            1,
            m("u1", Role::User, vec![text("a"), text("b"), text("c")]),
        )],
        vec![
            (1, m("u1", Role::User, vec![])),
            (5, m("u2", Role::User, vec![text("ok")])),
        ],
        vec![
            (0, m("s", Role::System, vec![text("rules")])),
            (4, m("e1", Role::Event, vec![])),
        ],
        vec![(4, m("e1", Role::User, vec![text("now sent")]))],
    ];
    for replacements in cases {
        let mut after = conv.clone();
        let mut olds = Vec::new();
        for (i, new) in replacements {
            olds.push((i, std::mem::replace(&mut after.messages[i], new)));
        }
        let was: Vec<(usize, &Message)> = olds.iter().map(|(i, m)| (*i, m)).collect();
        let whole = counter.count_conversation(&after);
        assert_eq!(counter.recount(&before, &after, &was), whole, "{was:?}");
        assert_eq!(counter.recount(&before, &after, &was).blocks, whole.blocks);
    }
    // Counts of another conversation (one message less) are not taken for this one's.
    let mut shorter = conv.clone();
    shorter.messages.pop();
    let other = counter.count_conversation(&shorter);
    assert_eq!(counter.recount(&other, &conv, &[]), before);
}
