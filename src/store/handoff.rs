//! Writes handed to the one writing connection ([`handoff`]): another
//! thread (a facility claimer lane) gives the outbox writer a write to run
//! in the writer's next transaction and waits for its commit. Admits and
//! verdicts then share one transaction and one fsync, and the claimer's
//! connections only read (docs/design.md, "One writer").
//!
//! A handed write runs inside a savepoint of the writer's transaction: if
//! it fails, only its own statements are rolled back, and it hears its
//! error; if the commit fails, every write in the transaction hears that.
//! Its result is handed back only after the commit, so nothing outside the
//! database sees a verdict before it is durable. Once the writer has ended ([`Desk::close`]), a write is handed back
//! unrun and its thread writes it on its own connection.

use super::{Store, StoreError, Write, classify};
use rusqlite::Connection;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc::error::TryRecvError;

/// A handed write: runs once on the writer's transaction, then hears
/// whether that transaction committed.
trait Errand: Send {
    /// Run the statements; the output is kept until [`Errand::done`].
    fn run(&mut self, tx: &Connection) -> rusqlite::Result<()>;
    /// The transaction committed (`Ok`) or failed, or [`Errand::run`]
    /// failed: hand the output or the error back to the waiting thread.
    fn done(self: Box<Self>, outcome: Result<(), StoreError>);
}

/// A write of output `T` and the channel its waiting thread reads.
struct Call<F, T> {
    write: Option<F>,
    output: Option<T>,
    /// The write panicked: the panic, resumed on the handing thread.
    panic: Option<Panic>,
    reply: SyncSender<Reply<T>>,
}

/// A panic's payload.
type Panic = Box<dyn std::any::Any + Send>;

/// What the handing thread hears: the write's output or error, or its
/// panic.
type Reply<T> = Result<Result<T, StoreError>, Panic>;

impl<F, T> Errand for Call<F, T>
where
    F: FnOnce(&Connection) -> rusqlite::Result<T> + Send,
    T: Send,
{
    fn run(&mut self, tx: &Connection) -> rusqlite::Result<()> {
        let Some(write) = self.write.take() else {
            return Ok(());
        };
        // A panic in the handing thread's code is its own, not the
        // writer's: undone like a failed write and resumed over there.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write(tx))) {
            Ok(output) => self.output = Some(output?),
            Err(panic) => {
                self.panic = Some(panic);
                return Err(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                    Some("a handed write panicked".into()),
                ));
            }
        }
        Ok(())
    }

    fn done(self: Box<Self>, outcome: Result<(), StoreError>) {
        let reply = match (self.panic, outcome, self.output) {
            (Some(panic), _, _) => Err(panic),
            (None, Ok(()), Some(output)) => Ok(Ok(output)),
            (None, Err(e), _) => Ok(Err(e)),
            // (Not reached: `done(Ok)` follows a `run` that succeeded.)
            (None, Ok(()), None) => return,
        };
        // The thread waits for it (it is gone only if it panicked).
        let _ = self.reply.send(reply);
    }
}

/// The queue between the handing threads and the writer.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    /// Signalled when a write is queued (a thread waiting for writes).
    queued: Condvar,
    /// The same, for a writer waiting for writes or its own work
    /// ([`Desk::next`]).
    notify: tokio::sync::Notify,
}

#[derive(Default)]
struct QueueState {
    writes: Vec<Box<dyn Errand>>,
    /// The writer has ended: writes are handed back unrun.
    closed: bool,
}

impl Queue {
    fn state(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The handing side: clone it for each thread that hands writes.
#[derive(Clone)]
pub struct Handoff {
    queue: Arc<Queue>,
}

/// The writer's side: the writes handed to it.
pub struct Desk {
    queue: Arc<Queue>,
}

/// A handoff and the desk it hands to.
pub fn handoff() -> (Handoff, Desk) {
    let queue = Arc::new(Queue::default());
    (
        Handoff {
            queue: queue.clone(),
        },
        Desk { queue },
    )
}

/// What a writer waiting on [`Desk::next`] is woken by.
pub enum Next<T> {
    /// The next item of its own queue.
    Item(T),
    /// Writes were handed to it.
    Handed,
    /// Its own queue is closed and empty.
    Closed,
}

impl Handoff {
    /// Run `write` in the writer's next transaction and wait until that
    /// transaction has committed: its output, or the error of the write or
    /// of the commit (its statements are then undone). If the writer has
    /// ended, `write` is run here instead, in a transaction of `own` (the
    /// calling thread's connection).
    pub fn write<T, F>(&self, own: &mut Store, write: F) -> Result<T, StoreError>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, answer) = sync_channel(1);
        let call = Call {
            write: Some(write),
            output: None,
            panic: None,
            reply,
        };
        {
            let mut st = self.queue.state();
            if st.closed {
                drop(st);
                let write = call.write.expect("not run");
                let w = own.write()?;
                let output = write(&w).map_err(|e| w.err(e))?;
                w.commit()?;
                return Ok(output);
            }
            st.writes.push(Box::new(call));
        }
        self.queue.queued.notify_one();
        self.queue.notify.notify_one();
        // The desk answers every write it takes, and takes every write
        // queued before it closed.
        match answer.recv() {
            Ok(Ok(answered)) => answered,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(_) => Err(StoreError::WriterGone),
        }
    }
}

