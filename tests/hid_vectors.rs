//! Every HID vector of tests/vectors/barcodes.json, and HID POS reassembly,
//! through `HidDecoder` — the decoder the live HID source feeds.

use scangate::capture::RawScan;
use scangate::capture::barcode;
use scangate::source::hid::HidDecoder;
use scangate::source::hid::keyboard::{GsConvention, Terminators};
use scangate::source::hid::layout::Layout;
use scangate::source::hid::pos::{self, DEFAULT_REPORT_ID};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_millis(500);

fn vectors() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/barcodes.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn reports(v: &serde_json::Value) -> Vec<Vec<u8>> {
    v["reports_hex"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| hex::decode(h.as_str().unwrap()).unwrap())
        .collect()
}

fn feed(d: &mut HidDecoder, reports: &[Vec<u8>]) -> Vec<RawScan> {
    let now = Instant::now();
    let mut out = Vec::new();
    for r in reports {
        d.push(r, now, &mut out);
    }
    d.finish(&mut out);
    out
}

/// Keyboard vectors: with no terminator key configured, everything typed
/// (Enter included, as CR) is the scan's text, so the vector's characters
/// are compared exactly.
#[test]
fn every_keyboard_vector() {
    let v = vectors();
    let list = v["hid_keyboard_reports"].as_array().unwrap();
    assert!(
        list.len() >= 7,
        "vectors file has {} keyboard vectors",
        list.len()
    );
    for (i, vec) in list.iter().enumerate() {
        let want = vec["characters"].as_str().unwrap();
        for with_id in [false, true] {
            let mut rs = reports(vec);
            if with_id {
                // The same reports with a leading report id (9 bytes).
                rs = rs.into_iter().map(|r| [vec![0x02], r].concat()).collect();
            }
            let mut d = HidDecoder::keyboard(
                Layout::Us,
                GsConvention::Auto,
                Terminators {
                    enter: false,
                    tab: false,
                },
                4096,
                TIMEOUT,
            );
            let scans = feed(&mut d, &rs);
            let got: Vec<u8> = scans.iter().flat_map(|s| s.bytes.clone()).collect();
            assert!(
                scans.iter().all(|s| s.framing_error.is_none()),
                "vector {i}"
            );
            assert_eq!(
                String::from_utf8(got).unwrap(),
                want,
                "keyboard vector {i} ({}), report id {with_id}",
                vec["notes"]
            );
            assert_eq!(scans.len(), usize::from(!want.is_empty()), "vector {i}");
        }
    }
}

/// With the default terminator (Enter), the Enter vector ends a scan and
/// types nothing itself; a scan typed before it is one scan.
#[test]
fn enter_ends_a_scan() {
    let mut d = HidDecoder::keyboard(
        Layout::Us,
        GsConvention::Auto,
        Terminators::default(),
        4096,
        TIMEOUT,
    );
    let rs: Vec<Vec<u8>> = [
        "0000250000000000",
        "0000000000000000",
        "0000280000000000",
        "0000000000000000",
    ]
    .iter()
    .map(|h| hex::decode(h).unwrap())
    .collect();
    let scans = feed(&mut d, &rs);
    assert_eq!(scans.len(), 1);
    assert_eq!(scans[0].bytes, b"8");
    assert!(scans[0].framing_error.is_none());
}

fn pos_decoder() -> HidDecoder {
    HidDecoder::pos(DEFAULT_REPORT_ID, 4096, TIMEOUT)
}

#[test]
fn every_pos_vector_in_64_and_62_byte_layouts() {
    let v = vectors();
    let list = v["hid_pos_reports"].as_array().unwrap();
    assert!(list.len() >= 2);
    for (i, vec) in list.iter().enumerate() {
        let want = format!(
            "{}{}",
            vec["symbology_aim"].as_str().unwrap(),
            vec["data"].as_str().unwrap()
        );
        let full = reports(vec);
        assert!(full.iter().all(|r| r.len() == 64));
        // The emulator layout: the same without the two vendor bytes.
        let short: Vec<Vec<u8>> = full.iter().map(|r| [&r[..61], &r[63..]].concat()).collect();
        for rs in [full, short] {
            let scans = feed(&mut pos_decoder(), &rs);
            assert_eq!(scans.len(), 1, "vector {i}");
            assert!(
                scans[0].framing_error.is_none(),
                "vector {i}: {:?}",
                scans[0].framing_error
            );
            assert_eq!(
                String::from_utf8(scans[0].bytes.clone()).unwrap(),
                want,
                "vector {i}"
            );
            // And the capture stage decodes it as a barcode.
            barcode::decode(&scans[0].bytes).unwrap_or_else(|e| panic!("vector {i}: {e}"));
        }
    }
}

/// A DSCSA DataMatrix long enough to need three reports, with GS bytes.
fn long_datamatrix(serial: &str) -> Vec<u8> {
    let mut d = format!("0100307773105025172812312{}", "1").into_bytes();
    d.extend_from_slice(serial.as_bytes());
    d.push(0x1d);
    d.extend_from_slice(b"10LOT7A");
    d.push(0x1d);
    d.extend_from_slice(b"91");
    d.extend_from_slice(&[b'X'; 90]);
    d
}

