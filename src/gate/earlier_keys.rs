//! Content keys of an earlier form, bridged: an upgrade never splits a pick.
//!
//! Releases before `shared` scanners existed (up to the one of
//! 2026-12-01 morning, schema 4) keyed every scanner's reads in the form a
//! `shared` scanner's still are (`v1`, no gateway:
//! [`crate::capture::content_key`]); since then a scanner that is
//! not `shared` has keys that name its gateway (`v2`). A state directory
//! written by such a release holds commits under `v1` keys, and a read
//! after the upgrade — the scanner resending a frame it was never ACKed
//! for, a label read again inside the window — has a `v2` key: without a
//! bridge it would be a second ledger entry for one pick.
//!
//! So at start ([`Bridge::prepare`]) the gate looks at what the state
//! holds within the retention horizon: commits and undecided scans of
//! this gateway's own (not `shared`) scanners whose key is in the `v1`
//! form. Scans still `pending` are keyed again in the current form (no
//! decision, audit record or facility claim names their key yet). If any
//! commit (or an `unresolved` scan, whose claim may have reached the
//! facility under its key) is in the old form, the gate also looks a read
//! up under its `v1` key, for reads captured up to a retention horizon
//! after the newest such row ([`Bridge::earlier_key`]): after that no
//! echo can match it, and the bridge costs nothing. What was found is kept
//! in `meta` with the configuration it was found for, so later starts do
//! not read the ledger again.

use crate::capture::barcode::ProductId;
use crate::capture::{Profile, ScanType, content_key};
use crate::config::Config;
use crate::outbox::ScanRow;
use crate::store::packed::Unpacked;
use crate::store::packed::packed;
use crate::store::{Store, StoreError, put_meta};
use rusqlite::{Connection, params};
use sha2::{Digest, Sha256};
use std::collections::HashSet;

/// The `meta` key of what [`Bridge::prepare`] found: `<configuration
/// fingerprint> <newest old-form row's capture ms, or ->`.
const META_KEY: &str = "earlier_keys";

/// Reads of these scanners captured up to `until_ms` are also looked up
/// under their key's earlier (`v1`) form.
#[derive(Debug, Clone)]
pub struct Bridge {
    facility: String,
    scanners: HashSet<String>,
    until_ms: i64,
}

/// The identity of one row, as its content key is made from it.
struct Keyed {
    scanner: String,
    scan_type: String,
    quantity: i64,
    product: Option<ProductId>,
    key: String,
    captured_ms: i64,
}

impl Keyed {
    fn of(r: &rusqlite::Row<'_>) -> rusqlite::Result<Keyed> {
        let expiry: Option<String> = r.get(7)?;
        Ok(Keyed {
            scanner: r.get(0)?,
            scan_type: r.get(1)?,
            quantity: r.get(2)?,
            product: product(
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                expiry.as_deref(),
            ),
            key: r
                .get::<_, Option<Unpacked>>(8)?
                .map(|u| u.0)
                .unwrap_or_default(),
            captured_ms: r.get(9)?,
        })
    }

    /// Its key in the form `owner` (`None`: the `v1` form) gives.
    fn key_as(&self, facility: &str, owner: Option<&str>) -> Option<String> {
        key_as(
            facility,
            (&self.scanner, &self.scan_type, self.quantity),
            self.product.as_ref()?,
            owner,
        )
    }
}

/// A row's product as its content key was made from it; `None` for an
/// expiry the row cannot give back as the key had it (a date out of range
/// was keyed as "?"): such a row is not bridged.
fn product(
    gtin: Option<String>,
    ndc10: Option<String>,
    lot: Option<String>,
    serial: Option<String>,
    expiry: Option<&str>,
) -> Option<ProductId> {
    let expiry = match expiry {
        None => None,
        Some(d) => Some(chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok()?),
    };
    Some(ProductId {
        gtin,
        ndc10,
        lot,
        serial,
        expiry,
    })
}

/// The content key of `product` read by `(scanner, scan type, quantity)`
/// in the form `owner` gives (`None`: the `v1` form).
fn key_as(
    facility: &str,
    (scanner, scan_type, quantity): (&str, &str, i64),
    product: &ProductId,
    owner: Option<&str>,
) -> Option<String> {
    let profile = Profile {
        scanner: scanner.to_owned(),
        scan_type: ScanType::parse(scan_type)?,
        quantity: u32::try_from(quantity).ok()?,
        owner: owner.map(str::to_owned),
        unserialised: Default::default(),
    };
    Some(content_key(facility, &profile, product))
}

/// The columns [`Keyed::of`] reads, in its order.
const COLUMNS: &str =
    "scanner, scan_type, quantity, gtin, ndc10, lot, serial, expiry, content_key, captured_ms";

