//! `products import` and `recalls import`: read the file as the FDA or
//! openFDA publishes it and build the data file whole
//! ([`super::store::Building`]); on any error nothing is renamed and the
//! data before stays.
//!
//! The directory is taken as `ndctext.zip` (its `product.txt` and
//! `package.txt`, found by name in any folder of the zip), as a directory
//! holding the two files, or as either file with the other beside it. The
//! recall file is taken as the JSON or a zip holding it.

use super::directory::{self, PackageRow, ProductRow};
use super::recalls::{self, Recall};
use super::store::{
    Building, PRODUCTS_FILE, PRODUCTS_INDEXES, PRODUCTS_SCHEMA, RECALLS_FILE, RECALLS_INDEXES,
    RECALLS_SCHEMA,
};
use super::{ProductsError, ndc::Key};
use chrono::NaiveDate;
use rusqlite::params;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// What an import put in place.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The data file now in place.
    pub path: PathBuf,
    /// The data's own date.
    pub published: NaiveDate,
    /// What it holds, e.g. `[("products", 110000), ("packages", 130000)]`.
    pub rows: Vec<(String, u64)>,
    /// What was left out, and why (recalls: not ongoing, no package).
    pub left_out: Vec<(String, u64)>,
}

const READ_BUFFER: usize = 256 * 1024;

fn input_error(file: &Path, problem: impl Into<String>) -> ProductsError {
    ProductsError::Input {
        file: file.display().to_string(),
        problem: problem.into(),
    }
}

/// Open `path` (a file a technician names: links followed) as a regular file.
fn open_input(path: &Path) -> Result<File, ProductsError> {
    let read = |source| ProductsError::Read {
        file: path.display().to_string(),
        line: None,
        source,
    };
    let file = File::open(path).map_err(read)?;
    if !file.metadata().map_err(read)?.is_file() {
        return Err(input_error(path, "not a regular file"));
    }
    Ok(file)
}

/// Whether `file` starts as a zip does (rewound after).
fn is_zip(file: &mut File) -> std::io::Result<bool> {
    use std::io::Seek;
    let mut magic = [0u8; 4];
    let n = file.read(&mut magic)?;
    file.rewind()?;
    Ok(n == 4 && magic[..2] == *b"PK")
}

fn modified_date(file: &File) -> Option<NaiveDate> {
    let t = file.metadata().ok()?.modified().ok()?;
    Some(chrono::DateTime::<chrono::Utc>::from(t).date_naive())
}

fn zip_archive(path: &Path, file: File) -> Result<zip::ZipArchive<File>, ProductsError> {
    zip::ZipArchive::new(file).map_err(|e| {
        input_error(
            path,
            format!("not a whole zip file ({e}): the download was cut or damaged. Fix: download it again"),
        )
    })
}

/// The index of the entry named `name` (any folder, any case) in `zip`.
fn zip_entry(zip: &zip::ZipArchive<File>, path: &Path, name: &str) -> Result<usize, ProductsError> {
    (0..zip.len())
        .find(|&i| {
            zip.name_for_index(i).and_then(Result::ok).is_some_and(|n| {
                n.rsplit('/')
                    .next()
                    .is_some_and(|b| b.eq_ignore_ascii_case(name))
            })
        })
        .ok_or_else(|| {
            input_error(
                path,
                format!("the zip holds no {name}: is it the NDC Directory's ndctext.zip?"),
            )
        })
}

/// Import the NDC Directory at `input` into `state_dir`'s
/// [`PRODUCTS_FILE`].
pub fn import_products(state_dir: &Path, input: &Path) -> Result<Imported, ProductsError> {
    let b = Building::begin(state_dir, PRODUCTS_FILE, PRODUCTS_SCHEMA)?;
    let (products, packages, published);
    if input.is_dir() {
        (products, packages, published) = from_files(&b, &input.join("product.txt"))?;
    } else {
        let mut file = open_input(input)?;
        let zipped = is_zip(&mut file).map_err(|source| ProductsError::Read {
            file: input.display().to_string(),
            line: None,
            source,
        })?;
        if zipped {
            (products, packages, published) = from_zip(&b, input, file)?;
        } else {
            (products, packages, published) = from_files(&b, input)?;
        }
    }
    let source = input.display().to_string();
    let meta = [
        ("kind", "products".to_string()),
        ("source", source),
        ("published", published.to_string()),
        (
            "imported_ms",
            chrono::Utc::now().timestamp_millis().to_string(),
        ),
        ("products", products.to_string()),
        ("packages", packages.to_string()),
    ];
    let path = b.install(&meta, PRODUCTS_INDEXES)?;
    Ok(Imported {
        path,
        published,
        rows: vec![("products".into(), products), ("packages".into(), packages)],
        left_out: Vec::new(),
    })
}

