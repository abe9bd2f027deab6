//! Invariant 8: editing or deleting ANY audit row makes `scangate audit
//! verify` exit 1 and name that row; the untouched database verifies.
//!
//! The database is produced by the real pipeline (store → gate → ledger +
//! audit) through the library, on a real SQLite file; every tampered copy is
//! a fresh file checked by the real binary. Records are stored packed
//! (hashes and UUIDs as bytes, the record's JSON packed without loss:
//! `scangate::audit::stored`); a forger may write the packed form or JSON
//! text, and either is caught.

use crate::util::*;
use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, params};
use scangate::audit::stored::{pack, record_json};
use scangate::capture::Profile;
use scangate::config::ScanType;
use scangate::store::Store;
use scangate::store::packed::{Unpacked, packed, unpack};
use std::fs;
use std::path::{Path, PathBuf};

const WINDOW_MS: i64 = 3000;

/// Build a database with a few dozen decisions of every kind; returns the
/// number of audit records.
fn build_database(state: &Path) -> i64 {
    let mut store = Store::open(state).expect("creating the database");
    let mut gate = test_gate(&store);
    let counter = dispense("counter-1");
    let receiving = Profile {
        scanner: "receiving".into(),
        scan_type: ScanType::Receive,
        quantity: 12,
        owner: None,
        unserialised: Default::default(),
    };
    let t0 = chrono::Utc::now().timestamp_millis() - 3_600_000;
    let mut scans = Vec::new();
    let mut at = |profile: &Profile, bytes: Vec<u8>, offset_ms: i64| {
        let time = capture_time(
            t0 + offset_ms,
            "audit-tamper-boot",
            offset_ms + 1_000_000,
            true,
        );
        scans.push(scan(profile, bytes, time));
    };
    for i in 0..16i64 {
        let label = dscsa(&format!("SN{i:04}")).into_bytes();
        let base = i * 10_000;
        at(&counter, label.clone(), base); // committed
        if i % 2 == 0 {
            at(&counter, label.clone(), base + 40); // double-fire: suppressed
        }
        if i % 3 == 0 {
            at(&counter, label.clone(), base + 2000); // re-scan: suppressed
        }
        if i % 4 == 0 {
            at(&receiving, label, base + 100); // other scanner: committed
        }
    }
    at(&counter, UPC_NDC.as_bytes().to_vec(), 500);
    at(&counter, UPC_NDC.as_bytes().to_vec(), 500 + 5000); // re-dispense: committed
    at(&counter, b"]C1NOT-A-GS1-STRING".to_vec(), 700); // rejected
    at(&receiving, b"\xff\xfe\x00\x01noise".to_vec(), 900); // rejected
    let decisions =
        scangate::daemon::embedded::submit(&mut store, &mut gate, &scans).expect("submit");
    let states: Vec<&str> = decisions
        .iter()
        .map(|d| d.verdict.state().as_str())
        .collect();
    for s in ["committed", "suppressed", "rejected"] {
        assert!(
            states.contains(&s),
            "the fixture must hold {s} decisions: {states:?}"
        );
    }
    assert!(!states.contains(&"pending"), "all decided: {states:?}");
    scans.len() as i64
}

struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
    records: i64,
}

fn fixture() -> Fixture {
    let dir = tempdir("scangate-audit-");
    let state = dir.path().join("state");
    let records = build_database(&state);
    let db = state.join("scangate.db");
    // Fold the WAL into the main file so a plain copy is the whole database.
    let c = Connection::open(&db).unwrap();
    c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let n: i64 = c
        .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, records, "one audit record per decision");
    let packed: i64 = c
        .query_row(
            "SELECT count(*) FROM audit WHERE typeof(record) = 'blob' AND prev_hash IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(packed, records, "every decision record is stored packed");
    drop(c);
    Fixture {
        _dir: dir,
        db,
        records,
    }
}

/// A fresh copy of the fixture database with its own config.
struct Copy {
    _dir: tempfile::TempDir,
    db: PathBuf,
    config: PathBuf,
}

fn copy_of(f: &Fixture) -> Copy {
    let dir = tempdir("scangate-audit-copy-");
    let state = dir.path().join("state");
    fs::create_dir(&state).unwrap();
    let db = state.join("scangate.db");
    fs::copy(&f.db, &db).unwrap();
    let config = write_config(dir.path(), &state, WINDOW_MS as u64, &[]);
    Copy {
        _dir: dir,
        db,
        config,
    }
}

