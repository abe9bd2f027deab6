//! Gate: is a durable scan a new physical movement or an echo of one already
//! recorded?
//!
//! For each pending outbox row, strictly in capture order:
//! 1. a scan that failed validation is **rejected** with its reason;
//! 2. the Bloom pre-filter may say "this content key was never committed" —
//!    then the exact lookup is skipped (counted in [`GateStats::lookups_saved`]);
//! 3. otherwise the exact index (the ledger, by content key and capture time)
//!    is asked for a committed twin within ±`window_ms` of this scan's capture
//!    time (event time, invariant 4): found → **suppressed** naming the twin,
//!    none → **committed**.
//!
//! The state change, the ledger entry and the audit record of each decision
//! are written in one SQLite transaction (invariant 6), which the caller
//! opens and hands to the gate ([`Gate::decide`]; with a facility store,
//! [`Gate::record_verdict`] for each verdict of a claim round, which
//! [`crate::claimer`] picks and claims) and commits; then
//! [`Gate::settle`] applies the counters and emits the audit records. The
//! gate holds the decision policy and its in-memory knowledge (Bloom
//! filter, recorded clock steps); the outbox, the ledger and the audit
//! trail own their tables and statements.

pub(crate) mod bloom;
pub(crate) mod clock_steps;
pub(crate) mod control;
pub mod earlier_keys;

use crate::capture::{Scan, key_bytes};
use crate::config::Config;
use crate::decided::{DecidedScan, DecisionWriter, RowWrite, WrittenScan};
use crate::events::Event as _;
use crate::model::ScanState;
use crate::model::{Alert, Decision, EchoWindow, Findings, GateStats, Verdict};
use crate::outbox::{self, ScanRow};
use crate::store::{Store, StoreError};
use bloom::Bloom;
use clock_steps::BootOffsets;
use rusqlite::Connection;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Rows decided per transaction by the embedded gate (one fsync each); the
/// facility gate uses smaller rounds (`facility::ROUND`).
pub const DECIDE_BATCH: usize = 4096;

/// The gate's settings.
#[derive(Debug, Clone)]
pub struct GateConfig {
    /// Facility id.
    pub facility: String,
    /// This gateway's id.
    pub gateway: String,
    /// The echo window.
    pub window: EchoWindow,
    /// Bloom retention horizon.
    pub retention: Duration,
}

impl GateConfig {
    /// The gate settings of a config.
    pub fn from_config(cfg: &Config) -> GateConfig {
        GateConfig {
            facility: cfg.gateway.facility.clone(),
            gateway: cfg.gateway.id.clone(),
            window: cfg.window(),
            retention: cfg.retention(),
        }
    }
}

/// The decision maker (embedded exact store).
pub struct Gate {
    cfg: GateConfig,
    /// Shared by the facility claimer's two lanes ([`Gate::lane`]): a commit
    /// either lane records must be in the Bloom filter the other consults.
    known: Arc<Mutex<Known>>,
    stats: GateStats,
    /// The narrowest echo window a scan's own may narrow it to (see
    /// [`Gate::set_window_floor`]).
    window_floor: EchoWindow,
    /// See [`Gate::set_audit_note`].
    audit_note: Option<String>,
    /// Keys of an earlier form still in the state
    /// ([`Gate::bridge_earlier_keys`]).
    bridge: Option<Arc<earlier_keys::Bridge>>,
    /// The checks at the counter ([`Gate::set_checks`]); none: no alerts.
    checks: Option<Arc<crate::checks::Checks>>,
}

/// What the gate knows in memory of this gateway's own commits.
struct Known {
    bloom: Bloom,
    offsets: BootOffsets,
}

