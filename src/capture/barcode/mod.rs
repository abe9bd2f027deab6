//! Barcode decoding: AIM symbology identifiers, GS1 element strings, GS1
//! Digital Link, UPC/EAN/ITF-14, and the pharmacy product identity (GTIN,
//! NDC10, lot, serial, expiry).
//!
//! # Rules
//!
//! Input is one scanned frame without its framing suffix.
//!
//! 1. **Bytes.** At most [`MAX_FRAME_LEN`] bytes; valid UTF-8; no control
//!    characters (C0, DEL, C1) except GS (0x1D). Anything else is rejected
//!    with the byte position.
//! 2. **Symbology identifier** ([`aim`]): `]` + code + modifier. GS1 data
//!    follows `]C1` `]d2` `]Q3` `]e0` `]e1` `]e2` `]J1`; `]E0` is 13 digits
//!    (UPC-A arrives with a leading 0), `]E4` is EAN-8, `]E3` is EAN-13 plus a
//!    2/5-digit add-on, `]I1` with 14 digits is ITF-14; `]d1`/`]Q1` data starting
//!    with `http(s)://` must be a GS1 Digital Link URI ([`digital_link`]); the
//!    other known identifiers (Code 128, Code 39, PDF417, …) carry plain data with
//!    no product identity. An unknown identifier is rejected.
//! 3. **No identifier**: accepted only where the data parses *unambiguously*
//!    as one of: UPC-A (12 digits, valid check digit; assumed `]E0`), EAN-13
//!    (13 digits; `]E0`), GTIN-14/ITF-14 (14 digits; `]I1`), a GS1 element string
//!    (assumed `]d2`, the DSCSA carrier) or a GS1 Digital Link URI (assumed
//!    `]Q1`). 12–14 digits that are *both* a valid GTIN and a valid element string
//!    are rejected as ambiguous. [`Decoded::symbology_assumed`] is then `true`.
//! 4. **GS1 element strings** ([`gs1`], table in [`ai_table`]): AI length from its
//!    first two digits; predefined-length AIs take their fixed length, the others
//!    run to the next GS or the end; a GS after a fixed-length AI, a doubled GS,
//!    a leading GS and a trailing GS are tolerated; every value is checked for
//!    length, character set (N = digits, X = CSET 82), check digit (GTIN, SSCC,
//!    GLN, …) and dates (YYMMDD; DD = 00 = last day of month for 11–17; GS1
//!    sliding century window). An AI repeated with a different value is rejected.
//! 5. **Identity** ([`ProductId`]): `gtin` from (01) or the UPC/EAN/ITF-14,
//!    always 14 digits; `ndc10` when the GTIN-14 is indicator (0–8) + `03` +
//!    NDC10 + check (this covers UPC-A number system 3); `lot` (10), `serial`
//!    (21), `expiry` (17). NDC11 is never derived. A valid barcode without a GTIN
//!    (e.g. only an SSCC) decodes, but [`ProductId::is_dispensable`] is false.
//! 6. **Errors** ([`DecodeError`]) name AIs, byte positions (0-based, in the
//!    whole frame), lengths and expected formats — never the scanned data,
//!    which may be anything (a mis-scanned patient wristband).
//! 7. Decoding never panics, never recurses on input, and is linear in the
//!    input length.
//!
//! # Layout
//!
//! - [`aim`]: symbology identifiers;
//! - [`gs1`]: element-string parser, value validation, dates;
//! - [`ai_table`]: the AI table;
//! - [`gtin`]: check digits, GTIN-14 normalisation, NDC10;
//! - [`digital_link`]: GS1 Digital Link URIs.

pub(crate) mod ai_table;
pub mod aim;
pub(crate) mod digital_link;
pub mod gs1;
pub mod gtin;

use aim::{Content, Symbology};
use chrono::{Datelike, NaiveDate};
use serde::Serialize;

/// Longest frame accepted, in bytes (a Data Matrix holds at most 3116 bytes,
/// a QR Code 2953; the margin covers identifiers and Digital Link stems).
pub const MAX_FRAME_LEN: usize = 8192;

/// One GS1 element: application identifier and its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Element {
    /// The AI digits, e.g. "01" (static text: no allocation per element).
    pub ai: &'static str,
    /// The value as transmitted.
    pub value: String,
}

