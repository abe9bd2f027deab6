//! Capture time: wall clock (UTC, ms), boot clock and whether NTP is in sync.
//!
//! A Raspberry Pi has no RTC: until NTP syncs, the wall clock can be far off,
//! and when it syncs it jumps. `CLOCK_BOOTTIME` never jumps and counts through
//! suspend, so the gate compares two scans taken in the same boot on it
//! (exactly), and only scans from different boots on UTC. The `synced` flag is
//! carried into the ledger so a consumer knows which wall times to trust.

use std::sync::OnceLock;

/// When a scan was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureTime {
    /// Wall clock, milliseconds since the Unix epoch (UTC).
    pub utc_ms: i64,
    /// `CLOCK_BOOTTIME` in nanoseconds.
    pub boot_ns: i64,
    /// `/proc/sys/kernel/random/boot_id`: which boot `boot_ns` belongs to.
    pub boot_id: String,
    /// Whether the kernel reported the wall clock as NTP-synchronised.
    pub synced: bool,
}

impl CaptureTime {
    /// Read all clocks now.
    pub fn now() -> CaptureTime {
        let utc_ms = chrono::Utc::now().timestamp_millis();
        CaptureTime {
            utc_ms,
            boot_ns: boot_ns(),
            boot_id: boot_id().to_string(),
            synced: clock_synced(),
        }
    }

    /// The UTC calendar year of the capture, for the century of two-digit
    /// dates (GS1 expiry `YYMMDD`). A clock that is not NTP-synchronised may
    /// say 1970 (an RTC-less board before sync): its year is taken as at
    /// least [`EARLIEST_YEAR`], so a label decodes — and keys — the same
    /// before and after the sync (with 1970, expiry `28…` would be 1928).
    pub fn year(&self) -> i32 {
        use chrono::Datelike;
        let year = chrono::DateTime::from_timestamp_millis(self.utc_ms)
            .unwrap_or_default()
            .year();
        if self.synced {
            year
        } else {
            year.max(EARLIEST_YEAR)
        }
    }
}

/// No scan is read before this year (this software did not exist): the
/// floor for an unsynchronised clock's year.
pub const EARLIEST_YEAR: i32 = 2026;

/// Format Unix milliseconds as RFC 3339 UTC with milliseconds.
pub fn rfc3339_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `CLOCK_BOOTTIME` in nanoseconds. (Time since boot: a 32-bit `time_t`,
/// as on armv7, holds 68 years of it.)
#[allow(clippy::useless_conversion)] // i32 → i64 on 32-bit time_t
pub fn boot_ns() -> i64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .expect("CLOCK_BOOTTIME is available on every Linux since 2.6.39");
    i64::from(ts.tv_sec()) * 1_000_000_000 + i64::from(ts.tv_nsec())
}

/// This boot's id (read once).
pub fn boot_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown-boot".to_string())
    })
}

/// Whether the kernel says the wall clock is synchronised (adjtimex without
/// `STA_UNSYNC`, and not `TIME_ERROR`).
pub fn clock_synced() -> bool {
    // SAFETY: adjtimex with modes = 0 only reads the kernel's clock state
    // into the zeroed struct we own.
    unsafe {
        let mut tx: libc::timex = std::mem::zeroed();
        let state = libc::adjtimex(&mut tx);
        state != libc::TIME_ERROR && state >= 0 && (tx.status & libc::STA_UNSYNC) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(utc_ms: i64, synced: bool) -> CaptureTime {
        CaptureTime {
            utc_ms,
            boot_ns: 0,
            boot_id: "b".into(),
            synced,
        }
    }

    #[test]
    fn an_unsynchronised_1970_clock_decodes_dates_in_this_century() {
        assert_eq!(at(0, false).year(), EARLIEST_YEAR);
        assert_eq!(at(1_800_000_000_000, false).year(), 2027);
        // A synchronised clock is trusted as it is.
        assert_eq!(at(0, true).year(), 1970);
        // The same label keys alike before and after NTP sync.
        let raw = crate::capture::RawScan {
            bytes: b"]d201003077731050251728123121SN1".to_vec(),
            framing_error: None,
        };
        let before = raw.decode(at(0, false).year()).unwrap();
        let after = raw.decode(at(1_800_000_000_000, true).year()).unwrap();
        assert_eq!(before.product, after.product);
    }
}
