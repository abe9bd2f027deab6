//! A serialised package received twice, end to end on the real daemon
//! with PTY scanners speaking Zebra SSI: the second `receive` read of a
//! GTIN + serial, beyond the echo window, is ACKed and recorded as any
//! other and told `suspect` (a slow warble), its ledger entry, audit
//! record and metric naming when and where the package was first
//! received; a re-read within the window is an echo; another serial, and
//! the same package read by a `dispense` scanner, are told "committed"
//! (the controls). Embedded (kept across a restart) and with a facility
//! Redis shared by two gateways.

use crate::util::*;
use chrono::{Days, Local};
use scangate::products::ndc::PackageNdc;
use scangate::pty::VirtualScanner;
use std::time::{Duration, Instant};

const COMMITTED: u8 = 0x00;
const SUSPECT: u8 = 0x15;

/// A GS1 DataMatrix of a package good for a year: GTIN, expiry, serial,
/// lot.
fn package(serial: &str) -> String {
    let gtin = PackageNdc::parse("0067-6382-30").unwrap().gtin14(0);
    let expiry = (Local::now().date_naive() + Days::new(400)).format("%y%m%d");
    format!("]d201{gtin}17{expiry}21{serial}{GS}10L1")
}

/// Send `text`; expect the ACK, then the beep for `code` (`None`: nothing
/// more, an echo; the next read's replies would show a stray beep).
fn told(vs: &mut VirtualScanner, text: &str, code: Option<u8>) {
    vs.send(format!("{text}\r\n").as_bytes()).unwrap();
    let mut want = vec![ACK];
    want.extend(code.map(ssi_beep).unwrap_or_default());
    let got = replies(vs, want.len()).0;
    assert_eq!(got, want, "{text:?}: heard {got:02x?}, want {want:02x?}");
}

/// Wait until the echo window `window_ms` after `since` has passed: a read
/// then is another read, not an echo.
fn past_the_window(since: Instant, window_ms: u64) {
    let until = since + Duration::from_millis(window_ms + 50);
    wait_until("the echo window passed", || Instant::now() > until);
}

/// A `receive` scanner with Zebra SSI feedback and `extra` lines.
fn receiving(name: &str, extra: &str) -> ScannerSpec {
    let mut s = ScannerSpec::named(name).ack().with(&format!(
        "feedback = {{ protocol = \"zebra-ssi\" }}\n{extra}"
    ));
    s.scan_type = "receive";
    s
}

/// The alerts of the ledger entries of serial `serial`, in ledger order.
fn alerts_of(entries: &[serde_json::Value], serial: &str) -> Vec<serde_json::Value> {
    entries
        .iter()
        .filter(|e| e["serial"] == serial)
        .map(|e| e["alerts"].clone())
        .collect()
}

