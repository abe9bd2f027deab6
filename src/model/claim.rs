//! What the gate asks the facility store and what it answers: a scan to
//! claim ([`Claim`]) and the facility's decision ([`Outcome`]).

use std::borrow::Cow;

/// One scan to claim, borrowing what it can from the outbox row it is
/// for (a round's claims are encoded into the command buffer and
/// dropped; copying every field of every row cost more than encoding it).
#[derive(Debug, Clone)]
pub struct Claim<'a> {
    /// The scan's UUID (idempotency key).
    pub scan_uuid: &'a str,
    /// Its content key (hex).
    pub content_key: &'a str,
    /// Capture time, Unix ms (UTC).
    pub captured_ms: i64,
    /// Its own echo window (ms), narrower than the facility's: a
    /// double-fire window, a declared repeat (`None`: the facility's).
    pub window_ms: Option<i64>,
    /// Ledger entry fields, in order (the names of `ledger::LedgerEntry`).
    pub fields: Vec<(&'static str, Cow<'a, str>)>,
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
