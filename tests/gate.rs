//! Gate decisions on a real SQLite file: echo patterns, idempotency by UUID,
//! capture order, event time.

use crate::util::{audit_records, capture_time, dispense, dscsa, scan, test_gate};
use scangate::capture::Scan;
use scangate::config::ScanType;
use scangate::gate::Gate;
use scangate::model::Verdict;
use scangate::store::Store;

const WINDOW_MS: i64 = 3000;

struct Rig {
    _dir: tempfile::TempDir,
    store: Store,
    gate: Gate,
    t0: i64,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let gate = test_gate(&store);
    Rig {
        _dir: dir,
        store,
        gate,
        t0: chrono::Utc::now().timestamp_millis(),
    }
}

impl Rig {
    /// A scan read `at_ms` after t0 (same boot).
    fn scan(&self, scanner: &str, label: &str, at_ms: i64) -> Scan {
        let time = capture_time(self.t0 + at_ms, "boot-a", 1_000_000 + at_ms, true);
        scan(&dispense(scanner), label, time)
    }

    fn submit(&mut self, scans: &[Scan]) -> Vec<Verdict> {
        scangate::daemon::embedded::submit(&mut self.store, &mut self.gate, scans)
            .unwrap()
            .into_iter()
            .map(|d| d.verdict)
            .collect()
    }

    fn ledger_len(&self) -> usize {
        let mut n = 0;
        scangate::ledger::for_each(&self.store, None, |_| {
            n += 1;
            Ok(())
        })
        .unwrap();
        n
    }
}

fn suppressed_by(v: &Verdict, twin: &Scan) -> bool {
    *v == Verdict::Suppressed {
        twin: twin.uuid.to_string(),
    }
}

#[test]
fn echoes_inside_the_window_are_suppressed_naming_the_twin() {
    let mut r = rig();
    let first = r.scan("c1", &dscsa("S1"), 0);
    let double_fire = r.scan("c1", &dscsa("S1"), 40);
    let retransmit = r.scan("c1", &dscsa("S1"), 600);
    let rescan = r.scan("c1", &dscsa("S1"), 2000);
    let edge = r.scan("c1", &dscsa("S1"), WINDOW_MS); // inclusive
    let v = r.submit(std::slice::from_ref(&first));
    assert_eq!(v, [Verdict::Committed]);
    for echo in [&double_fire, &retransmit, &rescan, &edge] {
        let v = r.submit(std::slice::from_ref(echo));
        assert!(suppressed_by(&v[0], &first), "{v:?}");
    }
    assert_eq!(r.ledger_len(), 1);
}

#[test]
fn re_dispense_after_the_window_commits_and_echo_checks_use_committed_scans_only() {
    let mut r = rig();
    let label = "312345678906"; // UPC-A NDC: no serial, the same every time
    let a = r.scan("c1", label, 0);
    let a_echo = r.scan("c1", label, 2500);
    let b = r.scan("c1", label, 4500); // 4.5 s after the commit: new pick
    let b_echo = r.scan("c1", label, 4540);
    let v = r.submit(&[a.clone(), a_echo, b.clone(), b_echo]);
    assert_eq!(v[0], Verdict::Committed);
    assert!(suppressed_by(&v[1], &a));
    // 2 s after a suppressed echo but 4.5 s after the committed scan: a
    // suppressed scan never extends the window.
    assert_eq!(v[2], Verdict::Committed);
    assert!(suppressed_by(&v[3], &b));
    assert_eq!(r.ledger_len(), 2);
}

#[test]
fn same_product_on_two_scanners_is_two_picks() {
    let mut r = rig();
    let v = r.submit(&[
        r.scan("c1", &dscsa("S1"), 0),
        r.scan("c2", &dscsa("S1"), 10),
    ]);
    assert_eq!(v, [Verdict::Committed, Verdict::Committed]);
}

#[test]
fn different_scan_type_or_quantity_is_a_different_movement() {
    let mut r = rig();
    let mut receive = r.scan("c1", &dscsa("S1"), 10);
    let dispense = r.scan("c1", &dscsa("S1"), 0);
    receive.profile.scan_type = ScanType::Receive;
    let v = r.submit(&[dispense, receive]);
    assert_eq!(v, [Verdict::Committed, Verdict::Committed]);
}

