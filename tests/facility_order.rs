//! Replay order after an outage: new scans are claimed ahead of the backlog
//! unless an older waiting scan has their content key within the window —
//! and the decisions are exactly those of strict capture order.
//! Real SQLite file, real redis-server; rounds driven through the gate.

use crate::util::*;
use scangate::capture::{CaptureTime, Profile, Scan};
use scangate::claimer::{LaneKind, ROUND};
use scangate::model::Verdict;

const T0: i64 = 1_800_000_000_000;

/// A read of label `serial` by `profile`, `at_ms` after T0 (synchronised
/// clock, boot `boot-a`).
fn read(profile: &Profile, serial: &str, at_ms: i64) -> Scan {
    scan(
        profile,
        dscsa(serial),
        capture_time(T0 + at_ms, "boot-a", at_ms, true),
    )
}

#[test]
fn new_scans_overtake_the_backlog_only_where_order_cannot_matter() {
    let (_root, redis, mut store, mut gate, mut facility) = facility_rig("scangate-order-");
    let profile = dispense("c1");
    let now = CaptureTime::now();

    // An outage: B first, then filler, then A last — more than two rounds.
    let b = read(&profile, "SN-B", 0);
    let mut backlog = vec![b.clone()];
    for i in 1..(2 * ROUND as i64 + 10) {
        backlog.push(read(&profile, &format!("SN-{i}"), i * 10));
    }
    let a = read(&profile, "SN-A", 60_000);
    backlog.push(a.clone());
    store.admit("f1", &backlog).unwrap();
    loop {
        let r =
            scangate::claimer::round(&mut store, &mut gate, None, "Redis is down", &now).unwrap();
        if !r.more {
            break;
        }
    }
    assert!(matches!(verdict(&store, &a), Verdict::Unresolved { .. }));
    assert!(matches!(verdict(&store, &b), Verdict::Unresolved { .. }));

    // Redis is back; new scans arrive behind the backlog:
    let l1 = read(&profile, "SN-A", 61_000); // echo of A, within the window
    let l2 = read(&profile, "SN-NEW", 61_500); // a new pick
    let l3 = read(&profile, "SN-B", 62_000); // same label as B, 62 s later
    let l4 = read(&profile, "SN-A", 62_500); // echo of the held-back l1
    store
        .admit("f1", &[l1.clone(), l2.clone(), l3.clone(), l4.clone()])
        .unwrap();

    let r = scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now).unwrap();
    assert!(r.more, "the backlog is longer than one round");
    assert_eq!(r.facility_error, None);
    // The oldest of the backlog, and the new scans that cannot interact with
    // anything still waiting, are decided in the first round.
    assert_eq!(verdict(&store, &b), Verdict::Committed);
    assert_eq!(verdict(&store, &l2), Verdict::Committed);
    assert_eq!(verdict(&store, &l3), Verdict::Committed);
    // The echo of A waits for A, and l4 waits for l1.
    assert_eq!(verdict(&store, &l1), Verdict::Pending);
    assert_eq!(verdict(&store, &l4), Verdict::Pending);
    assert!(matches!(verdict(&store, &a), Verdict::Unresolved { .. }));

    while scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now)
        .unwrap()
        .open
        > 0
    {}
    // Exactly the decisions of strict capture order.
    assert_eq!(verdict(&store, &a), Verdict::Committed);
    let twin_a = Verdict::Suppressed {
        twin: a.uuid.to_string(),
    };
    assert_eq!(verdict(&store, &l1), twin_a);
    assert_eq!(verdict(&store, &l4), twin_a);
    let ledger = redis.ledger("f1");
    assert_eq!(ledger.len(), backlog.len() + 2, "backlog + l2 + l3");
}