/// The two files, `one` and its sibling.
fn from_files(b: &Building, one: &Path) -> Result<(u64, u64, NaiveDate), ProductsError> {
    let name = one
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase());
    if !matches!(name.as_deref(), Some("product.txt" | "package.txt")) {
        return Err(input_error(
            one,
            "neither a zip nor product.txt or package.txt. Fix: name ndctext.zip as the FDA publishes it, or its product.txt with package.txt beside it",
        ));
    }
    let dir = one.parent().unwrap_or(Path::new("."));
    let (product_path, package_path) = (dir.join("product.txt"), dir.join("package.txt"));
    let product = open_input(&product_path)?;
    let published = modified_date(&product).unwrap_or_else(|| chrono::Utc::now().date_naive());
    let products = load_products(
        b,
        BufReader::with_capacity(READ_BUFFER, product),
        &product_path.display().to_string(),
    )?;
    let package = open_input(&package_path)?;
    let packages = load_packages(
        b,
        BufReader::with_capacity(READ_BUFFER, package),
        &package_path.display().to_string(),
    )?;
    Ok((products, packages, published))
}

/// `ndctext.zip`.
fn from_zip(b: &Building, path: &Path, file: File) -> Result<(u64, u64, NaiveDate), ProductsError> {
    let zip_date = modified_date(&file);
    let mut zip = zip_archive(path, file)?;
    let (product_at, package_at) = (
        zip_entry(&zip, path, "product.txt")?,
        zip_entry(&zip, path, "package.txt")?,
    );
    let zip_err = |e: zip::result::ZipError| input_error(path, format!("cannot read it: {e}"));
    let entry = zip.by_index(product_at).map_err(zip_err)?;
    // A zip entry's date is local time, to the day here; 1980-01-01 (the
    // format's first day) is a zip written without dates: the zip's own.
    let published = entry
        .last_modified()
        .filter(|t| t.year() > 1980)
        .and_then(|t| NaiveDate::from_ymd_opt(t.year().into(), t.month().into(), t.day().into()))
        .or(zip_date)
        .unwrap_or_else(|| chrono::Utc::now().date_naive());
    let name = format!("{}:{}", path.display(), entry.name().unwrap_or_default());
    let products = load_products(b, BufReader::with_capacity(READ_BUFFER, entry), &name)?;
    let entry = zip.by_index(package_at).map_err(zip_err)?;
    let name = format!("{}:{}", path.display(), entry.name().unwrap_or_default());
    let packages = load_packages(b, BufReader::with_capacity(READ_BUFFER, entry), &name)?;
    Ok((products, packages, published))
}

fn date(d: Option<NaiveDate>) -> Option<String> {
    d.map(|d| d.to_string())
}

fn load_products(
    b: &Building,
    reader: impl std::io::BufRead,
    file: &str,
) -> Result<u64, ProductsError> {
    let mut stmt = b
        .conn()
        .prepare("INSERT INTO product VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
        .map_err(|e| b.sqlite(e))?;
    directory::read_products(reader, file.to_string(), |line, r: ProductRow| {
        stmt.execute(params![
            r.product_id,
            r.product_ndc,
            r.name,
            date(r.end_date),
            r.dea_schedule,
            r.exclude_flag
        ])
        .map(drop)
        .map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::ConstraintViolation) => ProductsError::Malformed {
                file: file.to_string(),
                line,
                problem: format!("PRODUCTID {} is on an earlier line too", r.product_id),
            },
            _ => b.sqlite(e),
        })
    })
}

