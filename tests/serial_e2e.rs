//! End to end on the real binary: two PTY scanners feed `scangate run`, which
//! must record exactly one ledger entry per physical pick among realistic
//! echoes, reject garbage without disturbing anything, ACK each stored frame
//! once, audit every decision in an intact chain, and exit 0 on SIGTERM.

use crate::util::*;
use scangate::pty::VirtualScanner;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// The echo window. Echo gaps below are at most 2000 ms (1000 ms margin) and
/// the re-dispense comes 4500 ms after its first read (1500 ms margin).
const WINDOW_MS: i64 = 3000;

const A: usize = 0; // counter-1: ACK scanner
const B: usize = 1; // counter-2: no ACK, short frame limit

/// state, scan_uuid, content_key, twin_uuid, captured_ms, reject_reason,
/// twin state, twin content_key, twin captured_ms, audit records.
type ScanRow = (
    String,
    String,
    Option<String>,
    Option<String>,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
    i64,
);

#[test]
fn noisy_shift_on_two_serial_scanners() {
    let mut b = ScannerSpec::named("counter-2");
    b.max_frame_bytes = Some(64);
    let mut gw = Gateway::builder("scangate-e2e-")
        .window_ms(WINDOW_MS as u64)
        .pty(ScannerSpec::named("counter-1").ack())
        .pty(b)
        .build();
    let mut daemon = gw.launch();
    let mut scanners: [VirtualScanner; 2] = gw.take_scanners();

    let sn = |s: &str| frame(&dscsa(s));
    let mut long = vec![b'9'; 200];
    long.push(b'\r');
    // (offset ms, scanner, bytes)
    let mut script: Vec<(u64, usize, Vec<u8>)> = vec![
        (0, A, sn("SN0001")),                          // pick 1
        (40, A, sn("SN0001")),                         //   trigger double-fire
        (100, B, frame(UPC_NDC)),                      // pick 2 (UPC-A NDC)
        (200, A, sn("SN0002")),                        // pick 3
        (800, A, sn("SN0002")),                        //   retransmit after a missed ACK (600 ms)
        (300, B, sn("SN0003")),                        // pick 4
        (2300, B, sn("SN0003")),                       //   operator re-scan (2000 ms)
        (400, A, sn("SN0004")),                        // pick 5: same product ...
        (400, B, sn("SN0004")),                        // pick 6: ... on the other scanner
        (600, B, b"\xff\xfe\x00\x01noise\r".to_vec()), // garbage: not UTF-8
        (900, B, long),                                // garbage: over-long frame
        (1000, B, b"]C1NOT-A-GS1-STRING\r".to_vec()),  // garbage: misread
        (4500, A, sn("SN0001")),                       // pick 7: re-dispense after the window
        (4540, A, sn("SN0001")),                       //   its double-fire
    ];
    script.sort_by_key(|s| s.0);
    let transmissions = script.len() as i64;
    let sent_on_a = script.iter().filter(|s| s.1 == A).count();

    // Play the script (this is the scanners' timing, not a wait for the
    // daemon); gather ACK/NAK bytes from the ACK scanner as they come.
    let mut replies: Vec<u8> = Vec::new();
    let start = Instant::now();
    for (at, idx, bytes) in &script {
        let due = start + Duration::from_millis(*at);
        if let Some(left) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(left);
        }
        scanners[*idx].send(bytes).unwrap();
    }

    let mut status = wait_all_decided(&gw.cfg, transmissions);
    wait_until(&format!("{sent_on_a} ACKs on counter-1"), || {
        replies.extend(scanners[A].read_reply(Duration::ZERO).unwrap());
        replies.iter().filter(|&&b| b == ACK).count() >= sent_on_a
    });

    let exit = daemon.terminate();
    assert_eq!(exit.code(), Some(0), "SIGTERM must drain and exit 0");
    // Anything still in flight from the daemon is in the PTY now.
    loop {
        let more = scanners[A].read_reply(Duration::from_millis(100)).unwrap();
        if more.is_empty() {
            break;
        }
        replies.extend(more);
    }
    assert_eq!(
        replies.iter().filter(|&&b| b == ACK).count(),
        sent_on_a,
        "counter-1 must get exactly one ACK per stored frame: {replies:02x?}"
    );
    assert!(
        replies.iter().all(|&b| b == ACK),
        "only ACKs expected on counter-1 (no NAK, no echo): {replies:02x?}"
    );
    assert!(
        scanners[B].read_reply(Duration::ZERO).unwrap().is_empty(),
        "counter-2 has ack = false: the daemon must not write to it"
    );

    // Outbox: every transmission decided.
    let mut status_after = outbox_status(&gw.cfg);
    // (Free space is the file system's, not the outbox's.)
    let disk = status_after["disk"].take();
    assert!(disk["free_bytes"].as_u64().is_some(), "{disk}");
    status["disk"].take();
    assert_eq!(status, status_after, "nothing changed during shutdown");
    for (field, want) in [
        ("committed", 7),
        ("suppressed", 4),
        ("rejected", 3),
        ("pending", 0),
        ("unresolved", 0),
    ] {
        assert_eq!(count(&status_after, field), want, "{field}: {status_after}");
    }
    assert!(status_after["oldest_open_ms"].is_null(), "{status_after}");

    // Ledger: exactly one entry per physical pick.
    let ledger = ledger(&gw.cfg);
    let pick_of = |e: &Value| {
        (
            e["scanner"].as_str().unwrap().to_string(),
            e["serial"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("ndc:{}", e["ndc10"].as_str().unwrap_or("?"))),
        )
    };
    let mut per_pick: HashMap<(String, String), Vec<&Value>> = HashMap::new();
    for e in &ledger {
        per_pick.entry(pick_of(e)).or_default().push(e);
    }
    let expect = [
        ("counter-1", "SN0001", 2), // first pick + re-dispense
        ("counter-1", "SN0002", 1),
        ("counter-1", "SN0004", 1),
        ("counter-2", "SN0003", 1),
        ("counter-2", "SN0004", 1),
        ("counter-2", "ndc:1234567890", 1),
    ];
    for (scanner, id, n) in expect {
        let got = per_pick
            .get(&(scanner.to_string(), id.to_string()))
            .map_or(0, Vec::len);
        assert_eq!(got, n, "ledger entries for {id} on {scanner}: {ledger:#?}");
    }
    assert_eq!(ledger.len(), 7, "{ledger:#?}");

    // Ledger fields (`LedgerEntry`'s names) and values.
    let seqs: Vec<i64> = ledger.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (1..=7).collect::<Vec<_>>(), "ledger seq is 1..=n");
    let uuids: HashSet<&str> = ledger
        .iter()
        .map(|e| e["scan_uuid"].as_str().unwrap())
        .collect();
    assert_eq!(uuids.len(), 7, "one scan per ledger entry");
    for e in &ledger {
        for field in LEDGER_FIELDS {
            assert!(e.get(field).is_some(), "ledger entry lacks {field}: {e}");
        }
        assert_eq!(e["gateway"], "test-gw");
        assert_eq!(e["scan_type"], "dispense");
        assert_eq!(e["quantity"], 1);
        let key = e["content_key"].as_str().unwrap();
        assert!(
            key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit()),
            "{e}"
        );
        assert!(
            chrono::DateTime::parse_from_rfc3339(e["captured_at"].as_str().unwrap()).is_ok(),
            "{e}"
        );
        if e["serial"].is_string() {
            assert_eq!(e["gtin"], GTIN, "{e}");
            assert_eq!(e["ndc10"], "0777310502", "{e}");
            assert_eq!(e["lot"], "LOT7A", "{e}");
            assert_eq!(e["expiry"], "2028-12-31", "{e}");
            assert_eq!(e["symbology"], "]d2", "{e}");
        } else {
            assert_eq!(e["ndc10"], "1234567890", "{e}");
            assert_eq!(e["gtin"], "00312345678906", "{e}");
        }
    }
    let sn1 = &per_pick[&("counter-1".to_string(), "SN0001".to_string())];
    let t = |e: &Value| {
        chrono::DateTime::parse_from_rfc3339(e["captured_at"].as_str().unwrap())
            .unwrap()
            .timestamp_millis()
    };
    assert!(
        (t(sn1[1]) - t(sn1[0])).abs() > WINDOW_MS,
        "the re-dispense was committed outside the window: {sn1:?}"
    );
    assert_eq!(
        sn1[0]["content_key"], sn1[1]["content_key"],
        "same label, same scanner: same content key (no time in the key)"
    );
    let sn4a = &per_pick[&("counter-1".to_string(), "SN0004".to_string())][0];
    let sn4b = &per_pick[&("counter-2".to_string(), "SN0004".to_string())][0];
    assert_ne!(
        sn4a["content_key"], sn4b["content_key"],
        "the scanner is part of the content key"
    );

    // `--since` filters by capture time.
    let since = sn1[1]["captured_at"].as_str().unwrap();
    let recent: Outcome = cli_cfg(&gw.cfg, &["ledger", "export", "--since", since]).into();
    assert_eq!(recent.code, Some(0), "{recent}");
    assert_eq!(
        recent.stdout.lines().count(),
        1,
        "only the re-dispense was captured at/after {since}: {recent}"
    );

    // Audit: intact, one record per decision.
    let verify = audit_verify(&gw.cfg);
    assert!(
        verify
            .stdout
            .contains(&format!("audit chain intact: {transmissions} records")),
        "{verify}"
    );

    // Cross-check the decisions in the database itself.
    let db = open_db(&gw.state);
    let mut q = db
        .prepare(
            "SELECT s.scan_uuid, s.state, s.twin_uuid, s.content_key, s.captured_ms,
                    s.reject_reason, t.state, t.content_key, t.captured_ms,
                    (SELECT count(*) FROM audit a WHERE a.scan_uuid = s.scan_uuid)
             FROM scans s LEFT JOIN scans t ON t.scan_uuid = s.twin_uuid",
        )
        .unwrap();
    let rows: Vec<ScanRow> = q
        .query_map([], |r| {
            let id = |i| {
                r.get::<_, Option<scangate::store::packed::Unpacked>>(i)
                    .map(|u| u.map(|u| u.0))
            };
            Ok((
                r.get::<_, scangate::store::packed::Unpacked>(0)?.0,
                r.get(1)?,
                id(2)?,
                id(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                id(7)?,
                r.get(8)?,
                r.get(9)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        rows.len() as i64,
        transmissions,
        "every transmission stored once"
    );
    for (uuid, st, twin, key, at, reason, twin_st, twin_key, twin_at, audits) in &rows {
        assert_eq!(*audits, 1, "scan {uuid} must have exactly one audit record");
        match st.as_str() {
            "suppressed" => {
                assert!(twin.is_some(), "suppressed {uuid} names no twin");
                assert_eq!(twin_st.as_deref(), Some("committed"), "twin of {uuid}");
                assert_eq!(twin_key, key, "twin of {uuid} has another content key");
                assert!(
                    (at - twin_at.unwrap()).abs() <= WINDOW_MS,
                    "{uuid} suppressed against a twin outside the window"
                );
            }
            "rejected" => assert!(
                reason.as_deref().is_some_and(|r| !r.is_empty()),
                "rejected {uuid} has no reason"
            ),
            "committed" => assert!(twin.is_none()),
            other => panic!("scan {uuid} is {other}"),
        }
    }

    // Audit records are PHI-free: no scanned data in the trail.
    let records: Vec<String> = audit_records(&db);
    for r in &records {
        for secret in ["SN000", "LOT7A", "NOT-A-GS1", "noise", "312345678906", GTIN] {
            assert!(!r.contains(secret), "audit record leaks {secret:?}: {r}");
        }
    }

    // `audit trace` tells the story of pick 1 and its re-dispense.
    let key = sn1[0]["content_key"].as_str().unwrap();
    let trace: Outcome = cli_cfg(&gw.cfg, &["audit", "trace", key]).into();
    assert_eq!(trace.code, Some(0), "{trace}");
    assert!(
        trace.stdout.contains("4 transmission(s), 2 ledger entries"),
        "{trace}"
    );
    for e in sn1 {
        assert!(
            trace.stdout.contains(e["scan_uuid"].as_str().unwrap()),
            "trace names each committed scan: {trace}"
        );
    }
    assert_eq!(
        trace.stdout.matches("echo suppressed").count(),
        2,
        "{trace}"
    );
    // … and by scan UUID, for the operator re-scan.
    let sn3 = &per_pick[&("counter-2".to_string(), "SN0003".to_string())][0];
    let trace: Outcome = cli_cfg(
        &gw.cfg,
        &["audit", "trace", sn3["scan_uuid"].as_str().unwrap()],
    )
    .into();
    assert_eq!(trace.code, Some(0), "{trace}");
    assert!(
        trace.stdout.contains("2 transmission(s), 1 ledger entry"),
        "{trace}"
    );
    assert_eq!(
        trace.stdout.matches("echo suppressed").count(),
        1,
        "{trace}"
    );
}

/// SIGINT (Ctrl-C) stops like SIGTERM, and whatever was acknowledged (durable)
/// is decided before the process exits: nothing is left pending.
#[test]
fn sigint_right_after_the_acks_drains_everything_durable() {
    let mut gw = Gateway::builder("scangate-e2e-drain-")
        .window_ms(WINDOW_MS as u64)
        .pty(ScannerSpec::named("counter-1").ack())
        .build();
    let mut daemon = gw.launch();
    let [mut vs] = gw.take_scanners();

    const PICKS: usize = 40;
    let burst: Vec<u8> = (0..PICKS)
        .flat_map(|i| frame(&dscsa(&format!("DR{i:04}"))))
        .collect();
    vs.send(&burst).unwrap();
    let acks = wait_acks(&mut vs, PICKS);
    // No wait for the decisions: the drain on shutdown must make them.
    let exit = daemon.stop_with(nix::sys::signal::Signal::SIGINT);
    assert_eq!(exit.code(), Some(0), "SIGINT must drain and exit 0");
    assert_eq!(acks, PICKS, "one ACK per frame");

    let st = outbox_status(&gw.cfg);
    assert_eq!(count(&st, "committed"), PICKS as i64, "{st}");
    assert_eq!(count(&st, "pending") + count(&st, "unresolved"), 0, "{st}");
    assert_eq!(ledger(&gw.cfg).len(), PICKS);
    audit_verify(&gw.cfg);
}