impl Bridge {
    /// Look at the state for keys of the earlier form (see the module's
    /// docs), key `pending` scans again, and return the bridge the gate
    /// needs, if any. `now_ms` is the wall clock.
    pub fn prepare(
        store: &mut Store,
        cfg: &Config,
        now_ms: i64,
    ) -> Result<Option<Bridge>, StoreError> {
        let facility = cfg.gateway.facility.clone();
        let gateway = cfg.gateway.id.as_str();
        let scanners: HashSet<String> = cfg
            .scanners
            .iter()
            .filter(|s| !s.shared)
            .map(|s| s.name.clone())
            .collect();
        let retention_ms = cfg.retention().as_millis() as i64;
        let fingerprint = fingerprint(&facility, gateway, &scanners);
        let bridge = |until_ms: i64| {
            (!scanners.is_empty() && now_ms <= until_ms + retention_ms).then(|| Bridge {
                facility: facility.clone(),
                scanners: scanners.clone(),
                until_ms: until_ms + retention_ms,
            })
        };
        if let Some(found) = store.meta(META_KEY)?
            && let Some((print, until)) = found.split_once(' ')
            && print == fingerprint
        {
            return Ok(until.parse().ok().and_then(bridge));
        }
        let w = store.write()?;
        let newest = look(&w.tx, &facility, gateway, &scanners, now_ms - retention_ms)
            .map_err(|e| w.err(e))?;
        let until = newest.map_or_else(|| "-".to_string(), |ms| ms.to_string());
        put_meta(&w.tx, META_KEY, &format!("{fingerprint} {until}")).map_err(|e| w.err(e))?;
        w.commit()?;
        Ok(newest.and_then(bridge))
    }

    /// Reads captured after this (Unix ms) are not bridged.
    pub fn until_ms(&self) -> i64 {
        self.until_ms
    }

    /// `row`'s key in the earlier form, if the bridge covers it (a
    /// decoded read of one of this gateway's own scanners captured before
    /// the bridge ends).
    pub fn earlier_key(&self, row: &ScanRow) -> Option<String> {
        if row.time.utc_ms > self.until_ms || !self.scanners.contains(&row.scanner) {
            return None;
        }
        let product = product(
            row.gtin.clone(),
            row.ndc10.clone(),
            row.lot.clone(),
            row.serial.clone(),
            row.expiry.as_deref(),
        )?;
        key_as(
            &self.facility,
            (&row.scanner, &row.scan_type, row.quantity),
            &product,
            None,
        )
    }
}

/// The configuration the bridge depends on, hashed: what `meta` keeps
/// beside what was found (another facility, gateway id or set of own
/// scanners is looked at again).
fn fingerprint(facility: &str, gateway: &str, scanners: &HashSet<String>) -> String {
    let mut names: Vec<&str> = scanners.iter().map(String::as_str).collect();
    names.sort_unstable();
    let mut h = Sha256::new();
    for part in [facility, gateway].into_iter().chain(names) {
        h.update(part.as_bytes());
        h.update([0x1f]);
    }
    hex::encode(&h.finalize()[..8])
}

/// In `tx`: key every `pending` scan of `scanners` whose key is in the
/// earlier form again, in the current form; return the newest capture
/// time of a commit since `since_ms` or an `unresolved` scan still in the
/// earlier form (`None`: there is none).
fn look(
    tx: &Connection,
    facility: &str,
    gateway: &str,
    scanners: &HashSet<String>,
    since_ms: i64,
) -> rusqlite::Result<Option<i64>> {
    let is_earlier = |row: &Keyed| {
        scanners.contains(&row.scanner) && row.key_as(facility, None).is_some_and(|k| k == row.key)
    };
    let mut newest: Option<i64> = None;
    let mut sql = format!("SELECT {COLUMNS} FROM ledger WHERE captured_ms >= ?1");
    for row in tx.prepare(&sql)?.query_map([since_ms], Keyed::of)? {
        let row = row?;
        if is_earlier(&row) {
            newest = newest.max(Some(row.captured_ms));
        }
    }
    sql = format!("SELECT {COLUMNS} FROM scans WHERE state = 'unresolved'");
    for row in tx.prepare(&sql)?.query_map([], Keyed::of)? {
        let row = row?;
        if is_earlier(&row) {
            newest = newest.max(Some(row.captured_ms));
        }
    }
    sql = format!("SELECT {COLUMNS}, seq FROM scans WHERE state = 'pending'");
    let mut rekey = Vec::new();
    for row in tx
        .prepare(&sql)?
        .query_map([], |r| Ok((Keyed::of(r)?, r.get::<_, i64>(10)?)))?
    {
        let (row, seq) = row?;
        if is_earlier(&row)
            && let Some(current) = row.key_as(facility, Some(gateway))
        {
            rekey.push((seq, current));
        }
    }
    let mut update = tx.prepare("UPDATE scans SET content_key = ?2 WHERE seq = ?1")?;
    for (seq, key) in &rekey {
        update.execute(params![seq, packed(key)])?;
    }
    Ok(newest)
}