fn tamper(copy: &Copy, sql: &str, args: impl rusqlite::Params) {
    let c = Connection::open(&copy.db).unwrap();
    let changed = c.execute(sql, args).unwrap();
    assert_eq!(
        changed, 1,
        "the tampering statement must hit one row: {sql}"
    );
}

fn verify(copy: &Copy) -> Outcome {
    cli_cfg(&copy.config, &["audit", "verify"]).into()
}

fn assert_broken_at(out: &Outcome, seq: i64, what: &str) {
    assert_eq!(out.code, Some(1), "{what}: verify must fail\n{out}");
    let want = format!("audit chain BROKEN at record {seq}:");
    assert!(
        out.stdout.contains(&want) || out.stderr.contains(&want),
        "{what}: verify must name record {seq} (expected {want:?})\n{out}"
    );
}

/// Record `seq` as stored: its JSON, whether it is packed, the hash it
/// links to (the column, else the record before's hash, else 64 zeros),
/// its hash.
fn row(db: &Path, seq: i64) -> (String, bool, String, String) {
    let c = Connection::open(db).unwrap();
    c.query_row(
        "SELECT record, coalesce(prev_hash, (SELECT p.hash FROM audit p WHERE p.seq = a.seq - 1),
             zeroblob(32)), hash FROM audit a WHERE seq = ?1",
        [seq],
        |r| {
            let stored = r.get_ref(0)?;
            Ok((
                record_json(stored).unwrap(),
                matches!(stored, ValueRef::Blob(_)),
                unpack(r.get_ref(1)?)?,
                unpack(r.get_ref(2)?)?,
            ))
        },
    )
    .unwrap()
}

/// `json` in the form a record is stored in: packed if `packed_form`.
fn stored(json: &str, packed_form: bool) -> Value {
    let mut out = Vec::new();
    if packed_form {
        assert!(pack(json, &mut out), "the forger packs {json}");
        Value::Blob(out)
    } else {
        Value::Text(json.to_string())
    }
}

/// Change exactly one character: the last digit of `"raw_len":N`, so the
/// record stays well-formed JSON that a forger might hope passes.
fn edit_one_char(record: &str) -> String {
    let start = record.find("\"raw_len\":").expect("record has raw_len") + "\"raw_len\":".len();
    let digits = record[start..]
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(record.len() - start);
    let pos = start + digits - 1;
    let old = record.as_bytes()[pos];
    let new = if old == b'9' { b'8' } else { old + 1 };
    let mut bytes = record.as_bytes().to_vec();
    bytes[pos] = new;
    String::from_utf8(bytes).unwrap()
}

/// Flip one hex digit of a hash.
fn flip_hex(h: &str) -> String {
    let mut b = h.as_bytes().to_vec();
    b[10] = if b[10] == b'0' { b'1' } else { b'0' };
    String::from_utf8(b).unwrap()
}

#[test]
fn untouched_copy_verifies() {
    let f = fixture();
    let copy = copy_of(&f);
    let out = verify(&copy);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.stdout
            .contains(&format!("audit chain intact: {} records", f.records)),
        "{out}"
    );
}

#[test]
fn editing_one_character_of_any_record_is_named() {
    let f = fixture();
    for seq in 1..=f.records {
        // As stored (packed or JSON), and as JSON text in its place.
        for packed_form in [true, false] {
            let copy = copy_of(&f);
            let (record, was_packed, _, _) = row(&copy.db, seq);
            let edited = edit_one_char(&record);
            assert_ne!(edited, record);
            assert_eq!(edited.len(), record.len());
            tamper(
                &copy,
                "UPDATE audit SET record = ?2 WHERE seq = ?1",
                params![seq, stored(&edited, packed_form && was_packed)],
            );
            assert_broken_at(&verify(&copy), seq, &format!("record {seq} edited"));
        }
    }
}

