//! Unit tests of the module above (kept apart: the module reads on its own).

use super::*;

const Y: i32 = 2025;

fn ok(s: &str) -> Decoded {
    decode_with_year(s.as_bytes(), Y).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}
fn bad(s: &[u8]) -> String {
    match decode_with_year(s, Y) {
        Ok(d) => panic!("{s:?} decoded: {d:?}"),
        Err(e) => e.0,
    }
}

#[test]
fn dscsa_datamatrix() {
    let d = ok("]d201003492815890581713102810 0U42275AA"
        .replace(' ', "")
        .as_str());
    assert_eq!(d.aim, "]d2");
    assert!(!d.symbology_assumed);
    assert_eq!(d.product.gtin.as_deref(), Some("00349281589058"));
    assert_eq!(d.product.ndc10.as_deref(), Some("4928158905"));
    assert_eq!(d.product.lot.as_deref(), Some("0U42275AA"));
    assert_eq!(d.product.expiry, NaiveDate::from_ymd_opt(2013, 10, 28));
    assert!(d.product.is_dispensable());
}

#[test]
fn upc_a_and_gtin14_same_identity() {
    let a = ok("]E00307773105025");
    assert_eq!(a.symbology, "UPC-A");
    assert_eq!(a.elements[0].value, "00307773105025");
    assert_eq!(a.product.ndc10.as_deref(), Some("0777310502"));
    let b = ok("307773105025");
    assert!(b.symbology_assumed);
    assert_eq!(b.aim, "]E0");
    let c = ok("]d20100307773105025");
    let e = ok("]I100307773105025");
    assert_eq!(e.symbology, "ITF-14");
    assert_eq!(a.product.canonical_bytes(), b.product.canonical_bytes());
    assert_eq!(a.product.canonical_bytes(), c.product.canonical_bytes());
    assert_eq!(a.product.canonical_bytes(), e.product.canonical_bytes());
}

#[test]
fn ean8_and_ean13() {
    assert_eq!(
        ok("]E402345673").product.gtin.as_deref(),
        Some("00000002345673")
    );
    let d = ok("]E02112345678900");
    assert_eq!(d.symbology, "EAN-13");
    assert_eq!(d.product.gtin.as_deref(), Some("02112345678900"));
    assert_eq!(d.product.ndc10, None);
    assert!(bad(b"]E0123456789012").contains("too short"));
    assert!(bad(b"]E02112345678901").contains("check digit"));
    assert!(bad(b"]E012345678901234").contains("too long"));
    assert!(bad(b"]E01234ABC890123").contains("non-digit"));
    assert!(bad(b"]E0").contains("too short"));
    assert!(bad(b"]E41234567").contains("too short"));
    // EAN-13 + add-on
    assert_eq!(
        ok("]E3211234567890012").product.gtin.as_deref(),
        Some("02112345678900")
    );
    assert!(bad(b"]E3211234567890").contains("add-on"));
    assert!(ok("]E212345").elements.is_empty());
}

#[test]
fn no_product_but_valid() {
    let d = ok("00373400306809981733");
    assert!(d.symbology_assumed);
    assert!(!d.product.is_dispensable());
    let d = ok("]d1TESTING");
    assert!(d.elements.is_empty() && !d.product.is_dispensable());
    assert!(ok("]C0ABC-123").elements.is_empty());
    assert!(ok("]Q1").elements.is_empty());
}

#[test]
fn digital_link() {
    let d = ok("]Q1https://example.com/01/12312312312333?99=TEST");
    assert_eq!(d.elements.len(), 2);
    let d = ok("https://example.com/01/00349281589058/10/ABC/21/123?17=261031");
    assert!(d.symbology_assumed);
    assert_eq!(d.aim, "]Q1");
    let e = ok("]d20100349281589058\u{1d}10ABC\u{1d}21123\u{1d}17261031");
    assert_eq!(d.product, e.product);
    assert!(bad(b"]Q1https://example.com/foo").contains("Digital Link"));
}

