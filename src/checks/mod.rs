//! The checks at the counter: what a read's label and the product data say
//! about the item read — recalled, expired, unknown, expiring — and, for
//! a `receive` read of a serialised item, whether it was received before
//! (suspect: [`received`]), found once
//! a read is decided (never before its ACK) and told to its scanner instead
//! of "committed" or "waiting" ([`crate::model::Alert`]). An alert warns;
//! it never refuses a read: the item moved, and the read is recorded.
//!
//! Which checks a scanner runs: its `checks` key, else the defaults of its
//! scan type ([`Check::defaults_for`]: a `waste` or `return` read of an
//! expired item is expected, so those skip expiry). Expiry needs no data;
//! recall and unknown need `scangate recalls import` and `products import`
//! and are off while their data is missing.
//!
//! The day a label is checked against is the read's capture date in the
//! gateway's local time zone (a pharmacy's day), and a label is good
//! through its expiry date (GS1's day 00, the month's last day, is
//! resolved when the label is decoded).

pub mod open;
pub mod received;

use crate::config::ChecksConfig;
use crate::model::{Alert, AlertFound, Check, Findings};
use crate::products::{Catalog, DataFiles};
use chrono::{Days, NaiveDate, TimeZone};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// What the checks read of one scan.
#[derive(Debug, Clone, Copy)]
pub struct Read<'a> {
    /// The scanner that read it.
    pub scanner: &'a str,
    /// What the read means (`receive`, `dispense`, `waste`, …).
    pub scan_type: &'a str,
    /// When it was read (Unix ms).
    pub captured_ms: i64,
    /// GTIN-14.
    pub gtin: Option<&'a str>,
    /// The NDC its GTIN carries (10 digits).
    pub ndc10: Option<&'a str>,
    /// Batch / lot.
    pub lot: Option<&'a str>,
    /// Expiry, YYYY-MM-DD.
    pub expiry: Option<&'a str>,
}

/// The checks of a gateway: its `[checks]` settings, each scanner's
/// checks and its product and recall data (shared by the deciders;
/// scanners are set again at a reload).
pub struct Checks {
    catalog: Catalog,
    warn_days: u64,
    serial_retention: std::time::Duration,
    scanners: Mutex<HashMap<String, Vec<Check>>>,
    /// The local day last read, as `[start, end)` in Unix ms: a time
    /// zone lookup per read costs a system call.
    day: Mutex<Option<(i64, i64, NaiveDate)>>,
    /// What the data said of each NDC read lately ([`Memo`]).
    memo: Mutex<Memo>,
}

/// What the data said of the NDCs read lately, for the files it said it
/// from: a counter sees the same products all day, and each answer is one
/// to three SQLite queries. Emptied when an import replaces a file, and
/// when it holds [`MEMO_LIMIT`] NDCs.
#[derive(Default)]
struct Memo {
    files: DataFiles,
    /// NDC → what the data says of it.
    ndcs: HashMap<String, NdcFacts>,
}

/// The most NDCs [`Memo`] holds (about 1 MiB).
const MEMO_LIMIT: usize = 10_000;

impl Checks {
    /// The checks of the gateway whose data is in `state_dir`.
    pub fn new(state_dir: &Path, cfg: &ChecksConfig) -> Checks {
        Checks {
            // An import is seen within a second.
            catalog: Catalog::looking_again(state_dir, std::time::Duration::from_secs(1)),
            warn_days: cfg.expiry_warn_days,
            serial_retention: std::time::Duration::from_secs(cfg.serial_retention_days * 86_400),
            scanners: Mutex::default(),
            day: Mutex::default(),
            memo: Mutex::default(),
        }
    }

    /// Scanner `name` runs `checks` (its `checks` key), or without one
    /// the defaults of its scan type.
    pub fn set_scanner(&self, name: &str, checks: Option<&[Check]>) {
        let mut all = self.scanners.lock().unwrap_or_else(PoisonError::into_inner);
        match checks {
            Some(c) => all.insert(name.to_string(), c.to_vec()),
            None => all.remove(name),
        };
    }

    /// How long a received serial is kept (`[checks]
    /// serial_retention_days`).
    pub fn serial_retention(&self) -> std::time::Duration {
        self.serial_retention
    }

    /// Whether scanner `scanner`, whose reads are `scan_type`, runs
    /// `check`.
    pub fn runs(&self, scanner: &str, scan_type: &str, check: Check) -> bool {
        self.checks_of(scanner, scan_type) & 1 << check as u8 != 0
    }

