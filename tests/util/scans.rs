//! Labels and scans: barcode texts, scans built as a source would capture
//! them, and gates over a test store.

use std::path::Path;
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

/// A gate of gateway "gw" in `facility` (window 3 s, retention 72 h) over a
/// new SQLite store in `state_dir`, and its facility Redis connection at
/// `url` — for tests that drive facility rounds themselves.
pub fn facility_gate(
    state_dir: &Path,
    facility: &str,
    url: &str,
) -> (
    scangate::store::Store,
    scangate::gate::Gate,
    scangate::facility::Facility,
) {
    let store = scangate::store::Store::open(state_dir).expect("open the store");
    let retention = Duration::from_secs(72 * 3600);
    let cfg = scangate::gate::GateConfig {
        facility: facility.into(),
        gateway: "gw".into(),
        window_ms: 3000,
        retention,
    };
    let gate = scangate::gate::Gate::new(cfg, &store).expect("a gate");
    let connect = Duration::from_secs(2);
    let f = scangate::facility::Facility::connect(url, facility, 3000, retention, connect, connect)
        .expect("connect to the test's redis-server");
    (store, gate, f)
}

/// A read of `text` by scanner `counter-1` (dispense, quantity 1), captured
/// `at_ms` from now on a synchronised clock of boot `boot-a`.
pub fn read_at(text: &str, at_ms: i64) -> scangate::capture::Scan {
    use scangate::capture::{CaptureTime, Profile, RawScan, Scan};
    let time = CaptureTime {
        utc_ms: chrono::Utc::now().timestamp_millis() + at_ms,
        boot_ns: 1_000_000_000_000 + at_ms * 1_000_000,
        boot_id: "boot-a".into(),
        synced: true,
    };
    let profile = Profile {
        scanner: "counter-1".into(),
        scan_type: scangate::config::ScanType::Dispense,
        quantity: 1,
    };
    let raw = RawScan {
        bytes: text.as_bytes().to_vec(),
        framing_error: None,
    };
    Scan::at(&profile, raw, time)
}

/// The gate of the gateway [`write_config`] describes (facility
/// `test-pharmacy`, gateway `test-gw`, window 3 s, retention 72 h), for
/// preparing a state directory before the daemon starts on it.
pub fn test_gate(store: &scangate::store::Store) -> scangate::gate::Gate {
    let cfg = scangate::gate::GateConfig {
        facility: "test-pharmacy".into(),
        gateway: "test-gw".into(),
        window_ms: 3000,
        retention: Duration::from_secs(72 * 3600),
    };
    scangate::gate::Gate::new(cfg, store).expect("a gate on the test store")
}
