//! The gate with the facility store (`[redis]`): local knowledge first, then
//! one pipelined claim for the rest, decisions written in capture order.
//!
//! A round has three steps, so a claimer lane can overlap them (see
//! `claimer/lane.rs`, which opens the transactions): [`FacilityGate::pick`] reads
//! its lane's open scans
//! (`pending` for the live lane, `unresolved` for the replay lane, capture
//! order) and decides what this gateway can decide
//! exactly by itself (rejections, echoes of its own commits — also while
//! Redis is down, or after a Redis that lost its data comes back); the
//! caller claims the others ([`Picked::claims`]); [`FacilityGate::record`] writes
//! every verdict in one transaction. If the store cannot be reached or does
//! not confirm, the claimed scans become `unresolved` (audited once) and stay
//! in the outbox with their UUIDs; a later round re-submits them through the
//! same claim, which returns a scan's first decision if it was in fact made
//! (a lost reply). No network I/O happens inside a SQLite transaction.
//!
//! **Order.** Each lane claims a scan only if the other lane has no
//! undecided scan of its content key captured earlier within the window.
//! Claims with different content keys, or further apart, cannot affect each
//! other, so the decisions are exactly those of strict capture order, while a
//! new scan at the counter is decided in milliseconds even as an hour's
//! backlog replays (docs/design.md, "Two lanes" and "Replay order").

use super::FacilityGate;
use crate::capture::CaptureTime;
use crate::capture::clock::rfc3339_ms;
use crate::checks::received::Receipt;
use crate::events::Event as _;
use crate::facility::Facility;
use crate::gate::{Claimed, Unsettled, receipt_of};
use crate::model::Told;
use crate::model::{AlertFound, Check, Claim, ClockUsed, EchoWindow, Findings, Outcome};
use crate::model::{Decision, Verdict};
use crate::outbox::open::{self, Open};
use crate::outbox::{self, ScanRow};
use rusqlite::Connection;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// Scans per replay round at most (and per offline round of the live
/// lane). Small enough that the replay holds the writers' turn and Redis
/// for a millisecond or two at a time (larger rounds made the live lane
/// wait behind them), large enough that a round's fixed costs (one
/// transaction, one round trip) are shared by many scans.
pub const ROUND: usize = 64;

/// New scans per live round at most. More than [`ROUND`]: a burst of new
/// scans is the case where large rounds help (fewer commits), and a trickle
/// at the counter never fills it.
pub const AHEAD: usize = 960;

/// Which open scans a claimer lane takes. The claimer runs one thread per
/// lane (`claimer/lane.rs`), each with its own SQLite and Redis
/// connections, so a pick at the counter is never queued behind a round of
/// an hour's backlog (docs/design.md, "Two lanes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LaneKind {
    /// New (`pending`) scans as they arrive, in capture order: claimed at
    /// once unless an older waiting scan has their content key within the
    /// window (they are held back until it is decided); offline, audited
    /// as unresolved.
    #[default]
    Live,
    /// The backlog (`unresolved` scans), oldest first, in rounds of
    /// [`ROUND`]; offline, nothing (they are audited already).
    Replay,
}

/// What one round did.
#[derive(Debug, Default)]
pub struct Round {
    /// Verdicts written this round (unresolved ones included, once).
    pub decisions: Vec<Decision>,
    /// Open scans seen this round (0: nothing to do).
    pub open: usize,
    /// More backlog is waiting behind this round: go again at once.
    pub more: bool,
    /// The facility store failed this round; back off before the next.
    pub facility_error: Option<String>,
    /// Scans waiting until their capture maps to facility time.
    pub waiting_for_clock: usize,
}

impl Round {
    /// Two rounds as one (both lanes' rounds, run one after the other).
    pub fn and(mut self, then: Round) -> Round {
        self.decisions.extend(then.decisions);
        self.open += then.open;
        self.more |= then.more;
        self.facility_error = self.facility_error.or(then.facility_error);
        self.waiting_for_clock += then.waiting_for_clock;
        self
    }
}

