//! `scangate tap`: a technician watches the running daemon decide, from
//! another process, through the tap socket in the state directory.
//!
//! - Each read shows its product identity (GTIN, lot, expiry, serial),
//!   its decision (with the entry an echo echoes, a rejection's reason),
//!   its ACK and its signal; the raw bytes only to a reader that asked.
//! - Filters keep a read's lines together; `--count` ends it.
//! - A reader that never reads loses lines, is told how many, and the
//!   scanner is ACKed all along (the control: a reader that reads loses
//!   none).
//! - Against a stopped daemon it says so and exits 1.

use crate::util::*;
use scangate::pty::VirtualScanner;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Stdio};
use std::sync::mpsc;

/// A `scangate tap` process, its stdout lines as they come.
struct Tap {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Tap {
    fn start(cfg: &std::path::Path, args: &[&str]) -> Tap {
        let mut child = command()
            .arg("tap")
            .args(args)
            .arg("--config")
            .arg(cfg)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("scangate tap starts");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Tap { child, lines }
    }

    /// Lines until `n` `decided` ones came (JSON mode).
    fn until_decided(&self, n: usize) -> Vec<serde_json::Value> {
        let mut got = Vec::new();
        let mut decided = 0;
        while decided < n {
            let line = self
                .lines
                .recv_timeout(event_timeout())
                .unwrap_or_else(|e| panic!("waited for {n} decisions ({e}); got {got:#?}"));
            let v: serde_json::Value = serde_json::from_str(&line).expect(&line);
            decided += usize::from(v["event"] == "decided");
            got.push(v);
        }
        got
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait until the daemon has `n` tap readers attached.
fn attached(gw: &Gateway, n: usize) {
    wait_until(&format!("{n} tap reader(s) attached"), || {
        gw.daemon().log().contains(&format!("({n} now)"))
    });
}

fn ssi(name: &str) -> ScannerSpec {
    ScannerSpec::named(name)
        .ack()
        .with("feedback = { protocol = \"zebra-ssi\" }")
}

/// A read, and what the scanner got back (ACK or NAK, and a beep).
fn read(vs: &mut VirtualScanner, label: &str, back: usize) {
    vs.send(&frame(label)).unwrap();
    replies(vs, back);
}

fn of<'a>(lines: &'a [serde_json::Value], event: &str, uuid: &str) -> &'a serde_json::Value {
    lines
        .iter()
        .find(|l| l["event"] == event && l["scan_uuid"] == uuid)
        .unwrap_or_else(|| panic!("no {event} line for {uuid} in {lines:#?}"))
}

#[test]
fn each_read_is_shown_with_its_decision_ack_and_signal_and_raw_bytes_only_when_asked() {
    let mut gw = Gateway::builder("scangate-tap-")
        .window_ms(60_000)
        .pty(ssi("counter"))
        .build();
    gw.start();
    let [mut vs] = gw.take_scanners();
    let plain = Tap::start(&gw.cfg, &["--json"]);
    attached(&gw, 1);
    let raw = Tap::start(&gw.cfg, &["--json", "--raw"]);
    attached(&gw, 2);

    let label = dscsa("TAP001");
    read(&mut vs, &label, 1 + ssi_beep(0).len()); // committed: ACK + beep
    read(&mut vs, &label, 1); // its echo: an ACK, no beep
    let bad = label.replacen(GTIN, "00307773105026", 1);
    read(&mut vs, &bad, 1); // a misread: NAK

    let lines = plain.until_decided(3);
    let reads: Vec<&serde_json::Value> = lines.iter().filter(|l| l["event"] == "read").collect();
    assert_eq!(reads.len(), 3, "{lines:#?}");
    let first = reads[0]["scan_uuid"].as_str().unwrap();
    assert_eq!(reads[0]["scanner"], "counter");
    assert_eq!(reads[0]["gtin"], GTIN);
    assert_eq!(reads[0]["serial"], "TAP001");
    assert_eq!(reads[0]["aim"], "]d2");
    assert!(
        reads[0]["lot"].is_string() && reads[0]["expiry"].is_string(),
        "{}",
        reads[0]
    );
    assert!(reads[2]["undecoded"].is_string(), "{}", reads[2]);
    for r in &reads {
        assert!(
            r.get("raw").is_none(),
            "raw bytes to a reader that did not ask: {r}"
        );
    }
    let committed = of(&lines, "decided", first);
    assert_eq!(committed["decision"], "committed");
    assert!(committed["decided_ms"].as_f64().unwrap() >= 0.0);
    let ack = of(&lines, "acked", first);
    assert!(ack["ack_ms"].as_f64().unwrap() > 0.0, "{ack}");
    let echo = of(&lines, "decided", reads[1]["scan_uuid"].as_str().unwrap());
    assert_eq!(echo["decision"], "echo");
    assert_eq!(echo["echoes"], first, "an echo names the entry it echoes");
    let rejected = of(&lines, "decided", reads[2]["scan_uuid"].as_str().unwrap());
    assert_eq!(rejected["decision"], "rejected");
    assert!(
        rejected["reason"].as_str().unwrap().contains("check digit"),
        "{rejected}"
    );
    // The scanner's signal (the committed beep) follows its decision.
    let told: Vec<&serde_json::Value> = lines.iter().filter(|l| l["event"] == "told").collect();
    assert!(
        told.iter()
            .any(|t| t["told"] == "committed" && t["via"] == "serial"),
        "{lines:#?}"
    );

    // The reader that asked gets the bytes, in hex.
    let raw_lines = raw.until_decided(3);
    let raw_read = of(&raw_lines, "read", first);
    assert!(
        raw_read["raw"].as_str().unwrap().contains(&hex(b"TAP001")),
        "{raw_read}"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn filters_keep_a_reads_lines_together_and_count_ends_the_tap() {
    let mut gw = Gateway::builder("scangate-tap-filter-")
        .window_ms(60_000)
        .pty(ScannerSpec::named("counter").ack())
        .pty(ScannerSpec::named("back").ack())
        .build();
    gw.start();
    let [mut counter, mut back] = gw.take_scanners();
    let tap = Tap::start(
        &gw.cfg,
        &["--decision", "echo", "--scanner", "counter", "--count", "1"],
    );
    attached(&gw, 1);
    read(&mut back, &dscsa("TAPB01"), 1);
    read(&mut back, &dscsa("TAPB01"), 1); // an echo, on the other scanner
    read(&mut counter, &dscsa("TAPC01"), 1);
    read(&mut counter, &dscsa("TAPC01"), 1);
    let status = wait_exit(tap.child.id());
    let out: Vec<String> = tap.lines.try_iter().collect();
    assert_eq!(status, 0, "{out:#?}");
    // The echo's read (held until its decision) and its decision; the tap
    // ends there (its ACK follows the decision in an embedded gateway).
    assert_eq!(out.len(), 2, "{out:#?}");
    assert!(
        out[0].contains("counter") && out[0].contains("SN TAPC01"),
        "{out:#?}"
    );
    assert!(
        out[1].contains("echo") && out[1].contains("echo of"),
        "{out:#?}"
    );
    assert!(
        !out.iter()
            .any(|l| l.contains("back") || l.contains("committed")),
        "{out:#?}"
    );
}

/// Wait for the process `pid` (a child of this test) to exit; its code.
fn wait_exit(pid: u32) -> i32 {
    use nix::sys::wait::{WaitStatus, waitpid};
    let pid = nix::unistd::Pid::from_raw(pid as i32);
    let mut code = None;
    wait_until("scangate tap to exit", || {
        code = match waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, c)) => Some(c),
            _ => None,
        };
        code.is_some()
    });
    code.unwrap()
}

