//! Two independent pieces of a command's work on the two cores a machine has at least.
//!
//! `compress` loads its plugins while it reads its input ([`crate::input::read_while_loading`]),
//! and writes its output file while it commits the store ([`crate::commands::compress_input`]).
//!
//! ```text
//! let (loaded, input) = beside("load plugins", || load(pipeline), || read(path));
//! ```

/// Runs `side` on a second thread (named `name`) while `here` runs on this one, and gives both
/// results. A thread that cannot start runs `side` after `here` instead: the same results,
/// one at a time. A panic in `side` carries on in this thread, where `main` reports it.
pub(crate) fn beside<A: Send, B>(
    name: &str,
    side: impl FnOnce() -> A + Send,
    here: impl FnOnce() -> B,
) -> (A, B) {
    // `side` is kept here until the thread has it: if the thread does not start, it runs in
    // turn.
    let side = std::sync::Mutex::new(Some(side));
    let take = || side.lock().ok().and_then(|mut s| s.take());
    std::thread::scope(|scope| {
        let started = std::thread::Builder::new()
            .name(name.to_string())
            .spawn_scoped(scope, || take().map(|side| side()));
        let b = here();
        let a = match started.ok().map(std::thread::ScopedJoinHandle::join) {
            Some(Ok(Some(a))) => a,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            // Not started (or, impossibly, started without `side`): run it now.
            Some(Ok(None)) | None => match take() {
                Some(side) => side(),
                None => unreachable!("`side` is taken once, by the thread or here"),
            },
        };
        (a, b)
    })
}

#[cfg(test)]
mod tests {
    use super::beside;

    #[test]
    fn both_run_and_a_panic_beside_carries_on_here() {
        let (a, b) = beside("t", || 2 + 2, || "here");
        assert_eq!((a, b), (4, "here"));
        let panicked = std::panic::catch_unwind(|| beside("t", || panic!("boom"), || 1));
        let message = panicked.unwrap_err();
        assert_eq!(message.downcast_ref::<&str>(), Some(&"boom"));
    }
}
