//! What the gate decides about a scan: its [`Verdict`], the [`Decision`]
//! that carries it to the outbox, the audit trail, the log and the
//! metrics, and the gate's running counts ([`GateStats`]).

use super::ScanState;

/// What the gate decided.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum Verdict {
    /// A new physical movement: one ledger entry was appended.
    Committed,
    /// An echo of the committed scan `twin`.
    Suppressed {
        /// UUID of the committed scan this one echoes.
        twin: String,
    },
    /// Failed validation.
    Rejected {
        /// Why (never contains the scanned data).
        reason: String,
    },
    /// Waiting for the facility store (unreachable or unconfirmed); retried
    /// through the same claim until it ends.
    Unresolved {
        /// Why it could not be decided yet.
        reason: String,
    },
    /// Not decided yet (still in the outbox).
    Pending,
    /// A control label (REPEAT, QUANTITY N): audited, never a pick.
    Control {
        /// What it declares ("repeat", "quantity 3").
        control: String,
    },
}

impl Verdict {
    /// The state it leaves the scan in (in the outbox and the audit trail).
    pub fn state(&self) -> ScanState {
        match self {
            Verdict::Committed => ScanState::Committed,
            Verdict::Suppressed { .. } => ScanState::Suppressed,
            Verdict::Rejected { .. } => ScanState::Rejected,
            Verdict::Unresolved { .. } => ScanState::Unresolved,
            Verdict::Pending => ScanState::Pending,
            Verdict::Control { .. } => ScanState::Control,
        }
    }

    /// Committed, suppressed, rejected or control: the scan's last state.
    pub fn is_final(&self) -> bool {
        self.state().is_final()
    }
}

/// One decision about one scan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Decision {
    /// The scan.
    pub scan_uuid: String,
    /// The verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// Its content key (absent for rejected scans).
    pub content_key: Option<String>,
    /// An echo of a label without a serial, not known to be a resend:
    /// another identical item, a re-scan and a double-fire read alike, so
    /// this suppression may have under-counted (docs/design.md,
    /// "Unserialised labels").
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ambiguous: bool,
    /// The scanner that read it (for metrics and `status`).
    #[serde(skip)]
    pub scanner: String,
    /// When it was read on this boot's clock (`CLOCK_BOOTTIME`, ns), if it
    /// was read during this boot: the read → decision latency.
    #[serde(skip)]
    pub read_boot_ns: Option<i64>,
    /// Its state before this decision (`unresolved` again: a retry).
    #[serde(skip)]
    pub was: ScanState,
    /// What its scanner is told instead of what the verdict says alone:
    /// a shared scanner's read whose twin another gateway committed
    /// (`claimer::claims`, "Told as the facility decided").
    #[serde(skip)]
    pub told_as: Option<super::Told>,
    /// What the checks at the counter found about the item
    /// ([`crate::checks`]): told instead of `committed` or `waiting`;
    /// counted at the read's first decision only.
    #[serde(skip)]
    pub alert: Option<super::Alert>,
    /// An ACKNOWLEDGE control read: how many open alerts of its scanner
    /// it acknowledged.
    #[serde(skip)]
    pub acknowledged: Option<usize>,
}

/// Counters since start.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct GateStats {
    /// Decisions made.
    pub decided: u64,
    /// Committed.
    pub committed: u64,
    /// Suppressed.
    pub suppressed: u64,
    /// Of those, ambiguous: labels without a serial (see
    /// [`Decision::ambiguous`]).
    pub ambiguous: u64,
    /// Rejected.
    pub rejected: u64,
    /// Times a scan became unresolved (facility store unreachable).
    pub unresolved: u64,
    /// Exact lookups performed.
    pub exact_lookups: u64,
    /// Exact lookups the Bloom filter made unnecessary.
    pub lookups_saved: u64,
}

impl GateStats {
    /// The sum of two gates' counts (the facility claimer's two lanes).
    pub fn plus(&self, other: &GateStats) -> GateStats {
        GateStats {
            decided: self.decided + other.decided,
            committed: self.committed + other.committed,
            suppressed: self.suppressed + other.suppressed,
            ambiguous: self.ambiguous + other.ambiguous,
            rejected: self.rejected + other.rejected,
            unresolved: self.unresolved + other.unresolved,
            exact_lookups: self.exact_lookups + other.exact_lookups,
            lookups_saved: self.lookups_saved + other.lookups_saved,
        }
    }

    /// The counts accumulated since `earlier`.
    pub fn since(&self, earlier: &GateStats) -> GateStats {
        GateStats {
            decided: self.decided - earlier.decided,
            committed: self.committed - earlier.committed,
            suppressed: self.suppressed - earlier.suppressed,
            ambiguous: self.ambiguous - earlier.ambiguous,
            rejected: self.rejected - earlier.rejected,
            unresolved: self.unresolved - earlier.unresolved,
            exact_lookups: self.exact_lookups - earlier.exact_lookups,
            lookups_saved: self.lookups_saved - earlier.lookups_saved,
        }
    }
}
