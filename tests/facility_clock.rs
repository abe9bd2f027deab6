//! Facility claims on facility time: a capture's boot-clock stamp mapped
//! through the gateway's measurements of the facility clock; a scan whose
//! capture cannot be mapped within `max_clock_error_ms` waits. Real SQLite
//! file, real redis-server; the measurements are given to the gate as the
//! claimer would (`FacilityGate::learn_clock`), the claimer's own clock is the
//! `now` argument of `claimer::round`.
//!
//! Then the real binary (PTY scanners, libfaketime): a kernel clock that
//! says "unsynchronised" still claims at once; a gateway whose wall clock
//! is off measures the offset and says so; a wall clock off, or stepped
//! mid-shift, doubles no pick and misses none.

use crate::util::*;
use scangate::capture::{CaptureTime, Scan};
use scangate::model::Verdict;
use std::path::Path;

const T0: i64 = 1_800_000_000_000; // the true time of the read (UTC ms)

/// A gate on facility time (bound 250 ms), with its store, its own
/// redis-server and the connection to it.
fn setup() -> (
    tempfile::TempDir,
    RedisServer,
    scangate::store::Store,
    scangate::claimer::FacilityGate,
    scangate::facility::Facility,
) {
    let (root, redis, store, mut gate, facility) = facility_rig("scangate-clock-");
    gate.set_facility_time(250);
    (root, redis, store, gate, facility)
}

/// A read of label `serial` by counter scanner `c1` (dispense, quantity 1).
fn read(serial: &str, time: CaptureTime) -> Scan {
    scan(&dispense("c1"), dscsa(serial), time)
}

/// The facility ledger's `captured_at` values.
fn facility_captured_at(redis: &RedisServer) -> Vec<String> {
    let mut c = redis.connection();
    let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg("scangate:{f1}:ledger")
        .arg("-")
        .arg("+")
        .query(&mut c)
        .unwrap();
    entries
        .into_iter()
        .flat_map(|(_, f)| f.into_iter().filter(|(k, _)| k == "captured_at"))
        .map(|(_, v)| v)
        .collect()
}

/// Audit record `a` has a reason, and it says `what`.
fn assert_reason(a: &serde_json::Value, what: &str) {
    let reason = a["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(what), "{a}");
}

#[test]
fn a_read_before_the_facility_clock_is_measured_waits_then_is_claimed_on_facility_time() {
    let (_root, redis, mut store, mut gate, mut facility) = setup();
    // Read at boot-clock 10 s; the RTC-less wall clock says 1970 and the
    // kernel calls it unsynchronised.
    let early = read("SN1", capture_time(10_000, "boot-b", 10_000, false));
    // Read in an earlier boot the facility clock was never measured in.
    let old_boot = read("SN2", capture_time(20_000, "boot-a", 500, false));
    store
        .admit("f1", &[early.clone(), old_boot.clone()])
        .unwrap();

    let now = capture_time(15_000, "boot-b", 15_000, false);
    let r = scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now).unwrap();
    let verdict_of = |uuid: &uuid::Uuid| {
        r.decisions
            .iter()
            .find(|d| d.scan_uuid == uuid.to_string())
            .map(|d| d.verdict.clone())
    };
    assert!(
        matches!(verdict_of(&early.uuid), Some(Verdict::Unresolved { reason }) if reason.contains("facility clock has not been measured in this boot")),
        "{:?}",
        r.decisions
    );
    // Nothing will ever measure that boot: claimed on its wall stamp, and
    // its audit record says so.
    assert_eq!(verdict_of(&old_boot.uuid), Some(Verdict::Committed));
    assert!(
        audit_of(&store, &old_boot)["reason"]
            .as_str()
            .unwrap()
            .contains("never measured in"),
    );
    assert_eq!(r.waiting_for_clock, 1, "the claimer must look again soon");
    assert_eq!(redis.ledger("f1").len(), 1);

    // Measured at boot-clock 60 s: facility time T0 + 50 s (± 2 ms). The
    // wall clock is still unsynchronised: the facility is the reference.
    gate.learn_clock(
        &mut store,
        &clock_sample("boot-b", 60_000, T0 + 50_000, 2.0),
    )
    .unwrap();
    let r = scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now).unwrap();
    assert_eq!(r.decisions.len(), 1);
    assert_eq!(r.waiting_for_clock, 0);
    assert_eq!(r.decisions[0].verdict, Verdict::Committed);
    // Its facility time: T0 + 50 s - (60 s - 10 s) = T0, in both ledgers.
    assert!(
        facility_captured_at(&redis).contains(&"2027-01-15T08:00:00.000Z".to_string()),
        "{:?}",
        facility_captured_at(&redis)
    );
    let mut local = None;
    scangate::ledger::for_each(&store, None, |e| {
        if e.scan_uuid == early.uuid.to_string() {
            local = Some(e);
        }
        Ok(())
    })
    .unwrap();
    let local = local.expect("in the local ledger");
    assert_eq!(local.captured_at, "2027-01-15T08:00:00.000Z");
    assert!(local.clock_synced, "on a trusted clock: the facility's");
    // The audit record keeps the gateway's own stamp and the offset used:
    // 2 ms bound + 100 ppm of the 50 s to the measurement = 7 ms.
    let a = audit_of(&store, &early);
    assert_eq!(a["captured_at"], "1970-01-01T00:00:10.000Z");
    assert_eq!(a["clock_synced"], false);
    assert_eq!(a["facility_at"], "2027-01-15T08:00:00.000Z");
    assert_eq!(a["clock_offset_ms"], T0 - 10_000);
    assert_eq!(a["clock_error_ms"], 7);
}