    /// A scanner's checks as bits (one lock).
    fn checks_of(&self, scanner: &str, scan_type: &str) -> u8 {
        let all = self.scanners.lock().unwrap_or_else(PoisonError::into_inner);
        let checks = match all.get(scanner) {
            Some(set) => set.as_slice(),
            None => Check::defaults_for(scan_type),
        };
        checks.iter().fold(0, |bits, &c| bits | 1 << c as u8)
    }

    /// What the checks find about `read`'s item: its DEA schedule (with
    /// product data, whichever checks the scanner runs: every entry
    /// carries it) and its alerts, most urgent first. Product or recall
    /// data that cannot be read counts as none (`status` reports it).
    pub fn findings(&self, read: &Read<'_>) -> Findings {
        let set = self.checks_of(read.scanner, read.scan_type);
        let runs = |c: Check| set & 1 << c as u8 != 0;
        // What the data says of the NDC (only a US drug's GTIN carries
        // one, and only those are in the data).
        let facts = read.ndc10.and_then(|n| self.facts(n));
        let mut found = Findings {
            dea_schedule: facts
                .as_ref()
                .and_then(|f| f.schedule.as_deref().map(str::to_string)),
            alerts: Vec::new(),
        };
        if runs(Check::Recall)
            && let (Some(ndc), Some(NdcFacts { recalled: true, .. })) = (read.ndc10, &facts)
            && let Ok(recalls) = self.catalog.recalls_for(ndc, read.lot)
        {
            found.alerts.extend(recalls.into_iter().map(|r| AlertFound {
                recall_number: Some(r.recall_number),
                recall_class: Some(r.classification),
                recall_lot: Some(r.lot.as_str().to_string()),
                ..AlertFound::of(Alert::Recalled)
            }));
        }
        let expiry = match (runs(Check::Expiry), read.expiry) {
            (true, Some(expiry)) => self
                .local_day(read.captured_ms)
                .and_then(|day| expiry_alert(expiry, day, self.warn_days)),
            _ => None,
        };
        let unknown = runs(Check::Unknown) && matches!(facts, Some(NdcFacts { listed: false, .. }));
        found.alerts.extend(
            [expiry, unknown.then_some(Alert::Unknown)]
                .into_iter()
                .flatten()
                .map(AlertFound::of),
        );
        // (Recalls first, as found; then by urgency: a stable sort.)
        found.alerts.sort_by_key(|a| a.kind);
        found
    }

    /// What the data says of `ndc` ([`NdcFacts`]), from [`Memo`] or the
    /// data; `None`: the data cannot be read.
    fn facts(&self, ndc: &str) -> Option<NdcFacts> {
        let files = self.catalog.files().ok()?;
        let mut memo = self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        if memo.files != files || memo.ndcs.len() >= MEMO_LIMIT {
            memo.ndcs.clear();
            memo.files = files;
        }
        if let Some(facts) = memo.ndcs.get(ndc) {
            return Some(facts.clone());
        }
        let product = match files.products {
            Some(_) => self.catalog.lookup_ndc(ndc).ok()?,
            None => None,
        };
        let facts = NdcFacts {
            listed: files.products.is_none() || product.is_some(),
            recalled: files.recalls.is_some()
                && !self.catalog.recalls_for(ndc, None).ok()?.is_empty(),
            schedule: product.and_then(|p| p.dea_schedule).map(Into::into),
        };
        memo.ndcs.insert(ndc.to_string(), facts.clone());
        Some(facts)
    }
}

/// What the data says of one NDC.
#[derive(Debug, Clone)]
struct NdcFacts {
    /// In the product data (true when none is loaded: nothing is unknown
    /// then).
    listed: bool,
    /// Named by an ongoing recall (any lot).
    recalled: bool,
    /// Its DEA schedule, if the product data lists it as controlled.
    schedule: Option<Box<str>>,
}

impl Checks {
    /// The gateway's local date at `ms` (Unix ms).
    fn local_day(&self, ms: i64) -> Option<NaiveDate> {
        let mut cached = self.day.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((start, end, day)) = *cached
            && (start..end).contains(&ms)
        {
            return Some(day);
        }
        let day = chrono::Local
            .timestamp_millis_opt(ms)
            .single()?
            .date_naive();
        let start_of = |d: NaiveDate| {
            chrono::Local
                .from_local_datetime(&d.and_hms_opt(0, 0, 0)?)
                .earliest()
                .map(|t| t.timestamp_millis())
        };
        // (A day whose midnight does not exist, at a DST change, is not
        // cached: each read of it asks the time zone.)
        if let (Some(start), Some(end)) = (start_of(day), day.succ_opt().and_then(start_of)) {
            *cached = Some((start, end, day));
        }
        Some(day)
    }
}

