//! The in-process writers' turn ([`Turn`]): which of the daemon's writing
//! connections writes next.

use std::sync::{Condvar, Mutex, PoisonError};

/// The in-process writers' turn: one writing connection at a time, and a
/// connection that yields (the claimer's replay lane, the raw sweeper)
/// takes it only while no other writer waits — so the counter's path (the
/// outbox writer's admits, the live lane's verdicts) waits at most for the
/// one transaction in progress, never behind a queue of the backlog's. A
/// yielding writer passed over [`YIELD_AT_MOST`] times goes next, so a
/// steady stream at the counter cannot hold the backlog (and the scans
/// held back behind it) off for ever.
#[derive(Default)]
pub(crate) struct Turn {
    state: Mutex<TurnState>,
    changed: Condvar,
}

/// How many turns in a row a waiting yielding writer lets others have.
const YIELD_AT_MOST: usize = 4;

#[derive(Default)]
struct TurnState {
    held: bool,
    /// Writers that do not yield, waiting for the turn.
    waiting: usize,
    /// Yielding writers waiting for the turn.
    yielding: usize,
    /// Turns given to others since a yielding writer last had it, while
    /// one waited.
    passed: usize,
}

/// The writers' turn, held until dropped.
pub(crate) struct TurnGuard<'t>(&'t Turn);

impl Turn {
    /// Wait for the turn; `yields`: also while another writer waits,
    /// unless passed over too often.
    pub(crate) fn take(&self, yields: bool) -> TurnGuard<'_> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        fn count(st: &mut TurnState, yields: bool) -> &mut usize {
            if yields {
                &mut st.yielding
            } else {
                &mut st.waiting
            }
        }
        *count(&mut st, yields) += 1;
        loop {
            let due = st.yielding > 0 && st.passed >= YIELD_AT_MOST;
            let blocked = match yields {
                true => st.waiting > 0 && !due,
                false => due,
            };
            if !st.held && !blocked {
                break;
            }
            st = self
                .changed
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *count(&mut st, yields) -= 1;
        st.held = true;
        st.passed = match (yields, st.yielding) {
            (true, _) | (false, 0) => 0,
            (false, _) => st.passed + 1,
        };
        TurnGuard(self)
    }
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.held = false;
        drop(st);
        self.0.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A yielding writer (the replay lane) waits while another writer waits
    /// for the turn: when the holder lets go, the waiting counter-side
    /// writer goes first, although the yielding one began waiting first.
    /// (Without the rule the two race for it; 20 rounds make a pass by
    /// chance unlikely.)
    #[test]
    fn the_writers_turn_goes_to_the_counter_before_the_backlog() {
        let turn = Arc::new(Turn::default());
        let waiting = |fg: usize, bg: usize| {
            let st = turn.state.lock().unwrap();
            (st.waiting, st.yielding) == (fg, bg)
        };
        for _ in 0..20 {
            let order = Arc::new(Mutex::new(Vec::new()));
            let held = turn.take(false);
            let taker = |name: &'static str, yields: bool| {
                let (turn, order) = (turn.clone(), order.clone());
                std::thread::spawn(move || {
                    let _t = turn.take(yields);
                    order.lock().unwrap().push(name);
                })
            };
            // Each is seen waiting before the next step (events, not sleeps).
            let backlog = taker("backlog", true);
            while !waiting(0, 1) {
                std::thread::yield_now();
            }
            let counter = taker("counter", false);
            while !waiting(1, 1) {
                std::thread::yield_now();
            }
            drop(held);
            counter.join().unwrap();
            backlog.join().unwrap();
            assert_eq!(*order.lock().unwrap(), ["counter", "backlog"]);
        }
        // With nobody else waiting, a yielding writer gets the turn at once.
        drop(turn.take(true));
    }

    /// A yielding writer that the counter's writers keep passing over gets
    /// the turn after [`YIELD_AT_MOST`] of theirs, although one of them is
    /// waiting again each time the turn comes free.
    #[test]
    fn a_yielding_writer_is_passed_over_only_so_often() {
        let turn = Arc::new(Turn::default());
        let order = Arc::new(Mutex::new(Vec::<&str>::new()));
        let until = |f: &dyn Fn(&TurnState) -> bool| {
            while !f(&turn.state.lock().unwrap()) {
                std::thread::yield_now();
            }
        };
        let first = turn.take(false);
        let backlog = {
            let (turn, order) = (turn.clone(), order.clone());
            std::thread::spawn(move || {
                let _t = turn.take(true);
                order.lock().unwrap().push("backlog");
            })
        };
        until(&|st| st.yielding == 1);
        // Each counter-side writer holds the turn until told to let go;
        // the next one is seen waiting before that.
        let mut holder: Option<std::sync::mpsc::Sender<()>> = None;
        let mut first = Some(first);
        let mut writers = Vec::new();
        for i in 0..=YIELD_AT_MOST {
            let (let_go, told) = std::sync::mpsc::channel::<()>();
            let (turn2, order2) = (turn.clone(), order.clone());
            writers.push(std::thread::spawn(move || {
                let _t = turn2.take(false);
                order2.lock().unwrap().push("counter");
                let _ = told.recv();
            }));
            until(&|st| st.waiting == 1);
            match holder.replace(let_go) {
                Some(previous) => previous.send(()).unwrap(),
                None => drop(first.take()),
            }
            let n = i + 1;
            while order.lock().unwrap().len() < n {
                std::thread::yield_now();
            }
        }
        drop(holder);
        backlog.join().unwrap();
        for w in writers {
            w.join().unwrap();
        }
        let order = order.lock().unwrap();
        let at = order.iter().position(|&w| w == "backlog");
        assert_eq!(at, Some(YIELD_AT_MOST), "{order:?}");
        assert_eq!(order.len(), YIELD_AT_MOST + 2, "{order:?}");
    }
}
