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

/// Format Unix milliseconds as RFC 3339 UTC with milliseconds
/// (`YYYY-MM-DDTHH:MM:SS.mmmZ`; a time chrono cannot represent as 1970).
pub fn rfc3339_ms(ms: i64) -> String {
    match rfc3339_ms_bytes(ms) {
        // (ASCII digits and separators: one allocation and a copy.)
        Some(b) => String::from_utf8(b.to_vec()).expect("an RFC 3339 stamp is ASCII"),
        None => chrono::DateTime::from_timestamp_millis(ms)
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    }
}

/// The last millisecond of year 9999: the fast formatter's upper bound.
const MAX_FOUR_DIGIT_MS: i64 = 253_402_300_799_999;

/// [`rfc3339_ms`]'s 24 bytes for a time from 1970 through year 9999 (every
/// stamp scangate writes), without chrono or an allocation: it runs
/// several times per scan. `None` for any other time.
pub fn rfc3339_ms_bytes(ms: i64) -> Option<[u8; 24]> {
    if !(0..=MAX_FOUR_DIGIT_MS).contains(&ms) {
        return None;
    }
    let (days, ms_of_day) = (ms / 86_400_000, ms % 86_400_000);
    let (y, m, d) = civil_from_days(days);
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut n: i64| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (n % 10) as u8;
            n /= 10;
        }
    };
    put(0, 4, y);
    put(5, 2, m);
    put(8, 2, d);
    put(11, 2, ms_of_day / 3_600_000);
    put(14, 2, ms_of_day / 60_000 % 60);
    put(17, 2, ms_of_day / 1000 % 60);
    put(20, 3, ms_of_day % 1000);
    Some(out)
}

/// The milliseconds of a stamp exactly as [`rfc3339_ms`] writes it for a
/// time from 1970 through year 9999; `None` for any other text.
pub fn parse_rfc3339_ms(text: &[u8]) -> Option<i64> {
    let num = |at: usize, width: usize| -> Option<i64> {
        let digits = text.get(at..at + width)?;
        digits.iter().try_fold(0i64, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    };
    if text.len() != 24 {
        return None;
    }
    let (y, m, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let ms = days_from_civil(y, m, d) * 86_400_000
        + num(11, 2)? * 3_600_000
        + num(14, 2)? * 60_000
        + num(17, 2)? * 1000
        + num(20, 3)?;
    // Written back, the same bytes: a 31 April, 25 o'clock or a wrong
    // separator is not this format.
    (rfc3339_ms_bytes(ms)? == text).then_some(ms)
}

/// Year, month, day of a day count from 1970-01-01 (proleptic Gregorian;
/// H. Hinnant's `civil_from_days`, <https://howardhinnant.github.io/date_algorithms.html>).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The inverse of [`civil_from_days`] (Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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

    /// The fast formatter writes what chrono writes, and its parser reads
    /// back exactly what it writes: edges of days, months, leap years,
    /// centuries, and a spread over 1970–9999.
    #[test]
    fn stamps_match_chrono_and_parse_back() {
        let chrono = |ms: i64| {
            chrono::DateTime::from_timestamp_millis(ms)
                .unwrap_or_default()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        let mut cases = vec![
            0,
            1,
            86_399_999,
            86_400_000,
            951_782_400_000,   // 2000-02-29
            4_107_542_400_000, // 2100-03-01
            1_796_256_000_000,
            MAX_FOUR_DIGIT_MS,
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push((x % (MAX_FOUR_DIGIT_MS as u64 + 1)) as i64);
        }
        for ms in cases {
            let text = chrono(ms);
            assert_eq!(rfc3339_ms(ms), text, "{ms}");
            assert_eq!(parse_rfc3339_ms(text.as_bytes()), Some(ms), "{text}");
        }
        for ms in [-1, MAX_FOUR_DIGIT_MS + 1, i64::MIN, i64::MAX] {
            assert_eq!(rfc3339_ms(ms), chrono(ms), "{ms}");
            assert_eq!(rfc3339_ms_bytes(ms), None);
        }
        for text in [
            "2026-04-31T00:00:00.000Z",
            "2026-02-29T00:00:00.000Z",
            "2026-12-03T24:00:00.000Z",
            "2026-12-03T17:32:47.123+0",
            "2026-12-03 17:32:47.123Z",
            "2026-12-03T17:32:47.1234",
            "+026-12-03T17:32:47.123Z",
            "2026-12-03T17:32:47Z",
        ] {
            assert_eq!(parse_rfc3339_ms(text.as_bytes()), None, "{text}");
        }
    }

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
    }
}
