//! Generator of the schema-7 fixture of `tests/lean_rows.rs` (not compiled
//! here: it uses the library as it was at 9a2c7c8, before migration 8).
//! To regenerate: in a worktree of 9a2c7c8, copy this file to
//! tests/make_lean_fixture.rs, add `mod make_lean_fixture;` to tests/tests.rs
//! and run `LEAN_FIXTURE_OUT=/tmp/lean cargo test --test integration
//! make_lean_fixture -- --ignored`, then `make_fixture.sh` (beside this file).
//!
//! The real pipeline (store → gate → ledger + audit) writes three batches
//! of decisions of every kind (commits, echoes, rejections, a label
//! re-dispensed after the window, two scanners); the first batch is
//! archived (`audit export`'s function) and pruned (`audit prune`'s, 800
//! days on), which writes a checkpoint record; the third batch follows it.

use crate::util::*;
use scangate::audit::archive::{PrunePolicy, Pruned, export, prune, register};
use scangate::capture::Profile;
use scangate::config::ScanType;
use scangate::store::Store;
use std::path::Path;

/// `n` labels read with echoes, on boot `boot`, plus a re-dispensed UPC
/// and two rejected frames.
fn batch(store: &mut Store, tag: &str, n: i64, boot: &str) {
    let mut gate = test_gate(store);
    let counter = dispense("counter-1");
    let receiving = Profile {
        scanner: "receiving".into(),
        scan_type: ScanType::Receive,
        quantity: 12,
        owner: None,
        unserialised: Default::default(),
    };
    let t0 = chrono::Utc::now().timestamp_millis() - 3_600_000;
    let mut scans = Vec::new();
    let mut at = |profile: &Profile, bytes: Vec<u8>, offset_ms: i64| {
        let time = capture_time(t0 + offset_ms, boot, offset_ms + 1_000_000, true);
        scans.push(scan(profile, bytes, time));
    };
    for i in 0..n {
        let label = dscsa(&format!("{tag}{i:04}")).into_bytes();
        let base = i * 10_000;
        at(&counter, label.clone(), base);
        if i % 2 == 0 {
            at(&counter, label.clone(), base + 40);
        }
        if i % 3 == 0 {
            at(&counter, label.clone(), base + 2000);
        }
        if i % 4 == 0 {
            at(&receiving, label, base + 100);
        }
    }
    at(&counter, UPC_NDC.as_bytes().to_vec(), 500);
    at(&counter, UPC_NDC.as_bytes().to_vec(), 500 + 5000);
    at(&counter, format!("]C1NOT-A-GS1-{tag}").into_bytes(), 700);
    at(&receiving, b"\xff\xfe\x00\x01noise".to_vec(), 900);
    scangate::daemon::embedded::submit(store, &mut gate, &scans).expect("submit");
}

const BOOT: &str = "6f1d3a52-8c2e-4f7a-9d3b-2a1c0e5f7b90";

#[test]
#[ignore]
fn make_lean_fixture() {
    let out = std::env::var("LEAN_FIXTURE_OUT").expect("LEAN_FIXTURE_OUT");
    let state = Path::new(&out).join("state");
    let mut store = Store::open(&state).unwrap();
    // A boot identifier that is not a UUID stays text through migration 8.
    batch(&mut store, "A", 24, "lean-fixture-boot");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let until = chrono::Utc::now().timestamp_millis();
    std::thread::sleep(std::time::Duration::from_millis(20));
    batch(&mut store, "B", 24, BOOT);
    let archive = Path::new(&out).join("a.archive");
    export(&store, until, &archive, "gw").unwrap();
    register(&mut store, &archive).unwrap();
    let policy = PrunePolicy {
        now_ms: until + 800 * 86_400_000,
        keep_days: 730,
        retention_hours: 72,
        facility_anchor: None,
    };
    let pruned = prune(&mut store, &policy).unwrap();
    assert!(matches!(pruned, Pruned::Done { .. }), "{pruned:?}");
    batch(&mut store, "C", 16, BOOT);
    drop(store);
    rusqlite::Connection::open(state.join("scangate.db"))
        .unwrap()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
}
