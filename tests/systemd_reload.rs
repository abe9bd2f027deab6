//! `systemctl reload` = SIGHUP to `scangate run`, with PTY scanners: a
//! scanner added while another keeps scanning (every scan of it ACKed
//! across the reload, none lost or doubled), one removed and one changed
//! without touching the third, a change that needs a restart refused
//! (naming the key), a broken file (naming it) keeping the running
//! configuration. SIGHUP never kills the daemon; `RELOADING=1` and
//! `READY=1` frame each reload on the notify socket.

use crate::util::*;
use nix::sys::signal::Signal;
use scangate::pty::VirtualScanner;
use std::path::Path;

fn hup(d: &Daemon) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(d.pid() as i32), Signal::SIGHUP)
        .expect("SIGHUP");
}

fn holds(d: &Daemon, path: &Path) -> bool {
    open_files(d.pid()).iter().any(|p| p == path)
}

/// Send a pick and wait for its ACK.
fn scan_acked(vs: &mut VirtualScanner, serial: &str) {
    vs.send(&frame(&dscsa(serial))).unwrap();
    assert_eq!(replies(vs, 1).0, [ACK], "{serial}");
}

/// The ledger's serials of `scanner`, sorted.
fn serials(cfg: &Path, scanner: &str) -> Vec<String> {
    let mut v: Vec<String> = ledger(cfg)
        .iter()
        .filter(|e| e["scanner"] == scanner)
        .map(|e| e["serial"].as_str().unwrap_or_default().to_string())
        .collect();
    v.sort();
    v
}

/// A gateway with one ACKing scanner, `counter-a`, its daemon started with
/// a notify socket in the gateway's directory and its `READY=1` come: the
/// gateway, counter-a's PTY, the socket and the daemon.
fn counter_a_ready(prefix: &str) -> (Gateway, VirtualScanner, NotifySocket, Daemon) {
    let mut gw = Gateway::builder(prefix)
        .pty(ScannerSpec::named("counter-a").ack())
        .build();
    let [a] = gw.take_scanners();
    let socket = NotifySocket::bind(&gw.dir);
    let d = gw.spawn_with_env(&[("NOTIFY_SOCKET", socket.path())]);
    socket.wait_for("READY", "1", 1);
    (gw, a, socket, d)
}

/// The first line of the daemon's log that contains `needle`.
fn logged(d: &Daemon, needle: &str) -> String {
    d.log()
        .lines()
        .find(|l| l.contains(needle))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("nothing logged with {needle:?}\n{}", d.log_digest()))
}

/// How often the log says scanner `name` connected.
fn connects(d: &Daemon, name: &str) -> usize {
    d.log()
        .lines()
        .filter(|l| l.contains("scanner connected") && l.contains(&format!("scanner={name}")))
        .count()
}

#[test]
fn a_scanner_added_by_reload_starts_while_the_first_keeps_scanning() {
    let (gw, mut a, socket, mut d) = counter_a_ready("sg-reload-add");
    let mut b = VirtualScanner::new().unwrap();
    let path_a = a.path().to_owned();
    let spec_a = || ScannerSpec::new("counter-a", &path_a).ack();
    for i in 0..5 {
        scan_acked(&mut a, &format!("ADD-A-{i:03}"));
    }
    write_serial_config(
        &gw.dir,
        &gw.state,
        3000,
        &[spec_a(), ScannerSpec::new("counter-b", b.path()).ack()],
    );
    // A scan in flight while the reload runs.
    a.send(&frame(&dscsa("ADD-A-005"))).unwrap();
    hup(&d);
    assert_eq!(replies(&mut a, 1).0, [ACK], "ADD-A-005");
    socket.wait_for("RELOADING", "1", 1);
    socket.wait_for("READY", "1", 2);
    d.wait_open(&[b.path()]);
    for i in 6..10 {
        scan_acked(&mut a, &format!("ADD-A-{i:03}"));
    }
    scan_acked(&mut b, "ADD-B-000");
    scan_acked(&mut b, "ADD-B-001");
    assert!(d.log().contains("configuration reloaded: added counter-b"));
    assert_eq!(connects(&d, "counter-a"), 1, "counter-a untouched");
    socket.wait_status("counting the new scanner", |l| {
        l.starts_with("2/2 scanners up")
    });
    assert!(d.terminate().success(), "{}", d.log_digest());
    let st = wait_all_decided(&gw.cfg, 12);
    assert_eq!(count(&st, "committed"), 12, "none doubled: {st}");
    let want: Vec<String> = (0..10).map(|i| format!("ADD-A-{i:03}")).collect();
    assert_eq!(serials(&gw.cfg, "counter-a"), want);
    assert_eq!(serials(&gw.cfg, "counter-b"), ["ADD-B-000", "ADD-B-001"]);
    audit_verify(&gw.cfg);
}