/// Open scans picked for one round, with what this gateway decided alone.
#[derive(Default)]
pub struct Picked {
    /// The lane that picked it.
    lane: LaneKind,
    /// Per claim, whether the facility made its decision in the round
    /// that answered it ([`Picked::answered_by`]; `None`: not said).
    fresh: Option<Vec<bool>>,
    /// Per claim, an echo's twin's capture time, as the facility said it
    /// ([`Picked::answered_by`]; empty: not said).
    twin_times: Vec<Option<i64>>,
    rows: Vec<ScanRow>,
    verdicts: Vec<Option<Verdict>>,
    /// Per row: how its capture was put on facility time (claimable rows).
    clocks: Vec<Option<ClockUsed>>,
    /// Per row: what the checks found (claimable rows; its claim carries
    /// it to the facility's ledger, and its record keeps the same), with
    /// the facility's answer on a received serial
    /// ([`Picked::check_receipts`]).
    findings: Vec<Option<Findings>>,
    waiting_for_clock: usize,
    more: bool,
    held: usize,
}

impl Picked {
    /// Nothing was open.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// More backlog waits behind this round.
    pub fn more(&self) -> bool {
        self.more
    }

    /// Scans waiting until their capture maps to facility time.
    pub fn waiting_for_clock(&self) -> usize {
        self.waiting_for_clock
    }

    /// Scans held back behind an earlier undecided scan of their content
    /// key in the other lane (picked again once that is decided), or behind
    /// a scan of their label waiting for the clock in this round.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Whether this gateway suppressed an echo by its own window this round.
    pub fn has_local_echoes(&self) -> bool {
        self.verdicts
            .iter()
            .any(|v| matches!(v, Some(Verdict::Suppressed { .. })))
    }

    /// Undo the echoes this gateway suppressed by its own window (see
    /// [`FacilityGate::set_local_echoes`]): they are claimed, or become unresolved
    /// with the round's failure, like the scans it could not decide alone.
    /// Call before [`Picked::claims`], or on a round whose claim failed —
    /// never on a round whose answers are to be recorded, which match the
    /// scans that were claimed.
    pub fn withdraw_local_echoes(&mut self) {
        for v in &mut self.verdicts {
            if matches!(v, Some(Verdict::Suppressed { .. })) {
                *v = None;
            }
        }
    }