#[test]
fn a_long_datamatrix_split_across_reports_is_reassembled() {
    let data = long_datamatrix("SN000000000000000042");
    for vendor in [true, false] {
        let rs = pos::encode(DEFAULT_REPORT_ID, b"]d2", &data, vendor);
        assert_eq!(
            rs.len(),
            3,
            "{} bytes need three 56-byte pieces",
            data.len()
        );
        assert!(rs[..2].iter().all(|r| r.last() == Some(&1)));
        assert_eq!(rs[2].last(), Some(&0));
        let scans = feed(&mut pos_decoder(), &rs);
        assert_eq!(scans.len(), 1);
        assert_eq!(scans[0].bytes, [b"]d2".as_slice(), &data].concat());
        let d = barcode::decode(&scans[0].bytes).unwrap();
        assert_eq!(d.product.serial.as_deref(), Some("SN000000000000000042"));
        assert_eq!(d.product.lot.as_deref(), Some("LOT7A"));
    }
}

#[test]
fn reports_of_other_ids_are_skipped_and_a_trailing_cr_is_dropped() {
    let mut rs = pos::encode(DEFAULT_REPORT_ID, b"]E0", b"5901234123457\r", true);
    rs.insert(0, vec![0x04, 0x40]); // a trigger/beep report
    let scans = feed(&mut pos_decoder(), &rs);
    assert_eq!(scans.len(), 1);
    assert_eq!(scans[0].bytes, b"]E05901234123457");
}

fn rejected(s: &RawScan) -> &str {
    s.framing_error
        .as_deref()
        .unwrap_or_else(|| panic!("not rejected: {s:?}"))
}

#[test]
fn a_new_scan_before_the_last_report_rejects_the_torn_one() {
    let a = pos::encode(DEFAULT_REPORT_ID, b"]d2", &long_datamatrix("A1"), true);
    let b = pos::encode(DEFAULT_REPORT_ID, b"]E0", b"5901234123457", true);
    // Only the first two pieces of A, then B.
    let rs: Vec<Vec<u8>> = a[..2].iter().chain(b.iter()).cloned().collect();
    let scans = feed(&mut pos_decoder(), &rs);
    assert_eq!(scans.len(), 2, "{scans:?}");
    assert!(rejected(&scans[0]).contains("new scan began"), "{scans:?}");
    assert_eq!(scans[1].bytes, b"]E05901234123457");
    assert!(scans[1].framing_error.is_none());
}

#[test]
fn unplug_or_silence_mid_scan_rejects_and_never_merges() {
    let a = pos::encode(DEFAULT_REPORT_ID, b"]d2", &long_datamatrix("A1"), true);
    let b = pos::encode(DEFAULT_REPORT_ID, b"]d2", &long_datamatrix("B2"), true);
    // Device gone after two pieces of A (same symbology as the next scan).
    let mut d = pos_decoder();
    let t0 = Instant::now();
    let mut out = Vec::new();
    for r in &a[..2] {
        d.push(r, t0, &mut out);
    }
    assert!(out.is_empty() && d.pending());
    let torn = d.abort("the device went away mid-scan").unwrap();
    assert!(rejected(&torn).contains("truncated"), "{torn:?}");
    for r in &b {
        d.push(r, t0, &mut out);
    }
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].bytes,
        [b"]d2".as_slice(), &long_datamatrix("B2")].concat()
    );

    // Silence longer than the timeout after two pieces.
    let mut d = pos_decoder();
    let mut out = Vec::new();
    for r in &a[..2] {
        d.push(r, t0, &mut out);
    }
    d.expire(t0 + TIMEOUT / 2, &mut out);
    assert!(out.is_empty(), "not yet");
    assert_eq!(d.deadline(), Some(t0 + TIMEOUT));
    d.expire(t0 + TIMEOUT, &mut out);
    assert_eq!(out.len(), 1);
    assert!(rejected(&out[0]).contains("did not come within 500 ms"));
    assert!(!d.pending());
}

#[test]
fn malformed_and_over_long_pos_scans_are_rejected() {
    let mut bad = pos::encode(DEFAULT_REPORT_ID, b"]E0", b"1", true).remove(0);
    bad[1] = 57; // byte count beyond the data block
    let scans = feed(&mut pos_decoder(), &[bad]);
    assert_eq!(scans.len(), 1);
    assert!(rejected(&scans[0]).contains("exceeds"));
    let short = vec![DEFAULT_REPORT_ID, 1, b']', b'E', b'0', b'1', 0];
    assert!(rejected(&feed(&mut pos_decoder(), &[short])[0]).contains("at least 62"));
    let mut small = HidDecoder::pos(DEFAULT_REPORT_ID, 100, TIMEOUT);
    let rs = pos::encode(DEFAULT_REPORT_ID, b"]d2", &long_datamatrix("A1"), true);
    let scans = feed(&mut small, &rs);
    assert_eq!(scans.len(), 1);
    assert!(rejected(&scans[0]).contains("over-long"));
}
