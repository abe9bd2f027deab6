//! Pruning by archives ([`prune`]): what may go (archived, anchored,
//! outside the dedup horizon, not owed to a ledger consumer, older than
//! `keep_days`), the checkpoint record that says so, and the removal in
//! short transactions.

use super::hold::Hold;
use super::{ArchiveError, at_ms, commits, hash_at, require_intact};
use crate::audit::stored::{RecordJson, record_json};
use crate::audit::trace::records_where;
use crate::audit::{AuditPruned, AuditRecord, AuditUnacknowledged, Chain, Emitted, first_live};
use crate::store::identity::Head;
use crate::store::packed::{Unpacked, packed};
use crate::store::{Store, StoreError};
use rusqlite::{OptionalExtension, params};

/// Records removed per write transaction of a prune.
const PRUNE_CHUNK: i64 = 2000;

/// What may be pruned, and when.
#[derive(Debug, Clone)]
pub struct PrunePolicy {
    /// Now (ms since the epoch).
    pub now_ms: i64,
    /// `[records] keep_days`.
    pub keep_days: u64,
    /// `[dedup] retention_hours`: ledger entries inside it stay (the gate
    /// looks for echoes among them).
    pub retention_hours: u64,
    /// `[records] consumer_hold_days`: an entry a ledger consumer has not
    /// acknowledged stays until it is this much older than `keep_days`.
    pub consumer_hold_days: u64,
    /// With `[redis]`: the head anchored in the facility store (`None`
    /// inside: nothing anchored, nothing pruned). Without: `None`.
    pub facility_anchor: Option<Option<Head>>,
}

/// What [`prune`] did.
#[derive(Debug, Clone)]
pub enum Pruned {
    /// Records `first_seq..=through_seq` and the ledger entries they
    /// committed were removed; the checkpoint record says so.
    Done {
        /// The first record removed.
        first_seq: i64,
        /// The last record removed.
        through_seq: i64,
        /// Ledger entries removed.
        ledger_entries: i64,
        /// Those of them a consumer had not acknowledged (past
        /// retention), per consumer.
        unacknowledged: Vec<AuditUnacknowledged>,
        /// The checkpoint record (to emit and anchor).
        checkpoint: Vec<Emitted>,
    },
    /// Nothing may be pruned; why.
    Nothing(String),
}

/// Remove from the database the records that are in a registered archive
/// ([`register`](super::register)), older than `keep_days` and, with a
/// facility store, anchored there, with the ledger entries they committed —
/// never an entry inside the dedup horizon, nor one a ledger consumer has
/// not acknowledged unless it is past `keep_days` + `consumer_hold_days`. First appends a checkpoint
/// record naming them (in its own transaction), then removes them in short
/// transactions: an interrupted prune leaves a chain that verifies, and the
/// next one finishes it. Only from an intact chain. The daemon must be
/// stopped (it holds the state directory's lock).
pub fn prune(store: &mut Store, policy: &PrunePolicy) -> Result<Pruned, ArchiveError> {
    let head = require_intact(store, "pruned")?;
    // A prune that was interrupted: finish it first.
    if let (Some(p), Some((first, _))) = (last_checkpoint(store)?, first_live(store)?)
        && first.max(p.first_seq) <= p.through_seq
    {
        remove(store, first.max(p.first_seq), p.through_seq)?;
    }
    let Some((first, _)) = first_live(store)? else {
        return Ok(Pruned::Nothing("the audit trail is empty".into()));
    };
    // Limit 1: archived, in consecutive registered archives from `first`.
    let (archived, used) = archived_through(store, first)?;
    if archived < first {
        return Ok(Pruned::Nothing(format!(
            "record {first}, the first in the database, is in no archive registered here. Fix: `scangate audit export --until DATE --out FILE`, then `scangate audit prune --archive FILE`"
        )));
    }
    let mut limit = Limit {
        seq: archived,
        why: format!("archived through record {archived}"),
    };
    // Limit 2: anchored in the facility store.
    limit.anchored(store, policy, &head)?;
    // Limit 3: ledger entries inside the dedup horizon stay, and so do
    // the records of their scans.
    limit.dedup_horizon(store, policy)?;
    // Limit 4: what a ledger consumer has not acknowledged, unless past
    // retention.
    let hold = Hold::read(
        store,
        policy.now_ms,
        policy.keep_days + policy.consumer_hold_days,
    )?;
    if let Some((record, why)) = hold.first_held(store)?
        && record <= limit.seq
    {
        limit.seq = record - 1;
        limit.why = why;
    }
    // Limit 5: age.
    let (through, through_hash, entries, last_entry) = limit.aged(store, policy, first)?;
    if through < first {
        return Ok(Pruned::Nothing(format!(
            "nothing to prune from record {first} on: {}",
            limit.why
        )));
    }
    let unacknowledged = hold.unacknowledged(store, last_entry)?;
    let record = checkpoint_record(
        policy,
        (first, through, through_hash),
        entries,
        used,
        unacknowledged.clone(),
    );
    let gateway = gateway_of_chain(store)?;
    let record = AuditRecord { gateway, ..record };
    let checkpoint = append_checkpoint(store, record)?;
    let ledger_entries = remove(store, first, through)?;
    Ok(Pruned::Done {
        first_seq: first,
        through_seq: through,
        ledger_entries,
        unacknowledged,
        checkpoint,
    })
}