    /// The outbox rows (`seq`) in this round: not to be picked again until
    /// it is recorded.
    pub fn seqs(&self) -> impl Iterator<Item = i64> + '_ {
        self.rows.iter().map(|r| r.seq)
    }

    /// The claims for the scans this gateway could not decide alone, in
    /// capture order, carrying their ledger entries' fields.
    /// Each carries its own echo window when narrower than the
    /// facility's ([`crate::gate::Gate::window_of`]).
    pub fn claims<'a>(&'a self, gate: &'a FacilityGate) -> Vec<Claim<'a>> {
        let gate = gate.local();
        self.claimable()
            .map(|(i, row)| {
                let own = row.window.map(|_| gate.window_of(row));
                let findings = match self.findings.get(i) {
                    Some(Some(found)) => Cow::Borrowed(found),
                    // (An echo withdrawn after the pick.)
                    _ => Cow::Owned(gate.findings(row).unwrap_or_default()),
                };
                claim_for(row, gate.gateway(), own, Some(&findings))
            })
            .collect()
    }

    /// The rows to claim (no local verdict), with their places.
    fn claimable(&self) -> impl Iterator<Item = (usize, &ScanRow)> {
        self.rows
            .iter()
            .zip(&self.verdicts)
            .enumerate()
            .filter(|(_, (_, v))| v.is_none())
            .map(|(i, (row, _))| (i, row))
    }

    /// Ask the facility store, before the claims are sent, whether it
    /// has received the serialised items this round's `receive` reads
    /// name ([`Facility::receive_serials`]): a read that another read
    /// received before, beyond the echo window, carries
    /// [`crate::model::Alert::Suspect`] in its claim (so the facility's ledger has it)
    /// and, if it commits, in its record. Asked again when a failed round
    /// is picked again; a read's own receipt is never suspect.
    pub fn check_receipts(
        &mut self,
        gate: &FacilityGate,
        f: &mut Facility,
    ) -> Result<(), crate::facility::FacilityError> {
        let gate = gate.local();
        let Some(checks) = gate.checks() else {
            return Ok(());
        };
        let asked: Vec<(usize, Receipt<'_>)> = self
            .claimable()
            .filter_map(|(i, row)| Some((i, receipt_of(row)?)))
            .collect();
        if asked.is_empty() {
            return Ok(());
        }
        let receipts: Vec<Receipt<'_>> = asked.iter().map(|(_, r)| *r).collect();
        let firsts = f.receive_serials(gate.gateway(), &receipts, checks.serial_retention())?;
        let window_ms = gate.horizon().0.ms();
        let suspects: Vec<(usize, AlertFound)> = asked
            .iter()
            .zip(firsts)
            .filter_map(|((i, r), first)| {
                let first = first?;
                let row = &self.rows[*i];
                (first.makes_suspect(r.scan_uuid, r.at_ms, window_ms)
                    && checks.runs(&row.scanner, &row.scan_type, Check::Suspect))
                .then(|| (*i, crate::checks::received::alert(&first)))
            })
            .collect();
        for (i, alert) in suspects {
            let found = self.findings[i].get_or_insert_with(Findings::default);
            found.alerts.push(alert);
            found.alerts.sort_by_key(|a| a.kind);
        }
        Ok(())
    }

    /// The lane that picked it.
    pub fn lane(&self) -> LaneKind {
        self.lane
    }

    /// Take from `f`, the connection whose round answered the claims,
    /// what it said of each besides the outcome: whether that round made
    /// the decision ([`Facility::fresh`]), and an echo's twin's capture
    /// time ([`Facility::twin_times`]).
    pub fn answered_by(&mut self, f: &Facility) {
        self.fresh = Some(f.fresh().to_vec());
        self.twin_times = f.twin_times().to_vec();
    }

    /// Of the claims ([`Picked::claims`]) answered by `outcomes`, the last
    /// one the answering round committed ([`Picked::answered_by`]): the
    /// latest commit of this round in the facility store's own order (a
    /// call decides its claims in the order given). Not one answered again
    /// from an earlier round's decision (a retry after a lost reply): it
    /// has that round's place in the store's history, and its key expires
    /// as that round set it. `None` too when freshness was not said.
    pub fn last_committed(&self, outcomes: &[Outcome]) -> Option<&str> {
        let fresh = self.fresh.as_deref()?;
        self.rows
            .iter()
            .zip(&self.verdicts)
            .filter(|(_, v)| v.is_none())
            .zip(outcomes.iter().zip(fresh))
            .filter(|(_, (o, made))| matches!(o, Outcome::Committed) && **made)
            .last()
            .map(|((row, _), _)| row.uuid.as_str())
    }
}

