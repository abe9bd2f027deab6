//! The FDA NDC Directory as the FDA publishes it: `ndctext.zip`, or its two
//! tab-separated files `product.txt` and `package.txt`.
//!
//! Each file's first line names its columns; they are found by name (more
//! columns, or another order, are fine; a missing one is refused, naming
//! the file and the column). The text is Windows-1252, not UTF-8 (a
//! labeler's `é` is the byte 0xE9), and is decoded as such; lines end in
//! CRLF. Dates are `YYYYMMDD`. A row that cannot be read (too few fields,
//! an NDC in no configuration, a date that is none, a DEA schedule that is
//! none of CI-CV) is refused naming the file and the line: the import
//! stops and the data imported before stays.

use super::ProductsError;
use super::ndc::PackageNdc;
use chrono::NaiveDate;
use std::io::BufRead;

/// The product file's columns read, by the names the FDA gives them.
pub const PRODUCT_COLUMNS: [&str; 6] = [
    "PRODUCTID",
    "PRODUCTNDC",
    "PROPRIETARYNAME",
    "ENDMARKETINGDATE",
    "DEASCHEDULE",
    "NDC_EXCLUDE_FLAG",
];

/// The package file's columns read.
pub const PACKAGE_COLUMNS: [&str; 6] = [
    "PRODUCTID",
    "NDCPACKAGECODE",
    "PACKAGEDESCRIPTION",
    "ENDMARKETINGDATE",
    "NDC_EXCLUDE_FLAG",
    "SAMPLE_PACKAGE",
];

/// A row of `product.txt`, the columns kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProductRow {
    /// `PRODUCTID`: links the packages to it.
    pub product_id: String,
    /// `PRODUCTNDC`: labeler-product.
    pub product_ndc: String,
    /// `PROPRIETARYNAME`: the product's name (identity only).
    pub name: String,
    /// `ENDMARKETINGDATE`.
    pub end_date: Option<NaiveDate>,
    /// `DEASCHEDULE`: `CI` … `CV`, or none.
    pub dea_schedule: Option<String>,
    /// `NDC_EXCLUDE_FLAG` (`N`: in the directory; `E`, `D`, `I`, `U`:
    /// excluded, delisted, inactive, unfinished), as written.
    pub exclude_flag: String,
}

/// A row of `package.txt`, the columns kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageRow {
    /// `PRODUCTID`.
    pub product_id: String,
    /// `NDCPACKAGECODE`: the package NDC, hyphenated.
    pub ndc: PackageNdc,
    /// `PACKAGEDESCRIPTION`.
    pub description: String,
    /// `ENDMARKETINGDATE`.
    pub end_date: Option<NaiveDate>,
    /// `NDC_EXCLUDE_FLAG`, as written.
    pub exclude_flag: String,
    /// `SAMPLE_PACKAGE` is `Y`.
    pub sample: bool,
}

/// The DEA schedules the directory writes.
pub const SCHEDULES: [&str; 5] = ["CI", "CII", "CIII", "CIV", "CV"];

/// One tab-separated file of the directory, read a line at a time.
struct Table<R> {
    reader: R,
    /// The file as the errors name it (`ndctext.zip:product.txt`).
    file: String,
    line: u64,
    buf: Vec<u8>,
    text: String,
}

impl<R: BufRead> Table<R> {
    /// Read the header line and find `wanted` in it: their indexes.
    fn open(reader: R, file: String, wanted: &[&str]) -> Result<(Self, Vec<usize>), ProductsError> {
        let mut t = Table {
            reader,
            file,
            line: 0,
            buf: Vec::new(),
            text: String::new(),
        };
        if !t.next_line()? {
            return Err(t.malformed("the file is empty: the first line must name the columns"));
        }
        let names: Vec<String> = t.text.split('\t').map(|n| n.trim().to_string()).collect();
        let mut at = Vec::new();
        for want in wanted {
            match names.iter().position(|n| n.eq_ignore_ascii_case(want)) {
                Some(i) => at.push(i),
                None => {
                    return Err(ProductsError::MissingColumn {
                        file: t.file.clone(),
                        column: (*want).to_string(),
                    });
                }
            }
        }
        Ok((t, at))
    }

    /// The next line, decoded, in `self.text`; false at the end.
    fn next_line(&mut self) -> Result<bool, ProductsError> {
        loop {
            self.buf.clear();
            let n =
                self.reader
                    .read_until(b'\n', &mut self.buf)
                    .map_err(|e| ProductsError::Read {
                        file: self.file.clone(),
                        line: Some(self.line + 1),
                        source: e,
                    })?;
            if n == 0 {
                return Ok(false);
            }
            self.line += 1;
            while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
                self.buf.pop();
            }
            if self.buf.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            self.text.clear();
            self.text.extend(self.buf.iter().map(|&b| cp1252(b)));
            return Ok(true);
        }
    }

    /// The fields at `at` of the current line.
    fn fields(&self, at: &[usize]) -> Result<Vec<&str>, ProductsError> {
        let all: Vec<&str> = self.text.split('\t').collect();
        at.iter()
            .map(|&i| all.get(i).map(|f| f.trim()))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                self.malformed(&format!(
                    "{} field(s), where the header names at least {}",
                    all.len(),
                    at.iter().max().map_or(0, |m| m + 1)
                ))
            })
    }

    fn malformed(&self, problem: &str) -> ProductsError {
        ProductsError::Malformed {
            file: self.file.clone(),
            line: self.line,
            problem: problem.to_string(),
        }
    }
}