#[test]
fn a_read_too_far_from_any_measurement_waits_until_one_is_close_enough() {
    let (_root, redis, mut store, mut gate, mut facility) = setup();
    // Read at boot-clock 1 h; the one measurement is at 0 h: 100 ppm of an
    // hour is 360 ms, beyond the 250 ms bound.
    gate.learn_clock(&mut store, &clock_sample("boot-b", 0, T0, 1.0))
        .unwrap();
    let far = read(
        "SN1",
        capture_time(T0 + 3_600_000, "boot-b", 3_600_000, true),
    );
    store.admit("f1", std::slice::from_ref(&far)).unwrap();
    let now = capture_time(T0 + 3_600_500, "boot-b", 3_600_500, true);
    let r = scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now).unwrap();
    assert!(
        matches!(&r.decisions[0].verdict, Verdict::Unresolved { reason } if reason.contains("max_clock_error_ms = 250")),
        "{:?}",
        r.decisions
    );
    assert!(redis.ledger("f1").is_empty());
    // The next measurement, a second after the read, maps it (interpolated
    // between the two): claimed.
    gate.learn_clock(
        &mut store,
        &clock_sample("boot-b", 3_601_000, T0 + 3_601_000, 1.0),
    )
    .unwrap();
    let r = scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now).unwrap();
    assert_eq!(r.decisions[0].verdict, Verdict::Committed);
    assert_eq!(audit_of(&store, &far)["clock_error_ms"], 2);
}

#[test]
fn a_read_no_measurement_can_map_closer_is_claimed_and_its_record_says_how_far_off() {
    let (_root, redis, mut store, mut gate, mut facility) = setup();
    // Read an hour before this boot's first measurement (a gateway that
    // started during an outage): 100 ppm of an hour is 360 ms, and no
    // measurement before it can ever be taken.
    gate.learn_clock(
        &mut store,
        &clock_sample("boot-b", 3_600_000, T0 + 3_600_000, 1.0),
    )
    .unwrap();
    let early = read("SN1", capture_time(5, "boot-b", 0, false));
    store.admit("f1", std::slice::from_ref(&early)).unwrap();
    let now = capture_time(T0 + 3_600_500, "boot-b", 3_600_500, true);
    let r = scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now).unwrap();
    assert_eq!(r.decisions[0].verdict, Verdict::Committed);
    assert_eq!(redis.ledger("f1").len(), 1);
    let a = audit_of(&store, &early);
    assert_eq!(a["clock_error_ms"], 361);
    assert_reason(&a, "no later measurement");
}

