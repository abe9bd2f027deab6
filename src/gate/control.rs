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
use rusqlite::Connection;

/// Record that control reads lapsed, inside `tx`: each still open is
/// marked and audited with `why` ([`DecisionWriter::lapsed_control`]; `gateway`:
/// this gateway's id). Returns the records to emit once `tx` commits.
pub fn lapse(
    tx: &Connection,
    gateway: &str,
    controls: &[(String, String)],
) -> rusqlite::Result<Vec<Emitted>> {
    let mut writer = DecisionWriter::begin(tx, gateway)?;
    for (uuid, why) in controls {
        writer.lapsed_control(uuid, why)?;
    }
    writer.finish()
}

/// Lapse every control read still open (at start: the reads that would
/// have followed them are gone with the process that waited for them).
pub fn lapse_open(tx: &Connection, gateway: &str) -> rusqlite::Result<Vec<Emitted>> {
    let open: Vec<(String, String)> = outbox::open_controls(tx)?
        .into_iter()
        .map(|uuid| {
            (
                uuid,
                "scangate stopped before a read on its scanner followed".to_string(),
            )
        })
        .collect();
    if open.is_empty() {
        return Ok(Vec::new());
    }
    lapse(tx, gateway, &open)
}