/// How far the records from `first` on are archived: through the last
/// record of consecutive registered archives from `first` (`first - 1`:
/// not at all), and those archives (their content SHA-256). An archive
/// whose last record differs from the database's is refused.
fn archived_through(store: &Store, first: i64) -> Result<(i64, Vec<String>), ArchiveError> {
    let archives: Vec<(String, i64, i64, String)> = {
        let mut q = store
            .conn
            .prepare(
                "SELECT content_sha256, first_seq, last_seq, last_hash FROM audit_archives
                 ORDER BY first_seq, last_seq",
            )
            .map_err(|e| store.err_at(e))?;
        q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .map_err(|e| store.err_at(e))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| store.err_at(e))?
    };
    let mut archived = first - 1;
    let mut used = Vec::new();
    for (sha, a_first, a_last, a_hash) in &archives {
        if *a_first <= archived + 1 && *a_last > archived {
            if hash_at(store, *a_last)?.is_some_and(|h| h != *a_hash) {
                return Err(ArchiveError::Refused(format!(
                    "record {a_last} of the database is not the one archive {sha} holds: the chain changed since it was archived; nothing pruned. Run `scangate audit verify`"
                )));
            }
            archived = *a_last;
            used.push(sha.clone());
        }
    }
    Ok((archived, used))
}

/// The last record a prune may remove so far, and why not one more.
struct Limit {
    seq: i64,
    why: String,
}

impl Limit {
    /// With a facility store: no further than the head anchored there
    /// (which must be the database's record).
    fn anchored(
        &mut self,
        store: &Store,
        policy: &PrunePolicy,
        head: &Head,
    ) -> Result<(), ArchiveError> {
        if let Some(anchor) = &policy.facility_anchor {
            if let Some(h) = anchor
                && hash_at(store, h.seq)?.is_some_and(|db| db != h.hash)
            {
                return Err(ArchiveError::Refused(format!(
                    "record {} of the database is not the one the facility store anchored (hash {}): the chain was rewritten; nothing pruned. Run `scangate audit verify`",
                    h.seq, h.hash
                )));
            }
            let anchored = anchor.as_ref().map_or(0, |h| h.seq).min(head.seq);
            if anchored < self.seq {
                self.seq = anchored;
                self.why = format!("anchored in the facility store through record {anchored}");
            }
        }
        Ok(())
    }

