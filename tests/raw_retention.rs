//! Raw scan bytes are overwritten once a scan is decided and
//! `[outbox] keep_raw_hours` old: checked in the bytes of the real database
//! file, and through the daemon's sweeper thread.

mod common;

use common::{Daemon, open_db, read_at, test_gate, wait_until, write_config};
use scangate::gate::Verdict;
use scangate::store::Store;
use std::path::Path;

/// A label scanned by mistake: not a product, and the kind of bytes that
/// must not stay on the gateway.
const WRISTBAND: &str = "PATIENT DOE JANE MRN 0048213";

/// Whether `needle` occurs in the database file or its WAL.
fn on_disk(state_dir: &Path, needle: &str) -> bool {
    ["scangate.db", "scangate.db-wal"].iter().any(|f| {
        std::fs::read(state_dir.join(f))
            .unwrap_or_default()
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
    })
}

/// Raw byte lengths of the outbox rows, in outbox order.
fn raw_lengths(state_dir: &Path) -> Vec<i64> {
    numbers(state_dir, "SELECT length(raw) FROM scans ORDER BY seq")
}

/// One integer column of a query.
fn numbers(state_dir: &Path, sql: &str) -> Vec<i64> {
    open_db(state_dir)
        .prepare(sql)
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn decided_raw_bytes_are_overwritten_in_the_file_and_open_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut gate = test_gate(&store);
    let label = common::dscsa("RAWKEEP1");
    let decided = gate
        .submit(&mut store, &[read_at(&label, 0), read_at(WRISTBAND, 10)])
        .unwrap();
    assert_eq!(decided[0].verdict, Verdict::Committed);
    assert!(matches!(decided[1].verdict, Verdict::Rejected { .. }));
    // Admitted, not decided yet (as when a decision failed): it is open.
    let open = common::dscsa("RAWOPEN1");
    store.admit("test-pharmacy", &[read_at(&open, 20)]).unwrap();
    store.checkpoint().unwrap();
    assert!(on_disk(dir.path(), WRISTBAND) && on_disk(dir.path(), &label));

    // Nothing was decided before an hour ago: nothing is cleared.
    let hour_ago = chrono::Utc::now().timestamp_millis() - 3_600_000;
    assert_eq!(store.clear_raw(hour_ago).unwrap(), 0);

    // The two decided scans are cleared; the sweep stops at the open one.
    let later = chrono::Utc::now().timestamp_millis() + 1000;
    assert_eq!(store.clear_raw(later).unwrap(), 2);
    store.checkpoint().unwrap();
    assert_eq!(
        raw_lengths(dir.path()),
        [0, 0, open.len() as i64],
        "decided rows cleared, the open row kept"
    );
    assert!(
        !on_disk(dir.path(), WRISTBAND),
        "wristband bytes left in the file"
    );
    assert!(!on_disk(dir.path(), &label), "label bytes left in the file");
    assert!(on_disk(dir.path(), &open));

    // Once decided, the open scan goes too; the sweep resumes where it
    // stopped. The ledger and the audit trail are untouched.
    gate.decide_pending(&mut store).unwrap();
    let later = chrono::Utc::now().timestamp_millis() + 1000;
    assert_eq!(store.clear_raw(later).unwrap(), 1);
    store.checkpoint().unwrap();
    assert_eq!(raw_lengths(dir.path()), [0, 0, 0]);
    assert!(!on_disk(dir.path(), &open));
    assert_eq!(numbers(dir.path(), "SELECT count(*) FROM ledger"), [2]);
    assert_eq!(
        numbers(
            dir.path(),
            "SELECT record ->> '$.raw_len' FROM audit ORDER BY seq"
        ),
        [label.len(), WRISTBAND.len(), open.len()].map(|n| n as i64)
    );
    assert!(matches!(
        scangate::audit::verify(&store).unwrap(),
        scangate::audit::Verification::Intact { records: 3, .. }
    ));
}

#[test]
fn the_daemon_sweeps_scans_decided_longer_ago_than_keep_raw_hours() {
    let dir = common::tempdir("raw-sweep");
    let state = dir.path().join("state");
    {
        let mut store = Store::open(&state).unwrap();
        let mut gate = test_gate(&store);
        gate.submit(
            &mut store,
            &[read_at(WRISTBAND, 0), read_at(WRISTBAND, 5000)],
        )
        .unwrap();
        gate.submit(&mut store, &[read_at(&common::dscsa("RAWNEW1"), 10_000)])
            .unwrap();
    }
    // The first two were decided two hours ago; the third just now.
    rusqlite::Connection::open(state.join("scangate.db"))
        .unwrap()
        .execute(
            "UPDATE scans SET decided_ms = decided_ms - 7200000 WHERE seq <= 2",
            [],
        )
        .unwrap();
    let config = write_config(dir.path(), &state, 3000, &[]);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text += "\n[outbox]\nkeep_raw_hours = 1\n";
    std::fs::write(&config, text).unwrap();

    let mut daemon = Daemon::start(&config, &dir.path().join("daemon.log"));
    wait_until("the sweeper to clear the two old scans", || {
        raw_lengths(&state)[..2] == [0, 0]
    });
    assert!(
        raw_lengths(&state)[2] > 0,
        "a scan decided just now was cleared"
    );
    assert!(
        daemon
            .log()
            .contains("overwrote the raw bytes of 2 scans decided more than 1 h ago"),
        "{}",
        daemon.log_digest()
    );
    assert!(daemon.terminate().success(), "{}", daemon.log_digest());
}
