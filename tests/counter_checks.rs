//! The checks at the counter, end to end on the real daemon with PTY
//! scanners speaking Zebra SSI: a read of an expired, expiring, recalled
//! or unknown item is ACKed and recorded as any other, and its scanner
//! hears the alert's beep instead of "committed"; a `waste` scanner is not
//! told of expiry; a good item is told "committed" (the control); each
//! alert is counted in `scangate_alerts_total`. Product and recall data
//! are generated files of the FDA's and openFDA's formats.

use crate::util::*;
use chrono::{Datelike, Days, Local, NaiveDate};
use scangate::products::ndc::PackageNdc;
use scangate::pty::VirtualScanner;

const COMMITTED: u8 = 0x00;
const EXPIRED: u8 = 0x11;
const EXPIRING: u8 = 0x17;
const RECALLED: u8 = 0x14;
const UNKNOWN: u8 = 0x19;

/// A GS1 DataMatrix: GTIN, expiry (YYMMDD), serial, lot.
fn label(gtin: &str, yymmdd: &str, serial: &str, lot: &str) -> String {
    format!("]d201{gtin}17{yymmdd}21{serial}{GS}10{lot}")
}

fn yymmdd(d: NaiveDate) -> String {
    d.format("%y%m%d").to_string()
}

/// Send `text` and expect the ACK, then the BEEP for `code`.
fn told(vs: &mut VirtualScanner, text: &str, code: u8) {
    vs.send(format!("{text}\r\n").as_bytes()).unwrap();
    let mut want = vec![ACK];
    want.extend(ssi_beep(code));
    let got = replies(vs, want.len()).0;
    assert_eq!(
        got, want,
        "{text:?}: heard {got:02x?}, want ACK then beep {code:#04x}"
    );
}

/// The daemon's `/metrics` on `port`.
fn metrics(port: u16) -> String {
    let (code, body) = http_get(&format!("127.0.0.1:{port}"), "/metrics").expect("an answer");
    assert_eq!(code, 200, "{body}");
    body
}

