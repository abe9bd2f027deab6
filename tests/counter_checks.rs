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
        text.stdout.contains("7 alert(s)") && text.stdout.contains("  alert: unknown at "),
        "{text}"
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
    // R4 is counted once: when it was told, not again when it committed.
    let m = metrics(port);
    let line = "scangate_alerts_total{scanner=\"counter-1\",kind=\"expired\"} 2";
    assert!(m.contains(line), "{line} not in:\n{m}");
}
