//! A new gateway can never be bricked: a kill at any moment of its very
//! first start leaves a state directory the next start takes as never
//! started (it removes what was left and goes on), never one it refuses as
//! a lost database; and what an older scangate left when its first start
//! was cut short is recognised the same way. A database that really was
//! lost (`state-id` says one existed) is still refused (the control: the
//! check that lets these starts through still refuses that).
//!
//! Real daemon, real PTY scanner, real SQLite files, SIGKILL.

use crate::util::*;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

/// A gateway with one ACKing PTY scanner, never started.
fn gateway(prefix: &str) -> Gateway {
    Gateway::builder(prefix)
        .pty(ScannerSpec::named("counter-1").ack())
        .build()
}

/// The files in the state directory (name, size), for messages.
fn listing(state: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = fs::read_dir(state)
        .map(|d| {
            d.flatten()
                .map(|e| {
                    let len = e.metadata().map_or(0, |m| m.len());
                    (e.file_name().to_string_lossy().into_owned(), len)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Start the gateway: it must come up (`READY=1`), take a scan, ACK it and
/// commit it to the ledger, stop with exit 0, and its audit trail verify.
/// `n`: the scans committed so far, this one included.
fn comes_up(gw: &mut Gateway, socket: &NotifySocket, n: usize, why: &str) {
    let before = socket.values("READY").len();
    let mut daemon = gw.spawn_with_env(&[("NOTIFY_SOCKET", socket.path())]);
    // (It exits at once if it refuses the state directory: said here.)
    daemon.wait_open(&gw.pty_paths());
    socket.wait_for("READY", "1", before + 1);
    gw.send(&dscsa(&format!("F{n:07}")));
    assert_eq!(gw.replies(1), vec![ACK], "{why}: the scan is ACKed");
    assert_eq!(
        daemon.terminate().code(),
        Some(0),
        "{why}\n{}",
        daemon.log_digest()
    );
    assert_eq!(
        ledger(&gw.cfg).len(),
        n,
        "{why}: every scan is in the ledger"
    );
    let verify = audit_verify(&gw.cfg);
    assert_eq!(verify.code, Some(0), "{why}: audit verify: {verify}");
}

/// Spawn the first start and kill it (SIGKILL) the moment `ready(state)`
/// holds, or after `limit`; returns whether it held (the cut came when
/// meant) and what the state directory held then.
fn kill_when(
    gw: &Gateway,
    limit: Duration,
    ready: impl Fn(&Path) -> bool,
) -> (bool, Vec<(String, u64)>) {
    let mut daemon = gw.spawn_with_env(&[]);
    let start = Instant::now();
    let mut hit = false;
    while !hit && start.elapsed() < limit {
        hit = ready(&gw.state);
    }
    daemon.kill9();
    (hit, listing(&gw.state))
}

/// How long a first start takes here, spawn to `READY=1` (the span the
/// timed kills spread over).
fn first_start_time() -> Duration {
    let gw = gateway("scangate-first-probe-");
    let socket = NotifySocket::bind(&gw.dir);
    let t = Instant::now();
    let mut daemon = gw.spawn_with_env(&[("NOTIFY_SOCKET", socket.path())]);
    let ready = socket.wait_for("READY", "1", 1);
    assert_eq!(daemon.terminate().code(), Some(0));
    ready - t
}

/// When a cut comes: the moment this holds of the state directory.
type Cut = Box<dyn Fn(&Path) -> bool>;

#[test]
fn a_kill_at_any_moment_of_the_first_start_never_bricks_the_gateway() {
    let span = first_start_time();
    // Killed the moment each file of the start appears (the lock, the
    // database being built, its log, the database in place, the identity
    // file), and at times spread from spawn to READY.
    // (The last two live for a moment only: a cut may miss them.)
    let steps: [&str; 6] = [
        "scangate.lock",
        "scangate.db.new",
        "scangate.db",
        "state-id",
        "scangate.db.new-wal",
        "state-id.tmp",
    ];
    let must_hit = 4;
    let mut cuts: Vec<(String, Cut)> = steps
        .iter()
        .map(|f| {
            let f = f.to_string();
            (
                format!("when {f} appeared"),
                Box::new(move |s: &Path| s.join(&f).exists()) as Cut,
            )
        })
        .collect();
    for i in 0..12u32 {
        let at = span * i / 10;
        cuts.push((
            format!("{} ms after spawn", at.as_millis()),
            Box::new(|_: &Path| false),
        ));
    }
    for (i, (when, ready)) in cuts.iter().enumerate() {
        let mut gw = gateway("scangate-first-kill-");
        let socket = NotifySocket::bind(&gw.dir);
        let limit = if i < steps.len() {
            span * 3
        } else {
            span * (i - steps.len()) as u32 / 10
        };
        let (hit, left) = kill_when(&gw, limit, ready);
        assert!(hit || i >= must_hit, "the cut {when} came: {left:?}");
        comes_up(
            &mut gw,
            &socket,
            1,
            &format!("the start after a kill {when} (it left {left:?})"),
        );
    }

    // One state directory, its first start killed again and again (each
    // start cleaning up after the one before, and killed in turn), then
    // left to come up.
    let mut gw = gateway("scangate-first-kills-");
    let socket = NotifySocket::bind(&gw.dir);
    let mut left = Vec::new();
    for i in 0..8u32 {
        left.push(kill_when(&gw, span * i / 6, |_| false).1);
    }
    comes_up(
        &mut gw,
        &socket,
        1,
        &format!("after 8 kills leaving {left:?}"),
    );
    // ...and from then on it is a database with its identity: lost, it is
    // refused (exit 3), never started afresh.
    comes_up(&mut gw, &socket, 2, "a second start");
    fs::remove_file(gw.state.join("scangate.db")).unwrap();
    let mut daemon = gw.spawn_with_env(&[]);
    let code = daemon.wait_exit().code();
    assert_eq!(
        code,
        Some(3),
        "a lost database is refused\n{}",
        daemon.log()
    );
    assert!(daemon.log().contains("is missing"), "{}", daemon.log());
}

/// The files an unfinished first start leaves: one case.
struct Leftovers {
    what: &'static str,
    make: fn(&Path),
}

/// An empty SQLite database (no table), as `Connection::open` and one
/// write leave it: 4096 bytes or more.
fn empty_database(path: &Path, wal: bool) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mode = if wal { "WAL" } else { "DELETE" };
    conn.pragma_update(None, "journal_mode", mode).unwrap();
    conn.execute_batch("CREATE TABLE t (x); DROP TABLE t;")
        .unwrap();
}

/// What older scangates left, and what a cut in this
/// one's own building can: each must be taken as never started.
const CASES: &[Leftovers] = &[
    Leftovers {
        what: "a 0-byte database, a 512-byte journal and the lock (kill -9 1-8 ms in)",
        make: |s| {
            fs::write(s.join("scangate.db"), b"").unwrap();
            fs::write(s.join("scangate.db-journal"), [0u8; 512]).unwrap();
            fs::write(s.join("scangate.lock"), b"").unwrap();
        },
    },
    Leftovers {
        what: "a database of 4096 zero bytes (its size reached the disk, its page did not)",
        make: |s| {
            fs::write(s.join("scangate.db"), [0u8; 4096]).unwrap();
            fs::write(s.join("scangate.db-journal"), [0u8; 512]).unwrap();
        },
    },
    Leftovers {
        what: "only the lock (a power cut a few ms in)",
        make: |s| fs::write(s.join("scangate.lock"), b"").unwrap(),
    },
    Leftovers {
        what: "an empty database with a header-only write-ahead log",
        make: |s| {
            empty_database(&s.join("scangate.db"), true);
            let _ = fs::remove_file(s.join("scangate.db-shm"));
            fs::write(s.join("scangate.db-wal"), [0u8; 32]).unwrap();
        },
    },
    Leftovers {
        what: "an empty database with a hot rollback journal (cut while switching to WAL)",
        make: |s| {
            // A transaction under way, copied as a crash leaves it: the
            // journal holds the original page, nobody holds the lock.
            let tmp = s.join("making");
            fs::create_dir(&tmp).unwrap();
            empty_database(&tmp.join("scangate.db"), false);
            let conn = rusqlite::Connection::open(tmp.join("scangate.db")).unwrap();
            conn.execute_batch("BEGIN; CREATE TABLE t (x); INSERT INTO t VALUES (1);")
                .unwrap();
            let journal = tmp.join("scangate.db-journal");
            assert!(
                fs::metadata(&journal).unwrap().len() > 0,
                "a journal under way"
            );
            fs::copy(tmp.join("scangate.db"), s.join("scangate.db")).unwrap();
            fs::copy(&journal, s.join("scangate.db-journal")).unwrap();
            drop(conn);
            fs::remove_dir_all(&tmp).unwrap();
        },
    },
    Leftovers {
        what: "a half-built database under its temporary name, with its log",
        make: |s| {
            empty_database(&s.join("scangate.db.new"), true);
            fs::write(s.join("scangate.db.new-wal"), [7u8; 600]).unwrap();
            fs::write(s.join("scangate.lock"), b"").unwrap();
        },
    },
];

#[test]
fn what_a_first_start_cut_short_left_is_removed_with_a_log_line() {
    for case in CASES {
        let mut gw = gateway("scangate-first-left-");
        fs::create_dir_all(&gw.state).unwrap();
        (case.make)(&gw.state);
        let left = listing(&gw.state);
        let socket = NotifySocket::bind(&gw.dir);
        comes_up(&mut gw, &socket, 1, case.what);
        let log = fs::read_to_string(&gw.log).unwrap();
        // (A lock alone is no leftover: every start takes it.)
        let removes = left.iter().any(|(f, _)| f != "scangate.lock");
        assert!(
            log.contains("an earlier first start was cut short") == removes,
            "{}: the start says what it removed\n{log}",
            case.what
        );
        // Each file it left (but the lock, and the database, which is the
        // new one now) is named with its size, and gone.
        let now = listing(&gw.state);
        for (f, len) in &left {
            // (Names the new database has too.)
            let reused = [
                "scangate.lock",
                "scangate.db",
                "scangate.db-wal",
                "scangate.db-shm",
            ];
            assert!(
                f == "scangate.lock" || log.contains(&format!("{f} ({len} B)")),
                "{}: names {f}\n{log}",
                case.what
            );
            assert!(
                reused.contains(&f.as_str()) || !now.iter().any(|(g, _)| g == f),
                "{}: {f} is gone: {left:?} -> {now:?}",
                case.what
            );
        }
    }
}

/// What looks like leftovers but may hold data is never removed: a
/// database file of zeros whose write-ahead log holds committed frames
/// (SQLite reads the database through them), and a database that is a
/// link to a disk not mounted.
#[test]
fn what_may_hold_data_is_never_taken_for_leftovers() {
    // The log of a database with rows, beside a zeroed database file.
    let gw = gateway("scangate-first-walframes-");
    fs::create_dir_all(&gw.state).unwrap();
    let making = gw.dir.join("making");
    fs::create_dir(&making).unwrap();
    let conn = rusqlite::Connection::open(making.join("scangate.db")).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    conn.execute_batch("CREATE TABLE picks (x); INSERT INTO picks VALUES (1), (2), (3);")
        .unwrap();
    let wal = fs::read(making.join("scangate.db-wal")).unwrap();
    assert!(wal.len() > 32, "frames in the log");
    fs::write(gw.state.join("scangate.db"), [0u8; 4096]).unwrap();
    fs::write(gw.state.join("scangate.db-wal"), &wal).unwrap();
    drop(conn);
    let mut daemon = gw.spawn_with_env(&[]);
    let code = daemon.wait_exit().code();
    assert_eq!(code, Some(3), "refused, not cleaned\n{}", daemon.log());
    // (SQLite may have folded the log into the file: the rows are there.)
    let rows: i64 = rusqlite::Connection::open(gw.state.join("scangate.db"))
        .unwrap()
        .query_row("SELECT count(*) FROM picks", [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("the rows are kept: {e}\n{}", daemon.log()));
    assert_eq!(rows, 3);

    // A link to a database (on a disk not mounted): never followed,
    // never taken for a missing database.
    let gw = gateway("scangate-first-link-");
    fs::create_dir_all(&gw.state).unwrap();
    std::os::unix::fs::symlink("/mnt/not-mounted/scangate.db", gw.state.join("scangate.db"))
        .unwrap();
    let mut daemon = gw.spawn_with_env(&[]);
    let code = daemon.wait_exit().code();
    assert_eq!(code, Some(3), "{}", daemon.log());
    assert!(
        daemon
            .log()
            .contains("is a symbolic link (to /mnt/not-mounted/scangate.db)"),
        "{}",
        daemon.log()
    );
    assert!(
        fs::read_link(gw.state.join("scangate.db")).is_ok(),
        "the link is left"
    );
}

#[test]
fn a_database_in_place_whose_identity_file_was_not_written_yet_is_opened() {
    // The cut between the rename and `state-id`: the database has its
    // identity, the file is written from it.
    let mut gw = gateway("scangate-first-noid-");
    let socket = NotifySocket::bind(&gw.dir);
    comes_up(&mut gw, &socket, 1, "the first start");
    let id = fs::read_to_string(gw.state.join("state-id")).unwrap();
    fs::remove_file(gw.state.join("state-id")).unwrap();
    comes_up(&mut gw, &socket, 2, "the start without state-id");
    assert_eq!(
        fs::read_to_string(gw.state.join("state-id"))
            .unwrap()
            .lines()
            .nth(1),
        id.lines().nth(1),
        "the same state_id"
    );
    let log = fs::read_to_string(&gw.log).unwrap();
    assert!(!log.contains("cut short"), "nothing was removed\n{log}");
}
