//! The gate with the facility store (`[redis]`): local knowledge first, then
//! one pipelined claim for the rest, decisions written in capture order.
//!
//! A round reads the open scans (`pending` and `unresolved`, capture order),
//! decides what this gateway can decide exactly by itself (rejections, echoes
//! of its own commits — also while Redis is down, or after a Redis that lost
//! its data comes back), claims the others in one round trip, and writes every
//! verdict in one transaction. If the store cannot be reached or does not
//! confirm, the claimed scans become `unresolved` (audited once) and stay in
//! the outbox with their UUIDs; the next round re-submits them through the
//! same claim, which returns a scan's first decision if it was in fact made
//! (a lost reply). No network I/O happens inside a SQLite transaction.

use super::{DECIDE_BATCH, Decision, Gate, OpenRow, Verdict, load_open};
use crate::audit::Chain;
use crate::capture::CaptureTime;
use crate::capture::clock::rfc3339_ms;
use crate::facility::{Claim, Facility, Outcome};
use crate::store::{Store, StoreError, classify};
use rusqlite::{TransactionBehavior, params};

/// What one round did.
#[derive(Debug, Default)]
pub struct Round {
    /// Verdicts written this round (unresolved ones included, once).
    pub decisions: Vec<Decision>,
    /// Open scans seen this round (0: nothing to do).
    pub open: usize,
    /// The facility store failed this round; back off before the next.
    pub facility_error: Option<String>,
    /// Scans held back until the wall clock is NTP-synchronised.
    pub waiting_for_clock: usize,
}

impl Gate {
    /// One round over up to [`DECIDE_BATCH`] open scans. `facility` is `None`
    /// while no connection is up: then only local verdicts are made and the
    /// rest become unresolved with `offline_reason`.
    ///
    /// `now` is the clock as the claimer reads it. With
    /// [`Gate::set_require_synced_clock`], a scan captured while the wall
    /// clock was not NTP-synchronised is not claimed on that wall time: it
    /// waits (unresolved) until the clock is synchronised, then its capture
    /// time is re-derived from the boot clock (same boot) and claimed. A scan
    /// from an earlier boot cannot be re-derived and is claimed as captured.
    pub fn facility_round(
        &mut self,
        store: &mut Store,
        facility: Option<&mut Facility>,
        offline_reason: &str,
        now: &CaptureTime,
    ) -> Result<Round, StoreError> {
        let Store { conn, path, .. } = store;
        let err = |e| classify(path, e);
        let mut rows = load_open(conn, true, DECIDE_BATCH).map_err(err)?;
        if rows.is_empty() {
            return Ok(Round::default());
        }
        let mut stats = self.stats;
        let mut verdicts: Vec<Option<Verdict>> = Vec::with_capacity(rows.len());
        for row in &rows {
            verdicts.push(self.local_verdict(conn, row, &mut stats).map_err(err)?);
        }
        let mut retimed = Vec::new();
        let mut waiting_for_clock = 0;
        if self.require_synced_clock {
            for (row, verdict) in rows.iter_mut().zip(verdicts.iter_mut()) {
                if verdict.is_some() || row.synced || row.boot_id != now.boot_id {
                    continue;
                }
                if now.synced {
                    row.captured_ms =
                        now.utc_ms - (now.boot_ns - row.boot_ns).div_euclid(1_000_000);
                    row.synced = true;
                    retimed.push((row.seq, row.captured_ms));
                } else {
                    waiting_for_clock += 1;
                    *verdict = Some(Verdict::Unresolved {
                        reason: "the wall clock is not NTP-synchronised yet; the scan is claimed once it is, with its capture time taken from the boot clock".into(),
                    });
                }
            }
        }
        let to_claim: Vec<usize> = (0..rows.len()).filter(|&i| verdicts[i].is_none()).collect();
        let mut facility_error = None;
        if !to_claim.is_empty() {
            let outcome = match facility {
                Some(f) => {
                    let claims: Vec<Claim> = to_claim
                        .iter()
                        .map(|&i| claim_for(&rows[i], &self.cfg.gateway))
                        .collect();
                    f.claim_batch(&claims).map_err(|e| e.to_string())
                }
                None => Err(offline_reason.to_string()),
            };
            match outcome {
                Ok(outcomes) => {
                    for (&i, o) in to_claim.iter().zip(outcomes) {
                        verdicts[i] = Some(match o {
                            Outcome::Committed => Verdict::Committed,
                            Outcome::Suppressed { twin } => Verdict::Suppressed { twin },
                        });
                    }
                }
                Err(reason) => {
                    for &i in &to_claim {
                        verdicts[i] = Some(Verdict::Unresolved {
                            reason: reason.clone(),
                        });
                    }
                    facility_error = Some(reason);
                }
            }
        }
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        for (seq, captured_ms) in retimed {
            tx.prepare_cached("UPDATE scans SET captured_ms = ?2, clock_synced = 1 WHERE seq = ?1")
                .and_then(|mut q| q.execute(params![seq, captured_ms]))
                .map_err(err)?;
        }
        let mut chain = Chain::begin(&tx).map_err(err)?;
        let now_ms = chrono::Utc::now().timestamp_millis();
        let open = rows.len();
        let mut decisions = Vec::with_capacity(open);
        for (row, verdict) in rows.into_iter().zip(verdicts) {
            let verdict = verdict.expect("every row has a verdict by now");
            decisions.extend(
                self.record_one(&tx, &mut chain, row, verdict, now_ms, &mut stats)
                    .map_err(err)?,
            );
        }
        let emitted = chain.finish().map_err(err)?;
        tx.commit().map_err(err)?;
        let decisions = self.settle(super::Decided {
            decisions,
            emitted,
            stats,
        });
        Ok(Round {
            decisions,
            open,
            facility_error,
            waiting_for_clock,
        })
    }
}

/// The claim for one open scan, with the ledger entry's fields.
fn claim_for(row: &OpenRow, gateway: &str) -> Claim {
    let e = row.entry(gateway);
    let text = |v: Option<&str>| v.unwrap_or_default().to_string();
    Claim {
        scan_uuid: row.uuid.clone(),
        content_key: e.content_key.to_string(),
        captured_ms: row.captured_ms,
        fields: vec![
            ("scan_uuid", row.uuid.clone()),
            ("gateway", gateway.to_string()),
            ("scanner", e.scanner.to_string()),
            ("captured_at", rfc3339_ms(row.captured_ms)),
            ("clock_synced", e.clock_synced.to_string()),
            ("scan_type", e.scan_type.to_string()),
            ("quantity", e.quantity.to_string()),
            ("gtin", text(e.gtin)),
            ("ndc10", text(e.ndc10)),
            ("lot", text(e.lot)),
            ("serial", text(e.serial)),
            ("expiry", text(e.expiry)),
            ("symbology", e.symbology.to_string()),
            ("content_key", e.content_key.to_string()),
        ],
    }
}