/// Canonical product identity carried by a barcode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProductId {
    /// GTIN normalised to 14 digits.
    pub gtin: Option<String>,
    /// 10-digit NDC without dashes, when the GTIN carries a US NDC.
    pub ndc10: Option<String>,
    /// (10) batch/lot.
    pub lot: Option<String>,
    /// (21) serial.
    pub serial: Option<String>,
    /// (17) expiry.
    pub expiry: Option<NaiveDate>,
}

/// A successfully decoded barcode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decoded {
    /// AIM symbology identifier, e.g. "]d2" (as sent, or the one assumed).
    pub aim: String,
    /// Human name of the symbology.
    pub symbology: &'static str,
    /// True when the data carried no AIM id and the symbology was inferred.
    pub symbology_assumed: bool,
    /// GS1 elements in transmission order (for a UPC/EAN: one (01) element).
    pub elements: Vec<Element>,
    /// Canonical product identity.
    pub product: ProductId,
}

/// Why a barcode was rejected. The message never repeats the scanned data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

impl ProductId {
    /// True when the identity names a dispensable product (a GTIN).
    pub fn is_dispensable(&self) -> bool {
        self.gtin.is_some()
    }

    /// The canonical bytes hashed into the content key: `name=value` + 0x1F
    /// for gtin, ndc10, lot, serial, expiry (YYYY-MM-DD), in that order, an
    /// absent field as an empty value. Identical for the same label whatever
    /// symbology, AI order or separator placement the scanner used.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(96);
        let mut field = |name: &str, value: &[u8]| {
            out.extend_from_slice(name.as_bytes());
            out.push(b'=');
            out.extend_from_slice(value);
            out.push(0x1f);
        };
        field("gtin", self.gtin.as_deref().unwrap_or("").as_bytes());
        field("ndc10", self.ndc10.as_deref().unwrap_or("").as_bytes());
        field("lot", self.lot.as_deref().unwrap_or("").as_bytes());
        field("serial", self.serial.as_deref().unwrap_or("").as_bytes());
        let mut date = [0u8; 10];
        let date_bytes: &[u8] = match self.expiry {
            Some(d) if (0..=9999).contains(&d.year()) => {
                write_ymd(&mut date, d);
                &date
            }
            Some(_) => b"?",
            None => b"",
        };
        field("expiry", date_bytes);
        out
    }
}

/// `YYYY-MM-DD` (same as chrono's `%Y-%m-%d` for years 0..=9999).
fn write_ymd(buf: &mut [u8; 10], d: NaiveDate) {
    let y = d.year() as u32;
    let digit = |v: u32| b'0' + (v % 10) as u8;
    buf[0] = digit(y / 1000);
    buf[1] = digit(y / 100);
    buf[2] = digit(y / 10);
    buf[3] = digit(y);
    buf[4] = b'-';
    buf[5] = digit(d.month() / 10);
    buf[6] = digit(d.month());
    buf[7] = b'-';
    buf[8] = digit(d.day() / 10);
    buf[9] = digit(d.day());
}

/// Decode one scanned frame (without its framing suffix). Dates use the GS1
/// century window relative to the current UTC year.
pub fn decode(data: &[u8]) -> Result<Decoded, DecodeError> {
    decode_with_year(data, current_year())
}

/// The current UTC year. On Linux read from `CLOCK_REALTIME_COARSE` (served
/// from the vDSO in ~10 ns; its millisecond resolution is plenty for a year),
/// which keeps the clock read out of the decode hot path's budget.
fn current_year() -> i32 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use nix::time::{ClockId, clock_gettime};
        // Only with a 64-bit `time_t`: a 32-bit one (armv7's glibc ABI)
        // wraps in 2038, while `Utc::now` below (std) reads the 64-bit
        // clock there too.
        #[allow(clippy::useless_conversion)] // i32 → i64 on 32-bit time_t
        if let Ok(ts) = clock_gettime(ClockId::CLOCK_REALTIME_COARSE)
            && size_of_val(&ts.tv_sec()) == 8
            && let Some(t) = chrono::DateTime::from_timestamp(i64::from(ts.tv_sec()), 0)
        {
            return t.year();
        }
    }
    chrono::Utc::now().year()
}

