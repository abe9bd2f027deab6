//! `Type=notify` against the real protocol: the test binds a unix datagram
//! socket and hands it to `scangate run` as `NOTIFY_SOCKET` (with
//! `WATCHDOG_USEC`), as systemd does.
//!
//! - `READY=1` comes once the outbox is open and the scanner is up (its
//!   status line says so), `STATUS=` follows what happens, `WATCHDOG=1`
//!   comes every half interval, `STOPPING=1` at SIGTERM.
//! - The watchdog proves progress: one thread of the daemon — the outbox
//!   writer, or the claimer's live lane — is stopped with ptrace (a real
//!   wedge of that loop alone; SIGSTOP would stop the whole process) while
//!   a scan waits for it: the pings stop, and resume when it moves again.
//! - A facility Redis that is down is no wedge: scans wait as unresolved
//!   and the pings go on.

use crate::util::*;
use nix::sys::ptrace;
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use scangate::pty::VirtualScanner;
use std::path::Path;
use std::time::{Duration, Instant};

/// `WATCHDOG_USEC` of these tests: pings every second.
const WATCHDOG_USEC: &str = "2000000";
/// systemd's deadline: no two pings further apart than this.
const WATCHDOG: Duration = Duration::from_secs(2);
/// A loop is wedged after this long without progress while it has work
/// (`daemon::MIN_STALL`; the interval is shorter).
const STALL: Duration = Duration::from_secs(10);

/// Start `gw`'s daemon with `socket` as its `NOTIFY_SOCKET` (and
/// `WATCHDOG_USEC`), waiting for nothing: `READY=1` is what is tested.
fn start(gw: &Gateway, socket: &NotifySocket) -> Daemon {
    gw.spawn_with_env(&[
        ("NOTIFY_SOCKET", socket.path()),
        ("WATCHDOG_USEC", WATCHDOG_USEC),
    ])
}

/// A gateway with one ACKing PTY scanner, started with a notify socket.
struct Notified {
    gw: Gateway,
    vs: VirtualScanner,
    socket: NotifySocket,
    d: Daemon,
}

/// The scanner is configured by a link in the test's directory (as udev's
/// `/dev/scangate/<name>`), so an unplugged one stays gone: its PTY's
/// number may be another test's next.
fn notified(prefix: &str) -> Notified {
    let mut gw = Gateway::builder(prefix)
        .pty_behind("counter-1", ScannerSpec::named("counter-1").ack())
        .build();
    let [vs] = gw.take_scanners();
    let socket = NotifySocket::bind(&gw.dir);
    let d = start(&gw, &socket);
    Notified { gw, vs, socket, d }
}

/// The thread of `pid` named `name` (`/proc/<pid>/task/*/comm`).
fn thread(pid: u32, name: &str) -> Pid {
    let mut found = None;
    wait_until(&format!("a thread {name} in scangate"), || {
        found = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|e| e.ok())
            .find(|e| {
                std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == name)
            })
            .and_then(|e| e.file_name().to_str()?.parse().ok());
        found.is_some()
    });
    Pid::from_raw(found.expect("found"))
}

/// One thread stopped with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT stop
/// that thread alone); resumed and detached on drop.
struct Frozen(Pid);

