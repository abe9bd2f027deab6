//! Control labels that lapsed: a REPEAT or QUANTITY N read that no read on
//! its scanner followed within `[controls] within_ms` (or before the
//! daemon stopped) declares nothing, and its audit trail says so — a
//! second record of the control read, decision `control`.
//!
//! The control read itself is decided like any scan (`Gate::decide`, a
//! claimer lane's local verdict: [`crate::model::Verdict::Control`]); a
//! read it applied to carries the declaration from its capture on
//! (`crate::capture::Declared`), so a replay after an outage judges it as
//! it was judged live.

use crate::audit::Emitted;
use crate::decided::DecisionWriter;
use crate::outbox;
use crate::source::operator::Lapse;
use rusqlite::Connection;

/// Control reads written as lapsed in a transaction: the records to emit
/// once it commits, and the scanners to tell.
#[derive(Default)]
pub struct Lapses {
    /// The audit records written.
    pub emitted: Vec<Emitted>,
    /// The scanner of each control read that lapsed and is to be told
    /// ([`Lapse::tell`]), in order.
    pub scanners: Vec<String>,
}

/// Record that control reads lapsed, inside `tx`: each still open is
/// marked and audited with `why` ([`DecisionWriter::lapsed_control`];
/// `gateway`: this gateway's id).
pub fn lapse(tx: &Connection, gateway: &str, controls: &[Lapse]) -> rusqlite::Result<Lapses> {
    let mut writer = DecisionWriter::begin(tx, gateway)?;
    let mut scanners = Vec::new();
    for lapse in controls {
        let scanner = writer.lapsed_control(&lapse.uuid, &lapse.why)?;
        scanners.extend(scanner.filter(|_| lapse.tell));
    }
    Ok(Lapses {
        emitted: writer.finish()?,
        scanners,
    })
}

/// Lapse every control read still open (at start: the reads that would
/// have followed them are gone with the process that waited for them).
pub fn lapse_open(tx: &Connection, gateway: &str) -> rusqlite::Result<Lapses> {
    let open: Vec<Lapse> = outbox::open_controls(tx)?
        .into_iter()
        .map(|uuid| Lapse {
            uuid,
            why: "scangate stopped before a read on its scanner followed".to_string(),
            tell: false,
        })
        .collect();
    if open.is_empty() {
        return Ok(Lapses::default());
    }
    lapse(tx, gateway, &open)
}