impl Gate {
    /// The in-memory knowledge, locked (never held across a SQL statement
    /// or the writers' turn: each use is a few memory operations).
    fn known(&self) -> MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Bloom size per generation: 2^23 bits = 1 MiB, ~1.8 % false positives at a
/// million keys per horizon (a busy pharmacy commits a few thousand a day).
const BLOOM_BITS: usize = 1 << 23;

impl Gate {
    /// A gate whose Bloom filter is rebuilt from the ledger's entries within
    /// the retention horizon.
    pub fn new(cfg: GateConfig, store: &Store) -> Result<Gate, StoreError> {
        let mut bloom = Bloom::new(BLOOM_BITS, cfg.retention);
        let since = chrono::Utc::now().timestamp_millis() - cfg.retention.as_millis() as i64;
        crate::ledger::keys_since(&store.conn, since, |key| bloom.insert(key))
            .map_err(|e| store.err_at(e))?;
        let offsets = BootOffsets::load(&store.conn).map_err(|e| store.err_at(e))?;
        Ok(Gate {
            cfg,
            known: Arc::new(Mutex::new(Known { bloom, offsets })),
            stats: GateStats::default(),
            window_floor: EchoWindow::default(),
            audit_note: None,
            bridge: None,
            checks: None,
        })
    }

    /// Run `checks` on each read's first decision: its [`Decision::alert`].
    pub fn set_checks(&mut self, checks: Arc<crate::checks::Checks>) {
        self.checks = Some(checks);
    }

    /// The checks it runs, if any.
    pub fn checks(&self) -> Option<&crate::checks::Checks> {
        self.checks.as_deref()
    }

    /// A second gate over the same in-memory knowledge (Bloom filter,
    /// recorded clock steps), with settings as this one's and counters of
    /// its own: the facility claimer's second lane ([`crate::claimer`]).
    /// What either records, the other sees at once.
    pub fn lane(&self) -> Gate {
        Gate {
            cfg: self.cfg.clone(),
            known: Arc::clone(&self.known),
            stats: GateStats::default(),
            window_floor: self.window_floor,
            audit_note: self.audit_note.clone(),
            bridge: self.bridge.clone(),
            checks: self.checks.clone(),
        }
    }

    /// Look at `store` for keys an earlier release made in another form
    /// ([`earlier_keys::Bridge::prepare`], at start, before any scan is
    /// decided) and, while they could still be twins, also look reads up
    /// under that form: commits an earlier release made are still found.
    pub fn bridge_earlier_keys(
        &mut self,
        store: &mut Store,
        cfg: &Config,
    ) -> Result<(), StoreError> {
        let now_ms = chrono::Utc::now().timestamp_millis();
        let bridge = earlier_keys::Bridge::prepare(store, cfg, now_ms)?;
        if let Some(b) = &bridge {
            crate::events::EarlierKeys {
                until_ms: b.until_ms(),
            }
            .emit();
        }
        self.bridge = bridge.map(Arc::new);
        Ok(())
    }

    /// A copy of this gate, settings and counters, over the same in-memory
    /// knowledge: it records a round in a transaction run on another
    /// thread (the outbox writer's, `store::handoff`), and this gate
    /// settles it once that transaction has committed.
    pub fn copy(&self) -> Gate {
        Gate {
            stats: self.stats,
            ..self.lane()
        }
    }

    /// Never judge a scan by an echo window narrower than `floor`,
    /// whatever window of its own it carries ([`Gate::window_of`]). The
    /// facility claimer sets twice the facility clock's error bound, so one
    /// read heard by two gateways is still one pick.
    pub fn set_window_floor(&mut self, floor: EchoWindow) {
        self.window_floor = floor;
    }

    /// The earliest capture time (Unix ms, wall clock) a twin of a capture
    /// at `time` may have: the echo window before it, widened by the
    /// steps of its boot's wall clock recorded so far.
    pub fn earliest_twin_ms(&self, time: &crate::capture::CaptureTime) -> i64 {
        let allowance = self.known().offsets.allowance(
            &time.boot_id,
            clock_steps::offset(time.utc_ms, time.boot_ns),
        );
        time.utc_ms - self.cfg.window.ms() - allowance
    }

    /// The echo window and the retention horizon this gate judges by.
    pub fn horizon(&self) -> (EchoWindow, Duration) {
        (self.cfg.window, self.cfg.retention)
    }

    /// A note recorded as the audit `reason` of every decision made from
    /// now on that has no reason of its own (commits and echoes): how they
    /// came to be decided, for a reader of the trail. `scangate outbox
    /// decide-locally` names the takeover from a removed facility store.
    pub fn set_audit_note(&mut self, note: Option<String>) {
        self.audit_note = note;
    }

    /// Counters since start.
    pub fn stats(&self) -> GateStats {
        self.stats
    }