#[test]
fn a_reader_that_never_reads_loses_lines_with_a_count_and_the_scanner_is_acked_throughout() {
    // (More lines than the tap holds for a reader and the socket buffers.)
    const PICKS: usize = 2500;
    let mut gw = Gateway::builder("scangate-tap-blocked-")
        .pty(ScannerSpec::named("counter").ack())
        .build();
    gw.start();
    let [mut vs] = gw.take_scanners();
    // The control: a reader that reads loses nothing.
    let reading = Tap::start(&gw.cfg, &["--json"]);
    attached(&gw, 1);
    // A reader that asks for everything (raw bytes: the longest lines) and
    // never reads.
    let mut blocked = UnixStream::connect(gw.state.join("tap.sock")).unwrap();
    blocked.write_all(b"{\"raw\":true}\n").unwrap();
    attached(&gw, 2);
    for i in 0..PICKS {
        // Each ACKed before the next is sent: a tap that held up the writer
        // would stop the ACKs here.
        read(&mut vs, &dscsa(&format!("BLK{i:05}")), 1);
    }
    let lines = reading.until_decided(PICKS);
    assert!(
        !lines.iter().any(|l| l["event"] == "lost"),
        "the reading reader lost lines"
    );
    // The blocked reader now reads: the lines it held, then how many it lost.
    blocked.set_read_timeout(Some(event_timeout())).unwrap();
    let mut lost = None;
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while lost.is_none() {
        let n = blocked.read(&mut buf).expect("the tap keeps sending");
        assert!(n > 0, "the tap closed");
        got.extend_from_slice(&buf[..n]);
        lost = String::from_utf8_lossy(&got)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["event"] == "lost")
            .and_then(|v| v["lines"].as_u64());
    }
    assert!(lost.unwrap() > 0);
    assert_eq!(ledger(&gw.cfg).len(), PICKS);
}

#[test]
fn against_a_stopped_daemon_it_says_so_and_exits_1() {
    let gw = Gateway::builder("scangate-tap-stopped-")
        .pty(ScannerSpec::named("counter").ack())
        .build();
    let out: Outcome = cli_cfg(&gw.cfg, &["tap"]).into();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("not running"), "{}", out.stderr);
}
