//! The stop signal: one token, cloned into every stage, set once by the
//! daemon (as mini-redis's `Shutdown`). Async stages await it, blocking
//! threads sleep on it; a stage that is told to stop finishes what it
//! holds and ends. In what order the stages are stopped is written once,
//! in the daemon's `stop.rs`.
//!
//! How each stage hears the stop:
//!
//! - **The token** ([`Stop`]): the scanners' sources (each a child token,
//!   so a reload can stop one alone), the raw-bytes sweeper, the anchor
//!   thread, the publisher and the `/metrics` server. The store's WAL
//!   checkpointer has a token of its own, set when its store is closed: it
//!   lives exactly as long as the connection it checkpoints for.
//! - **Its queue closing**, for the outbox writer: it must first admit
//!   everything the scanners queued before they stopped (a keyboard wedge
//!   cannot send a scan again), so it ends when its queue is closed — every
//!   source gone — and empty, not when the token is set.
//! - **A stop message on its wake channel**, for each claimer lane: a lane
//!   sleeps on that channel (the writer's kicks, the other lane's
//!   releases), and its stop comes in an order the shared token cannot
//!   express — the live lane after the writer has admitted the last scans,
//!   the replay lane after the live lane's last round — each making one
//!   last round before it ends.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Sets the stop signal ([`Stopper::stop`]).
pub struct Stopper {
    node: Arc<Node>,
}

/// A signal's flag and watch channel, and the signals set with it
/// ([`Stopper::child`]).
struct Node {
    shared: Arc<Shared>,
    tx: watch::Sender<bool>,
    children: Mutex<Vec<Arc<Node>>>,
}

/// A stage's copy of the stop signal.
#[derive(Clone)]
pub struct Stop {
    shared: Arc<Shared>,
    rx: watch::Receiver<bool>,
}

/// The flag, for blocking threads.
#[derive(Default)]
struct Shared {
    stopped: Mutex<bool>,
    changed: Condvar,
}

/// A new, unset stop signal and its first token.
pub fn channel() -> (Stopper, Stop) {
    let shared = Arc::new(Shared::default());
    let (tx, rx) = watch::channel(false);
    let stop = Stop {
        shared: shared.clone(),
        rx,
    };
    let node = Arc::new(Node {
        shared,
        tx,
        children: Mutex::default(),
    });
    (Stopper { node }, stop)
}

impl Stopper {
    /// Tell every stage to stop (idempotent), and every child signal.
    pub fn stop(&self) {
        self.node.stop();
    }

    /// A signal of its own for one stage (a scanner a reload removes),
    /// also set when this one is (at once if it was).
    pub fn child(&self) -> (Stopper, Stop) {
        let (child, stop) = channel();
        let mut children = self
            .node
            .children
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // (Children whose stage is gone and whose stopper was dropped.)
        children.retain(|c| Arc::strong_count(c) > 1);
        children.push(child.node.clone());
        let stopped = *self
            .node
            .shared
            .stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        drop(children);
        if stopped {
            child.stop();
        }
        (child, stop)
    }
}

impl Node {
    fn stop(&self) {
        *self
            .shared
            .stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.shared.changed.notify_all();
        self.tx.send_replace(true);
        let children: Vec<Arc<Node>> = self
            .children
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for c in children {
            c.stop();
        }
    }
}

impl Stop {
    /// Whether the stop was signalled.
    pub fn is_set(&self) -> bool {
        *self.rx.borrow()
    }

    /// Completes when the stop is signalled (at once if it was); also when
    /// the [`Stopper`] is gone, which can never set it any more.
    pub async fn wait(&mut self) {
        let _ = self.rx.wait_for(|stopped| *stopped).await;
    }

    /// Block up to `timeout`, returning early when the stop is signalled;
    /// true if it was (for threads that sleep between attempts).
    pub fn sleep(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut stopped = self
            .shared
            .stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while !*stopped {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            stopped = self
                .shared
                .changed
                .wait_timeout(stopped, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleeping_thread_wakes_when_the_stop_is_signalled() {
        let (stopper, stop) = channel();
        assert!(!stop.is_set());
        assert!(!stop.sleep(Duration::from_millis(1)));
        let sleeper = {
            let stop = stop.clone();
            std::thread::spawn(move || stop.sleep(Duration::from_secs(3600)))
        };
        stopper.stop();
        assert!(sleeper.join().unwrap(), "woken by the stop, not the hour");
        assert!(stop.is_set());
        // Awaited after the fact, it completes at once.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut stop = stop;
        rt.block_on(stop.wait());
    }

    #[test]
    fn a_child_stops_alone_or_with_its_parent() {
        let (parent, stop) = channel();
        let (alone, alone_stop) = parent.child();
        let (_with, with_stop) = parent.child();
        alone.stop();
        assert!(alone_stop.is_set() && !with_stop.is_set() && !stop.is_set());
        parent.stop();
        assert!(with_stop.is_set() && stop.is_set());
        let (_late, late_stop) = parent.child();
        assert!(
            late_stop.is_set(),
            "a child of a stopped signal starts stopped"
        );
    }
}