#[test]
fn the_same_uuid_submitted_again_returns_its_first_decision() {
    let mut r = rig();
    let first = r.scan("c1", &dscsa("S1"), 0);
    let echo = r.scan("c1", &dscsa("S1"), 100);
    assert_eq!(r.submit(std::slice::from_ref(&first)), [Verdict::Committed]);
    assert!(suppressed_by(
        &r.submit(std::slice::from_ref(&echo))[0],
        &first
    ));
    // Resubmitting (a lost reply retried, a replay) changes nothing.
    assert_eq!(r.submit(std::slice::from_ref(&first)), [Verdict::Committed]);
    assert!(suppressed_by(
        &r.submit(std::slice::from_ref(&echo))[0],
        &first
    ));
    assert_eq!(
        r.submit(&[first.clone(), first]),
        [Verdict::Committed, Verdict::Committed]
    );
    assert_eq!(r.ledger_len(), 1);
    let st = r.store.outbox_status().unwrap();
    assert_eq!(
        (st.committed, st.suppressed),
        (1, 1),
        "no duplicate outbox rows"
    );
}

#[test]
fn scans_submitted_out_of_capture_order_are_decided_in_capture_order() {
    let mut r = rig();
    let early = r.scan("c1", &dscsa("S1"), 0);
    let late = r.scan("c1", &dscsa("S1"), 1000);
    let other = r.scan("c1", &dscsa("S2"), 500);
    // Submitted late-first in one batch: the earliest capture must win.
    let v = r.submit(&[late.clone(), other, early.clone()]);
    assert!(suppressed_by(&v[0], &early), "{v:?}");
    assert_eq!(v[1], Verdict::Committed);
    assert_eq!(v[2], Verdict::Committed);
    // The audit trail shows the decision order: capture order.
    let key = scangate::audit::key_of(&r.store, &early.uuid.to_string())
        .unwrap()
        .unwrap();
    let trail = scangate::audit::trail_for_key(&r.store, &key).unwrap();
    let order: Vec<&str> = trail.records.iter().map(|a| a.scan_uuid.as_str()).collect();
    assert_eq!(order, [early.uuid.to_string(), late.uuid.to_string()]);
}

#[test]
fn a_replay_after_an_outage_is_judged_by_capture_time() {
    let mut r = rig();
    // Captured an hour ago, replayed now: still an echo of each other, and
    // not an echo of a scan captured now.
    let old = r.scan("c1", "312345678906", -3_600_000);
    let old_echo = r.scan("c1", "312345678906", -3_600_000 + 600);
    let now = r.scan("c1", "312345678906", 0);
    let v = r.submit(std::slice::from_ref(&now));
    assert_eq!(v, [Verdict::Committed]);
    let v = r.submit(&[old.clone(), old_echo]);
    assert_eq!(v[0], Verdict::Committed);
    assert!(suppressed_by(&v[1], &old));
}

#[test]
fn the_boot_clock_decides_within_one_boot_even_if_the_wall_clock_jumps() {
    let mut r = rig();
    let first = r.scan("c1", &dscsa("S1"), 0);
    // NTP stepped the wall clock by +2 h between the reads; 100 ms passed.
    let mut echo = r.scan("c1", &dscsa("S1"), 100);
    echo.time.utc_ms += 2 * 3_600_000;
    let v = r.submit(&[first.clone(), echo]);
    assert!(suppressed_by(&v[1], &first), "{v:?}");
    // A scan from another boot falls back to the wall clock.
    let mut other_boot = r.scan("c1", &dscsa("S1"), 200);
    other_boot.time.boot_id = "boot-b".into();
    other_boot.time.boot_ns = 5;
    assert!(suppressed_by(&r.submit(&[other_boot])[0], &first));
}

