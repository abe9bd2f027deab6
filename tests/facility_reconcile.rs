//! Reconciliation (docs/design.md, "Reconciliation"): a facility store
//! that lost data — restarted empty, replaced by an empty one mid-shift,
//! restored from an older snapshot — is detected by each gateway's marker,
//! and each gateway re-publishes its own commits (from its ledger entry if
//! its outbox row is gone) before it claims new scans; a pick committed
//! twice meanwhile is a conflict reported on both sides. Real binary, PTY
//! scanners, a redis-server of each test's own.

use crate::util::*;
use std::path::Path;

#[test]
fn redis_restarted_empty_still_never_recommits_this_gateways_picks() {
    // A gateway's own scanner: its echo is decided by its own window, and
    // the facility store, restarted empty, never hears of it. A shared
    // scanner's echo is always claimed: the claim finds the store lost
    // data, the gateway re-publishes its commit first, and the echo is
    // suppressed by it — the pick's one entry, never the echo's.
    for shared in [false, true] {
        let (root, mut redis) = facility(&[]);
        let mut g = Gateway::in_facility(root.path(), "gw-a", &redis, "roaming", shared);
        g.start();
        let label = dscsa("SN001");
        g.send(&label);
        wait_all_decided(&g.cfg, 1);
        let pick = redis.ledger("test-pharmacy");
        redis.restart(); // no persistence: it comes back empty
        assert!(redis.ledger("test-pharmacy").is_empty());
        g.send(&label); // an echo within the window
        let st = wait_all_decided(&g.cfg, 2);
        assert_eq!(count(&st, "committed"), 1, "{st}");
        assert_eq!(count(&st, "suppressed"), 1, "{st}");
        let after = redis.ledger("test-pharmacy");
        if shared {
            assert_eq!(after, pick, "shared: the pick re-published, not the echo");
        } else {
            assert!(after.is_empty(), "the echo reached the ledger: {after:?}");
        }
        g.stop();
    }
}

/// Two gateways sharing the roaming scanner, with a window of ten minutes
/// (so a re-read after a Redis replacement is still an echo however slowly
/// the test runs), started.
fn two_wide_gateways(root: &Path, redis: &RedisServer) -> (Gateway, Gateway) {
    let mut a = Gateway::roaming(root, "gw-a", redis);
    let mut b = Gateway::roaming(root, "gw-b", redis);
    a.set_window_ms(600_000);
    b.set_window_ms(600_000);
    a.start();
    b.start();
    (a, b)
}

/// Read `labels` (SN…) at gateway `g`, and wait until its outbox holds
/// `total` transmissions, all decided.
fn read_labels(g: &mut Gateway, labels: std::ops::Range<usize>, total: i64) -> serde_json::Value {
    for i in labels {
        g.send(&dscsa(&format!("SN{i:03}")));
    }
    wait_all_decided(&g.cfg, total)
}