    /// Not the record of a scan whose ledger entry is inside the dedup
    /// horizon, nor any after it.
    fn dedup_horizon(&mut self, store: &Store, policy: &PrunePolicy) -> Result<(), StoreError> {
        let horizon = policy.now_ms - policy.retention_hours as i64 * 3_600_000;
        for (scan, _, _) in
            crate::ledger::scans_since(&store.conn, horizon).map_err(|e| store.err_at(e))?
        {
            let seq: Option<i64> = store
                .conn
                .query_row(
                    "SELECT min(seq) FROM audit WHERE scan_uuid = ?1",
                    [packed(&scan)],
                    |r| r.get(0),
                )
                .map_err(|e| store.err_at(e))?;
            if let Some(seq) = seq.filter(|s| *s <= self.seq) {
                self.seq = seq - 1;
                self.why = format!(
                    "record {seq} committed a ledger entry inside the dedup horizon ([dedup] retention_hours = {})",
                    policy.retention_hours
                );
            }
        }
        Ok(())
    }

    /// The records from `first` up to the limit decided more than
    /// `keep_days` ago: through which record (`first - 1`: none), its
    /// hash, the ledger entries they committed, and the last of those
    /// entries' positions (0: none).
    fn aged(
        &mut self,
        store: &Store,
        policy: &PrunePolicy,
        first: i64,
    ) -> Result<(i64, String, i64, i64), ArchiveError> {
        let err = |e| store.err_at(e);
        let cutoff = policy.now_ms - policy.keep_days as i64 * 86_400_000;
        let (mut through, mut through_hash, mut entries) = (first - 1, String::new(), 0i64);
        let mut last_entry = 0;
        let mut q = store
            .conn
            .prepare("SELECT seq, record, hash FROM audit WHERE seq BETWEEN ?1 AND ?2 ORDER BY seq")
            .map_err(err)?;
        let mut rows = q.query([first, self.seq]).map_err(err)?;
        while let Some(r) = rows.next().map_err(err)? {
            let seq: i64 = r.get(0).map_err(err)?;
            let rec: AuditRecord = record_json(r.get_ref(1).map_err(err)?)
                .and_then(|json| serde_json::from_str(&json).map_err(|e| e.to_string()))
                .map_err(|e| {
                    ArchiveError::Refused(format!(
                        "audit record {seq} is unreadable ({e}); nothing pruned"
                    ))
                })?;
            if at_ms(&rec.at).is_none_or(|at| at >= cutoff) {
                self.why = format!(
                    "record {seq} was decided {} (less than [records] keep_days = {} days ago)",
                    rec.at, policy.keep_days
                );
                break;
            }
            if commits(&rec)
                && let Some(entry) =
                    crate::ledger::seq_of(&store.conn, &rec.scan_uuid).map_err(err)?
            {
                entries += 1;
                last_entry = last_entry.max(entry);
            }
            through = seq;
            through_hash = r.get::<_, Unpacked>(2).map_err(err)?.0;
        }
        Ok((through, through_hash, entries, last_entry))
    }
}

/// The checkpoint record of a prune of records `first..=through` (the
/// last one's hash `through_hash`) and the `entries` ledger entries they
/// committed (`unacknowledged` by a consumer among them), archived in
/// `archives`; its gateway is set by the caller.
fn checkpoint_record(
    policy: &PrunePolicy,
    (first, through, through_hash): (i64, i64, String),
    entries: i64,
    archives: Vec<String>,
    unacknowledged: Vec<AuditUnacknowledged>,
) -> AuditRecord {
    let owed: String = unacknowledged
        .iter()
        .map(|u| {
            format!(
                "; {} of them ({}..={}) consumer {} had not acknowledged, past [records] keep_days + consumer_hold_days ({} days)",
                u.entries, u.first_seq, u.through_seq, u.consumer, u.held_days
            )
        })
        .collect();
    let reason = format!(
        "checkpoint (scangate audit prune): records {first}..={through}, decided more than {} days ago and archived, and the {entries} ledger entries they committed were removed from this database; the chain continues from record {through}'s hash{owed}. Verify them with `scangate audit verify --archive FILE…`",
        policy.keep_days
    );
    AuditRecord {
        pruned: Some(AuditPruned {
            first_seq: first,
            through_seq: through,
            through_hash,
            ledger_entries: entries,
            archives,
            keep_days: policy.keep_days,
            unacknowledged: (!unacknowledged.is_empty()).then_some(unacknowledged),
        }),
        ..AuditRecord::system(policy.now_ms, "", uuid::Uuid::now_v7().to_string(), reason)
    }
}

