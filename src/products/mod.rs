//! Product and recall data on the gateway: the FDA NDC Directory
//! ([`directory`]) and openFDA's drug recalls ([`recalls`]), imported by
//! `scangate products import` and `scangate recalls import`, looked up by
//! NDC or GTIN ([`ndc`]) through a [`Catalog`].
//!
//! Each data set is a SQLite file of its own in the state directory
//! (`products.sqlite`, `recalls.sqlite`; [`store`]), never the scans'
//! database: an import builds a new file whole beside the old one and
//! renames it into place, so a failed or malformed import leaves the data
//! before it as it was, and the daemon's outbox writer never waits for
//! one. Readers open the file read-only and see a new one at their next
//! lookup ([`Catalog`] compares the file's inode), also while the daemon
//! runs. Without a file, the checks that need it are off.

use chrono::NaiveDate;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub mod directory;
pub mod import;
pub mod ndc;
pub mod recalls;
mod store;

pub use import::{Imported, import_products, import_recalls};
pub use store::{PRODUCTS_FILE, RECALLS_FILE};

/// A package of the NDC Directory and its product, what a read is checked
/// against: identity, schedule and marketing state only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Product {
    /// The package NDC, hyphenated as the directory writes it.
    pub package_ndc: String,
    /// Its 11-digit (5-4-2) form.
    pub ndc11: String,
    /// Its GTIN-14 (indicator 0).
    pub gtin14: String,
    /// The product NDC (labeler-product).
    pub product_ndc: String,
    /// The product's proprietary name.
    pub name: String,
    /// The package's description.
    pub package_description: String,
    /// The DEA schedule (`CI` … `CV`), if it is a controlled substance.
    pub dea_schedule: Option<String>,
    /// The end of marketing: the package's, else the product's.
    pub marketing_end: Option<NaiveDate>,
    /// A sample package (`SAMPLE_PACKAGE` `Y`).
    pub sample: bool,
    /// `NDC_EXCLUDE_FLAG` of the package (else the product's), as
    /// written: `N` is in the directory, any other excluded from it.
    pub exclude_flag: String,
}

impl Product {
    /// Excluded from the directory (a flag other than `N`).
    pub fn excluded(&self) -> bool {
        !self.exclude_flag.is_empty() && !self.exclude_flag.eq_ignore_ascii_case("N")
    }
}

/// How a recall's lots meet a read's lot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LotMatch {
    /// The recall names the read's lot.
    Lot,
    /// The recall names no lot: it applies to every lot.
    EveryLot,
    /// The recall names lots and the read carries none: it may apply.
    LotNotRead,
}

impl LotMatch {
    /// The snake_case name, as serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            LotMatch::Lot => "lot",
            LotMatch::EveryLot => "every_lot",
            LotMatch::LotNotRead => "lot_not_read",
        }
    }
}

/// An ongoing recall of the product a read names. A recall warns; it
/// never refuses a read (openFDA asks not to rely on its data alone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecallMatch {
    /// `recall_number`, e.g. `D-0123-2024`.
    pub recall_number: String,
    /// `Class I`, `Class II` or `Class III`.
    pub classification: String,
    /// How the lot matched.
    pub lot: LotMatch,
}

/// What is known of an imported data set, for `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DataInfo {
    /// The file imported (its name as given).
    pub source: String,
    /// The data's own date: the directory's `product.txt` as its zip
    /// entry or file was last modified; the recall file's
    /// `meta.last_updated` (else the file's modification time).
    pub published: NaiveDate,
    /// When it was imported (Unix ms).
    pub imported_ms: i64,
    /// What it holds: products and packages, or ongoing recalls.
    pub rows: Vec<(String, u64)>,
}

impl DataInfo {
    /// Whole days from its date to `today`.
    pub fn age_days(&self, today: NaiveDate) -> i64 {
        (today - self.published).num_days()
    }
}

