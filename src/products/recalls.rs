//! openFDA's drug enforcement download (`drug-enforcement-0001-of-0001.json`,
//! or zipped): which recalls are ongoing, which packages each names, and
//! which lots.
//!
//! The file is one JSON object, `{"meta": {...}, "results": [...]}`; it is
//! read as a stream, one record at a time, so its size does not set the
//! memory used. A file of another openFDA endpoint is refused: its records
//! have no `recall_number`, or their `product_type` is not `Drugs` (the
//! device and food enforcement downloads have the same shape).
//!
//! - **Ongoing**: `status` `Ongoing` (as the data writes it) or `On-Going`
//!   (as openFDA's documentation does); `Terminated`, `Completed` and
//!   `Pending` are kept out; any other status is refused (a new word must
//!   not silently drop every recall).
//! - **Packages**: every NDC of `openfda.package_ndc`, and the NDCs and
//!   drug GTINs written in `product_description`
//!   ([`super::ndc::keys_in_text`]).
//! - **Lots** ([`lots_named`]): in `code_info`, after the word `lot`,
//!   `lots`, `batch` or `batches` (any case; `#`, `:`, `no`, `number(s)`,
//!   `code(s)`, `and`, `or` between are skipped), each following word that
//!   holds a digit is a lot, up to the first word without a digit or the
//!   first that holds a `/` (a date: `Exp 12/2025`). Words are split at
//!   white space, `,`, `;`, `:`, `(`, `)`, `#` and `&`; a lot is compared
//!   ([`same_lot`]) with `-` and `.` left out and letters in one case, and
//!   must be equal whole: `A123` is not `A1234`, nor `XA123`. A recall
//!   whose `code_info` names no lot so applies to every lot.

use super::ProductsError;
use super::ndc::{self, Key, PackageNdc};
use serde::Deserialize;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// An ongoing recall, as kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recall {
    /// `recall_number`, e.g. `D-0123-2024`.
    pub recall_number: String,
    /// `classification`: `Class I`, `Class II` or `Class III`.
    pub classification: String,
    /// `recall_initiation_date` (`YYYYMMDD`), as written.
    pub initiated: String,
    /// The packages it names.
    pub keys: Vec<Key>,
    /// The lots `code_info` names (none: every lot).
    pub lots: Vec<String>,
}

/// What a recall file held besides its recalls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    /// `meta.last_updated` (`YYYY-MM-DD`), the data's own date.
    pub last_updated: Option<String>,
    /// Records read.
    pub records: u64,
    /// Of them, not ongoing (left out).
    pub not_ongoing: u64,
    /// Of the ongoing, those that name no package this reads (kept out:
    /// nothing could match them).
    pub no_package: u64,
}

/// Read a drug enforcement download from `reader` (named `file` in
/// errors): each ongoing recall handed to `recall`.
pub fn read(
    reader: impl std::io::Read,
    file: &str,
    recall: &mut dyn FnMut(Recall) -> Result<(), ProductsError>,
) -> Result<Meta, ProductsError> {
    let mut de = serde_json::Deserializer::from_reader(reader);
    let mut meta = Meta::default();
    let mut seed = Download {
        file,
        meta: &mut meta,
        recall,
        failed: None,
        saw_meta: false,
        saw_results: false,
    };
    let parsed = (&mut seed).deserialize(&mut de).and_then(|()| de.end());
    if let Some(e) = seed.failed.take() {
        return Err(e);
    }
    if let Err(e) = parsed {
        return Err(ProductsError::Json {
            file: file.to_string(),
            line: e.line(),
            column: e.column(),
            problem: e.to_string(),
        });
    }
    let (saw_meta, saw_results) = (seed.saw_meta, seed.saw_results);
    if !saw_meta || !saw_results {
        return Err(ProductsError::NotRecalls {
            file: file.to_string(),
            why: format!(
                "it has no {} (openFDA's downloads are one object with \"meta\" and \"results\")",
                if saw_meta { "\"results\"" } else { "\"meta\"" }
            ),
        });
    }
    Ok(meta)
}

/// The whole file, as a serde seed that hands each record on.
struct Download<'a> {
    file: &'a str,
    meta: &'a mut Meta,
    recall: &'a mut dyn FnMut(Recall) -> Result<(), ProductsError>,
    /// Why a record was refused (serde's own error cannot carry it).
    failed: Option<ProductsError>,
    saw_meta: bool,
    saw_results: bool,
}

impl<'de> DeserializeSeed<'de> for &mut Download<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for &mut Download<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("openFDA's download: an object with \"meta\" and \"results\"")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        #[derive(Deserialize)]
        struct MetaJson {
            last_updated: Option<String>,
        }
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "meta" => {
                    self.saw_meta = true;
                    self.meta.last_updated = map.next_value::<MetaJson>()?.last_updated;
                }
                "results" => {
                    self.saw_results = true;
                    map.next_value_seed(Results(&mut *self))?;
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// The `results` array.
struct Results<'b, 'a>(&'b mut Download<'a>);

impl<'de> DeserializeSeed<'de> for Results<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Results<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of recall records")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let dl = self.0;
        while let Some(record) = seq.next_element::<Value>()? {
            dl.meta.records += 1;
            let n = dl.meta.records;
            let outcome = match judge(&record, dl.file, n) {
                Ok(Judged::Ongoing(r)) if r.keys.is_empty() => {
                    dl.meta.no_package += 1;
                    Ok(())
                }
                Ok(Judged::Ongoing(r)) => (dl.recall)(r),
                Ok(Judged::NotOngoing) => {
                    dl.meta.not_ongoing += 1;
                    Ok(())
                }
                Err(e) => Err(e),
            };
            if let Err(e) = outcome {
                dl.failed = Some(e);
                return Err(serde::de::Error::custom("record refused"));
            }
        }
        Ok(())
    }
}

