//! Property tests for the barcode decoder.
//!
//! - Random valid DSCSA element strings ((01), (17), (10), (21), plus an
//!   optional internal (91)) in random AI order, with GS only where needed or
//!   also after fixed-length AIs, with or without a trailing GS, decode to the
//!   same elements in the same order.
//! - The canonical identity bytes are identical across AI orders, separator
//!   placement and symbology (`]d2`, `]C1`, `]Q3`, none).
//! - Arbitrary bytes never panic; errors never repeat a lot/serial value.

use proptest::prelude::*;
use scangate::capture::barcode::{decode_with_year, gtin};

const YEAR: i32 = 2025;
const GS: char = '\u{1d}';

/// CSET 82 characters.
const CSET82: &[u8] =
    b"!\"%&'()*+,-./0123456789:;<=>?ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";

fn x_value(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(CSET82), 1..=max)
        .prop_map(|v| String::from_utf8(v).expect("ascii"))
}

fn gtin14() -> impl Strategy<Value = String> {
    (
        0u8..=8,
        any::<bool>(),
        proptest::collection::vec(0u8..=9, 12),
    )
        .prop_map(|(indicator, ndc, digits)| {
            let mut s = String::with_capacity(14);
            s.push((b'0' + indicator) as char);
            for (i, d) in digits.iter().enumerate() {
                // Half the time a US NDC GTIN: indicator + "03" + NDC10.
                let d = match (ndc, i) {
                    (true, 0) => 0,
                    (true, 1) => 3,
                    _ => *d,
                };
                s.push((b'0' + d) as char);
            }
            let c = gtin::check_digit(s.as_bytes()).expect("digits");
            s.push((b'0' + c) as char);
            s
        })
}

fn yymmd0() -> impl Strategy<Value = String> {
    (0u32..=99, 1u32..=12, 0u32..=28).prop_map(|(y, m, d)| format!("{y:02}{m:02}{d:02}"))
}