#[test]
fn editing_a_middle_character_of_any_record_is_named() {
    // A blunter edit that may break the JSON: still named by its seq.
    let f = fixture();
    for seq in 1..=f.records {
        let copy = copy_of(&f);
        // The stored bytes themselves: a packed record's middle byte, or
        // a JSON record's middle character.
        let stored: Value = Connection::open(&copy.db)
            .unwrap()
            .query_row("SELECT record FROM audit WHERE seq = ?1", [seq], |r| {
                r.get(0)
            })
            .unwrap();
        let edited = match stored {
            Value::Blob(mut b) => {
                let mid = b.len() / 2;
                b[mid] ^= 0x01;
                Value::Blob(b)
            }
            Value::Text(record) => {
                let mut chars: Vec<char> = record.chars().collect();
                let mid = chars.len() / 2;
                chars[mid] = if chars[mid] == 'x' { 'y' } else { 'x' };
                Value::Text(chars.into_iter().collect())
            }
            other => panic!("record {seq} stored as {other:?}"),
        };
        tamper(
            &copy,
            "UPDATE audit SET record = ?2 WHERE seq = ?1",
            params![seq, edited],
        );
        assert_broken_at(&verify(&copy), seq, &format!("record {seq} mid-edited"));
    }
}

#[test]
fn deleting_any_record_is_named_as_missing() {
    let f = fixture();
    for seq in 1..=f.records {
        let copy = copy_of(&f);
        tamper(&copy, "DELETE FROM audit WHERE seq = ?1", params![seq]);
        let out = verify(&copy);
        assert_broken_at(&out, seq, &format!("record {seq} deleted"));
        assert!(
            out.stdout.contains("missing"),
            "record {seq} deleted: verify must say it is missing\n{out}"
        );
    }
}

#[test]
fn tampering_with_any_hash_is_named() {
    let f = fixture();
    for seq in 1..=f.records {
        let copy = copy_of(&f);
        let (_, _, _, hash) = row(&copy.db, seq);
        tamper(
            &copy,
            "UPDATE audit SET hash = ?2 WHERE seq = ?1",
            params![seq, packed(&flip_hex(&hash))],
        );
        assert_broken_at(
            &verify(&copy),
            seq,
            &format!("hash of record {seq} changed"),
        );
    }
}

#[test]
fn tampering_with_any_prev_hash_is_named() {
    let f = fixture();
    for seq in 1..=f.records {
        let copy = copy_of(&f);
        // Stored only where the row before is gone: a forger writes one.
        let (_, _, prev, _) = row(&copy.db, seq);
        tamper(
            &copy,
            "UPDATE audit SET prev_hash = ?2 WHERE seq = ?1",
            params![seq, packed(&flip_hex(&prev))],
        );
        assert_broken_at(
            &verify(&copy),
            seq,
            &format!("prev_hash of record {seq} changed"),
        );
    }
}

#[test]
fn changing_the_indexed_columns_of_any_record_is_named() {
    // scan_uuid is an indexed copy of a hashed field; `audit trace` reads
    // it, so it must be covered by verification too.
    let f = fixture();
    for seq in 1..=f.records {
        let copy = copy_of(&f);
        tamper(
            &copy,
            "UPDATE audit SET scan_uuid = ?2 WHERE seq = ?1",
            params![seq, packed("00000000-0000-7000-8000-000000000000")],
        );
        assert_broken_at(
            &verify(&copy),
            seq,
            &format!("scan_uuid of record {seq} changed"),
        );
    }
}

#[test]
fn a_forged_record_appended_to_the_chain_is_named() {
    // A forger who knows the (keyless) hashing appends a well-chained record
    // after the head: the meta head no longer matches, and the first record
    // that does not belong is the appended one.
    use sha2::{Digest, Sha256};
    let f = fixture();
    let copy = copy_of(&f);
    let (record, _, _, hash) = row(&copy.db, f.records);
    let mut forged: serde_json::Value = serde_json::from_str(&record).unwrap();
    let seq = f.records + 1;
    forged["seq"] = seq.into();
    forged["scan_uuid"] = "01a20000-0000-7000-8000-000000000001".into();
    let forged = serde_json::to_string(&forged).unwrap();
    let mut h = Sha256::new();
    h.update(hash.as_bytes());
    h.update(b"\n");
    h.update(forged.as_bytes());
    let forged_hash = hex::encode(h.finalize());
    tamper(
        &copy,
        "INSERT INTO audit (seq, scan_uuid, record, hash) VALUES (?1, ?2, ?3, ?4)",
        params![
            seq,
            packed("01a20000-0000-7000-8000-000000000001"),
            stored(&forged, true),
            packed(&forged_hash)
        ],
    );
    assert_broken_at(&verify(&copy), seq, "a record appended after the head");
}

