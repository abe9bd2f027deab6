//! A migration cut at any point is completed by the next start: the
//! schema-1 fixture (the oldest earlier release's own state), grown to
//! ~60,000 rows so that its migration takes a while, is taken over by
//! this release and killed (SIGKILL) while the copy of the database is
//! being kept, when it is kept, and at times spread over the migrations;
//! each time the next start migrates on, comes up, takes a scan, and keeps
//! every row and exactly one copy of the database as it was (a schema-1
//! database with every row, for a rollback).
//!
//! The grown rows are copies of the fixture's with new identifiers: their
//! audit chain does not verify, so `audit verify` is not asked here (the
//! fixtures' own test asks it of each real state).

use crate::util::*;
use rusqlite::Connection;
use std::path::Path;
use std::time::{Duration, Instant};

/// The fixture's rows copied this many times over.
const TIMES: i64 = 2_500;

/// A new UUID's text, as the schema-1 release wrote them.
const UUID: &str = "printf('%s-%s-4%s-a%s-%s', lower(hex(randomblob(4))), lower(hex(randomblob(2))), \
     substr(lower(hex(randomblob(2))), 2), substr(lower(hex(randomblob(2))), 2), lower(hex(randomblob(6))))";

/// The schema-1 fixture, grown, as the state of gateway `g`.
fn grown_schema_1(g: &Gateway) -> (i64, i64, i64) {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/states/schema-01-510566a");
    std::fs::create_dir_all(&g.state).unwrap();
    std::fs::copy(fixture.join("scangate.db"), g.state.join("scangate.db")).unwrap();
    let c = Connection::open(g.state.join("scangate.db")).unwrap();
    let n = format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {TIMES})"
    );
    c.execute_batch(&format!(
        "BEGIN;
         {n} INSERT INTO scans (scan_uuid, scanner, scan_type, quantity, captured_ms, boot_id,
             boot_ns, clock_synced, raw, symbology, gtin, ndc10, lot, serial, expiry,
             content_key, reject_reason, state, twin_uuid, decided_ms)
           SELECT {UUID}, scanner, scan_type, quantity, captured_ms + i, boot_id, boot_ns + i,
             clock_synced, raw, symbology, gtin, ndc10, lot, serial, expiry, content_key,
             reject_reason, state, twin_uuid, decided_ms
           FROM n CROSS JOIN (SELECT * FROM scans WHERE seq <= 9);
         {n} INSERT INTO ledger (scan_uuid, gateway, scanner, captured_ms, boot_id, boot_ns,
             clock_synced, scan_type, quantity, gtin, ndc10, lot, serial, expiry, symbology,
             content_key, key_prefix)
           SELECT {UUID}, gateway, scanner, captured_ms + i, boot_id, boot_ns + i, clock_synced,
             scan_type, quantity, gtin, ndc10, lot, serial, expiry, symbology, content_key,
             key_prefix
           FROM n CROSS JOIN (SELECT * FROM ledger WHERE seq <= 6);
         {n} INSERT INTO audit (scan_uuid, content_key, record, prev_hash, hash)
           SELECT {UUID}, content_key, record, prev_hash, hash
           FROM n CROSS JOIN (SELECT * FROM audit WHERE seq <= 9);
         COMMIT;"
    ))
    .unwrap();
    counts(&c)
}

