//! `feedback = { protocol = "hid-pos" }` through the HID source loop and
//! the device seam (no USB here): the source reads the replayed device's
//! report descriptor, its scans are made durable and decided by the gate
//! call the daemon's writer makes, the decisions are told through the
//! same `Signals` the writer tells after its commit, and the output
//! reports the source writes to the device are checked byte for byte.

use crate::util::*;
use scangate::config::{Config, HidMode, ScanType, Scanner};
use scangate::gate::{Gate, GateConfig};
use scangate::model::Verdict;
use scangate::source::hid::device::{Replay, Step};
use scangate::source::hid::pos::{self, DEFAULT_REPORT_ID};
use scangate::source::signal::Signals;
use scangate::source::{Inbound, ToOutbox};
use scangate::store::Store;
use std::time::Duration;
use tokio::sync::mpsc;

/// The report descriptor of tests/vm/vmhid.c's HID POS scanner: the
/// scanned-data input report (report id 2) only.
const VM_INPUT: &[u8] = &[
    0x05, 0x8C, 0x09, 0x02, 0xA1, 0x01, 0x85, 0x02, 0x09, 0x12, 0xA1, 0x02, 0x15, 0x00, 0x26, 0xFF,
    0x00, 0x75, 0x08, 0x05, 0x01, 0x09, 0x3B, 0x95, 0x01, 0x81, 0x02, 0x05, 0x8C, 0x09, 0xFB, 0x09,
    0xFC, 0x09, 0xFD, 0x95, 0x03, 0x81, 0x02, 0x09, 0xFE, 0x95, 0x38, 0x82, 0x02, 0x01, 0x06, 0x66,
    0xFF, 0x09, 0x04, 0x09, 0x05, 0x95, 0x02, 0x81, 0x02, 0x05, 0x8C, 0x09, 0xFF, 0x25, 0x01, 0x75,
    0x01, 0x95, 0x01, 0x81, 0x02, 0x75, 0x07, 0x81, 0x03, 0xC0, 0xC0,
];

/// What vmhid's `outputs` variant inserts before the last End
/// Collection: output report 3 with Good Read LED (0x7D) in bit 0, three
/// constant bits, Sound Error Beep, Sound Good Read Beep and Sound Not On
/// File Beep (0x85..0x87) in bits 4-6, a constant bit 7.
const OUTPUT_REPORT_3: &[u8] = &[
    0x05, 0x8C, //   Usage Page (Bar Code Scanner)
    0x85, 0x03, //   Report ID (3)
    0x15, 0x00, //   Logical Minimum (0)
    0x25, 0x01, //   Logical Maximum (1)
    0x75, 0x01, //   Report Size (1)
    0x09, 0x7D, //   Usage (Good Read LED)
    0x95, 0x01, //   Report Count (1)
    0x91, 0x02, //   Output (Data,Var,Abs): bit 0
    0x95, 0x03, //   Report Count (3)
    0x91, 0x03, //   Output (Const): bits 1-3
    0x19, 0x85, //   Usage Minimum (Sound Error Beep)
    0x29, 0x87, //   Usage Maximum (Sound Not On File Beep)
    0x91, 0x02, //   Output (Data,Var,Abs): bits 4-6
    0x95, 0x01, //   Report Count (1)
    0x91, 0x03, //   Output (Const): bit 7
];

/// `vmhid descriptor outputs` prints this (checked below, so the VM
/// check and these tests describe one device).
const VM_WITH_OUTPUTS_HEX: &str = "058c0902a10185020912a102150026ff0075080501093b95018102058c09fb09fc09fd9503810209fe95388202010666ff0904090595028102058c09ff250175019501810275078103c0058c8503150025017501097d950191029503910319852987910295019103c0";

/// vmhid's `outputs` variant: the input report, then output report 3,
/// inside the one Application collection.
fn vm_with_outputs() -> Vec<u8> {
    [&VM_INPUT[..VM_INPUT.len() - 1], OUTPUT_REPORT_3, &[0xC0]].concat()
}

/// The same outputs on their own, without report ids (hidapi then wants
/// a leading 0).
fn unnumbered_outputs() -> Vec<u8> {
    let head = [0x05, 0x8C, 0x09, 0x02, 0xA1, 0x01]; // Bar Code Scanner, Collection
    [
        &head[..],
        &OUTPUT_REPORT_3[..2],
        &OUTPUT_REPORT_3[4..],
        &[0xC0],
    ]
    .concat()
}