    /// This gateway's facility id (part of every content key).
    pub fn facility(&self) -> &str {
        &self.cfg.facility
    }

    /// This gateway's id (the ledger's `gateway` field).
    pub fn gateway(&self) -> &str {
        &self.cfg.gateway
    }

    /// Apply a committed transaction's counters and emit its audit records
    /// (call after the commit of the transaction that decided them).
    pub fn settle(&mut self, decided: Unsettled) -> Vec<Decision> {
        self.stats = decided.stats;
        if !decided.widened.is_empty() {
            let mut known = self.known();
            for (boot_id, range) in &decided.widened {
                known.offsets.confirm(boot_id, *range);
            }
        }
        crate::audit::emit(&decided.emitted);
        decided.decisions
    }

    /// Decide up to [`DECIDE_BATCH`] pending scans, in capture order, inside
    /// `tx` (embedded store: no local twin means a new pick). Each verdict
    /// is written before the next row is looked at, so a commit is the twin
    /// of later echoes in the same batch. Nothing is final until the caller
    /// commits and [`Gate::settle`]s; the Bloom filter may learn keys of a
    /// batch that is then rolled back, which only costs an extra exact
    /// lookup.
    pub fn decide(&mut self, tx: &Connection) -> rusqlite::Result<Unsettled> {
        let rows = outbox::open::load(
            tx,
            outbox::open::Open::Pending,
            &outbox::open::skip(&[]),
            DECIDE_BATCH,
        )?;
        let mut tally = Tally::new(self.stats);
        let mut writer = DecisionWriter::begin(tx, &self.cfg.gateway)?;
        let mut decisions = Vec::with_capacity(rows.len());
        for row in rows {
            let decided = self.decide_one(tx, &mut writer, row, &mut tally, RowWrite::Update)?;
            decisions.extend(decided);
        }
        Ok(tally.unsettled(decisions, writer.finish()?))
    }

    /// Write `scans` and decide them in `tx` (embedded store), returning
    /// per scan whether it was new to the outbox. Decided before written:
    /// each fresh scan is judged from its row made in memory, in capture
    /// order, and inserted with its verdict — one `INSERT`, no `UPDATE`,
    /// no re-reading. Only when older scans are still pending (a batch
    /// whose deciding failed, `outbox decide-locally`) or the batch is
    /// larger than [`DECIDE_BATCH`] are the scans inserted `pending` and
    /// decided after the older ones, oldest capture first ([`Gate::decide`]),
    /// so the order of decisions never depends on the path.
    pub fn write_and_decide(
        &mut self,
        tx: &Connection,
        scans: &[Scan],
    ) -> rusqlite::Result<(Vec<bool>, Unsettled)> {
        if scans.len() > DECIDE_BATCH || outbox::open::has_pending(tx)? {
            let fresh = outbox::insert(tx, &self.cfg.facility, scans)?;
            return Ok((fresh, self.decide(tx)?));
        }
        // Each with its place in the batch, in the order
        // `outbox::open::load` reads pending rows in.
        let mut rows: Vec<(usize, ScanRow)> = scans
            .iter()
            .map(|s| ScanRow::of_scan(s, &self.cfg.facility))
            .enumerate()
            .collect();
        rows.sort_by(|(_, a), (_, b)| {
            (a.time.utc_ms, a.time.boot_ns, &a.uuid).cmp(&(b.time.utc_ms, b.time.boot_ns, &b.uuid))
        });
        let first_seq = outbox::next_seq(tx)?;
        let mut fresh = vec![false; scans.len()];
        let mut tally = Tally::new(self.stats);
        let mut writer = DecisionWriter::begin(tx, &self.cfg.gateway)?;
        let mut decisions = Vec::with_capacity(scans.len());
        for (i, row) in rows {
            let raw = &scans[i].raw;
            let write = RowWrite::Insert {
                raw,
                seq: first_seq + i as i64,
            };
            let decided = self.decide_one(tx, &mut writer, row, &mut tally, write)?;
            fresh[i] = decided.is_some();
            decisions.extend(decided);
        }
        Ok((fresh, tally.unsettled(decisions, writer.finish()?)))
    }