#[test]
fn a_round_refused_for_its_settings_keeps_its_local_echoes_open_too() {
    let (_root, _redis, mut store, mut gate, mut facility) = facility_rig("scangate-order-");
    let profile = dispense("c1");
    let now = CaptureTime::now();
    let first = read(&profile, "SN-1", 0);
    store.admit("f1", std::slice::from_ref(&first)).unwrap();
    let r = scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now).unwrap();
    assert_eq!(r.decisions[0].verdict, Verdict::Committed);

    // A re-read of this gateway's commit and a new pick, in one round: the
    // echo is decided locally at pick time, the new pick is claimed.
    let echo = read(&profile, "SN-1", 1000);
    let new = read(&profile, "SN-2", 1100);
    store.admit("f1", &[echo.clone(), new.clone()]).unwrap();
    let mut picked =
        scangate::claimer::pick(&store, &mut gate, LaneKind::Live, &[], &now, true).unwrap();
    assert_eq!(picked.claims(&gate).len(), 1, "the echo is decided locally");
    // The facility refused the claim for its window (another gateway reset
    // the settings): the echo, judged by that window, is withdrawn too.
    picked.withdraw_local_echoes();
    let round =
        scangate::claimer::record(&mut store, &mut gate, picked, Err("settings differ".into()))
            .unwrap();
    assert_eq!(round.decisions.len(), 2);
    for scan in [&echo, &new] {
        let v = verdict(&store, scan);
        assert!(matches!(v, Verdict::Unresolved { .. }), "{v:?}");
    }
    // While the refusal lasts, no pick decides an echo locally: the replay
    // lane claims the waiting echo, and a new re-read waits behind it.
    let again = read(&profile, "SN-1", 1500);
    store.admit("f1", std::slice::from_ref(&again)).unwrap();
    gate.set_local_echoes(false);
    let replay =
        scangate::claimer::pick(&store, &mut gate, LaneKind::Replay, &[], &now, true).unwrap();
    assert_eq!(replay.claims(&gate).len(), 2, "the echo is claimed too");
    let live = scangate::claimer::pick(&store, &mut gate, LaneKind::Live, &[], &now, true).unwrap();
    assert_eq!((live.claims(&gate).len(), live.held()), (0, 1));
    // Offline, the re-read is not suppressed by this gateway's window either.
    let offline =
        scangate::claimer::pick(&store, &mut gate, LaneKind::Live, &[], &now, false).unwrap();
    assert_eq!(offline.claims(&gate).len(), 1, "left to the facility");
}

/// The claimer's two lanes, driven step by step: a new scan is held back
/// while the replay lane has an older scan of its label in flight (still
/// `unresolved` in the outbox), goes ahead otherwise, and once the replay
/// recorded its commit the live lane knows it as exactly as its own — the
/// lanes share one Bloom filter (without that, the live lane's filter would
/// say "never committed" and the echo would wait for Redis as unresolved).
#[test]
fn the_live_lane_waits_for_a_replay_in_flight_and_knows_what_it_committed() {
    let (_root, _redis, mut store, mut replay, mut facility) = facility_rig("scangate-order-");
    let mut live = replay.lane();
    let mut live_store = store.companion().unwrap();
    let profile = dispense("c1");
    let now = CaptureTime::now();

    // An outage left A and B waiting.
    let a = read(&profile, "SN-A", 0);
    let b = read(&profile, "SN-B", 10);
    store.admit("f1", &[a.clone(), b.clone()]).unwrap();
    let r = scangate::claimer::round(&mut store, &mut replay, None, "Redis is down", &now).unwrap();
    assert_eq!(r.decisions.len(), 2);

    // Redis answers; the replay lane picks the backlog and claims it.
    let backlog =
        scangate::claimer::pick(&store, &mut replay, LaneKind::Replay, &[], &now, true).unwrap();
    assert_eq!(backlog.claims(&replay).len(), 2);
    // Meanwhile at the counter: an echo of A and a new pick.
    let echo = read(&profile, "SN-A", 1000);
    let new = read(&profile, "SN-C", 1100);
    live_store
        .admit("f1", &[echo.clone(), new.clone()])
        .unwrap();
    let ahead =
        scangate::claimer::pick(&live_store, &mut live, LaneKind::Live, &[], &now, true).unwrap();
    let claims = ahead.claims(&replay);
    assert_eq!(ahead.held(), 1, "the echo of A waits for A");
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].scan_uuid, new.uuid.to_string());
    let outcomes = facility.claim_batch(&claims).unwrap();
    scangate::claimer::record(&mut live_store, &mut live, ahead, Ok(outcomes)).unwrap();
    assert_eq!(verdict(&store, &new), Verdict::Committed);

    // The replay's claims are answered and written.
    let outcomes = facility.claim_batch(&backlog.claims(&replay)).unwrap();
    scangate::claimer::record(&mut store, &mut replay, backlog, Ok(outcomes)).unwrap();
    // Offline now, the live lane still suppresses the echo by itself: it
    // knows A, which the other lane committed.
    let offline =
        scangate::claimer::pick(&live_store, &mut live, LaneKind::Live, &[], &now, false).unwrap();
    assert!(offline.claims(&replay).is_empty(), "decided locally");
    scangate::claimer::record(
        &mut live_store,
        &mut live,
        offline,
        Err("Redis is down".into()),
    )
    .unwrap();
    assert_eq!(
        verdict(&store, &echo),
        Verdict::Suppressed {
            twin: a.uuid.to_string()
        }
    );
    assert_eq!(verdict(&store, &b), Verdict::Committed);
}

