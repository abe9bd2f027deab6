//! One label's trail: every audit record about a content key
//! ([`trail_for_key`]), the records of one scan ([`records_for_scan`]), and
//! the human-readable trace `scangate audit trace` prints
//! ([`render_trace`]).

use super::AuditRecord;
use super::stored::record_json;
use crate::events::Event as _;
use crate::model::ScanState;
use crate::outbox;
use crate::store::packed::packed;
use crate::store::{Store, StoreError};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, params};
use std::fmt::Write;

/// What this gateway recorded about one content key ([`trail_for_key`]).
pub struct KeyTrail {
    /// Every audit record of every scan with that key, in chain order.
    pub records: Vec<AuditRecord>,
    /// Scans with that key this gateway read: its outbox rows, and the
    /// scans recorded whose rows were removed after the dedup horizon.
    pub transmissions: usize,
    /// Twins named by its echoes that are scans of this gateway (so their
    /// commit should be among `records`).
    pub local_twins: std::collections::HashSet<String>,
    /// Decided scans (UUID, state) whose decision has no readable record:
    /// the trail was altered (`audit verify` says where).
    pub unrecorded: Vec<(String, ScanState)>,
}

/// Every audit record about one content key: every scan this gateway read
/// with that key — committed, suppressed (whether its twin is this
/// gateway's commit or, with a facility store, another gateway's), or
/// waiting. The outbox is read whole once ([`outbox::scans_with_key`]:
/// 0.2–0.3 s for a million scans here, warm cache; more from a cold SD
/// card); everything else goes by index.
pub fn trail_for_key(store: &Store, content_key: &str) -> Result<KeyTrail, StoreError> {
    let err = |e| store.err_at(e);
    let scans = outbox::scans_with_key(&store.conn, content_key).map_err(err)?;
    // Once decided outbox rows were removed (after the dedup horizon), their
    // scans are found by their records, read whole: there is no index by
    // content key (its random inserts would cost every scan a page write, as
    // `ledger_key` did; a trace is rare).
    let mut records = Vec::new();
    if outbox::was_pruned(&store.conn).map_err(err)? {
        // Records that hold the key's bytes (packed) or digits (JSON),
        // then only those that name it as their content key.
        let bytes = crate::store::packed::packed(content_key);
        let bytes = bytes.bytes().unwrap_or(content_key.as_bytes());
        let holds = |v: ValueRef<'_>| match v {
            ValueRef::Blob(b) => b.windows(bytes.len()).any(|w| w == bytes),
            ValueRef::Text(t) => t
                .windows(content_key.len())
                .any(|w| w == content_key.as_bytes()),
            _ => false,
        };
        each_record(store, holds, |rec| {
            if rec.content_key.as_deref() == Some(content_key) {
                records.push(rec);
            }
        })?;
    }
    let mut seen: std::collections::HashSet<i64> = records.iter().map(|r| r.seq).collect();
    for (uuid, _) in &scans {
        for r in records_for_scan(store, uuid)? {
            if seen.insert(r.seq) {
                records.push(r);
            }
        }
    }
    records.sort_by_key(|r| r.seq);
    let mut local_twins = std::collections::HashSet::new();
    for twin in records.iter().filter_map(|r| r.twin_uuid.as_deref()) {
        if !local_twins.contains(twin)
            && (outbox::has_scan(&store.conn, twin).map_err(err)?
                || crate::ledger::has_entry(&store.conn, twin).map_err(err)?)
        {
            local_twins.insert(twin.to_string());
        }
    }
    // Transmissions: the outbox rows, and the scans recorded whose rows
    // were removed.
    let read: std::collections::HashSet<&str> = scans
        .iter()
        .map(|(uuid, _)| uuid.as_str())
        .chain(
            records
                .iter()
                .filter(|r| r.conflict.is_none())
                .map(|r| r.scan_uuid.as_str()),
        )
        .collect();
    let transmissions = read.len();
    let recorded: std::collections::HashSet<(&str, ScanState)> = records
        .iter()
        .map(|r| (r.scan_uuid.as_str(), r.decision))
        .collect();
    let unrecorded = scans
        .iter()
        .filter(|(uuid, state)| {
            matches!(state, ScanState::Committed | ScanState::Suppressed)
                && !recorded.contains(&(uuid.as_str(), *state))
        })
        .cloned()
        .collect();
    Ok(KeyTrail {
        transmissions,
        records,
        local_twins,
        unrecorded,
    })
}

/// The audit records of one scan (normally exactly one).
pub fn records_for_scan(store: &Store, scan_uuid: &str) -> Result<Vec<AuditRecord>, StoreError> {
    records_where(
        store,
        "SELECT seq, record FROM audit WHERE scan_uuid = ?1 ORDER BY seq",
        params![packed(scan_uuid)],
    )
}

