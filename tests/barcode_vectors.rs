//! The public barcode test vectors, checked against the decoder.
//!
//! Loads `../shared/vectors/barcodes.json` (beside the checkout) and falls back
//! to `tests/vectors/barcodes.json`, a copy of the same file. Sections checked:
//! `gs1_element_strings`, `gtin_check_digits`, `ndc_gtin_pairs`, `aim_ids`.
//! The `hid_*` sections belong to the HID decoder and are not read here.
//!
//! Where a vector and the GS1 standard disagree the standard wins; each such
//! case is written down next to the check that handles it.

use scangate::capture::barcode::{self, Decoded, aim, decode_with_year, gtin};
use serde_json::Value;
use std::path::PathBuf;

/// Reference year for the GS1 century window (keeps the suite deterministic).
const YEAR: i32 = 2025;

fn vectors() -> Value {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let shared = root.join("../shared/vectors/barcodes.json");
    let copy = root.join("tests/vectors/barcodes.json");
    let path = if shared.exists() { shared } else { copy };
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

fn section<'a>(v: &'a Value, name: &str) -> &'a Vec<Value> {
    v[name]
        .as_array()
        .unwrap_or_else(|| panic!("section {name} missing"))
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

fn pairs(d: &Decoded) -> Vec<(String, String)> {
    d.elements
        .iter()
        .map(|e| (e.ai.to_string(), e.value.clone()))
        .collect()
}

fn left_pad14(digits: &str) -> String {
    format!("{digits:0>14}")
}

#[test]
fn gs1_element_strings() {
    let v = vectors();
    let cases = section(&v, "gs1_element_strings");
    assert!(!cases.is_empty());
    for case in cases {
        let input = str_of(case, "input");
        let valid = case["valid"].as_bool().expect("valid");
        let aim_id = case["symbology_identifier"].as_str();
        let mut expected: Vec<(String, String)> = case["expected_ais"]
            .as_array()
            .expect("expected_ais")
            .iter()
            .map(|e| (str_of(e, "ai").to_string(), str_of(e, "value").to_string()))
            .collect();
        let got = decode_with_year(input.as_bytes(), YEAR);
        if !valid {
            let err = got.expect_err(&format!("{input:?} must be rejected"));
            // PHI rule: the reason never repeats the scanned data.
            let payload = input.strip_prefix(aim_id.unwrap_or("")).unwrap_or(input);
            if payload.len() >= 4 {
                assert!(
                    !err.0.contains(payload),
                    "{input:?}: error echoes data: {err}"
                );
            }
            continue;
        }
        let d = got.unwrap_or_else(|e| panic!("{input:?} must decode: {e}"));
        match aim_id {
            Some(id) => {
                assert_eq!(d.aim, id, "{input:?}");
                assert!(!d.symbology_assumed, "{input:?}");
            }
            None => assert!(d.symbology_assumed, "{input:?}"),
        }
        // The vectors list no AIs for UPC/EAN (]E0/]E4): their data is a GTIN,
        // not AI data. The decoder's contract is one (01) element carrying the
        // GTIN normalised to 14 digits (the vector's own note: "treat as
        // GTIN-13 / AI 01 = 02112345678900"), so that is what is expected here.
        if expected.is_empty() && matches!(aim_id, Some("]E0") | Some("]E4")) {
            let digits = &input[3..];
            expected = vec![("01".to_string(), left_pad14(digits))];
        }
        assert_eq!(pairs(&d), expected, "{input:?}");
        // Every (01) becomes the product GTIN.
        if let Some((_, g)) = expected.iter().find(|(ai, _)| ai == "01") {
            assert_eq!(d.product.gtin.as_deref(), Some(g.as_str()), "{input:?}");
            assert!(d.product.is_dispensable());
        } else {
            assert!(!d.product.is_dispensable(), "{input:?}");
        }
    }
}

#[test]
fn semantic_values_of_selected_vectors() {
    let date = |y, m, d| chrono::NaiveDate::from_ymd_opt(y, m, d);
    // DD=00 → last day of the month.
    let d = decode_with_year(b"17211200", YEAR).unwrap();
    assert_eq!(d.product.expiry, date(2021, 12, 31));
    let d = decode_with_year(b"10123\x1d17221231", YEAR).unwrap();
    assert_eq!(d.product.expiry, date(2022, 12, 31));
    assert_eq!(d.product.lot.as_deref(), Some("123"));
    // (15) best-before is not the expiry.
    let d = decode_with_year(b"15210200", YEAR).unwrap();
    assert_eq!(d.product.expiry, None);
    // EU/UK-style pack: serial begins with "10" and must not be read as a lot.
    let d = decode_with_year(
        "]d201034531200000111719112510ABCD1234\u{1d}2110EW354EWER".as_bytes(),
        YEAR,
    )
    .unwrap();
    assert_eq!(d.product.gtin.as_deref(), Some("03453120000011"));
    assert_eq!(d.product.expiry, date(2019, 11, 25));
    assert_eq!(d.product.lot.as_deref(), Some("ABCD1234"));
    assert_eq!(d.product.serial.as_deref(), Some("10EW354EWER"));
    // "03453…" is a GTIN-14 with indicator 0 and prefix "34": no NDC.
    assert_eq!(d.product.ndc10, None);
    // SSCC only: valid, not dispensable.
    let d = decode_with_year(b"00373400306809981733", YEAR).unwrap();
    assert!(!d.product.is_dispensable());
    // The real US DSCSA scan from the research notes.
    let d = decode_with_year(b"]d2010034928158905817131028100U42275AA", YEAR).unwrap();
    assert_eq!(d.product.ndc10.as_deref(), Some("4928158905"));
    assert_eq!(d.product.lot.as_deref(), Some("0U42275AA"));
    assert_eq!(d.product.expiry, date(2013, 10, 28));
}

