//! A gateway whose `[redis]` section is removed decides the scans its
//! facility store left `unresolved` with its own store, instead of keeping
//! them open for ever.

mod common;

use common::*;
use scangate::capture::CaptureTime;
use scangate::store::Store;

#[test]
fn scans_left_unresolved_by_a_removed_facility_store_are_decided_locally() {
    let dir = tempdir("takeover");
    let state = dir.path().join("state");
    {
        let mut store = Store::open(&state).unwrap();
        let mut gate = test_gate(&store);
        // Two picks and an echo of the first, read while Redis was down.
        let reads = [
            read_at(&dscsa("TAKE1"), 0),
            read_at(&dscsa("TAKE2"), 100),
            read_at(&dscsa("TAKE1"), 900),
        ];
        store.admit("test-pharmacy", &reads).unwrap();
        let round = gate
            .facility_round(&mut store, None, "Redis is down", &CaptureTime::now())
            .unwrap();
        assert_eq!(round.decisions.len(), 3);
    }
    let config = write_config(dir.path(), &state, 3000, &[]);
    assert_eq!(count(&outbox_status(&config), "unresolved"), 3);

    let mut daemon = Daemon::start(&config, &dir.path().join("daemon.log"));
    let status = wait_all_decided(&config, 3);
    assert_eq!(
        (count(&status, "committed"), count(&status, "suppressed")),
        (2, 1),
        "{status}"
    );
    assert_eq!(ledger(&config).len(), 2);
    assert!(
        daemon.log().contains(
            "3 scans were left unresolved by a facility store that is no longer configured"
        ),
        "{}",
        daemon.log_digest()
    );
    assert!(daemon.terminate().success(), "{}", daemon.log_digest());
    let verify: Outcome = cli_cfg(&config, &["audit", "verify"]).into();
    assert_eq!(verify.code, Some(0), "{verify}");
}