/// Whether committed scan `scan_uuid` has a conflict record naming the
/// other gateway's scan `other` (conflict records are stored as JSON:
/// [`super::Chain::append`]).
pub fn has_conflict_record(
    tx: &Connection,
    scan_uuid: &str,
    other: &str,
) -> rusqlite::Result<bool> {
    tx.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM audit WHERE scan_uuid = ?1
           AND CASE WHEN typeof(record) = 'text'
               THEN record ->> '$.conflict.other_scan_uuid' END = ?2)",
    )?
    .query_row(params![packed(scan_uuid), other], |r| r.get(0))
}

/// Call `f` with every record in chain order that parses (one that does
/// not is reported, as [`records_where`] does), streamed.
pub(super) fn for_each_record(store: &Store, f: impl FnMut(AuditRecord)) -> Result<(), StoreError> {
    each_record(store, |_| true, f)
}

/// [`for_each_record`] over the records whose stored form passes `keep`.
fn each_record(
    store: &Store,
    keep: impl Fn(ValueRef<'_>) -> bool,
    mut f: impl FnMut(AuditRecord),
) -> Result<(), StoreError> {
    let err = |e| store.err_at(e);
    let mut q = store
        .conn
        .prepare("SELECT seq, record FROM audit ORDER BY seq")
        .map_err(err)?;
    let mut rows = q.query([]).map_err(err)?;
    while let Some(r) = rows.next().map_err(err)? {
        let stored = r.get_ref(1).map_err(err)?;
        if !keep(stored) {
            continue;
        }
        let seq: i64 = r.get(0).map_err(err)?;
        match parse(stored) {
            Ok(rec) => f(rec),
            Err(error) => crate::events::AuditRecordUnreadable { seq, error: &error }.emit(),
        }
    }
    Ok(())
}

/// A stored record, unpacked and parsed.
fn parse(stored: ValueRef<'_>) -> Result<AuditRecord, String> {
    let json = record_json(stored)?;
    serde_json::from_str(&json).map_err(|e| e.to_string())
}

/// Run a `SELECT seq, record …` and parse the records. One that does not
/// parse is reported (it has been altered) and left out.
pub(super) fn records_where(
    store: &Store,
    sql: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<Vec<AuditRecord>, StoreError> {
    let err = |e| store.err_at(e);
    // Cached: a trace runs it once per scan of the label.
    let mut q = store.conn.prepare_cached(sql).map_err(err)?;
    let mut rows = q.query(args).map_err(err)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(err)? {
        let seq: i64 = r.get(0).map_err(err)?;
        match parse(r.get_ref(1).map_err(err)?) {
            Ok(rec) => out.push(rec),
            Err(error) => crate::events::AuditRecordUnreadable { seq, error: &error }.emit(),
        }
    }
    Ok(out)
}

/// Resolve a trace argument (scan UUID or content key) to a content key.
pub fn key_of(store: &Store, id: &str) -> Result<Option<String>, StoreError> {
    if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(Some(id.to_ascii_lowercase()));
    }
    outbox::content_key_of(&store.conn, id).map_err(|e| store.err_at(e))
}

/// Human-readable trace of one content key: each committed scan and the
/// echoes suppressed against it, then the scans still waiting. The second
/// value is false if the trail is incomplete: an echo names one of this
/// gateway's scans whose commit has no readable record.
pub fn render_trace(content_key: &str, trail: &KeyTrail) -> (String, bool) {
    let records = &trail.records;
    let mut out = String::new();
    let _ = writeln!(out, "content key {content_key}");
    let (committed, named) = committed_and_named(records);
    write_counts(&mut out, trail, &committed, &named);
    write_committed(&mut out, records, &committed);
    let mut complete = trail.unrecorded.is_empty();
    write_unrecorded(&mut out, trail, &named);
    for twin in named {
        if trail.local_twins.contains(twin) {
            complete = false;
            let _ = writeln!(
                out,
                "  committed  {twin}  — a scan of this gateway whose commit has NO readable audit record: run `scangate audit verify`"
            );
        } else {
            let _ = writeln!(
                out,
                "  committed by another gateway of the facility  {twin}  (its ledger entry is in the facility stream)"
            );
        }
        write_echoes(&mut out, records, twin);
    }
    write_waiting(&mut out, records);
    (out, complete)
}

/// The reason a record gives, as a trace line's tail (empty without one).
fn note(r: &AuditRecord) -> String {
    r.reason
        .as_deref()
        .map_or_else(String::new, |why| format!("  ({why})"))
}

/// The commit records of the trail, and the twins named by its echoes
/// that are not committed in it.
fn committed_and_named(records: &[AuditRecord]) -> (Vec<&AuditRecord>, Vec<&str>) {
    // (A conflict record stands beside its scan's commit record.)
    let committed: Vec<&AuditRecord> = records
        .iter()
        .filter(|r| r.decision == ScanState::Committed && r.conflict.is_none())
        .collect();
    let here: std::collections::HashSet<&str> =
        committed.iter().map(|c| c.scan_uuid.as_str()).collect();
    // Twins named by echoes but not committed in this trail: another
    // gateway's commit (facility store), or this gateway's whose record
    // is missing.
    let mut named: Vec<&str> = Vec::new();
    for r in records
        .iter()
        .filter(|r| r.decision == ScanState::Suppressed)
    {
        if let Some(twin) = r.twin_uuid.as_deref()
            && !here.contains(twin)
            && !named.contains(&twin)
        {
            named.push(twin);
        }
    }
    (committed, named)
}

/// The trace's count line: transmissions, ledger entries, audit records.
fn write_counts(out: &mut String, trail: &KeyTrail, committed: &[&AuditRecord], named: &[&str]) {
    let records = &trail.records;
    let entries = committed.len()
        + named.len()
        + trail
            .unrecorded
            .iter()
            .filter(|(uuid, state)| {
                *state == ScanState::Committed && !named.contains(&uuid.as_str())
            })
            .count();
    let _ = writeln!(
        out,
        "{} transmission(s), {entries} ledger entr{} ({} audit record{})",
        trail.transmissions,
        if entries == 1 { "y" } else { "ies" },
        records.len(),
        if records.len() == 1 { "" } else { "s" }
    );
}

/// The echoes suppressed against `twin`, one line each.
fn write_echoes(out: &mut String, records: &[AuditRecord], twin: &str) {
    for e in records
        .iter()
        .filter(|r| r.decision == ScanState::Suppressed && r.twin_uuid.as_deref() == Some(twin))
    {
        // An ambiguous echo says so first: it may be another item.
        let kind = match &e.ambiguous {
            Some(a) => format!(
                "AMBIGUOUS echo (no serial: maybe another identical item; {} window {} ms)",
                a.policy, a.window_ms
            ),
            None => "echo".to_string(),
        };
        let _ = writeln!(
            out,
            "    {kind} suppressed  {}  captured {}  audit #{}{}",
            e.scan_uuid,
            e.captured_at,
            e.seq,
            note(e)
        );
    }
}

/// Each committed scan, with its conflicts and the echoes suppressed
/// against it.
fn write_committed(out: &mut String, records: &[AuditRecord], committed: &[&AuditRecord]) {
    for c in committed {
        let _ = writeln!(
            out,
            "  committed  {}  captured {}  scanner {}  audit #{}{}",
            c.scan_uuid,
            c.captured_at,
            c.scanner,
            c.seq,
            note(c)
        );
        for x in records
            .iter()
            .filter(|r| r.scan_uuid == c.scan_uuid && r.conflict.is_some())
        {
            let other = x.conflict.as_ref().expect("filtered");
            let by = other
                .other_gateway
                .as_deref()
                .map_or_else(|| "another gateway".to_string(), |g| format!("gateway {g}"));
            let _ = writeln!(
                out,
                "    CONFLICT  {by} committed {} as a pick of this label too, while the facility store had lost data: one pick may be in two ledgers (the facility stream keeps one entry); check which is right  audit #{}",
                other.other_scan_uuid, x.seq
            );
        }
        write_echoes(out, records, &c.scan_uuid);
    }
}

/// The decided scans with no readable record (a commit named by echoes is
/// said with them instead).
fn write_unrecorded(out: &mut String, trail: &KeyTrail, named: &[&str]) {
    for (uuid, state) in &trail.unrecorded {
        if *state == ScanState::Committed && named.contains(&uuid.as_str()) {
            continue; // said below, with the echoes that name it
        }
        let _ = writeln!(
            out,
            "  {state}  {uuid}  — this decision has NO readable audit record: run `scangate audit verify`"
        );
    }
}

/// Scans still waiting: their records are all `unresolved` (a scan
/// decided after an outage also has one, shown by the count above).
fn write_waiting(out: &mut String, records: &[AuditRecord]) {
    let decided: std::collections::HashSet<&str> = records
        .iter()
        .filter(|r| r.decision != ScanState::Unresolved)
        .map(|r| r.scan_uuid.as_str())
        .collect();
    let mut waiting: Vec<&AuditRecord> = Vec::new();
    for r in records {
        if !decided.contains(r.scan_uuid.as_str())
            && !waiting.iter().any(|w| w.scan_uuid == r.scan_uuid)
        {
            waiting.push(r);
        }
    }
    for r in waiting {
        let _ = writeln!(
            out,
            "  {}  {}  captured {}  audit #{}{}",
            r.decision,
            r.scan_uuid,
            r.captured_at,
            r.seq,
            note(r)
        );
    }
}
