//! The US National Drug Code of a package, its forms, and the GTIN that
//! carries it.
//!
//! - **NDC10**: 10 digits in three segments, labeler-product-package, in
//!   one of three configurations: 4-4-2, 5-3-2 or 5-4-1. The FDA NDC
//!   Directory writes it hyphenated (`0067-6382-30`); without hyphens the
//!   configuration is lost (`1234567890` is `1234-5678-90` or
//!   `12345-678-90`).
//! - **NDC11** (the HIPAA form, 5-4-2): the short segment padded with a
//!   leading zero (`0067-6382-30` → `00067638230`). Made from the
//!   hyphenated form only.
//! - **GTIN-14**: indicator digit + `03` + the NDC10's ten digits + the
//!   GS1 mod-10 check digit (`0067-6382-30` → `00300676382302`); a UPC-A
//!   is the same with indicator 0, without its two leading zeros. Reading
//!   a GTIN back gives the ten digits only, so the package is found in the
//!   directory by those digits ([`Key::Ndc10`]). The check digit and the
//!   `03` rule are [`crate::capture::barcode::gtin`]'s, as the barcode
//!   decoder uses them.

use crate::capture::barcode::gtin;
use std::fmt;

/// A package NDC as the directory writes it: three segments of digits in
/// a configuration of 10 digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PackageNdc {
    labeler: String,
    product: String,
    package: String,
}

impl PackageNdc {
    /// `labeler-product-package` in 4-4-2, 5-3-2 or 5-4-1; `None` for
    /// anything else.
    pub fn parse(text: &str) -> Option<PackageNdc> {
        let mut parts = text.trim().split('-');
        let (l, p, k) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || ![l, p, k].iter().all(|s| all_digits(s)) {
            return None;
        }
        matches!(
            (l.len(), p.len(), k.len()),
            (4, 4, 2) | (5, 3, 2) | (5, 4, 1)
        )
        .then(|| PackageNdc {
            labeler: l.to_string(),
            product: p.to_string(),
            package: k.to_string(),
        })
    }

    /// The package NDC made of a product NDC (`labeler-product`, as the
    /// directory's `PRODUCTNDC`) and the package segment.
    pub fn of_product(product_ndc: &str, package: &str) -> Option<PackageNdc> {
        PackageNdc::parse(&format!("{product_ndc}-{package}"))
    }

    /// The ten digits, without hyphens.
    pub fn digits10(&self) -> String {
        format!("{}{}{}", self.labeler, self.product, self.package)
    }

    /// The 11-digit (5-4-2) form, without hyphens.
    pub fn ndc11(&self) -> String {
        format!(
            "{:0>5}{:0>4}{:0>2}",
            self.labeler, self.product, self.package
        )
    }

    /// The product NDC (`labeler-product`).
    pub fn product_ndc(&self) -> String {
        format!("{}-{}", self.labeler, self.product)
    }

    /// The GTIN-14 of this package with `indicator` (0 for the unit the
    /// NDC names; 1-8 for cases of it).
    pub fn gtin14(&self, indicator: u8) -> String {
        let payload = format!("{}03{}", indicator.min(8), self.digits10());
        let check = gtin::check_digit(payload.as_bytes()).expect("digits only");
        format!("{payload}{check}")
    }
}

impl fmt::Display for PackageNdc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.labeler, self.product, self.package)
    }
}

/// What a typed or scanned identifier names a package by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// A hyphenated package NDC: exactly this package.
    Hyphenated(PackageNdc),
    /// Ten digits without hyphens (typed, or read from a GTIN or UPC-A):
    /// every package whose NDC has these digits, in any configuration.
    Ndc10(String),
    /// The 11-digit form (typed plain or hyphenated 5-4-2).
    Ndc11(String),
}

/// Why a text names no package.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// A GTIN or UPC-A whose last digit is not its check digit.
    #[error("{0} is not a valid GTIN: its check digit is wrong (a typing error?)")]
    CheckDigit(String),
    /// A valid GTIN that carries no US NDC (not indicator 0-8 + `03`).
    #[error(
        "the GTIN {0} carries no US NDC (a drug GTIN is an indicator digit, then 03, then the NDC's ten digits)"
    )]
    NotDrug(String),
    /// Neither an NDC nor a GTIN.
    #[error(
        "{0:?} is neither an NDC (0067-6382-30, 0067638230, 00067638230 or 00067-6382-30) nor a GTIN (14 digits, or a 12-digit UPC-A)"
    )]
    Unknown(String),
}