/// A POS scan of `data` with AIM id `]d2`, in reports of id 2.
fn scan(data: &[u8]) -> Vec<Step> {
    pos::encode(DEFAULT_REPORT_ID, b"]d2", data, true)
        .into_iter()
        .map(Step::Report)
        .collect()
}

fn label(serial: &str) -> Vec<u8> {
    dscsa(serial).into_bytes()[3..].to_vec()
}

struct Outcome {
    verdicts: Vec<&'static str>,
    written: Vec<Vec<u8>>,
    metrics: String,
    opened: usize,
}

/// Run the HID source on one replayed connection of a device with
/// `descriptor` (`None`: it cannot be read) whose first `fail_writes`
/// writes fail, reading `reads` (one POS scan each), each made durable
/// and decided as the daemon's writer does and its decision told through
/// the writer's `Signals`; wait for `want_written` reports (and a while
/// longer for any that should not come), then stop.
fn run(
    descriptor: Option<&[u8]>,
    fail_writes: usize,
    reads: Vec<Vec<u8>>,
    want_written: usize,
) -> Outcome {
    let dir = tempdir("scangate-hid-feedback");
    let state = dir.path().join("state");
    let config = write_config(dir.path(), &state, 3000, &[]);
    let cfg_all = Config::load(Some(&config)).unwrap();
    let mut store = Store::open(&state).unwrap();
    let mut gate = Gate::new(GateConfig::from_config(&cfg_all), &store).unwrap();

    let mut cfg = Scanner::hid("counter-pos", HidMode::Pos, ScanType::Dispense);
    cfg.kind.vendor_id = Some(0x0c2e);
    cfg.feedback = Some(toml::from_str("protocol = \"hid-pos\"").unwrap());
    let n = reads.len();
    let script: Vec<Step> = reads.iter().flat_map(|r| scan(r)).collect();
    let mut replay = Replay::new(vec![script]).failing_writes(fail_writes);
    if let Some(d) = descriptor {
        replay = replay.with_descriptor(d);
    }
    let written = replay.written();
    let opened = replay.opened();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let (tx, mut rx) = mpsc::channel::<Inbound>(64);
        let (stop_tx, stop_rx) = scangate::shutdown::channel();
        let signals = Signals::default();
        let out = ToOutbox::new(tx).with_signals(signals.clone());
        let telemetry = out.telemetry().clone();
        let task = tokio::spawn(scangate::source::hid::run_with(
            cfg,
            Box::new(replay),
            out,
            stop_rx,
        ));
        let mut verdicts = Vec::new();
        while verdicts.len() < n {
            let inbound = tokio::time::timeout(event_timeout(), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("timed out with {} of {n} scans", verdicts.len()))
                .expect("source ended early");
            let Inbound::Scan(c) = inbound else {
                panic!("no control label was read: {inbound:?}")
            };
            // Durable and decided, then told: as the writer does.
            let (_, decisions) =
                scangate::daemon::embedded::admit_and_decide(&mut store, &mut gate, &[c.scan])
                    .unwrap();
            signals.tell(&decisions);
            verdicts.extend(decisions.iter().map(|d| match d.verdict {
                Verdict::Committed => "committed",
                Verdict::Suppressed { .. } => "suppressed",
                Verdict::Rejected { .. } => "rejected",
                _ => "other",
            }));
        }
        // The reports due are written within a read slice; wait for them,
        // then a while longer for any that should not come.
        let deadline = tokio::time::Instant::now() + event_timeout();
        while written.lock().unwrap().len() < want_written {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out with {:?}",
                written.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop_tx.stop();
        tokio::time::timeout(event_timeout(), task)
            .await
            .unwrap()
            .unwrap();
        let written = written.lock().unwrap().clone();
        Outcome {
            verdicts,
            written,
            metrics: telemetry.encode(),
            opened: opened.load(std::sync::atomic::Ordering::SeqCst),
        }
    })
}

