//! Labels and scans: barcode texts, scans built as a source would capture
//! them, and gates over a test store.

use scangate::capture::{CaptureTime, Profile, RawScan, Scan};
use scangate::config::ScanType;
use scangate::gate::{Gate, GateConfig, decision_of};
use scangate::model::ClockSample;
use scangate::model::Verdict;
use scangate::store::Store;
use std::time::Duration;

/// GS1 group separator.
pub const GS: &str = "\x1d";
/// The GTIN of NDC 0777-3105-02 (valid check digit).
pub const GTIN: &str = "00307773105025";
/// A UPC-A carrying NDC 1234567890.
pub const UPC_NDC: &str = "312345678906";

/// A DSCSA GS1 DataMatrix label (AIM `]d2`), unique per physical pick by `serial`.
pub fn dscsa(serial: &str) -> String {
    dscsa_lot(serial, "LOT7A")
}

/// A DSCSA label with an explicit lot.
pub fn dscsa_lot(serial: &str, lot: &str) -> String {
    // (01) GTIN, (17) expiry 2028-12-31, (21) serial, GS, (10) lot.
    format!("]d201{GTIN}1728123121{serial}{GS}10{lot}")
}

/// A GS1 DataMatrix without a serial (AIM `]d2`): GTIN, expiry 2028-12-31,
/// lot — identical on every bottle of the lot.
pub fn gtin_lot(lot: &str) -> String {
    format!("]d201{GTIN}17281231{GS}10{lot}")
}

/// Scanner `scanner`'s profile: dispense, quantity 1.
pub fn dispense(scanner: &str) -> Profile {
    Profile {
        scanner: scanner.into(),
        scan_type: ScanType::Dispense,
        quantity: 1,
        owner: None,
        unserialised: Default::default(),
    }
}

/// A capture time: wall clock `utc_ms`, `boot_ms` on the boot clock of boot
/// `boot`.
pub fn capture_time(utc_ms: i64, boot: &str, boot_ms: i64, synced: bool) -> CaptureTime {
    CaptureTime {
        utc_ms,
        boot_ns: boot_ms * 1_000_000,
        boot_id: boot.into(),
        synced,
    }
}

/// A measurement of the facility clock in `boot` at boot-clock `boot_ms`,
/// when facility time was `facility_ms`, within ± `bound_ms`.
pub fn clock_sample(boot: &str, boot_ms: i64, facility_ms: i64, bound_ms: f64) -> ClockSample {
    ClockSample {
        offset_ms: 0.0,
        bound_ms,
        boot_offset_ms: (facility_ms - boot_ms) as f64,
        boot_id: boot.into(),
        at_ms: chrono::Utc::now().timestamp_millis(),
        boot_ms,
    }
}

/// A read of `bytes` (no framing error) by `profile` at `time`.
pub fn scan(profile: &Profile, bytes: impl Into<Vec<u8>>, time: CaptureTime) -> Scan {
    let raw = RawScan {
        bytes: bytes.into(),
        framing_error: None,
    };
    Scan::at(profile, raw, time)
}

/// A read of `text` by scanner `counter-1` (dispense, quantity 1), captured
/// `at_ms` from now on a synchronised clock of boot `boot-a`.
pub fn read_at(text: &str, at_ms: i64) -> Scan {
    let now = chrono::Utc::now().timestamp_millis();
    let time = capture_time(now + at_ms, "boot-a", 1_000_000 + at_ms, true);
    scan(&dispense("counter-1"), text, time)
}

/// The recorded verdict of `scan` (it must be in the outbox).
pub fn verdict(store: &Store, scan: &Scan) -> Verdict {
    decision_of(store, &scan.uuid.to_string())
        .expect("reading the decision")
        .expect("the scan is in the outbox")
        .verdict
}

/// The latest audit record of `scan`.
pub fn audit_of(store: &Store, scan: &Scan) -> serde_json::Value {
    let uuid = scan.uuid.to_string();
    let record: scangate::audit::stored::RecordJson = store
        .read()
        .unwrap()
        .query_row(
            "SELECT record FROM audit WHERE scan_uuid = ?1 ORDER BY seq DESC LIMIT 1",
            [scangate::store::packed::packed(&uuid)],
            |r| r.get(0),
        )
        .unwrap();
    serde_json::from_str(&record.0).unwrap()
}

/// The gate settings the tests use: window 3 s, retention 72 h.
pub fn gate_config(facility: &str, gateway: &str) -> GateConfig {
    GateConfig {
        facility: facility.into(),
        gateway: gateway.into(),
        window: scangate::model::EchoWindow::from_ms(3000),
        retention: Duration::from_secs(72 * 3600),
    }
}

/// The gate of the gateway [`write_config`](super::write_config) describes
/// (facility `test-pharmacy`, gateway `test-gw`, window 3 s, retention
/// 72 h), for preparing a state directory before the daemon starts on it.
pub fn test_gate(store: &Store) -> Gate {
    Gate::new(gate_config("test-pharmacy", "test-gw"), store).expect("a gate on the test store")
}

/// [`test_gate`] as a facility claimer lane's ([`scangate::claimer::round`]
/// drives it).
pub fn test_facility_gate(store: &Store) -> scangate::claimer::FacilityGate {
    scangate::claimer::FacilityGate::new(test_gate(store), store).expect("a claimer lane's gate")
}