impl FacilityGate {
    /// Pick `lane`'s next round, passing over `skip` (its round still in
    /// flight); `online`: a claim can be sent.
    /// - [`LaneKind::Live`] online: up to [`AHEAD`] `pending` scans in capture
    ///   order, less those held back behind an older waiting scan with
    ///   their content key (`FacilityGate::not_held_back`).
    /// - [`LaneKind::Live`] offline: up to [`ROUND`] of the oldest `pending`
    ///   scans, to be audited as unresolved (nothing is claimed, so order
    ///   is moot).
    /// - [`LaneKind::Replay`] online: up to [`ROUND`] of the oldest
    ///   `unresolved` scans, less those held back behind an earlier new
    ///   scan of their content key; offline: nothing.
    ///
    /// Local verdicts are made. `now` is the clock as the claimer reads it.
    /// With [`FacilityGate::set_facility_time`], each claimable scan is first put on
    /// facility time ([`super::facility_time::FacilityClock::place`]): its
    /// claim, its ledger entry and the check for local echoes use that time;
    /// a scan of this boot that does not map within the bound yet waits
    /// (unresolved, the reason naming the clock), and so do later scans of
    /// its label in the round.
    ///
    /// `snapshot` is one read transaction: the rows and the checks against
    /// the other lane's must see one snapshot (between two statements the
    /// other lane could turn an earlier scan from pending into unresolved,
    /// and neither read would see it).
    pub fn pick(
        &mut self,
        snapshot: &Connection,
        lane: LaneKind,
        skip: &[i64],
        now: &CaptureTime,
        online: bool,
    ) -> rusqlite::Result<Picked> {
        let conn = snapshot;
        let in_flight = open::skip(skip);
        let limit = match (lane, online) {
            (LaneKind::Live, true) => AHEAD,
            _ => ROUND,
        };
        let loaded = match (lane, online) {
            (LaneKind::Live, _) => match &mut self.admitted {
                Some(cached) => cached.load_pending(conn, &in_flight, limit)?,
                None => open::load(conn, Open::Pending, &in_flight, limit)?,
            },
            (LaneKind::Replay, true) => open::load(conn, Open::Unresolved, &in_flight, limit)?,
            (LaneKind::Replay, false) => Vec::new(),
        };
        let full = loaded.len() == limit;
        // Offline nothing is claimed (new scans become unresolved), so
        // order is moot; online a scan waits for the other lane's earlier
        // scans of its label.
        let (mut rows, mut held) = if online {
            self.not_held_back(conn, lane, loaded)?
        } else {
            (loaded, 0)
        };
        // Facility time first: echoes of this gateway's own commits are
        // judged on it too (its ledger holds facility times).
        let mut clocks: Vec<Option<ClockUsed>> = vec![None; rows.len()];
        let mut verdicts: Vec<Option<Verdict>> = vec![None; rows.len()];
        let mut waiting_for_clock = 0;
        let mut clock_keys = HashSet::new();
        if let Some(max_error_ms) = self.max_clock_error_ms {
            let known = self.clock();
            for ((row, clock), verdict) in rows.iter_mut().zip(&mut clocks).zip(&mut verdicts) {
                let Some(key) = row
                    .content_key
                    .as_ref()
                    .filter(|_| row.reject_reason.is_none())
                else {
                    continue;
                };
                match known.place(&mut row.time, now, max_error_ms) {
                    Ok(used) => *clock = Some(used),
                    Err(reason) => {
                        waiting_for_clock += 1;
                        clock_keys.insert(key.clone());
                        *verdict = Some(Verdict::Unresolved { reason });
                    }
                }
            }
        }
        let shared = self.shared_scanners();
        for (row, verdict) in rows.iter().zip(&mut verdicts) {
            if verdict.is_some() {
                continue;
            }
            let local = self.gate.judge(conn, row)?;
            // While the facility refuses this gateway's window, an echo of
            // its own commit is left to the facility like any other scan;
            // so is a shared scanner's always (`set_scanners`).
            let trusted = (self.local_echoes && !shared.contains(&row.scanner))
                || !matches!(local, Some(Verdict::Suppressed { .. }));
            *verdict = local.filter(|_| trusted);
        }
        // A scan of a label that has a scan waiting for the clock in this
        // round waits too: which of them came first is not known yet.
        if online && !clock_keys.is_empty() {
            let before = rows.len();
            let kept: Vec<_> = rows
                .into_iter()
                .zip(verdicts)
                .zip(clocks)
                .filter(|((row, verdict), _)| {
                    verdict.is_some()
                        || row
                            .content_key
                            .as_ref()
                            .is_none_or(|k| !clock_keys.contains(k))
                })
                .collect();
            (rows, verdicts, clocks) = (Vec::new(), Vec::new(), Vec::new());
            for ((row, verdict), clock) in kept {
                rows.push(row);
                verdicts.push(verdict);
                clocks.push(clock);
            }
            held += before - rows.len();
        }
        // Go again at once only if this round moves something on: held
        // rows come first again next time, and so do replay rows waiting
        // for the clock (live ones become unresolved, which moves them).
        let stuck = match lane {
            LaneKind::Live => 0,
            LaneKind::Replay => waiting_for_clock,
        };
        let more = full && rows.len() > stuck;
        let findings = rows
            .iter()
            .zip(&verdicts)
            .map(|(row, v)| v.is_none().then(|| self.gate.findings(row)).flatten())
            .collect();
        Ok(Picked {
            lane,
            fresh: None,
            twin_times: Vec::new(),
            rows,
            verdicts,
            clocks,
            findings,
            waiting_for_clock,
            more,
            held,
        })
    }