/// Read `product.txt` from `reader` (named `file` in errors), each row
/// handed to `row` with its line number; returns the rows read.
pub fn read_products(
    reader: impl BufRead,
    file: String,
    mut row: impl FnMut(u64, ProductRow) -> Result<(), ProductsError>,
) -> Result<u64, ProductsError> {
    let (mut t, at) = Table::open(reader, file, &PRODUCT_COLUMNS)?;
    let mut rows = 0;
    while t.next_line()? {
        let f = t.fields(&at)?;
        let product = ProductRow {
            product_id: required(&t, f[0], "PRODUCTID")?,
            product_ndc: required(&t, f[1], "PRODUCTNDC")?,
            name: f[2].to_string(),
            end_date: date(&t, f[3], "ENDMARKETINGDATE")?,
            dea_schedule: schedule(&t, f[4])?,
            exclude_flag: f[5].to_string(),
        };
        row(t.line, product)?;
        rows += 1;
    }
    Ok(rows)
}

/// Read `package.txt` from `reader` (named `file` in errors), each row
/// handed to `row` with its line number; returns the rows read.
pub fn read_packages(
    reader: impl BufRead,
    file: String,
    mut row: impl FnMut(u64, PackageRow) -> Result<(), ProductsError>,
) -> Result<u64, ProductsError> {
    let (mut t, at) = Table::open(reader, file, &PACKAGE_COLUMNS)?;
    let mut rows = 0;
    while t.next_line()? {
        let f = t.fields(&at)?;
        let ndc = PackageNdc::parse(f[1]).ok_or_else(|| {
            t.malformed(&format!(
                "NDCPACKAGECODE {:?} is no package NDC (4-4-2, 5-3-2 or 5-4-1 digits, hyphenated)",
                f[1]
            ))
        })?;
        let package = PackageRow {
            product_id: required(&t, f[0], "PRODUCTID")?,
            ndc,
            description: f[2].to_string(),
            end_date: date(&t, f[3], "ENDMARKETINGDATE")?,
            exclude_flag: f[4].to_string(),
            sample: f[5].eq_ignore_ascii_case("Y"),
        };
        row(t.line, package)?;
        rows += 1;
    }
    Ok(rows)
}

fn required<R: BufRead>(t: &Table<R>, v: &str, column: &str) -> Result<String, ProductsError> {
    if v.is_empty() {
        return Err(t.malformed(&format!("{column} is empty")));
    }
    Ok(v.to_string())
}

fn date<R: BufRead>(
    t: &Table<R>,
    v: &str,
    column: &str,
) -> Result<Option<NaiveDate>, ProductsError> {
    if v.is_empty() {
        return Ok(None);
    }
    NaiveDate::parse_from_str(v, "%Y%m%d")
        .map(Some)
        .map_err(|_| t.malformed(&format!("{column} {v:?} is not a date (YYYYMMDD)")))
}

fn schedule<R: BufRead>(t: &Table<R>, v: &str) -> Result<Option<String>, ProductsError> {
    if v.is_empty() {
        return Ok(None);
    }
    let upper = v.to_ascii_uppercase();
    if SCHEDULES.contains(&upper.as_str()) {
        Ok(Some(upper))
    } else {
        Err(t.malformed(&format!(
            "DEASCHEDULE {v:?} is none of CI, CII, CIII, CIV, CV (or empty)"
        )))
    }
}

/// The character a Windows-1252 byte stands for (WHATWG's table: the five
/// bytes it leaves undefined stand for the C1 control of their value).
pub fn cp1252(b: u8) -> char {
    const HIGH: [char; 32] = [
        '\u{20AC}', '\u{81}', '\u{201A}', '\u{192}', '\u{201E}', '\u{2026}', '\u{2020}',
        '\u{2021}', '\u{2C6}', '\u{2030}', '\u{160}', '\u{2039}', '\u{152}', '\u{8D}', '\u{17D}',
        '\u{8F}', '\u{90}', '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}',
        '\u{2014}', '\u{2DC}', '\u{2122}', '\u{161}', '\u{203A}', '\u{153}', '\u{9D}', '\u{17E}',
        '\u{178}',
    ];
    match b {
        0x80..=0x9F => HIGH[(b - 0x80) as usize],
        _ => b as char,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_1252_is_decoded() {
        assert_eq!(cp1252(0xE9), 'é');
        assert_eq!(cp1252(0x99), '™');
        assert_eq!(cp1252(0x80), '€');
        assert_eq!(cp1252(b'A'), 'A');
    }

    #[test]
    fn columns_by_name_and_rows() {
        let text = b"PRODUCTNDC\tEXTRA\tPRODUCTID\tPROPRIETARYNAME\tDEASCHEDULE\tENDMARKETINGDATE\tNDC_EXCLUDE_FLAG\r\n\
                     0067-6382\tx\t0067-6382_abc\tCaf\xe9 Tabs\tCII\t20301231\tN\r\n";
        let mut rows = Vec::new();
        let n = read_products(&text[..], "product.txt".into(), |_, r| {
            rows.push(r);
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 1);
        assert_eq!(rows[0].name, "Café Tabs");
        assert_eq!(rows[0].dea_schedule.as_deref(), Some("CII"));
        assert_eq!(rows[0].end_date, NaiveDate::from_ymd_opt(2030, 12, 31));
        let bad = b"PRODUCTID\tPRODUCTNDC\tPROPRIETARYNAME\tDEASCHEDULE\tNDC_EXCLUDE_FLAG\r\n";
        let e = read_products(&bad[..], "product.txt".into(), |_, _| Ok(())).unwrap_err();
        assert!(
            e.to_string().contains("product.txt") && e.to_string().contains("ENDMARKETINGDATE"),
            "{e}"
        );
    }
}
