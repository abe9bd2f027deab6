//! Fuzz target: the barcode decoder on arbitrary bytes.
//!
//! Beyond "no panic": a decoded barcode's canonical bytes are computable, its
//! identity fields agree with its elements, and an error message is non-empty.
//! The `scangate decode` GS unescaping runs too (it feeds the same decoder).

#![no_main]

use libfuzzer_sys::fuzz_target;
use scangate::capture::barcode::{self, decode_with_year};

fuzz_target!(|data: &[u8]| {
    for year in [2025, 2075] {
        match decode_with_year(data, year) {
            Ok(d) => {
                let canon = d.product.canonical_bytes();
                assert!(canon.starts_with(b"gtin="));
                assert_eq!(d.product.is_dispensable(), d.product.gtin.is_some());
                if let Some(g) = &d.product.gtin {
                    assert_eq!(g.len(), 14);
                    assert!(d.elements.iter().any(|e| e.ai == "01"));
                }
                for e in &d.elements {
                    assert!((2..=4).contains(&e.ai.len()));
                    assert!(e.ai.bytes().all(|c| c.is_ascii_digit()));
                }
            }
            Err(e) => assert!(!e.0.is_empty()),
        }
    }
    let _ = barcode::decode(&scangate::cmd::decode::unescape_gs(data));
});
