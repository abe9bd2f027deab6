//! GS1 check digits, GTIN normalisation and the US NDC carried in a GTIN.
//!
//! - Check digit (GTIN-8/12/13/14, GLN, SSCC, GSIN, …): from the rightmost
//!   digit before the check digit, weights 3, 1, 3, … moving left; the check
//!   digit is `(10 − sum mod 10) mod 10` (GS1 General Specifications §7.9.1).
//! - GTIN normalisation: every GTIN is carried as 14 digits, left-padded with
//!   zeros (UPC-A/GTIN-12 → `00` + 12, EAN-13 → `0` + 13, EAN-8 → `000000` + 8).
//! - NDC: a US drug GTIN-14 is indicator + `03` + NDC10 + check digit; a UPC-A
//!   with number system 3 is `3` + NDC10 + check, i.e. the same GTIN-14 with
//!   indicator 0. So after normalisation one rule covers both: digits `[1..3]`
//!   are `03` → NDC10 = digits `[3..13]`. Indicator 9 (variable-measure trade
//!   item) is not a drug package and gives no NDC. The 11-digit NDC is never
//!   derived: the 10 digits don't say whether the split is 4-4-2, 5-3-2 or 5-4-1.

/// The GS1 mod-10 check digit for `payload` (the digits *before* the check
/// digit). `None` if `payload` is empty or holds a non-digit.
pub fn check_digit(payload: &[u8]) -> Option<u8> {
    if payload.is_empty() {
        return None;
    }
    // Branch-free over the digits: weight 3, 1, 3, … from the right; any
    // non-digit is remembered and reported after the loop.
    let mut sum: u32 = 0;
    let mut weight = 3;
    let mut bad = false;
    for &c in payload.iter().rev() {
        let d = c.wrapping_sub(b'0');
        bad |= d > 9;
        sum += d as u32 * weight;
        weight = 4 - weight;
    }
    if bad {
        return None;
    }
    Some(((10 - sum % 10) % 10) as u8)
}

/// True when `code` is all digits (at least 2) and its last digit is the
/// correct GS1 check digit for the rest.
pub fn has_valid_check_digit(code: &[u8]) -> bool {
    match code.split_last() {
        Some((&last, payload)) if last.is_ascii_digit() => {
            check_digit(payload) == Some(last - b'0')
        }
        _ => false,
    }
}

/// Left-pad a GTIN-8/12/13/14 (digits only, check digit not verified here) to
/// 14 digits. `None` for other lengths or non-digits.
pub fn normalise_gtin14(gtin: &[u8]) -> Option<String> {
    if !matches!(gtin.len(), 8 | 12 | 13 | 14) || !gtin.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut out = String::with_capacity(14);
    out.push_str(&"000000"[..14 - gtin.len()]);
    // All ASCII digits, so this is valid UTF-8.
    out.push_str(std::str::from_utf8(gtin).ok()?);
    Some(out)
}

/// The NDC10 digits inside a 14-digit GTIN (indicator 0-8 + `03` + NDC10 +
/// check), or `None` when the GTIN does not carry a US NDC. The check digit is
/// not verified here (the element parser already did).
pub fn ndc10_from_gtin14(gtin14: &str) -> Option<&str> {
    let b = gtin14.as_bytes();
    if b.len() != 14 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if b[0] == b'9' || &b[1..3] != b"03" {
        return None;
    }
    gtin14.get(3..13)
}

/// The NDC10 digits inside a 12-digit UPC-A of number system 3
/// (`3` + NDC10 + check), or `None`.
pub fn ndc10_from_upc_a(upc: &str) -> Option<&str> {
    let b = upc.as_bytes();
    if b.len() != 12 || !b.iter().all(u8::is_ascii_digit) || b[0] != b'3' {
        return None;
    }
    upc.get(1..11)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_digits_from_spec_examples() {
        // gs1-syntax-engine test_scandata_validateParity
        assert!(has_valid_check_digit(b"24012345678905"));
        assert!(!has_valid_check_digit(b"24012345678909"));
        assert!(has_valid_check_digit(b"2112233789657"));
        assert!(!has_valid_check_digit(b"2112233789658"));
        assert!(has_valid_check_digit(b"416000336108"));
        assert!(!has_valid_check_digit(b"416000336107"));
        assert!(has_valid_check_digit(b"02345680"));
        assert!(!has_valid_check_digit(b"02345689"));
        // SSCC
        assert_eq!(check_digit(b"37610425002123456"), Some(9));
        assert!(has_valid_check_digit(b"123456789012345675"));
        // Edge cases
        assert_eq!(check_digit(b""), None);
        assert_eq!(check_digit(b"12a4"), None);
        assert!(!has_valid_check_digit(b""));
        assert!(!has_valid_check_digit(b"1"));
        assert!(has_valid_check_digit(b"00"));
        assert!(!has_valid_check_digit(b"1234567x"));
    }

    #[test]
    fn normalise_pads_to_14() {
        assert_eq!(normalise_gtin14(b"307773105025").unwrap(), "00307773105025");
        assert_eq!(
            normalise_gtin14(b"2112345678900").unwrap(),
            "02112345678900"
        );
        assert_eq!(normalise_gtin14(b"02345673").unwrap(), "00000002345673");
        assert_eq!(
            normalise_gtin14(b"00349281589058").unwrap(),
            "00349281589058"
        );
        assert!(normalise_gtin14(b"1234567").is_none());
        assert!(normalise_gtin14(b"12345678901a").is_none());
    }

    #[test]
    fn ndc_rules() {
        // Worked example in the research notes: 00349281589058 → 4928158905.
        assert_eq!(ndc10_from_gtin14("00349281589058"), Some("4928158905"));
        // Case indicator 1..8 keeps the NDC.
        assert_eq!(ndc10_from_gtin14("10349281589055"), Some("4928158905"));
        // Indicator 9 (variable measure) and non-03 prefixes carry no NDC.
        assert_eq!(ndc10_from_gtin14("90349281589052"), None);
        assert_eq!(ndc10_from_gtin14("05901234123457"), None);
        assert_eq!(ndc10_from_gtin14("00012345678905"), None);
        assert_eq!(ndc10_from_gtin14("0034928158905"), None);
        // UPC-A number system 3.
        assert_eq!(ndc10_from_upc_a("307773105025"), Some("0777310502"));
        assert_eq!(ndc10_from_upc_a("416000336108"), None);
        // The common bug: cutting three digits and keeping the check digit.
        assert_ne!(ndc10_from_gtin14("00349281589058"), Some("4928158905 8"));
    }

    #[test]
    fn upc_and_gtin14_give_same_ndc() {
        for (upc, ndc) in [
            ("307773105025", "0777310502"),
            ("312345678906", "1234567890"),
            ("312345678098", "1234567809"),
            ("358160810114", "5816081011"),
            ("301439570103", "0143957010"),
        ] {
            assert!(has_valid_check_digit(upc.as_bytes()), "{upc}");
            assert_eq!(ndc10_from_upc_a(upc), Some(ndc));
            let g = normalise_gtin14(upc.as_bytes()).unwrap();
            assert_eq!(ndc10_from_gtin14(&g), Some(ndc));
        }
    }
}