/// Read `text` as a package NDC (hyphenated 10 or 11 digits, plain 10 or
/// 11 digits) or a GTIN (GTIN-14, EAN-13, UPC-A) of a US drug.
pub fn key(text: &str) -> Result<Key, KeyError> {
    let t = text.trim();
    if let Some(ndc) = PackageNdc::parse(t) {
        return Ok(Key::Hyphenated(ndc));
    }
    let parts: Vec<&str> = t.split('-').collect();
    if parts.len() == 3
        && parts.iter().all(|p| all_digits(p))
        && parts.iter().map(|p| p.len()).eq([5, 4, 2])
    {
        return Ok(Key::Ndc11(parts.concat()));
    }
    if !all_digits(t) {
        return Err(KeyError::Unknown(t.to_string()));
    }
    match t.len() {
        10 => Ok(Key::Ndc10(t.to_string())),
        11 => Ok(Key::Ndc11(t.to_string())),
        12..=14 => {
            if !gtin::has_valid_check_digit(t.as_bytes()) {
                return Err(KeyError::CheckDigit(t.to_string()));
            }
            let g14 = gtin::normalise_gtin14(t.as_bytes()).expect("12 to 14 digits");
            gtin::ndc10_from_gtin14(&g14)
                .map(|d| Key::Ndc10(d.to_string()))
                .ok_or(KeyError::NotDrug(t.to_string()))
        }
        _ => Err(KeyError::Unknown(t.to_string())),
    }
}

/// The drug NDCs a free text names (openFDA's `product_description`):
/// hyphenated package NDCs (10 digits in a configuration, or 5-4-2), ten
/// or eleven plain digits right after the word `NDC`, and 12- or 14-digit
/// GTINs (UPC-A) with a valid check digit that carry an NDC.
pub fn keys_in_text(text: &str) -> Vec<Key> {
    let mut found = Vec::new();
    let mut after_ndc = false;
    for token in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
        let token = token.trim_matches('-');
        if token.is_empty() {
            continue;
        }
        let digits_only = all_digits(token);
        let k = if token.contains('-') {
            key(token).ok()
        } else if digits_only && matches!(token.len(), 10 | 11) {
            after_ndc.then(|| key(token).ok()).flatten()
        } else if digits_only && matches!(token.len(), 12 | 14) {
            key(token).ok()
        } else {
            None
        };
        if let Some(k) = k
            && !found.contains(&k)
        {
            found.push(k);
        }
        after_ndc = token.eq_ignore_ascii_case("ndc") || token.eq_ignore_ascii_case("ndcs");
    }
    found
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_and_forms() {
        let a = PackageNdc::parse("0067-6382-30").unwrap();
        assert_eq!(a.digits10(), "0067638230");
        assert_eq!(a.ndc11(), "00067638230");
        assert_eq!(a.gtin14(0), "00300676382302");
        let b = PackageNdc::parse("12345-678-90").unwrap();
        assert_eq!(b.ndc11(), "12345067890");
        let c = PackageNdc::parse("12345-6789-1").unwrap();
        assert_eq!(c.ndc11(), "12345678901");
        for bad in [
            "1234-567-89",
            "12345-6789-12",
            "0067-6382",
            "a067-6382-30",
            "",
        ] {
            assert_eq!(PackageNdc::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn keys_read_ndcs_and_gtins() {
        assert!(matches!(key("0067-6382-30"), Ok(Key::Hyphenated(_))));
        assert_eq!(key("0067638230"), Ok(Key::Ndc10("0067638230".into())));
        assert_eq!(key("00067638230"), Ok(Key::Ndc11("00067638230".into())));
        assert_eq!(key("00067-6382-30"), Ok(Key::Ndc11("00067638230".into())));
        assert_eq!(key("00300676382302"), Ok(Key::Ndc10("0067638230".into())));
        assert_eq!(key("300676382302"), Ok(Key::Ndc10("0067638230".into())));
        assert!(matches!(
            key("00300676382303"),
            Err(KeyError::CheckDigit(_))
        ));
        assert!(matches!(key("05901234123457"), Err(KeyError::NotDrug(_))));
        assert!(matches!(key("hello"), Err(KeyError::Unknown(_))));
    }

    #[test]
    fn ndcs_in_a_description() {
        let text = "Oxycodone HCl Tablets, 5 mg, 100-count bottle, Rx only, NDC 0406-0552-01; \
                    UPC 304060552012, NDC 12345678901, lot 1234567890";
        let keys = keys_in_text(text);
        assert!(keys.contains(&Key::Hyphenated(PackageNdc::parse("0406-0552-01").unwrap())));
        assert!(keys.contains(&Key::Ndc10("0406055201".into())));
        assert!(keys.contains(&Key::Ndc11("12345678901".into())));
        // Ten digits not after "NDC" are not read as one.
        assert!(!keys.contains(&Key::Ndc10("1234567890".into())));
        assert_eq!(keys.len(), 3);
    }
}