/// The facility clock stepped between two measurements (a failover to a
/// server whose clock is 5 s ahead): a read between them is not
/// interpolated across the step (before, its error was a few ms), but
/// mapped through the measurement before it alone, with the step in its
/// error: claimed (no later measurement can place it better), its audit
/// record saying how far off it may be.
#[test]
fn a_read_between_measurements_across_a_clock_step_carries_the_step_in_its_error() {
    let (_root, redis, mut store, mut gate, mut facility) = setup();
    gate.learn_clock(&mut store, &clock_sample("boot-b", 60_000, T0, 1.0))
        .unwrap();
    let between = read("SN1", capture_time(5, "boot-b", 90_000, false));
    store.admit("f1", std::slice::from_ref(&between)).unwrap();
    // Continuous, the facility would read T0 + 60 s: it reads T0 + 65 s.
    gate.learn_clock(
        &mut store,
        &clock_sample("boot-b", 120_000, T0 + 65_000, 1.0),
    )
    .unwrap();
    let now = capture_time(5, "boot-b", 120_500, false);
    let r = scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now).unwrap();
    assert_eq!(r.decisions[0].verdict, Verdict::Committed);
    let a = audit_of(&store, &between);
    // 1 ms bound + 100 ppm of 30 s (3 ms) + the 5 000 ms step.
    assert_eq!(a["clock_error_ms"], 5_004, "{a}");
    assert_eq!(a["facility_at"], "2027-01-15T08:00:30.000Z", "{a}");
    assert_reason(&a, "no later measurement");
    assert_eq!(redis.ledger("f1").len(), 1);
}

#[test]
fn a_round_of_scans_all_waiting_for_the_clock_does_not_ask_for_another_at_once() {
    let (_root, redis, mut store, mut gate, mut facility) = setup();
    let n = scangate::claimer::ROUND as i64 + 5;
    let scans: Vec<Scan> = (0..n)
        .map(|i| {
            let serial = format!("SN{i}");
            read(&serial, capture_time(i, "boot-b", 1000 + i, false))
        })
        .collect();
    store.admit("f1", &scans).unwrap();
    let now = capture_time(5_000, "boot-b", 5_000, false);
    let r = scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now).unwrap();
    assert_eq!(r.waiting_for_clock, r.open);
    // Every scan of the round waits for the clock: going again at once would
    // only pick the same scans (a busy loop); the claimer polls the clock.
    assert!(!r.more);
    assert!(redis.ledger("f1").is_empty());
}

#[test]
fn a_wall_clock_stepped_between_two_reads_of_one_pick_changes_nothing() {
    let (_root, redis, mut store, mut gate, mut facility) = setup();
    gate.learn_clock(&mut store, &clock_sample("boot-b", 1_000, T0 + 1_000, 1.0))
        .unwrap();
    // A double-fire 2 s apart on the boot clock (inside the 3 s window);
    // between them NTP stepped the wall clock back by an hour. On wall
    // stamps they are an hour apart; on facility time 2 s.
    let first = read(
        "SN1",
        capture_time(T0 + 3_600_000 + 5_000, "boot-b", 5_000, false),
    );
    let again = read("SN1", capture_time(T0 + 7_000, "boot-b", 7_000, true));
    store.admit("f1", &[first.clone(), again.clone()]).unwrap();
    let now = capture_time(T0 + 8_000, "boot-b", 8_000, true);
    while scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now)
        .unwrap()
        .open
        > 0
    {}
    assert_eq!(redis.ledger("f1").len(), 1, "one pick, one entry");
    let decided = [verdict(&store, &first), verdict(&store, &again)];
    assert!(
        decided.contains(&Verdict::Committed)
            && decided
                .iter()
                .any(|v| matches!(v, Verdict::Suppressed { .. })),
        "{decided:?}"
    );
}