fn load_packages(
    b: &Building,
    reader: impl std::io::BufRead,
    file: &str,
) -> Result<u64, ProductsError> {
    let mut stmt = b
        .conn()
        .prepare("INSERT INTO package VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")
        .map_err(|e| b.sqlite(e))?;
    directory::read_packages(reader, file.to_string(), |_, r: PackageRow| {
        stmt.execute(params![
            r.ndc.to_string(),
            r.ndc.digits10(),
            r.ndc.ndc11(),
            r.product_id,
            r.description,
            date(r.end_date),
            r.exclude_flag,
            r.sample
        ])
        .map(drop)
        .map_err(|e| b.sqlite(e))
    })
}

/// Import openFDA's drug enforcement download at `input` into
/// `state_dir`'s [`RECALLS_FILE`]: the ongoing recalls only.
pub fn import_recalls(state_dir: &Path, input: &Path) -> Result<Imported, ProductsError> {
    let b = Building::begin(state_dir, RECALLS_FILE, RECALLS_SCHEMA)?;
    let mut file = open_input(input)?;
    let modified = modified_date(&file);
    let zipped = is_zip(&mut file).map_err(|source| ProductsError::Read {
        file: input.display().to_string(),
        line: None,
        source,
    })?;
    let mut kept = 0u64;
    let mut sink = |r: Recall| {
        store_recall(&b, &r)?;
        kept += 1;
        Ok(())
    };
    let meta = if zipped {
        let mut zip = zip_archive(input, file)?;
        let at = (0..zip.len())
            .find(|&i| {
                zip.name_for_index(i)
                    .and_then(Result::ok)
                    .is_some_and(|n| n.to_ascii_lowercase().ends_with(".json"))
            })
            .ok_or_else(|| {
                input_error(
                    input,
                    "the zip holds no .json file: is it drug-enforcement-0001-of-0001.json.zip?",
                )
            })?;
        let entry = zip
            .by_index(at)
            .map_err(|e| input_error(input, format!("cannot read it: {e}")))?;
        let name = format!("{}:{}", input.display(), entry.name().unwrap_or_default());
        recalls::read(
            BufReader::with_capacity(READ_BUFFER, entry),
            &name,
            &mut sink,
        )?
    } else {
        let name = input.display().to_string();
        recalls::read(
            BufReader::with_capacity(READ_BUFFER, file),
            &name,
            &mut sink,
        )?
    };
    let published = meta
        .last_updated
        .as_deref()
        .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
        .or(modified)
        .unwrap_or_else(|| chrono::Utc::now().date_naive());
    let info = [
        ("kind", "recalls".to_string()),
        ("source", input.display().to_string()),
        ("published", published.to_string()),
        (
            "imported_ms",
            chrono::Utc::now().timestamp_millis().to_string(),
        ),
        ("recalls", kept.to_string()),
        ("records", meta.records.to_string()),
    ];
    let path = b.install(&info, RECALLS_INDEXES)?;
    Ok(Imported {
        path,
        published,
        rows: vec![("recalls".into(), kept)],
        left_out: vec![
            ("not ongoing".into(), meta.not_ongoing),
            ("naming no NDC or GTIN".into(), meta.no_package),
        ],
    })
}

fn store_recall(b: &Building, r: &Recall) -> Result<(), ProductsError> {
    let conn = b.conn();
    let sqlite = |e| b.sqlite(e);
    let added = conn
        .prepare_cached("INSERT OR IGNORE INTO recall VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut s| {
            s.execute(params![
                r.recall_number,
                r.classification,
                r.initiated,
                !r.lots.is_empty()
            ])
        })
        .map_err(sqlite)?;
    if added == 0 {
        // The same recall number again: its first record stands.
        return Ok(());
    }
    let mut key = conn
        .prepare_cached("INSERT INTO recall_key VALUES (?1, ?2, ?3)")
        .map_err(sqlite)?;
    for k in &r.keys {
        let (kind, value) = match k {
            Key::Hyphenated(n) => ("ndc11", n.ndc11()),
            Key::Ndc11(d) => ("ndc11", d.clone()),
            Key::Ndc10(d) => ("ndc10", d.clone()),
        };
        key.execute(params![kind, value, r.recall_number])
            .map_err(sqlite)?;
    }
    let mut lot = conn
        .prepare_cached("INSERT INTO recall_lot VALUES (?1, ?2)")
        .map_err(sqlite)?;
    for l in &r.lots {
        lot.execute(params![r.recall_number, l]).map_err(sqlite)?;
    }
    Ok(())
}
