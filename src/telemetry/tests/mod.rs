//! The registry as a whole: which series exist (the facility ones only
//! with `[redis]`), and the encoded text pinned for one history of events
//! (`pinned.txt`), so a change of shape cannot change the exposition.

use super::*;
use crate::model::{Decision, ScanState, Verdict};
use std::time::Duration;

fn telemetry(redis: bool) -> Telemetry {
    Telemetry::new(&["counter-1".to_string()], redis.then_some(500))
}

#[test]
fn every_documented_series_is_exported_the_facility_ones_only_with_redis() {
    let names = [
        "scangate_build_info{",
        "scangate_scans_read_total{scanner=\"counter-1\"} 0",
        "scangate_decisions_total{scanner=\"counter-1\",decision=\"unresolved\"} 0",
        "scangate_scanner_up{scanner=\"counter-1\"} 0",
        "scangate_scanner_last_read_timestamp_seconds{scanner=\"counter-1\"}",
        "scangate_outbox_undecided{state=\"pending\"}",
        "scangate_outbox_oldest_undecided_age_seconds",
        "scangate_ack_latency_seconds_bucket{",
        "scangate_commit_latency_seconds_count",
        "scangate_audit_records_total",
        "scangate_database_bytes",
        "scangate_state_free_bytes",
        "scangate_state_days_left",
        "scangate_metrics_http_dropped_connections_total{reason=\"room\"} 0",
        "scangate_config_old_keys 0",
    ];
    let facility = [
        "scangate_facility_up",
        "scangate_facility_clock_offset_seconds",
        "scangate_facility_clock_error_bound_seconds",
        "scangate_facility_ledger_stream_entries",
    ];
    let with = telemetry(true).encode();
    let without = telemetry(false).encode();
    for n in names {
        assert!(with.contains(n) && without.contains(n), "{n}:\n{with}");
    }
    for n in facility {
        assert!(with.contains(n) && !without.contains(n), "{n}");
    }
}

/// The names in the first column of docs/technician.md's table of series,
/// each with whether its row says it is there only with `[redis]`.
fn documented() -> Vec<(String, bool)> {
    include_str!("../../../docs/technician.md")
        .lines()
        .filter(|l| l.starts_with("| `scangate_"))
        .flat_map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let redis = cells[3].starts_with("with `[redis]`");
            cells[1]
                .split('`')
                .skip(1)
                .step_by(2)
                .map(move |name| (name.to_string(), redis))
        })
        .collect()
}

