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

    /// The UTC calendar year of the capture.
    pub fn year(&self) -> i32 {
        use chrono::Datelike;
        chrono::DateTime::from_timestamp_millis(self.utc_ms)
            .unwrap_or_default()
            .year()
    }
}

/// Format Unix milliseconds as RFC 3339 UTC with milliseconds.
pub fn rfc3339_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `CLOCK_BOOTTIME` in nanoseconds.
pub fn boot_ns() -> i64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .expect("CLOCK_BOOTTIME is available on every Linux since 2.6.39");
    ts.tv_sec() * 1_000_000_000 + ts.tv_nsec()
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
