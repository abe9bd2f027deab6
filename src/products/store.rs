//! The data files: each built whole under a temporary name and renamed
//! into place ([`Building`]), and read through an immutable, read-only
//! connection ([`Slot`]) that is opened again when the name points at
//! another file.
//!
//! A file is never changed once in place (the next import is another
//! file), so readers open it with SQLite's `immutable=1`: no lock, no
//! journal, readable by a member of the service's group, and a reader
//! that has it open keeps reading the file it opened across a swap. Files
//! are scangate's own ([`crate::files`]): never through a link, `0640`;
//! one built by root in a state directory of another owner is given that
//! directory's owner and group, so the service reads it.

use super::ndc::Key;
use super::recalls::{lot_form, same_lot};
use super::{DataInfo, LotMatch, Product, ProductsError, RecallMatch};
use chrono::NaiveDate;
use nix::fcntl::{Flock, FlockArg};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The product data's file in the state directory.
pub const PRODUCTS_FILE: &str = "products.sqlite";
/// The recall data's file in the state directory.
pub const RECALLS_FILE: &str = "recalls.sqlite";

/// The tables of `products.sqlite`.
pub(super) const PRODUCTS_SCHEMA: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE product (
    product_id TEXT PRIMARY KEY, product_ndc TEXT NOT NULL, name TEXT NOT NULL,
    end_date TEXT, dea_schedule TEXT, exclude_flag TEXT NOT NULL);
CREATE TABLE package (
    package_ndc TEXT NOT NULL, ndc10 TEXT NOT NULL, ndc11 TEXT NOT NULL,
    product_id TEXT NOT NULL, description TEXT NOT NULL, end_date TEXT,
    exclude_flag TEXT NOT NULL, sample INTEGER NOT NULL);";

/// Indexes of `products.sqlite`, made once the rows are in.
pub(super) const PRODUCTS_INDEXES: &str = "
CREATE INDEX package_by_ndc ON package (package_ndc);
CREATE INDEX package_by_ndc10 ON package (ndc10);
CREATE INDEX package_by_ndc11 ON package (ndc11);";

/// The tables of `recalls.sqlite`: a key is `ndc11` (exact: from a
/// hyphenated or 11-digit NDC) or `ndc10` (ten digits read from a GTIN,
/// whose configuration is not known).
pub(super) const RECALLS_SCHEMA: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE recall (
    recall_number TEXT PRIMARY KEY, classification TEXT NOT NULL,
    initiated TEXT NOT NULL, names_lots INTEGER NOT NULL);
CREATE TABLE recall_key (kind TEXT NOT NULL, key TEXT NOT NULL, recall_number TEXT NOT NULL);
CREATE TABLE recall_lot (recall_number TEXT NOT NULL, lot TEXT NOT NULL);";

/// Indexes of `recalls.sqlite`.
pub(super) const RECALLS_INDEXES: &str = "
CREATE INDEX recall_key_by_key ON recall_key (kind, key);
CREATE INDEX recall_lot_by_recall ON recall_lot (recall_number);";

/// A data file being built under `<name>.new`, with `<name>.lock` held.
pub(super) struct Building {
    pub(super) conn: Option<Connection>,
    tmp: PathBuf,
    target: PathBuf,
    _lock: Flock<std::fs::File>,
}