#[test]
fn invalid_barcodes_are_rejected_with_a_reason_that_does_not_echo_the_data() {
    let mut r = rig();
    let v = r.submit(&[
        r.scan("c1", "MRN-0042-PATIENT", 0),
        r.scan("c1", "]d2010030777310502X", 10),
    ]);
    for verdict in &v {
        match verdict {
            Verdict::Rejected { reason } => {
                assert!(!reason.is_empty());
                assert!(!reason.contains("MRN-0042"), "reason leaks data: {reason}");
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
    }
    // The audit trail holds the rejections, without the scanned bytes.
    let text: String = {
        let c = rusqlite::Connection::open(r.store.path()).unwrap();
        audit_records(&c).concat()
    };
    assert!(text.contains("\"decision\":\"rejected\""));
    assert!(!text.contains("MRN"), "audit leaks scanned data: {text}");
    assert_eq!(r.ledger_len(), 0);
}

#[test]
fn the_bloom_filter_skips_lookups_only_for_never_committed_keys() {
    let mut r = rig();
    let scans: Vec<Scan> = (0..50)
        .map(|i| r.scan("c1", &dscsa(&format!("S{i}")), i * 10))
        .collect();
    r.submit(&scans);
    let s = r.gate.stats();
    assert_eq!(s.committed, 50);
    assert_eq!(s.lookups_saved + s.exact_lookups, 50);
    assert!(s.lookups_saved >= 45, "{s:?}");
    // Echoes of all of them: every one must reach the exact index.
    let echoes: Vec<Scan> = (0..50)
        .map(|i| r.scan("c1", &dscsa(&format!("S{i}")), i * 10 + 5))
        .collect();
    let v = r.submit(&echoes);
    assert!(v.iter().all(|v| matches!(v, Verdict::Suppressed { .. })));
    assert_eq!(r.gate.stats().exact_lookups, s.exact_lookups + 50);
}

#[test]
fn a_restarted_gate_rebuilds_its_knowledge_from_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let r = rig();
    let first = r.scan("c1", &dscsa("S1"), 0);
    let echo = r.scan("c1", &dscsa("S1"), 500);
    {
        let mut store = Store::open(dir.path()).unwrap();
        let mut gate = test_gate(&store);
        scangate::daemon::embedded::submit(&mut store, &mut gate, std::slice::from_ref(&first))
            .unwrap();
    }
    let mut store = Store::open(dir.path()).unwrap();
    let mut gate = test_gate(&store);
    let d = scangate::daemon::embedded::submit(&mut store, &mut gate, &[echo]).unwrap();
    assert!(suppressed_by(&d[0].verdict, &first));
    assert_eq!(
        gate.stats().lookups_saved,
        0,
        "the rebuilt Bloom filter knows the key"
    );
}

#[test]
fn a_second_writer_on_the_same_state_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _first = Store::open(dir.path()).unwrap();
    match Store::open(dir.path()) {
        Err(e @ scangate::store::StoreError::Locked { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(&dir.path().display().to_string()), "{msg}");
            assert!(msg.contains(&std::process::id().to_string()), "{msg}");
        }
        Err(other) => panic!("expected Locked, got {other}"),
        Ok(_) => panic!("two writers on one state directory"),
    }
    // Readers (export, verify, status) are not blocked.
    Store::open_read_only(dir.path()).unwrap();
}

#[test]
fn a_failing_decision_never_costs_a_scan_its_durability() {
    let mut r = rig();
    // Inject a fault into the ledger append (as a full disk or a bug would).
    let other = rusqlite::Connection::open(r.store.path()).unwrap();
    other
        .execute_batch(
            "CREATE TRIGGER injected BEFORE INSERT ON ledger
             BEGIN SELECT RAISE(ABORT, 'injected fault'); END;",
        )
        .unwrap();
    let a = r.scan("c1", &dscsa("S1"), 0);
    let echo = r.scan("c1", &dscsa("S1"), 40);
    let v = r.submit(&[a.clone(), echo.clone()]);
    assert_eq!(
        v,
        [Verdict::Pending, Verdict::Pending],
        "stored, not decided"
    );
    let st = r.store.outbox_status().unwrap();
    assert_eq!((st.pending, st.committed), (2, 0));
    assert!(r.store.has_pending().unwrap());
    assert_eq!(r.ledger_len(), 0);
    // The fault goes away: the same path decides them, in capture order.
    other.execute_batch("DROP TRIGGER injected").unwrap();
    let d = scangate::daemon::embedded::decide_pending(&mut r.store, &mut r.gate).unwrap();
    assert_eq!(d.len(), 2);
    assert_eq!(d[0].scan_uuid, a.uuid.to_string());
    assert_eq!(d[0].verdict, Verdict::Committed);
    assert!(suppressed_by(&d[1].verdict, &a));
    assert!(!r.store.has_pending().unwrap());
    assert!(matches!(
        scangate::audit::verify(&r.store).unwrap(),
        scangate::audit::Verification::Intact { records: 2, .. }
    ));
}

