//! `scangate decode --hid …` through the real binary.

use crate::util::{Outcome, cli};

const POS_D2: &str = "02235d64323031303033343932383135383930353831373133313032383130305534323237354141000000000000000000000000000000000000000000770000";

#[test]
fn pos_report_json() {
    let out: Outcome = cli(&["decode", "--hid", "pos", "--json", POS_D2]).into();
    assert_eq!(out.code, Some(0), "{out}");
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v["valid"], true, "{out}");
    assert_eq!(v["symbology"]["aim"], "]d2", "{out}");
    assert_eq!(v["gtin"], "00349281589058", "{out}");
    assert_eq!(v["lot"], "0U42275AA", "{out}");
}

#[test]
fn keyboard_reports_text_with_layout_and_gs() {
    // US: "0", Ctrl+] (GS), "1", Enter — as "]C1"-less GS1 data it is short,
    // so decode a real UPC-A typed on a German layout instead: digits are
    // the same keys; then Enter.
    let digit = |d: u8| -> String {
        let usage = if d == 0 { 0x27 } else { 0x1d + d };
        format!("0000{usage:02x}0000000000")
    };
    let mut args: Vec<String> = vec![
        "decode".into(),
        "--hid".into(),
        "keyboard".into(),
        "--layout".into(),
        "de".into(),
    ];
    for c in "312345678906".bytes() {
        args.push(digit(c - b'0'));
        args.push("00 00 00 00 00 00 00 00".into());
    }
    args.push("0000280000000000".into());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out: Outcome = cli(&refs).into();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.starts_with("[0] valid"), "{out}");
    assert!(out.stdout.contains("ndc10:       1234567890"), "{out}");
}

#[test]
fn truncated_pos_scan_is_invalid_and_bad_hex_is_a_usage_error() {
    // The first piece announces more; nothing follows.
    let mut first = hex::decode(POS_D2).unwrap();
    *first.last_mut().unwrap() = 1;
    let out: Outcome = cli(&["decode", "--hid", "pos", &hex::encode(&first)]).into();
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stdout.contains("[0] invalid: truncated HID POS scan"),
        "{out}"
    );
    let out: Outcome = cli(&["decode", "--hid", "pos", "02zz"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("not a report in hex"), "{out}");
    // A rollover report alone makes no scan.
    let out: Outcome = cli(&["decode", "--hid", "keyboard", "0000010101010101"]).into();
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stderr.contains("make no scan"), "{out}");
    let out: Outcome = cli(&["decode", "--hid", "pos", "--layout", "de", POS_D2]).into();
    assert_eq!(out.code, Some(2), "{out}");
}

#[test]
fn devices_works_with_no_devices() {
    let out: Outcome = cli(&["devices"]).into();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("HID devices ("), "{out}");
    assert!(out.stdout.contains("Serial devices ("), "{out}");
}