#[test]
fn vectors_decode_the_same_with_the_current_year() {
    // `decode` uses the current UTC year; none of the vector dates is near the
    // edge of the century window, so validity must not change.
    let v = vectors();
    for case in section(&v, "gs1_element_strings") {
        let input = str_of(case, "input");
        let a = decode_with_year(input.as_bytes(), YEAR).is_ok();
        let b = barcode::decode(input.as_bytes()).is_ok();
        assert_eq!(a, b, "{input:?}");
    }
}

#[test]
fn gtin_check_digits() {
    let v = vectors();
    let cases = section(&v, "gtin_check_digits");
    assert!(!cases.is_empty());
    for case in cases {
        let expected = case["expected_check_digit"].as_u64().expect("digit") as u8;
        if let Some(code) = case["code"].as_str() {
            let valid = case["valid"].as_bool().unwrap_or(true);
            assert_eq!(
                gtin::has_valid_check_digit(code.as_bytes()),
                valid,
                "{code}"
            );
            let (payload, _) = code.split_at(code.len() - 1);
            assert_eq!(
                gtin::check_digit(payload.as_bytes()),
                Some(expected),
                "{code}"
            );
        } else {
            let payload = str_of(case, "payload");
            assert_eq!(
                gtin::check_digit(payload.as_bytes()),
                Some(expected),
                "{payload}"
            );
        }
    }
}

#[test]
fn ndc_gtin_pairs() {
    let v = vectors();
    let cases = section(&v, "ndc_gtin_pairs");
    assert!(!cases.is_empty());
    for case in cases {
        let ndc10 = str_of(case, "ndc10_digits");
        let upc = str_of(case, "upc_a_gtin12");
        let g14 = str_of(case, "gtin14");
        assert!(gtin::has_valid_check_digit(upc.as_bytes()), "{upc}");
        assert!(gtin::has_valid_check_digit(g14.as_bytes()), "{g14}");
        assert_eq!(gtin::ndc10_from_gtin14(g14), Some(ndc10), "{g14}");
        assert_eq!(gtin::ndc10_from_upc_a(upc), Some(ndc10), "{upc}");

        // The same identity through every way a scanner can send it.
        let forms = [
            format!("]E00{upc}"),
            upc.to_string(),
            format!("]d201{g14}"),
            format!("]C101{g14}"),
            format!("]I1{g14}"),
            format!("01{g14}"),
            format!("]Q1https://id.gs1.org/01/{g14}"),
        ];
        let mut canon = None;
        for f in &forms {
            let d = decode_with_year(f.as_bytes(), YEAR).unwrap_or_else(|e| panic!("{f}: {e}"));
            assert_eq!(d.product.gtin.as_deref(), Some(g14), "{f}");
            assert_eq!(d.product.ndc10.as_deref(), Some(ndc10), "{f}");
            let bytes = d.product.canonical_bytes();
            // NDC11 is never derived.
            if let Some(ndc11) = case["ndc11"].as_str() {
                let text = String::from_utf8_lossy(&bytes).to_string();
                assert!(!text.contains(&format!("={ndc11}")), "{f}: {text}");
            }
            match &canon {
                None => canon = Some(bytes),
                Some(c) => assert_eq!(c, &bytes, "{f}"),
            }
        }
    }
}

#[test]
fn aim_ids() {
    let v = vectors();
    let cases = section(&v, "aim_ids");
    assert!(!cases.is_empty());
    for case in cases {
        let id = str_of(case, "id");
        // "]Y<n>..." stands for the system-expansion form; try a real one.
        let probe = if id.starts_with("]Y") { "]Y1a" } else { id };
        let (sym, len) = aim::parse(probe.as_bytes()).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(len, probe.len(), "{id}");
        let gs1 = case["gs1_ai_data"].as_bool().expect("gs1_ai_data");
        assert_eq!(sym.content == aim::Content::Gs1, gs1, "{id}");
    }
    // And one the vectors reject.
    assert!(aim::parse(b"]XX").is_err());
}