/// The scan UUIDs in a gateway's own ledger.
fn local_ledger(g: &Gateway) -> Vec<String> {
    let db = open_db(&g.state.clone());
    db.prepare(&format!("SELECT {UUID_TEXT} FROM ledger ORDER BY seq"))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The facility ledger's scan UUIDs, sorted.
fn facility_uuids(redis: &RedisServer) -> Vec<String> {
    let mut uuids: Vec<String> = redis
        .ledger("test-pharmacy")
        .into_iter()
        .map(|(u, _)| u)
        .collect();
    uuids.sort();
    uuids
}

/// The committed scan of label `serial` in a gateway's outbox.
fn committed_scan(g: &Gateway, serial: &str) -> String {
    let db = open_db(&g.state.clone());
    db.query_row(
        "SELECT scan_uuid FROM scans WHERE state = 'committed' AND serial = ?1",
        [serial],
        |r| {
            r.get::<_, scangate::store::packed::Unpacked>(0)
                .map(|u| u.0)
        },
    )
    .unwrap_or_else(|e| panic!("no committed scan of {serial}: {e}"))
}

/// A commit whose outbox row is gone (the sweeper removes decided rows by
/// the gateway's wall clock, which may have been stepped on) is
/// re-published from its ledger entry when the store lost data. Before, it
/// was skipped ("not in its outbox"), and the newest commit — the marker —
/// was never re-published, so every claim was refused for it again.
#[test]
fn a_commit_whose_outbox_row_is_gone_is_republished_from_its_ledger_entry() {
    let (root, mut redis) = facility(&[]);
    let mut a = Gateway::roaming(root.path(), "gw-a", &redis);
    a.start();
    read_labels(&mut a, 0..3, 3);
    a.stop();
    let gone = local_ledger(&a);
    let db = rusqlite::Connection::open(a.state.join("scangate.db")).unwrap();
    let removed = db
        .execute(
            "DELETE FROM scans WHERE scan_uuid IN (?1, ?2)",
            [
                scangate::store::packed::packed(&gone[0]),
                scangate::store::packed::packed(&gone[2]),
            ],
        )
        .unwrap();
    assert_eq!(removed, 2);
    drop(db);
    redis.restart();
    a.start();
    read_labels(&mut a, 3..4, 2);
    wait_until("every commit back in the facility ledger", || {
        redis.ledger("test-pharmacy").len() == 4
    });
    assert_each_pick_once(&redis, 4);
    let mut local = local_ledger(&a);
    local.sort();
    assert_eq!(facility_uuids(&redis), local);
    let log = a.daemon().log();
    assert_eq!(
        log.matches("re-published from its ledger entry").count(),
        2,
        "{log}"
    );
    a.stop();
}

#[test]
fn redis_replaced_by_an_empty_one_mid_shift_two_gateways_converge_to_every_pick_once() {
    let (root, mut redis) = facility(&[]);
    let (mut a, mut b) = two_wide_gateways(root.path(), &redis);
    // a's picks SN000..SN009, b's SN100..SN104, and b hears a's first five
    // (echoes of a's commits).
    read_labels(&mut a, 0..10, 10);
    read_labels(&mut b, 100..105, 5);
    read_labels(&mut b, 0..5, 10);
    assert_each_pick_once(&redis, 15);
    // The facility Redis is replaced by an empty one (same address).
    redis.restart();
    assert!(redis.ledger("test-pharmacy").is_empty());
    // The next pick at each gateway finds the store without its latest
    // commit: it re-publishes its commits first, then claims the pick.
    let replaced = std::time::Instant::now();
    read_labels(&mut a, 200..201, 11);
    read_labels(&mut b, 300..301, 11);
    wait_until("both gateways' picks back in the facility ledger", || {
        redis.ledger("test-pharmacy").len() == 17
    });
    let converged = replaced.elapsed();
    // Echoes of the re-published picks on the other gateway are echoes.
    read_labels(&mut b, 5..10, 16);
    read_labels(&mut a, 100..105, 16);
    assert_each_pick_once(&redis, 17);
    let mut local: Vec<String> = local_ledger(&a)
        .into_iter()
        .chain(local_ledger(&b))
        .collect();
    local.sort();
    assert_eq!(
        facility_uuids(&redis),
        local,
        "the facility ledger holds exactly the gateways' commits, by their original scan UUIDs"
    );
    assert_eq!((a.count("committed"), b.count("committed")), (11, 6));
    for (g, republished) in [(&a, 10), (&b, 5)] {
        let st = outbox_status(&g.cfg);
        let r = &st["reconciliation"];
        assert_eq!(r["republished"], republished, "{st}");
        assert_eq!(r["conflicts"], 0, "{st}");
        assert_eq!(st["conflicts"].as_array().map(Vec::len), Some(0), "{st}");
        let text: Outcome = cli_cfg(&g.cfg, &["outbox", "status"]).into();
        assert!(
            text.stdout.contains(&format!(
                "re-published {republished} of this gateway's commits"
            )),
            "{text}"
        );
        let log = g.daemon().log();
        assert_eq!(log.matches("has lost data").count(), 1, "{log}");
        audit_verify(&g.cfg);
    }
    eprintln!(
        "converged {} ms after the replacement (reconciliations took {} and {} ms)",
        converged.as_millis(),
        outbox_status(&a.cfg)["reconciliation"]["took_ms"],
        outbox_status(&b.cfg)["reconciliation"]["took_ms"]
    );
    a.stop();
    b.stop();
}

#[test]
fn a_pick_committed_twice_while_the_store_was_empty_is_a_conflict_reported_on_both_sides() {
    let (root, mut redis) = facility(&[]);
    let (mut a, mut b) = two_wide_gateways(root.path(), &redis);
    read_labels(&mut a, 0..3, 3);
    read_labels(&mut b, 100..101, 1);
    redis.restart();
    // b hears an echo of a's SN001 before a has noticed the loss: b
    // reconciles (its own SN100), then commits the echo as a pick.
    read_labels(&mut b, 1..2, 2);
    assert_eq!(b.count("committed"), 2);
    // a's next pick: a re-publishes SN000..SN002, and the facility
    // suppresses its SN001 as an echo of b's: a conflict.
    read_labels(&mut a, 200..201, 4);
    assert_each_pick_once(&redis, 5);
    let (mine, theirs) = (committed_scan(&a, "SN001"), committed_scan(&b, "SN001"));
    let st = outbox_status(&a.cfg);
    assert_eq!(st["reconciliation"]["conflicts"], 1, "{st}");
    assert_eq!(st["conflicts"][0]["scan_uuid"], mine.as_str(), "{st}");
    assert_eq!(
        st["conflicts"][0]["other_scan_uuid"],
        theirs.as_str(),
        "{st}"
    );
    let text: Outcome = cli_cfg(&a.cfg, &["outbox", "status"]).into();
    assert!(
        text.stdout.contains(&format!("CONFLICT: scan {mine}")),
        "{text}"
    );
    let trace: Outcome = cli_cfg(&a.cfg, &["audit", "trace", &mine]).into();
    assert!(
        trace
            .stdout
            .contains(&format!("CONFLICT  another gateway committed {theirs}")),
        "{trace}"
    );
    // b hears of it from the facility's conflicts stream (at connect and
    // every minute): restarted, it connects.
    b.stop();
    b.start();
    wait_until("the conflict audited on gateway b", || {
        outbox_status(&b.cfg)["conflicts"]
            .as_array()
            .is_some_and(|c| c.len() == 1)
    });
    let st = outbox_status(&b.cfg);
    assert_eq!(st["conflicts"][0]["scan_uuid"], theirs.as_str(), "{st}");
    assert_eq!(st["conflicts"][0]["other_scan_uuid"], mine.as_str(), "{st}");
    assert_eq!(st["conflicts"][0]["other_gateway"], "gw-a", "{st}");
    let trace: Outcome = cli_cfg(&b.cfg, &["audit", "trace", &theirs]).into();
    assert!(
        trace
            .stdout
            .contains(&format!("CONFLICT  gateway gw-a committed {mine}")),
        "{trace}"
    );
    for g in [&a, &b] {
        audit_verify(&g.cfg);
    }
    a.stop();
    b.stop();
}

#[test]
fn redis_restored_from_an_older_snapshot_is_detected_and_the_lost_picks_republished_once() {
    let (root, mut redis) = facility(&[]);
    let (mut a, mut b) = two_wide_gateways(root.path(), &redis);
    read_labels(&mut a, 0..3, 3);
    // A snapshot now; the server is restored from it after three more picks
    // (SIGKILL: nothing newer is saved). The settings and the first three
    // picks survive, so no key is simply absent.
    let _: () = redis::cmd("SAVE").query(&mut redis.connection()).unwrap();
    read_labels(&mut a, 3..6, 6);
    assert_eq!(redis.ledger("test-pharmacy").len(), 6);
    redis.restart();
    assert_eq!(
        redis.ledger("test-pharmacy").len(),
        3,
        "restored from the snapshot"
    );
    read_labels(&mut a, 6..7, 7);
    wait_until("a's lost picks back in the facility ledger", || {
        redis.ledger("test-pharmacy").len() == 7
    });
    // b's reads of the restored picks are echoes.
    read_labels(&mut b, 3..6, 3);
    assert_eq!(b.count("committed"), 0);
    assert_each_pick_once(&redis, 7);
    let mut local = local_ledger(&a);
    local.sort();
    assert_eq!(facility_uuids(&redis), local);
    let st = outbox_status(&a.cfg);
    assert_eq!(st["reconciliation"]["republished"], 6, "{st}");
    assert_eq!(st["reconciliation"]["conflicts"], 0, "{st}");
    a.stop();
    b.stop();
}