#[test]
fn a_package_received_twice_is_told_suspect_naming_its_first_receipt() {
    const WINDOW_MS: u64 = 400;
    let port = free_port();
    let mut gw = Gateway::builder("scangate-suspect-")
        .id("gw-r")
        .window_ms(WINDOW_MS)
        .pty(receiving("receiving-1", ""))
        .pty(
            ScannerSpec::named("counter-1")
                .ack()
                .with("feedback = { protocol = \"zebra-ssi\" }"),
        )
        .config(&format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"))
        .build();
    gw.start();
    let [mut dock, mut counter] = gw.take_scanners();

    told(&mut dock, &package("P1"), Some(COMMITTED));
    let first = Instant::now();
    // Within the window: the same package heard twice, an echo.
    told(&mut dock, &package("P1"), None);
    told(&mut dock, &package("P2"), Some(COMMITTED));
    past_the_window(first, WINDOW_MS);
    told(&mut dock, &package("P1"), Some(SUSPECT));
    // The controls: another serial received once, and P1 dispensed.
    told(&mut dock, &package("P3"), Some(COMMITTED));
    told(&mut counter, &package("P1"), Some(COMMITTED));

    // Kept across a restart.
    gw.stop();
    gw.start();
    past_the_window(Instant::now(), WINDOW_MS);
    told(&mut dock, &package("P2"), Some(SUSPECT));

    let entries = ledger(&gw.cfg);
    let p1: Vec<&serde_json::Value> = entries.iter().filter(|e| e["serial"] == "P1").collect();
    assert_eq!(p1.len(), 3, "two receipts and a dispense: {p1:#?}");
    let (received, again) = (p1[0], p1[1]);
    assert_eq!(received["alerts"], serde_json::Value::Null, "{received}");
    let alert = &again["alerts"][0];
    assert_eq!(alert["kind"], "suspect", "{again}");
    assert_eq!(
        alert["first_received_scan"], received["scan_uuid"],
        "{again}"
    );
    assert_eq!(
        alert["first_received_at"], received["captured_at"],
        "{again}"
    );
    assert_eq!(alert["first_received_gateway"], "gw-r", "{again}");
    assert_eq!(alert["first_received_scanner"], "receiving-1", "{again}");
    assert_eq!(p1[2]["scan_type"], "dispense");
    assert_eq!(p1[2]["alerts"], serde_json::Value::Null, "{}", p1[2]);
    assert_eq!(alerts_of(&entries, "P3"), [serde_json::Value::Null]);
    let p2 = alerts_of(&entries, "P2");
    assert_eq!(p2.len(), 2, "{p2:?}");
    assert_eq!(p2[1][0]["kind"], "suspect", "{p2:?}");

    // EPCIS: the alert in scangate's extension, naming the first
    // receipt's event (not its gateway or scanner, as no event does).
    let epcis: Outcome = cli_cfg(&gw.cfg, &["ledger", "export", "--format", "epcis"]).into();
    assert_eq!(epcis.code, Some(0), "{epcis}");
    let doc: serde_json::Value = serde_json::from_str(&epcis.stdout).unwrap();
    let events = doc["epcisBody"]["eventList"].as_array().unwrap();
    let event = events
        .iter()
        .find(|e| e["eventID"] == format!("urn:uuid:{}", again["scan_uuid"].as_str().unwrap()))
        .unwrap();
    assert_eq!(
        event["scangate:alerts"],
        serde_json::json!([{
            "scangate:kind": "suspect",
            "scangate:firstReceivedAt": received["captured_at"],
            "scangate:firstReceivedEvent":
                format!("urn:uuid:{}", received["scan_uuid"].as_str().unwrap()),
        }]),
        "{event}"
    );
    // The audit record keeps it under the chain.
    let db = rusqlite::Connection::open(gw.state.join("scangate.db")).unwrap();
    let records = audit_records(&db);
    let suspect_records: Vec<&String> = records
        .iter()
        .filter(|r| r.contains("\"kind\":\"suspect\""))
        .collect();
    assert_eq!(suspect_records.len(), 2, "{suspect_records:#?}");
    audit_verify(&gw.cfg);
    // Counted (since the restart: one).
    let (code, body) = http_get(&format!("127.0.0.1:{port}"), "/metrics").unwrap();
    assert_eq!(code, 200);
    let line = "scangate_alerts_total{scanner=\"receiving-1\",kind=\"suspect\"} 1";
    assert!(body.contains(line), "{line} not in:\n{body}");
}

#[test]
fn a_receive_scanner_without_the_suspect_check_keeps_receipts_but_is_not_told() {
    const WINDOW_MS: u64 = 300;
    let mut gw = Gateway::builder("scangate-suspect-off-")
        .window_ms(WINDOW_MS)
        .pty(receiving("receiving-1", "checks = [\"expiry\"]"))
        .pty(receiving("receiving-2", ""))
        .build();
    gw.start();
    let [mut quiet, mut dock] = gw.take_scanners();
    told(&mut quiet, &package("Q1"), Some(COMMITTED));
    let first = Instant::now();
    past_the_window(first, WINDOW_MS);
    // Not told on the scanner that does not run it…
    told(&mut quiet, &package("Q1"), Some(COMMITTED));
    // …but its receipt counts for a scanner that does.
    told(&mut dock, &package("Q1"), Some(SUSPECT));
    let entries = ledger(&gw.cfg);
    let q1 = alerts_of(&entries, "Q1");
    assert_eq!(q1.len(), 3, "{q1:?}");
    assert_eq!(q1[1], serde_json::Value::Null);
    assert_eq!(q1[2][0]["first_received_scanner"], "receiving-1", "{q1:?}");
}

#[test]
fn with_a_facility_redis_a_package_received_on_one_gateway_is_suspect_on_another() {
    const WINDOW_MS: u64 = 1000;
    let (root, redis) = facility(&[]);
    let gateway = |name: &str, scanner: &str| {
        Gateway::builder_in(&root.path().join(name))
            .id(name)
            .window_ms(WINDOW_MS)
            .pty(receiving(scanner, ""))
            .redis(&redis)
            .build()
    };
    let mut a = gateway("gw-a", "dock-a");
    let mut b = gateway("gw-b", "dock-b");
    a.start();
    b.start();
    let [mut dock_a] = a.take_scanners();
    let [mut dock_b] = b.take_scanners();

    told(&mut dock_a, &package("F1"), Some(COMMITTED));
    let first = Instant::now();
    // The control: a package gw-a never received.
    told(&mut dock_b, &package("F2"), Some(COMMITTED));
    past_the_window(first, WINDOW_MS);
    told(&mut dock_b, &package("F1"), Some(SUSPECT));
    // gw-b's own receipt of F2 counts on gw-a too.
    told(&mut dock_a, &package("F2"), Some(SUSPECT));

    // (`ledger export` with [redis] is the facility's ledger.)
    let on_a = ledger(&a.cfg);
    let by = |gateway: &str, serial: &str| {
        on_a.iter()
            .find(|e| e["gateway"] == gateway && e["serial"] == serial)
            .unwrap_or_else(|| panic!("no {serial} of {gateway} in {on_a:#?}"))
            .clone()
    };
    let (f1_a, f1_b) = (by("gw-a", "F1"), by("gw-b", "F1"));
    let alert = &f1_b["alerts"][0];
    assert_eq!(alert["kind"], "suspect", "{f1_b}");
    assert_eq!(alert["first_received_gateway"], "gw-a", "{f1_b}");
    assert_eq!(alert["first_received_scanner"], "dock-a", "{f1_b}");
    assert_eq!(alert["first_received_scan"], f1_a["scan_uuid"], "{f1_b}");
    assert_eq!(f1_a["alerts"], serde_json::Value::Null, "{f1_a}");
    let f2_a = by("gw-a", "F2");
    assert_eq!(
        f2_a["alerts"][0]["first_received_gateway"], "gw-b",
        "{f2_a}"
    );

    // gw-b's own record keeps what its claim carried.
    let db = rusqlite::Connection::open(b.state.join("scangate.db")).unwrap();
    let records = audit_records(&db);
    let suspect: Vec<&String> = records
        .iter()
        .filter(|r| r.contains("\"kind\":\"suspect\""))
        .collect();
    assert_eq!(suspect.len(), 1, "{records:#?}");
    assert!(
        suspect[0].contains("\"first_received_gateway\":\"gw-a\""),
        "{suspect:?}"
    );
    // The facility's ledger stream carries the alert with the entry.
    let mut c = redis.connection();
    let stream: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg("scangate:{test-pharmacy}:ledger")
        .arg("-")
        .arg("+")
        .query(&mut c)
        .unwrap();
    let field = |uuid: &serde_json::Value, name: &str| {
        let (_, fields) = stream
            .iter()
            .find(|(_, f)| scangate::facility::stream_field(f, "scan_uuid") == *uuid)
            .unwrap_or_else(|| panic!("{uuid} not in the facility stream"));
        scangate::facility::stream_field(fields, name)
    };
    assert_eq!(field(&f1_a["scan_uuid"], "alerts"), "");
    let alerts: serde_json::Value =
        serde_json::from_str(&field(&f1_b["scan_uuid"], "alerts")).unwrap();
    assert_eq!(alerts[0]["kind"], "suspect", "{alerts}");
    // The store loses its data: each gateway re-publishes its first
    // receipts with its commits once it notices (gw-a at its next claim),
    // not the second receipts it recorded as suspect.
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    told(&mut dock_a, &package("F3"), Some(COMMITTED));
    let again = Instant::now();
    past_the_window(again, WINDOW_MS);
    told(&mut dock_b, &package("F1"), Some(SUSPECT));
    let f2: Option<String> = redis::cmd("GET")
        .arg(format!(
            "scangate:{{test-pharmacy}}:rcv:{}:F2",
            PackageNdc::parse("0067-6382-30").unwrap().gtin14(0)
        ))
        .query(&mut c)
        .unwrap();
    assert!(
        f2.as_deref().is_some_and(|v| v.contains(" gw-b dock-b")),
        "F2's first receipt is gw-b's: {f2:?}"
    );
    // One receipt key per package, expiring.
    let ttl: i64 = redis::cmd("PTTL")
        .arg(format!(
            "scangate:{{test-pharmacy}}:rcv:{}:F1",
            PackageNdc::parse("0067-6382-30").unwrap().gtin14(0)
        ))
        .query(&mut c)
        .unwrap();
    assert!(ttl > 364 * 86_400_000, "{ttl}");
}

/// Receipts are kept `[checks] serial_retention_days`: the sweeper removes
/// older ones (here at a start two days later, libfaketime, with a
/// retention of one day), and the package received again then is a first
/// receipt again, told "committed". (Kept across a restart within the
/// retention, and told on another scanner: the tests above.) The second
/// read is another scanner's: on the same boot, the wall clock stepped two
/// days ahead, the same scanner's read would rightly be an echo (the gate
/// allows for a boot's clock steps).
#[test]
fn receipts_past_the_retention_are_forgotten_by_the_sweeper() {
    let mut gw = Gateway::builder("scangate-suspect-kept-")
        .window_ms(300)
        .pty(receiving("receiving-1", ""))
        .pty(receiving("receiving-2", ""))
        .config("[checks]\nserial_retention_days = 1\n")
        .build();
    gw.start();
    let [mut dock, mut other] = gw.take_scanners();
    told(&mut dock, &package("K1"), Some(COMMITTED));
    gw.stop();
    let preload = libfaketime();
    gw.start_with_env(&[
        ("LD_PRELOAD", &preload),
        ("FAKETIME", "+2d"),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ]);
    wait_until("the sweeper forgot the receipt", || {
        gw.daemon()
            .log()
            .contains("forgot 1 received serial numbers first received more than 1 days ago")
    });
    told(&mut other, &package("K1"), Some(COMMITTED));
    let k1 = alerts_of(&ledger(&gw.cfg), "K1");
    assert_eq!(k1, [serde_json::Value::Null, serde_json::Value::Null]);
}
