//! `ledger export --follow --consumer NAME` on the gateway's own ledger:
//! pages of entries after the consumer's cursor ([`crate::ledger::cursor`]),
//! each written and flushed before it is acknowledged, for as long as the
//! output stays open.
//!
//! It runs beside the daemon on the same database, without its lock:
//! every page is read in a short read transaction (never held while
//! writing to stdout, so the daemon's checkpoints are not held back), and
//! every acknowledgement is one tiny write transaction at `synchronous =
//! NORMAL` ([`Store::open_unlocked`]). Between pages with nothing new it
//! looks every [`POLL`] at `PRAGMA data_version`, which reads the WAL
//! index in shared memory: no file I/O, and the ledger is read again only
//! after another connection committed.

use super::{Entry, Sink};
use crate::cmd::Failure;
use crate::events::{Event as _, LedgerConsumer};
use crate::ledger::cursor;
use crate::store::{Store, StoreError};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Entries read, written and acknowledged at a time.
pub const PAGE: usize = 100;
/// How often an idle follower looks for a commit: a new entry is printed
/// within this (plus its page's write) of its commit.
pub const POLL: Duration = Duration::from_millis(200);

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Follow the ledger in `state_dir` as consumer `name` into `out` through
/// `sink`, until `out` closes (Ok) or the consumer is removed.
pub(super) fn run(
    state_dir: &Path,
    name: &str,
    mut sink: Sink,
    out: &mut impl Write,
) -> Result<(), Failure> {
    if !cursor::valid_name(name) {
        return Err(Failure::Usage(format!(
            "--consumer {name:?} is not a name: use 1-64 letters, digits, '-', '_' or '.'"
        )));
    }
    let mut store = Store::open_unlocked(state_dir)?;
    let created = {
        let w = store.write().map_err(|e| cannot_write(name, e))?;
        let created = cursor::register(&w, name, now_ms()).map_err(|e| w.err(e));
        let created = created.and_then(|c| w.commit().map(|()| c));
        created.map_err(|e| cannot_write(name, e))?
    };
    if created {
        LedgerConsumer::Registered { consumer: name }.emit();
    }
    let mut seen = data_version(&store)?;
    loop {
        let page = {
            let r = store.read()?;
            cursor::page(&r, name, PAGE).map_err(|e| store.err_at(e))?
        };
        let Some(page) = page else {
            return Err(removed(name));
        };
        if page.restarted {
            LedgerConsumer::Restarted { consumer: name }.emit();
        }
        let Some(last) = page.entries.last() else {
            seen = wait_for_commit(&store, seen)?;
            continue;
        };
        for e in &page.entries {
            if sink.entry(out, Entry::Embedded(e)).is_err() {
                // The reader went away, or an entry cannot be an event:
                // nothing of this page is acknowledged.
                return sink.finish(out);
            }
        }
        if out.flush().is_err() {
            return Ok(());
        }
        let w = store.write().map_err(|e| cannot_write(name, e))?;
        let acked = cursor::ack(&w, name, last, now_ms()).map_err(|e| w.err(e));
        match acked.and_then(|a| w.commit().map(|()| a)) {
            Ok(true) => {}
            Ok(false) => return Err(removed(name)),
            Err(e) => return Err(cannot_write(name, e)),
        }
    }
}

/// `PRAGMA data_version`: changes when another connection commits.
fn data_version(store: &Store) -> Result<i64, StoreError> {
    store
        .conn
        .query_row("PRAGMA data_version", [], |r| r.get(0))
        .map_err(|e| store.err_at(e))
}

/// Wait until another connection commits after `seen`; the new version.
fn wait_for_commit(store: &Store, seen: i64) -> Result<i64, StoreError> {
    loop {
        std::thread::sleep(POLL);
        let now = data_version(store)?;
        if now != seen {
            return Ok(now);
        }
    }
}

/// The consumer's row is gone: `ledger consumers remove` removed it.
fn removed(name: &str) -> Failure {
    Failure::Runtime(format!(
        "consumer {name:?} was removed (`scangate ledger consumers remove`) while following; what it printed last was not acknowledged. Start it again to register it anew (from the first entry the ledger keeps)"
    ))
}

/// The cursor could not be written.
fn cannot_write(name: &str, e: StoreError) -> Failure {
    let read_only = matches!(&e, StoreError::Sqlite { source, .. }
        if source.sqlite_error_code() == Some(rusqlite::ErrorCode::ReadOnly));
    Failure::Runtime(format!(
        "cannot keep consumer {name:?}'s cursor: {e}.{} Nothing unacknowledged is lost: it is printed again at the next start",
        if read_only {
            format!(
                " The cursor is written to the gateway's database: run the follower as the service user (`runuser -u scangate -- scangate ledger export --follow --consumer {name}`) or as root."
            )
        } else {
            String::new()
        }
    ))
}
