//! Places in line. tokio's `Mutex` is fair: waiters get it in the order they first polled
//! `lock`. [`Place::take`] polls once, so the place is taken at that moment, and the guard is
//! awaited later, after other work: a request takes its place in its session's line as soon as
//! its body is in, and only then does the slow part (reading the whole body).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use tokio::sync::{Mutex, OwnedMutexGuard};

type Waiting = Pin<Box<dyn Future<Output = OwnedMutexGuard<()>> + Send>>;

/// A place in a lock's line: the guard already, or a registered wait for it. Dropping it leaves
/// the line.
pub(crate) enum Place {
    Held(OwnedMutexGuard<()>),
    Waiting(Waiting),
}

impl Place {
    /// Takes a place in `lock`'s line now.
    pub(crate) async fn take(lock: Arc<Mutex<()>>) -> Place {
        let mut waiting: Waiting = Box::pin(lock.lock_owned());
        // One poll registers this task as a waiter (or takes the free lock).
        std::future::poll_fn(|cx| {
            Poll::Ready(match waiting.as_mut().poll(cx) {
                Poll::Ready(guard) => Some(guard),
                Poll::Pending => None,
            })
        })
        .await
        .map_or(Place::Waiting(waiting), Place::Held)
    }

    /// Waits for this place's turn.
    pub(crate) async fn turn(self) -> OwnedMutexGuard<()> {
        match self {
            Place::Held(guard) => guard,
            Place::Waiting(waiting) => waiting.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_turn_follows_the_place_taken_not_the_wait() {
        let lock = Arc::new(Mutex::new(()));
        let first = Place::take(Arc::clone(&lock)).await;
        let second = Place::take(Arc::clone(&lock)).await;
        let third = Place::take(Arc::clone(&lock)).await;
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        // The third waits first, then the second; neither may pass the other's place.
        let mut tasks = Vec::new();
        for (name, place) in [("third", third), ("second", second)] {
            let order = Arc::clone(&order);
            tasks.push(tokio::spawn(async move {
                let _g = place.turn().await;
                order.lock().unwrap().push(name);
            }));
            tokio::task::yield_now().await;
        }
        let guard = first.turn().await;
        order.lock().unwrap().push("first");
        drop(guard);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["first", "second", "third"]);
    }

    #[tokio::test]
    async fn a_place_given_up_leaves_the_line() {
        let lock = Arc::new(Mutex::new(()));
        let first = Place::take(Arc::clone(&lock)).await;
        let gone = Place::take(Arc::clone(&lock)).await;
        let last = Place::take(Arc::clone(&lock)).await;
        drop(gone);
        drop(first);
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), last.turn()).await;
        assert!(
            got.is_ok(),
            "the place after one given up still gets its turn"
        );
    }
}
