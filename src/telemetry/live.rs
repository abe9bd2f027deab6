//! The status file: what only the running daemon knows (which scanner has
//! which device open, today's reads and rejects), written by the
//! publisher and read by `scangate status`.

use serde::{Deserialize, Serialize};

/// File name of the status file in the state directory.
pub const STATUS_FILE: &str = "status.json";

/// Ambiguous echoes on one scanner that make a burst (within
/// [`AMBIGUOUS_BURST_WITHIN_MS`]): "someone may be counting identical
/// items". The alert rule `ScangateAmbiguousEchoes` uses the same figures.
pub const AMBIGUOUS_BURST: usize = 3;
/// See [`AMBIGUOUS_BURST`].
pub const AMBIGUOUS_BURST_WITHIN_MS: i64 = 60_000;

/// One scanner as the running daemon sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveScanner {
    /// Its `[[scanner]] name`.
    pub name: String,
    /// The device it has open (or had, last).
    pub device: Option<String>,
    /// Its device is open.
    pub connected: bool,
    /// What the device open now (or last) says it is: its USB
    /// descriptors; none for a device not on USB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<crate::model::Identity>,
    /// The software revision it reported in its own protocol (Zebra
    /// SSI), when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub software: Option<String>,
    /// Since when connected or disconnected (Unix ms; `None`: never
    /// connected since the daemon started).
    pub since_ms: Option<i64>,
    /// Its last read (Unix ms) since the daemon started.
    pub last_read_ms: Option<i64>,
    /// Reads today (local time; counted since the daemon started).
    pub reads_today: u64,
    /// Of them, rejected.
    pub rejects_today: u64,
    /// Of them, ambiguous echoes (labels without a serial).
    #[serde(default)]
    pub ambiguous_today: u64,
    /// When the last few ambiguous echoes were decided (Unix ms, oldest
    /// first, at most [`AMBIGUOUS_BURST`]): a burst shows in `status`.
    #[serde(default)]
    pub ambiguous_recent_ms: Vec<i64>,
    /// Of them, reads the checks at the counter told an alert about.
    #[serde(default)]
    pub alerts_today: u64,
    /// The last few alerts since the daemon started (oldest first, at
    /// most [`RECENT_ALERTS`]).
    #[serde(default)]
    pub recent_alerts: Vec<RecentAlert>,
    /// Alerts no ACKNOWLEDGE label read on this scanner has acknowledged
    /// yet (kept in the database: counted across restarts).
    #[serde(default)]
    pub unacknowledged: u64,
    /// The last ACKNOWLEDGE read on it since the daemon started (Unix ms).
    #[serde(default)]
    pub acknowledged_ms: Option<i64>,
    /// The day counted.
    pub day: chrono::NaiveDate,
}

/// How many alerts a scanner's status keeps.
pub const RECENT_ALERTS: usize = 5;

/// An alert the checks at the counter raised (what `status` lists).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentAlert {
    /// When it was decided (Unix ms).
    pub at_ms: i64,
    /// `recalled`, `expired`, `unknown` or `expiring`.
    pub kind: String,
    /// The read's scan UUID (`scangate audit trace` it).
    pub scan_uuid: String,
}

/// The status file's contents.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LiveStatus {
    /// When it was written (Unix ms).
    pub written_ms: i64,
    /// The daemon's process id.
    pub pid: u32,
    /// When the daemon started (Unix ms).
    pub started_ms: i64,
    /// How often it is rewritten (ms).
    pub every_ms: i64,
    /// The daemon's release version (absent: a release before 0.2.0).
    #[serde(default)]
    pub version: Option<String>,
    /// The commit it was built from (absent: before 0.2.0).
    #[serde(default)]
    pub commit: Option<String>,
    /// Every configured scanner.
    pub scanners: Vec<LiveScanner>,
}

impl LiveStatus {
    /// The status file a daemon left in `state_dir`, if there is one that
    /// reads (the longest read: 4 MiB).
    pub fn left_in(state_dir: &std::path::Path) -> Option<LiveStatus> {
        let text = crate::files::read_to_string(&state_dir.join(STATUS_FILE), 4 << 20).ok()?;
        serde_json::from_str(&text).ok()
    }
}

fn today() -> chrono::NaiveDate {
    chrono::Local::now().date_naive()
}

impl LiveScanner {
    /// A configured scanner before its first connect.
    pub(crate) fn new(name: &str) -> LiveScanner {
        LiveScanner {
            name: name.to_string(),
            device: None,
            connected: false,
            identity: None,
            software: None,
            since_ms: None,
            last_read_ms: None,
            reads_today: 0,
            rejects_today: 0,
            ambiguous_today: 0,
            ambiguous_recent_ms: Vec::new(),
            alerts_today: 0,
            recent_alerts: Vec::new(),
            unacknowledged: 0,
            acknowledged_ms: None,
            day: today(),
        }
    }

    /// Count an alert about read `scan_uuid` decided at `at_ms`.
    pub(crate) fn alert(&mut self, at_ms: i64, kind: &str, scan_uuid: &str) {
        self.alerts_today += 1;
        self.unacknowledged += 1;
        self.recent_alerts.push(RecentAlert {
            at_ms,
            kind: kind.to_string(),
            scan_uuid: scan_uuid.to_string(),
        });
        let over = self.recent_alerts.len().saturating_sub(RECENT_ALERTS);
        self.recent_alerts.drain(..over);
    }

    /// Count an ambiguous echo decided at `at_ms`; `live`: decided within
    /// a minute of its read (a replayed backlog makes no burst).
    pub(crate) fn ambiguous(&mut self, at_ms: i64, live: bool) {
        self.ambiguous_today += 1;
        if !live {
            return;
        }
        self.ambiguous_recent_ms.push(at_ms);
        let over = self
            .ambiguous_recent_ms
            .len()
            .saturating_sub(AMBIGUOUS_BURST);
        self.ambiguous_recent_ms.drain(..over);
    }

    /// The time of the latest burst, if the last [`AMBIGUOUS_BURST`]
    /// ambiguous echoes came within [`AMBIGUOUS_BURST_WITHIN_MS`].
    pub fn ambiguous_burst_ms(&self) -> Option<i64> {
        let recent = &self.ambiguous_recent_ms;
        match (recent.first(), recent.last()) {
            (Some(first), Some(last))
                if recent.len() >= AMBIGUOUS_BURST && last - first <= AMBIGUOUS_BURST_WITHIN_MS =>
            {
                Some(*last)
            }
            _ => None,
        }
    }

    /// Start today's counts afresh after midnight (local time).
    pub(crate) fn roll_day(&mut self) {
        let day = today();
        if self.day != day {
            self.day = day;
            self.reads_today = 0;
            self.rejects_today = 0;
            self.ambiguous_today = 0;
            self.alerts_today = 0;
        }
    }
}