    /// Begin writing verdicts in `tx` ([`Gate::record_verdict`]).
    pub fn recorder<'t>(&self, tx: &'t Connection) -> rusqlite::Result<Recorder<'t>> {
        Ok(Recorder {
            writer: DecisionWriter::begin(tx, &self.cfg.gateway)?,
            tally: Tally::new(self.stats),
            decisions: Vec::new(),
        })
    }

    /// Write `verdict` on `row` (an outbox row) through `rec`, in its
    /// transaction `tx`: its state, a commit's ledger entry and this
    /// gate's knowledge of it, one audit record; `claimed`: what the
    /// round says of it besides ([`Claimed`]).
    pub fn record_verdict(
        &mut self,
        tx: &Connection,
        rec: &mut Recorder<'_>,
        row: ScanRow,
        verdict: Verdict,
        claimed: Claimed<'_>,
    ) -> rusqlite::Result<()> {
        let findings = match claimed.findings {
            // The claim's, the facility's answer on a received serial
            // among them: that is a commit's alone.
            Some(mut found) if told_findings(&verdict) => {
                if verdict != Verdict::Committed {
                    found.alerts.retain(|a| a.kind != Alert::Suspect);
                }
                Some(found)
            }
            Some(_) => None,
            None => self.findings_for(&row, &verdict),
        };
        let decided = self.record_one(
            tx,
            &mut rec.writer,
            row,
            verdict,
            (claimed.clock, claimed.note),
            findings,
            &mut rec.tally,
            RowWrite::Update,
        )?;
        rec.decisions.extend(decided);
        Ok(())
    }

    /// Decide `row` on this gateway's own knowledge ([`Self::local_verdict`]:
    /// no local twin is a new pick) and record it.
    fn decide_one(
        &mut self,
        tx: &Connection,
        writer: &mut DecisionWriter<'_>,
        row: ScanRow,
        tally: &mut Tally,
        write: RowWrite<'_>,
    ) -> rusqlite::Result<Option<Decision>> {
        let verdict = self
            .local_verdict(tx, &row, &mut tally.stats)?
            .unwrap_or(Verdict::Committed);
        let mut findings = self.findings_for(&row, &verdict);
        if verdict == Verdict::Committed
            && let Some(found) = &mut findings
        {
            self.received_here(writer.receipts(), &row, found)?;
        }
        self.record_one(
            tx,
            writer,
            row,
            verdict,
            (None, None),
            findings,
            tally,
            write,
        )
    }

    /// A committed `receive` read of a serialised item, with this
    /// gateway's own store: keep it as the item's first receipt, or
    /// find it suspect ([`crate::checks::received`]) if another read
    /// received the item beyond the echo window (and its scanner runs
    /// that check).
    fn received_here(
        &self,
        keeper: &mut crate::checks::received::Keeper<'_>,
        row: &ScanRow,
        found: &mut Findings,
    ) -> rusqlite::Result<()> {
        let (Some(checks), Some(receipt)) = (self.checks(), receipt_of(row)) else {
            return Ok(());
        };
        let Some(first) = keeper.receive(&self.cfg.gateway, &receipt)? else {
            return Ok(());
        };
        if first.makes_suspect(&row.uuid, row.time.utc_ms, self.cfg.window.ms())
            && checks.runs(&row.scanner, &row.scan_type, crate::model::Check::Suspect)
        {
            found.alerts.push(crate::checks::received::alert(&first));
            found.alerts.sort_by_key(|a| a.kind);
        }
        Ok(())
    }

    /// What this gateway's own knowledge says about a scan (rejected, a
    /// control read, suppressed by a committed twin in the local exact
    /// index, or `None`: a claim for the facility store), counted in this
    /// gate's counters.
    pub fn judge(&mut self, conn: &Connection, row: &ScanRow) -> rusqlite::Result<Option<Verdict>> {
        let mut stats = self.stats;
        let verdict = self.local_verdict(conn, row, &mut stats);
        self.stats = stats;
        verdict
    }

    /// What this gateway's own knowledge says about a scan: rejected,
    /// suppressed by a committed twin in the local exact index, or `None`
    /// (no local twin: a new pick for the embedded store, a claim for the
    /// facility store).
    fn local_verdict(
        &mut self,
        tx: &Connection,
        row: &ScanRow,
        stats: &mut GateStats,
    ) -> rusqlite::Result<Option<Verdict>> {
        if let Some(what) = &row.control {
            return Ok(Some(Verdict::Control {
                control: what.clone(),
            }));
        }
        let key = match (&row.reject_reason, &row.content_key) {
            (Some(reason), _) => {
                return Ok(Some(Verdict::Rejected {
                    reason: reason.clone(),
                }));
            }
            (None, None) => {
                return Ok(Some(Verdict::Rejected {
                    reason: "no content key".into(),
                }));
            }
            (None, Some(key)) => key,
        };
        // A scan captured (by the wall clock) longer ago than the horizon may
        // have twins the Bloom filter has aged out: always ask the exact index.
        let bloom_floor = chrono::Utc::now().timestamp_millis()
            - self.cfg.retention.as_millis() as i64
            + self.cfg.window.ms();
        let window = self.window_of(row);
        let bytes = key_bytes(key);
        let mut twin = None;
        if !self.known().bloom.may_contain(&bytes) && row.time.utc_ms >= bloom_floor {
            stats.lookups_saved += 1;
        } else {
            stats.exact_lookups += 1;
            twin = crate::ledger::find_twin(tx, (key, &bytes), row, window)?;
        }
        // A commit an earlier release keyed in another form (only while
        // the state holds such commits: `earlier_keys`).
        if twin.is_none()
            && let Some(earlier) = self.bridge.as_ref().and_then(|b| b.earlier_key(row))
        {
            let bytes = key_bytes(&earlier);
            if self.known().bloom.may_contain(&bytes) || row.time.utc_ms < bloom_floor {
                stats.exact_lookups += 1;
                twin = crate::ledger::find_twin(tx, (&earlier, &bytes), row, window)?;
            }
        }
        Ok(twin.map(|twin| Verdict::Suppressed { twin }))
    }

    /// The echo window `row` is judged by: the gateway's, or the
    /// scan's own narrower one ([`ScanRow::window`]: a double-fire
    /// window, a declared repeat), never narrower than the floor
    /// ([`Gate::set_window_floor`]).
    pub fn window_of(&self, row: &ScanRow) -> EchoWindow {
        self.cfg.window.for_scan(row.window, self.window_floor)
    }

    /// Whether `verdict` on `row` is an ambiguous echo: a label without a
    /// serial, not a frame its scanner may have been resending, echoing a
    /// commit of **this** gateway (docs/design.md, "Unserialised labels").
    /// A serialised label's echo never is. With a facility store, an echo
    /// of another gateway's commit is a shared scanner's read that gateway
    /// heard too (every gateway hears every read of a shared scanner, so
    /// the committing one judges its echoes, and counts an ambiguous one
    /// once); scanners that are not shared have keys no other gateway
    /// commits.
    fn ambiguity(
        &self,
        tx: &Connection,
        row: &ScanRow,
        verdict: &Verdict,
    ) -> rusqlite::Result<Option<crate::audit::AuditAmbiguous>> {
        let Verdict::Suppressed { twin } = verdict else {
            return Ok(None);
        };
        if row.serial.is_some() || row.resend || !outbox::has_scan(tx, twin)? {
            return Ok(None);
        }
        Ok(Some(crate::audit::AuditAmbiguous {
            why: crate::audit::AMBIGUOUS_WHY.to_string(),
            policy: row
                .unserialised
                .clone()
                .unwrap_or_else(|| "window".to_string()),
            window_ms: self.window_of(row).ms(),
        }))
    }

    /// Write one verdict ([`DecisionWriter::decision`]: state, a commit's ledger
    /// entry, one audit record) and learn a commit: the Bloom filter, the
    /// boot's clock steps. An `Unresolved` verdict for a scan that is
    /// already unresolved writes nothing (it was audited the first time).
    /// `clock`: how a facility claim's capture was put on facility time
    /// (`row.time` then holds it; the record keeps the wall stamp as well).
    /// `note`: what else the record's reason must say of the decision.
    /// `findings`: what the checks found ([`Gate::findings_for`]).
    #[allow(clippy::too_many_arguments)]
    fn record_one(
        &mut self,
        tx: &Connection,
        writer: &mut DecisionWriter<'_>,
        row: ScanRow,
        verdict: Verdict,
        (clock, note): (Option<&crate::model::ClockUsed>, Option<String>),
        findings: Option<Findings>,
        tally: &mut Tally,
        write: RowWrite<'_>,
    ) -> rusqlite::Result<Option<Decision>> {
        if matches!(verdict, Verdict::Unresolved { .. }) && row.state == ScanState::Unresolved {
            return Ok(None);
        }
        let ambiguous = self.ambiguity(tx, &row, &verdict)?;
        let is_ambiguous = ambiguous.is_some();
        let declared_note = row
            .declared
            .as_ref()
            .map(|(control, by)| match control.as_str() {
                "repeat" => format!("declared a repeat by the operator (control label read {by})"),
                other => format!("declared {other} by the operator (control label read {by})"),
            });
        let mut notes: Vec<String> = declared_note
            .into_iter()
            .chain(clock.and_then(|c| c.note.clone()))
            .chain(note)
            .collect();
        if notes.is_empty() {
            notes.extend(self.audit_note.clone());
        }
        let Some(WrittenScan {
            row,
            committed_key,
            acknowledged,
        }) = writer.decision(DecidedScan {
            row,
            verdict: &verdict,
            write,
            ambiguous,
            clock,
            notes,
            findings: findings.as_ref(),
        })?
        else {
            // The outbox had this scan already: it was decided then.
            return Ok(None);
        };
        if let Some(key) = committed_key {
            let time = &row.time;
            // The outbox orders and holds back scans by their wall stamps:
            // the steps recorded are the wall clock's.
            let wall_ms = clock.map_or(time.utc_ms, |c| c.wall_ms);
            let widened = {
                let mut known = self.known();
                known.bloom.insert(&key);
                known
                    .offsets
                    .widen(&time.boot_id, clock_steps::offset(wall_ms, time.boot_ns))
            };
            if let Some((lo, hi)) = widened {
                BootOffsets::store(tx, &time.boot_id, lo, hi)?;
                tally.widened.push((time.boot_id.clone(), (lo, hi)));
            }
        }
        let stats = &mut tally.stats;
        match verdict {
            Verdict::Committed => stats.committed += 1,
            Verdict::Suppressed { .. } => {
                stats.suppressed += 1;
                stats.ambiguous += u64::from(is_ambiguous);
            }
            Verdict::Rejected { .. } => stats.rejected += 1,
            Verdict::Unresolved { .. } => stats.unresolved += 1,
            Verdict::Pending | Verdict::Control { .. } => {}
        }
        if verdict.is_final() {
            stats.decided += 1;
        }
        let read_boot_ns =
            (row.time.boot_id == crate::capture::clock::boot_id()).then_some(row.time.boot_ns);
        let alert = findings.as_ref().and_then(Findings::told);
        Ok(Some(Decision {
            scan_uuid: row.uuid,
            verdict,
            content_key: row.content_key,
            ambiguous: is_ambiguous,
            scanner: row.scanner,
            read_boot_ns,
            was: row.state,
            told_as: None,
            alert,
            acknowledged,
        }))
    }

    /// What the checks find about `row`'s item ([`crate::checks`]): for a
    /// commit (its ledger entry and record keep it; a read that waited is
    /// told its alert again, not "committed"), a read left waiting, and an
    /// echo (a shared scanner's read another gateway committed is told as
    /// that commit, [`Decision::told_as`]); never for a rejected read or a
    /// control label.
    fn findings_for(&self, row: &ScanRow, verdict: &Verdict) -> Option<Findings> {
        if told_findings(verdict) {
            self.findings(row)
        } else {
            None
        }
    }

    /// What the checks find about `row`'s item, whatever its verdict
    /// (a facility claim carries it to the facility's ledger); `None`
    /// without checks.
    pub fn findings(&self, row: &ScanRow) -> Option<Findings> {
        let checks = self.checks.as_ref()?;
        Some(checks.findings(&crate::checks::Read {
            scanner: &row.scanner,
            scan_type: &row.scan_type,
            captured_ms: row.time.utc_ms,
            gtin: row.gtin.as_deref(),
            ndc10: row.ndc10.as_deref(),
            lot: row.lot.as_deref(),
            expiry: row.expiry.as_deref(),
        }))
    }
}

