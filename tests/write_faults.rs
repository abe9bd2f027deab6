//! The database refuses writes (as a full or failing disk would): the daemon
//! keeps the scans it read, sends no ACK, retries, and stores them once the
//! fault clears; at shutdown it reports what it could not store.
//! The fault is injected with a real SQLite trigger on the real file.

use crate::util::*;
use std::time::Duration;

fn inject(state: &std::path::Path) {
    let c = rusqlite::Connection::open(state.join("scangate.db")).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c.execute_batch(
        "CREATE TRIGGER disk_full BEFORE INSERT ON scans
         BEGIN SELECT RAISE(ABORT, 'injected: disk full'); END;",
    )
    .unwrap();
}

fn clear(state: &std::path::Path) {
    let c = rusqlite::Connection::open(state.join("scangate.db")).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c.execute_batch("DROP TRIGGER disk_full").unwrap();
}

fn errors_logged(d: &Daemon) -> usize {
    d.log().matches("cannot write scans to the outbox").count()
}

#[test]
fn no_ack_while_the_database_refuses_writes_then_stored_once() {
    let mut gw = Gateway::builder("scangate-faults-")
        .pty(ScannerSpec::named("counter-1").ack())
        .build();
    let mut daemon = gw.launch();
    let [mut scanner] = gw.take_scanners();
    inject(&gw.state);

    scanner
        .send(format!("{}\r", dscsa("SN1")).as_bytes())
        .unwrap();
    wait_until("the failed outbox write to be logged", || {
        errors_logged(&daemon) >= 1
    });
    assert_eq!(
        scanner.read_reply(Duration::ZERO).unwrap(),
        Vec::<u8>::new(),
        "an ACK went out for a scan that is not durable"
    );
    assert_eq!(count(&outbox_status(&gw.cfg), "pending"), 0);

    clear(&gw.state);
    let reply = scanner.read_reply(event_timeout()).unwrap();
    assert_eq!(reply, [ACK], "one ACK once the write succeeded");
    wait_all_decided(&gw.cfg, 1);
    assert_eq!(ledger(&gw.cfg).len(), 1);

    // A scan that still cannot be stored when shutdown comes is reported
    // loudly (exit 4), not silently dropped and not hung on.
    inject(&gw.state);
    scanner
        .send(format!("{}\r", dscsa("SN2")).as_bytes())
        .unwrap();
    let before = errors_logged(&daemon);
    wait_until("the second failed write to be logged", || {
        errors_logged(&daemon) > before
    });
    let status = daemon.terminate();
    assert_eq!(status.code(), Some(4), "{}", daemon.log_digest());
    let log = daemon.log();
    assert!(log.contains("could not be written"), "{log}");
    assert!(log.contains("scangate.db"), "{log}");
    assert!(log.contains("NOT stored"), "{log}");
    assert_eq!(
        scanner.read_reply(Duration::ZERO).unwrap(),
        Vec::<u8>::new()
    );
}