    /// Of `candidates` (capture order; `pending` for the live lane,
    /// `unresolved` for the replay lane), those that may be claimed now,
    /// and how many are held back. A claim can only be changed by an
    /// earlier one with the same content key captured within the window
    /// before it, so a candidate goes ahead unless the other lane has such
    /// an earlier scan still undecided, or a held-back candidate is one
    /// (the window widened by the boot's recorded clock steps; "earlier"
    /// in capture order, so two scans never wait for each other). A new
    /// scan also waits for an `unresolved` scan of its key stamped on a wall
    /// clock the kernel did not call synchronised (its wall stamp may be
    /// far off, so its place in capture order is not known by it).
    /// Decisions stay exactly those of strict capture order.
    fn not_held_back(
        &self,
        conn: &Connection,
        lane: LaneKind,
        candidates: Vec<ScanRow>,
    ) -> rusqlite::Result<(Vec<ScanRow>, usize)> {
        let other = match lane {
            LaneKind::Live => Open::Unresolved,
            LaneKind::Replay => Open::Pending,
        };
        let mut held: HashMap<String, i64> = HashMap::new();
        let mut ahead = Vec::with_capacity(candidates.len());
        let loaded = candidates.len();
        // The other lane's capture times: outside them, nothing to wait for.
        let span = open::span(conn, other)?;
        // Waiting scans stamped on an unsynchronised wall clock have no
        // trusted place in capture order: a new scan with the same content
        // key waits for them, whenever.
        let any_unsynced = lane == LaneKind::Live && open::unsynced_unresolved(conn, None)?;
        for row in candidates {
            if let Some(key) = row
                .content_key
                .as_deref()
                .filter(|_| row.reject_reason.is_none())
            {
                let t = &row.time;
                let from = self.gate.earliest_twin_ms(t);
                // A backlog scan without a trusted wall time is not
                // compared by it: the live lane holds every new scan of its
                // label until it is decided, whatever the times.
                let comparable = lane == LaneKind::Live || t.synced;
                let conflict = held.get(key).is_some_and(|&h| h >= from)
                    || (comparable
                        && span.is_some_and(|(lo, hi)| hi >= from && lo <= t.utc_ms)
                        && open::earlier_with_key(conn, other, key, from, &row)?)
                    || (any_unsynced && open::unsynced_unresolved(conn, Some(key))?);
                if conflict {
                    let h = held.entry(key.to_string()).or_insert(t.utc_ms);
                    *h = (*h).max(t.utc_ms);
                    continue;
                }
            }
            ahead.push(row);
        }
        let held = loaded - ahead.len();
        Ok((ahead, held))
    }

    /// Write a picked round's verdicts inside `tx`: local ones as made,
    /// claimed ones from `claimed` (one outcome per [`Picked::claims`]
    /// entry, in order), or — if the claim failed — the claimed scans
    /// become unresolved with that reason. Hand the result to
    /// [`FacilityGate::settle_round`] once `tx` commits.
    pub fn record(
        &mut self,
        tx: &Connection,
        picked: Picked,
        claimed: Result<Vec<Outcome>, String>,
    ) -> rusqlite::Result<Recorded> {
        let Picked {
            rows,
            mut verdicts,
            clocks,
            findings,
            waiting_for_clock,
            more,
            fresh,
            twin_times,
            ..
        } = picked;
        if rows.is_empty() {
            return Ok(Recorded::default());
        }
        // Per row: decided by the round that answered it (a claim, not
        // answered again from an earlier round's decision; not said: so).
        let mut fresh = fresh.into_iter().flatten();
        let made_now: Vec<bool> = verdicts
            .iter()
            .map(|v| v.is_none() && fresh.next().unwrap_or(true))
            .collect();
        // Per row: an echo's twin's capture time, where the facility said it.
        let mut twin_times = twin_times.into_iter();
        let twin_ms: Vec<Option<i64>> = verdicts
            .iter()
            .map(|v| {
                v.as_ref()
                    .map_or_else(|| twin_times.next().flatten(), |_| None)
            })
            .collect();
        let facility_error = match claimed {
            Ok(outcomes) => {
                let open = verdicts.iter_mut().filter(|v| v.is_none());
                for (verdict, o) in open.zip(outcomes) {
                    *verdict = Some(match o {
                        Outcome::Committed => Verdict::Committed,
                        Outcome::Suppressed { twin } => Verdict::Suppressed { twin },
                    });
                }
                None
            }
            Err(reason) => {
                let any = verdicts.iter().any(Option::is_none);
                for v in verdicts.iter_mut().filter(|v| v.is_none()) {
                    *v = Some(Verdict::Unresolved {
                        reason: reason.clone(),
                    });
                }
                any.then_some(reason)
            }
        };
        let mut rec = self.gate.recorder(tx)?;
        let open = rows.len();
        let (window, retention) = self.gate.horizon();
        let past = PastRetention::at(self.facility_now(), retention, window);
        let mut committed_past = 0;
        let mut told_as = HashMap::new();
        let mut findings = findings.into_iter();
        for ((((row, verdict), clock), made_now), twin_ms) in rows
            .into_iter()
            .zip(verdicts)
            .zip(clocks)
            .zip(made_now)
            .zip(twin_ms)
        {
            let found = findings.next().flatten();
            // A claim reply shorter than the claims is caught by
            // `recv_claims`; an unanswered row stays open, never guessed.
            let Some(verdict) = verdict else { continue };
            if let (Verdict::Suppressed { twin }, Some(twin_ms)) = (&verdict, twin_ms)
                && let Some(told) = self.told_as(tx, &row, twin, twin_ms)?
            {
                told_as.insert(row.uuid.clone(), told);
            }
            let note = (made_now && verdict == Verdict::Committed)
                .then(|| past.note(row.time.utc_ms))
                .flatten();
            committed_past += usize::from(note.is_some());
            let claimed = Claimed {
                clock: clock.as_ref(),
                note,
                findings: found,
            };
            self.gate
                .record_verdict(tx, &mut rec, row, verdict, claimed)?;
        }
        Ok(Recorded {
            decided: Some(rec.finish()?),
            round: Round {
                decisions: Vec::new(),
                open,
                more,
                facility_error,
                waiting_for_clock,
            },
            committed_past,
            told_as,
        })
    }