/// Expired when `expiry` (YYYY-MM-DD) is before `day`, the read's local
/// date; expiring when it is fewer than `warn_days` days after it (0:
/// never).
pub fn expiry_alert(expiry: &str, day: NaiveDate, warn_days: u64) -> Option<Alert> {
    let expiry = ymd(expiry)?;
    if expiry < day {
        return Some(Alert::Expired);
    }
    let warn_until = day.checked_add_days(Days::new(warn_days))?;
    (warn_days > 0 && expiry < warn_until).then_some(Alert::Expiring)
}

/// `YYYY-MM-DD` as the outbox stores an expiry (without the format
/// parser: this runs at every read).
fn ymd(text: &str) -> Option<NaiveDate> {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        b[r].iter().try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    NaiveDate::from_ymd_opt(num(0..4)? as i32, num(5..7)?, num(8..10)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(date: &str) -> NaiveDate {
        NaiveDate::parse_from_str(date, "%Y-%m-%d").unwrap()
    }

    fn ms(date: &str) -> i64 {
        let d = NaiveDate::parse_from_str(date, "%Y-%m-%d").unwrap();
        chrono::Local
            .from_local_datetime(&d.and_hms_opt(12, 0, 0).unwrap())
            .single()
            .unwrap()
            .timestamp_millis()
    }

    #[test]
    fn a_label_is_good_through_its_expiry_day() {
        let read = day("2026-12-05");
        assert_eq!(expiry_alert("2026-12-04", read, 30), Some(Alert::Expired));
        assert_eq!(expiry_alert("2026-12-05", read, 0), None);
        assert_eq!(expiry_alert("2026-12-05", read, 30), Some(Alert::Expiring));
        assert_eq!(expiry_alert("2027-01-03", read, 30), Some(Alert::Expiring));
        assert_eq!(expiry_alert("2027-01-04", read, 30), None);
        assert_eq!(expiry_alert("not a date", read, 30), None);
        assert_eq!(expiry_alert("2026-13-01", read, 30), None);
        assert_eq!(ymd("2028-02-29"), NaiveDate::from_ymd_opt(2028, 2, 29));
        assert_eq!(ymd("2027-02-29"), None);
    }

    #[test]
    fn the_local_day_is_cached_within_it_and_read_again_after() {
        let dir = tempfile::tempdir().unwrap();
        let checks = Checks::new(dir.path(), &ChecksConfig::default());
        let at = ms("2026-12-05");
        assert_eq!(checks.local_day(at), Some(day("2026-12-05")));
        assert_eq!(checks.local_day(at + 3_600_000), Some(day("2026-12-05")));
        assert_eq!(checks.local_day(ms("2026-12-06")), Some(day("2026-12-06")));
        assert_eq!(checks.local_day(ms("2026-12-04")), Some(day("2026-12-04")));
    }

    #[test]
    fn waste_and_return_skip_expiry_unless_the_scanner_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let checks = Checks::new(dir.path(), &ChecksConfig::default());
        let read = |scanner, scan_type| Read {
            scanner,
            scan_type,
            captured_ms: ms("2026-12-05"),
            gtin: Some("00300676382302"),
            ndc10: Some("0067638230"),
            lot: Some("L1"),
            expiry: Some("2026-11-30"),
        };
        assert_eq!(
            checks.findings(&read("c1", "dispense")).told(),
            Some(Alert::Expired)
        );
        assert_eq!(checks.findings(&read("w1", "waste")).told(), None);
        assert_eq!(checks.findings(&read("r1", "return")).told(), None);
        checks.set_scanner("w1", Some(&[Check::Expiry]));
        assert_eq!(
            checks.findings(&read("w1", "waste")).told(),
            Some(Alert::Expired)
        );
        checks.set_scanner("c1", Some(&[]));
        assert_eq!(checks.findings(&read("c1", "dispense")).told(), None);
        checks.set_scanner("c1", None);
        assert_eq!(
            checks.findings(&read("c1", "dispense")).told(),
            Some(Alert::Expired)
        );
        // No product data: unknown is off, whatever the scanner runs.
        assert_eq!(
            checks
                .findings(&Read {
                    expiry: Some("2030-01-01"),
                    ..read("c1", "dispense")
                })
                .told(),
            None
        );
    }
}