impl Desk {
    /// Whether writes wait.
    pub fn has_waiting(&self) -> bool {
        !self.queue.state().writes.is_empty()
    }

    /// Wait for the next item of `own` (the writer's own queue) or a
    /// handed write, whichever comes first. An item waiting goes first:
    /// the handed writes then run in that item's transaction
    /// ([`Desk::run_on`]), alone only if no item waits. `rt` runs the wait
    /// on this thread.
    pub fn next<T>(
        &self,
        rt: &tokio::runtime::Runtime,
        own: &mut tokio::sync::mpsc::Receiver<T>,
    ) -> Next<T> {
        match own.try_recv() {
            Ok(item) => return Next::Item(item),
            Err(_) if self.has_waiting() => return Next::Handed,
            Err(TryRecvError::Disconnected) => return Next::Closed,
            Err(TryRecvError::Empty) => {}
        }
        rt.block_on(async {
            tokio::select! {
                biased;
                () = self.queue.notify.notified() => Next::Handed,
                item = own.recv() => item.map_or(Next::Closed, Next::Item),
            }
        })
    }

    /// Wait up to `wait` for a write to be handed (`true` if one waits).
    pub fn wait(&self, wait: Duration) -> bool {
        let st = self.queue.state();
        let (st, _) = self
            .queue
            .queued
            .wait_timeout_while(st, wait, |st| st.writes.is_empty())
            .unwrap_or_else(PoisonError::into_inner);
        !st.writes.is_empty()
    }

    /// Take the writes waiting now and run each in a savepoint of `w`'s
    /// transaction; tell them ([`Taken::done`]) once it has committed or
    /// failed.
    pub fn run_on(&self, w: &Write<'_>) -> Taken {
        let writes = std::mem::take(&mut self.queue.state().writes);
        let mut ran = Vec::with_capacity(writes.len());
        let mut lost = None;
        for mut write in writes {
            if let Some(e) = &lost {
                write.done(Err(copy_error(e)));
                continue;
            }
            match in_savepoint(&w.tx, |tx| write.run(tx)) {
                Ok(()) => ran.push(write),
                Err(Failed::Write(e)) => write.done(Err(w.err(e))),
                Err(Failed::Transaction(e)) => {
                    // Everything that ran in it is undone: each hears why,
                    // and so does the writer (no commit follows).
                    let e = w.err(e);
                    for undone in ran.drain(..).chain(std::iter::once(write)) {
                        undone.done(Err(copy_error(&e)));
                    }
                    lost = Some(e);
                }
            }
        }
        Taken { ran, lost }
    }

    /// Run the waiting writes in a transaction of their own on `store`.
    pub fn run_alone(&self, store: &mut Store) {
        if !self.has_waiting() {
            return;
        }
        match store.write() {
            Ok(w) => {
                let mut taken = self.run_on(&w);
                if taken.lost().is_none() {
                    taken.done(&w.commit());
                }
            }
            Err(e) => {
                let writes = std::mem::take(&mut self.queue.state().writes);
                Taken {
                    ran: writes,
                    lost: None,
                }
                .done(&Err(e));
            }
        }
    }

    /// The writer ends: no write is taken from now on (a thread that hands
    /// one writes it itself), and those still waiting run on `store`.
    pub fn close(&self, store: &mut Store) {
        self.queue.state().closed = true;
        self.run_alone(store);
    }
}

impl Drop for Desk {
    /// A writer that ended without [`Desk::close`] (it panicked): writes
    /// still queued hear [`StoreError::WriterGone`] (their rounds stay
    /// open), later ones are written by their own threads.
    fn drop(&mut self) {
        let mut st = self.queue.state();
        st.closed = true;
        st.writes.clear();
    }
}