/// `scangate_feedback_total` for `told` and `outcome` (0 when absent).
fn fed(metrics: &str, told: &str, outcome: &str) -> u64 {
    metrics
        .lines()
        .find(|l| {
            l.starts_with("scangate_feedback_total{")
                && l.contains(&format!("told=\"{told}\""))
                && l.contains(&format!("outcome=\"{outcome}\""))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// A committed read, an echo of it, a read that does not decode.
fn three_reads() -> Vec<Vec<u8>> {
    vec![
        label("SNF1"),
        label("SNF1"),
        b"not a GS1 element string".to_vec(),
    ]
}

#[test]
fn the_test_descriptors_are_vmhids() {
    assert_eq!(hex::encode(vm_with_outputs()), VM_WITH_OUTPUTS_HEX);
    let o = scangate::feedback::hid_pos::outputs(&vm_with_outputs()).expect("0x8C outputs");
    assert!(o.uses_report_ids());
    assert_eq!(o.fields().len(), 4);
    let u = scangate::feedback::hid_pos::outputs(&unnumbered_outputs()).expect("0x8C outputs");
    assert!(!u.uses_report_ids());
}

#[test]
fn hid_pos_outputs_get_the_reports_for_committed_and_rejected_none_for_an_echo() {
    let o = run(Some(&vm_with_outputs()), 0, three_reads(), 2);
    assert_eq!(o.verdicts, ["committed", "suppressed", "rejected"]);
    // Committed: Good Read Beep (bit 5) and Good Read LED (bit 0);
    // an echo: nothing; rejected: Sound Error Beep (bit 4).
    assert_eq!(o.written, [vec![0x03, 0x21], vec![0x03, 0x10]]);
    assert_eq!(fed(&o.metrics, "committed", "sent"), 1, "{}", o.metrics);
    assert_eq!(fed(&o.metrics, "rejected", "sent"), 1, "{}", o.metrics);
    assert_eq!(fed(&o.metrics, "echo", "sent"), 0, "{}", o.metrics);
    assert_eq!(o.opened, 1);
}

#[test]
fn hid_pos_without_report_ids_gets_a_leading_zero() {
    let o = run(Some(&unnumbered_outputs()), 0, three_reads(), 2);
    assert_eq!(o.verdicts, ["committed", "suppressed", "rejected"]);
    assert_eq!(o.written, [vec![0x00, 0x21], vec![0x00, 0x10]]);
}

#[test]
fn hid_pos_without_outputs_or_descriptor_sends_nothing_and_scans_on() {
    let cut_short: &[u8] = &[0x05, 0x8C, 0x26, 0xFF];
    // Inputs only; a descriptor that cannot be read; one that does not parse.
    for descriptor in [Some(VM_INPUT), None, Some(cut_short)] {
        let o = run(descriptor, 0, three_reads(), 0);
        assert_eq!(o.verdicts, ["committed", "suppressed", "rejected"]);
        assert!(o.written.is_empty(), "{:?}", o.written);
        assert_eq!(fed(&o.metrics, "committed", "sent"), 0, "{}", o.metrics);
    }
}

#[test]
fn hid_pos_a_failed_write_is_counted_and_scanning_goes_on() {
    let o = run(Some(&vm_with_outputs()), 1, three_reads(), 1);
    assert_eq!(o.verdicts, ["committed", "suppressed", "rejected"]);
    assert_eq!(o.written, [vec![0x03, 0x10]], "the rejected read's report");
    assert_eq!(fed(&o.metrics, "committed", "failed"), 1, "{}", o.metrics);
    assert_eq!(fed(&o.metrics, "committed", "sent"), 0, "{}", o.metrics);
    assert_eq!(fed(&o.metrics, "rejected", "sent"), 1, "{}", o.metrics);
    assert_eq!(o.opened, 1, "the source did not reopen the device");
}

#[test]
fn check_config_takes_hid_pos_feedback_on_a_pos_scanner_only() {
    let dir = tempdir("scangate-hid-feedback-config");
    let state = dir.path().join("state");
    let base = config_text("test-gw", &state, 3000, &[]);
    let hid = |mode: &str| {
        format!(
            "{base}\n[[scanner]]\nname = \"counter-pos\"\nkind = \"hid\"\nmode = \"{mode}\"\n\
             vendor_id = 0x0c2e\nscan_type = \"dispense\"\nfeedback = {{ protocol = \"hid-pos\" }}\n"
        )
    };
    let path = dir.path().join("scangate.toml");
    std::fs::write(&path, hid("pos")).unwrap();
    let out = cli_cfg(&path, &["check-config"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A keyboard wedge has no channel back: still refused, pointing at led.
    std::fs::write(&path, hid("keyboard")).unwrap();
    let out = cli_cfg(&path, &["check-config"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("feedback") && err.contains("led"), "{err}");
}