#[test]
fn a_reload_removes_one_scanner_and_restarts_a_changed_one_alone() {
    let mut gw = Gateway::builder("sg-reload-rm")
        .pty(ScannerSpec::named("counter-a").ack())
        .pty(ScannerSpec::named("counter-b").ack())
        .pty(ScannerSpec::named("counter-c").ack())
        .build();
    let mut d = gw.launch();
    let [mut a, b, c1] = gw.take_scanners();
    let mut c2 = VirtualScanner::new().unwrap();
    scan_acked(&mut a, "RM-A-000");
    write_serial_config(
        &gw.dir,
        &gw.state,
        3000,
        &[
            ScannerSpec::new("counter-a", a.path()).ack(),
            ScannerSpec::new("counter-c", c2.path()).ack(),
        ],
    );
    hup(&d);
    d.wait_open(&[c2.path()]);
    wait_until("counter-b and the old device of counter-c closed", || {
        !holds(&d, b.path()) && !holds(&d, c1.path())
    });
    assert!(
        d.log()
            .contains("configuration reloaded: removed counter-b; changed counter-c")
    );
    scan_acked(&mut a, "RM-A-001");
    scan_acked(&mut c2, "RM-C-000");
    assert_eq!(connects(&d, "counter-a"), 1, "counter-a untouched");
    assert!(d.terminate().success(), "{}", d.log_digest());
    wait_all_decided(&gw.cfg, 3);
    assert_eq!(serials(&gw.cfg, "counter-a"), ["RM-A-000", "RM-A-001"]);
    assert_eq!(serials(&gw.cfg, "counter-c"), ["RM-C-000"]);
}

#[test]
fn a_key_that_needs_a_restart_or_a_broken_file_is_refused_and_the_daemon_runs_on() {
    let (gw, mut a, socket, mut d) = counter_a_ready("sg-reload-refuse");
    let mut b = VirtualScanner::new().unwrap();
    let both = [
        ScannerSpec::new("counter-a", a.path()).ack(),
        ScannerSpec::new("counter-b", b.path()).ack(),
    ];

    // Another window (and a scanner): refused as a whole.
    write_serial_config(&gw.dir, &gw.state, 5000, &both);
    hup(&d);
    socket.wait_for("READY", "1", 2);
    let refused = logged(&d, "reload refused");
    assert!(
        refused.contains(" WARN ") && refused.contains("`dedup.window_ms`"),
        "{refused}"
    );
    assert!(!holds(&d, b.path()), "nothing of a refused reload applied");
    scan_acked(&mut a, "REF-A-000");

    // A broken file: an error naming it, the running configuration kept.
    std::fs::write(&gw.cfg, "[gateway\nid = ").unwrap();
    hup(&d);
    socket.wait_for("READY", "1", 3);
    let broken = logged(&d, "reload refused: configuration error");
    assert!(
        broken.contains(" ERROR ")
            && broken.contains("(line 1)")
            && broken.contains(&gw.cfg.display().to_string()),
        "{broken}"
    );
    scan_acked(&mut a, "REF-A-001");

    // Fixed: the next reload applies.
    write_serial_config(&gw.dir, &gw.state, 3000, &both);
    hup(&d);
    d.wait_open(&[b.path()]);
    scan_acked(&mut b, "REF-B-000");
    assert!(d.terminate().success(), "{}", d.log_digest());
    wait_all_decided(&gw.cfg, 3);
}