/// Whether a read of `verdict` is told what the checks found (and its
/// record keeps it): a commit, an echo, a read left waiting; not a
/// rejected read or a control label.
fn told_findings(verdict: &Verdict) -> bool {
    matches!(
        verdict,
        Verdict::Committed | Verdict::Suppressed { .. } | Verdict::Unresolved { .. }
    )
}

/// A `receive` read of a serialised item: what [`crate::checks::received`]
/// keeps of it.
pub fn receipt_of(row: &ScanRow) -> Option<crate::checks::received::Receipt<'_>> {
    if row.scan_type != "receive" {
        return None;
    }
    Some(crate::checks::received::Receipt {
        gtin: row.gtin.as_deref()?,
        serial: row.serial.as_deref()?,
        scan_uuid: &row.uuid,
        at_ms: row.time.utc_ms,
        scanner: &row.scanner,
    })
}

/// What a facility round says of a verdict besides the verdict itself
/// ([`Gate::record_verdict`]).
#[derive(Debug, Default)]
pub struct Claimed<'c> {
    /// How the claim's capture was put on facility time (`row.time` then
    /// holds it; the record keeps the wall stamp as well).
    pub clock: Option<&'c crate::model::ClockUsed>,
    /// What else the record's reason must say of the decision.
    pub note: Option<String>,
    /// What the checks found when the claim was made (with the facility's
    /// answer on a received serial); `None`: found as it is recorded.
    pub findings: Option<Findings>,
}