/// Writes that ran in a transaction not yet ended: tell them how it ended.
#[must_use = "tell the writes how their transaction ended"]
pub struct Taken {
    ran: Vec<Box<dyn Errand>>,
    /// The transaction was lost while a write ran (SQLite rolled it back):
    /// why. Every write taken has heard it; the transaction must not be
    /// committed.
    lost: Option<StoreError>,
}

impl Taken {
    /// Why the transaction was lost while the writes ran, if it was: it is
    /// then not committed (its earlier statements are undone too).
    pub fn lost(&mut self) -> Option<StoreError> {
        self.lost.take()
    }

    /// How many writes ran.
    pub fn len(&self) -> usize {
        self.ran.len()
    }

    /// Whether none ran.
    pub fn is_empty(&self) -> bool {
        self.ran.is_empty()
    }

    /// The transaction committed (`Ok`) or failed: each write hears it.
    pub fn done(self, committed: &Result<(), StoreError>) {
        match committed {
            Ok(()) => {
                for write in self.ran {
                    write.done(Ok(()));
                }
            }
            Err(e) => {
                for write in self.ran {
                    write.done(Err(copy_error(e)));
                }
            }
        }
    }
}

/// Run `f` in a savepoint of `tx`: released if it succeeds, rolled back
/// to (its statements undone, the transaction kept) if it fails. Some
/// failures (a full disk, an I/O error, no memory) make SQLite roll the
/// whole transaction back: then, or if the savepoint cannot be rolled back
/// to, the error is [`Failed::Transaction`], with the write's own error.
fn in_savepoint(
    tx: &Connection,
    f: impl FnOnce(&Connection) -> rusqlite::Result<()>,
) -> Result<(), Failed> {
    tx.execute_batch("SAVEPOINT handed")
        .map_err(Failed::Transaction)?;
    let failed = match f(tx) {
        Ok(()) => {
            return tx
                .execute_batch("RELEASE handed")
                .map_err(Failed::Transaction);
        }
        Err(e) => e,
    };
    if tx.is_autocommit()
        || tx
            .execute_batch("ROLLBACK TO handed; RELEASE handed")
            .is_err()
    {
        return Err(Failed::Transaction(failed));
    }
    Err(Failed::Write(failed))
}

/// How a handed write failed ([`in_savepoint`]).
enum Failed {
    /// Its statements were undone; the transaction goes on.
    Write(rusqlite::Error),
    /// The transaction is lost with it (rolled back by SQLite).
    Transaction(rusqlite::Error),
}