/// [`decode`] with the reference year of the GS1 century window given
/// explicitly (deterministic tests, replays).
pub fn decode_with_year(data: &[u8], ref_year: i32) -> Result<Decoded, DecodeError> {
    let text = check_bytes(data)?;
    if data.first() == Some(&b']') {
        let (sym, aim_len) = aim::parse(data)?;
        let payload = &text[aim_len..];
        let aim_id = &text[..aim_len];
        decode_payload(sym, aim_id, payload, aim_len, ref_year, false)
    } else {
        decode_without_aim(text, ref_year)
    }
}

/// Frame-level checks: length, control characters, UTF-8.
fn check_bytes(data: &[u8]) -> Result<&str, DecodeError> {
    if data.is_empty() {
        return Err(DecodeError("empty frame".into()));
    }
    if data.len() > MAX_FRAME_LEN {
        return Err(DecodeError(format!(
            "frame too long ({} bytes, max {MAX_FRAME_LEN})",
            data.len()
        )));
    }
    let is_control = |c: u8| (c < 0x20 && c != gs1::GS) || c == 0x7f;
    // Branch-free OR over the frame (vectorises); the position only on failure.
    let any_control = data.iter().fold(false, |acc, &c| acc | is_control(c));
    if any_control && let Some(k) = data.iter().position(|&c| is_control(c)) {
        let what = if data[k] == 0 {
            "NUL byte"
        } else {
            "control character"
        };
        return Err(DecodeError(format!(
            "{what} at byte {k} (no control characters other than GS 0x1D are allowed)"
        )));
    }
    let text = std::str::from_utf8(data).map_err(|e| {
        DecodeError(format!(
            "not UTF-8: invalid byte sequence at byte {}",
            e.valid_up_to()
        ))
    })?;
    // C1 controls (U+0080..U+009F, UTF-8 C2 80..C2 9F): as unprintable as
    // C0, and no symbology carries them as text.
    if let Some(k) = data
        .windows(2)
        .position(|w| w[0] == 0xc2 && (0x80..=0x9f).contains(&w[1]))
    {
        return Err(DecodeError(format!(
            "control character U+{:04X} at byte {k} (no control characters other than GS 0x1D are allowed)",
            data[k + 1]
        )));
    }
    Ok(text)
}

fn decode_payload(
    sym: &'static Symbology,
    aim_id: &str,
    payload: &str,
    base: usize,
    ref_year: i32,
    assumed: bool,
) -> Result<Decoded, DecodeError> {
    // A DSCSA label has 4 elements; 8 covers nearly every GS1 label in one
    // allocation (UPC/EAN/ITF need 1).
    let mut elements = Vec::with_capacity(if sym.content == Content::Gs1 { 8 } else { 1 });
    let mut symbology = sym.name;
    match sym.content {
        Content::Gs1 => {
            if payload.is_empty() {
                return Err(DecodeError(format!(
                    "empty GS1 data after symbology identifier {}",
                    sym.aim
                )));
            }
            parse_gs1(payload, base, ref_year, &mut elements)?;
        }
        Content::Ean13 => {
            let gtin = retail_digits(payload, &[13], base, sym)?;
            symbology = if payload.starts_with('0') {
                "UPC-A"
            } else {
                "EAN-13"
            };
            elements.push(gtin_element(gtin));
        }
        Content::Ean8 => {
            let gtin = retail_digits(payload, &[8], base, sym)?;
            elements.push(gtin_element(gtin));
        }
        Content::Ean13AddOn => {
            all_digits(payload, base, sym)?;
            if payload.len() != 15 && payload.len() != 18 {
                return Err(DecodeError(format!(
                    "{}: expected 13 digits plus a 2- or 5-digit add-on, got {} digits",
                    sym.aim,
                    payload.len()
                )));
            }
            let gtin = retail_digits(&payload[..13], &[13], base, sym)?;
            elements.push(gtin_element(gtin));
        }
        Content::AddOnOnly => {
            all_digits(payload, base, sym)?;
            if payload.len() != 2 && payload.len() != 5 {
                return Err(DecodeError(format!(
                    "{}: expected a 2- or 5-digit add-on, got {} characters",
                    sym.aim,
                    payload.len()
                )));
            }
        }
        Content::Itf => {
            all_digits(payload, base, sym)?;
            if payload.is_empty() {
                return Err(DecodeError(format!("{}: no data", sym.aim)));
            }
            if payload.len() == 14 {
                let gtin = retail_digits(payload, &[14], base, sym)?;
                symbology = "ITF-14";
                elements.push(gtin_element(gtin));
            }
        }
        Content::PlainOrDigitalLink => {
            if digital_link::has_dl_scheme(payload.as_bytes()) {
                digital_link::parse(payload.as_bytes(), base, ref_year, |ai, value| {
                    elements.push(Element {
                        ai: ai_table::ai_text(ai.as_bytes()).unwrap_or("??"),
                        value,
                    })
                })?;
            }
        }
        Content::Plain => {}
    }
    let product = build_product(&elements, ref_year)?;
    Ok(Decoded {
        aim: aim_id.to_string(),
        symbology,
        symbology_assumed: assumed,
        elements,
        product,
    })
}

