//! Raw scan bytes are overwritten once a scan is decided and
//! `[outbox] keep_raw_hours` old: checked in the bytes of the real database
//! file, and through the daemon's sweeper thread.

use crate::util::{
    Gateway, ScannerSpec, audit_records, dscsa, open_db, read_at, tempdir, test_gate, wait_until,
    wait_until_for,
};
use scangate::model::Verdict;
use scangate::store::Store;
use std::path::Path;

/// A label scanned by mistake: not a product, and the kind of bytes that
/// must not stay on the gateway.
const WRISTBAND: &str = "PATIENT DOE JANE MRN 0048213";
/// Repeated to make a frame longer than a database page.
const OVERFLOW_MARK: &str = "PATIENT ROE RICHARD MRN 0077120";

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

/// Truncate the WAL as the sweeper does, trying again while the store's own
/// checkpointer thread holds the WAL (a zero-timeout TRUNCATE then answers
/// busy, and the sweeper too tries again later).
fn truncate_wal(store: &Store) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !store.truncate_wal().unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "the WAL was not truncated within 10 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn decided_raw_bytes_are_overwritten_in_the_file_and_open_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut gate = test_gate(&store);
    // More rows than one sweep chunk, a wristband, and a frame longer than
    // a database page (stored in overflow pages).
    let mut reads: Vec<_> = (0..1200)
        .map(|i| read_at(&dscsa(&format!("BULK{i:04}")), i))
        .collect();
    let long = format!("{OVERFLOW_MARK} ").repeat(250);
    reads.push(read_at(WRISTBAND, 1300));
    reads.push(read_at(&long, 1310));
    let decided = scangate::daemon::embedded::submit(&mut store, &mut gate, &reads).unwrap();
    assert_eq!(decided[0].verdict, Verdict::Committed);
    assert!(matches!(decided[1200].verdict, Verdict::Rejected { .. }));
    assert!(matches!(decided[1201].verdict, Verdict::Rejected { .. }));
    // Admitted, not decided yet (as when a decision failed): it is open.
    let open = dscsa("RAWOPEN1");
    store
        .admit("test-pharmacy", &[read_at(&open, 1400)])
        .unwrap();
    let bulk = dscsa("BULK0600");
    for needle in [WRISTBAND, OVERFLOW_MARK, &bulk, &open] {
        assert!(on_disk(dir.path(), needle), "{needle} is stored");
    }

    // Nothing was decided before an hour ago: nothing is cleared.
    let hour_ago = chrono::Utc::now().timestamp_millis() - 3_600_000;
    let sweep = store.clear_raw(hour_ago, &mut || true).unwrap();
    assert_eq!((sweep.cleared, sweep.held_by), (0, None));

    // Every decided scan is cleared; the sweep stops at the open one. Then
    // the WAL is truncated (its old page images hold the bytes), as the
    // daemon's sweeper does after a sweep.
    let later = chrono::Utc::now().timestamp_millis() + 1000;
    let sweep = store.clear_raw(later, &mut || true).unwrap();
    assert_eq!(sweep.cleared, 1202);
    truncate_wal(&store);
    let held = sweep.held_by.expect("held by the open row");
    assert_eq!((held.seq, held.state.as_str()), (1203, "pending"));
    let lengths = raw_lengths(dir.path());
    assert!(
        lengths[..1202].iter().all(|&n| n == 0),
        "decided rows cleared"
    );
    assert_eq!(lengths[1202], open.len() as i64, "the open row kept");
    for needle in [WRISTBAND, OVERFLOW_MARK, &bulk] {
        assert!(!on_disk(dir.path(), needle), "{needle} left in the files");
    }
    assert!(on_disk(dir.path(), &open));

    // Once decided (its row rewritten by the decision), the open scan goes
    // too; the sweep resumes where it stopped. Ledger and audit stay.
    scangate::daemon::embedded::decide_pending(&mut store, &mut gate).unwrap();
    let later = chrono::Utc::now().timestamp_millis() + 1000;
    let sweep = store.clear_raw(later, &mut || true).unwrap();
    assert_eq!((sweep.cleared, sweep.held_by), (1, None));
    truncate_wal(&store);
    assert!(raw_lengths(dir.path()).iter().all(|&n| n == 0));
    assert!(
        !on_disk(dir.path(), &open),
        "the decided row's old copy stayed"
    );
    assert_eq!(numbers(dir.path(), "SELECT count(*) FROM ledger"), [1201]);
    let raw_lens: Vec<i64> = audit_records(&open_db(dir.path()))[1200..]
        .iter()
        .map(|r| {
            serde_json::from_str::<serde_json::Value>(r).unwrap()["raw_len"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(
        raw_lens,
        [WRISTBAND.len(), long.len(), open.len()].map(|n| n as i64)
    );
    assert!(matches!(
        scangate::audit::verify(&store).unwrap(),
        scangate::audit::Verification::Intact { records: 1203, .. }
    ));
}

#[test]
fn a_sweep_stops_between_chunks_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut gate = test_gate(&store);
    let reads: Vec<_> = (0..1200)
        .map(|i| read_at(&dscsa(&format!("STOP{i:04}")), i))
        .collect();
    scangate::daemon::embedded::submit(&mut store, &mut gate, &reads).unwrap();
    let later = chrono::Utc::now().timestamp_millis() + 1000;
    let mut chunks = 0;
    let sweep = store
        .clear_raw(later, &mut || {
            chunks += 1;
            chunks <= 1
        })
        .unwrap();
    assert!(sweep.interrupted);
    assert_eq!(sweep.cleared, 500, "one chunk, then it stopped");
    // The next sweep resumes after it.
    let sweep = store.clear_raw(later, &mut || true).unwrap();
    assert_eq!((sweep.cleared, sweep.interrupted), (700, false));
}

#[test]
fn the_daemon_sweeps_scans_decided_longer_ago_than_keep_raw_hours() {
    sweep_old_scans(false);
}

/// A reader in the way of the WAL truncation after a sweep: it is tried
/// again every `WAL_RETRY` until it succeeds, and then the cleared bytes
/// are gone from the files (before, it waited for the next sweep, ten
/// minutes later).
#[test]
fn a_wal_truncation_kept_from_happening_by_a_reader_is_tried_again() {
    sweep_old_scans(true);
}

/// The daemon over a database with two scans decided two hours ago and one
/// just now, `keep_raw_hours = 1`; with `reader`, a connection of the test
/// holds a read snapshot from before the daemon starts until the sweep is
/// logged, so the WAL cannot be truncated after it.
fn sweep_old_scans(reader: bool) {
    let dir = tempdir("raw-sweep");
    let state = dir.path().join("state");
    {
        let mut store = Store::open(&state).unwrap();
        let mut gate = test_gate(&store);
        scangate::daemon::embedded::submit(
            &mut store,
            &mut gate,
            &[read_at(WRISTBAND, 0), read_at(WRISTBAND, 5000)],
        )
        .unwrap();
        scangate::daemon::embedded::submit(
            &mut store,
            &mut gate,
            &[read_at(&dscsa("RAWNEW1"), 10_000)],
        )
        .unwrap();
    }
    // The first two were decided two hours ago; the third just now. (This
    // rewrite of the rows zeroes what it frees, as the daemon's writes do.)
    let db = rusqlite::Connection::open(state.join("scangate.db")).unwrap();
    db.pragma_update(None, "secure_delete", "ON").unwrap();
    db.execute(
        "UPDATE scans SET decided_ms = decided_ms - 7200000 WHERE seq <= 2",
        [],
    )
    .unwrap();
    drop(db);
    // A scanner keeps the daemon running (without one it stops at once).
    let gw = Gateway::builder_in(dir.path())
        .pty(ScannerSpec::named("counter-1"))
        .config("[outbox]\nkeep_raw_hours = 1")
        .build();

    let snapshot = reader.then(|| {
        let c = rusqlite::Connection::open(state.join("scangate.db")).unwrap();
        c.execute_batch("BEGIN").unwrap();
        let n: i64 = c
            .query_row("SELECT count(*) FROM scans", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 3);
        c
    });
    let mut daemon = gw.launch();
    // Logged once the sweep (and its WAL truncation) is done.
    wait_until("the sweeper to clear the two old scans", || {
        daemon
            .log()
            .contains("overwrote the raw bytes of 2 scans decided more than 1 h ago")
    });
    if let Some(c) = snapshot {
        assert!(
            daemon.log().contains("wal_truncated=false"),
            "the WAL was truncated under a reader's snapshot: {}",
            daemon.log()
        );
        assert!(
            on_disk(&state, WRISTBAND),
            "the test's snapshot should have kept the old pages"
        );
        drop(c);
    }
    assert_eq!(raw_lengths(&state)[..2], [0, 0]);
    assert!(
        raw_lengths(&state)[2] > 0,
        "a scan decided just now was cleared"
    );
    // Gone from the WAL too once it is truncated: right after the sweep,
    // or (a reader in the way) at a retry WAL_RETRY later.
    wait_until_for(
        "the WAL truncated after the sweep (wal_truncated=true in the log)",
        scangate::daemon::sweeper::WAL_RETRY * 3,
        || daemon.log().contains("wal_truncated=true"),
    );
    assert!(
        !on_disk(&state, WRISTBAND),
        "wristband bytes left in the files"
    );
    assert!(daemon.terminate().success(), "{}", daemon.log_digest());
}

/// Once the sweeper has removed every decided outbox row (a quiet weekend
/// past the dedup horizon), the next scans must not reuse outbox positions
/// already swept: their raw bytes would be skipped by the sweep's cursor
/// and kept long past `keep_raw_hours`.
#[test]
fn raw_bytes_are_cleared_after_the_outbox_was_emptied_by_a_prune() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut gate = test_gate(&store);
    let reads: Vec<_> = (0..5)
        .map(|i| read_at(&dscsa(&format!("QUIET{i:04}")), i * 10))
        .collect();
    scangate::daemon::embedded::submit(&mut store, &mut gate, &reads).unwrap();
    let later = chrono::Utc::now().timestamp_millis() + 1000;
    assert_eq!(store.clear_raw(later, &mut || true).unwrap().cleared, 5);
    let none = std::collections::HashSet::new();
    store.prune_decided(later, &none, &mut || true).unwrap();

    // Monday: a wristband scanned by mistake, rejected, then swept.
    scangate::daemon::embedded::submit(&mut store, &mut gate, &[read_at(WRISTBAND, 100)]).unwrap();
    let later = chrono::Utc::now().timestamp_millis() + 1000;
    let sweep = store.clear_raw(later, &mut || true).unwrap();
    assert_eq!(sweep.cleared, 1, "the new scan's raw bytes were skipped");
    truncate_wal(&store);
    assert!(raw_lengths(dir.path()).iter().all(|&n| n == 0));
}
