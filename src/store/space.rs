//! Disk space in the state directory: how much is free, how fast the
//! database grows, how many days that leaves, and the floor below which the
//! outbox writer stores (and so ACKs) nothing (`[outbox] min_free_mb`,
//! `[outbox] warn_days_left`). One computation ([`Store::space`]) serves
//! `scangate status`, `scangate outbox status` and the metrics.
//!
//! The growth rate is the database's own: the bytes its pages hold per
//! outbox row (outbox, ledger and audit together grow with the scans) times
//! the scans captured in the last 24 hours. Read from the file, so it needs
//! no history kept elsewhere and is there the moment a read-only command
//! asks. Pages the database has freed are reused before the file grows, so
//! they count as room left.

use super::{Store, StoreError};
use rusqlite::OptionalExtension;
use std::path::{Path, PathBuf};

/// One mebibyte.
pub const MIB: u64 = 1024 * 1024;

/// The window the growth rate is measured over.
const RATE_WINDOW_MS: i64 = 24 * 3600 * 1000;

/// Free bytes for an unprivileged writer in the file system holding `dir`
/// (`None`: `statvfs` failed).
pub fn free_bytes(dir: &Path) -> Option<u64> {
    // (The casts matter on 32-bit ARM, where the counts are u32.)
    #[allow(clippy::unnecessary_cast)]
    nix::sys::statvfs::statvfs(dir)
        .ok()
        .map(|s| s.blocks_available() as u64 * s.fragment_size() as u64)
}

/// Disk space as [`Store::space`] measured it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Space {
    /// Free bytes in the state directory's file system (`None`: unknown).
    pub free_bytes: Option<u64>,
    /// Bytes of pages the database freed and reuses before it grows.
    pub reusable_bytes: u64,
    /// How fast the database grows: bytes per outbox row times the rows
    /// captured in the last 24 h (`None`: no scan yet).
    pub growth_bytes_per_day: Option<u64>,
    /// (free + reusable) / growth, in days (`None`: unknown or no growth).
    pub days_left: Option<f64>,
}

impl Store {
    /// Measure the disk space of this database in `state_dir` at `now_ms`:
    /// a few page-count pragmas and index probes, cheap enough to sample
    /// every few seconds.
    pub fn space(&self, state_dir: &Path, now_ms: i64) -> Result<Space, StoreError> {
        let err = |e| self.err_at(e);
        let pragma = |name: &str| -> Result<u64, StoreError> {
            self.conn
                .query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0))
                .map(|v| v.max(0) as u64)
                .map_err(err)
        };
        let page = pragma("page_size")?;
        let pages = pragma("page_count")?;
        let free_pages = pragma("freelist_count")?;
        let used = pages.saturating_sub(free_pages) * page;
        let reusable_bytes = free_pages * page;
        // Rows by position: seq grows with admission, which follows capture.
        // (Two statements: SQLite seeks the rowid for a lone min() or
        // max(), and scans the table for both in one.)
        let end = |sql: &str| -> Result<Option<i64>, StoreError> {
            self.conn.query_row(sql, [], |r| r.get(0)).map_err(err)
        };
        let span = (
            end("SELECT min(seq) FROM scans")?,
            end("SELECT max(seq) FROM scans")?,
        );
        // The audit trail holds a record of every scan kept, long after the
        // sweeper removed its outbox row (`[dedup] retention_hours`): the
        // bytes in use are spread over the longer of the two.
        let audited = match (
            end("SELECT min(seq) FROM audit")?,
            end("SELECT max(seq) FROM audit")?,
        ) {
            (Some(first), Some(last)) => last - first + 1,
            _ => 0,
        };
        let growth_bytes_per_day = match span {
            (Some(first), Some(last)) => {
                let rows = (last - first + 1).max(audited).max(1) as u64;
                let recent = last - self.first_seq_since(first, last, now_ms - RATE_WINDOW_MS)? + 1;
                Some(used / rows * recent.max(0) as u64)
            }
            _ => None,
        };
        let free_bytes = free_bytes(state_dir);
        let days_left = match (free_bytes, growth_bytes_per_day) {
            (Some(free), Some(g)) if g > 0 => Some((free + reusable_bytes) as f64 / g as f64),
            _ => None,
        };
        Ok(Space {
            free_bytes,
            reusable_bytes,
            growth_bytes_per_day,
            days_left,
        })
    }

    /// The first outbox position in `first..=last` captured at or after
    /// `since_ms` (`last + 1` if none): a binary search by position, as
    /// capture times follow it (a clock step only moves the bound a little).
    fn first_seq_since(&self, first: i64, last: i64, since_ms: i64) -> Result<i64, StoreError> {
        let mut q = self
            .conn
            .prepare_cached("SELECT captured_ms FROM scans WHERE seq >= ?1 ORDER BY seq LIMIT 1")
            .map_err(|e| self.err_at(e))?;
        let (mut lo, mut hi) = (first, last + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let at: Option<i64> = q
                .query_row([mid], |r| r.get(0))
                .optional()
                .map_err(|e| self.err_at(e))?;
            match at {
                Some(t) if t >= since_ms => hi = mid,
                _ => lo = mid + 1,
            }
        }
        Ok(lo)
    }
}

/// The floor below which the outbox writer stores no scan, so the scanners
/// get no ACK (`[outbox] min_free_mb`; 0 = off).
#[derive(Debug, Clone)]
pub struct Floor {
    dir: PathBuf,
    min_free_bytes: u64,
}