#[test]
fn frame_level_rejections() {
    assert!(bad(b"").contains("empty"));
    assert!(bad(b"]d2010034928158905\x0017").contains("NUL byte at byte 18"));
    assert!(bad(b"]d20100349281589058\r").contains("control character at byte 19"));
    assert!(bad(b"]d2\xff\xfe").contains("not UTF-8"));
    // C1 controls (NEL, CSI) in a plain symbology, at their byte offsets.
    assert!(bad("]C0AB\u{85}C".as_bytes()).contains("control character U+0085 at byte 5"));
    assert!(bad("]Q0\u{9b}31m".as_bytes()).contains("U+009B at byte 3"));
    // Printable Latin-1 (U+00A0 and above) is not a control.
    assert!(decode_with_year("]C0CAF\u{c9} \u{a0}".as_bytes(), Y).is_ok());
    assert!(bad(b"\xc3").contains("not UTF-8"));
    assert!(bad(&vec![b'1'; MAX_FRAME_LEN + 1]).contains("too long"));
    assert!(bad(b"]XX").contains("unsupported"));
    assert!(bad(b"ABC").contains("no symbology identifier"));
    assert!(bad(b"]d2").contains("empty GS1 data"));
    assert!(bad(b"]d2\x1d").contains("empty GS1 data"));
}

#[test]
fn repeated_ai_rules() {
    assert!(ok("]d21012\u{1d}1012").elements.len() == 2);
    assert!(bad(b"]d21012\x1d1013").contains("AI (10) appears more than once"));
    let mut many = String::from("]d2");
    for i in 0..40 {
        many.push_str(&format!("{}X{}\u{1d}", 91 + i % 9, i % 9));
    }
    assert!(ok(&many).elements.len() == 40);
    many.push_str("93X3\u{1d}99X3");
    assert!(bad(many.as_bytes()).contains("appears more than once"));
}

#[test]
fn ambiguity_without_aim() {
    // 12 digits that are both a valid UPC-A and a valid element string
    // (17)250131(10)NN: find one by scanning the lot digits.
    let mut found = false;
    for n in 0..100 {
        let s = format!("1725013110{n:02}");
        if gtin::has_valid_check_digit(s.as_bytes()) {
            assert!(bad(s.as_bytes()).contains("ambiguous"));
            assert!(ok(&format!("]d2{s}")).product.lot.is_some());
            assert!(ok(&format!("]E00{s}")).product.gtin.is_some());
            found = true;
        }
    }
    assert!(found);
    // 12 digits with a bad check digit that aren't GS1 either.
    assert!(bad(b"307773105026").contains("check digit"));
}

#[test]
fn pairing_rules() {
    // Enforced.
    assert!(bad(b"]d221SERIAL").contains("AI (21) requires AI (01), (03) or (8006)"));
    assert!(bad(b"]d210LOT\x1d21SERIAL").contains("AI (21) requires"));
    assert!(ok("]d2010030777310502521S").product.serial.is_some());
    assert!(ok("]d28006003077731050250102\u{1d}21S").elements.len() == 2);
    assert!(bad(b"]d222CPV").contains("AI (22) requires AI (01)"));
    assert!(bad(b"]d2235TPX").contains("AI (235) requires AI (01)"));
    assert!(
        bad(b"]d20100307773105025235TPX\x1d21S").contains("AI (21) cannot appear with AI (235)")
    );
    assert!(bad(b"]d2250X").contains("AI (250) requires AI (01) or (8006)"));
    assert!(bad(b"]d20100307773105025250X").contains("AI (250) requires AI (21)"));
    assert!(ok("]d20100307773105025250X\u{1d}21S").elements.len() == 3);
    assert!(bad(b"]d2251X").contains("AI (251) requires"));
    assert!(bad(b"]d2254X").contains("AI (254) requires AI (414)"));
    assert!(
        bad(b"]d201003077731050250200307773105025").contains("AI (01) cannot appear with AI (02)")
    );
    assert!(bad(b"]d2010030777310502537100").contains("AI (01) cannot appear with AI (37)"));
    assert!(
        bad(b"]d201003077731050253102000123\x1d3103000123")
            .contains("AI (3103) cannot appear with AI (3102)")
    );
    assert!(ok("]d2010030777310502531020001233202000123").elements.len() == 3);
    // Not enforced (the shared vectors decode these without a key).
    assert!(ok("15210526\u{1d}100329").product.lot.is_some());
    assert!(ok("17211200").product.expiry.is_some());
    assert!(ok("242123456\u{1d}10ABC123").elements.len() == 2);
    assert!(
        ok("]d2020030777310502537100\u{1d}00373400306809981733")
            .elements
            .len()
            == 3
    );
    // Digital Link: (21) comes with its primary key (01).
    assert!(
        ok("]Q1https://a.b/01/00307773105025/21/S")
            .product
            .serial
            .is_some()
    );
}

