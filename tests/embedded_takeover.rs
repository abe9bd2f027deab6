//! A gateway whose `[redis]` section is removed keeps the scans its facility
//! store left `unresolved` open and says so at start; `scangate outbox
//! decide-locally` hands them to its own store.

use crate::util::*;
use scangate::capture::CaptureTime;
use scangate::store::Store;

#[test]
fn scans_left_unresolved_by_a_removed_facility_store_wait_until_decided_locally() {
    let dir = tempdir("takeover");
    let state = dir.path().join("state");
    {
        let mut store = Store::open(&state).unwrap();
        let mut gate = test_facility_gate(&store);
        // Two picks and an echo of the first, read while Redis was down.
        let reads = [
            read_at(&dscsa("TAKE1"), 0),
            read_at(&dscsa("TAKE2"), 100),
            read_at(&dscsa("TAKE1"), 900),
        ];
        store.admit("test-pharmacy", &reads).unwrap();
        let round = scangate::claimer::round(
            &mut store,
            &mut gate,
            None,
            "Redis is down",
            &CaptureTime::now(),
        )
        .unwrap();
        assert_eq!(round.decisions.len(), 3);
    }
    let gw = Gateway::builder_in(dir.path())
        .pty(ScannerSpec::named("counter-1"))
        .build();

    // Without [redis], the daemon runs, warns, and decides nothing of them.
    let mut daemon = gw.launch();
    assert!(
        daemon.log().contains(
            "3 scans wait for a facility store that is not configured ([redis]): they stay undecided"
        ),
        "{}",
        daemon.log_digest()
    );
    assert_eq!(count(&outbox_status(&gw.cfg), "unresolved"), 3);
    // The command refuses while the daemon holds the state directory.
    let busy: Outcome = cli_cfg(&gw.cfg, &["outbox", "decide-locally"]).into();
    assert_eq!(busy.code, Some(3), "{busy}");
    assert!(daemon.terminate().success(), "{}", daemon.log_digest());
    assert_eq!(count(&outbox_status(&gw.cfg), "unresolved"), 3);

    let out: Outcome = cli_cfg(&gw.cfg, &["outbox", "decide-locally"]).into();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.stdout
            .contains("3 unresolved scans handed to this gateway's own store; decided 3: committed 2, suppressed 1"),
        "{out}"
    );
    let status = outbox_status(&gw.cfg);
    assert_eq!(
        (count(&status, "unresolved"), count(&status, "committed")),
        (0, 2),
        "{status}"
    );
    assert_eq!(ledger(&gw.cfg).len(), 2);
    audit_verify(&gw.cfg);
    // The trail says how these were decided: the pick and its echo each
    // name the takeover, after the record of their first, unresolved round.
    let take1 = &ledger(&gw.cfg)[0];
    let uuid = take1["scan_uuid"].as_str().unwrap();
    let trace: Outcome = cli_cfg(&gw.cfg, &["audit", "trace", uuid]).into();
    assert_eq!(trace.code, Some(0), "{trace}");
    assert_eq!(
        trace
            .stdout
            .matches("(decided by this gateway's own store (scangate outbox decide-locally)")
            .count(),
        2,
        "{trace}"
    );
    assert!(trace.stdout.contains("echo suppressed"), "{trace}");
    // Two transmissions, each audited twice (unresolved, then decided).
    assert!(
        trace
            .stdout
            .contains("2 transmission(s), 1 ledger entry (4 audit records)"),
        "{trace}"
    );
}

#[test]
fn decide_locally_is_refused_while_redis_is_configured() {
    let dir = tempdir("takeover-redis");
    let config = dir.path().join("scangate.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nstate_dir = {:?}\n[redis]\nurl = \"redis://127.0.0.1:1/\"\n",
            dir.path().join("state")
        ),
    )
    .unwrap();
    let out: Outcome = cli_cfg(&config, &["outbox", "decide-locally"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("remove [redis] first"), "{out}");
    assert!(!dir.path().join("state").exists(), "nothing was created");
}

#[test]
fn decide_locally_on_a_gateway_that_never_had_a_facility_store_adds_no_note() {
    let dir = tempdir("takeover-none");
    let state = dir.path().join("state");
    {
        // Admitted, never decided (the daemon stopped in between).
        let mut store = Store::open(&state).unwrap();
        store
            .admit("test-pharmacy", &[read_at(&dscsa("ONLY1"), 0)])
            .unwrap();
    }
    let config = write_config(dir.path(), &state, 3000, &[]);
    let out: Outcome = cli_cfg(&config, &["outbox", "decide-locally"]).into();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.stdout.contains(
            "0 unresolved scans handed to this gateway's own store; decided 1: committed 1"
        ),
        "{out}"
    );
    let records = audit_records(&open_db(&state));
    let record: serde_json::Value = serde_json::from_str(&records[0]).unwrap();
    let reason = record["reason"].as_str();
    assert_eq!(reason, None, "nothing was taken over from a facility store");
}