/// Free space in the state directory fell below the floor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "only {} free in {dir}, below the floor [outbox] min_free_mb = {}: no scan is stored or acknowledged (scanners resend) until there is space again. Fix: free space in that file system (old logs, `journalctl --vacuum-size`), or move [gateway] state_dir to a larger disk",
    mib(*free_bytes), min_free_bytes / MIB
)]
pub struct BelowFloor {
    /// The state directory.
    pub dir: PathBuf,
    /// Free bytes there.
    pub free_bytes: u64,
    /// The floor.
    pub min_free_bytes: u64,
}

/// `bytes` in MiB for messages, one decimal.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

impl Floor {
    /// The floor of `min_free_mb` MiB in `dir`.
    pub fn new(dir: &Path, min_free_mb: u64) -> Floor {
        Floor {
            dir: dir.to_owned(),
            min_free_bytes: min_free_mb * MIB,
        }
    }

    /// The floor in bytes (0: off).
    pub fn bytes(&self) -> u64 {
        self.min_free_bytes
    }

    /// `Err` while free space is below the floor (one `statvfs`, none when
    /// the floor is off; a file system that cannot say is not held to it).
    pub fn check(&self) -> Result<(), BelowFloor> {
        if self.min_free_bytes == 0 {
            return Ok(());
        }
        self.judge(free_bytes(&self.dir))
    }

    /// [`Floor::check`] with free space already measured.
    pub fn judge(&self, free: Option<u64>) -> Result<(), BelowFloor> {
        match free {
            Some(free) if free < self.min_free_bytes => Err(BelowFloor {
                dir: self.dir.clone(),
                free_bytes: free,
                min_free_bytes: self.min_free_bytes,
            }),
            _ => Ok(()),
        }
    }
}

/// The warning when `space` in `state_dir` lasts fewer than `warn_days`
/// days at the last 24 hours' rate (`None`: more, unknown, or off).
pub fn days_left_warning(state_dir: &Path, space: &Space, warn_days: u64) -> Option<String> {
    let days = space
        .days_left
        .filter(|d| warn_days > 0 && *d < warn_days as f64)?;
    Some(format!(
        "{} is full in {days:.1} days at the last 24 hours' rate ({} a day; {} free, warned below [outbox] warn_days_left = {warn_days}): then no scan is stored or acknowledged. Fix: free space there, or move [gateway] state_dir to a larger disk",
        state_dir.display(),
        mib(space.growth_bytes_per_day.unwrap_or(0)),
        mib(space.free_bytes.unwrap_or(0) + space.reusable_bytes),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_holds_below_and_lets_through_at_or_above() {
        let f = Floor::new(Path::new("/var/lib/scangate"), 50);
        assert!(f.judge(Some(50 * MIB)).is_ok());
        assert!(f.judge(None).is_ok());
        let e = f.judge(Some(3 * MIB)).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("/var/lib/scangate"), "{text}");
        assert!(text.contains("3.0 MiB"), "{text}");
        assert!(text.contains("min_free_mb = 50"), "{text}");
        assert!(Floor::new(Path::new("/x"), 0).judge(Some(0)).is_ok());
    }

    /// A decided outbox row `u<i>` captured at `t`.
    fn insert_rejected(store: &Store, i: usize, t: i64) {
        store
            .conn
            .execute(
                "INSERT INTO scans (scan_uuid, scanner, scan_type, quantity, captured_ms,
                   boot_id, boot_ns, clock_synced, raw, state)
                 VALUES (?1, 's', 'dispense', 1, ?2, 'b', 0, 1, x'00', 'rejected')",
                rusqlite::params![format!("u{i}"), t],
            )
            .unwrap();
    }

    #[test]
    fn growth_is_bytes_per_row_times_the_last_days_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let now = chrono::Utc::now().timestamp_millis();
        assert_eq!(
            store.space(dir.path(), now).unwrap().growth_bytes_per_day,
            None
        );
        let day = 24 * 3600 * 1000;
        // 30 rows two days ago, 10 in the last hour.
        let times: Vec<i64> = (0..30)
            .map(|i| now - 2 * day + i)
            .chain((0..10).map(|i| now - 3_600_000 + i))
            .collect();
        for (i, t) in times.iter().enumerate() {
            insert_rejected(&store, i, *t);
        }
        let s = store.space(dir.path(), now).unwrap();
        let used = {
            let p = |n: &str| -> u64 {
                store
                    .conn
                    .query_row(&format!("PRAGMA {n}"), [], |r| r.get::<_, i64>(0))
                    .unwrap() as u64
            };
            (p("page_count") - p("freelist_count")) * p("page_size")
        };
        assert_eq!(s.growth_bytes_per_day, Some(used / 40 * 10));
        assert!(s.free_bytes.is_some());
        assert!(s.days_left.is_some_and(|d| d > 0.0));
    }

    /// Decided outbox rows removed after the dedup horizon (their audit
    /// records stay) do not make the database look as if it grew by
    /// everything it holds each day.
    #[test]
    fn growth_counts_the_rows_whose_audit_records_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let now = chrono::Utc::now().timestamp_millis();
        let day = 24 * 3600 * 1000;
        let times: Vec<i64> = (0..30)
            .map(|i| now - 5 * day + i)
            .chain((0..10).map(|i| now - 3_600_000 + i))
            .collect();
        for (i, t) in times.iter().enumerate() {
            insert_rejected(&store, i, *t);
            store
                .conn
                .execute(
                    "INSERT INTO audit (scan_uuid, record, prev_hash, hash) VALUES (?1, '{}', '', '')",
                    [format!("u{i}")],
                )
                .unwrap();
        }
        let before = store.space(dir.path(), now).unwrap().growth_bytes_per_day;
        store
            .conn
            .execute("DELETE FROM scans WHERE seq <= 30", [])
            .unwrap();
        let after = store.space(dir.path(), now).unwrap().growth_bytes_per_day;
        assert!(after <= before, "{after:?} > {before:?}");
    }
}