/// Why product or recall data could not be imported or read. Each names
/// the file (and line or record) and what to do; a failed import keeps
/// the data imported before.
#[derive(Debug, thiserror::Error)]
pub enum ProductsError {
    /// A column the import reads is not in the header.
    #[error(
        "{file}: the header names no column {column}: this is not the FDA NDC Directory's file as published, or a column was renamed. Fix: download ndctext.zip again from the FDA and import it; the data imported before is kept"
    )]
    MissingColumn {
        /// The file.
        file: String,
        /// The column's name.
        column: String,
    },
    /// A line that cannot be read.
    #[error(
        "{file} line {line}: {problem}. Fix: download the file again (it may be cut or changed); the data imported before is kept"
    )]
    Malformed {
        /// The file.
        file: String,
        /// The line (1 is the header).
        line: u64,
        /// What is wrong.
        problem: String,
    },
    /// Reading the input failed.
    #[error("{file}{}: cannot read it: {source}. The data imported before is kept", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Read {
        /// The file.
        file: String,
        /// Where, if known.
        line: Option<u64>,
        /// The OS or decompression error.
        source: std::io::Error,
    },
    /// The input is not what an import takes.
    #[error("{file}: {problem}. The data imported before is kept")]
    Input {
        /// The file.
        file: String,
        /// What is wrong and what to do.
        problem: String,
    },
    /// The recall file is not JSON, or not whole.
    #[error(
        "{file} line {line} column {column}: not valid JSON ({problem}): a cut download, or a file that is not UTF-8 JSON. Fix: download drug-enforcement-0001-of-0001.json.zip again from openFDA; the data imported before is kept"
    )]
    Json {
        /// The file.
        file: String,
        /// The line.
        line: usize,
        /// The column.
        column: usize,
        /// serde_json's words.
        problem: String,
    },
    /// A JSON file that is not the drug enforcement download.
    #[error(
        "{file} is not openFDA's drug enforcement download: {why}. Fix: download drug/enforcement (drug-enforcement-0001-of-0001.json.zip) from open.fda.gov/data/downloads; the data imported before is kept"
    )]
    NotRecalls {
        /// The file.
        file: String,
        /// How it was told.
        why: String,
    },
    /// A recall record that cannot be read.
    #[error("{file} record {record}{}: {why}. Fix: download the file again; the data imported before is kept", recall_number.as_ref().map(|n| format!(" ({n})")).unwrap_or_default())]
    BadRecord {
        /// The file.
        file: String,
        /// The record's place in `results` (1 the first).
        record: u64,
        /// Its `recall_number`, if it has one.
        recall_number: Option<String>,
        /// What is wrong.
        why: String,
    },
    /// Another import of the same data runs.
    #[error(
        "{path} is locked: another import of this data runs. Fix: wait for it to end, then import again if needed"
    )]
    Busy {
        /// The lock file.
        path: PathBuf,
    },
    /// A file of the state directory is not scangate's own kind of file.
    #[error(transparent)]
    File(#[from] crate::files::FileError),
    /// SQLite refused.
    #[error(
        "{path}: {source}. Fix: check the state directory's disk and permissions; a damaged data file is replaced by importing again"
    )]
    Sqlite {
        /// The data file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// A file or directory operation on the state directory.
    #[error("{path}: {source}. Fix: check the state directory's disk and permissions")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A lookup's text names no package.
    #[error(transparent)]
    Key(#[from] ndc::KeyError),
}

/// The files a [`Catalog`] reads, each as its device and inode (`None`:
/// no such data).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataFiles {
    /// The product data's (`products.sqlite`).
    pub products: Option<(u64, u64)>,
    /// The recall data's (`recalls.sqlite`).
    pub recalls: Option<(u64, u64)>,
}

/// The product and recall data of a state directory, for lookups: each
/// file opened read-only at its first use and opened again when an import
/// has put a new one in its place. Safe to share between threads.
pub struct Catalog {
    products: Mutex<store::Slot>,
    recalls: Mutex<store::Slot>,
}