impl Building {
    /// Start building `name` in `state_dir` with `schema`, in one
    /// transaction (committed by [`Building::install`]).
    pub(super) fn begin(
        state_dir: &Path,
        name: &str,
        schema: &str,
    ) -> Result<Building, ProductsError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| ProductsError::Io { path, source }
        };
        crate::files::create_dir_all(state_dir).map_err(io(state_dir))?;
        let lock_path = state_dir.join(format!("{name}.lock"));
        let lock_file = crate::files::open(&lock_path, crate::files::Access::ReadWrite)?;
        give_to_dir_owner(&lock_file, state_dir);
        let lock = Flock::lock(lock_file, FlockArg::LockExclusiveNonblock)
            .map_err(|_| ProductsError::Busy { path: lock_path })?;
        let tmp = state_dir.join(format!("{name}.new"));
        for leftover in [tmp.clone(), state_dir.join(format!("{name}.new-journal"))] {
            crate::files::refuse_unfit(&leftover)?;
            match std::fs::remove_file(&leftover) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io(&leftover)(e));
                }
                _ => {}
            }
        }
        let file = crate::files::open(&tmp, crate::files::Access::Replace)?;
        give_to_dir_owner(&file, state_dir);
        drop(file);
        let sqlite = |source| ProductsError::Sqlite {
            path: tmp.clone(),
            source,
        };
        let conn = Connection::open_with_flags(
            &tmp,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .map_err(sqlite)?;
        // A half-built file is thrown away, never read: no journal.
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -16384; {schema} BEGIN;"
        ))
        .map_err(sqlite)?;
        Ok(Building {
            conn: Some(conn),
            tmp,
            target: state_dir.join(name),
            _lock: lock,
        })
    }

    /// The connection to write the rows with.
    pub(super) fn conn(&self) -> &Connection {
        self.conn.as_ref().expect("open until installed")
    }

    /// A SQLite error on the file being built.
    pub(super) fn sqlite(&self, source: rusqlite::Error) -> ProductsError {
        ProductsError::Sqlite {
            path: self.tmp.clone(),
            source,
        }
    }

    /// Write `meta`, make `indexes`, commit, fsync, rename into place,
    /// fsync the directory.
    pub(super) fn install(
        mut self,
        meta: &[(&str, String)],
        indexes: &str,
    ) -> Result<PathBuf, ProductsError> {
        let conn = self.conn.take().expect("open until installed");
        let sqlite = |source| ProductsError::Sqlite {
            path: self.tmp.clone(),
            source,
        };
        for (k, v) in meta {
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)",
                params![k, v],
            )
            .map_err(sqlite)?;
        }
        conn.execute_batch(&format!("{indexes} COMMIT; ANALYZE;"))
            .map_err(sqlite)?;
        conn.close().map_err(|(_, e)| sqlite(e))?;
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| ProductsError::Io { path, source }
        };
        std::fs::File::open(&self.tmp)
            .and_then(|f| f.sync_all())
            .map_err(io(&self.tmp))?;
        crate::files::refuse_unfit(&self.target)?;
        std::fs::rename(&self.tmp, &self.target).map_err(io(&self.target))?;
        let dir = self.target.parent().unwrap_or(Path::new("."));
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(dir))?;
        Ok(self.target.clone())
    }
}

impl Drop for Building {
    fn drop(&mut self) {
        // Not installed: the half-built file goes.
        if self.conn.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Run as root in a state directory of another owner: give `file` that
/// directory's owner and group, so the service reads and replaces it.
fn give_to_dir_owner(file: &std::fs::File, dir: &Path) {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    if let Ok(m) = std::fs::metadata(dir)
        && m.uid() != 0
    {
        let _ = std::os::unix::fs::fchown(file, Some(m.uid()), Some(m.gid()));
    }
}

/// A data file for lookups: opened at first use, opened again when the
/// name points at another file (an import put a new one in place). The
/// name is looked at at each use, or at most once every `look_again`
/// (a look is a system call; an import is rare).
pub(super) struct Slot {
    path: PathBuf,
    opened: Option<(Connection, (u64, u64))>,
    /// When the name was last looked at (`None`: never), while what it
    /// showed (`opened`, or no file) still holds.
    looked: Option<Instant>,
    look_again: Duration,
}

impl Slot {
    pub(super) fn new(path: PathBuf, look_again: Duration) -> Slot {
        Slot {
            path,
            opened: None,
            looked: None,
            look_again,
        }
    }

    /// The connection to the file now at the name (as of at most
    /// `look_again` ago); `None`: there is none.
    pub(super) fn current(&mut self) -> Result<Option<&Connection>, ProductsError> {
        if self.looked.is_some_and(|t| t.elapsed() < self.look_again) {
            return Ok(self.opened.as_ref().map(|(c, _)| c));
        }
        self.looked = None;
        let meta = match std::fs::symlink_metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.opened = None;
                self.looked = Some(Instant::now());
                return Ok(None);
            }
            Err(source) => {
                return Err(ProductsError::Io {
                    path: self.path.clone(),
                    source,
                });
            }
            Ok(m) => m,
        };
        let id = (meta.dev(), meta.ino());
        if self.opened.as_ref().is_none_or(|(_, was)| *was != id) {
            self.opened = None;
            crate::files::refuse_unfit(&self.path)?;
            let conn = open_immutable(&self.path).map_err(|e| self.sqlite(e))?;
            self.opened = Some((conn, id));
        }
        self.looked = Some(Instant::now());
        Ok(self.opened.as_ref().map(|(c, _)| c))
    }

