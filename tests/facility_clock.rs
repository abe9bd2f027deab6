//! Facility claims and the wall clock: a scan read before NTP sync waits,
//! then is claimed with its capture time re-derived from the boot clock.
//! Real SQLite file, real redis-server; the claimer's view of the clock is
//! the `now` argument of `claimer::round`.

use crate::util::*;
use scangate::capture::{CaptureTime, Scan};
use scangate::gate::Verdict;

const T0: i64 = 1_800_000_000_000; // the true time of the read (UTC ms)

/// A gate that holds unsynchronised reads, with its store, its own
/// redis-server and the connection to it.
fn setup() -> (
    tempfile::TempDir,
    RedisServer,
    scangate::store::Store,
    scangate::gate::Gate,
    scangate::facility::Facility,
) {
    let (root, redis, store, mut gate, facility) = facility_rig("scangate-clock-");
    gate.set_require_synced_clock(true);
    (root, redis, store, gate, facility)
}

/// A read of label `serial` by counter scanner `c1` (dispense, quantity 1).
fn read(serial: &str, time: CaptureTime) -> Scan {
    scan(&dispense("c1"), dscsa(serial), time)
}

#[test]
fn an_unsynced_read_waits_for_ntp_then_is_claimed_on_boot_clock_time() {
    let (_root, redis, mut store, mut gate, mut facility) = setup();
    // Read at boot-clock 10 s; the RTC-less wall clock says 1970.
    let unsynced = read("SN1", capture_time(10_000, "boot-b", 10_000, false));
    // Read in an earlier boot, also unsynced: nothing can re-derive it.
    let old_boot = read("SN2", capture_time(20_000, "boot-a", 500, false));
    store
        .admit("f1", &[unsynced.clone(), old_boot.clone()])
        .unwrap();

    // The claimer's clock, still unsynchronised, 5 s of boot time later.
    let r = scangate::daemon::claimer::round(
        &mut store,
        &mut gate,
        Some(&mut facility),
        "",
        &capture_time(15_000, "boot-b", 15_000, false),
    )
    .unwrap();
    let verdict_of = |uuid: &uuid::Uuid| {
        r.decisions
            .iter()
            .find(|d| d.scan_uuid == uuid.to_string())
            .map(|d| d.verdict.clone())
    };
    assert!(
        matches!(verdict_of(&unsynced.uuid), Some(Verdict::Unresolved { reason }) if reason.contains("NTP")),
        "{:?}",
        r.decisions
    );
    assert_eq!(verdict_of(&old_boot.uuid), Some(Verdict::Committed));
    assert_eq!(r.waiting_for_clock, 1, "the claimer must look again soon");
    assert_eq!(redis.ledger("f1").len(), 1);

    // NTP syncs: boot-clock 60 s is true time T0 + 50 s.
    let r = scangate::daemon::claimer::round(
        &mut store,
        &mut gate,
        Some(&mut facility),
        "",
        &capture_time(T0 + 50_000, "boot-b", 60_000, true),
    )
    .unwrap();
    assert_eq!(r.decisions.len(), 1);
    assert_eq!(r.waiting_for_clock, 0);
    assert_eq!(r.decisions[0].verdict, Verdict::Committed);
    // Its capture time is the true one: T0 + 50 s - (60 s - 10 s) = T0.
    let mut c = redis.connection();
    let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg("scangate:{f1}:ledger")
        .arg("-")
        .arg("+")
        .query(&mut c)
        .unwrap();
    let captured: Vec<&str> = entries
        .iter()
        .flat_map(|(_, f)| {
            f.iter()
                .filter(|(k, _)| k == "captured_at")
                .map(|(_, v)| v.as_str())
        })
        .collect();
    assert!(
        captured.contains(&"2027-01-15T08:00:00.000Z"),
        "{captured:?}"
    );
    let exported = {
        let mut all = Vec::new();
        scangate::ledger::for_each(&store, None, |e| {
            all.push(e);
            Ok(())
        })
        .unwrap();
        all
    };
    let local = exported
        .iter()
        .find(|e| e.scan_uuid == unsynced.uuid.to_string())
        .expect("in the local ledger");
    assert_eq!(local.captured_at, "2027-01-15T08:00:00.000Z");
    assert!(local.clock_synced);
}

#[test]
fn a_round_of_scans_all_waiting_for_ntp_does_not_ask_for_another_at_once() {
    let (_root, redis, mut store, mut gate, mut facility) = setup();
    let n = scangate::gate::facility::ROUND as i64 + 5;
    let scans: Vec<Scan> = (0..n)
        .map(|i| {
            let serial = format!("SN{i}");
            read(&serial, capture_time(i, "boot-b", 1000 + i, false))
        })
        .collect();
    store.admit("f1", &scans).unwrap();
    let unsynced_now = capture_time(5_000, "boot-b", 5_000, false);
    let r = scangate::daemon::claimer::round(
        &mut store,
        &mut gate,
        Some(&mut facility),
        "",
        &unsynced_now,
    )
    .unwrap();
    assert_eq!(r.waiting_for_clock, r.open);
    // Every scan of the round waits for the clock: going again at once would
    // only pick the same scans (a busy loop); the claimer polls the clock.
    assert!(!r.more);
    assert!(redis.ledger("f1").is_empty());
}

#[test]
fn a_new_scan_waits_behind_a_backlog_scan_of_its_label_read_before_ntp_sync() {
    let (_root, redis, mut store, mut gate, mut facility) = setup();
    let round = scangate::gate::facility::ROUND as i64;
    // An outage on an RTC-less boot: more than a round of reads before NTP
    // sync (wall clock near 1970); the last one is label K.
    let scans: Vec<Scan> = (0..=round)
        .map(|i| {
            let serial = if i == round {
                "SN-K".into()
            } else {
                format!("SN{i}")
            };
            read(&serial, capture_time(i, "boot-b", 1000 + i, false))
        })
        .collect();
    let last = scans.last().unwrap().clone();
    store.admit("f1", &scans).unwrap();
    let mut audited = 0;
    loop {
        let r = scangate::daemon::claimer::round(
            &mut store,
            &mut gate,
            None,
            "Redis is down",
            &capture_time(5_000, "boot-b", 5_000, false),
        )
        .unwrap();
        audited += r.decisions.len() as i64;
        if !r.more {
            break;
        }
    }
    assert_eq!(audited, round + 1, "all audited unresolved");

    // NTP syncs: boot-clock 100 s is T0 + 100 s, so K was read at T0 + 1000 + round
    // ms. A re-scan of K one second later arrives, already on synced time.
    let synced = capture_time(T0 + 100_000, "boot-b", 100_000, true);
    let echo = read(
        "SN-K",
        capture_time(T0 + 2000 + round, "boot-b", 2000 + round, true),
    );
    store.admit("f1", std::slice::from_ref(&echo)).unwrap();
    let r =
        scangate::daemon::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &synced)
            .unwrap();
    assert!(r.more);
    // K's wall time is still the untrusted one: the echo must not go ahead.
    assert_eq!(verdict(&store, &echo), Verdict::Pending);
    while scangate::daemon::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &synced)
        .unwrap()
        .open
        > 0
    {}
    assert_eq!(verdict(&store, &last), Verdict::Committed);
    assert_eq!(
        verdict(&store, &echo),
        Verdict::Suppressed {
            twin: last.uuid.to_string()
        }
    );
    assert_eq!(redis.ledger("f1").len() as i64, round + 1);
}
