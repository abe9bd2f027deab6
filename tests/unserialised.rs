//! Labels without a serial: a technician receiving a tote scans
//! 12 identical bottles one second apart. Per label kind and per scanner
//! policy: the ledger entries, and which echoes are ambiguous — in the
//! decisions, the outbox and the audit trail. Real SQLite files, the
//! embedded gate; the facility claim of the same rules is in
//! `facility_redis.rs`, the daemon's status and metrics in
//! `unserialised_daemon` below.

use crate::util::{capture_time, dscsa, scan, test_gate};
use scangate::capture::{Profile, Scan, Unserialised};
use scangate::config::ScanType;
use scangate::model::Verdict;
use scangate::store::Store;

fn gtin_lot() -> String {
    crate::util::gtin_lot("LOT7A")
}

/// The linear UPC-A every package carries (as EAN-13, AIM `]E0`).
const UPC: &str = "]E00312345678906";

fn receiving(policy: Unserialised) -> Profile {
    Profile {
        scanner: "receiving".into(),
        scan_type: ScanType::Receive,
        quantity: 1,
        owner: Some("test-gw".into()),
        unserialised: policy,
    }
}

/// What one tote did: per read its verdict and whether it was ambiguous,
/// the ledger's length, and the audit records that say "ambiguous".
struct Tote {
    verdicts: Vec<(Verdict, bool)>,
    entries: usize,
    audited_ambiguous: usize,
    outbox_ambiguous: i64,
}

/// Submit `reads` (label, ms after the first) one by one, as the daemon
/// decides a read at the counter, on a fresh gateway.
fn tote(policy: Unserialised, reads: &[(String, i64)], resend: bool) -> Tote {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut gate = test_gate(&store);
    let t0 = chrono::Utc::now().timestamp_millis();
    let profile = receiving(policy);
    let mut verdicts = Vec::new();
    let mut uuids = Vec::new();
    for (label, at) in reads {
        let mut s: Scan = scan(
            &profile,
            label.as_str(),
            capture_time(t0 + at, "boot-a", 1_000_000 + at, true),
        );
        s.resend = resend;
        uuids.push(s.uuid.to_string());
        let d = scangate::daemon::embedded::submit(&mut store, &mut gate, &[s]).unwrap();
        verdicts.push((d[0].verdict.clone(), d[0].ambiguous));
    }
    let mut entry_uuids = Vec::new();
    scangate::ledger::for_each(&store, None, |e| {
        entry_uuids.push(e.scan_uuid);
        Ok(())
    })
    .unwrap();
    let entries = entry_uuids.len();
    // What `ledger export --echoes` prints: every echo names an entry,
    // and says ambiguous exactly where the audit trail does.
    let mut echoes = Vec::new();
    scangate::outbox::echoes::for_each(&store, "test-gw", None, |e| {
        echoes.push(e);
        Ok(())
    })
    .unwrap();
    assert_eq!(echoes.len() + entries, reads.len());
    for e in &echoes {
        assert!(entry_uuids.contains(&e.echo_of), "{e:?}");
        let audited = scangate::audit::records_for_scan(&store, &e.scan_uuid).unwrap();
        assert_eq!(
            audited.iter().any(|r| r.ambiguous.is_some()),
            e.ambiguous,
            "{e:?}"
        );
    }
    let audited_ambiguous = uuids
        .iter()
        .flat_map(|u| scangate::audit::records_for_scan(&store, u).unwrap())
        .filter(|r| r.ambiguous.is_some())
        .count();
    let outbox_ambiguous = store.outbox_status().unwrap().ambiguous;
    assert_eq!(gate.stats().ambiguous as usize, audited_ambiguous);
    Tote {
        verdicts,
        entries,
        audited_ambiguous,
        outbox_ambiguous,
    }
}

/// Twelve reads of `label`, one second (and a little: a person's pace)
/// apart.
fn twelve(label: &str) -> Vec<(String, i64)> {
    (0..12).map(|i| (label.to_string(), i * 1010)).collect()
}