    /// The file opened (device and inode), as of the last [`Slot::current`].
    pub(super) fn file(&self) -> Option<(u64, u64)> {
        self.opened.as_ref().map(|(_, id)| *id)
    }

    pub(super) fn sqlite(&self, source: rusqlite::Error) -> ProductsError {
        ProductsError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }
}

/// `path`, read-only, as a file that never changes (`immutable=1`).
fn open_immutable(path: &Path) -> Result<Connection, rusqlite::Error> {
    let abs = std::fs::canonicalize(path.parent().unwrap_or(Path::new(".")))
        .map(|d| d.join(path.file_name().unwrap_or_default()))
        .unwrap_or_else(|_| path.to_owned());
    let uri = crate::store::immutable_uri(&abs);
    let conn = Connection::open_with_flags(
        &uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )?;
    // Fails here, not at the first lookup, when it is no data file.
    conn.query_row("SELECT count(*) FROM meta", [], |_| Ok(()))?;
    Ok(conn)
}

/// The data set's [`DataInfo`] from its `meta`.
pub(super) fn info(conn: &Connection) -> Result<Option<DataInfo>, rusqlite::Error> {
    let get = |k: &str| -> Result<Option<String>, rusqlite::Error> {
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [k], |r| r.get(0))
            .optional()
    };
    let (Some(source), Some(published), Some(imported)) =
        (get("source")?, get("published")?, get("imported_ms")?)
    else {
        return Ok(None);
    };
    let Ok(published) = NaiveDate::parse_from_str(&published, "%Y-%m-%d") else {
        return Ok(None);
    };
    let mut rows = Vec::new();
    for name in ["products", "packages", "recalls"] {
        if let Some(n) = get(name)?.and_then(|n| n.parse().ok()) {
            rows.push((name.to_string(), n));
        }
    }
    Ok(Some(DataInfo {
        source,
        published,
        imported_ms: imported.parse().unwrap_or(0),
        rows,
    }))
}

const PRODUCT_SELECT: &str = "
SELECT k.package_ndc, k.ndc11, p.product_ndc, p.name, k.description, p.dea_schedule,
       coalesce(k.end_date, p.end_date), k.sample,
       CASE WHEN k.exclude_flag = '' THEN coalesce(p.exclude_flag, '') ELSE k.exclude_flag END
FROM package k LEFT JOIN product p ON p.product_id = k.product_id";