impl Frozen {
    fn thread(tid: Pid) -> Frozen {
        ptrace::seize(tid, ptrace::Options::empty()).expect("PTRACE_SEIZE (run as root)");
        ptrace::interrupt(tid).expect("PTRACE_INTERRUPT");
        waitpid(tid, Some(WaitPidFlag::__WALL)).expect("the thread stops");
        Frozen(tid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = ptrace::detach(self.0, None);
    }
}

/// Wait until the daemon has sent no `WATCHDOG=1` for `quiet`.
fn wait_no_pings_for(socket: &NotifySocket, quiet: Duration) {
    let since = Instant::now();
    wait_until_for(&format!("no WATCHDOG=1 for {quiet:?}"), quiet * 3, || {
        let last = socket
            .values("WATCHDOG")
            .last()
            .map_or(since, |(_, t)| (*t).max(since));
        last.elapsed() >= quiet
    });
}

#[test]
fn ready_comes_with_the_outbox_open_and_the_scanner_up_then_status_pings_and_stopping() {
    let Notified {
        gw,
        mut vs,
        socket,
        mut d,
    } = notified("sg-notify");
    let ready = socket.wait_for("READY", "1", 1);
    let first = socket
        .all()
        .into_iter()
        .find(|n| n.get("READY") == Some("1"))
        .expect("READY=1");
    // The status sent with READY=1 was made when it was sent.
    assert_eq!(
        first.get("STATUS"),
        Some("1/1 scanners up, 0 undecided, embedded store"),
        "{first:?}"
    );
    assert!(
        open_files(d.pid()).contains(&gw.state.join("scangate.db")),
        "the outbox is open"
    );
    // Ready means ready: a scan right now is made durable and ACKed.
    vs.send(&frame(&dscsa("NOTIFY001"))).unwrap();
    assert_eq!(replies(&mut vs, 1).0, [ACK]);
    socket.wait_pings(ready, 3);
    assert!(
        socket.longest_ping_gap(ready) < WATCHDOG,
        "pings every half WATCHDOG_USEC, within it"
    );
    // The status follows the scanner: unplugged.
    std::fs::remove_file(gw.dir.join("counter-1")).unwrap();
    drop(vs);
    socket.wait_status("with the scanner down", |l| {
        l.starts_with("0/1 scanners up")
    });
    assert!(d.terminate().success(), "{}", d.log_digest());
    let stopping = socket.wait_for("STOPPING", "1", 1);
    assert!(stopping > ready);
    assert!(socket.values("WATCHDOG").iter().all(|(v, _)| v == "1"));
}

#[test]
fn the_watchdog_stops_pinging_while_the_outbox_writer_is_wedged_and_resumes_after() {
    let Notified {
        gw,
        mut vs,
        socket,
        mut d,
    } = notified("sg-wedge-writer");
    let ready = socket.wait_for("READY", "1", 1);
    socket.wait_pings(ready, 2);
    // Idle for longer than the stall bound is not a wedge.
    let idle = Instant::now();
    wait_until_for("idle pings over the stall bound", STALL * 2, || {
        idle.elapsed() > STALL && socket.pings_after(idle) > 10
    });
    assert!(socket.longest_ping_gap(idle) < WATCHDOG);

    let writer = Frozen::thread(thread(d.pid(), "outbox-writer"));
    let wedged = Instant::now();
    vs.send(&frame(&dscsa("WEDGE0001"))).unwrap();
    let line = socket.wait_status("naming the wedged writer", |l| {
        l.starts_with("WEDGED: outbox writer")
    });
    assert!(
        wedged.elapsed() >= STALL,
        "wedged only after the stall bound ({:?}): {line}",
        wedged.elapsed()
    );
    wait_no_pings_for(&socket, WATCHDOG * 2);
    assert!(d.log().contains("the outbox writer has made no progress"));
    assert!(vs.read_reply(Duration::ZERO).unwrap().is_empty(), "no ACK");

    drop(writer);
    let moving = Instant::now();
    assert_eq!(replies(&mut vs, 1).0, [ACK], "the scan, durable after all");
    socket.wait_pings(moving, 2);
    wait_until("the log says the writer moves again", || {
        d.log().contains("the outbox writer makes progress again")
    });
    assert!(d.terminate().success(), "{}", d.log_digest());
    assert_eq!(wait_all_decided(&gw.cfg, 1)["committed"], 1);
}

/// A gateway in `dir` with one ACKing PTY scanner and `[redis]` at `redis`.
fn facility_gateway(dir: &Path, redis: &RedisServer) -> Gateway {
    Gateway::builder_in(dir)
        .pty(ScannerSpec::named("counter-1").ack())
        .redis(redis)
        .build()
}

#[test]
fn a_facility_outage_is_no_wedge_a_frozen_live_lane_is() {
    let dir = tempdir("sg-wedge-lane");
    let mut redis = RedisServer::start(dir.path(), &[]);
    let mut gw = facility_gateway(dir.path(), &redis);
    let [mut vs] = gw.take_scanners();
    let socket = NotifySocket::bind(dir.path());
    let mut d = start(&gw, &socket);
    let ready = socket.wait_for("READY", "1", 1);
    vs.send(&frame(&dscsa("LANE00001"))).unwrap();
    assert_eq!(replies(&mut vs, 1).0, [ACK]);
    socket.wait_status("with the facility up", |l| l.contains("facility ok (clock"));
    socket.wait_pings(ready, 2);

    // Redis gone: scans wait as unresolved, the lanes back off, and the
    // pings go on for longer than the stall bound.
    redis.kill9();
    let outage = Instant::now();
    for i in 2..=4 {
        vs.send(&frame(&dscsa(&format!("LANE0000{i}")))).unwrap();
        assert_eq!(replies(&mut vs, 1).0, [ACK]);
    }
    wait_until("the outage logged", || {
        d.log().contains("facility Redis unavailable")
    });
    wait_until_for("pings through the outage", STALL * 3, || {
        outage.elapsed() > STALL + WATCHDOG && socket.pings_after(outage) > 10
    });
    assert!(
        socket.longest_ping_gap(outage) < WATCHDOG,
        "no ping missed during the outage"
    );
    assert!(
        !d.log().contains("has made no progress"),
        "{}",
        d.log_digest()
    );
    redis.restart();
    wait_all_decided(&gw.cfg, 4);

    // The live lane stopped while a scan waits for it: wedged. (Stopped
    // while the writer runs its handed round, the writer is named with
    // it.)
    let live = Frozen::thread(thread(d.pid(), "claimer-live"));
    vs.send(&frame(&dscsa("LANE00005"))).unwrap();
    socket.wait_status("naming the wedged live lane", |l| {
        l.starts_with("WEDGED: ") && l.contains("facility claimer's live lane")
    });
    wait_no_pings_for(&socket, WATCHDOG * 2);
    drop(live);
    let moving = Instant::now();
    assert_eq!(replies(&mut vs, 1).0, [ACK]);
    socket.wait_pings(moving, 2);
    wait_all_decided(&gw.cfg, 5);
    assert!(d.terminate().success(), "{}", d.log_digest());
}

#[test]
fn a_long_drain_at_stop_extends_the_stop_timeout() {
    let dir = tempdir("sg-extend");
    let redis = RedisServer::start(dir.path(), &[]);
    let mut gw = facility_gateway(dir.path(), &redis);
    let [mut vs] = gw.take_scanners();
    // Each command to a paused Redis waits 3 s before it fails.
    gw.edit_config(|text| text.replace("command_timeout_ms = 500", "command_timeout_ms = 3000"));
    let socket = NotifySocket::bind(dir.path());
    let mut d = start(&gw, &socket);
    socket.wait_for("READY", "1", 1);
    vs.send(&frame(&dscsa("EXTEND001"))).unwrap();
    assert_eq!(replies(&mut vs, 1).0, [ACK]);
    wait_all_decided(&gw.cfg, 1);

    // Redis paused while a claim is out: the claimer's last rounds at the
    // stop wait for their timeouts, seconds in all.
    redis.signal(nix::sys::signal::Signal::SIGSTOP);
    vs.send(&frame(&dscsa("EXTEND002"))).unwrap();
    assert_eq!(replies(&mut vs, 1).0, [ACK]);
    let status = d.terminate();
    redis.signal(nix::sys::signal::Signal::SIGCONT);
    assert!(status.success(), "{}", d.log_digest());
    let stopping = socket.wait_for("STOPPING", "1", 1);
    let extended = socket.values("EXTEND_TIMEOUT_USEC");
    assert!(
        !extended.is_empty()
            && extended
                .iter()
                .all(|(v, t)| v == "20000000" && *t > stopping),
        "EXTEND_TIMEOUT_USEC=20000000 while the drain ran: {extended:?}"
    );
    // What the facility could not decide stays durable for the next start.
    let st = outbox_status(&gw.cfg);
    assert_eq!(
        count(&st, "committed") + count(&st, "unresolved") + count(&st, "pending"),
        2,
        "{st}"
    );
}
