//! The HID source loop driven through the device seam with scripted report
//! streams (no USB here): reads, reassembles, rejects torn scans, reopens
//! after an unplug, and its scans land in a real SQLite outbox and ledger
//! through the gate call the daemon's outbox writer makes.

use crate::util::*;
use scangate::capture::Scan;
use scangate::config::{Config, HidConfig, HidMode, ScanType, Scanner};
use scangate::gate::{Gate, GateConfig};
use scangate::source::hid::device::{Replay, Step};
use scangate::source::hid::pos::{self, DEFAULT_REPORT_ID};
use scangate::source::{Inbound, ToOutbox};
use scangate::store::Store;
use std::time::Duration;
use tokio::sync::mpsc;

fn label(serial: &str) -> Vec<u8> {
    // No AIM id in the data: the POS report carries it. An (91) company
    // field makes it long enough for two reports.
    let mut l = dscsa(serial).into_bytes()[3..].to_vec();
    l.extend_from_slice(format!("{GS}91{}", "X".repeat(60)).as_bytes());
    l
}

fn pos_scan(serial: &str) -> Vec<Step> {
    pos::encode(DEFAULT_REPORT_ID, b"]d2", &label(serial), true)
        .into_iter()
        .map(Step::Report)
        .collect()
}

/// Run the source on `script` until `want` scans arrived; return them.
fn run_source(cfg: Scanner<HidConfig>, script: Vec<Vec<Step>>, want: usize) -> (Vec<Scan>, usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let (tx, mut rx) = mpsc::channel::<Inbound>(64);
        let (stop_tx, stop_rx) = scangate::shutdown::channel();
        let replay = Replay::new(script);
        let opened = replay.opened();
        let task = tokio::spawn(scangate::source::hid::run_with(
            cfg,
            Box::new(replay),
            ToOutbox::new(tx),
            stop_rx,
        ));
        let mut scans = Vec::new();
        while scans.len() < want {
            let inbound = tokio::time::timeout(event_timeout(), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("timed out with {} of {want} scans", scans.len()))
                .expect("source ended early");
            let Inbound::Scan(c) = inbound else {
                panic!("no control label was read: {inbound:?}")
            };
            assert!(c.durable.is_none(), "HID scans are never ACKed");
            scans.push(c.scan);
        }
        stop_tx.stop();
        tokio::time::timeout(event_timeout(), task)
            .await
            .unwrap()
            .unwrap();
        (scans, opened.load(std::sync::atomic::Ordering::SeqCst))
    })
}

fn store_and_decide(dir: &std::path::Path, scans: &[Scan]) -> std::path::PathBuf {
    let state = dir.join("state");
    let config = write_config(dir, &state, 3000, &[]);
    let cfg = Config::load(Some(&config)).unwrap();
    let mut store = Store::open(&state).unwrap();
    let mut gate = Gate::new(GateConfig::from_config(&cfg), &store).unwrap();
    scangate::daemon::embedded::admit_and_decide(&mut store, &mut gate, scans).unwrap();
    config
}

#[test]
fn pos_scans_reassembled_torn_one_rejected_reconnect_after_unplug() {
    let mut first = pos_scan("SNA1");
    let torn = pos_scan("SNB2");
    first.push(Step::Pause(Duration::from_millis(30)));
    assert_eq!(torn.len(), 2);
    first.push(torn[0].clone()); // the first of two pieces, then…
    first.push(Step::Unplug); // …the scanner is pulled
    let mut second = pos_scan("SNC3");
    second.extend(pos_scan("SNA1")); // an echo of the first scan
    // Not plugged in for a while: the source keeps looking (NotFound).
    let script = vec![first, second];
    let mut cfg = Scanner::hid("counter-hid", HidMode::Pos, ScanType::Dispense);
    cfg.kind.vendor_id = Some(0x0c2e);
    let (scans, opened) = run_source(cfg, script, 4);
    assert_eq!(opened, 2, "reopened after the unplug");
    let serial = |s: &Scan| {
        s.decoded
            .as_ref()
            .ok()
            .and_then(|d| d.product.serial.clone())
    };
    assert_eq!(serial(&scans[0]).as_deref(), Some("SNA1"));
    let why = scans[1].decoded.as_ref().unwrap_err().0.clone();
    assert!(
        why.contains("truncated") && why.contains("went away"),
        "{why}"
    );
    assert_eq!(
        serial(&scans[2]).as_deref(),
        Some("SNC3"),
        "not merged with the torn scan"
    );
    assert_eq!(serial(&scans[3]).as_deref(), Some("SNA1"));

    let dir = tempdir("scangate-hid-source");
    let config = store_and_decide(dir.path(), &scans);
    let st = outbox_status(&config);
    assert_eq!(
        (
            count(&st, "committed"),
            count(&st, "suppressed"),
            count(&st, "rejected")
        ),
        (2, 1, 1),
        "{st}"
    );
    let ledger = ledger(&config);
    assert_eq!(ledger.len(), 2);
    assert!(
        ledger.iter().all(|e| e["scanner"] == "counter-hid"),
        "{ledger:?}"
    );
}

#[test]
fn keyboard_wedge_scans_and_a_pause_tears_an_unterminated_one() {
    let key = |mods: u8, usage: u8| Step::Report(vec![mods, 0, usage, 0, 0, 0, 0, 0]);
    let up = || Step::Report(vec![0; 8]);
    let mut typed = Vec::new();
    // "312345678906" (UPC-A with NDC 1234567890), Enter.
    for c in UPC_NDC.bytes() {
        let usage = if c == b'0' { 0x27 } else { 0x1d + (c - b'0') };
        typed.push(key(0, usage));
        typed.push(up());
    }
    typed.push(key(0, 0x28));
    typed.push(up());
    // "31", then silence longer than frame_timeout_ms: torn.
    typed.extend([key(0, 0x20), up(), key(0, 0x1e), up()]);
    typed.push(Step::Pause(Duration::from_millis(400)));
    let mut cfg = Scanner::hid("kbd", HidMode::Keyboard, ScanType::Dispense);
    cfg.kind.path = "/dev/scangate/kbd".into();
    cfg.kind.frame_timeout_ms = Some(150);
    let (scans, _) = run_source(cfg, vec![typed], 2);
    let d = scans[0].decoded.as_ref().unwrap();
    assert_eq!(d.product.ndc10.as_deref(), Some("1234567890"));
    let why = &scans[1].decoded.as_ref().unwrap_err().0;
    assert!(
        why.contains("no terminator") && why.contains("150 ms"),
        "{why}"
    );
}
