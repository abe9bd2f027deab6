//! A Zebra SSI scanner says what software it runs: at each connect the
//! daemon sends `REQUEST_REVISION` (0xA3) and takes the scanner's
//! `REPLY_REVISION` (0xA4, its revision string in the form of Zebra's
//! integration guides: `S/W_REVISION BOARD_TYPE SCANNER_ID PGM_CHKSUM`)
//! out of the byte stream, ACKs it, and shows the software in `status` and
//! `scangate_scanner_info`. A scanner that never answers is read at once
//! as before (the control), and one that answers with data that is no
//! revision string is logged once and read as before.

use crate::util::*;
use scangate::pty::VirtualScanner;
use std::time::{Duration, Instant};

/// A REPLY_REVISION packet from the decoder with `data`.
fn reply_revision(data: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8, 0xA4, 0x00, 0x00];
    p.extend_from_slice(data);
    p[0] = p.len() as u8;
    let sum: u16 = p.iter().map(|&b| u16::from(b)).sum();
    p.extend((!sum).wrapping_add(1).to_be_bytes());
    p
}

/// The next `n` bytes the daemon writes to `vs`, raw.
fn raw(vs: &mut VirtualScanner, n: usize) -> Vec<u8> {
    let deadline = Instant::now() + event_timeout();
    let mut got = Vec::new();
    while got.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "waited for {n} bytes, got {got:02x?}");
        got.extend(vs.read_reply(left.min(Duration::from_millis(200))).unwrap());
    }
    got
}

fn ssi(name: &str) -> ScannerSpec {
    ScannerSpec::named(name)
        .ack()
        .with("feedback = { protocol = \"zebra-ssi\" }")
}

/// A scan, its ACK and its "committed" beep.
fn committed(vs: &mut VirtualScanner, serial: &str) {
    vs.send(&frame(&dscsa(serial))).unwrap();
    let mut want = vec![ACK];
    want.extend(ssi_beep(0x00));
    assert_eq!(replies(vs, want.len()).0, want, "{serial}");
}

#[test]
fn a_zebra_scanner_reports_its_software_and_one_that_does_not_answer_is_read_as_before() {
    let port = free_port();
    let mut gw = Gateway::builder("scangate-ssi-rev-")
        .pty(ssi("answers"))
        .pty(ssi("silent"))
        .pty(ssi("garbled"))
        .config(&format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"))
        .build();
    gw.start();
    let [mut answers, mut silent, mut garbled] = gw.take_scanners();
    // Each is asked, once, at connect.
    for vs in [&mut answers, &mut silent, &mut garbled] {
        assert_eq!(raw(vs, 6), SSI_REQUEST_REVISION);
    }
    // The control: one that never answers is read at once.
    committed(&mut silent, "SSI001");
    // The answer, taken out of the stream and ACKed (CMD_ACK from the
    // host: 04 D0 04 00 FF 28); the scanner's reads go on.
    answers
        .send(&reply_revision(b"NBRPUCAM 0 SE923 7A2C"))
        .unwrap();
    assert_eq!(raw(&mut answers, 6), [0x04, 0xD0, 0x04, 0x00, 0xFF, 0x28]);
    committed(&mut answers, "SSI002");
    // An answer that is no revision string: logged, the reads go on.
    garbled.send(&reply_revision(&[0xFF, 0x01, 0x80])).unwrap();
    assert_eq!(raw(&mut garbled, 6), [0x04, 0xD0, 0x04, 0x00, 0xFF, 0x28]);
    committed(&mut garbled, "SSI003");

    wait_until("the software in status", || {
        let out: Outcome = cli_cfg(&gw.cfg, &["status", "--json"]).into();
        let st: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
        st["scanners"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["name"] == "answers" && s["software"] == "NBRPUCAM")
    });
    let out: Outcome = cli_cfg(&gw.cfg, &["status", "--json"]).into();
    let st: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    for s in st["scanners"].as_array().unwrap() {
        if s["name"] != "answers" {
            assert!(s.get("software").is_none(), "{s}");
        }
    }
    let (code, metrics) = http_get(&format!("127.0.0.1:{port}"), "/metrics").unwrap();
    assert_eq!(code, 200);
    let info: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("scangate_scanner_info{"))
        .collect();
    assert_eq!(
        info,
        [
            "scangate_scanner_info{scanner=\"answers\",model=\"\",firmware=\"NBRPUCAM\",serial=\"\"} 1"
        ]
    );
    let log = gw.daemon().log();
    assert_eq!(log.matches("not a revision string").count(), 1, "{log}");
    assert!(
        log.contains("scanner answers runs software NBRPUCAM"),
        "{log}"
    );
    // Every read is in the ledger once; no reply became a read.
    let entries = ledger(&gw.cfg);
    assert_eq!(entries.len(), 3, "{entries:#?}");
}