/// A copy of a write's error for each write that hears it (rusqlite's
/// error is not `Clone`): a SQLite error keeps its result codes and
/// message, so a full disk still reads as one.
fn copy_error(e: &StoreError) -> StoreError {
    let source = match e {
        StoreError::Sqlite {
            source: rusqlite::Error::SqliteFailure(code, message),
            ..
        } => rusqlite::Error::SqliteFailure(*code, message.clone()),
        other => rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            Some(other.to_string()),
        ),
    };
    let path = match e {
        StoreError::Sqlite { path, .. } | StoreError::Corrupt { path, .. } => path.clone(),
        _ => std::path::PathBuf::new(),
    };
    classify(&path, source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    fn put(key: &'static str) -> impl FnOnce(&Connection) -> rusqlite::Result<()> + Send {
        move |tx| {
            tx.execute("INSERT INTO meta (key, value) VALUES (?1, 'v')", [key])
                .map(drop)
        }
    }

    fn has(store: &Store, key: &str) -> bool {
        store
            .conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM meta WHERE key = ?1)",
                [key],
                |r| r.get(0),
            )
            .unwrap()
    }

    /// The handing thread hears its result only once the writer's
    /// transaction, which also holds the writer's own row, has committed.
    #[test]
    fn a_handed_write_commits_with_the_writers_and_is_answered_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let mut own = store.companion().unwrap();
        let reader = store.companion().unwrap();
        let (handoff, desk) = handoff();
        let (said, heard) = channel();
        let t = std::thread::spawn(move || {
            let r = handoff.write(&mut own, put("handed"));
            said.send(r.is_ok()).unwrap();
        });
        assert!(desk.wait(Duration::from_secs(10)));
        let w = store.write().unwrap();
        put("writer's")(&w).unwrap();
        let taken = desk.run_on(&w);
        assert_eq!(taken.len(), 1);
        // Ran, not committed: not answered, not visible.
        assert!(heard.recv_timeout(Duration::from_millis(50)).is_err());
        assert!(!has(&reader, "handed"));
        let committed = w.commit();
        taken.done(&committed);
        assert!(heard.recv_timeout(Duration::from_secs(10)).unwrap());
        assert!(has(&reader, "handed") && has(&reader, "writer's"));
        t.join().unwrap();
    }

    /// A handed write that fails is undone alone; the others and the
    /// writer's own statements commit.
    #[test]
    fn a_failing_handed_write_is_undone_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let (handoff, desk) = handoff();
        let mut threads = Vec::new();
        let (said, heard) = channel();
        for (key, fails) in [("x", true), ("y", false)] {
            let (handoff, said) = (handoff.clone(), said.clone());
            let mut own = store.companion().unwrap();
            threads.push(std::thread::spawn(move || {
                let r = handoff.write(&mut own, move |tx| {
                    put(key)(tx)?;
                    if fails {
                        tx.execute_batch("INSERT INTO no_such_table VALUES (1)")?;
                    }
                    Ok(())
                });
                said.send((key, r.map_err(|e| e.to_string()))).unwrap();
            }));
            // One at a time: both queued before the writer runs them.
            while desk.queue.state().writes.len() < threads.len() {
                std::thread::yield_now();
            }
        }
        let w = store.write().unwrap();
        put("w")(&w).unwrap();
        let taken = desk.run_on(&w);
        assert_eq!(taken.len(), 1, "the failed write is answered at once");
        let committed = w.commit();
        taken.done(&committed);
        let mut results: Vec<_> = (0..2).map(|_| heard.recv().unwrap()).collect();
        results.sort();
        assert!(results[0].1.as_ref().unwrap_err().contains("no_such_table"));
        assert!(results[1].1.is_ok());
        assert!(!has(&store, "x") && has(&store, "y") && has(&store, "w"));
        for t in threads {
            t.join().unwrap();
        }
    }

    /// A transaction that failed is told to every write it ran, each with
    /// the SQLite error's own code (a full disk reads as one).
    #[test]
    fn a_failed_commit_is_told_to_every_write() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let (handoff, desk) = handoff();
        let (said, heard) = channel();
        for key in ["a", "b"] {
            let (handoff, said) = (handoff.clone(), said.clone());
            let mut own = store.companion().unwrap();
            std::thread::spawn(move || {
                let r = handoff.write(&mut own, put(key));
                said.send(r.map_err(|e| e.to_string())).unwrap();
            });
        }
        while desk.queue.state().writes.len() < 2 {
            std::thread::yield_now();
        }
        let w = store.write().unwrap();
        let taken = desk.run_on(&w);
        drop(w); // rolled back
        let full = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            None,
        );
        taken.done(&Err(classify(store.path(), full)));
        for _ in 0..2 {
            let e = heard.recv().unwrap().unwrap_err();
            assert!(e.contains("full"), "{e}");
        }
        assert!(!has(&store, "a") && !has(&store, "b"));
    }

    /// Once the writer has closed its desk, a write runs on the handing
    /// thread's own connection; a desk dropped unclosed (its writer
    /// panicked) answers the writes still queued instead of leaving them
    /// waiting for ever.
    #[test]
    fn after_the_writer_ends_writes_are_written_by_their_own_thread() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let mut own = store.companion().unwrap();
        let (handoff, desk) = handoff();
        desk.close(&mut store);
        handoff.write(&mut own, put("own")).unwrap();
        assert!(has(&store, "own"));

        let (lost, desk) = super::handoff();
        let t = std::thread::spawn(move || lost.write(&mut own, put("lost")));
        assert!(desk.wait(Duration::from_secs(10)));
        drop(desk);
        let r = t.join().unwrap();
        assert!(matches!(r, Err(StoreError::WriterGone)), "{r:?}");
        assert!(!has(&store, "lost"));
    }

    /// A handed write rides with the writer's next item if one waits, and
    /// runs alone only if none does.
    #[test]
    fn a_handed_write_rides_with_a_waiting_item() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (items, mut rx) = tokio::sync::mpsc::channel::<u32>(4);
        items.blocking_send(1).unwrap();
        let (handoff, desk) = handoff();
        let mut own = store.companion().unwrap();
        let rider = handoff.clone();
        let t = std::thread::spawn(move || rider.write(&mut own, put("rides")));
        assert!(desk.wait(Duration::from_secs(10)));
        assert!(matches!(desk.next(&rt, &mut rx), Next::Item(1)));
        let w = store.write().unwrap();
        let taken = desk.run_on(&w);
        assert_eq!(taken.len(), 1);
        taken.done(&w.commit());
        t.join().unwrap().unwrap();
        let mut own = store.companion().unwrap();
        let t = std::thread::spawn(move || handoff.write(&mut own, put("alone")));
        assert!(desk.wait(Duration::from_secs(10)));
        assert!(matches!(desk.next(&rt, &mut rx), Next::Handed));
        desk.run_alone(&mut store);
        t.join().unwrap().unwrap();
        assert!(has(&store, "rides") && has(&store, "alone"));
    }

    /// A transaction SQLite rolls back as a whole while a write runs (a
    /// full disk) is lost for every write in it and for the writer: each
    /// hears why, none is committed by the savepoints after it.
    #[test]
    fn a_transaction_lost_in_a_write_is_told_to_all_and_not_committed() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        store
            .conn
            .execute_batch(
                "CREATE TABLE doomed (x); CREATE TRIGGER full BEFORE INSERT ON doomed \
                 BEGIN SELECT RAISE(ROLLBACK, 'database or disk is full'); END;",
            )
            .unwrap();
        let (handoff, desk) = handoff();
        let (said, heard) = channel();
        for (queued, (key, dooms)) in [("first", false), ("dooms", true), ("after", false)]
            .into_iter()
            .enumerate()
        {
            let (handoff, said) = (handoff.clone(), said.clone());
            let mut own = store.companion().unwrap();
            std::thread::spawn(move || {
                let r = handoff.write(&mut own, move |tx| {
                    put(key)(tx)?;
                    if dooms {
                        tx.execute_batch("INSERT INTO doomed VALUES (1)")?;
                    }
                    Ok(())
                });
                said.send(r.map_err(|e| e.to_string())).unwrap();
            });
            // Queued in this order.
            while desk.queue.state().writes.len() <= queued {
                std::thread::yield_now();
            }
        }
        let w = store.write().unwrap();
        put("writer's")(&w).unwrap();
        let mut taken = desk.run_on(&w);
        let lost = taken.lost().expect("the transaction is lost");
        assert!(lost.to_string().contains("full"), "{lost}");
        drop(w);
        for _ in 0..3 {
            let e = heard.recv().unwrap().unwrap_err();
            assert!(e.contains("full"), "{e}");
        }
        for key in ["first", "dooms", "after", "writer's"] {
            assert!(!has(&store, key), "{key} was committed");
        }
    }

    /// A write that panics is undone and its panic resumed on the thread
    /// that handed it; the writer and the other writes go on.
    #[test]
    fn a_panicking_write_panics_its_own_thread_not_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let mut own = store.companion().unwrap();
        let (handoff, desk) = handoff();
        let t = std::thread::spawn(move || {
            handoff.write(&mut own, |tx| -> rusqlite::Result<()> {
                put("half")(tx)?;
                panic!("a bug in a round");
            })
        });
        assert!(desk.wait(Duration::from_secs(10)));
        let w = store.write().unwrap();
        put("writer's")(&w).unwrap();
        let taken = desk.run_on(&w);
        assert!(taken.is_empty());
        taken.done(&w.commit());
        assert!(t.join().is_err(), "the handing thread panicked");
        assert!(has(&store, "writer's") && !has(&store, "half"));
    }

    /// A writer waiting for its own queue wakes for a handed write, and
    /// still sees its own items and their end.
    #[test]
    fn a_writer_waiting_for_its_queue_wakes_for_a_handed_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut own = store.companion().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (items, mut rx) = tokio::sync::mpsc::channel::<u32>(4);
        let (handoff, desk) = handoff();
        let t = std::thread::spawn(move || handoff.write(&mut own, put("h")));
        assert!(matches!(desk.next(&rt, &mut rx), Next::Handed));
        let mut store = store;
        desk.run_alone(&mut store);
        t.join().unwrap().unwrap();
        items.blocking_send(7).unwrap();
        assert!(matches!(desk.next(&rt, &mut rx), Next::Item(7)));
        drop(items);
        // (A wake-up left by the handed write may come first.)
        let mut next = desk.next(&rt, &mut rx);
        if matches!(next, Next::Handed) {
            next = desk.next(&rt, &mut rx);
        }
        assert!(matches!(next, Next::Closed));
    }
}
