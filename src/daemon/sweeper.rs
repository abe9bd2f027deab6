//! The raw-bytes sweeper thread: overwrites what scanners sent once the
//! scans are decided and `[outbox] keep_raw_hours` old (`Store::clear_raw`),
//! and removes decided outbox rows after the dedup horizon, `[dedup]
//! retention_hours` (`Store::prune_decided`; the audit record and the
//! ledger entry are the record of a decision, not the outbox row).
//!
//! Before its first sweep it reads every page of the database
//! (`Store::check_pages`): the daemon starts without waiting for that, and
//! nothing is swept in a file not known to be sound. Damage ends the
//! thread with [`StageResult::Corrupt`], and the daemon stops (exit 3); a
//! check that cannot run (I/O error) is retried every [`SWEEP_EVERY`], and
//! nothing is swept meanwhile.
//!
//! It owns a third connection (rusqlite blocks, so it has its own thread)
//! and takes the writers' turn one short chunk at a time, so the counter's
//! scans never wait behind a long sweep. It sweeps at start and then every
//! [`SWEEP_EVERY`] (a WAL truncation a reader kept from happening after a
//! sweep is tried again every [`WAL_RETRY`]); it stops, between two chunks,
//! as soon as the stop is signalled.

use super::supervisor::{Stage, StageResult, Supervisor};
use crate::config::Config;
use crate::events::{Event as _, SweepStep, Swept};
use crate::shutdown::Stop;
use crate::store::{Store, StoreError};
use std::time::Duration;

/// Time between sweeps.
pub const SWEEP_EVERY: Duration = Duration::from_secs(600);

/// Time between tries of a WAL truncation still owed after a sweep (a
/// reader was in the way for all of `truncate_soon`'s tries): the
/// cleared bytes' old page images stay in the WAL until it succeeds.
pub const WAL_RETRY: Duration = Duration::from_secs(10);

/// How long the sweeper keeps what.
#[derive(Debug, Clone, Copy)]
pub struct Keep {
    /// `[outbox] keep_raw_hours`: raw bytes of decided scans.
    pub raw: Duration,
    /// `[dedup] retention_hours`: decided outbox rows.
    pub decided: Duration,
    /// `[checks] serial_retention_days`: received serials.
    pub serials: Duration,
}

/// Start the sweeper as a stage on a companion of `store` that gives way
/// to the writers at their turn: every page is read after start, on its
/// thread, before its first sweep (on a gateway's SD card a year of scans
/// takes minutes, and the counter must not wait for it).
pub fn start(
    stages: &mut Supervisor,
    store: &Store,
    cfg: &Config,
    stop: Stop,
) -> Result<(), StoreError> {
    let companion = store.companion()?.yielding();
    let keep = Keep {
        raw: Duration::from_secs(cfg.outbox.keep_raw_hours * 3600),
        decided: cfg.retention(),
        serials: Duration::from_secs(cfg.checks.serial_retention_days * 86_400),
    };
    stages.thread(Stage::Sweeper, "raw-sweeper", move || {
        run(companion, keep, stop)
    });
    Ok(())
}

/// Check the database's pages, then sweep until `stop` is signalled.
/// Damage found ends the thread ([`StageResult::Corrupt`]: the database
/// path, SQLite's words).
pub fn run(mut store: Store, keeps: Keep, stop: Stop) -> StageResult {
    let keep = keeps.raw;
    let db = store.path().to_owned();
    loop {
        match Store::check_pages(&db) {
            Ok(()) => {
                Swept::IntegrityPassed { db: &db }.emit();
                break;
            }
            Err(StoreError::Corrupt { path, detail }) => {
                return StageResult::Corrupt { path, detail };
            }
            Err(e) => crate::events::SweepFailed {
                db: &db,
                step: SweepStep::PageCheck { every: SWEEP_EVERY },
                error: &e,
            }
            .emit(),
        }
        if stop.sleep(SWEEP_EVERY) {
            return StageResult::Done;
        }
    }
    // A sweep reads each row once: a small page cache is enough.
    if let Err(e) = store.conn.pragma_update(None, "cache_size", -2048) {
        crate::events::SweepFailed {
            db: &db,
            step: SweepStep::ShrinkCache,
            error: &e,
        }
        .emit();
    }
    let hours = keep.as_secs() / 3600;
    let keep_ms = keep.as_millis() as i64;
    // Cleared bytes may live on in old page images in the WAL until it is
    // truncated; a truncation that a reader was in the way of is owed. One
    // is owed at start too: a crash may have come between a sweep and its
    // truncation.
    let mut wal_owed = true;
    loop {
        let now_ms = chrono::Utc::now().timestamp_millis();
        let mut keep_going = || !stop.is_set();
        match store.clear_raw(now_ms - keep_ms, &mut keep_going) {
            Ok(sweep) => {
                wal_owed = wal_owed || sweep.cleared > 0;
                if wal_owed && !sweep.interrupted {
                    wal_owed = !truncate_soon(&store, &mut keep_going);
                }
                if sweep.cleared > 0 {
                    Swept::RawCleared {
                        cleared: sweep.cleared,
                        keep_raw_hours: hours,
                        wal_truncated: !wal_owed,
                    }
                    .emit();
                }
                if let Some(held) = sweep.held_by.filter(|h| h.captured_ms < now_ms - keep_ms) {
                    let age_h = (now_ms - held.captured_ms) / 3_600_000;
                    Swept::HeldBy {
                        seq: held.seq,
                        state: &held.state,
                        age_h,
                    }
                    .emit();
                }
                if sweep.interrupted {
                    return StageResult::Done;
                }
            }
            Err(e) => crate::events::SweepFailed {
                db: &db,
                step: SweepStep::ClearRaw { every: SWEEP_EVERY },
                error: &e,
            }
            .emit(),
        }
        if prune_outbox(&mut store, keeps.decided, now_ms, &mut || !stop.is_set()) {
            return StageResult::Done;
        }
        if prune_serials(&mut store, keeps.serials, now_ms, &mut || !stop.is_set()) {
            return StageResult::Done;
        }
        // Until the next sweep; a truncation still owed is tried again
        // every WAL_RETRY meanwhile.
        let next = std::time::Instant::now() + SWEEP_EVERY;
        loop {
            let left = next.saturating_duration_since(std::time::Instant::now());
            let pause = if wal_owed { left.min(WAL_RETRY) } else { left };
            if stop.sleep(pause) {
                return StageResult::Done;
            }
            if std::time::Instant::now() >= next {
                break;
            }
            if wal_owed && truncate_soon(&store, &mut || !stop.is_set()) {
                wal_owed = false;
                Swept::WalTruncated.emit();
            }
        }
    }
}