#[derive(Debug, Clone)]
struct Label {
    elements: Vec<(&'static str, String)>,
}

fn label() -> impl Strategy<Value = Label> {
    (
        gtin14(),
        yymmd0(),
        x_value(20),
        x_value(20),
        proptest::option::of(x_value(90)),
    )
        .prop_map(|(g, exp, lot, serial, internal)| {
            let mut elements = vec![("01", g), ("17", exp), ("10", lot), ("21", serial)];
            if let Some(v) = internal {
                elements.push(("91", v));
            }
            Label { elements }
        })
}

fn is_fixed(ai: &str) -> bool {
    matches!(ai, "01" | "17")
}

/// Encode in the given order; `gs_after_fixed` adds the optional separator
/// after fixed-length AIs, `trailing` a trailing GS.
fn encode(elements: &[(&str, String)], gs_after_fixed: bool, trailing: bool) -> String {
    let mut s = String::new();
    for (i, (ai, v)) in elements.iter().enumerate() {
        s.push_str(ai);
        s.push_str(v);
        let last = i + 1 == elements.len();
        if !last && (!is_fixed(ai) || gs_after_fixed) {
            s.push(GS);
        }
    }
    if trailing {
        s.push(GS);
    }
    s
}

fn decoded_pairs(data: &str) -> Vec<(String, String)> {
    let d = decode_with_year(data.as_bytes(), YEAR)
        .unwrap_or_else(|e| panic!("{data:?} must decode: {e}"));
    d.elements
        .into_iter()
        .map(|e| (e.ai.to_string(), e.value))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_order_round_trips(
        l in label(),
        order in Just((0usize..5).collect::<Vec<_>>()).prop_shuffle(),
        gs_after_fixed in any::<bool>(),
        trailing in any::<bool>(),
        aim in proptest::sample::select(vec!["]d2", "]C1", "]Q3", "]e0", "]J1", ""]),
    ) {
        let ordered: Vec<(&str, String)> = order
            .iter()
            .filter(|&&i| i < l.elements.len())
            .map(|&i| l.elements[i].clone())
            .collect();
        let data = format!("{aim}{}", encode(&ordered, gs_after_fixed, trailing));
        let want: Vec<(String, String)> =
            ordered.iter().map(|(a, v)| (a.to_string(), v.clone())).collect();
        prop_assert_eq!(decoded_pairs(&data), want);
        let d = decode_with_year(data.as_bytes(), YEAR).unwrap();
        prop_assert_eq!(d.symbology_assumed, aim.is_empty());
        prop_assert!(d.product.is_dispensable());
        let g = &l.elements[0].1;
        prop_assert_eq!(d.product.gtin.as_deref(), Some(g.as_str()));
        if &g[1..3] == "03" {
            prop_assert_eq!(d.product.ndc10.as_deref(), Some(&g[3..13]));
        } else {
            prop_assert_eq!(d.product.ndc10, None);
        }
    }

    #[test]
    fn canonical_bytes_identical_across_variants(
        l in label(),
        order_a in Just((0usize..5).collect::<Vec<_>>()).prop_shuffle(),
        order_b in Just((0usize..5).collect::<Vec<_>>()).prop_shuffle(),
        gs_a in any::<bool>(),
        gs_b in any::<bool>(),
        trailing_a in any::<bool>(),
        trailing_b in any::<bool>(),
    ) {
        let pick = |order: &[usize]| -> Vec<(&str, String)> {
            order.iter().filter(|&&i| i < l.elements.len()).map(|&i| l.elements[i].clone()).collect()
        };
        let a = encode(&pick(&order_a), gs_a, trailing_a);
        let b = encode(&pick(&order_b), gs_b, trailing_b);
        let variants = [
            format!("]d2{a}"),
            format!("]C1{b}"),
            format!("]Q3{a}"),
            b.clone(),
            a.clone(),
            format!("]d2{b}"),
        ];
        let first = decode_with_year(variants[0].as_bytes(), YEAR).unwrap().product;
        for v in &variants[1..] {
            let p = decode_with_year(v.as_bytes(), YEAR)
                .unwrap_or_else(|e| panic!("{v:?}: {e}"))
                .product;
            prop_assert_eq!(&p, &first);
            prop_assert_eq!(p.canonical_bytes(), first.canonical_bytes());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_with_year(&data, YEAR);
        let mut with_aim = b"]d2".to_vec();
        with_aim.extend_from_slice(&data);
        let _ = decode_with_year(&with_aim, YEAR);
    }

    #[test]
    fn gs1_like_noise_never_panics(
        parts in proptest::collection::vec(
            prop_oneof![
                Just("01".to_string()), Just("17".to_string()), Just("10".to_string()),
                Just("21".to_string()), Just("\u{1d}".to_string()), Just("3103".to_string()),
                Just("8006".to_string()), Just("9".to_string()), "[0-9]{1,14}", "[A-Za-z ]{1,5}",
            ],
            0..12,
        ),
        aim in proptest::sample::select(vec!["]d2", "]C1", "", "]E0", "]Q1https://a.b/"]),
    ) {
        let data = format!("{aim}{}", parts.concat());
        let _ = decode_with_year(data.as_bytes(), YEAR);
    }

    #[test]
    fn errors_never_repeat_lot_or_serial(
        l in label(),
        bad in proptest::sample::select(vec![' ', '#', '$', '@', '\u{e9}']),
        aim in proptest::sample::select(vec!["]d2", ""]),
    ) {
        // Corrupt the lot with a character outside CSET 82.
        let mut elements = l.elements.clone();
        let lot = format!("{}{bad}", elements[2].1.chars().take(19).collect::<String>());
        elements[2].1 = lot.clone();
        let data = format!("{aim}{}", encode(&elements, false, false));
        let err = decode_with_year(data.as_bytes(), YEAR).expect_err("corrupt lot");
        if lot.len() >= 5 {
            prop_assert!(!err.0.contains(&lot), "{}", err);
        }
        let serial = &l.elements[3].1;
        if serial.len() >= 5 {
            prop_assert!(!err.0.contains(serial.as_str()), "{}", err);
        }
    }
}