    /// **Told as the facility decided.** What the scanner of `row`, an
    /// echo of `twin` captured at `twin_ms` (facility time), is told when
    /// that differs from what the verdict says alone: when another
    /// gateway committed `twin` (it is not in this outbox), this gateway
    /// heard a shared scanner whose feedback may be set here only.
    /// - Captured within twice `max_clock_error_ms` of the twin, `row` is
    ///   this gateway's copy of the read the other committed: told
    ///   [`Told::Committed`] — once: a double-fire of it here is an echo.
    /// - Later, a label without a serial and not a possible resend: a
    ///   further read that may have been another item, told
    ///   [`Told::Ambiguous`] (under `ask`, the prompt). It is counted and
    ///   audited as ambiguous by the gateway that committed the twin, which
    ///   heard the read too.
    fn told_as(
        &self,
        tx: &Connection,
        row: &ScanRow,
        twin: &str,
        twin_ms: i64,
    ) -> rusqlite::Result<Option<Told>> {
        let Some(max_error_ms) = self.max_clock_error_ms else {
            return Ok(None);
        };
        if outbox::has_scan(tx, twin)? {
            return Ok(None);
        }
        if (row.time.utc_ms - twin_ms).abs() <= 2 * max_error_ms {
            let told_before = outbox::has_echo_of(tx, twin)?;
            return Ok((!told_before).then_some(Told::Committed));
        }
        Ok((row.serial.is_none() && !row.resend).then_some(Told::Ambiguous))
    }

    /// A recorded round, once its transaction committed: its counters
    /// applied, its audit records emitted, its decisions in the round.
    pub fn settle_round(&mut self, recorded: Recorded) -> Round {
        let Recorded {
            decided,
            mut round,
            committed_past,
            mut told_as,
        } = recorded;
        if let Some(decided) = decided {
            round.decisions = self.gate.settle(decided);
        }
        if !told_as.is_empty() {
            for d in &mut round.decisions {
                d.told_as = told_as.remove(&d.scan_uuid);
            }
        }
        if committed_past > 0 {
            crate::events::CommittedPastRetention {
                scans: committed_past,
                retention: self.gate.horizon().1,
            }
            .emit();
        }
        round
    }
}

/// A round written in a transaction not committed yet: hand it to
/// [`FacilityGate::settle_round`] once it is.
#[derive(Default)]
#[must_use = "settle the round once its transaction commits"]
pub struct Recorded {
    decided: Option<Unsettled>,
    round: Round,
    /// Commits claimed past the facility's retention ([`PastRetention`]).
    committed_past: usize,
    /// What scans' scanners are told instead of their verdicts
    /// ([`FacilityGate::told_as`]), by scan UUID.
    told_as: HashMap<String, Told>,
}

