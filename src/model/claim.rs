//! What the gate asks the facility store and what it answers: a scan to
//! claim ([`Claim`]) and the facility's decision ([`Outcome`]).

/// One scan to claim.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The scan's UUID (idempotency key).
    pub scan_uuid: String,
    /// Its content key (hex).
    pub content_key: String,
    /// Capture time, Unix ms (UTC).
    pub captured_ms: i64,
    /// Its own echo window (ms), narrower than the facility's: a
    /// double-fire window, a declared repeat (`None`: the facility's).
    pub window_ms: Option<i64>,
    /// Ledger entry fields, in order (the names of `ledger::LedgerEntry`).
    pub fields: Vec<(&'static str, String)>,
}

/// The facility's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// This scan is the pick; its ledger entry is in the stream.
    Committed,
    /// An echo of the committed scan `twin`.
    Suppressed {
        /// The committed scan.
        twin: String,
    },
}
