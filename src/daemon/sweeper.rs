//! The raw-bytes sweeper thread: overwrites what scanners sent once the
//! scans are decided and `[outbox] keep_raw_hours` old (`Store::clear_raw`).
//!
//! It owns a third connection (rusqlite blocks, so it has its own thread)
//! and takes the writers' turn one short chunk at a time, so the counter's
//! scans never wait behind a long sweep. It sweeps at start and then every
//! [`SWEEP_EVERY`]; it stops when its stop sender is dropped.

use crate::store::Store;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// Time between sweeps.
pub const SWEEP_EVERY: Duration = Duration::from_secs(600);

/// Sweep until `stop` is dropped (or sends).
pub fn run(mut store: Store, keep: Duration, stop: Receiver<()>) {
    // A sweep reads each row once: a small page cache is enough.
    if let Err(e) = store.conn.pragma_update(None, "cache_size", -2048) {
        tracing::warn!(db = %store.path().display(), "raw-bytes sweeper: cannot shrink its page cache: {e}");
    }
    let hours = keep.as_secs() / 3600;
    loop {
        let before_ms = chrono::Utc::now().timestamp_millis() - keep.as_millis() as i64;
        match store.clear_raw(before_ms) {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                cleared = n,
                keep_raw_hours = hours,
                "overwrote the raw bytes of {n} scans decided more than {hours} h ago"
            ),
            Err(e) => tracing::warn!(
                "clearing old raw scan bytes failed: {e}; they stay until the next sweep in {SWEEP_EVERY:?}"
            ),
        }
        match stop.recv_timeout(SWEEP_EVERY) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}