/// (scans, ledger entries, audit records).
fn counts(c: &Connection) -> (i64, i64, i64) {
    c.query_row(
        "SELECT (SELECT count(*) FROM scans), (SELECT count(*) FROM ledger),
                (SELECT count(*) FROM audit)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

fn gateway() -> Gateway {
    Gateway::builder("scangate-cut-")
        .pty(ScannerSpec::named("counter-1").ack())
        .build()
}

/// The copies of the database in the state directory (file names).
fn copies(state: &Path) -> Vec<String> {
    scangate::store::upgrade::copies(state)
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// When a cut comes: the moment this holds of the state directory and the
/// daemon's log.
type Cut<'a> = &'a dyn Fn(&Path, &str) -> bool;

/// Spawn the daemon and kill it (SIGKILL) the moment `cut(state, log)`
/// holds, or after `limit`; whether it held.
fn kill_when(g: &Gateway, limit: Duration, cut: Cut<'_>) -> bool {
    let mut daemon = g.spawn_with_env(&[]);
    let start = Instant::now();
    let mut hit = false;
    while !hit && start.elapsed() < limit {
        hit = cut(&g.state, &daemon.log());
    }
    daemon.kill9();
    hit
}

/// The next start completes what was cut: it comes up, takes a scan, and
/// keeps every row and one copy.
fn completes(g: &mut Gateway, before: (i64, i64, i64), why: &str) {
    let socket = NotifySocket::bind(&g.dir);
    let mut daemon = g.spawn_with_env(&[("NOTIFY_SOCKET", socket.path())]);
    daemon.wait_open(&g.pty_paths());
    socket.wait_for("READY", "1", 1);
    g.send(&dscsa("CUT0001"));
    assert_eq!(g.replies(1), vec![0x06], "{why}: the scan is ACKed");
    wait_all_decided(&g.cfg, before.0 + 1);
    assert_eq!(
        daemon.terminate().code(),
        Some(0),
        "{why}\n{}",
        daemon.log()
    );
    let c = open_db(&g.state);
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, scangate::build::SCHEMA_VERSION, "{why}");
    let (scans, entries, records) = counts(&c);
    assert_eq!((scans, entries), (before.0 + 1, before.1 + 1), "{why}");
    assert!(records > before.2, "{why}");
    let kept = copies(&g.state);
    assert_eq!(
        kept,
        [format!(
            "scangate.db.schema-1.before-{}",
            scangate::build::VERSION
        )],
        "{why}"
    );
    let copy = Connection::open(g.state.join(&kept[0])).unwrap();
    let version: i64 = copy
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!((version, counts(&copy)), (1, before), "{why}: the copy");
}

#[test]
fn a_migration_killed_at_any_point_is_completed_by_the_next_start() {
    // How long the whole migration takes here: the span the timed cuts
    // spread over. Under systemd it asks for more time before it begins
    // (EXTEND_TIMEOUT_USEC, then every 5 s), so a slow card is not killed
    // as a start that hangs.
    let probe = gateway();
    let before = grown_schema_1(&probe);
    let socket = NotifySocket::bind(&probe.dir);
    let t = Instant::now();
    let mut daemon = probe.launch_with_env(&[("NOTIFY_SOCKET", socket.path())]);
    let span = t.elapsed();
    let ready = socket.wait_for("READY", "1", 1);
    let extended = socket.values("EXTEND_TIMEOUT_USEC");
    assert!(
        extended.first().is_some_and(|(usec, at)| {
            usec.parse::<u64>().is_ok_and(|u| u >= 30_000_000) && *at < ready
        }),
        "{extended:?}"
    );
    assert!(
        socket
            .values("STATUS")
            .iter()
            .any(|(s, _)| s.contains("migrating the database from schema 1")),
        "{:?}",
        socket.values("STATUS")
    );
    assert!(
        daemon.log().contains("database migrated from schema 1"),
        "{}",
        daemon.log()
    );
    assert_eq!(daemon.terminate().code(), Some(0));
    drop(probe);
    eprintln!("the migration of {before:?} rows takes {span:?} to the scanner's open here");

    let copying: Cut = &|_, log| log.contains("migrating the database from schema 1");
    let copy_tmp: Cut = &|state, _| copies(state).iter().any(|c| c.ends_with(".tmp"));
    let kept: Cut = &|_, log| log.contains("is kept in");
    let never: Cut = &|_, _| false;
    let mut cuts: Vec<(String, Duration, Cut)> = vec![
        ("when the migration was announced".into(), span * 3, copying),
        (
            "while the copy was being written".into(),
            span * 3,
            copy_tmp,
        ),
        ("once the copy was kept".into(), span * 3, kept),
    ];
    for i in 1..=6u32 {
        let at = span * i / 6;
        cuts.push((format!("{} ms after spawn", at.as_millis()), at, never));
    }
    let mut hits = 0;
    for (i, (when, limit, cut)) in cuts.into_iter().enumerate() {
        let mut g = gateway();
        let before = grown_schema_1(&g);
        let hit = kill_when(&g, limit, cut);
        hits += usize::from(hit && i < 3);
        eprintln!("killed {when}: left {:?}", copies(&g.state));
        completes(&mut g, before, &format!("killed {when}"));
    }
    // (The copy's .tmp lives for a moment only: a cut may miss it.)
    assert!(hits >= 2, "the cuts at the copy came {hits} of 3 times");

    // One state killed again and again mid-migration, then left to finish.
    let mut g = gateway();
    let before = grown_schema_1(&g);
    for i in 1..=5u32 {
        kill_when(&g, span * i / 5, never);
    }
    completes(&mut g, before, "after 5 kills");
}
