//! The WAL checkpointer: a thread of its own that copies committed WAL
//! frames into the database file, off the writer's path.

use super::{StoreError, classify};
use crate::events::Event as _;
use crate::shutdown::Stopper;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;

/// How often the checkpointer copies committed WAL frames into the database.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);
/// WAL pages after which the writer checkpoints by itself (only if the
/// checkpointer falls behind; 16k pages = 64 MiB).
pub(super) const WRITER_AUTOCHECKPOINT: i64 = 16_384;

/// A thread with its own connection that runs passive WAL checkpoints, so
/// the writer's commit is a WAL append and one fsync — not, every thousand
/// pages, also a copy of those pages into the database file and its fsync.
/// A passive checkpoint never blocks the writer.
pub(super) struct Checkpointer {
    stop: Stopper,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    pub(super) fn spawn(path: &Path) -> Result<Checkpointer, StoreError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| classify(path, e))?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| classify(path, e))?;
        let (stopper, stop) = crate::shutdown::channel();
        let db = path.to_owned();
        let thread = std::thread::Builder::new()
            .name("wal-checkpoint".into())
            .spawn(move || {
                let mut warned = false;
                loop {
                    // (One last checkpoint after the stop, too.)
                    let stopped = stop.sleep(CHECKPOINT_EVERY);
                    let r = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                    if let Err(e) = r
                        && !warned
                    {
                        crate::events::CheckpointFailed { db: &db, error: &e }.emit();
                        warned = true;
                    }
                    if stopped {
                        return;
                    }
                }
            })
            .expect("spawning a thread");
        Ok(Checkpointer {
            stop: stopper,
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