/// A backlog scan read after a new one of the same label (the wall clock
/// was stepped back between them, so the new one was admitted later but
/// captured earlier) waits in the replay lane until the live lane has
/// claimed the new one: strict capture order commits the earlier read.
#[test]
fn the_replay_waits_for_an_earlier_new_scan_of_its_label() {
    let (_root, redis, mut store, mut replay, mut facility) = facility_rig("scangate-order-");
    let mut live = replay.lane();
    let profile = dispense("c1");
    let now = CaptureTime::now();
    let later = read(&profile, "SN-A", 105);
    store.admit("f1", std::slice::from_ref(&later)).unwrap();
    scangate::claimer::round(&mut store, &mut replay, None, "Redis is down", &now).unwrap();
    let earlier = read(&profile, "SN-A", 100);
    store.admit("f1", std::slice::from_ref(&earlier)).unwrap();

    let waiting =
        scangate::claimer::pick(&store, &mut replay, LaneKind::Replay, &[], &now, true).unwrap();
    assert_eq!((waiting.claims(&replay).len(), waiting.held()), (0, 1));
    let new = scangate::claimer::pick(&store, &mut live, LaneKind::Live, &[], &now, true).unwrap();
    assert_eq!((new.claims(&replay).len(), new.held()), (1, 0));
    let outcomes = facility.claim_batch(&new.claims(&replay)).unwrap();
    scangate::claimer::record(&mut store, &mut live, new, Ok(outcomes)).unwrap();
    let r =
        scangate::claimer::round(&mut store, &mut replay, Some(&mut facility), "", &now).unwrap();
    assert_eq!(r.decisions.len(), 1);

    assert_eq!(verdict(&store, &earlier), Verdict::Committed);
    assert_eq!(
        verdict(&store, &later),
        Verdict::Suppressed {
            twin: earlier.uuid.to_string()
        }
    );
    assert_eq!(redis.ledger("f1").len(), 1);
}

/// A backlog scan stamped on an unsynchronised wall clock has no trusted
/// place in capture order, so the
/// replay lane does not compare it with new scans by it (it would wait for
/// a new scan that, by the clock stepped back since, looks earlier — while
/// the live lane holds that scan until this one is decided, whatever the
/// times: neither would ever go). It is put on facility time from its boot
/// clock and claimed; the new scan goes after it, an echo of it.
#[test]
fn a_backlog_scan_without_a_trusted_time_never_waits_for_a_new_one() {
    let (_root, redis, mut store, mut replay, mut facility) = facility_rig("scangate-order-");
    replay.set_facility_time(250);
    replay
        .learn_clock(&mut store, &clock_sample("boot-a", 0, T0, 1.0))
        .unwrap();
    let mut live = replay.lane();
    let profile = dispense("c1");
    let at = |utc_ms: i64, boot_ms: i64, synced: bool| {
        capture_time(T0 + utc_ms, "boot-a", boot_ms, synced)
    };
    // Read with the clock running ahead, before NTP synced; then NTP
    // stepped it back, and the label was read again.
    let first = scan(&profile, dscsa("SN-A"), at(105, 105, false));
    store.admit("f1", std::slice::from_ref(&first)).unwrap();
    let unsynced_now = at(150, 150, false);
    scangate::claimer::round(
        &mut store,
        &mut replay,
        None,
        "Redis is down",
        &unsynced_now,
    )
    .unwrap();
    let again = scan(&profile, dscsa("SN-A"), at(100, 200, true));
    store.admit("f1", std::slice::from_ref(&again)).unwrap();

    let now = at(10_000, 10_000, true);
    let backlog =
        scangate::claimer::pick(&store, &mut replay, LaneKind::Replay, &[], &now, true).unwrap();
    assert_eq!((backlog.claims(&replay).len(), backlog.held()), (1, 0));
    let new = scangate::claimer::pick(&store, &mut live, LaneKind::Live, &[], &now, true).unwrap();
    assert_eq!((new.claims(&replay).len(), new.held()), (0, 1));
    let outcomes = facility.claim_batch(&backlog.claims(&replay)).unwrap();
    scangate::claimer::record(&mut store, &mut replay, backlog, Ok(outcomes)).unwrap();
    // Now the re-read goes: an echo of this gateway's own commit (on the
    // boot clock), decided locally.
    let new = scangate::claimer::pick(&store, &mut live, LaneKind::Live, &[], &now, true).unwrap();
    assert_eq!((new.claims(&replay).len(), new.held()), (0, 0));
    scangate::claimer::record(&mut store, &mut live, new, Ok(Vec::new())).unwrap();

    assert_eq!(verdict(&store, &first), Verdict::Committed);
    assert_eq!(
        verdict(&store, &again),
        Verdict::Suppressed {
            twin: first.uuid.to_string()
        }
    );
    assert_eq!(redis.ledger("f1").len(), 1);
}

