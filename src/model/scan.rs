//! Where a scan is in its life: [`ScanState`], stored by name in the
//! outbox's `scans.state` and named in every audit record.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use std::fmt;

/// Where a scan is in its life; stored by name in `scans.state`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ScanState {
    /// Durable, not decided yet.
    Pending,
    /// Waiting for exact knowledge (the facility store did not answer).
    Unresolved,
    /// A new physical movement: it has a ledger entry.
    Committed,
    /// An echo of a committed scan (its twin).
    Suppressed,
    /// Failed validation.
    Rejected,
    /// A control label the operator read (REPEAT, QUANTITY N): never a
    /// pick; it declares the next read of its scanner.
    Control,
}

impl ScanState {
    /// Every state, in the order `outbox status` lists them.
    pub const ALL: [ScanState; 6] = [
        ScanState::Pending,
        ScanState::Unresolved,
        ScanState::Committed,
        ScanState::Suppressed,
        ScanState::Rejected,
        ScanState::Control,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ScanState::Pending => "pending",
            ScanState::Unresolved => "unresolved",
            ScanState::Committed => "committed",
            ScanState::Suppressed => "suppressed",
            ScanState::Rejected => "rejected",
            ScanState::Control => "control",
        }
    }

    /// The state stored as `name`.
    pub fn parse(name: &str) -> Option<ScanState> {
        ScanState::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Committed, suppressed, rejected or control: the scan's last state.
    pub fn is_final(self) -> bool {
        !matches!(self, ScanState::Pending | ScanState::Unresolved)
    }
}

impl fmt::Display for ScanState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ToSql for ScanState {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for ScanState {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let name = value.as_str()?;
        ScanState::parse(name)
            .ok_or_else(|| FromSqlError::Other(format!("{name:?} is not a scan state").into()))
    }
}