#[test]
fn expired_expiring_recalled_and_unknown_items_are_told_at_the_scanner_and_recorded() {
    let port = free_port();
    let mut gw = Gateway::builder("scangate-checks-")
        .window_ms(60_000)
        .pty(
            ScannerSpec::named("counter-1")
                .ack()
                .with("feedback = { protocol = \"zebra-ssi\" }"),
        )
        .pty({
            let mut s = ScannerSpec::named("waste-1")
                .ack()
                .with("feedback = { protocol = \"zebra-ssi\" }");
            s.scan_type = "waste";
            s
        })
        .config(&format!(
            "[checks]\nexpiry_warn_days = 40\n\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n"
        ))
        .build();
    // Product data: two packages of one product; a recall of the second
    // package's lot RC1234.
    let zip = gw.dir.join("ndctext.zip");
    ndctext_zip(
        &zip,
        &[Item::new("0067-6382", b"Oxycode IR", "CII", &["30", "31"])],
    );
    let out: Outcome = cli_cfg(&gw.cfg, &["products", "import", zip.to_str().unwrap()]).into();
    assert_eq!(out.code, Some(0), "{out}");
    let json = gw.dir.join("drug-enforcement-0001-of-0001.json");
    std::fs::write(
        &json,
        enforcement(&[recall(
            "D-0201-2026",
            "Ongoing",
            "Class II",
            &["0067-6382-31"],
            "Oxycode IR tablets, 5 mg, 100-count bottle",
            "Lot #: RC1234; Exp 12/2027",
        )]),
    )
    .unwrap();
    let out: Outcome = cli_cfg(&gw.cfg, &["recalls", "import", json.to_str().unwrap()]).into();
    assert_eq!(out.code, Some(0), "{out}");
    gw.start();
    let [mut counter, mut waste] = gw.take_scanners();

    let known = PackageNdc::parse("0067-6382-30").unwrap().gtin14(0);
    let recalled = PackageNdc::parse("0067-6382-31").unwrap().gtin14(0);
    // A US drug's GTIN (03 prefix) whose NDC the data does not list.
    let missing = PackageNdc::parse("0067-9999-01").unwrap().gtin14(0);
    let today = Local::now().date_naive();
    let good = yymmdd(today + Days::new(400));
    let past = yymmdd(today - Days::new(3));
    let soon = yymmdd(today + Days::new(10));
    // GS1's day 00: the month's last day. This month's is not past, so
    // expiring; last month's is past.
    let this_month_00 = format!("{:02}{:02}00", today.year() % 100, today.month());
    let last = today.with_day(1).unwrap() - Days::new(1);
    let last_month_00 = format!("{:02}{:02}00", last.year() % 100, last.month());

    // The control: a good item is told "committed".
    told(&mut counter, &label(&known, &good, "S1", "L1"), COMMITTED);
    told(&mut counter, &label(&known, &past, "S2", "L1"), EXPIRED);
    told(&mut counter, &label(&known, &soon, "S3", "L1"), EXPIRING);
    told(
        &mut counter,
        &label(&known, &this_month_00, "S4", "L1"),
        EXPIRING,
    );
    told(
        &mut counter,
        &label(&known, &last_month_00, "S5", "L1"),
        EXPIRED,
    );
    // The recalled lot; another lot of the package is not recalled.
    told(
        &mut counter,
        &label(&recalled, &good, "S6", "RC1234"),
        RECALLED,
    );
    told(
        &mut counter,
        &label(&recalled, &good, "S7", "RC12345"),
        COMMITTED,
    );
    // A recall outranks expiry.
    told(
        &mut counter,
        &label(&recalled, &past, "S8", "RC1234"),
        RECALLED,
    );
    told(&mut counter, &label(&missing, &good, "S9", "L1"), UNKNOWN);
    // A waste scanner is not told of expiry (that is what waste is for),
    // but still of a recall.
    told(&mut waste, &label(&known, &past, "W1", "L1"), COMMITTED);
    told(
        &mut waste,
        &label(&recalled, &good, "W2", "RC1234"),
        RECALLED,
    );

    // Every read is recorded, alerts or not.
    let serials: Vec<String> = ledger(&gw.cfg)
        .iter()
        .filter_map(|e| e["serial"].as_str().map(String::from))
        .collect();
    for s in [
        "S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S9", "W1", "W2",
    ] {
        assert_eq!(
            serials.iter().filter(|x| *x == s).count(),
            1,
            "{s} in {serials:?}"
        );
    }
    recorded_with_schedule_and_alerts(&gw);
    let m = metrics(port);
    for (scanner, kind, n) in [
        ("counter-1", "expired", 2),
        ("counter-1", "expiring", 2),
        ("counter-1", "recalled", 2),
        ("counter-1", "unknown", 1),
        ("waste-1", "recalled", 1),
    ] {
        let line = format!("scangate_alerts_total{{scanner=\"{scanner}\",kind=\"{kind}\"}} {n}");
        assert!(
            m.contains(&line),
            "{line} not in:\n{}",
            m.lines()
                .filter(|l| l.contains("alerts"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    assert!(
        m.contains("scangate_alerts_total{scanner=\"waste-1\",kind=\"expired\"} 0"),
        "a waste read counted expired"
    );
    // `status`: today's alerts per scanner and the last five (the status
    // file is rewritten every second).
    let status = || -> serde_json::Value {
        let out: Outcome = cli_cfg(&gw.cfg, &["status", "--json"]).into();
        serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
    };
    wait_until("status counting the alerts", || {
        status()["scanners"][0]["alerts_today"] == 7
    });
    let st = status();
    let recent: Vec<&str> = st["scanners"][0]["recent_alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    // counter-1's seven, the last five: S4 … S9.
    assert_eq!(
        recent,
        ["expiring", "expired", "recalled", "recalled", "unknown"],
        "{st}"
    );
    let text: Outcome = cli_cfg(&gw.cfg, &["status"]).into();
    assert!(
        text.stdout.contains("7 alert(s), 7 not acknowledged")
            && text.stdout.contains("  alert: unknown at "),
        "{text}"
    );
    acknowledged(&mut gw, &mut counter, port);
}

/// `scangate_alerts_unacknowledged` of `scanner`.
fn unacknowledged(port: u16, scanner: &str) -> Option<u64> {
    let prefix = format!("scangate_alerts_unacknowledged{{scanner=\"{scanner}\"}} ");
    metrics(port)
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(|n| n.parse().unwrap()))
}

/// The ACKNOWLEDGE label read on counter-1 closes its seven open alerts,
/// named in its audit record; waste-1's alert stays open (the control),
/// also across a restart.
fn acknowledged(gw: &mut Gateway, counter: &mut VirtualScanner, port: u16) {
    assert_eq!(unacknowledged(port, "counter-1"), Some(7));
    assert_eq!(unacknowledged(port, "waste-1"), Some(1));
    // A control read's signal.
    told(counter, "SGCTL-ACK", 0x02);
    wait_until("counter-1's alerts acknowledged", || {
        unacknowledged(port, "counter-1") == Some(0)
    });
    assert_eq!(unacknowledged(port, "waste-1"), Some(1));
    // Again: nothing is open, and its record says so.
    told(counter, "SGCTL-ACK", 0x02);
    let records: Vec<serde_json::Value> = audit_records(&open_db(&gw.dir.join("state")))
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .filter(|r: &serde_json::Value| r.get("acknowledged").is_some())
        .collect();
    assert_eq!(records.len(), 2, "{records:?}");
    let mut alerted: Vec<String> = ledger(&gw.cfg)
        .iter()
        .filter(|e| e["scanner"] == "counter-1" && e.get("alerts").is_some())
        .map(|e| e["scan_uuid"].as_str().unwrap().to_string())
        .collect();
    alerted.sort();
    let mut named: Vec<String> = records[0]["acknowledged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap().to_string())
        .collect();
    named.sort();
    assert_eq!(named, alerted, "{}", records[0]);
    assert_eq!(records[0]["decision"], "control");
    assert_eq!(records[0]["declared"]["control"], "acknowledge");
    assert!(
        records[0]["reason"]
            .as_str()
            .unwrap()
            .contains("7 open alert(s)"),
        "{}",
        records[0]
    );
    assert_eq!(records[1]["acknowledged"], serde_json::json!([]));
    assert!(
        records[1]["reason"]
            .as_str()
            .unwrap()
            .contains("none was open"),
        "{}",
        records[1]
    );
    audit_verify(&gw.cfg);
    // (The status file is rewritten every second.)
    wait_until("status saying counter-1's alerts are acknowledged", || {
        let text: Outcome = cli_cfg(&gw.cfg, &["status"]).into();
        text.stdout.contains("all acknowledged (last at ")
    });
    // What is open is kept in the database.
    gw.stop();
    gw.start();
    assert_eq!(unacknowledged(port, "waste-1"), Some(1));
    assert_eq!(unacknowledged(port, "counter-1"), Some(0));
    // A reload that removes waste-1 drops its series; one that adds it
    // back counts its open alert again, from the database.
    let full = std::fs::read_to_string(&gw.cfg).unwrap();
    let start = full.find("[[scanner]]\nname = \"waste-1\"").unwrap();
    let end = full[start + 1..]
        .find("\n[")
        .map_or(full.len(), |i| start + 2 + i);
    let hup = |gw: &Gateway| {
        let pid = nix::unistd::Pid::from_raw(gw.daemon().pid() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    };
    std::fs::write(&gw.cfg, format!("{}{}", &full[..start], &full[end..])).unwrap();
    hup(gw);
    wait_until("waste-1's series gone after the reload", || {
        unacknowledged(port, "waste-1").is_none()
    });
    std::fs::write(&gw.cfg, &full).unwrap();
    hup(gw);
    wait_until(
        "waste-1's open alert counted again after the reload",
        || unacknowledged(port, "waste-1") == Some(1),
    );
}

/// The reads of the first test as the ledger, the audit trail, the
/// Schedule II export and the EPCIS export keep them.
fn recorded_with_schedule_and_alerts(gw: &Gateway) {
    let entries = ledger(&gw.cfg);
    let by_serial = |s: &str| -> serde_json::Value {
        entries
            .iter()
            .find(|e| e["serial"] == s)
            .unwrap_or_else(|| panic!("{s} not in the ledger"))
            .clone()
    };
    let recall = serde_json::json!({
        "kind": "recalled", "recall_number": "D-0201-2026",
        "recall_class": "Class II", "recall_lot": "lot"
    });
    // (Every item of the product data is Schedule II; the missing one has
    // no schedule.)
    for (serial, alerts) in [
        ("S1", serde_json::json!(null)),
        ("S2", serde_json::json!([{"kind": "expired"}])),
        ("S3", serde_json::json!([{"kind": "expiring"}])),
        ("S6", serde_json::json!([recall])),
        ("S7", serde_json::json!(null)),
        ("S8", serde_json::json!([recall, {"kind": "expired"}])),
        ("W1", serde_json::json!(null)),
    ] {
        let e = by_serial(serial);
        assert_eq!(e["dea_schedule"], "CII", "{e}");
        assert_eq!(e["alerts"], alerts, "{e}");
    }
    let s9 = by_serial("S9");
    assert!(s9.get("dea_schedule").is_none(), "{s9}");
    assert_eq!(s9["alerts"], serde_json::json!([{"kind": "unknown"}]));

    // Each commit's audit record says the same, under the chain.
    let records = audit_records(&open_db(&gw.dir.join("state")));
    let s8 = &entries.iter().find(|e| e["serial"] == "S8").unwrap()["scan_uuid"];
    let record: serde_json::Value = records
        .iter()
        .map(|r| serde_json::from_str::<serde_json::Value>(r).unwrap())
        .find(|r| r["scan_uuid"] == *s8 && r["decision"] == "committed")
        .expect("S8's commit record");
    assert_eq!(record["dea_schedule"], "CII", "{record}");
    assert_eq!(record["alerts"], by_serial("S8")["alerts"], "{record}");
    audit_verify(&gw.cfg);

    // The Schedule II records alone; none of Schedule V; a schedule that
    // is none refused.
    let export = |args: &[&str]| -> Outcome {
        let mut all = vec!["ledger", "export"];
        all.extend_from_slice(args);
        cli_cfg(&gw.cfg, &all).into()
    };
    let cii = export(&["--schedule", "CII"]);
    assert_eq!(cii.code, Some(0), "{cii}");
    assert_eq!(cii.stdout.lines().count(), entries.len() - 1, "{cii}");
    assert!(!cii.stdout.contains("\"S9\""), "{cii}");
    let cv = export(&["--schedule", "cv,CIV"]);
    assert_eq!((cv.code, cv.stdout.as_str()), (Some(0), ""), "{cv}");
    let bad = export(&["--schedule", "C2"]);
    assert_eq!(bad.code, Some(2), "{bad}");
    assert!(bad.stderr.contains("not a DEA schedule"), "{bad}");

    // As EPCIS: scangate's extension, and still valid against GS1's schema.
    let doc = crate::epcis::document(
        &crate::epcis::export(&gw.cfg, &["--format", "epcis", "--schedule", "CII"]),
        &crate::epcis::Validator::new(),
    );
    let events = doc["epcisBody"]["eventList"].as_array().unwrap();
    assert_eq!(events.len(), entries.len() - 1);
    assert!(events.iter().all(|e| e["scangate:deaSchedule"] == "CII"));
    let s8_event = events
        .iter()
        .find(|e| e["eventID"] == format!("urn:uuid:{}", s8.as_str().unwrap()))
        .unwrap();
    assert_eq!(
        s8_event["@context"],
        serde_json::json!({"scangate": "urn:scangate:epcis:"})
    );
    assert_eq!(
        s8_event["scangate:alerts"],
        serde_json::json!([
            {"scangate:kind": "recalled", "scangate:recallNumber": "D-0201-2026",
             "scangate:recallClass": "Class II", "scangate:recallLot": "lot"},
            {"scangate:kind": "expired"}
        ])
    );
}

#[test]
fn with_a_facility_redis_the_alert_is_told_too_and_while_redis_is_down_instead_of_waiting() {
    let (_dir, mut redis) = facility(&[]);
    let port = free_port();
    let mut gw = Gateway::builder("scangate-checks-redis-")
        .window_ms(60_000)
        .pty(
            ScannerSpec::named("counter-1")
                .ack()
                .with("feedback = { protocol = \"zebra-ssi\" }"),
        )
        .config(&format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"))
        .redis(&redis)
        .build();
    gw.start();
    let [mut counter] = gw.take_scanners();
    let known = PackageNdc::parse("0067-6382-30").unwrap().gtin14(0);
    let today = Local::now().date_naive();
    let good = yymmdd(today + Days::new(400));
    let past = yymmdd(today - Days::new(3));
    // Claimed through Redis: the control, then an expired item.
    told(&mut counter, &label(&known, &good, "R1", "L1"), COMMITTED);
    told(&mut counter, &label(&known, &past, "R2", "L1"), EXPIRED);
    // Redis down: a read waits (told "waiting", two short high beeps),
    // and an expired one is told "expired" instead.
    redis.kill9();
    told(&mut counter, &label(&known, &good, "R3", "L1"), 0x01);
    told(&mut counter, &label(&known, &past, "R4", "L1"), EXPIRED);
    redis.restart();
    wait_until("the waiting reads committed", || {
        let serials: Vec<String> = ledger(&gw.cfg)
            .iter()
            .filter_map(|e| e["serial"].as_str().map(String::from))
            .collect();
        ["R1", "R2", "R3", "R4"]
            .iter()
            .all(|s| serials.iter().filter(|x| x == s).count() == 1)
    });
    // The facility's ledger carries the alerts too, also of the read that
    // waited; the good items none.
    let entries = ledger(&gw.cfg);
    for (serial, alerts) in [
        ("R1", serde_json::json!(null)),
        ("R2", serde_json::json!([{"kind": "expired"}])),
        ("R3", serde_json::json!(null)),
        ("R4", serde_json::json!([{"kind": "expired"}])),
    ] {
        let e = entries.iter().find(|e| e["serial"] == serial).unwrap();
        assert_eq!(e["alerts"], alerts, "{e}");
        assert!(e.get("dea_schedule").is_none(), "no product data: {e}");
    }
    // R4 is counted once: when it was told, not again when it committed.
    let m = metrics(port);
    let line = "scangate_alerts_total{scanner=\"counter-1\",kind=\"expired\"} 2";
    assert!(m.contains(line), "{line} not in:\n{m}");
}