fn parse_gs1(
    payload: &str,
    base: usize,
    ref_year: i32,
    elements: &mut Vec<Element>,
) -> Result<(), DecodeError> {
    let mut bad_slice = false;
    gs1::parse(payload.as_bytes(), base, ref_year, |_, sp| {
        // Values start and end at ASCII bytes (digits / GS), so the slice is
        // on char boundaries; `get` keeps this panic-free regardless.
        match payload.get(sp.val_start..sp.val_end) {
            Some(value) => elements.push(Element {
                ai: sp.ai,
                value: value.to_string(),
            }),
            None => bad_slice = true,
        }
    })?;
    if bad_slice {
        return Err(DecodeError(
            "internal: element boundary inside a character".into(),
        ));
    }
    Ok(())
}

fn all_digits(payload: &str, base: usize, sym: &Symbology) -> Result<(), DecodeError> {
    match payload.bytes().position(|c| !c.is_ascii_digit()) {
        Some(k) => Err(DecodeError(format!(
            "{}: non-digit at byte {} (digits only)",
            sym.aim,
            base + k
        ))),
        None => Ok(()),
    }
}

/// Digits of one of `lens` lengths with a valid check digit → GTIN-14.
fn retail_digits(
    payload: &str,
    lens: &[usize],
    base: usize,
    sym: &Symbology,
) -> Result<String, DecodeError> {
    all_digits(payload, base, sym)?;
    if !lens.contains(&payload.len()) {
        let what = if payload.len() < lens[0] {
            "too short"
        } else {
            "too long"
        };
        return Err(DecodeError(format!(
            "{}: {what} ({} digits, expected {})",
            sym.aim,
            payload.len(),
            lens[0]
        )));
    }
    if !gtin::has_valid_check_digit(payload.as_bytes()) {
        return Err(DecodeError(format!(
            "{}: incorrect check digit at byte {}",
            sym.aim,
            base + payload.len() - 1
        )));
    }
    gtin::normalise_gtin14(payload.as_bytes())
        .ok_or_else(|| DecodeError(format!("{}: not a GTIN", sym.aim)))
}

fn gtin_element(gtin14: String) -> Element {
    Element {
        ai: "01",
        value: gtin14,
    }
}

/// Data without a symbology identifier.
fn decode_without_aim(text: &str, ref_year: i32) -> Result<Decoded, DecodeError> {
    let b = text.as_bytes();
    if digital_link::has_dl_scheme(b) {
        let sym = aim::lookup("]Q1").ok_or_else(|| DecodeError("internal: ]Q1".into()))?;
        return decode_payload(sym, "]Q1", text, 0, ref_year, true)
            .map_err(|e| DecodeError(format!("no symbology identifier; {}", e.0)));
    }
    let digits = b.iter().all(u8::is_ascii_digit);
    let retail_kind = match b.len() {
        12 => Some(("]E0", "UPC-A")),
        13 => Some(("]E0", if b[0] == b'0' { "UPC-A" } else { "EAN-13" })),
        14 => Some(("]I1", "ITF-14")),
        _ => None,
    };
    let retail = match retail_kind {
        Some(kind) if digits && gtin::has_valid_check_digit(b) => Some(kind),
        _ => None,
    };
    let gs1_sym = aim::lookup("]d2").ok_or_else(|| DecodeError("internal: ]d2".into()))?;
    let gs1_try = if b[0].is_ascii_digit() || b[0] == gs1::GS {
        Some(decode_payload(gs1_sym, "]d2", text, 0, ref_year, true))
    } else {
        None
    };
    match (retail, gs1_try) {
        (Some((_, name)), Some(Ok(_))) => Err(DecodeError(format!(
            "ambiguous without a symbology identifier: {} digits are both a valid {name} and a valid GS1 element string (enable AIM ids on the scanner)",
            b.len()
        ))),
        (Some((aim_id, name)), _) => {
            let gtin = gtin::normalise_gtin14(b)
                .ok_or_else(|| DecodeError("internal: GTIN normalisation".into()))?;
            let elements = vec![gtin_element(gtin)];
            let product = build_product(&elements, ref_year)?;
            Ok(Decoded {
                aim: aim_id.to_string(),
                symbology: name,
                symbology_assumed: true,
                elements,
                product,
            })
        }
        (None, Some(Ok(d))) => Ok(d),
        (None, Some(Err(e))) => match retail_kind {
            Some((_, name)) if digits => Err(DecodeError(format!(
                "no symbology identifier: {} digits have an incorrect {name} check digit and are not a GS1 element string ({})",
                b.len(),
                e.0
            ))),
            _ => Err(DecodeError(format!(
                "no symbology identifier and not a GS1 element string: {}",
                e.0
            ))),
        },
        (None, None) => Err(DecodeError(
            "no symbology identifier, and the data is not a UPC/EAN/GTIN, a GS1 element string or a GS1 Digital Link URI".into(),
        )),
    }
}

