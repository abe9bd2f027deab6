//! `scangate decode` through the real binary: GS spellings, text and JSON
//! output, exit codes.

use crate::util::{cli, command};
use serde_json::Value;
use std::process::Output;

const DSCSA: &str = "]d201003077731050251728123121SN0000012345";

fn decode(args: &[&str]) -> Output {
    cli(&[&["decode"], args].concat())
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

fn json_lines(o: &Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

#[test]
fn every_gs_spelling_gives_the_same_json() {
    let forms = [
        format!("{DSCSA}\u{1d}10LOT7A"),
        format!("{DSCSA}<GS>10LOT7A"),
        format!("{DSCSA}\\x1d10LOT7A"),
        format!("{DSCSA}\\x1D10LOT7A"),
        format!("{DSCSA}^]10LOT7A"),
    ];
    let refs: Vec<&str> = forms.iter().map(String::as_str).collect();
    let o = decode(&[&["--json"], refs.as_slice()].concat());
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines = json_lines(&o);
    assert_eq!(lines.len(), forms.len());
    for (i, v) in lines.iter().enumerate() {
        assert_eq!(v["input_index"], i, "{v}");
        assert_eq!(v["valid"], true);
        assert_eq!(v["symbology"]["aim"], "]d2");
        assert_eq!(v["symbology"]["name"], "GS1 DataMatrix");
        assert_eq!(v["symbology"]["assumed"], false);
        assert_eq!(v["gtin"], "00307773105025");
        assert_eq!(v["ndc10"], "0777310502");
        assert_eq!(v["lot"], "LOT7A");
        assert_eq!(v["serial"], "SN0000012345");
        assert_eq!(v["expiry"], "2028-12-31");
        assert_eq!(v["dispensable"], true);
        let els: Vec<(String, String)> = v["elements"]
            .as_array()
            .expect("elements")
            .iter()
            .map(|e| {
                (
                    e["ai"].as_str().unwrap().to_string(),
                    e["value"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let want = [
            ("01", "00307773105025"),
            ("17", "281231"),
            ("21", "SN0000012345"),
            ("10", "LOT7A"),
        ];
        assert_eq!(els.len(), want.len());
        for ((a, b), (c, d)) in els.iter().zip(want) {
            assert_eq!((a.as_str(), b.as_str()), (c, d));
        }
        // Same object for every spelling apart from the index.
        let mut a = v.clone();
        let mut b = lines[0].clone();
        a["input_index"] = Value::Null;
        b["input_index"] = Value::Null;
        assert_eq!(a, b);
    }
}

#[test]
fn json_one_object_per_input_and_exit_1_on_any_invalid() {
    let o = decode(&[
        "--json",
        "]E00307773105025",
        "]d20100307773105026",
        "00373400306809981733",
        "JOHN SMITH",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["valid"], true);
    assert_eq!(lines[0]["symbology"]["name"], "UPC-A");
    assert_eq!(lines[0]["expiry"], Value::Null);
    // Invalid: exactly input_index, valid, reason.
    let bad = lines[1].as_object().expect("object");
    assert_eq!(bad.len(), 3, "{bad:?}");
    assert_eq!(lines[1]["input_index"], 1);
    assert_eq!(lines[1]["valid"], false);
    let reason = lines[1]["reason"].as_str().expect("reason");
    assert!(
        reason.contains("AI (01)") && reason.contains("check digit"),
        "{reason}"
    );
    // Valid but not a product: decoded, exit status comes from the other inputs.
    assert_eq!(lines[2]["valid"], true);
    assert_eq!(lines[2]["dispensable"], false);
    assert_eq!(lines[2]["symbology"]["assumed"], true);
    assert_eq!(lines[2]["gtin"], Value::Null);
    // The reason never repeats the data.
    let reason = lines[3]["reason"].as_str().expect("reason");
    assert!(
        !reason.contains("JOHN") && !reason.contains("SMITH"),
        "{reason}"
    );
}

#[test]
fn text_output_and_exit_codes() {
    let o = decode(&[&format!("{DSCSA}<GS>10LOT7A"), "00373400306809981733"]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    for want in [
        "[0] valid",
        "symbology:   ]d2 GS1 DataMatrix",
        "(01) 00307773105025",
        "(10) LOT7A",
        "gtin:        00307773105025",
        "ndc10:       0777310502",
        "expiry:      2028-12-31",
        "dispensable: yes",
        "[1] valid",
        "(assumed: the data has no AIM symbology identifier)",
        "dispensable: no",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }

    // Invalid: the reason on stdout, exit 1.
    let o = decode(&["]d20100307773105026"]);
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    assert!(text.starts_with("[0] invalid: AI (01)"), "{text}");
    assert!(o.stderr.is_empty());

    // Usage errors: exit 2, message on stderr.
    let o = decode(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!o.stderr.is_empty());
    let o = decode(&["--bogus", "x"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn non_utf8_argument_is_decoded_and_rejected() {
    use std::os::unix::ffi::OsStrExt;
    let o = command()
        .arg("decode")
        .arg("--json")
        .arg(std::ffi::OsStr::from_bytes(b"]d2\xff\xfe"))
        .output()
        .expect("running scangate");
    assert_eq!(o.status.code(), Some(1));
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 1);
    assert!(lines[0]["reason"].as_str().unwrap().contains("not UTF-8"));
}
