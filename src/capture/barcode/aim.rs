//! AIM symbology identifiers (ISO/IEC 15424): `]` + code character + modifier.
//!
//! Sources: jodal/biip `symbology.py` / `gs1/_symbology.py` (GS1 General
//! Specifications figure 5.1.2-2), gs1-syntax-engine `scandata.c`. For `]Y`
//! (system expansion) the modifier is the first modifier digit plus one
//! characters long.

use super::DecodeError;

/// What follows the identifier and how it is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// A GS1 element string (FNC1 in first position; later FNC1s as GS).
    Gs1,
    /// EAN-13 / UPC-A (13 digits with a valid check digit).
    Ean13,
    /// EAN-8 (8 digits with a valid check digit).
    Ean8,
    /// EAN/UPC with a 2- or 5-digit add-on: 13 digits + add-on.
    Ean13AddOn,
    /// A stand-alone EAN 2- or 5-digit add-on (no product identity).
    AddOnOnly,
    /// ITF with a check digit: 14 digits are an ITF-14 GTIN.
    Itf,
    /// Plain data that may hold a GS1 Digital Link URI (Data Matrix, QR).
    PlainOrDigitalLink,
    /// Plain data, no GS1 meaning.
    Plain,
}

/// A recognised symbology identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbology {
    /// The identifier, e.g. `]d2` (`]Y` for every system-expansion id).
    pub aim: &'static str,
    /// Human name.
    pub name: &'static str,
    /// How the data after it is decoded.
    pub content: Content,
}

const fn s(aim: &'static str, name: &'static str, content: Content) -> Symbology {
    Symbology { aim, name, content }
}

use Content::*;

/// Every identifier this decoder accepts, sorted by identifier.
pub static SYMBOLOGIES: &[Symbology] = SYMS;

const SYMS: &[Symbology] = &[
    s("]A0", "Code 39", Plain),
    s(
        "]A1",
        "Code 39 (check digit validated and transmitted)",
        Plain,
    ),
    s(
        "]A2",
        "Code 39 (check digit validated, not transmitted)",
        Plain,
    ),
    s("]A3", "Code 39 (full ASCII)", Plain),
    s(
        "]A4",
        "Code 39 (full ASCII, check digit transmitted)",
        Plain,
    ),
    s(
        "]A5",
        "Code 39 (full ASCII, check digit not transmitted)",
        Plain,
    ),
    s("]A7", "Code 32 (Italian pharmacode)", Plain),
    s("]C0", "Code 128", Plain),
    s("]C1", "GS1-128", Gs1),
    s("]C2", "Code 128 (FNC1 in second position)", Plain),
    s("]C4", "Code 128 (ISBT concatenation)", Plain),
    s("]E0", "EAN-13 / UPC-A", Ean13),
    s("]E1", "EAN two-digit add-on", AddOnOnly),
    s("]E2", "EAN five-digit add-on", AddOnOnly),
    s("]E3", "EAN-13 / UPC-A with add-on", Ean13AddOn),
    s("]E4", "EAN-8", Ean8),
    s("]I0", "Interleaved 2 of 5", Plain),
    s("]I1", "ITF (check digit validated and transmitted)", Itf),
    s(
        "]I3",
        "Interleaved 2 of 5 (check digit validated, not transmitted)",
        Plain,
    ),
    s("]J0", "DotCode", Plain),
    s("]J1", "GS1 DotCode", Gs1),
    s("]L0", "PDF417", Plain),
    s("]L1", "PDF417 (extended channel interpretation)", Plain),
    s("]L2", "PDF417 (basic channel)", Plain),
    s("]Q0", "QR Code Model 1", Plain),
    s("]Q1", "QR Code", PlainOrDigitalLink),
    s("]Q2", "QR Code (ECI)", Plain),
    s("]Q3", "GS1 QR Code", Gs1),
    s("]Q5", "QR Code (FNC1 in second position)", Plain),
    s("]Q6", "QR Code (FNC1 in second position, ECI)", Plain),
    s("]Y", "System expansion", Plain),
    s("]d0", "Data Matrix ECC 000-140", Plain),
    s("]d1", "Data Matrix", PlainOrDigitalLink),
    s("]d2", "GS1 DataMatrix", Gs1),
    s("]d3", "Data Matrix (FNC1 in second position)", Plain),
    s("]d4", "Data Matrix (ECI)", Plain),
    s("]d6", "Data Matrix (FNC1 in second position, ECI)", Plain),
    s("]e0", "GS1 DataBar / GS1 Composite", Gs1),
    s("]e1", "GS1 Composite (after encoded separator)", Gs1),
    s("]e2", "GS1 Composite (after escape mechanism)", Gs1),
];