#[test]
fn twelve_identical_bottles_under_each_policy() {
    let df = Unserialised::DoubleFire { ms: 300 };
    // (label kind, policy, ledger entries, ambiguous echoes)
    let table: [(&str, String, Unserialised, usize, usize); 7] = [
        ("serialised", String::new(), Unserialised::Window, 12, 0),
        ("gtin+lot", gtin_lot(), Unserialised::Window, 4, 8),
        ("upc", UPC.to_string(), Unserialised::Window, 4, 8),
        ("gtin+lot", gtin_lot(), df, 12, 0),
        ("upc", UPC.to_string(), df, 12, 0),
        ("gtin+lot", gtin_lot(), Unserialised::Ask, 4, 8),
        ("serialised", String::new(), df, 12, 0),
    ];
    for (kind, label, policy, entries, ambiguous) in table {
        let reads: Vec<(String, i64)> = if kind == "serialised" {
            (0..12)
                .map(|i| (dscsa(&format!("SN{i}")), i * 1010))
                .collect()
        } else {
            twelve(&label)
        };
        let t = tote(policy, &reads, false);
        let what = format!("{kind} under {policy:?}");
        assert_eq!(t.entries, entries, "{what}: ledger entries");
        assert_eq!(t.audited_ambiguous, ambiguous, "{what}: audited ambiguous");
        assert_eq!(t.outbox_ambiguous, ambiguous as i64, "{what}: outbox");
        // Every echo of an unserialised label is ambiguous; none other.
        for (v, amb) in &t.verdicts {
            let echo = matches!(v, Verdict::Suppressed { .. });
            assert_eq!(*amb, echo && kind != "serialised", "{what}: {v:?}");
        }
    }
}

#[test]
fn a_serialised_labels_echo_is_never_ambiguous() {
    // The same bottle scanned twice, 1 s apart, under every policy.
    for policy in [
        Unserialised::Window,
        Unserialised::Ask,
        Unserialised::DoubleFire { ms: 300 },
    ] {
        let label = dscsa("SN-ONE");
        let t = tote(policy, &[(label.clone(), 0), (label, 1000)], false);
        assert!(matches!(t.verdicts[1].0, Verdict::Suppressed { .. }));
        assert!(!t.verdicts[1].1, "{policy:?}");
        assert_eq!((t.entries, t.audited_ambiguous), (1, 0));
    }
}

#[test]
fn double_fire_catches_a_triggers_second_decode_and_counts_a_rescan() {
    let df = Unserialised::DoubleFire { ms: 300 };
    let l = gtin_lot();
    // A double-fire 120 ms after the read, then a second bottle 900 ms on.
    let t = tote(df, &[(l.clone(), 0), (l.clone(), 120), (l, 1020)], false);
    assert_eq!(t.entries, 2);
    assert!(matches!(t.verdicts[1].0, Verdict::Suppressed { .. }));
    assert!(
        t.verdicts[1].1,
        "a double-fire is still an echo of an unserialised label"
    );
    assert_eq!(t.verdicts[2].0, Verdict::Committed);
}

#[test]
fn a_frame_the_scanner_may_be_resending_is_a_certain_echo_judged_by_the_full_window() {
    // With `ack = true`, a frame read while one of the same bytes waited
    // for its ACK may be a resend: the full window judges it, and its echo
    // is certain (not ambiguous) — under double-fire too.
    let df = Unserialised::DoubleFire { ms: 300 };
    let l = gtin_lot();
    let t = tote(df, &[(l.clone(), 0), (l, 1500)], true);
    assert!(matches!(t.verdicts[1].0, Verdict::Suppressed { .. }));
    assert!(!t.verdicts[1].1);
    assert_eq!((t.entries, t.audited_ambiguous), (1, 0));
    // Control: the same reads, not a resend, are two picks.
    let l = gtin_lot();
    let control = tote(df, &[(l.clone(), 0), (l, 1500)], false);
    assert_eq!(control.entries, 2);
}

