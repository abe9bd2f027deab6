//! The outbox row of a scan made in memory ([`ScanRow::of_scan`], what the
//! gate decides a fresh batch from) is the row the outbox reads back.

use super::*;
use crate::capture::{CaptureTime, Declared, Profile, RawScan, Unserialised};
use crate::config::ScanType;

fn scan(label: &str, unserialised: Unserialised, at_ms: i64) -> Scan {
    let profile = Profile {
        scanner: "receiving".into(),
        scan_type: ScanType::Receive,
        quantity: 2,
        owner: Some("gw-1".into()),
        unserialised,
    };
    let time = CaptureTime {
        utc_ms: 1_764_000_000_000 + at_ms,
        boot_id: "boot-a".into(),
        boot_ns: 5_000_000 + at_ms,
        synced: at_ms % 2 == 0,
    };
    let raw = RawScan {
        bytes: label.as_bytes().to_vec(),
        framing_error: None,
    };
    Scan::at(&profile, raw, time)
}

/// Every kind of read: serialised, without a serial under each policy, a
/// UPC, a possible resend, a misread, a control label and a declared read.
pub(super) fn reads() -> Vec<Scan> {
    let dscsa = "]d2010030777310502517281231211000001\u{1d}10LOT1";
    let gtin_lot = "]d20100307773105025\u{1d}10LOT7A"[..].replace('\u{1d}', "");
    let df = Unserialised::DoubleFire { ms: 250 };
    let mut all = vec![
        scan(dscsa, Unserialised::Window, 0),
        scan(&gtin_lot, df, 1),
        scan(&gtin_lot, Unserialised::Ask, 2),
        scan("]E00312345678906", Unserialised::Window, 3),
        scan("]d2not a GS1 string", Unserialised::Window, 4),
    ];
    let mut resend = scan(&gtin_lot, df, 5);
    resend.resend = true;
    let mut control = scan("]C0SGCTL-REPEAT", Unserialised::Window, 6);
    control.control = Some("repeat".into());
    let mut declared = scan(&gtin_lot, Unserialised::Ask, 7);
    declared.declared = Some(Declared {
        what: "quantity 3".into(),
        quantity: Some(3),
        by: control.uuid,
    });
    all.extend([resend, control, declared]);
    all
}

#[test]
fn a_scan_made_in_memory_is_the_row_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let scans = reads();
    let fresh = insert(&store.conn, "pharmacy-1", &scans).unwrap();
    assert!(fresh.iter().all(|&f| f));
    let read = open::load(&store.conn, open::Open::Pending, &open::skip(&[]), 100).unwrap();
    assert_eq!(read.len(), scans.len());
    for (scan, back) in scans.iter().zip(&read) {
        let mut made = ScanRow::of_scan(scan, "pharmacy-1");
        made.seq = back.seq;
        assert_eq!(&made, back);
    }
    // The kinds are there (a test of the test).
    assert!(read.iter().any(|r| r.reject_reason.is_some()));
    assert!(read.iter().any(|r| r.control.is_some()));
    assert!(read.iter().any(|r| r.declared.is_some() && r.quantity == 3));
    assert!(
        read.iter()
            .any(|r| r.window == Some(crate::model::EchoWindow::from_ms(250)))
    );
    assert!(
        read.iter()
            .any(|r| r.serial.is_some() && r.expiry.is_some())
    );
    // Again: nothing is new, nothing written.
    assert!(
        insert(&store.conn, "pharmacy-1", &scans)
            .unwrap()
            .iter()
            .all(|&f| !f)
    );
}

#[test]
fn a_row_inserted_decided_holds_its_verdict_and_is_written_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let scans = reads();
    let row = ScanRow::of_scan(&scans[2], "pharmacy-1");
    let verdict = SetVerdict {
        state: ScanState::Suppressed,
        twin: Some("019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30"),
        ambiguous: true,
        decided_ms: Some(42),
    };
    let seq = Rows::new(&store.conn)
        .insert(&scans[2].raw, &row, Some(7), Some(verdict))
        .unwrap();
    assert_eq!(seq, Some(7));
    let got: (String, Option<String>, Option<i64>, Option<i64>) = store
        .conn
        .query_row(
            "SELECT state, twin_uuid, decided_ms, ambiguous FROM scans WHERE seq = ?1",
            [seq],
            |r| {
                let twin = r.get::<_, Option<crate::store::packed::Unpacked>>(1)?;
                Ok((r.get(0)?, twin.map(|t| t.0), r.get(2)?, r.get(3)?))
            },
        )
        .unwrap();
    assert_eq!(
        got,
        (
            "suppressed".into(),
            Some("019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30".into()),
            Some(42),
            Some(1)
        )
    );
    let again = Rows::new(&store.conn)
        .insert(&scans[2].raw, &row, None, None)
        .unwrap();
    assert_eq!(again, None, "the same UUID again writes nothing");
}

/// The row's identifiers are stored as their bytes (migration 11: UUIDs
/// 16, the content key 32) and read back exactly as they were made.
#[test]
fn identifiers_are_stored_packed_and_read_back_as_made() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let scans = reads();
    let mut row = ScanRow::of_scan(&scans[0], "pharmacy-1");
    row.declared = Some((
        "repeat".into(),
        "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30".into(),
    ));
    let seq = Rows::new(&store.conn)
        .insert(&scans[0].raw, &row, None, None)
        .unwrap()
        .unwrap();
    let sizes: (i64, i64, i64, i64) = store
        .conn
        .query_row(
            "SELECT length(scan_uuid), length(boot_id), length(content_key), length(declared_by)
             FROM scans WHERE seq = ?1 AND typeof(scan_uuid) = 'blob'
               AND typeof(content_key) = 'blob' AND typeof(declared_by) = 'blob'",
            [seq],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    let boot = if row.time.boot_id.len() == 36 {
        16
    } else {
        row.time.boot_id.len() as i64
    };
    assert_eq!(sizes, (16, boot, 32, 16));
    row.seq = seq;
    assert_eq!(row_of(&store.conn, &row.uuid).unwrap(), Some(row.clone()));
    let recorded = recorded(&store.conn, &row.uuid).unwrap().unwrap();
    assert_eq!(recorded.content_key, row.content_key);
    assert!(has_scan(&store.conn, &row.uuid).unwrap());
    assert_eq!(
        scans_with_key(&store.conn, row.content_key.as_deref().unwrap()).unwrap(),
        vec![(row.uuid.clone(), ScanState::Pending)]
    );
    // A declared read ends its control read, naming itself in text.
    let (control, declared) = (&scans[6], &scans[7]);
    for scan in [control, declared] {
        let row = ScanRow::of_scan(scan, "pharmacy-1");
        Rows::new(&store.conn)
            .insert(&scan.raw, &row, None, None)
            .unwrap();
    }
    let end: String = store
        .conn
        .query_row(
            "SELECT control_end FROM scans WHERE scan_uuid = ?1",
            [packed(&control.uuid.to_string())],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(end, format!("applied {}", declared.uuid));
}

/// An expiry date is written as chrono's `%Y-%m-%d` would write it.
#[test]
fn expiry_dates_are_written_as_chrono_writes_them() {
    for (y, m, d) in [
        (2026, 12, 31),
        (2000, 1, 1),
        (999, 5, 9),
        (0, 1, 1),
        (9999, 12, 31),
        (10000, 1, 1),
        (-1, 3, 4),
    ] {
        let date = chrono::NaiveDate::from_ymd_opt(y, m, d).unwrap();
        assert_eq!(super::iso_date(date), date.format("%Y-%m-%d").to_string());
    }
}
