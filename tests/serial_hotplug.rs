//! Hot-plug on the real binary. The daemon is configured with a symlink (as
//! udev's `/dev/scangate/<name>`) that points at a PTY slave.
//!
//! 1. Unplug: the scanner side of the PTY is closed (the tty hangs up, reads
//!    fail with EIO) while half a frame is on the line. The daemon logs the
//!    disconnect once and retries.
//! 2. Meanwhile another scanner keeps scanning: every one of its scans
//!    commits during the outage.
//! 3. Replug: a new PTY (another /dev/pts number) behind the **same symlink
//!    path**, re-pointed atomically. Reading resumes on the new device.
//! 4. Re-point again while the old PTY is still alive (udev moved the name):
//!    the daemon follows the path to the new device.
//!
//! Nothing read before the unplug is lost: every acknowledged scan is in
//! the ledger exactly once; the half frame was never a read and is not
//! stored as anything.

use crate::util::*;
use scangate::pty::VirtualScanner;
use std::path::{Path, PathBuf};

/// Point `link` at `target` atomically (new link + rename over the old).
fn repoint(link: &Path, target: &Path) {
    let tmp = link.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

/// Does `pid` hold `path` open right now?
fn holds(pid: u32, path: &Path) -> bool {
    open_files(pid).iter().any(|p| p == path)
}

/// Send a pick and wait for its ACK.
fn scan_acked(vs: &mut VirtualScanner, serial: &str) {
    vs.send(&frame(&dscsa(serial))).unwrap();
    assert_eq!(replies(vs, 1).0, [ACK], "{serial}");
}

#[test]
fn unplug_and_replug_behind_the_same_symlink_resumes_and_loses_nothing() {
    let mut gw = Gateway::builder("scangate-hotplug-")
        .pty_behind("scangate/counter-1", ScannerSpec::named("counter-1").ack())
        .pty(ScannerSpec::named("counter-2").ack())
        .build();
    let link = gw.dir.join("scangate/counter-1");
    let mut daemon = gw.launch();
    let [mut first, mut other] = gw.take_scanners();

    let mut committed: Vec<(&str, String)> = Vec::new();
    for i in 0..5 {
        let s = format!("BEFORE{i}");
        scan_acked(&mut first, &s);
        committed.push(("counter-1", s));
    }
    scan_acked(&mut other, "OTHER0");
    committed.push(("counter-2", "OTHER0".into()));

    // Unplug with half a frame on the line.
    let half = dscsa("HALF01");
    first.send(&half.as_bytes()[..15]).unwrap();
    // The next device exists before the unplug so that it gets another
    // /dev/pts number than the one that goes away.
    let mut second = VirtualScanner::new().unwrap();
    let first_path: PathBuf = first.path().to_owned();
    drop(first);
    wait_until("the daemon to notice the unplug", || {
        daemon.log().contains("scanner disconnected")
    });
    assert!(!holds(daemon.pid(), &first_path));

    // The other scanner is not affected by the outage.
    for i in 1..=3 {
        let s = format!("OTHER{i}");
        scan_acked(&mut other, &s);
        committed.push(("counter-2", s));
    }

    // Replug: the same symlink now leads to a new PTY.
    repoint(&link, second.path());
    daemon.wait_open(&[second.path()]);
    scan_acked(&mut second, "HALF01"); // the scanner resends what it never finished
    committed.push(("counter-1", "HALF01".into()));
    for i in 0..3 {
        let s = format!("AFTER{i}");
        scan_acked(&mut second, &s);
        committed.push(("counter-1", s));
    }

    // udev re-points the name while the old device is still there.
    let mut third = VirtualScanner::new().unwrap();
    repoint(&link, third.path());
    daemon.wait_open(&[third.path()]);
    wait_until("the daemon to let go of the old device", || {
        !holds(daemon.pid(), second.path())
    });
    scan_acked(&mut third, "MOVED0");
    committed.push(("counter-1", "MOVED0".into()));

    wait_all_decided(&gw.cfg, committed.len() as i64);
    assert_eq!(daemon.terminate().code(), Some(0));

    let st = outbox_status(&gw.cfg);
    assert_eq!(
        count(&st, "rejected"),
        0,
        "the half frame is not a scan: {st}"
    );
    let ledger = ledger(&gw.cfg);
    assert_eq!(ledger.len(), committed.len(), "{ledger:#?}");
    for (scanner, serial) in &committed {
        assert_eq!(
            ledger
                .iter()
                .filter(|e| e["scanner"] == *scanner && e["serial"] == serial.as_str())
                .count(),
            1,
            "{scanner}/{serial} must be in the ledger exactly once"
        );
    }

    // Logged once per outage, not once per retry.
    let log = daemon.log();
    let warns = |what: &str| {
        log.lines()
            .filter(|l| l.contains(" WARN ") && l.contains(what))
            .count()
    };
    assert_eq!(warns("scanner disconnected"), 2, "{}", daemon.log_digest());
    // (Whether the half frame was read before the hang-up is up to the
    // kernel; if it was, the loss of the partial frame is logged once.)
    assert!(warns("went away mid-frame") <= 1, "{}", daemon.log_digest());
    assert!(warns("cannot open scanner") <= 1, "{}", daemon.log_digest());
    assert!(
        log.contains("now leads to another device"),
        "{}",
        daemon.log_digest()
    );
    assert_eq!(
        warns("scanner=counter-2"),
        0,
        "the other scanner never noticed: {}",
        daemon.log_digest()
    );
}