/// Build the product identity; reject an AI repeated with a different value.
fn build_product(elements: &[Element], ref_year: i32) -> Result<ProductId, DecodeError> {
    // Each AI as an integer, computed once (no allocation for ≤ 16 elements).
    let mut small = [0u32; 16];
    let large: Vec<u32>;
    let codes: &[u32] = if elements.len() <= small.len() {
        for (c, el) in small.iter_mut().zip(elements) {
            *c = ai_code(el.ai);
        }
        &small[..elements.len()]
    } else {
        large = elements.iter().map(|el| ai_code(el.ai)).collect();
        &large
    };
    check_repeats(elements, codes)?;
    check_pairings(elements, codes)?;
    let mut p = ProductId::default();
    for (el, &code) in elements.iter().zip(codes) {
        match code {
            C01 if p.gtin.is_none() => {
                p.ndc10 = gtin::ndc10_from_gtin14(&el.value).map(str::to_string);
                p.gtin = Some(el.value.clone());
            }
            C10 if p.lot.is_none() => p.lot = Some(el.value.clone()),
            C21 if p.serial.is_none() => p.serial = Some(el.value.clone()),
            C17 if p.expiry.is_none() => {
                p.expiry = Some(
                    gs1::parse_yymmdd(el.value.as_bytes(), ref_year, true)
                        .map_err(|(_, why)| DecodeError(format!("AI (17): {why}")))?,
                );
            }
            _ => {}
        }
    }
    Ok(p)
}

/// Presence bits for the AIs the pairing rules mention.
const P01: u32 = 1;
const P02: u32 = 1 << 1;
const P03: u32 = 1 << 2;
const P21: u32 = 1 << 3;
const P37: u32 = 1 << 4;
const P235: u32 = 1 << 5;
const P255: u32 = 1 << 6;
const P414: u32 = 1 << 7;
const P8006: u32 = 1 << 8;

/// An AI as one integer: its length, then its digits (`"01"` → 201,
/// `"235"` → 3235, `"8006"` → 48006), so that AIs compare and match as
/// integers instead of strings. Distinct AIs get distinct codes.
#[inline]
fn ai_code(ai: &str) -> u32 {
    let b = ai.as_bytes();
    let mut v = b.len() as u32;
    for &c in b {
        v = v.wrapping_mul(10).wrapping_add(c.wrapping_sub(b'0') as u32);
    }
    v
}

const C01: u32 = 201;
const C02: u32 = 202;
const C03: u32 = 203;
const C10: u32 = 210;
const C17: u32 = 217;
const C21: u32 = 221;
const C22: u32 = 222;
const C37: u32 = 237;
const C235: u32 = 3235;
const C243: u32 = 3243;
const C250: u32 = 3250;
const C251: u32 = 3251;
const C254: u32 = 3254;
const C255: u32 = 3255;
const C414: u32 = 3414;
const C8006: u32 = 48006;
/// Codes of the measures 3100..=3699.
const MEASURES: std::ops::RangeInclusive<u32> = 43100..=43699;

