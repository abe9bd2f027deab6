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
//! are written in one SQLite transaction (invariant 6).

pub mod bloom;
pub mod facility;
pub mod steps;

use crate::audit::{AuditRecord, Chain};
use crate::capture::Profile;
use crate::capture::barcode::ProductId;
use crate::capture::clock::rfc3339_ms;
use crate::config::Config;
use crate::store::{Store, StoreError};
use bloom::Bloom;
use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use steps::BootOffsets;

/// Rows decided per transaction by the embedded gate (one fsync each); the
/// facility gate uses smaller rounds (`facility::ROUND`).
pub(crate) const DECIDE_BATCH: usize = 4096;

/// Content key: SHA-256 (hex) over facility, scanner, scan type, quantity and
/// the canonical product identity. No time component (time is invariant 4's job).
pub fn content_key(facility: &str, profile: &Profile, product: &ProductId) -> String {
    let mut h = Sha256::new();
    h.update(b"scangate-content-key-v1\x1f");
    for part in [
        facility.as_bytes(),
        profile.scanner.as_bytes(),
        profile.scan_type.as_str().as_bytes(),
        profile.quantity.to_string().as_bytes(),
    ] {
        h.update(part);
        h.update([0x1f]);
    }
    h.update(product.canonical_bytes());
    hex::encode(h.finalize())
}

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
}

impl Verdict {
    /// The state name used in the outbox and the audit trail.
    pub fn state(&self) -> &'static str {
        match self {
            Verdict::Committed => "committed",
            Verdict::Suppressed { .. } => "suppressed",
            Verdict::Rejected { .. } => "rejected",
            Verdict::Unresolved { .. } => "unresolved",
            Verdict::Pending => "pending",
        }
    }

    /// Committed, suppressed or rejected: the scan's last state.
    pub fn is_final(&self) -> bool {
        !matches!(self, Verdict::Unresolved { .. } | Verdict::Pending)
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
            rejected: self.rejected - earlier.rejected,
            unresolved: self.unresolved - earlier.unresolved,
            exact_lookups: self.exact_lookups - earlier.exact_lookups,
            lookups_saved: self.lookups_saved - earlier.lookups_saved,
        }
    }
}

/// The gate's settings.
#[derive(Debug, Clone)]
pub struct GateConfig {
    /// Facility id.
    pub facility: String,
    /// This gateway's id.
    pub gateway: String,
    /// Echo window (ms).
    pub window_ms: i64,
    /// Bloom retention horizon.
    pub retention: Duration,
}

