//! Wall-clock steps within one boot, so the exact index can be searched by
//! wall time and still decide on the boot clock.
//!
//! Two scans of the same boot are compared on `CLOCK_BOOTTIME`; the ledger's
//! index is on wall time (`captured_ms`). For a row, `offset = captured_ms −
//! boot_ns/10⁶` is constant until the wall clock is stepped (NTP sync on a
//! Raspberry Pi without RTC, an operator setting the time). Between two rows
//! of one boot, wall-time distance and boot-time distance differ by exactly
//! the difference of their offsets. Keeping, per boot, the range of offsets
//! of committed rows gives the widening ("allowance") of the wall-time search
//! range that is guaranteed to contain every same-boot twin; the boot clock
//! then decides exactly. The ranges are stored in `boot_offsets` (written in
//! the decision's transaction) and reloaded at start.

use rusqlite::{Connection, params};
use std::collections::HashMap;

/// Offset range of committed rows, per boot: in memory as the decisions
/// of transactions not committed yet widen it (`ranges`, what allowances
/// use, so a later scan of the same batch finds its twin), and as the
/// database holds it (`stored`: loaded, then [`BootOffsets::confirm`]ed
/// after each commit). A range widened by a transaction that was rolled
/// back is wider in memory than stored; the next commit of such an offset
/// stores it again, so the range reloaded at the next start never misses
/// a committed row.
#[derive(Debug, Default)]
pub struct BootOffsets {
    ranges: HashMap<String, (i64, i64)>,
    stored: HashMap<String, (i64, i64)>,
}

/// Wall-clock minus boot-clock of one capture, in ms.
pub fn offset(captured_ms: i64, boot_ns: i64) -> i64 {
    captured_ms - boot_ns.div_euclid(1_000_000)
}

impl BootOffsets {
    /// Load the recorded ranges.
    pub fn load(conn: &Connection) -> rusqlite::Result<BootOffsets> {
        let mut q = conn.prepare("SELECT boot_id, min_offset, max_offset FROM boot_offsets")?;
        let ranges = q
            .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))?
            .collect::<Result<HashMap<_, _>, _>>()?;
        Ok(BootOffsets {
            stored: ranges.clone(),
            ranges,
        })
    }

    /// How far (ms) a same-boot twin's wall time can be from where its boot
    /// time says it is, for a scan of `boot_id` with offset `off`.
    pub fn allowance(&self, boot_id: &str, off: i64) -> i64 {
        match self.ranges.get(boot_id) {
            Some(&(lo, hi)) => (off - lo).abs().max((hi - off).abs()),
            None => 0, // no committed row of this boot: no same-boot twin
        }
    }

    /// Record a committed row's offset in memory; returns the boot's range
    /// to store inside the commit's transaction ([`BootOffsets::store`])
    /// if the database's range does not hold the offset yet, and after
    /// the commit [`BootOffsets::confirm`] it. (Two steps, so the caller
    /// can share this map between threads without holding its lock across
    /// SQL.)
    pub fn widen(&mut self, boot_id: &str, off: i64) -> Option<(i64, i64)> {
        let range = match self.ranges.get(boot_id) {
            Some(&(lo, hi)) => (lo.min(off), hi.max(off)),
            None => (off, off),
        };
        self.ranges.insert(boot_id.to_string(), range);
        let stored = self
            .stored
            .get(boot_id)
            .is_some_and(|&(lo, hi)| (lo..=hi).contains(&off));
        (!stored).then_some(range)
    }

    /// A range [`BootOffsets::widen`] returned is committed: the database
    /// holds it.
    pub fn confirm(&mut self, boot_id: &str, (lo, hi): (i64, i64)) {
        let range = match self.stored.get(boot_id) {
            Some(&(l, h)) => (l.min(lo), h.max(hi)),
            None => (lo, hi),
        };
        self.stored.insert(boot_id.to_string(), range);
    }

    /// Persist a boot's widened range (inside the commit's transaction);
    /// ranges only ever widen, so two writers merge by min and max.
    pub fn store(tx: &Connection, boot_id: &str, lo: i64, hi: i64) -> rusqlite::Result<()> {
        tx.prepare_cached(
            "INSERT INTO boot_offsets (boot_id, min_offset, max_offset) VALUES (?1, ?2, ?3)
             ON CONFLICT (boot_id) DO UPDATE SET
                 min_offset = min(min_offset, excluded.min_offset),
                 max_offset = max(max_offset, excluded.max_offset)",
        )?
        .execute(params![boot_id, lo, hi])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowance_covers_the_offset_spread() {
        let mut b = BootOffsets::default();
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE boot_offsets (boot_id TEXT PRIMARY KEY, min_offset INTEGER, max_offset INTEGER)",
        )
        .unwrap();
        assert_eq!(b.allowance("a", 100), 0);
        let record = |b: &mut BootOffsets, off| {
            if let Some((lo, hi)) = b.widen("a", off) {
                BootOffsets::store(&conn, "a", lo, hi).unwrap();
            }
        };
        record(&mut b, 1000);
        assert_eq!(b.allowance("a", 1000), 0);
        // NTP stepped the clock forward by 2 h.
        record(&mut b, 1000 + 7_200_000);
        assert_eq!(b.allowance("a", 1000), 7_200_000);
        assert_eq!(b.allowance("a", 1000 + 7_200_000), 7_200_000);
        assert_eq!(b.allowance("b", 5), 0);
        let reloaded = BootOffsets::load(&conn).unwrap();
        assert_eq!(reloaded.allowance("a", 1000), 7_200_000);
    }

    /// A widening whose transaction rolled back is stored by the next
    /// commit of that offset; once confirmed, it is not stored again.
    #[test]
    fn a_widening_rolled_back_is_stored_by_the_next_commit() {
        let mut b = BootOffsets::default();
        assert_eq!(b.widen("a", 1000), Some((1000, 1000)));
        b.confirm("a", (1000, 1000));
        assert_eq!(b.widen("a", 1000), None);
        // Stepped by 2 h; the transaction that stored it rolled back (no
        // confirm): the range in memory is wide, the stored one is not.
        assert_eq!(b.widen("a", 7_201_000), Some((1000, 7_201_000)));
        assert_eq!(b.allowance("a", 1000), 7_200_000);
        // The scan is decided again and committed: stored this time.
        assert_eq!(b.widen("a", 7_201_000), Some((1000, 7_201_000)));
        b.confirm("a", (1000, 7_201_000));
        assert_eq!(b.widen("a", 7_201_000), None);
        assert_eq!(b.widen("a", 5_000), None);
    }
}