/// The two lanes record their rounds in another order than the facility
/// store ran them: here the store commits the live lane's pick M, then the
/// replay lane's backlog scan A, and the replay lane writes its verdict
/// first, so M is the newest entry of the local ledger. The store is then
/// restored from a snapshot taken between the two (it has M, not A). The
/// newest ledger entry alone would not tell (before, a claim checked only
/// it: A was missing from the facility for good); each lane's latest
/// commit is a marker too, so the next claim is refused naming A.
#[test]
fn a_lost_commit_of_either_lane_is_detected_whatever_order_the_lanes_recorded_in() {
    let (_root, mut redis, mut store, mut replay, mut facility) = facility_rig("scangate-order-");
    let mut live = replay.lane();
    let mut live_store = store.companion().unwrap();
    let profile = dispense("c1");
    let now = CaptureTime::now();
    let retention = std::time::Duration::from_secs(72 * 3600);

    let a = read(&profile, "SN-A", 0);
    store.admit("f1", std::slice::from_ref(&a)).unwrap();
    scangate::claimer::round(&mut store, &mut replay, None, "Redis is down", &now).unwrap();
    let m = read(&profile, "SN-M", 1000);
    live_store.admit("f1", std::slice::from_ref(&m)).unwrap();
    let ahead =
        scangate::claimer::pick(&live_store, &mut live, LaneKind::Live, &[], &now, true).unwrap();
    let backlog =
        scangate::claimer::pick(&store, &mut replay, LaneKind::Replay, &[], &now, true).unwrap();
    let mut ahead = ahead;
    let mut backlog = backlog;
    let live_answer = facility.claim_batch(&ahead.claims(&replay)).unwrap();
    ahead.answered_by(&facility);
    let _: () = redis::cmd("SAVE").query(&mut redis.connection()).unwrap();
    let replay_answer = facility.claim_batch(&backlog.claims(&replay)).unwrap();
    backlog.answered_by(&facility);
    scangate::claimer::record(&mut store, &mut replay, backlog, Ok(replay_answer)).unwrap();
    scangate::claimer::record(&mut live_store, &mut live, ahead, Ok(live_answer)).unwrap();
    assert_eq!(verdict(&store, &a), Verdict::Committed);
    assert_eq!(verdict(&store, &m), Verdict::Committed);

    redis.restart();
    let connect = std::time::Duration::from_secs(2);
    let mut facility = scangate::facility::Facility::connect(
        &redis.url(),
        "f1",
        3000,
        retention,
        connect,
        connect,
    )
    .unwrap();
    assert!(facility.has_decision(&m.uuid.to_string()).unwrap());
    assert!(
        !facility.has_decision(&a.uuid.to_string()).unwrap(),
        "restored from the snapshot taken before A's claim"
    );

    let markers =
        scangate::claimer::markers(&store, live.facility_now(), retention.as_millis() as i64);
    assert_eq!(markers, vec![m.uuid.to_string(), a.uuid.to_string()]);
    let n = read(&profile, "SN-N", 2000);
    live_store.admit("f1", std::slice::from_ref(&n)).unwrap();
    let next =
        scangate::claimer::pick(&live_store, &mut live, LaneKind::Live, &[], &now, true).unwrap();
    match facility.claim_batch_checked(&next.claims(&replay), &markers) {
        Err(scangate::facility::FacilityError::Lost { marker, .. }) => {
            assert_eq!(marker, a.uuid.to_string())
        }
        other => panic!("expected the loss of A to be found, got {other:?}"),
    }
    assert_eq!(redis.ledger("f1").len(), 1, "nothing was claimed: only M");
}