/// Remove decided outbox rows older than the dedup horizon `keep`, except
/// committed scans whose ledger entry is still inside it. True if the
/// stop came meanwhile.
fn prune_outbox(
    store: &mut Store,
    keep: Duration,
    now_ms: i64,
    keep_going: &mut dyn FnMut() -> bool,
) -> bool {
    let horizon = now_ms - keep.as_millis() as i64;
    let kept = match crate::ledger::scans_since(&store.conn, horizon) {
        Ok(scans) => scans.into_iter().map(|s| s.0).collect(),
        Err(e) => {
            crate::events::SweepFailed {
                db: store.path(),
                step: SweepStep::ReadLedger { every: SWEEP_EVERY },
                error: &e,
            }
            .emit();
            return false;
        }
    };
    match store.prune_decided(horizon, &kept, keep_going) {
        Ok(0) => {}
        Ok(n) => Swept::Pruned {
            removed: n,
            horizon_h: keep.as_secs() / 3600,
        }
        .emit(),
        Err(e) => crate::events::SweepFailed {
            db: store.path(),
            step: SweepStep::Prune { every: SWEEP_EVERY },
            error: &e,
        }
        .emit(),
    }
    !keep_going()
}

/// Remove received serials first received more than `keep` ago
/// (`checks::received`), a chunk per turn of the writers. True if the
/// stop came meanwhile.
fn prune_serials(
    store: &mut Store,
    keep: Duration,
    now_ms: i64,
    keep_going: &mut dyn FnMut() -> bool,
) -> bool {
    /// Rows removed per turn.
    const CHUNK: usize = 1000;
    let before_ms = now_ms - keep.as_millis() as i64;
    let mut removed = 0u64;
    let failed = loop {
        if !keep_going() {
            break None;
        }
        let chunk = store.write().and_then(|w| {
            let n = crate::checks::received::prune(&w, before_ms, CHUNK).map_err(|e| w.err(e))?;
            w.commit()?;
            Ok(n)
        });
        match chunk {
            Ok(n) => {
                removed += n as u64;
                if n < CHUNK {
                    break None;
                }
            }
            Err(e) => break Some(e),
        }
    };
    if removed > 0 {
        Swept::SerialsPruned {
            removed,
            retention_days: keep.as_secs() / 86_400,
        }
        .emit();
    }
    if let Some(e) = failed {
        crate::events::SweepFailed {
            db: store.path(),
            step: SweepStep::PruneSerials { every: SWEEP_EVERY },
            error: &e,
        }
        .emit();
    }
    !keep_going()
}

/// Try to truncate the WAL for up to ~2 s (a reader, such as the claimer's
/// next pick or an `outbox status`, may be in the way for a moment). True
/// once done.
fn truncate_soon(store: &Store, keep_going: &mut dyn FnMut() -> bool) -> bool {
    for _ in 0..20 {
        match store.truncate_wal() {
            Ok(true) => return true,
            Ok(false) => {}
            Err(e) => {
                crate::events::SweepFailed {
                    db: store.path(),
                    step: SweepStep::TruncateWal,
                    error: &e,
                }
                .emit();
                return false;
            }
        }
        if !keep_going() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}
