//! The ledger is under the chain. Each commit record
//! holds the hash of its ledger entry as `ledger export` prints it, and
//! `audit verify` checks every entry against it: every byte change in the
//! file that alters the export is caught (exit 1, naming the entry).
//!
//! The database is made by the real pipeline through the library, on a
//! real SQLite file; the tampered copies are checked by the library and,
//! for the named case, by the real binary.

use crate::util::*;
use rusqlite::Connection;
use scangate::audit::{LedgerCheck, Verification};
use scangate::store::Store;
use std::fs;
use std::path::{Path, PathBuf};

const WINDOW_MS: i64 = 3000;
const PICKS: i64 = 6;

/// A database with `PICKS` committed picks, serials R0000151…, and an
/// echo; the WAL folded into the file. Returns the file.
fn build(state: &Path) -> PathBuf {
    let mut store = Store::open(state).expect("creating the database");
    let mut gate = test_gate(&store);
    let counter = dispense("counter-1");
    let t0 = chrono::Utc::now().timestamp_millis() - 3_600_000;
    let mut scans = Vec::new();
    for i in 0..PICKS {
        let time = capture_time(t0 + i * 10_000, "ledger-boot", 1_000_000 + i * 10_000, true);
        scans.push(scan(&counter, dscsa(&format!("R{:07}", 151 + i)), time));
    }
    let echo = capture_time(t0 + 40, "ledger-boot", 1_000_040, true);
    scans.push(scan(&counter, dscsa("R0000151"), echo));
    scangate::daemon::embedded::submit(&mut store, &mut gate, &scans).expect("submit");
    store.checkpoint().unwrap();
    drop(store);
    state.join("scangate.db")
}

/// Byte range of the ledger table's cells in the file (one leaf page).
fn ledger_cells(db: &Path) -> std::ops::Range<usize> {
    let c = Connection::open(db).unwrap();
    let page_size: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    let root: i64 = c
        .query_row(
            "SELECT rootpage FROM sqlite_master WHERE name = 'ledger'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    drop(c);
    let bytes = fs::read(db).unwrap();
    let (root, page_size) = (root as usize, page_size as usize);
    let page = (root - 1) * page_size;
    assert_eq!(bytes[page], 0x0d, "the fixture's ledger is one leaf page");
    let content = u16::from_be_bytes([bytes[page + 5], bytes[page + 6]]) as usize;
    page + content..page + page_size
}

fn export(state: &Path) -> Option<Vec<String>> {
    let store = Store::open_read_only(state).ok()?;
    let mut lines = Vec::new();
    scangate::ledger::for_each(&store, None, |e| {
        lines.push(serde_json::to_string(&e).unwrap());
        Ok(())
    })
    .ok()?;
    Some(lines)
}

/// Whether `audit verify`'s checks find the copy broken (chain or ledger).
fn caught(state: &Path) -> bool {
    let Ok(store) = Store::open_read_only(state) else {
        return true;
    };
    match scangate::audit::verify(&store) {
        Ok(Verification::Intact { .. }) => {}
        _ => return true,
    }
    !matches!(
        scangate::audit::verify_ledger(&store),
        Ok(LedgerCheck::Intact { .. })
    )
}

#[test]
fn every_byte_change_that_alters_the_export_is_caught() {
    let dir = tempdir("scangate-ledger-flip-");
    let db = build(&dir.path().join("fixture"));
    let original = fs::read(&db).unwrap();
    let state = dir.path().join("copy");
    fs::create_dir(&state).unwrap();
    let put = |bytes: &[u8]| {
        for f in ["scangate.db-wal", "scangate.db-shm"] {
            let _ = fs::remove_file(state.join(f));
        }
        fs::write(state.join("scangate.db"), bytes).unwrap();
    };
    put(&original);
    let clean = export(&state).expect("the fixture exports");
    assert_eq!(clean.len(), PICKS as usize);
    assert!(!caught(&state), "the untouched copy verifies");

    let (mut altered, mut refused, mut unchanged) = (0, 0, 0);
    let mut missed = Vec::new();
    for at in ledger_cells(&db) {
        for flip in [0x01u8, 0x80] {
            let mut bytes = original.clone();
            bytes[at] ^= flip;
            put(&bytes);
            match export(&state) {
                None => refused += 1,
                Some(lines) if lines == clean => unchanged += 1,
                Some(_) => {
                    altered += 1;
                    if !caught(&state) {
                        missed.push(format!("byte {at} ^ {flip:#04x}"));
                    }
                }
            }
        }
    }
    eprintln!(
        "{altered} changes altered the export, {refused} made it fail, {unchanged} did not alter it"
    );
    assert!(
        altered > 500,
        "the flips reach the entries' values: {altered}"
    );
    assert!(
        missed.is_empty(),
        "{} of {altered} changes that alter `ledger export` pass verify: {missed:?}",
        missed.len()
    );
}

#[test]
fn a_serial_changed_in_the_file_is_named_by_audit_verify() {
    let dir = tempdir("scangate-ledger-serial-");
    let state = dir.path().join("state");
    let db = build(&state);
    let config = write_config(dir.path(), &state, WINDOW_MS as u64, &[]);
    // R0000151 → R0000158 in the ledger's page only (the outbox keeps its own).
    let mut bytes = fs::read(&db).unwrap();
    let cells = ledger_cells(&db);
    let at = bytes[cells.clone()]
        .windows(8)
        .position(|w| w == b"R0000151")
        .expect("the serial is in the ledger page")
        + cells.start;
    bytes[at + 7] = b'8';
    fs::write(&db, &bytes).unwrap();

    let serials: Vec<String> = ledger(&config)
        .iter()
        .map(|e| e["serial"].as_str().unwrap().to_string())
        .collect();
    assert!(!serials.contains(&"R0000151".to_string()), "{serials:?}");
    assert_eq!(serials.iter().filter(|s| *s == "R0000158").count(), 1);

    let out: Outcome = cli_cfg(&config, &["audit", "verify"]).into();
    assert_eq!(out.code, Some(1), "verify must fail: {out}");
    assert!(
        out.stdout
            .contains("ledger BROKEN at entry 1: ledger entry 1 (scan "),
        "verify names the entry: {out}"
    );
}