#[test]
fn a_missing_chain_head_is_noticed() {
    let f = fixture();
    let copy = copy_of(&f);
    tamper(
        &copy,
        "DELETE FROM meta WHERE key = 'audit_head'",
        params![],
    );
    let out = verify(&copy);
    assert_eq!(out.code, Some(1), "{out}");
}

#[test]
fn a_trace_whose_commit_record_was_deleted_says_so_and_fails() {
    let f = fixture();
    let copy = copy_of(&f);
    // SN0000 was committed, then echoed twice (a double-fire, a re-scan).
    let (commit, echo): (String, String) = Connection::open(&copy.db)
        .unwrap()
        .query_row(
            "SELECT twin_uuid, scan_uuid FROM scans WHERE state = 'suppressed' ORDER BY seq LIMIT 1",
            [],
            |r| Ok((r.get::<_, Unpacked>(0)?.0, r.get::<_, Unpacked>(1)?.0)),
        )
        .unwrap();
    let trace =
        |copy: &Copy| -> Outcome { cli_cfg(&copy.config, &["audit", "trace", &echo]).into() };
    let intact = trace(&copy);
    assert_eq!(intact.code, Some(0), "{intact}");
    assert!(
        intact
            .stdout
            .contains("3 transmission(s), 1 ledger entry (3 audit records)")
            && intact.stdout.contains(&format!("  committed  {commit}")),
        "{intact}"
    );
    tamper(
        &copy,
        "DELETE FROM audit WHERE scan_uuid = ?1",
        [packed(&commit)],
    );
    let out = trace(&copy);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stdout.contains("3 transmission(s), 1 ledger entry (2 audit records)")
            && out.stdout.contains(&format!(
                "  committed  {commit}  — a scan of this gateway whose commit has NO readable audit record"
            ))
            && !out.stdout.contains("another gateway"),
        "{out}"
    );
}

#[test]
fn a_trace_of_a_label_never_read_finds_nothing() {
    let f = fixture();
    let copy = copy_of(&f);
    let out: Outcome = cli_cfg(&copy.config, &["audit", "trace", &"ab".repeat(32)]).into();
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stdout.contains("no decision about"), "{out}");
}

#[test]
fn a_trace_missing_any_decisions_record_names_it_and_fails() {
    let f = fixture();
    // The UPC label was dispensed twice, 5 s apart: two commits, no echo.
    let commits: Vec<String> = {
        let c = Connection::open(&f.db).unwrap();
        let mut q = c
            .prepare(
                "SELECT scan_uuid FROM scans WHERE state = 'committed' AND content_key =
                   (SELECT content_key FROM scans WHERE raw = ?1 LIMIT 1) ORDER BY seq",
            )
            .unwrap();
        q.query_map([UPC_NDC.as_bytes()], |r| {
            r.get::<_, Unpacked>(0).map(|u| u.0)
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    assert_eq!(commits.len(), 2);
    let copy = copy_of(&f);
    tamper(
        &copy,
        "DELETE FROM audit WHERE scan_uuid = ?1",
        [packed(&commits[1])],
    );
    let out: Outcome = cli_cfg(&copy.config, &["audit", "trace", &commits[0]]).into();
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stdout
            .contains("2 transmission(s), 2 ledger entries (1 audit record)")
            && out.stdout.contains(&format!(
                "  committed  {}  — this decision has NO readable audit record",
                commits[1]
            )),
        "{out}"
    );
    // An echo's record, likewise.
    let copy = copy_of(&f);
    let echo: String = Connection::open(&copy.db)
        .unwrap()
        .query_row(
            "SELECT scan_uuid FROM scans WHERE state = 'suppressed' ORDER BY seq LIMIT 1",
            [],
            |r| r.get::<_, Unpacked>(0).map(|u| u.0),
        )
        .unwrap();
    tamper(
        &copy,
        "DELETE FROM audit WHERE scan_uuid = ?1",
        [packed(&echo)],
    );
    let out: Outcome = cli_cfg(&copy.config, &["audit", "trace", &echo]).into();
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stdout.contains(&format!(
            "  suppressed  {echo}  — this decision has NO readable audit record"
        )),
        "{out}"
    );
}