fn presence_bit(code: u32) -> u32 {
    match code {
        C01 => P01,
        C02 => P02,
        C03 => P03,
        C21 => P21,
        C37 => P37,
        C235 => P235,
        C255 => P255,
        C414 => P414,
        C8006 => P8006,
        _ => 0,
    }
}

/// The subset of the GS1 Barcode Syntax Dictionary's `req=` / `ex=` pairing
/// rules that no public vector contradicts (docs/decoding.md lists the rules
/// enforced and the ones deliberately not enforced, with the vectors that
/// rule them out). One pass over the elements plus a fixed-size table, so
/// linear in the number of elements.
///
/// Enforced:
/// - `ex`: (01) with (02), (03), (37) or (255); (02) with (03); (21) with
///   (235); two different decimal-point variants of one trade/logistic
///   measure, e.g. (3102) and (3103) (`ex=310n`).
/// - `req` for AIs that only qualify a key: (21) needs (01), (03) or (8006);
///   (22), (235) and (243) need (01); (250) needs (01) or (8006) and (21);
///   (251) needs (01) or (8006); (254) needs (414).
fn check_pairings(elements: &[Element], codes: &[u32]) -> Result<(), DecodeError> {
    let mut present = 0u32;
    // 31nn..36nn: for each 3-digit measure group 310..369, the decimal digit
    // seen first (b'x' = none).
    let mut measure = [b'x'; 60];
    for (el, &code) in elements.iter().zip(codes) {
        present |= presence_bit(code);
        if MEASURES.contains(&code) {
            let group = ((code - MEASURES.start()) / 10) as usize;
            let digit = b'0' + (code % 10) as u8;
            if let Some(seen) = measure.get_mut(group) {
                if *seen == b'x' {
                    *seen = digit;
                } else if *seen != digit {
                    return Err(DecodeError(format!(
                        "AI ({}) cannot appear with AI ({}{}) (one decimal-point variant of a measure per barcode)",
                        el.ai,
                        &el.ai[..3],
                        *seen as char
                    )));
                }
            }
        }
    }
    let ex = |a: &str, b: &str| {
        Err(DecodeError(format!(
            "AI ({a}) cannot appear with AI ({b}) in one barcode (GS1 invalid pairing)"
        )))
    };
    for (bits, a, b) in [
        (P01 | P02, "01", "02"),
        (P01 | P03, "01", "03"),
        (P01 | P37, "01", "37"),
        (P01 | P255, "01", "255"),
        (P02 | P03, "02", "03"),
        (P21 | P235, "21", "235"),
    ] {
        if present & bits == bits {
            return ex(a, b);
        }
    }
    let has = |bits: u32| present & bits != 0;
    for (el, &code) in elements.iter().zip(codes) {
        let (ok, needs) = match code {
            C21 => (has(P01 | P03 | P8006), "(01), (03) or (8006)"),
            C22 | C235 | C243 => (has(P01), "(01)"),
            C250 if !has(P01 | P8006) => (false, "(01) or (8006)"),
            C250 => (has(P21), "(21)"),
            C251 => (has(P01 | P8006), "(01) or (8006)"),
            C254 => (has(P414), "(414)"),
            _ => continue,
        };
        if !ok {
            return Err(DecodeError(format!(
                "AI ({}) requires AI {needs} in the same barcode (GS1 mandatory pairing)",
                el.ai
            )));
        }
    }
    Ok(())
}

/// Repeated AIs must carry the same value (GS1 General Specifications; the
/// gs1-syntax-engine checks this too). Small messages are checked pairwise;
/// large ones by sorting, so the cost stays O(n log n).
fn check_repeats(elements: &[Element], codes: &[u32]) -> Result<(), DecodeError> {
    let conflict = |ai: &str| {
        DecodeError(format!(
            "AI ({ai}) appears more than once with different values"
        ))
    };
    if elements.len() <= 16 {
        for (i, a) in elements.iter().enumerate() {
            for (j, b) in elements.iter().enumerate().skip(i + 1) {
                if codes.get(i) == codes.get(j) && a.value != b.value {
                    return Err(conflict(a.ai));
                }
            }
        }
        return Ok(());
    }
    let mut idx: Vec<&Element> = elements.iter().collect();
    idx.sort_unstable_by(|a, b| (&a.ai, &a.value).cmp(&(&b.ai, &b.value)));
    for w in idx.windows(2) {
        if w[0].ai == w[1].ai && w[0].value != w[1].value {
            return Err(conflict(w[0].ai));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