const NONE: u8 = u8::MAX;

/// Index into [`SYMS`] by code character (ASCII) × modifier digit, built at
/// compile time; every modifier in the table is a digit.
const fn build_index() -> [u8; 1280] {
    assert!(SYMS.len() < NONE as usize);
    let mut out = [NONE; 1280];
    let mut i = 0;
    while i < SYMS.len() {
        let a = SYMS[i].aim.as_bytes();
        if a.len() == 3 {
            assert!(a[1] < 128 && a[2].is_ascii_digit());
            out[a[1] as usize * 10 + (a[2] - b'0') as usize] = i as u8;
        }
        i += 1;
    }
    out
}

static INDEX: [u8; 1280] = build_index();

/// The entry for an exact 3-character identifier (or `]Y`).
pub fn lookup(id: &str) -> Option<&'static Symbology> {
    match id.as_bytes() {
        b"]Y" => SYMS.iter().find(|s| s.aim == "]Y"),
        &[b']', c, m] if c < 128 && m.is_ascii_digit() => {
            match INDEX[c as usize * 10 + (m - b'0') as usize] {
                NONE => None,
                i => SYMS.get(i as usize),
            }
        }
        _ => None,
    }
}

/// Read the identifier at the start of `data` (which starts with `]`).
/// Returns the symbology and the identifier's length in bytes.
pub fn parse(data: &[u8]) -> Result<(&'static Symbology, usize), DecodeError> {
    debug_assert_eq!(data.first(), Some(&b']'));
    if data.len() < 3 {
        return Err(DecodeError(format!(
            "truncated symbology identifier ({} bytes, an AIM id is ']' + 2 characters)",
            data.len()
        )));
    }
    if data[1] == b'Y' {
        // System expansion: modifier length = first modifier digit + 1.
        let d = data[2];
        if !d.is_ascii_digit() {
            return Err(DecodeError(
                "unsupported symbology identifier: ]Y modifier must start with a digit".into(),
            ));
        }
        let len = 2 + (d - b'0') as usize + 1;
        if data.len() < len {
            return Err(DecodeError(format!(
                "truncated symbology identifier: ]Y with modifier length {} but the data ends first",
                len - 2
            )));
        }
        if !data[2..len].iter().all(|c| c.is_ascii_alphanumeric()) {
            return Err(DecodeError(
                "unsupported symbology identifier: ]Y modifier must be alphanumeric".into(),
            ));
        }
        return Ok((lookup("]Y").ok_or_else(unsupported)?, len));
    }
    let id = std::str::from_utf8(&data[..3]).map_err(|_| unsupported())?;
    match lookup(id) {
        Some(sym) => Ok((sym, 3)),
        None => Err(unsupported()),
    }
}

fn unsupported() -> DecodeError {
    // The identifier itself is not echoed: if it isn't one we know, it may be
    // arbitrary data that merely starts with ']'.
    DecodeError("unsupported symbology identifier at byte 0".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_sorted() {
        for w in SYMBOLOGIES.windows(2) {
            assert!(w[0].aim < w[1].aim, "{} {}", w[0].aim, w[1].aim);
        }
    }

    #[test]
    fn parse_known_and_unknown() {
        assert_eq!(parse(b"]d2010").unwrap().0.content, Content::Gs1);
        assert_eq!(parse(b"]E0123").unwrap().0.content, Content::Ean13);
        assert_eq!(
            parse(b"]Q1").unwrap().0.content,
            Content::PlainOrDigitalLink
        );
        assert!(parse(b"]XX").is_err());
        assert!(parse(b"]X").is_err());
        assert!(parse(b"]").is_err());
        assert!(parse(b"]C9").is_err());
        assert_eq!(parse(b"]Y1a").unwrap().1, 4);
        assert_eq!(parse(b"]Y9abcdefghiDATA").unwrap().1, 12);
        assert!(parse(b"]Y9abc").is_err());
        assert!(parse(b"]Ya").is_err());
        assert!(parse(b"]\xff\xfe").is_err());
        for sym in SYMBOLOGIES {
            assert_eq!(lookup(sym.aim), Some(sym));
        }
        assert!(lookup("]d").is_none());
        assert!(lookup("d2").is_none());
        assert!(lookup("]d22").is_none());
    }
}