impl Catalog {
    /// The data of `state_dir` (nothing is opened yet); each lookup sees
    /// the files in place at that moment.
    pub fn new(state_dir: &Path) -> Catalog {
        Catalog::looking_again(state_dir, std::time::Duration::ZERO)
    }

    /// The data of `state_dir`, whose files are looked for again at most
    /// once every `every` (a lookup between uses what was there: for a
    /// lookup at every read).
    pub fn looking_again(state_dir: &Path, every: std::time::Duration) -> Catalog {
        Catalog {
            products: Mutex::new(store::Slot::new(state_dir.join(PRODUCTS_FILE), every)),
            recalls: Mutex::new(store::Slot::new(state_dir.join(RECALLS_FILE), every)),
        }
    }

    /// Every package `text` names (a package NDC in any form, a GTIN or a
    /// UPC-A): one, or several when ten digits fit more than one
    /// configuration. Empty without product data or without a match.
    pub fn lookup(&self, text: &str) -> Result<Vec<Product>, ProductsError> {
        let key = ndc::key(text)?;
        let mut slot = self.products.lock().unwrap_or_else(|p| p.into_inner());
        match slot.current()? {
            None => Ok(Vec::new()),
            Some(conn) => store::products_by(conn, &key).map_err(|e| slot.sqlite(e)),
        }
    }

    /// The package a package NDC names (hyphenated, 10 or 11 digits).
    pub fn lookup_ndc(&self, ndc: &str) -> Result<Option<Product>, ProductsError> {
        Ok(self.lookup(ndc)?.into_iter().next())
    }

    /// The package a GTIN-14 (or UPC-A, EAN-13) of a US drug names.
    pub fn lookup_gtin(&self, gtin: &str) -> Result<Option<Product>, ProductsError> {
        Ok(self.lookup(gtin)?.into_iter().next())
    }

    /// Which files the data is read from now: an answer kept from a lookup
    /// holds while these are the same.
    pub fn files(&self) -> Result<DataFiles, ProductsError> {
        let lock = |m: &'_ Mutex<store::Slot>| -> Result<Option<(u64, u64)>, ProductsError> {
            let mut slot = m.lock().unwrap_or_else(|p| p.into_inner());
            slot.current()?;
            Ok(slot.file())
        };
        Ok(DataFiles {
            products: lock(&self.products)?,
            recalls: lock(&self.recalls)?,
        })
    }

    /// Whether product data is loaded, and what it is.
    pub fn products_info(&self) -> Result<Option<DataInfo>, ProductsError> {
        let mut slot = self.products.lock().unwrap_or_else(|p| p.into_inner());
        match slot.current()? {
            None => Ok(None),
            Some(conn) => store::info(conn).map_err(|e| slot.sqlite(e)),
        }
    }

    /// Whether recall data is loaded, and what it is.
    pub fn recalls_info(&self) -> Result<Option<DataInfo>, ProductsError> {
        let mut slot = self.recalls.lock().unwrap_or_else(|p| p.into_inner());
        match slot.current()? {
            None => Ok(None),
            Some(conn) => store::info(conn).map_err(|e| slot.sqlite(e)),
        }
    }

    /// The ongoing recalls of the package `ndc` names (any form, or a
    /// GTIN), for a read of `lot` (`None`: the read carries no lot). A
    /// recall naming lots of which `lot` is none does not apply.
    pub fn recalls_for(
        &self,
        ndc: &str,
        lot: Option<&str>,
    ) -> Result<Vec<RecallMatch>, ProductsError> {
        let key = ndc::key(ndc)?;
        let mut slot = self.recalls.lock().unwrap_or_else(|p| p.into_inner());
        match slot.current()? {
            None => Ok(Vec::new()),
            Some(conn) => store::recalls_by(conn, &key, lot).map_err(|e| slot.sqlite(e)),
        }
    }
}
