//! The echoes this gateway suppressed, as `scangate ledger export --echoes`
//! prints them: each names the ledger entry it echoed (`echo_of`) and says
//! whether it was certain or ambiguous, so an inventory system can tell an
//! entry that may under-count (identical items without a serial) from one
//! that cannot (docs/integrator.md). Read from the outbox's `scans` table,
//! which keeps every decided read for `[dedup] retention_hours`
//! (the audit trail keeps its record for years).

use crate::capture::clock::rfc3339_ms;
use crate::model::ScanState;
use crate::store::packed::Unpacked;
use crate::store::{Store, StoreError};
use serde::Serialize;

/// One suppressed read.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Echo {
    /// The ledger entry it echoed: that entry's `scan_uuid`.
    pub echo_of: String,
    /// This read's own capture UUID.
    pub scan_uuid: String,
    /// The gateway that read and suppressed it.
    pub gateway: String,
    /// Scanner that read it.
    pub scanner: String,
    /// Capture time, RFC 3339 UTC with milliseconds (the gateway's clock).
    pub captured_at: String,
    /// receive | dispense | waste | return | adjust.
    pub scan_type: String,
    /// GTIN-14.
    pub gtin: Option<String>,
    /// Batch / lot.
    pub lot: Option<String>,
    /// Serial number: an echo with one is never ambiguous.
    pub serial: Option<String>,
    /// Content key (SHA-256 hex), the same as its entry's.
    pub content_key: Option<String>,
    /// True: a label without a serial, read inside the echo window of a
    /// commit of this gateway, neither a possible resend nor declared — it
    /// may have been a further identical item. False: a certain echo.
    pub ambiguous: bool,
    /// The echo window (ms) it was judged by, when narrower than the
    /// gateway's (`unserialised = "double-fire"`, a declared read).
    pub window_ms: Option<i64>,
    /// The scanner's `unserialised` policy at the read, when set.
    pub unserialised: Option<String>,
    /// The frame came while one of the same bytes waited for its ACK (or
    /// was left unACKed): a possible resend, judged by the full window.
    pub resend: bool,
}

/// Echoes captured at or after `since_ms` (all when `None`) in the order
/// they were read; `gateway` is this gateway's id. `f` is called for each,
/// and an error from it (the reader went away) stops quietly.
pub fn for_each(
    store: &Store,
    gateway: &str,
    since_ms: Option<i64>,
    mut f: impl FnMut(Echo) -> std::io::Result<()>,
) -> Result<(), StoreError> {
    let mut q = store
        .conn
        .prepare(
            "SELECT twin_uuid, scan_uuid, scanner, captured_ms, scan_type, gtin, lot, serial,
                    content_key, ambiguous, window_ms, unserialised, resend
             FROM scans WHERE state = ?1 AND captured_ms >= ?2 ORDER BY seq",
        )
        .map_err(|e| store.err_at(e))?;
    let mut rows = q
        .query(rusqlite::params![
            ScanState::Suppressed.as_str(),
            since_ms.unwrap_or(i64::MIN)
        ])
        .map_err(|e| store.err_at(e))?;
    while let Some(r) = rows.next().map_err(|e| store.err_at(e))? {
        let echo = echo_of(r, gateway).map_err(|e| store.err_at(e))?;
        if f(echo).is_err() {
            break;
        }
    }
    Ok(())
}

/// An echo from a row of [`for_each`]'s query.
fn echo_of(r: &rusqlite::Row<'_>, gateway: &str) -> rusqlite::Result<Echo> {
    Ok(Echo {
        echo_of: r
            .get::<_, Option<Unpacked>>(0)?
            .map(|u| u.0)
            .unwrap_or_default(),
        scan_uuid: r.get::<_, Unpacked>(1)?.0,
        gateway: gateway.to_owned(),
        scanner: r.get(2)?,
        captured_at: rfc3339_ms(r.get(3)?),
        scan_type: r.get(4)?,
        gtin: r.get(5)?,
        lot: r.get(6)?,
        serial: r.get(7)?,
        content_key: r.get::<_, Option<Unpacked>>(8)?.map(|k| k.0),
        ambiguous: r.get::<_, Option<bool>>(9)?.unwrap_or(false),
        window_ms: r.get(10)?,
        unserialised: r.get(11)?,
        resend: r.get(12)?,
    })
}