enum Judged {
    Ongoing(Recall),
    NotOngoing,
}

/// One record of `results` (the `n`th).
fn judge(record: &Value, file: &str, n: u64) -> Result<Judged, ProductsError> {
    let text = |k: &str| record.get(k).and_then(Value::as_str).map(str::trim);
    let number = text("recall_number");
    let refuse = |why: String| ProductsError::BadRecord {
        file: file.to_string(),
        record: n,
        recall_number: number.map(str::to_string),
        why,
    };
    let Some(number) = number.filter(|s| !s.is_empty()) else {
        let keys: Vec<&str> = record
            .as_object()
            .map(|o| o.keys().take(6).map(String::as_str).collect())
            .unwrap_or_default();
        return Err(ProductsError::NotRecalls {
            file: file.to_string(),
            why: format!(
                "record {n} has no \"recall_number\" (its fields: {}): this is another openFDA endpoint's download, not drug/enforcement",
                keys.join(", ")
            ),
        });
    };
    if let Some(kind) = text("product_type")
        && !kind.eq_ignore_ascii_case("drugs")
    {
        return Err(ProductsError::NotRecalls {
            file: file.to_string(),
            why: format!(
                "record {n} ({number}) is a recall of {kind}, not of drugs: this is the {} enforcement download, not drug/enforcement",
                kind.to_lowercase()
            ),
        });
    }
    let status = text("status").ok_or_else(|| refuse("no \"status\"".into()))?;
    match status.to_ascii_lowercase().as_str() {
        "ongoing" | "on-going" => {}
        "terminated" | "completed" | "pending" => return Ok(Judged::NotOngoing),
        other => {
            return Err(refuse(format!(
                "status {other:?} is none of Ongoing, On-Going, Terminated, Completed, Pending"
            )));
        }
    }
    let classification = text("classification")
        .filter(|c| !c.is_empty())
        .ok_or_else(|| refuse("no \"classification\"".into()))?;
    let mut keys = Vec::new();
    if let Some(ndcs) = record
        .get("openfda")
        .and_then(|o| o.get("package_ndc"))
        .and_then(Value::as_array)
    {
        for v in ndcs.iter().filter_map(Value::as_str) {
            match ndc::key(v) {
                Ok(k) if !keys.contains(&k) => keys.push(k),
                Ok(_) => {}
                Err(e) => return Err(refuse(format!("openfda.package_ndc: {e}"))),
            }
        }
    }
    for k in ndc::keys_in_text(text("product_description").unwrap_or("")) {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    Ok(Judged::Ongoing(Recall {
        recall_number: number.to_string(),
        classification: classification.to_string(),
        initiated: text("recall_initiation_date").unwrap_or("").to_string(),
        keys,
        lots: lots_named(text("code_info").unwrap_or("")),
    }))
}

/// The words that start a list of lots.
const LOT_WORDS: [&str; 4] = ["lot", "lots", "batch", "batches"];
/// Words skipped between a lot word and its lots.
const FILLER: [&str; 8] = [
    "no", "nos", "number", "numbers", "code", "codes", "and", "or",
];

/// The lots `code_info` names (the rule: the module's docs), each as
/// [`same_lot`] compares it.
pub fn lots_named(code_info: &str) -> Vec<String> {
    let words: Vec<&str> = code_info
        .split(|c: char| c.is_whitespace() || ",;:()#&".contains(c))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut lots = Vec::new();
    let mut in_list = false;
    for w in words {
        let lower = w.to_ascii_lowercase();
        if LOT_WORDS.contains(&lower.as_str()) {
            in_list = true;
        } else if in_list && FILLER.contains(&lower.as_str()) {
        } else if in_list && w.bytes().any(|b| b.is_ascii_digit()) && !w.contains('/') {
            let lot = lot_form(w);
            if !lot.is_empty() && !lots.contains(&lot) {
                lots.push(lot);
            }
        } else {
            in_list = false;
        }
    }
    lots
}

/// A lot as compared: `-` and `.` left out, letters upper case.
pub fn lot_form(lot: &str) -> String {
    lot.chars()
        .filter(|c| *c != '-' && *c != '.' && !c.is_whitespace())
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// Whether a read's lot is a lot a recall names (both as [`lot_form`]).
pub fn same_lot(read: &str, named: &str) -> bool {
    !named.is_empty() && lot_form(read) == lot_form(named)
}

/// The key a package NDC is matched by in the recall data.
pub fn keys_of(ndc: &PackageNdc) -> [Key; 3] {
    [
        Key::Hyphenated(ndc.clone()),
        Key::Ndc10(ndc.digits10()),
        Key::Ndc11(ndc.ndc11()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lots_after_lot_words() {
        assert_eq!(
            lots_named("Lot #: A123, A124; Exp 12/2025"),
            ["A123", "A124"]
        );
        assert_eq!(
            lots_named("Lot Numbers: 21-0345 and 210346, Exp. 06/30/2024"),
            ["210345", "210346"]
        );
        assert_eq!(lots_named("Batch# xb77 exp 2025"), ["XB77"]);
        assert!(lots_named("All lots within expiry").is_empty());
        assert!(lots_named("UPC 3 0045-0123-45 6, Exp 12/25").is_empty());
    }

    #[test]
    fn lots_alike_do_not_match() {
        assert!(same_lot("a123", "A123"));
        assert!(same_lot("21-0345", "210345"));
        assert!(!same_lot("A1234", "A123"));
        assert!(!same_lot("XA123", "A123"));
        assert!(!same_lot("A12", "A123"));
        assert!(!same_lot("", ""));
    }
}