#[test]
fn a_new_scan_waits_behind_a_backlog_scan_of_its_label_read_on_an_unsynchronised_clock() {
    let (_root, redis, mut store, mut gate, mut facility) = setup();
    let round = scangate::claimer::ROUND as i64;
    // An outage on an RTC-less boot: more than a round of reads on a wall
    // clock near 1970; the last one is label K.
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
        let r = scangate::claimer::round(
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

    // Redis answers; the claimer measures its clock (boot-clock 100 s is
    // T0 + 100 s) and NTP syncs: K was read at T0 + 1000 + round ms. A
    // re-scan of K one second later arrives, on the synced wall clock.
    gate.learn_clock(
        &mut store,
        &clock_sample("boot-b", 100_000, T0 + 100_000, 1.0),
    )
    .unwrap();
    let synced = capture_time(T0 + 100_000, "boot-b", 100_000, true);
    let echo = read(
        "SN-K",
        capture_time(T0 + 2000 + round, "boot-b", 2000 + round, true),
    );
    store.admit("f1", std::slice::from_ref(&echo)).unwrap();
    let r =
        scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &synced).unwrap();
    assert!(r.more);
    // K's wall stamp places it nowhere in capture order: the echo must not
    // go ahead of it.
    assert_eq!(verdict(&store, &echo), Verdict::Pending);
    while scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &synced)
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

// The daemon on facility time: gateways of a redis-server of the test's
// own, one of them under libfaketime.

/// The default `[redis]` on a kernel clock that says "unsynchronised"
/// (these machines' own: containers, air-gapped LANs that block NTP): the
/// facility clock is the reference, so scans are claimed at once, on
/// facility time, and the audit keeps the gateway's own stamp beside it.
#[test]
fn an_unsynchronised_kernel_clock_still_claims_at_once_on_facility_time() {
    let (root, redis) = facility(&[]);
    let mut g = Gateway::roaming(root.path(), "gw-a", &redis);
    g.start();
    g.send(&dscsa("SN001"));
    g.send(&dscsa("SN001")); // double-fire
    assert_eq!(g.replies(2), [ACK, ACK]);
    let st = wait_all_decided(&g.cfg, 2);
    assert_eq!(
        (count(&st, "committed"), count(&st, "suppressed")),
        (1, 1),
        "{st}"
    );
    assert_each_pick_once(&redis, 1);
    let db = open_db(&g.state.clone());
    let committed = audit_records(&db)
        .into_iter()
        .find(|r| r.contains("\"decision\":\"committed\""))
        .unwrap();
    let record: serde_json::Value = serde_json::from_str(&committed).unwrap();
    assert!(record["facility_at"].is_string(), "{record}");
    assert!(
        record["clock_error_ms"].as_i64().unwrap() <= 250,
        "{record}"
    );
    assert_eq!(
        record["clock_synced"],
        scangate::capture::clock::clock_synced(),
        "the gateway's own clock state, as it was: {record}"
    );
    g.stop();
}

/// A gateway whose wall clock is 1.5 s ahead (an RTC-less board not yet
/// synchronised; libfaketime here) measures the facility Redis's clock at
/// start: the offset, within its bound, is in `outbox status`, and a WARN
/// names it and the fix. A gateway on the true clock measures about zero
/// and warns of nothing.
#[test]
fn a_gateway_whose_clock_is_off_measures_the_offset_and_says_so() {
    let (root, redis) = facility(&[]);
    let mut fast = Gateway::roaming(root.path(), "gw-fast", &redis);
    let preload = libfaketime();
    fast.start_with_env(&[
        ("LD_PRELOAD", &preload),
        ("FAKETIME", "+1.5s"),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ]);
    let mut honest = Gateway::roaming(root.path(), "gw-true", &redis);
    honest.start();
    let offset = |g: &Gateway| {
        let st = outbox_status(&g.cfg);
        let clock = &st["facility_clock"];
        (
            clock["offset_ms"]
                .as_f64()
                .unwrap_or_else(|| panic!("{st}")),
            clock["bound_ms"].as_f64().unwrap(),
        )
    };
    // (The slack covers the time between the two clock reads a sample
    // takes, which the bound does not.)
    let (off, bound) = offset(&fast);
    assert!(
        (off + 1500.0).abs() <= bound + 50.0,
        "offset {off} ± {bound} ms"
    );
    let log = fast.daemon().log();
    assert!(log.contains("s ahead of the facility Redis's"), "{log}");
    assert!(
        log.contains("Fix: synchronise this gateway's clock"),
        "{log}"
    );
    let text: Outcome = cli_cfg(&fast.cfg, &["outbox", "status"]).into();
    assert!(
        text.stdout.contains("ahead of the facility Redis's"),
        "{text}"
    );
    let (off, bound) = offset(&honest);
    assert!(off.abs() <= bound + 50.0, "offset {off} ± {bound} ms");
    let log = honest.daemon().log();
    assert!(
        !log.contains("Fix: synchronise this gateway's clock"),
        "{log}"
    );
    fast.stop();
    honest.stop();
}