/// Append the checkpoint record in a transaction of its own; returns it,
/// to emit and anchor.
fn append_checkpoint(store: &mut Store, record: AuditRecord) -> Result<Vec<Emitted>, StoreError> {
    let w = store.write()?;
    let mut chain = Chain::begin(&w).map_err(|e| w.err(e))?;
    chain.append(record).map_err(|e| w.err(e))?;
    let emitted = chain.finish().map_err(|e| w.err(e))?;
    w.commit()?;
    Ok(emitted)
}

/// The gateway named by the chain's last record.
fn gateway_of_chain(store: &Store) -> Result<String, StoreError> {
    let rec: Option<RecordJson> = store
        .conn
        .query_row(
            "SELECT record FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| store.err_at(e))?;
    Ok(rec
        .and_then(|r| serde_json::from_str::<AuditRecord>(&r.0).ok())
        .map(|r| r.gateway)
        .unwrap_or_default())
}

/// The newest checkpoint record's [`AuditPruned`], if any (checkpoint
/// records are stored as JSON: [`Chain::append`]).
fn last_checkpoint(store: &Store) -> Result<Option<AuditPruned>, StoreError> {
    let recs = records_where(
        store,
        "SELECT seq, record FROM audit WHERE typeof(record) = 'text'
           AND record LIKE '%\"pruned\":{%' ORDER BY seq DESC LIMIT 1",
        params![],
    )?;
    Ok(recs.into_iter().next().and_then(|r| r.pruned))
}

/// Remove records `from..=through` that are still here, with the ledger
/// entries they committed, [`PRUNE_CHUNK`] records per transaction; the
/// first record kept gets the removed one's hash as its `prev_hash` (it
/// was NULL, "the hash of the row before"), in the same transaction.
/// Returns the ledger entries removed.
fn remove(store: &mut Store, from: i64, through: i64) -> Result<i64, StoreError> {
    let mut entries = 0;
    let mut at = from;
    while at <= through {
        let end = (at + PRUNE_CHUNK - 1).min(through);
        let w = store.write()?;
        let scans: Vec<String> = {
            let mut q = w
                .prepare_cached("SELECT record FROM audit WHERE seq BETWEEN ?1 AND ?2")
                .map_err(|e| w.err(e))?;
            q.query_map([at, end], |r| r.get::<_, RecordJson>(0))
                .map_err(|e| w.err(e))?
                .filter_map(|r| r.ok())
                .filter_map(|json| serde_json::from_str::<AuditRecord>(&json.0).ok())
                .filter(commits)
                .map(|r| r.scan_uuid)
                .collect()
        };
        for scan in &scans {
            entries += i64::from(crate::ledger::prune_entry(&w, scan).map_err(|e| w.err(e))?);
        }
        let link: Option<rusqlite::types::Value> = w
            .query_row("SELECT hash FROM audit WHERE seq = ?1", [end], |r| r.get(0))
            .optional()
            .map_err(|e| w.err(e))?;
        w.execute("DELETE FROM audit WHERE seq BETWEEN ?1 AND ?2", [at, end])
            .map_err(|e| w.err(e))?;
        if let Some(hash) = link {
            w.execute(
                "UPDATE audit SET prev_hash = ?2 WHERE seq = ?1 AND prev_hash IS NULL",
                params![end + 1, hash],
            )
            .map_err(|e| w.err(e))?;
        }
        w.commit()?;
        at = end + 1;
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::types::Value;

    /// `n` records decided in 2020 (they decide no scan: enough for the chain).
    fn old_records(store: &mut Store, n: i64) {
        let w = store.write().unwrap();
        let mut chain = Chain::begin(&w).unwrap();
        for i in 0..n {
            chain
                .append(AuditRecord {
                    reason: Some("test".into()),
                    ..AuditRecord::decision(
                        // 2020-01-01T00:00:00Z, a second apart.
                        1_577_836_800_000 + i * 1000,
                        "gw",
                        crate::audit::ScanFacts {
                            scanner: "counter-1",
                            uuid: &uuid::Uuid::now_v7().to_string(),
                            captured_ms: 1_577_836_800_000,
                            clock_synced: true,
                            raw_len: 3,
                        },
                        crate::model::ScanState::Rejected,
                    )
                })
                .unwrap();
        }
        chain.finish().unwrap();
        w.commit().unwrap();
    }

    fn intact(store: &Store) -> bool {
        matches!(
            crate::audit::verify(store).unwrap(),
            crate::audit::Verification::Intact { .. }
        )
    }

    /// A prune interrupted after some of its records were removed leaves a
    /// chain that verifies (the checkpoint names the range), and the next
    /// prune finishes it. (Without a checkpoint a missing start is broken:
    /// `tests/audit_tamper.rs`.)
    #[test]
    fn an_interrupted_prune_verifies_and_the_next_one_finishes_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        old_records(&mut store, 10);
        let out = dir.path().join("a.archive");
        let until = chrono::Utc::now().timestamp_millis();
        super::super::export(&store, until, &out, "gw").unwrap();
        super::super::register(&mut store, &out).unwrap();
        // What records 6..=10 were, before the prune.
        type Row = (i64, Value, Value, Value, Value);
        let kept: Vec<Row> = {
            let mut q = store
                .conn
                .prepare("SELECT seq, scan_uuid, record, prev_hash, hash FROM audit WHERE seq > 5")
                .unwrap();
            q.query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect()
        };
        let hash_5: Value = store
            .conn
            .query_row("SELECT hash FROM audit WHERE seq = 5", [], |r| r.get(0))
            .unwrap();
        let policy = PrunePolicy {
            now_ms: until,
            keep_days: 730,
            retention_hours: 72,
            consumer_hold_days: 90,
            facility_anchor: None,
        };
        assert!(matches!(
            prune(&mut store, &policy).unwrap(),
            Pruned::Done {
                through_seq: 10,
                ..
            }
        ));
        assert!(intact(&store));
        // As if it had stopped after removing 1..=5 (and so linked record
        // 6 to record 5's hash): 6..=10 back.
        let put_back = |store: &mut Store| {
            let w = store.write().unwrap();
            for (seq, uuid, record, prev, hash) in &kept {
                w.execute(
                    "INSERT INTO audit (seq, scan_uuid, record, prev_hash, hash)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![seq, uuid, record, prev, hash],
                )
                .unwrap();
            }
            w.execute("UPDATE audit SET prev_hash = ?1 WHERE seq = 6", [&hash_5])
                .unwrap();
            w.commit().unwrap();
        };
        put_back(&mut store);
        assert_eq!(first_live(&store).unwrap().unwrap().0, 6);
        assert!(intact(&store), "a start inside the checkpoint's range");
        match prune(&mut store, &policy).unwrap() {
            Pruned::Nothing(_) => {}
            done => panic!("nothing more is archived: {done:?}"),
        }
        assert_eq!(first_live(&store).unwrap().unwrap().0, 11);
        assert!(intact(&store));
    }
}