/// The names a scrape shows (of its samples, and of its families: a
/// histogram's) once the database has a consumer group of the facility
/// stream and a consumer of the ledger, and the scanner's device has said
/// what it is (a family without a series is not shown).
fn exposed(redis: bool) -> std::collections::BTreeSet<String> {
    let t = telemetry(redis);
    let usb = crate::model::Identity {
        vendor_id: 0x0403,
        product_id: 0x6001,
        manufacturer: None,
        product: None,
        serial: None,
        release: None,
    };
    t.scanner_connected("counter-1", "/dev/ttyUSB0", Some(&usb));
    t.record(&Sampled {
        ledger_stream: Some(SampledStream {
            length: 1,
            oldest_unacked_s: vec![("inventory".into(), None)],
        }),
        ledger_consumers: vec![SampledConsumer {
            name: "inventory".into(),
            ..SampledConsumer::default()
        }],
        ..Sampled::default()
    });
    t.encode()
        .lines()
        .filter_map(|l| match l.strip_prefix("# TYPE ") {
            Some(family) => family.split(' ').next(),
            None if l.starts_with('#') => None,
            None => l.split(['{', ' ']).next(),
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn every_series_in_the_technicians_table_is_exported_the_facility_ones_only_with_redis() {
    let table = documented();
    assert!(table.len() >= 25, "too few rows read: {table:?}");
    let (with, without) = (exposed(true), exposed(false));
    for (name, redis) in table {
        assert!(with.contains(&name), "{name} is documented, not exported");
        assert_eq!(without.contains(&name), !redis, "{name} without [redis]");
    }
}

fn decision(scanner: &str, verdict: Verdict, ambiguous: bool, was: ScanState) -> Decision {
    Decision {
        scan_uuid: "u".into(),
        verdict,
        content_key: None,
        ambiguous,
        scanner: scanner.into(),
        read_boot_ns: Some(1_000_000_000),
        was,
        told_as: None,
        alert: None,
        acknowledged: None,
    }
}

/// Two scanners (one added by a reload, one removed by it), with `redis` a
/// facility store, a sink, a consumer of the ledger, and every kind of
/// event once or more: what a scrape shows.
fn busy(redis: bool) -> Telemetry {
    let t = Telemetry::new(
        &["counter-1".to_string(), "counter-3".to_string()],
        redis.then_some(250),
    );
    t.set_sinks(&["inv".to_string()]);
    // (counter-1 is on USB and says what it is; the others do not.)
    let usb = crate::model::Identity {
        vendor_id: 0x0c2e,
        product_id: 0x0b61,
        manufacturer: Some("Honeywell".into()),
        product: Some("1900GSR".into()),
        serial: Some("18123B4562".into()),
        release: Some("1.02".into()),
    };
    for name in ["counter-1", "counter-3"] {
        let identity = (name == "counter-1").then_some(&usb);
        t.scanner_connected(name, "/dev/ttyACM0", identity);
        t.scan_read(name);
        t.feedback(name, "committed", "sent");
    }
    t.set_scanners(&["counter-1".to_string(), "counter-2".to_string()]);
    t.scanner_connected("counter-2", "/dev/ttyACM1", None);
    t.scanner_disconnected("counter-1");
    t.scan_read("counter-2");
    t.feedback("counter-2", "rejected", "skipped");
    t.acked(Duration::from_micros(700));
    t.acked(Duration::from_millis(40));
    let now = 1_000_000_000 + 30_000_000;
    let suppressed = || Verdict::Suppressed { twin: "t".into() };
    for d in [
        decision("counter-1", Verdict::Committed, false, ScanState::Pending),
        decision("counter-1", suppressed(), true, ScanState::Pending),
        decision("counter-2", suppressed(), false, ScanState::Pending),
        decision(
            "counter-2",
            Verdict::Rejected { reason: "r".into() },
            false,
            ScanState::Pending,
        ),
        decision(
            "counter-2",
            Verdict::Unresolved { reason: "r".into() },
            false,
            ScanState::Pending,
        ),
        decision(
            "counter-2",
            Verdict::Unresolved { reason: "r".into() },
            false,
            ScanState::Unresolved,
        ),
        decision("counter-1", Verdict::Pending, false, ScanState::Pending),
        // An expired item committed: one alert. Its echo, told as an echo,
        // counts none.
        Decision {
            alert: Some(crate::model::Alert::Expired),
            ..decision("counter-1", Verdict::Committed, false, ScanState::Pending)
        },
        Decision {
            alert: Some(crate::model::Alert::Expired),
            ..decision("counter-1", suppressed(), false, ScanState::Pending)
        },
    ] {
        t.count_decision(&d, now);
    }
    t.anchored();
    t.sink_delivered("inv", 12);
    t.sink_failure("inv", "status_5xx", false);
    t.sink_failure("inv", "status_4xx", true);
    t.metrics_http_dropped("head_timeout");
    t.config_old_keys(1);
    t.record(&Sampled {
        pending: 3,
        unresolved: 2,
        oldest_age_s: Some(4.5),
        audit_records: 41,
        database_bytes: 1 << 20,
        free_bytes: Some(1 << 30),
        days_left: Some(99.5),
        facility_up: true,
        facility_clock: Some((1.5, 0.25)),
        ledger_stream: Some(SampledStream {
            length: 7,
            oldest_unacked_s: vec![("inventory".into(), Some(3.0)), ("bi".into(), None)],
        }),
        ledger_consumers: vec![SampledConsumer {
            name: "inventory".into(),
            acked_seq: 5,
            behind: 2,
            oldest_unacked_s: Some(1.25),
        }],
    });
    t
}

/// The exposition with what varies from run to run made fixed: the build's
/// labels, a timestamp that is set (`T`), and the order of a labelled
/// family's series (a hash map's; a histogram's buckets keep theirs).
fn normalised(text: &str) -> String {
    let mut out = Vec::new();
    let mut samples: Vec<String> = Vec::new();
    let mut histogram = false;
    let flush = |samples: &mut Vec<String>, out: &mut Vec<String>, histogram: bool| {
        if !histogram {
            samples.sort();
        }
        out.append(samples);
    };
    for line in text.lines() {
        if line.starts_with('#') {
            flush(&mut samples, &mut out, histogram);
            histogram = line.starts_with("# TYPE ") && line.ends_with(" histogram");
            out.push(line.to_string());
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample line");
        let sample = if series.starts_with("scangate_build_info{") {
            "scangate_build_info{…} 1".to_string()
        } else if series.contains("_timestamp_seconds") && value != "0.0" {
            format!("{series} T")
        } else {
            line.to_string()
        };
        samples.push(sample);
    }
    flush(&mut samples, &mut out, histogram);
    out.join("\n") + "\n"
}

#[test]
fn the_exposition_of_a_busy_gateway_is_as_pinned() {
    let got = normalised(&busy(true).encode());
    if std::env::var_os("SCANGATE_PIN_PRINT").is_some() {
        print!("{got}");
    }
    assert_eq!(got, include_str!("pinned.txt"));
}

#[test]
fn without_redis_it_is_the_same_less_the_facility_series() {
    let mut expected = String::new();
    let mut facility = false;
    for line in include_str!("pinned.txt").lines() {
        if let Some(help) = line.strip_prefix("# HELP ") {
            facility = help.starts_with("scangate_facility_");
        }
        if !facility {
            expected += line;
            expected += "\n";
        }
    }
    assert_eq!(normalised(&busy(false).encode()), expected);
}

#[test]
fn the_summary_and_status_of_a_busy_gateway_are_as_pinned() {
    let t = busy(true);
    assert_eq!(
        t.summary(),
        Summary {
            scanners_up: 1,
            scanners: 2,
            undecided: 5,
            facility: Some(FacilitySummary {
                up: true,
                offset_ms: 1.5,
                bound_ms: 0.25,
            }),
        }
    );
    let live = t.live();
    let seen: Vec<_> = live
        .scanners
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.device.as_deref(),
                s.connected,
                s.since_ms.is_some(),
                s.last_read_ms.is_some(),
                s.reads_today,
                s.rejects_today,
                s.ambiguous_today,
                s.ambiguous_recent_ms.len(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "counter-1",
                Some("/dev/ttyACM0"),
                false,
                true,
                true,
                1,
                0,
                1,
                1
            ),
            (
                "counter-2",
                Some("/dev/ttyACM1"),
                true,
                true,
                true,
                1,
                1,
                0,
                0
            ),
        ]
    );
}

#[test]
fn open_alerts_are_counted_per_configured_scanner_and_cleared_by_an_acknowledgement() {
    let t = Telemetry::new(&["counter-1".to_string()], None);
    // At start, from the database: a scanner no longer configured is not
    // shown.
    t.unacknowledged_alerts(&[("counter-1".into(), 2), ("gone".into(), 5)]);
    let series = |t: &Telemetry| -> Vec<String> {
        t.encode()
            .lines()
            .filter(|l| l.starts_with("scangate_alerts_unacknowledged{"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        series(&t),
        ["scangate_alerts_unacknowledged{scanner=\"counter-1\"} 2"]
    );
    let mut alerted = decision("counter-1", Verdict::Committed, false, ScanState::Pending);
    alerted.alert = Some(crate::model::Alert::Expired);
    t.count_decision(&alerted, 2_000_000_000);
    assert_eq!(
        series(&t),
        ["scangate_alerts_unacknowledged{scanner=\"counter-1\"} 3"]
    );
    let mut ack = decision(
        "counter-1",
        Verdict::Control {
            control: "acknowledge".into(),
        },
        false,
        ScanState::Pending,
    );
    ack.acknowledged = Some(3);
    t.count_decision(&ack, 2_000_000_000);
    assert_eq!(
        series(&t),
        ["scangate_alerts_unacknowledged{scanner=\"counter-1\"} 0"]
    );
}

/// A USB serial adapter's descriptors (the VM's: FTDI, serial SCAN1).
fn ftdi() -> crate::model::Identity {
    crate::model::Identity {
        vendor_id: 0x0403,
        product_id: 0x6001,
        manufacturer: Some("FTDI".into()),
        product: Some("FT232R USB UART".into()),
        serial: Some("SCAN1".into()),
        release: Some("6.00".into()),
    }
}

#[test]
fn a_scanner_says_what_it_is_and_another_device_under_its_name_is_told() {
    use crate::model::Identity;
    let t = Telemetry::new(&["counter-1".to_string(), "counter-2".to_string()], None);
    let first = ftdi();
    let series = |t: &Telemetry| -> Vec<String> {
        t.encode()
            .lines()
            .filter(|l| l.starts_with("scangate_scanner_info{"))
            .map(str::to_string)
            .collect()
    };
    // Off USB (a PTY): nothing said, no series.
    assert_eq!(t.scanner_connected("counter-2", "/dev/pts/3", None), None);
    assert_eq!(
        t.scanner_connected("counter-1", "/dev/ttyUSB0", Some(&first)),
        None
    );
    let one = "scangate_scanner_info{scanner=\"counter-1\",model=\"FTDI FT232R USB UART\",firmware=\"6.00\",serial=\"SCAN1\"} 1";
    assert_eq!(series(&t), [one]);
    // The same device again, with new firmware: the series follows, no
    // other device.
    let updated = Identity {
        release: Some("6.01".into()),
        ..first.clone()
    };
    assert_eq!(
        t.scanner_connected("counter-1", "/dev/ttyUSB0", Some(&updated)),
        None
    );
    assert_eq!(series(&t).len(), 1);
    assert!(
        series(&t)[0].contains("firmware=\"6.01\""),
        "{:?}",
        series(&t)
    );
    // Another scanner under the name: told, with the one it replaces.
    let other = Identity {
        serial: Some("SCAN2".into()),
        ..updated.clone()
    };
    assert_eq!(
        t.scanner_connected("counter-1", "/dev/ttyUSB0", Some(&other)),
        Some(updated)
    );
    assert_eq!(series(&t).len(), 1);
    assert!(
        series(&t)[0].contains("serial=\"SCAN2\""),
        "{:?}",
        series(&t)
    );
    // A reload that removes the scanner removes its series.
    t.set_scanners(&["counter-2".to_string()]);
    assert_eq!(series(&t), Vec::<String>::new());
}

#[test]
fn another_device_under_a_name_is_told_across_a_restart_and_the_same_one_is_not() {
    use crate::model::Identity;
    let names = ["counter-1".to_string(), "counter-2".to_string()];
    let first = ftdi();
    let before = Telemetry::new(&names, None);
    before.scanner_connected("counter-1", "/dev/ttyUSB0", Some(&first));
    before.scanner_connected("counter-2", "/dev/ttyUSB1", Some(&first));
    // The status file it left, read back as the next run reads it.
    let dir = tempfile::tempdir().unwrap();
    let left = serde_json::to_string(&before.live()).unwrap();
    std::fs::write(dir.path().join(super::live::STATUS_FILE), left).unwrap();
    let last = super::live::LiveStatus::left_in(dir.path()).expect("it reads");
    let after = Telemetry::new(&names, None);
    after.remember_last_run(&last);
    // counter-1 is another scanner now: told, naming the one it was.
    let other = Identity {
        serial: Some("SCAN2".into()),
        ..first.clone()
    };
    assert_eq!(
        after.scanner_connected("counter-1", "/dev/ttyUSB0", Some(&other)),
        Some(first.clone())
    );
    // counter-2 is the same (the control): nothing told, and its series is
    // there as at any first connect.
    assert_eq!(
        after.scanner_connected("counter-2", "/dev/ttyUSB1", Some(&first)),
        None
    );
    assert!(
        after
            .encode()
            .contains("scangate_scanner_info{scanner=\"counter-2\""),
        "{}",
        after.encode()
    );
    // Without the file nothing is remembered: no status file, no word.
    assert!(super::live::LiveStatus::left_in(&dir.path().join("none")).is_none());
}