/// The daemon: a burst of ambiguous echoes on one scanner shows in
/// `status` (its count today, and DEGRADED naming the scanner and the
/// fixes) and in the metrics; a serialised label's echoes on another
/// scanner (the control) show in neither.
#[test]
fn a_burst_of_ambiguous_echoes_shows_in_status_and_the_metrics() {
    use crate::util::*;
    let root = tempdir("scangate-ambiguous-");
    let textfile = root.path().join("scangate.prom");
    let mut gw = Gateway::builder_in(&root.path().join("gw"))
        .ptys([
            ScannerSpec::named("receiving").ack(),
            ScannerSpec::named("counter-1").ack(),
        ])
        .config(&format!(
            "[metrics]\ntextfile = {:?}\ninterval_s = 1",
            textfile.to_str().unwrap()
        ))
        .build();
    let mut daemon = gw.launch();
    let [mut receiving, mut counter] = gw.take_scanners();
    for _ in 0..4 {
        receiving.send(&frame(&gtin_lot("LOT7A"))).unwrap();
        assert_eq!(replies(&mut receiving, 1).0, [ACK]);
        counter.send(&frame(&dscsa("SN-ONE"))).unwrap();
        assert_eq!(replies(&mut counter, 1).0, [ACK]);
    }
    wait_all_decided(&gw.cfg, 8);
    wait_until("the metrics file to count 3 ambiguous echoes", || {
        std::fs::read_to_string(&textfile).is_ok_and(|t| {
            t.contains("scangate_ambiguous_echoes_total{scanner=\"receiving\"} 3")
                && t.contains("scangate_ambiguous_echoes_total{scanner=\"counter-1\"} 0")
        })
    });
    let mut status = serde_json::Value::Null;
    wait_until("status to show the burst", || {
        let out: Outcome = cli_cfg(&gw.cfg, &["status", "--json"]).into();
        status = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
        out.code == Some(1)
            && status["degraded"].as_array().is_some_and(|d| {
                d.iter().any(|r| {
                    r.as_str().is_some_and(|r| {
                        r.contains("scanner receiving: 3 echoes of labels without a serial")
                    })
                })
            })
    });
    let scanner = |name: &str| {
        status["scanners"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()["ambiguous_today"]
            .as_i64()
    };
    assert_eq!(
        (scanner("receiving"), scanner("counter-1")),
        (Some(3), Some(0)),
        "{status}"
    );
    let degraded = status["degraded"].to_string();
    assert!(!degraded.contains("counter-1: "), "{degraded}");
    assert!(
        degraded.contains("unserialised = \\\"double-fire\\\""),
        "{degraded}"
    );
    // `ledger export --echoes`: the receiving scanner's three echoes are
    // ambiguous and name its one entry; the counter's three are certain.
    let out: Outcome = cli_cfg(&gw.cfg, &["ledger", "export", "--echoes"]).into();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let echoes: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |name: &str| -> Vec<&serde_json::Value> {
        echoes.iter().filter(|e| e["scanner"] == name).collect()
    };
    let (rx, ctr) = (of("receiving"), of("counter-1"));
    assert_eq!((rx.len(), ctr.len()), (3, 3), "{}", out.stdout);
    assert!(
        rx.iter()
            .all(|e| e["ambiguous"] == true && e["serial"].is_null())
    );
    assert!(
        ctr.iter()
            .all(|e| e["ambiguous"] == false && e["serial"] == "SN-ONE")
    );
    let export: Outcome = cli_cfg(&gw.cfg, &["ledger", "export"]).into();
    let entry = |name: &str| {
        export
            .stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|e| e["scanner"] == name)
            .unwrap()["scan_uuid"]
            .clone()
    };
    assert!(rx.iter().all(|e| e["echo_of"] == entry("receiving")));
    assert!(ctr.iter().all(|e| e["echo_of"] == entry("counter-1")));
    assert_eq!(daemon.terminate().code(), Some(0), "{}", daemon.log());
}