/// Two gateways hearing one shared scanner, `b` started under libfaketime
/// with the offset in `clock` (a file it re-reads: the test may step it),
/// both with a 1 s echo window — as the issue measured it.
fn two_gateways_one_clock_off(
    root: &Path,
    redis: &RedisServer,
    clock: &Path,
) -> (Gateway, Gateway) {
    let mut a = Gateway::roaming(root, "gw-a", redis);
    let mut b = Gateway::roaming(root, "gw-b", redis);
    a.set_window_ms(1000);
    b.set_window_ms(1000);
    a.start();
    let preload = libfaketime();
    b.start_with_env(&[
        ("LD_PRELOAD", &preload),
        ("FAKETIME_TIMESTAMP_FILE", clock.to_str().unwrap()),
        ("FAKETIME_NO_CACHE", "1"),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ]);
    (a, b)
}

/// `picks` roaming picks SN{from}…, each heard by both gateways, and
/// every transmission decided.
fn roam_from(a: &mut Gateway, b: &mut Gateway, from: usize, picks: usize) {
    for i in from..from + picks {
        let label = dscsa(&format!("SN{i:03}"));
        a.send(&label);
        b.send(&label);
    }
    wait_all_decided(&a.cfg, (from + picks) as i64);
    wait_all_decided(&b.cfg, (from + picks) as i64);
}

/// Gateway b's wall clock 1.5 s ahead of a's (an RTC-less Pi that has not
/// synced), then 0.4 s: on wall stamps a 1 s window doubles most picks;
/// on facility time none.
#[test]
fn a_gateway_whose_wall_clock_is_off_doubles_no_pick_and_misses_none() {
    for offset in ["+1.5s", "+0.4s"] {
        let (root, redis) = facility(&[]);
        let clock = root.path().join("faketime");
        std::fs::write(&clock, offset).unwrap();
        let (mut a, mut b) = two_gateways_one_clock_off(root.path(), &redis, &clock);
        roam_from(&mut a, &mut b, 0, 25);
        assert_each_pick_once(&redis, 25);
        assert_eq!(a.count("committed") + b.count("committed"), 25, "{offset}");
        let (off, _) = {
            let st = outbox_status(&b.cfg);
            (st["facility_clock"]["offset_ms"].as_f64().unwrap(), st)
        };
        let want = -offset.trim_end_matches('s').parse::<f64>().unwrap() * 1000.0;
        assert!((off - want).abs() < 100.0, "{offset}: measured {off} ms");
        a.stop();
        b.stop();
    }
}

/// Gateway b's wall clock is stepped 1.5 s forward mid-shift (NTP, an
/// operator): captures stay on the boot clock's facility time, so the
/// picks after the step are judged as before it.
#[test]
fn a_wall_clock_stepped_mid_shift_doubles_no_pick() {
    let (root, redis) = facility(&[]);
    let clock = root.path().join("faketime");
    std::fs::write(&clock, "+0s").unwrap();
    let (mut a, mut b) = two_gateways_one_clock_off(root.path(), &redis, &clock);
    roam_from(&mut a, &mut b, 0, 10);
    std::fs::write(&clock, "+1.5s").unwrap();
    roam_from(&mut a, &mut b, 10, 15);
    assert_each_pick_once(&redis, 25);
    assert_eq!(a.count("committed") + b.count("committed"), 25);
    for g in [&a, &b] {
        audit_verify(&g.cfg);
    }
    a.stop();
    b.stop();
}