/// The packages `key` names, with their products.
pub(super) fn products_by(conn: &Connection, key: &Key) -> Result<Vec<Product>, rusqlite::Error> {
    let (column, value) = match key {
        Key::Hyphenated(n) => ("package_ndc", n.to_string()),
        Key::Ndc10(d) => ("ndc10", d.clone()),
        Key::Ndc11(d) => ("ndc11", d.clone()),
    };
    let mut stmt = conn.prepare_cached(&format!(
        "{PRODUCT_SELECT} WHERE k.{column} = ?1 ORDER BY k.package_ndc"
    ))?;
    let rows = stmt.query_map([value], |r| {
        let package_ndc: String = r.get(0)?;
        let gtin14 = super::ndc::PackageNdc::parse(&package_ndc)
            .map(|n| n.gtin14(0))
            .unwrap_or_default();
        Ok(Product {
            package_ndc,
            ndc11: r.get(1)?,
            gtin14,
            product_ndc: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
            name: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
            package_description: r.get(4)?,
            dea_schedule: r.get(5)?,
            marketing_end: r
                .get::<_, Option<String>>(6)?
                .and_then(|d| NaiveDate::parse_from_str(&d, "%Y-%m-%d").ok()),
            sample: r.get(7)?,
            exclude_flag: r.get(8)?,
        })
    })?;
    rows.collect()
}

/// The ten digits and 11-digit forms a key may be recorded under.
fn recall_keys(key: &Key) -> (Vec<String>, Vec<String>) {
    match key {
        Key::Hyphenated(n) => (vec![n.digits10()], vec![n.ndc11()]),
        Key::Ndc10(d) => {
            // Each configuration's 11-digit form of these ten digits.
            let ndc11 = vec![
                format!("0{d}"),
                format!("{}0{}", &d[..5], &d[5..]),
                format!("{}0{}", &d[..9], &d[9..]),
            ];
            (vec![d.clone()], ndc11)
        }
        Key::Ndc11(d) => {
            // The ten digits of each configuration it may pad.
            let mut ndc10 = Vec::new();
            if let Some(rest) = d.strip_prefix('0') {
                ndc10.push(rest.to_string());
            }
            if d.as_bytes()[5] == b'0' {
                ndc10.push(format!("{}{}", &d[..5], &d[6..]));
            }
            if d.as_bytes()[9] == b'0' {
                ndc10.push(format!("{}{}", &d[..9], &d[10..]));
            }
            (ndc10, vec![d.clone()])
        }
    }
}

/// The ongoing recalls of the package `key` names, for a read of `lot`.
pub(super) fn recalls_by(
    conn: &Connection,
    key: &Key,
    lot: Option<&str>,
) -> Result<Vec<RecallMatch>, rusqlite::Error> {
    let (ndc10, ndc11) = recall_keys(key);
    let mut numbers: Vec<String> = Vec::new();
    let mut stmt =
        conn.prepare_cached("SELECT recall_number FROM recall_key WHERE kind = ?1 AND key = ?2")?;
    for (kind, values) in [("ndc10", &ndc10), ("ndc11", &ndc11)] {
        for v in values {
            for n in stmt.query_map(params![kind, v], |r| r.get::<_, String>(0))? {
                let n = n?;
                if !numbers.contains(&n) {
                    numbers.push(n);
                }
            }
        }
    }
    numbers.sort();
    let mut out = Vec::new();
    let mut recall = conn
        .prepare_cached("SELECT classification, names_lots FROM recall WHERE recall_number = ?1")?;
    let mut lots = conn.prepare_cached("SELECT lot FROM recall_lot WHERE recall_number = ?1")?;
    for number in numbers {
        let (classification, names_lots): (String, bool) =
            recall.query_row([&number], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let matched = match (names_lots, lot.filter(|l| !lot_form(l).is_empty())) {
            (false, _) => Some(LotMatch::EveryLot),
            (true, None) => Some(LotMatch::LotNotRead),
            (true, Some(read)) => {
                let named: Vec<String> = lots
                    .query_map([&number], |r| r.get(0))?
                    .collect::<Result<_, _>>()?;
                named
                    .iter()
                    .any(|n| same_lot(read, n))
                    .then_some(LotMatch::Lot)
            }
        };
        if let Some(lot) = matched {
            out.push(RecallMatch {
                recall_number: number,
                classification,
                lot,
            });
        }
    }
    Ok(out)
}