impl GateConfig {
    /// The gate settings of a config.
    pub fn from_config(cfg: &Config) -> GateConfig {
        GateConfig {
            facility: cfg.gateway.facility.clone(),
            gateway: cfg.gateway.id.clone(),
            window_ms: cfg.window_ms(),
            retention: Duration::from_secs(cfg.dedup.retention_hours * 3600),
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
    require_synced_clock: bool,
    /// Whether this gateway's own echo window may decide a facility round
    /// (see [`Gate::set_local_echoes`]; never consulted by the embedded
    /// store, where no local twin means a commit).
    local_echoes: bool,
    /// See [`Gate::set_audit_note`].
    audit_note: Option<String>,
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

/// An undecided outbox row (`pending`, or `unresolved` in facility mode).
struct OpenRow {
    seq: i64,
    state: String,
    uuid: String,
    scanner: String,
    captured_ms: i64,
    boot_id: String,
    boot_ns: i64,
    synced: bool,
    content_key: Option<String>,
    reject_reason: Option<String>,
    raw_len: i64,
    scan_type: String,
    quantity: i64,
    gtin: Option<String>,
    ndc10: Option<String>,
    lot: Option<String>,
    serial: Option<String>,
    expiry: Option<String>,
    symbology: Option<String>,
}

impl OpenRow {
    /// This row as a ledger entry of `gateway`.
    fn entry<'a>(&'a self, gateway: &'a str) -> crate::ledger::NewEntry<'a> {
        crate::ledger::NewEntry {
            scan_uuid: &self.uuid,
            gateway,
            scanner: &self.scanner,
            captured_ms: self.captured_ms,
            boot_id: &self.boot_id,
            boot_ns: self.boot_ns,
            clock_synced: self.synced,
            scan_type: &self.scan_type,
            quantity: self.quantity,
            gtin: self.gtin.as_deref(),
            ndc10: self.ndc10.as_deref(),
            lot: self.lot.as_deref(),
            serial: self.serial.as_deref(),
            expiry: self.expiry.as_deref(),
            symbology: self.symbology.as_deref().unwrap_or_default(),
            content_key: self.content_key.as_deref().unwrap_or_default(),
        }
    }
}

impl Gate {
    /// A gate whose Bloom filter is rebuilt from the ledger's entries within
    /// the retention horizon.
    pub fn new(cfg: GateConfig, store: &Store) -> Result<Gate, StoreError> {
        let mut bloom = Bloom::new(BLOOM_BITS, cfg.retention);
        let since = chrono::Utc::now().timestamp_millis() - cfg.retention.as_millis() as i64;
        let mut q = store
            .conn
            .prepare("SELECT content_key FROM ledger WHERE captured_ms >= ?1")
            .map_err(|e| store.err_at(e))?;
        let mut rows = q.query([since]).map_err(|e| store.err_at(e))?;
        while let Some(row) = rows.next().map_err(|e| store.err_at(e))? {
            let key: String = row.get(0).map_err(|e| store.err_at(e))?;
            bloom.insert(&key_bytes(&key));
        }
        let offsets = BootOffsets::load(&store.conn).map_err(|e| store.err_at(e))?;
        Ok(Gate {
            cfg,
            known: Arc::new(Mutex::new(Known { bloom, offsets })),
            stats: GateStats::default(),
            require_synced_clock: false,
            local_echoes: true,
            audit_note: None,
        })
    }

    /// A second gate over the same in-memory knowledge (Bloom filter,
    /// recorded clock steps), with settings as this one's and counters of
    /// its own: the facility claimer's second lane (`daemon/claimer.rs`).
    /// What either records, the other sees at once.
    pub fn lane(&self) -> Gate {
        Gate {
            cfg: self.cfg.clone(),
            known: Arc::clone(&self.known),
            stats: GateStats::default(),
            require_synced_clock: self.require_synced_clock,
            local_echoes: self.local_echoes,
            audit_note: self.audit_note.clone(),
        }
    }

    /// Facility mode: hold scans captured on an unsynchronised wall clock
    /// until it is synchronised (see [`Gate::facility_round`]). Off by
    /// default; the embedded store compares same-boot scans on the boot
    /// clock and needs no wall time to decide.
    pub fn set_require_synced_clock(&mut self, on: bool) {
        self.require_synced_clock = on;
    }

    /// Facility mode: whether echoes of this gateway's own commits are
    /// suppressed locally (on by default). Off while the facility refuses
    /// this gateway's window and retention (they are no longer the
    /// facility's rule): such scans are then claimed like any other, so
    /// they wait `unresolved` until the settings agree. Rejections are
    /// still made locally: they do not depend on the window.
    pub fn set_local_echoes(&mut self, on: bool) {
        self.local_echoes = on;
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

    /// Decide every pending scan, oldest capture first. Returns the decisions
    /// in the order they were made.
    pub fn decide_pending(&mut self, store: &mut Store) -> Result<Vec<Decision>, StoreError> {
        let mut all = Vec::new();
        loop {
            let batch = self.decide_batch(store)?;
            let done = batch.len() < DECIDE_BATCH;
            all.extend(batch);
            if done {
                return Ok(all);
            }
        }
    }

    fn decide_batch(&mut self, store: &mut Store) -> Result<Vec<Decision>, StoreError> {
        let w = store.write()?;
        let decided = self.decide_in(&w.tx).map_err(|e| w.err(e))?;
        w.commit()?;
        Ok(self.settle(decided))
    }

    /// Apply a committed batch's counters and emit its audit records.
    fn settle(&mut self, decided: Decided) -> Vec<Decision> {
        self.stats = decided.stats;
        crate::audit::emit(&decided.emitted);
        decided.decisions
    }

    /// Decide up to [`DECIDE_BATCH`] pending scans inside `tx` (embedded
    /// store: no local twin means a new pick). Each verdict is written before
    /// the next row is looked at, so a commit is the twin of later echoes in
    /// the same batch. Nothing is final until the caller commits; the Bloom
    /// filter may learn keys of a batch that is then rolled back, which only
    /// costs an extra exact lookup.
    fn decide_in(&mut self, tx: &Connection) -> rusqlite::Result<Decided> {
        let rows = load_pending(tx, &Skip::default(), DECIDE_BATCH)?;
        let mut stats = self.stats;
        let mut chain = Chain::begin(tx)?;
        let now_ms = chrono::Utc::now().timestamp_millis();
        let mut decisions = Vec::with_capacity(rows.len());
        for row in rows {
            let verdict = self
                .local_verdict(tx, &row, &mut stats)?
                .unwrap_or(Verdict::Committed);
            decisions.extend(self.record_one(tx, &mut chain, row, verdict, now_ms, &mut stats)?);
        }
        Ok(Decided {
            decisions,
            emitted: chain.finish()?,
            stats,
        })
    }

    /// What this gateway's own knowledge says about a scan: rejected,
    /// suppressed by a committed twin in the local exact index, or `None`
    /// (no local twin: a new pick for the embedded store, a claim for the
    /// facility store).
    fn local_verdict(
        &mut self,
        tx: &Connection,
        row: &OpenRow,
        stats: &mut GateStats,
    ) -> rusqlite::Result<Option<Verdict>> {
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
            + self.cfg.window_ms;
        let kb = key_bytes(key);
        if !self.known().bloom.may_contain(&kb) && row.captured_ms >= bloom_floor {
            stats.lookups_saved += 1;
            return Ok(None);
        }
        stats.exact_lookups += 1;
        Ok(self
            .find_twin(tx, key, &kb, row)?
            .map(|twin| Verdict::Suppressed { twin }))
    }

    /// Write one verdict: state, ledger row and local exact knowledge for a
    /// commit, one audit record. An `Unresolved` verdict for a scan that is
    /// already unresolved writes nothing (it was audited the first time).
    fn record_one(
        &mut self,
        tx: &Connection,
        chain: &mut Chain<'_>,
        row: OpenRow,
        verdict: Verdict,
        now_ms: i64,
        stats: &mut GateStats,
    ) -> rusqlite::Result<Option<Decision>> {
        if matches!(verdict, Verdict::Unresolved { .. }) && row.state == "unresolved" {
            return Ok(None);
        }
        if verdict == Verdict::Committed {
            let kb = key_bytes(row.content_key.as_deref().unwrap_or_default());
            crate::ledger::append(tx, &row.entry(&self.cfg.gateway), key_prefix(&kb))?;
            let widened = {
                let mut known = self.known();
                known.bloom.insert(&kb);
                known
                    .offsets
                    .widen(&row.boot_id, steps::offset(row.captured_ms, row.boot_ns))
            };
            if let Some((lo, hi)) = widened {
                steps::BootOffsets::store(tx, &row.boot_id, lo, hi)?;
            }
        }
        let (twin, reason) = match &verdict {
            Verdict::Suppressed { twin } => (Some(twin.clone()), None),
            Verdict::Rejected { reason } | Verdict::Unresolved { reason } => {
                (None, Some(reason.clone()))
            }
            _ => (None, None),
        };
        let reason = reason.or_else(|| self.audit_note.clone());
        let decided_ms = verdict.is_final().then_some(now_ms);
        tx.prepare_cached(
            "UPDATE scans SET state = ?2, twin_uuid = ?3, decided_ms = ?4 WHERE seq = ?1",
        )?
        .execute(params![row.seq, verdict.state(), twin, decided_ms])?;
        chain.append(AuditRecord {
            seq: 0,
            at: rfc3339_ms(now_ms),
            gateway: self.cfg.gateway.clone(),
            scanner: row.scanner,
            scan_uuid: row.uuid.clone(),
            captured_at: rfc3339_ms(row.captured_ms),
            clock_synced: row.synced,
            decision: verdict.state().to_string(),
            content_key: row.content_key.clone(),
            twin_uuid: twin,
            reason,
            raw_len: row.raw_len,
        })?;
        match verdict {
            Verdict::Committed => stats.committed += 1,
            Verdict::Suppressed { .. } => stats.suppressed += 1,
            Verdict::Rejected { .. } => stats.rejected += 1,
            Verdict::Unresolved { .. } => stats.unresolved += 1,
            Verdict::Pending => {}
        }
        if verdict.is_final() {
            stats.decided += 1;
        }
        Ok(Some(Decision {
            scan_uuid: row.uuid,
            verdict,
            content_key: row.content_key,
        }))
    }

    /// The exact lookup: the earliest-captured committed scan with this
    /// content key within ±window of `row` — on the boot clock for scans of
    /// the same boot (`ledger_boot`), on the wall clock for scans of other
    /// boots (`ledger_wall`). Each index is led by a time bucket (migration
    /// 3), so the lookup seeks every bucket the window touches: one or two
    /// for a window of seconds. A wall clock stepped within the boot does not
    /// widen anything: same-boot twins never use it.
    fn find_twin(
        &self,
        tx: &Connection,
        key: &str,
        kb: &[u8; 32],
        row: &OpenRow,
    ) -> rusqlite::Result<Option<String>> {
        let w = self.cfg.window_ms;
        let prefix = key_prefix(kb);
        // (captured_ms, seq, scan_uuid) of the earliest twin found.
        let mut best: Option<(i64, i64, String)> = None;
        let mut keep = |r: &rusqlite::Row<'_>| -> rusqlite::Result<()> {
            let found = (r.get(0)?, r.get(1)?, r.get(2)?);
            if best
                .as_ref()
                .is_none_or(|b| (found.0, found.1) < (b.0, b.1))
            {
                best = Some(found);
            }
            Ok(())
        };
        let (lo, hi) = (row.boot_ns - w * 1_000_000, row.boot_ns + w * 1_000_000);
        let mut q = tx.prepare_cached(
            "SELECT captured_ms, seq, scan_uuid FROM ledger
             WHERE boot_id = ?1 AND boot_ns >> 33 = ?2 AND key_prefix = ?3
               AND boot_ns BETWEEN ?4 AND ?5 AND content_key = ?6",
        )?;
        for bucket in (lo >> 33)..=(hi >> 33) {
            let mut rows = q.query(params![row.boot_id, bucket, prefix, lo, hi, key])?;
            while let Some(r) = rows.next()? {
                keep(r)?;
            }
        }
        let (lo, hi) = (row.captured_ms - w, row.captured_ms + w);
        let mut q = tx.prepare_cached(
            "SELECT captured_ms, seq, scan_uuid FROM ledger
             WHERE captured_ms >> 13 = ?1 AND key_prefix = ?2
               AND captured_ms BETWEEN ?3 AND ?4 AND content_key = ?5 AND boot_id <> ?6",
        )?;
        for bucket in (lo >> 13)..=(hi >> 13) {
            let mut rows = q.query(params![bucket, prefix, lo, hi, key, row.boot_id])?;
            while let Some(r) = rows.next()? {
                keep(r)?;
            }
        }
        Ok(best.map(|(_, _, uuid)| uuid))
    }

    /// Make scans durable and decide them in **one** transaction (one fsync).
    /// Nothing outside the database (ACK, log, Redis) sees a decision before
    /// the commit that also makes the scan durable. If deciding fails, the
    /// transaction is rolled back and the scans are committed alone, as
    /// `pending` — a fault in the gate never costs a scan its durability.
    /// Returns, per scan, whether it was new to the outbox, and the decisions
    /// made (this batch and any older pending scans, in capture order).
    pub fn admit_and_decide(
        &mut self,
        store: &mut Store,
        scans: &[crate::capture::Scan],
    ) -> Result<(Vec<bool>, Vec<Decision>), StoreError> {
        let decided = {
            let w = store.write()?;
            let fresh =
                crate::outbox::insert(&w.tx, &self.cfg.facility, scans).map_err(|e| w.err(e))?;
            match self.decide_in(&w.tx) {
                Ok(d) => {
                    w.commit()?;
                    Ok((fresh, d))
                }
                Err(e) => Err(e), // the transaction rolls back here
            }
        };
        let (fresh, decided) = match decided {
            Ok(done) => done,
            Err(e) => {
                tracing::error!("deciding failed; storing the scans as pending to retry: {e}");
                let fresh = store.admit(&self.cfg.facility, scans)?;
                return Ok((fresh, Vec::new()));
            }
        };
        let mut decisions = self.settle(decided);
        if decisions.len() == DECIDE_BATCH {
            decisions.extend(self.decide_pending(store)?);
        }
        Ok((fresh, decisions))
    }

    /// [`Gate::admit_and_decide`], returning each submitted scan's decision
    /// (for a UUID seen before, its first one): the synchronous pipeline used
    /// by tests, the benchmark and tools.
    pub fn submit(
        &mut self,
        store: &mut Store,
        scans: &[crate::capture::Scan],
    ) -> Result<Vec<Decision>, StoreError> {
        self.admit_and_decide(store, scans)?;
        scans
            .iter()
            .map(|s| {
                decision_of(store, &s.uuid.to_string()).map(|d| {
                    d.unwrap_or(Decision {
                        scan_uuid: s.uuid.to_string(),
                        verdict: Verdict::Pending,
                        content_key: None,
                    })
                })
            })
            .collect()
    }
}

/// A decided batch, not yet committed.
struct Decided {
    decisions: Vec<Decision>,
    emitted: Vec<crate::audit::Emitted>,
    stats: GateStats,
}

/// The recorded decision of a scan, if the outbox has it.
pub fn decision_of(store: &Store, scan_uuid: &str) -> Result<Option<Decision>, StoreError> {
    store
        .conn
        .query_row(
            "SELECT state, twin_uuid, reject_reason, content_key FROM scans WHERE scan_uuid = ?1",
            [scan_uuid],
            |r| {
                let state: String = r.get(0)?;
                let verdict = match state.as_str() {
                    "committed" => Verdict::Committed,
                    "suppressed" => Verdict::Suppressed {
                        twin: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                    },
                    "rejected" => Verdict::Rejected {
                        reason: r
                            .get::<_, Option<String>>(2)?
                            .unwrap_or_else(|| "no content key".into()),
                    },
                    "unresolved" => Verdict::Unresolved {
                        reason: "waiting for the facility store".into(),
                    },
                    _ => Verdict::Pending,
                };
                Ok(Decision {
                    scan_uuid: scan_uuid.to_string(),
                    verdict,
                    content_key: r.get(3)?,
                })
            },
        )
        .optional()
        .map_err(|e| store.err_at(e))
}

/// The columns an [`OpenRow`] is read from, in [`open_row`]'s order.
macro_rules! open_columns {
    () => {
        "seq, state, scan_uuid, scanner, captured_ms, boot_id, boot_ns, clock_synced,
         content_key, reject_reason, length(raw), scan_type, quantity, gtin, ndc10,
         lot, serial, expiry, symbology"
    };
}

fn open_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<OpenRow> {
    Ok(OpenRow {
        seq: r.get(0)?,
        state: r.get(1)?,
        uuid: r.get(2)?,
        scanner: r.get(3)?,
        captured_ms: r.get(4)?,
        boot_id: r.get(5)?,
        boot_ns: r.get(6)?,
        synced: r.get(7)?,
        content_key: r.get(8)?,
        reject_reason: r.get(9)?,
        raw_len: r.get(10)?,
        scan_type: r.get(11)?,
        quantity: r.get(12)?,
        gtin: r.get(13)?,
        ndc10: r.get(14)?,
        lot: r.get(15)?,
        serial: r.get(16)?,
        expiry: r.get(17)?,
        symbology: r.get(18)?,
    })
}

/// Outbox rows (`seq`) a query must pass over: a claim round in flight.
/// Filtering in SQL spares decoding rows only to drop them.
pub(crate) type Skip = std::rc::Rc<Vec<rusqlite::types::Value>>;

/// Up to `limit` `pending` rows not in `skip`, in capture order (the
/// embedded gate, and the facility claimer's live lane).
fn load_pending(tx: &Connection, skip: &Skip, limit: usize) -> rusqlite::Result<Vec<OpenRow>> {
    let mut q = tx.prepare_cached(LOAD_PENDING)?;
    q.query_map(params![limit as i64, skip], open_row)?
        .collect()
}

/// Up to `limit` `unresolved` rows not in `skip`, in capture order (the
/// facility claimer's replay lane).
fn load_unresolved(tx: &Connection, skip: &Skip, limit: usize) -> rusqlite::Result<Vec<OpenRow>> {
    let mut q = tx.prepare_cached(LOAD_UNRESOLVED)?;
    q.query_map(params![limit as i64, skip], open_row)?
        .collect()
}

/// Open rows of one state in capture order, walked in its partial index.
macro_rules! load_state {
    ($state:literal) => {
        concat!(
            "SELECT ",
            open_columns!(),
            " FROM scans WHERE state = '",
            $state,
            "' AND seq NOT IN rarray(?2) ORDER BY captured_ms, boot_ns, scan_uuid LIMIT ?1"
        )
    };
}

const LOAD_PENDING: &str = load_state!("pending");
const LOAD_UNRESOLVED: &str = load_state!("unresolved");

/// Whether an `unresolved` scan whose wall time is not trusted yet has
/// content key `key` — with `None`, whether there is any (migration 4).
fn unsynced_unresolved(tx: &Connection, key: Option<&str>) -> rusqlite::Result<bool> {
    match key {
        Some(key) => tx
            .prepare_cached(
                "SELECT 1 FROM scans WHERE state = 'unresolved' AND clock_synced = 0
                   AND content_key = ?1 LIMIT 1",
            )?
            .exists([key]),
        None => tx
            .prepare_cached(
                "SELECT 1 FROM scans INDEXED BY scans_unsynced
                 WHERE state = 'unresolved' AND clock_synced = 0 LIMIT 1",
            )?
            .exists([]),
    }
}

/// The latest wall-clock capture time of any `unresolved` scan.
fn newest_unresolved_ms(tx: &Connection) -> rusqlite::Result<Option<i64>> {
    tx.prepare_cached(
        "SELECT captured_ms FROM scans WHERE state = 'unresolved'
         ORDER BY captured_ms DESC, boot_ns DESC, scan_uuid DESC LIMIT 1",
    )?
    .query_row([], |r| r.get(0))
    .optional()
}

/// The two open states, one per claimer lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Pending,
    Unresolved,
}

/// Statements per open state, each walking its own partial index (a
/// partial index is only used for the literal state it was made for).
macro_rules! per_state {
    ($state:expr, $pending:expr, $unresolved:expr) => {
        match $state {
            Open::Pending => $pending,
            Open::Unresolved => $unresolved,
        }
    };
}

/// The earliest and latest wall-clock capture times of the scans in
/// `state` (two index probes), if there are any.
fn open_span(tx: &Connection, state: Open) -> rusqlite::Result<Option<(i64, i64)>> {
    tx.prepare_cached(open_span_sql(state))?.query_row([], |r| {
        Ok(r.get::<_, Option<i64>>(0)?.zip(r.get::<_, Option<i64>>(1)?))
    })
}

/// [`open_span`]'s statement: two subqueries, each reading one end of the
/// state's index (a `min` and a `max` in one select would walk all of it).
fn open_span_sql(state: Open) -> &'static str {
    macro_rules! span {
        ($state:literal) => {
            concat!(
                "SELECT (SELECT captured_ms FROM scans WHERE state = '",
                $state,
                "' ORDER BY captured_ms, boot_ns, scan_uuid LIMIT 1),
                        (SELECT captured_ms FROM scans WHERE state = '",
                $state,
                "' ORDER BY captured_ms DESC, boot_ns DESC, scan_uuid DESC LIMIT 1)"
            )
        };
    }
    per_state!(state, span!("pending"), span!("unresolved"))
}

/// Whether a scan in `state` with content key `key` was captured (wall
/// clock) from `from_ms` on and before `row` in capture order. The state's
/// index is searched by time: the range is one window wide, and nearly
/// always empty; an index by content key would cost a random page write
/// per scan instead.
fn earlier_with_key(
    tx: &Connection,
    state: Open,
    key: &str,
    from_ms: i64,
    row: &OpenRow,
) -> rusqlite::Result<bool> {
    tx.prepare_cached(earlier_with_key_sql(state))?
        .exists(params![
            key,
            from_ms,
            row.captured_ms,
            row.boot_ns,
            row.uuid
        ])
}

/// [`earlier_with_key`]'s statement.
fn earlier_with_key_sql(state: Open) -> &'static str {
    macro_rules! earlier {
        ($state:literal, $index:literal) => {
            concat!(
                "SELECT 1 FROM scans INDEXED BY ",
                $index,
                " WHERE state = '",
                $state,
                "' AND captured_ms BETWEEN ?2 AND ?3 AND content_key = ?1
                   AND (captured_ms, boot_ns, scan_uuid) < (?3, ?4, ?5) LIMIT 1"
            )
        };
    }
    per_state!(
        state,
        earlier!("pending", "scans_pending"),
        earlier!("unresolved", "scans_unresolved")
    )
}

/// The ledger's index column for a content key: its first 8 bytes.
pub(crate) fn key_prefix(key: &[u8; 32]) -> i64 {
    i64::from_be_bytes(key[..8].try_into().expect("8 bytes"))
}

/// The 32 bytes of a hex content key as [`content_key`] writes it.
fn key_bytes(key: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    let _ = hex::decode_to_slice(key, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use crate::store::Store;

    /// The exact lookups must seek the bucketed indexes (a query that does
    /// not repeat the index expression exactly would scan the ledger).
    #[test]
    fn exact_lookups_seek_the_bucketed_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let plan = |sql: &str| -> String {
            let mut q = store
                .conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap();
            let details: Vec<String> = q
                .query_map([], |r| r.get::<_, String>(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            details.join("; ")
        };
        let boot = plan(
            "SELECT captured_ms, seq, scan_uuid FROM ledger
             WHERE boot_id = 'b' AND boot_ns >> 33 = 1 AND key_prefix = 2
               AND boot_ns BETWEEN 3 AND 4 AND content_key = 'k'",
        );
        assert!(
            boot.contains("USING INDEX ledger_boot (boot_id=? AND <expr>=? AND key_prefix=?"),
            "{boot}"
        );
        let wall = plan(
            "SELECT captured_ms, seq, scan_uuid FROM ledger
             WHERE captured_ms >> 13 = 1 AND key_prefix = 2
               AND captured_ms BETWEEN 3 AND 4 AND content_key = 'k' AND boot_id <> 'b'",
        );
        assert!(
            wall.contains("USING INDEX ledger_wall (<expr>=? AND key_prefix=?"),
            "{wall}"
        );
    }

    /// Each claimer lane reads its open scans in its partial index, in
    /// capture order (no sort of the whole backlog), skipping its round in
    /// flight inside the query.
    #[test]
    fn open_scans_are_read_in_index_order_past_the_round_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let skip: super::Skip = std::rc::Rc::new(vec![1i64.into()]);
        assert!(
            super::load_pending(&store.conn, &skip, 10)
                .unwrap()
                .is_empty()
        );
        assert!(
            super::load_unresolved(&store.conn, &skip, 10)
                .unwrap()
                .is_empty()
        );
        for (sql, index) in [
            (super::LOAD_PENDING, "scans_pending"),
            (super::LOAD_UNRESOLVED, "scans_unresolved"),
        ] {
            let mut q = store
                .conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap();
            let plan: Vec<String> = q
                .query_map(rusqlite::params![10, skip], |r| r.get::<_, String>(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let plan = plan.join("; ");
            assert!(plan.contains(&format!("USING INDEX {index}")), "{plan}");
            assert!(!plan.contains("TEMP B-TREE FOR ORDER BY"), "{plan}");
        }
    }

    /// The other lane's time span and its earlier scans of a label are read
    /// at the ends of, or in a window of, its partial index — never by
    /// walking the whole backlog (a million rows after an outage).
    #[test]
    fn the_other_lanes_scans_are_probed_not_walked() {
        use super::{Open, earlier_with_key_sql, open_span_sql};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .conn
            .execute_batch(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000)
                 INSERT INTO scans (scan_uuid, scanner, scan_type, quantity, captured_ms,
                     boot_id, boot_ns, clock_synced, raw, content_key, state)
                 SELECT 'u' || i, 's', 'dispense', 1, i * 10, 'b', i, 1, x'00', 'k' || (i % 7),
                     CASE WHEN i % 2 = 0 THEN 'pending' ELSE 'unresolved' END FROM n",
            )
            .unwrap();
        for state in [Open::Pending, Open::Unresolved] {
            let mut q = store.conn.prepare(open_span_sql(state)).unwrap();
            let span: (i64, i64) = q.query_row([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            assert!(span.0 <= 20 && span.1 >= 39_990, "{span:?}");
            let steps = q.get_status(rusqlite::StatementStatus::VmStep);
            assert!(steps < 200, "the span took {steps} steps");
            let mut q = store.conn.prepare(earlier_with_key_sql(state)).unwrap();
            let found = q
                .exists(rusqlite::params!["k1", 39_900, 40_000, 4000, "u4000"])
                .unwrap();
            assert!(found);
            let steps = q.get_status(rusqlite::StatementStatus::VmStep);
            assert!(steps < 400, "the lookup took {steps} steps");
        }
    }

    /// The backlog's untrusted-time scans are found by key in their own
    /// small index, never by walking the backlog.
    #[test]
    fn untrusted_time_backlog_scans_are_found_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(!super::unsynced_unresolved(&store.conn, None).unwrap());
        assert!(!super::unsynced_unresolved(&store.conn, Some("k")).unwrap());
        let plan: String = store
            .conn
            .query_row(
                "EXPLAIN QUERY PLAN SELECT 1 FROM scans WHERE state = 'unresolved'
                   AND clock_synced = 0 AND content_key = 'k' LIMIT 1",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(
            plan.contains("INDEX scans_unsynced (content_key=?)"),
            "{plan}"
        );
    }
}
