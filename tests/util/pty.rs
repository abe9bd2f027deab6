//! PTYs as serial scanners: frames, the host's ACK/NAK replies, configs with
//! the serial framing keys, and the outbox rows a scanner left.

use super::cli::{Outcome, cli_cfg};
use super::daemon::{ScannerSpec, open_db, write_config};
use super::wait::event_timeout;
use scangate::pty::VirtualScanner;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// ACK byte.
pub const ACK: u8 = 0x06;
/// NAK byte.
pub const NAK: u8 = 0x15;

/// A Zebra SSI `BEEP` (opcode 0xE6) from the host (source 0x04) with
/// `code`, framed and checksummed by the Simple Serial Interface rules:
/// length byte (the packet less its checksum), opcode, source, status,
/// data, then the two's complement of the byte sum, high byte first.
pub fn ssi_beep(code: u8) -> Vec<u8> {
    let mut p = vec![0x05, 0xE6, 0x04, 0x00, code];
    let sum: u16 = p.iter().map(|&b| u16::from(b)).sum();
    let check = (!sum).wrapping_add(1);
    p.extend(check.to_be_bytes());
    p
}

/// `label` as a scanner sends it with the default suffix (CR LF).
pub fn frame(label: &str) -> Vec<u8> {
    format!("{label}\r\n").into_bytes()
}

/// Write `<dir>/scangate.toml` and check that scangate accepts it.
pub fn write_serial_config(
    dir: &Path,
    state_dir: &Path,
    window_ms: u64,
    scanners: &[ScannerSpec],
) -> PathBuf {
    let path = write_config(dir, state_dir, window_ms, scanners);
    check_config(&path);
    path
}

/// `check-config` must accept the test config `path`.
pub fn check_config(path: &Path) {
    let check: Outcome = cli_cfg(path, &["check-config"]).into();
    assert_eq!(
        check.code,
        Some(0),
        "the test config must be valid: {check}"
    );
}

/// The Zebra SSI revision request a zebra-ssi scanner's connection
/// starts with ([`replies`] leaves it out: tests answer it on purpose).
pub const SSI_REQUEST_REVISION: [u8; 6] = [0x04, 0xA3, 0x04, 0x00, 0xFF, 0x55];

/// Read from the scanner side until `n` reply bytes arrived (deadline:
/// [`event_timeout`]), less any revision request; returns them and when
/// the last one came.
pub fn replies(vs: &mut VirtualScanner, n: usize) -> (Vec<u8>, Instant) {
    let mut got = Vec::new();
    let deadline = Instant::now() + event_timeout();
    // (A revision request cut off at the end of a read is read whole.)
    let partial = |got: &[u8]| {
        (1..SSI_REQUEST_REVISION.len()).any(|k| got.ends_with(&SSI_REQUEST_REVISION[..k]))
    };
    while got.len() < n || partial(&got) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "timed out waiting for {n} reply byte(s); got {got:02x?}"
        );
        got.extend(vs.read_reply(left.min(Duration::from_millis(200))).unwrap());
        while let Some(at) = got
            .windows(SSI_REQUEST_REVISION.len())
            .position(|w| w == SSI_REQUEST_REVISION)
        {
            got.drain(at..at + SSI_REQUEST_REVISION.len());
        }
    }
    (got, Instant::now())
}

/// Wait until `n` ACK bytes came back (the daemon acknowledged `n`
/// frames); returns how many came.
pub fn wait_acks(vs: &mut VirtualScanner, n: usize) -> usize {
    let mut acks = 0;
    super::wait::wait_until(&format!("{n} ACKs"), || {
        acks += vs
            .read_reply(Duration::ZERO)
            .unwrap()
            .iter()
            .filter(|&&b| b == ACK)
            .count();
        acks >= n
    });
    acks
}

/// Everything the daemon sent to the scanner within `quiet` of silence.
pub fn drain(vs: &mut VirtualScanner, quiet: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    loop {
        let more = vs.read_reply(quiet).unwrap();
        if more.is_empty() {
            return got;
        }
        got.extend(more);
    }
}

/// `(state, serial, reject_reason)` of every outbox row of `scanner`, in
/// capture order.
pub fn rows(state_dir: &Path, scanner: &str) -> Vec<(String, Option<String>, Option<String>)> {
    let db = open_db(state_dir);
    let mut q = db
        .prepare(
            "SELECT state, serial, reject_reason FROM scans WHERE scanner = ?1
             ORDER BY captured_ms, boot_ns",
        )
        .unwrap();
    q.query_map([scanner], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// How many outbox rows `scanner` has with `serial` (read-only, now).
pub fn stored(db: &rusqlite::Connection, scanner: &str, serial: &str) -> i64 {
    db.query_row(
        "SELECT count(*) FROM scans WHERE scanner = ?1 AND serial = ?2",
        [scanner, serial],
        |r| r.get(0),
    )
    .unwrap()
}

/// Percentile (nearest rank) of a list of durations, in milliseconds.
pub fn pct_ms(v: &[Duration], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort();
    let i = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    s[i].as_secs_f64() * 1000.0
}