#[test]
fn a_clock_step_is_remembered_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let r = rig();
    let first = r.scan("c1", &dscsa("S1"), 0);
    // Same boot, 500 ms later by the boot clock, but NTP stepped the wall
    // clock back by 3 h in between; a re-dispense 10 s later after the step.
    let mut echo = r.scan("c1", &dscsa("S1"), 500);
    echo.time.utc_ms -= 3 * 3_600_000;
    let mut later = r.scan("c1", &dscsa("S1"), 10_000);
    later.time.utc_ms -= 3 * 3_600_000;
    {
        let mut store = Store::open(dir.path()).unwrap();
        let mut gate = test_gate(&store);
        let d = scangate::daemon::embedded::submit(
            &mut store,
            &mut gate,
            &[first.clone(), later.clone()],
        )
        .unwrap();
        assert_eq!(d[1].verdict, Verdict::Committed);
    }
    let mut store = Store::open(dir.path()).unwrap();
    let mut gate = test_gate(&store);
    let d = scangate::daemon::embedded::submit(&mut store, &mut gate, &[echo]).unwrap();
    assert!(suppressed_by(&d[0].verdict, &first), "{:?}", d[0]);
}

/// Decided before written: a fresh batch's rows are inserted with their
/// verdicts and never updated, in the order they arrived (decided in
/// capture order). The control: with an older scan still pending, the
/// batch is written `pending` and decided by updating its rows — which
/// the injected trigger refuses, so they stay pending.
#[test]
fn a_fresh_batch_is_decided_before_it_is_written_and_never_updated() {
    let mut r = rig();
    let other = rusqlite::Connection::open(r.store.path()).unwrap();
    other
        .execute_batch(
            "CREATE TRIGGER no_verdict_updates BEFORE UPDATE OF state ON scans
             BEGIN SELECT RAISE(ABORT, 'a verdict written by UPDATE'); END;",
        )
        .unwrap();
    let (a, b) = (
        r.scan("c1", &dscsa("S1"), 100),
        r.scan("c1", &dscsa("S2"), 0),
    );
    let echo = r.scan("c1", &dscsa("S1"), 150);
    let v = r.submit(&[a.clone(), b.clone(), echo.clone()]);
    assert_eq!(v[0], Verdict::Committed);
    assert_eq!(v[1], Verdict::Committed);
    assert!(suppressed_by(&v[2], &a), "{v:?}");
    let order: Vec<String> = other
        .prepare("SELECT scan_uuid FROM scans ORDER BY seq")
        .unwrap()
        .query_map([], |row| {
            row.get::<_, scangate::store::packed::Unpacked>(0)
                .map(|u| u.0)
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let arrived: Vec<String> = [&a, &b, &echo].iter().map(|s| s.uuid.to_string()).collect();
    assert_eq!(order, arrived, "outbox positions in arrival order");
    // The control: an older scan pending (stored while deciding failed).
    other
        .execute_batch(
            "CREATE TRIGGER injected BEFORE INSERT ON ledger
             BEGIN SELECT RAISE(ABORT, 'injected fault'); END;",
        )
        .unwrap();
    let old = r.scan("c1", &dscsa("S3"), 200);
    assert_eq!(r.submit(std::slice::from_ref(&old)), [Verdict::Pending]);
    other.execute_batch("DROP TRIGGER injected").unwrap();
    let late = r.scan("c1", &dscsa("S4"), 300);
    assert_eq!(
        r.submit(&[late]),
        [Verdict::Pending],
        "behind a pending scan the batch is decided by UPDATE, which the trigger refuses"
    );
    other
        .execute_batch("DROP TRIGGER no_verdict_updates")
        .unwrap();
    let d = scangate::daemon::embedded::decide_pending(&mut r.store, &mut r.gate).unwrap();
    assert_eq!(d.len(), 2);
    assert!(d.iter().all(|d| d.verdict == Verdict::Committed));
    assert!(matches!(
        scangate::audit::verify(&r.store).unwrap(),
        scangate::audit::Verification::Intact { records: 5, .. }
    ));
}