/// Which captures the facility store may have forgotten twins of: its
/// capture times are kept for the retention (pruned on the server's clock,
/// and the sets expire a retention after their last commit), so a scan
/// claimed more than the retention less the window after its capture (a
/// backlog older than the retention, after a long outage) is judged
/// against a memory that may lack another gateway's read of the same pick.
/// Its commit stands (a pick must not go missing from the ledger); its
/// audit record says so, and a WARN. (Not a commit answered again from an
/// earlier round's decision: that round judged it.)
struct PastRetention {
    /// Captures before this (facility time, ms).
    before_ms: i64,
    /// The retention, for the note.
    retention: std::time::Duration,
    /// Facility time now, for the note.
    now_ms: i64,
}

impl PastRetention {
    fn at(now_ms: i64, retention: std::time::Duration, window: EchoWindow) -> PastRetention {
        PastRetention {
            before_ms: now_ms - retention.as_millis() as i64 + window.ms(),
            retention,
            now_ms,
        }
    }

    /// The audit note for a commit captured at `captured_ms`, if it is past.
    fn note(&self, captured_ms: i64) -> Option<String> {
        (captured_ms < self.before_ms).then(|| {
            format!(
                "claimed {:.1} h after its capture, past the facility's retention of {} h: another gateway's read of this pick before then may be forgotten by the facility store, so check the facility ledger for a twin",
                (self.now_ms - captured_ms) as f64 / 3_600_000.0,
                self.retention.as_secs() / 3600
            )
        })
    }
}

/// The claim for one open scan, with the ledger entry's fields (also for
/// a committed scan re-published by a reconciliation: the same claim),
/// `findings` among them.
pub fn claim_for<'a>(
    row: &'a ScanRow,
    gateway: &'a str,
    window: Option<EchoWindow>,
    findings: Option<&Findings>,
) -> Claim<'a> {
    claim_on(
        row,
        gateway,
        window,
        (row.time.utc_ms, row.time.synced),
        findings,
    )
}

/// [`claim_for`] with the capture placed at `captured_ms` (and its clock's
/// `synced`): a committed scan re-published on its ledger entry's time.
pub fn claim_on<'a>(
    row: &'a ScanRow,
    gateway: &'a str,
    window: Option<EchoWindow>,
    (captured_ms, synced): (i64, bool),
    findings: Option<&Findings>,
) -> Claim<'a> {
    let text = |v: &'a Option<String>| Cow::Borrowed(v.as_deref().unwrap_or_default());
    // (Every claim of a call carries the same fields: empty when absent.)
    let schedule = findings
        .and_then(|f| f.dea_schedule.clone())
        .map_or(Cow::Borrowed(""), Cow::Owned);
    let alerts = match findings {
        Some(f) if !f.alerts.is_empty() => {
            Cow::Owned(serde_json::to_string(&f.alerts).expect("alerts always serialise"))
        }
        _ => Cow::Borrowed(""),
    };
    let key = row.content_key.as_deref().unwrap_or_default();
    Claim {
        scan_uuid: &row.uuid,
        content_key: key,
        captured_ms,
        window_ms: window.map(EchoWindow::ms),
        fields: vec![
            ("scan_uuid", Cow::Borrowed(&row.uuid)),
            ("gateway", Cow::Borrowed(gateway)),
            ("scanner", Cow::Borrowed(&row.scanner)),
            ("captured_at", Cow::Owned(rfc3339_ms(captured_ms))),
            (
                "clock_synced",
                Cow::Borrowed(if synced { "true" } else { "false" }),
            ),
            ("scan_type", Cow::Borrowed(&row.scan_type)),
            ("quantity", Cow::Owned(row.quantity.to_string())),
            ("gtin", text(&row.gtin)),
            ("ndc10", text(&row.ndc10)),
            ("lot", text(&row.lot)),
            ("serial", text(&row.serial)),
            ("expiry", text(&row.expiry)),
            ("symbology", text(&row.symbology)),
            ("content_key", Cow::Borrowed(key)),
            ("dea_schedule", schedule),
            ("alerts", alerts),
        ],
    }
}