/// A facility round's verdicts as [`Gate::record_verdict`] writes them in
/// one transaction; [`Recorder::finish`] once all are written, and
/// [`Gate::settle`] what it returns once the transaction commits.
pub struct Recorder<'t> {
    writer: DecisionWriter<'t>,
    tally: Tally,
    decisions: Vec<Decision>,
}

impl Recorder<'_> {
    /// The verdicts written, to settle once the transaction commits.
    pub fn finish(self) -> rusqlite::Result<Unsettled> {
        Ok(self.tally.unsettled(self.decisions, self.writer.finish()?))
    }
}

/// Decisions written in a transaction not committed yet: hand them to
/// [`Gate::settle`] once it is.
#[must_use = "settle the decisions once their transaction commits"]
pub struct Unsettled {
    decisions: Vec<Decision>,
    emitted: Vec<crate::audit::Emitted>,
    stats: GateStats,
    /// Clock-step ranges the transaction stored (confirmed at settle).
    widened: Vec<(String, (i64, i64))>,
}

/// What a transaction's decisions change besides their rows, gathered as
/// they are written: the counters, and the clock-step ranges stored.
struct Tally {
    stats: GateStats,
    widened: Vec<(String, (i64, i64))>,
}

impl Tally {
    /// Counting on from `stats`.
    fn new(stats: GateStats) -> Tally {
        Tally {
            stats,
            widened: Vec::new(),
        }
    }