/// A backlog older than the facility's retention (a gateway cut off from
/// Redis for longer): the facility store keeps capture times for the
/// retention only, so another gateway's read of the same pick may be
/// forgotten there. The scan is committed (a pick must not go missing
/// from the ledger), and its audit record says it was claimed past the
/// retention; one captured within it says nothing of the kind.
#[test]
fn a_scan_claimed_past_the_facility_retention_is_committed_and_audited_as_such() {
    let (_root, _redis, mut store, mut gate, mut facility) = facility_rig("scangate-order-");
    let profile = dispense("c1");
    let now = CaptureTime::now();
    let hour = 3_600_000;
    let at = |serial: &str, ago_ms: i64| {
        scan(
            &profile,
            dscsa(serial),
            capture_time(now.utc_ms - ago_ms, "boot-a", 1000, true),
        )
    };
    let old = at("SN-OLD", 73 * hour);
    let young = at("SN-YOUNG", 71 * hour);
    store.admit("f1", &[old.clone(), young.clone()]).unwrap();
    scangate::claimer::round(&mut store, &mut gate, None, "Redis is down", &now).unwrap();
    while scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now)
        .unwrap()
        .open
        > 0
    {}
    assert_eq!(verdict(&store, &old), Verdict::Committed);
    assert_eq!(verdict(&store, &young), Verdict::Committed);
    let reason = |store: &scangate::store::Store, s: &Scan| -> Option<String> {
        let v = audit_of(store, s);
        assert_eq!(v["decision"], "committed", "{v}");
        v["reason"].as_str().map(str::to_owned)
    };
    let said = reason(&store, &old).expect("a reason on the commit past the retention");
    assert!(
        said.contains("past the facility's retention of 72 h") && said.contains("73.0 h"),
        "{said}"
    );
    assert_eq!(reason(&store, &young), None);
    // Claimed once already (its reply lost), then answered again from that
    // round's decision: that round judged it, and this one says nothing.
    let judged = at("SN-JUDGED", 73 * hour);
    store.admit("f1", std::slice::from_ref(&judged)).unwrap();
    let lost = scangate::claimer::pick(&store, &mut gate, LaneKind::Live, &[], &now, true).unwrap();
    facility.claim_batch(&lost.claims(&gate)).unwrap();
    drop(lost);
    scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now).unwrap();
    assert_eq!(facility.fresh(), [false]);
    assert_eq!(reason(&store, &judged), None);
}

/// A round whose reply was lost is claimed again and answered from the
/// earlier decisions: those keep the earlier call's place in the store's
/// history (and their keys its expiry), so they do not move the lane's
/// marker; the lane's last commit made in a round stays one.
#[test]
fn a_commit_answered_again_after_a_lost_reply_is_no_lane_marker() {
    let (_root, _redis, mut store, mut live, mut facility) = facility_rig("scangate-order-");
    let profile = dispense("c1");
    let now = CaptureTime::now();
    let retention_ms = 72 * 3_600_000;
    let x = read(&profile, "SN-X", 0);
    store.admit("f1", std::slice::from_ref(&x)).unwrap();
    let live_round = |store: &mut scangate::store::Store,
                      live: &mut scangate::claimer::FacilityGate,
                      facility: &mut scangate::facility::Facility| {
        let mut picked =
            scangate::claimer::pick(store, live, LaneKind::Live, &[], &now, true).unwrap();
        let answer = facility.claim_batch(&picked.claims(live)).unwrap();
        picked.answered_by(facility);
        scangate::claimer::record(store, live, picked, Ok(answer)).unwrap();
    };
    live_round(&mut store, &mut live, &mut facility);
    // Y is claimed, and the reply lost: it stays open, and is claimed again.
    let y = read(&profile, "SN-Y", 1000);
    store.admit("f1", std::slice::from_ref(&y)).unwrap();
    let lost = scangate::claimer::pick(&store, &mut live, LaneKind::Live, &[], &now, true).unwrap();
    facility.claim_batch(&lost.claims(&live)).unwrap();
    drop(lost);
    live_round(&mut store, &mut live, &mut facility);
    assert_eq!(facility.fresh(), [false]);
    assert_eq!(verdict(&store, &y), Verdict::Committed);
    let markers = scangate::claimer::markers(&store, live.facility_now(), retention_ms);
    assert_eq!(markers, vec![y.uuid.to_string(), x.uuid.to_string()]);
}
