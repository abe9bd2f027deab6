//! Invariants 1, 2 and 7 across crashes: `scangate run` is killed with
//! SIGKILL (kill -9) several times while scans stream in, and restarted on the
//! same state directory and the same PTYs.
//!
//! The test plays three serial scanners with `ack = true`, each behaving like
//! a real ACK/NAK scanner: it sends one pick (unique serial), waits for the
//! ACK, and retransmits the same frame if the ACK does not come. Whenever an
//! ACK arrives, the test checks at that instant that the acknowledged frame
//! is already in the SQLite outbox (durable before acknowledged). At the end:
//! every pick is in the ledger exactly once, no scan is undecided, no
//! transmission was stored twice, each scan has exactly one audit record and
//! the chain verifies.

use crate::util::*;
use rusqlite::{Connection, OpenFlags};
use scangate::pty::VirtualScanner;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A retransmit after a crash must be judged an echo whatever the restart
/// costs on a loaded machine, so the window is generous; every pick has its
/// own serial, so no genuine re-dispense can be hidden by it.
const WINDOW_MS: u64 = 60_000;
/// How long a scanner waits for an ACK from a running daemon before it
/// retransmits. Counted from the later of the send and the daemon coming
/// (back) up, so a frame still buffered in the PTY across a restart is read
/// and ACKed once, never ACKed twice (the ACK byte carries no frame id).
const ACK_TIMEOUT: Duration = Duration::from_secs(2);
const SCANNERS: usize = 3;
const PICKS_PER_SCANNER: usize = 60;
/// Kill -9 when this many picks in total have been acknowledged.
const KILL_AT: [usize; 3] = [1, 45, 110];

/// `Some(since)` while a daemon is up (has the PTYs open).
type Link = Arc<Mutex<Option<Instant>>>;

fn serial_of(scanner: usize, pick: usize) -> String {
    format!("C{scanner}S{pick:04}")
}

fn scanner_name(scanner: usize) -> String {
    format!("counter-{scanner}")
}

#[derive(Default, Debug)]
struct ScannerLog {
    /// Transmissions per pick.
    transmissions: Vec<u32>,
    acked: Vec<bool>,
    /// ACK bytes beyond one per pick (a late ACK of an earlier transmission).
    extra_acks: usize,
    violations: Vec<String>,
}

/// Is the pick with `serial` from `scanner` in the outbox right now?
///
/// A miss is asked once more on a connection opened afresh before it
/// counts: under qemu-user, a read-only connection held across the
/// daemon's kill and restart once reported every later pick of one scanner
/// missing, and reruns did not repeat it. A scan the daemon did not commit
/// is missing on a fresh connection too.
fn in_outbox(db: &Path, conn: &mut Option<Connection>, scanner: &str, serial: &str) -> bool {
    if in_outbox_on(db, conn, scanner, serial) {
        return true;
    }
    *conn = None;
    in_outbox_on(db, conn, scanner, serial)
}