    /// The transaction's decisions, to settle once it commits.
    fn unsettled(self, decisions: Vec<Decision>, emitted: Vec<crate::audit::Emitted>) -> Unsettled {
        Unsettled {
            decisions,
            emitted,
            stats: self.stats,
            widened: self.widened,
        }
    }
}

/// The recorded decision of a scan, if the outbox has it.
pub fn decision_of(store: &Store, scan_uuid: &str) -> Result<Option<Decision>, StoreError> {
    let recorded = outbox::recorded(&store.conn, scan_uuid).map_err(|e| store.err_at(e))?;
    Ok(recorded.map(|r| {
        let verdict = match r.state {
            ScanState::Committed => Verdict::Committed,
            ScanState::Suppressed => Verdict::Suppressed {
                twin: r.twin_uuid.unwrap_or_default(),
            },
            ScanState::Rejected => Verdict::Rejected {
                reason: r.reject_reason.unwrap_or_else(|| "no content key".into()),
            },
            ScanState::Unresolved => Verdict::Unresolved {
                reason: "waiting for the facility store".into(),
            },
            ScanState::Pending => Verdict::Pending,
            ScanState::Control => Verdict::Control {
                control: r.control.unwrap_or_default(),
            },
        };
        Decision {
            scan_uuid: scan_uuid.to_string(),
            verdict,
            content_key: r.content_key,
            ambiguous: r.ambiguous,
            scanner: r.scanner,
            read_boot_ns: None,
            was: r.state,
            told_as: None,
            alert: None,
            acknowledged: None,
        }
    }))
}