#[test]
fn canonical_bytes_format() {
    let d = ok("]d20100349281589058\u{1d}17261000\u{1d}10L1\u{1d}21S1");
    assert_eq!(
        d.product.canonical_bytes(),
        b"gtin=00349281589058\x1fndc10=4928158905\x1flot=L1\x1fserial=S1\x1fexpiry=2026-10-31\x1f"
    );
    assert_eq!(
        ProductId::default().canonical_bytes(),
        b"gtin=\x1fndc10=\x1flot=\x1fserial=\x1fexpiry=\x1f"
    );
}

#[test]
fn errors_never_echo_data() {
    for s in [
        "]d2JOHN SMITH 1970",
        "]d21JOHNSMITH",
        "]d210JOHN SMITH",
        "]d20112345678901234",
        "]E0JOHNSMITH1970",
        "JOHN SMITH",
        "]Q1https://JOHNSMITH",
        "]ZZJOHNSMITH",
        "]d221JOHNSMITH\u{1d}8912",
    ] {
        let e = bad(s.as_bytes());
        assert!(
            !e.contains("JOHN") && !e.contains("SMITH") && !e.contains("12345678901234"),
            "{e}"
        );
    }
}

/// Maximum-size adversarial frames. A quadratic rescan (e.g. searching the
/// whole remainder for GS after every fixed-length AI) would make this take
/// minutes; linear code takes milliseconds even unoptimised.
#[test]
fn adversarial_inputs_stay_linear() {
    let fill = |unit: &str, prefix: &str| {
        let mut s = String::from(prefix);
        while s.len() + unit.len() <= MAX_FRAME_LEN {
            s.push_str(unit);
        }
        s
    };
    let inputs = [
        fill("17250101", "]d2"),         // ~1000 fixed-length AIs, identical repeats
        fill("2011", "]d2"),             // ~2000 tiny fixed-length AIs
        fill("\u{1d}", "]d2"),           // only separators
        fill("9", "]d2"),                // one huge variable value (too long)
        fill("10A\u{1d}", "]d2"),        // ~2000 repeats of a variable AI
        fill("/10/A", "]Q1https://a.b"), // long path without a primary key
        fill("&99=A", "]Q1https://a.b/01/12312312312333?"),
        fill("0", ""),
    ];
    let start = std::time::Instant::now();
    for _ in 0..20 {
        for s in &inputs {
            let _ = decode_with_year(s.as_bytes(), Y);
        }
    }
    assert!(
        start.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(ok(&inputs[0]).elements.len(), (MAX_FRAME_LEN - 3) / 8);
}

#[test]
fn never_panics_on_prefixes_of_valid_data() {
    let s = "]d20100349281589058\u{1d}17261031\u{1d}10ABC\u{1d}21XYZ";
    for i in 0..=s.len() {
        let _ = decode_with_year(&s.as_bytes()[..i], Y);
    }
    for i in 0..=255u8 {
        let _ = decode_with_year(&[b']', b'd', b'2', i], Y);
        let _ = decode_with_year(&[i], Y);
        let _ = decode_with_year(&[b']', i, i], Y);
    }
}