fn in_outbox_on(db: &Path, conn: &mut Option<Connection>, scanner: &str, serial: &str) -> bool {
    let deadline = Instant::now() + event_timeout();
    loop {
        if conn.is_none() {
            *conn = Connection::open_with_flags(
                db,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .ok();
            if let Some(c) = conn {
                let _ = c.busy_timeout(Duration::from_secs(5));
            }
        }
        let res = conn.as_ref().map(|c| {
            c.query_row(
                "SELECT count(*) FROM scans WHERE scanner = ?1 AND serial = ?2",
                [scanner, serial],
                |r| r.get::<_, i64>(0),
            )
        });
        match res {
            Some(Ok(n)) => return n > 0,
            // The query could not run (e.g. WAL recovery after the kill):
            // that is not an answer; ask again.
            _ if Instant::now() < deadline => {
                *conn = None;
                std::thread::sleep(POLL);
            }
            other => panic!("cannot query the outbox: {other:?}"),
        }
    }
}

fn play_scanner(
    idx: usize,
    mut vs: VirtualScanner,
    link: Link,
    db: PathBuf,
    acked_total: Arc<AtomicUsize>,
) -> (ScannerLog, VirtualScanner) {
    let name = scanner_name(idx);
    let mut log = ScannerLog {
        transmissions: vec![0; PICKS_PER_SCANNER],
        acked: vec![false; PICKS_PER_SCANNER],
        ..Default::default()
    };
    let mut conn = None;
    let give_up = Instant::now() + Duration::from_secs(120);
    for pick in 0..PICKS_PER_SCANNER {
        let serial = serial_of(idx, pick);
        let frame = format!("{}\r\n", dscsa(&serial)).into_bytes();
        let mut last_send;
        loop {
            // Only transmit to a running daemon (see ACK_TIMEOUT).
            if link.lock().unwrap().is_some() {
                break;
            }
            std::thread::sleep(POLL);
        }
        vs.send(&frame).unwrap();
        log.transmissions[pick] += 1;
        last_send = Instant::now();
        loop {
            let reply = vs.read_reply(Duration::from_millis(20)).unwrap();
            let acks = reply.iter().filter(|&&b| b == ACK).count();
            if reply.iter().any(|&b| b != ACK) {
                log.violations
                    .push(format!("{serial}: unexpected reply bytes {reply:02x?}"));
            }
            if acks > 0 {
                log.extra_acks += acks - 1;
                // Invariant 1: durable before acknowledged — check now.
                if !in_outbox(&db, &mut conn, &name, &serial) {
                    log.violations.push(format!(
                        "{serial}: ACK received but the scan is not in the outbox"
                    ));
                }
                log.acked[pick] = true;
                acked_total.fetch_add(1, Ordering::SeqCst);
                break;
            }
            if Instant::now() > give_up {
                log.violations.push(format!(
                    "{serial}: no ACK after {} transmissions; giving up",
                    log.transmissions[pick]
                ));
                return (log, vs);
            }
            let up_since = *link.lock().unwrap();
            if let Some(up) = up_since
                && Instant::now() > last_send.max(up) + ACK_TIMEOUT
            {
                vs.send(&frame).unwrap();
                log.transmissions[pick] += 1;
                last_send = Instant::now();
            }
        }
    }
    // The PTY goes back to the caller: closing it now would make the device
    // vanish under a daemon that is about to be restarted.
    (log, vs)
}

#[test]
fn kill_minus_9_while_scans_stream_loses_and_doubles_nothing() {
    let mut gw = Gateway::builder("scangate-crash-")
        .window_ms(WINDOW_MS)
        .ptys((0..SCANNERS).map(|i| ScannerSpec::named(&scanner_name(i)).ack()))
        .build();
    let db = gw.state.join("scangate.db");
    let scanners: [VirtualScanner; SCANNERS] = gw.take_scanners();

    let link: Link = Arc::new(Mutex::new(None));
    let acked = Arc::new(AtomicUsize::new(0));
    let mut daemon = gw.launch();
    *link.lock().unwrap() = Some(Instant::now());

    let players: Vec<_> = scanners
        .into_iter()
        .enumerate()
        .map(|(i, vs)| {
            let (link, db, acked) = (link.clone(), db.clone(), acked.clone());
            std::thread::spawn(move || play_scanner(i, vs, link, db, acked))
        })
        .collect();

    for (n, at) in KILL_AT.iter().enumerate() {
        wait_until(
            &format!("{at} picks acknowledged before kill #{}", n + 1),
            || acked.load(Ordering::SeqCst) >= *at,
        );
        // Frames from the other scanners are in flight right now.
        let st = daemon.kill9();
        *link.lock().unwrap() = None;
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&st),
            Some(9),
            "the daemon must have died of SIGKILL: {st}"
        );
        eprintln!(
            "kill #{} at {} acknowledged picks",
            n + 1,
            acked.load(Ordering::SeqCst)
        );
        daemon = gw.launch();
        *link.lock().unwrap() = Some(Instant::now());
    }

    let (logs, _ptys): (Vec<ScannerLog>, Vec<VirtualScanner>) =
        players.into_iter().map(|p| p.join().unwrap()).unzip();
    let violations: Vec<&String> = logs.iter().flat_map(|l| &l.violations).collect();
    assert!(
        violations.is_empty(),
        "scanner-side violations: {violations:#?}"
    );
    assert!(
        logs.iter().all(|l| l.acked.iter().all(|&a| a)),
        "every pick was acknowledged"
    );
    let total_tx: u32 = logs.iter().flat_map(|l| &l.transmissions).sum();
    let retransmits = total_tx as usize - SCANNERS * PICKS_PER_SCANNER;
    let extra_acks: usize = logs.iter().map(|l| l.extra_acks).sum();
    eprintln!("{total_tx} transmissions ({retransmits} retransmits), {extra_acks} extra ACKs");

    // Everything acknowledged is durable, so the outbox drains to nothing open.
    wait_until("no pending or unresolved scans", || {
        let st = outbox_status(&gw.cfg);
        count(&st, "pending") + count(&st, "unresolved") == 0
    });
    let exit = daemon.terminate();
    assert_eq!(exit.code(), Some(0), "SIGTERM must drain and exit 0");

    let st = outbox_status(&gw.cfg);
    eprintln!("outbox after the run: {st}");
    assert_eq!(count(&st, "pending"), 0, "{st}");
    assert_eq!(count(&st, "unresolved"), 0, "{st}");
    assert_eq!(
        count(&st, "rejected"),
        0,
        "no transmission may be torn into garbage by a crash: {st}"
    );
    assert_eq!(
        count(&st, "committed"),
        (SCANNERS * PICKS_PER_SCANNER) as i64,
        "{st}"
    );

    // Ledger: each pick exactly once.
    let ledger = ledger(&gw.cfg);
    let mut per_pick: HashMap<(String, String), usize> = HashMap::new();
    for e in &ledger {
        let key = (
            e["scanner"].as_str().unwrap().to_string(),
            e["serial"].as_str().unwrap_or("?").to_string(),
        );
        *per_pick.entry(key).or_default() += 1;
    }
    for (i, log) in logs.iter().enumerate() {
        for pick in 0..PICKS_PER_SCANNER {
            let key = (scanner_name(i), serial_of(i, pick));
            assert_eq!(
                per_pick.get(&key).copied().unwrap_or(0),
                1,
                "acknowledged pick {key:?} ({} transmissions) must be in the ledger exactly once",
                log.transmissions[pick]
            );
        }
    }
    assert_eq!(
        ledger.len(),
        SCANNERS * PICKS_PER_SCANNER,
        "no extra entries"
    );

    // Outbox rows: no transmission stored twice, no scan decided twice.
    let c = open_db(&gw.state);
    let (rows, distinct): (i64, i64) = c
        .query_row(
            "SELECT count(*), count(DISTINCT scan_uuid) FROM scans",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(rows, distinct, "every outbox row has its own scan_uuid");
    assert!(
        rows as u32 <= total_tx,
        "{rows} outbox rows but only {total_tx} transmissions: a frame was stored twice"
    );
    for (i, log) in logs.iter().enumerate() {
        for pick in 0..PICKS_PER_SCANNER {
            let n: i64 = c
                .query_row(
                    "SELECT count(*) FROM scans WHERE scanner = ?1 AND serial = ?2",
                    [scanner_name(i), serial_of(i, pick)],
                    |r| r.get(0),
                )
                .unwrap();
            assert!(
                n >= 1 && n as u32 <= log.transmissions[pick],
                "{}: {n} outbox rows for {} transmissions",
                serial_of(i, pick),
                log.transmissions[pick]
            );
        }
    }
    let bad_audit: Vec<(String, i64)> = c
        .prepare(
            "SELECT s.scan_uuid, (SELECT count(*) FROM audit a WHERE a.scan_uuid = s.scan_uuid) n
             FROM scans s WHERE n <> 1",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        bad_audit.is_empty(),
        "each scan has exactly one audit record: {bad_audit:?}"
    );
    let audit_rows: i64 = c
        .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .unwrap();
    assert_eq!(audit_rows, rows, "one audit record per decision");
    let orphans: i64 = c
        .query_row(
            "SELECT count(*) FROM ledger l LEFT JOIN scans s ON s.scan_uuid = l.scan_uuid
             WHERE s.state IS NOT 'committed'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(orphans, 0, "every ledger entry is a committed scan");
    drop(c);

    let verify = audit_verify(&gw.cfg);
    assert!(
        verify
            .stdout
            .contains(&format!("audit chain intact: {rows} records")),
        "{verify}"
    );
}
