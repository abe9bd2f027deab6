//! Hostile bytes on the real binary: one scanner sends NUL, non-UTF-8,
//! control characters, random binary with and without terminators (a
//! 16 MiB flood that never ends a frame) while another scanner scans
//! normally.
//!
//! Asserted: every hostile frame is NAKed and stored as rejected with a
//! reason (never committed); the flood costs the daemon bounded memory; the
//! flooding scanner works again right after the flood; every scan of the
//! normal scanner commits exactly once. The normal scanner's latencies
//! (round trip to its ACK, and capture → decision from the database) before
//! and during the flood are printed, not asserted: timing on a shared
//! 2-core machine is not something a test should fail on.

use crate::util::*;
use scangate::pty::VirtualScanner;
use std::time::{Duration, Instant};

/// Peak resident memory of `pid` in KiB.
fn vm_hwm_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

/// The normal scanner: `n` picks, one at a time, each waiting for its ACK.
fn picks(vs: &mut VirtualScanner, tag: &str, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|i| {
            let t = Instant::now();
            vs.send(&frame(&dscsa(&format!("{tag}{i:03}")))).unwrap();
            let (r, at) = replies(vs, 1);
            assert_eq!(r, [ACK], "{tag}{i:03}");
            std::thread::sleep(Duration::from_millis(10)); // the operator's pace
            at - t
        })
        .collect()
}

struct Lcg(u64);
impl Lcg {
    fn byte(&mut self) -> u8 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 56) as u8
    }
}

#[test]
fn garbage_flood_on_one_scanner_never_disturbs_another() {
    let mut gw = Gateway::builder("scangate-hostile-")
        .pty(ScannerSpec::named("flood").ack())
        .pty(ScannerSpec::named("normal").ack())
        .build();
    let mut daemon = gw.launch();
    let [mut flood, mut normal] = gw.take_scanners();
    let pid = daemon.pid();

    const N: usize = 40;
    let baseline = picks(&mut normal, "BASE", N);

    let flood_thread = std::thread::spawn(move || {
        let pid = pid;
        let label = dscsa("EVIL01");
        let hostile: Vec<Vec<u8>> = vec![
            b"\0\0\0\0\r\n".to_vec(),                         // NULs only
            label.replacen("EVIL", "EV\0IL", 1).into_bytes(), // NUL inside a label
            b"]d2\xff\xfe\xc3\x28\x80\r\n".to_vec(),          // not UTF-8
            format!("{label}\x07").into_bytes(),              // BEL
            format!("\x1b[31m{label}").into_bytes(),          // ESC sequence
            format!("{label}\x7f").into_bytes(),              // DEL
            format!("{label}\u{85}").into_bytes(),            // C1 control (NEL) as UTF-8
            b"\x11\x13\x11\x13".to_vec(),                     // XON/XOFF bytes as data
        ];
        let mut naks = 0usize;
        for h in &hostile {
            let mut bytes = h.clone();
            if !bytes.ends_with(b"\r\n") {
                bytes.extend_from_slice(b"\r\n");
            }
            flood.send(&bytes).unwrap();
            let (r, _) = replies(&mut flood, 1);
            assert_eq!(r, [NAK], "hostile frame {h:02x?} must be NAKed");
            naks += 1;
        }
        // 512 KiB of random binary (CR/LF included by chance: ~4000 frames).
        let mut rng = Lcg(42);
        let mut replies_seen: Vec<u8> = Vec::new();
        for _ in 0..128 {
            let chunk: Vec<u8> = (0..4096).map(|_| rng.byte()).collect();
            flood.send(&chunk).unwrap();
            replies_seen.extend(flood.read_reply(Duration::ZERO).unwrap());
        }
        // A good frame: once it is ACKed, the random junk before it has been
        // captured and committed (the writer commits in read order).
        flood.send(b"\r\n").unwrap();
        flood.send(&frame(&dscsa("MIDFLOOD"))).unwrap();
        let deadline = Instant::now() + event_timeout();
        while !replies_seen.contains(&ACK) {
            assert!(Instant::now() < deadline, "no ACK after the random binary");
            replies_seen.extend(flood.read_reply(Duration::from_millis(100)).unwrap());
        }
        let hwm_before = vm_hwm_kib(pid);
        // 16 MiB without any terminator.
        for _ in 0..256 {
            let chunk: Vec<u8> = (0..65536)
                .map(|_| match rng.byte() {
                    b'\r' | b'\n' => b'x',
                    b => b,
                })
                .collect();
            flood.send(&chunk).unwrap();
            replies_seen.extend(flood.read_reply(Duration::ZERO).unwrap());
        }
        // The scanner works again after the flood.
        flood.send(b"\r\n").unwrap();
        flood.send(&frame(&dscsa("AFTERFLOOD"))).unwrap();
        let deadline = Instant::now() + event_timeout();
        while replies_seen.iter().filter(|&&b| b == ACK).count() < 2 {
            assert!(Instant::now() < deadline, "no ACK after the flood");
            replies_seen.extend(flood.read_reply(Duration::from_millis(100)).unwrap());
        }
        let hwm_after = vm_hwm_kib(pid);
        (
            flood,
            hostile.len(),
            naks,
            replies_seen,
            (hwm_before, hwm_after),
        )
    });
    let during = picks(&mut normal, "FLOOD", N);
    let (mut flood, hostile_frames, hostile_naks, mut flood_replies, (hwm_before, hwm_after)) =
        flood_thread.join().unwrap();

    wait_until("no scan left pending", || {
        let st = outbox_status(&gw.cfg);
        count(&st, "pending") + count(&st, "unresolved") == 0
    });
    assert_eq!(daemon.terminate().code(), Some(0));
    flood_replies.extend(drain(&mut flood, Duration::from_millis(100)));

    // The normal scanner: everything committed, once.
    let normal_rows = rows(&gw.state, "normal");
    assert_eq!(normal_rows.len(), 2 * N, "one row per transmission");
    assert!(
        normal_rows.iter().all(|r| r.0 == "committed"),
        "{normal_rows:?}"
    );
    let ledger = ledger(&gw.cfg);
    assert_eq!(
        ledger.iter().filter(|e| e["scanner"] == "normal").count(),
        2 * N
    );

    // The flooding scanner: every frame rejected with a reason and NAKed,
    // except the good one after the flood.
    let flood_rows = rows(&gw.state, "flood");
    let rejected: Vec<_> = flood_rows.iter().filter(|r| r.0 == "rejected").collect();
    let committed: Vec<_> = flood_rows.iter().filter(|r| r.0 == "committed").collect();
    let good: Vec<_> = committed
        .iter()
        .map(|r| r.1.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(
        good,
        ["MIDFLOOD", "AFTERFLOOD"],
        "only the good frames commit"
    );
    assert_eq!(rejected.len() + 2, flood_rows.len(), "{flood_rows:?}");
    assert!(
        rejected
            .iter()
            .all(|r| r.2.as_deref().is_some_and(|s| !s.is_empty())),
        "every rejection has a reason"
    );
    for (i, r) in flood_rows.iter().take(hostile_frames).enumerate() {
        assert_eq!(r.0, "rejected", "hostile frame {i}");
        eprintln!("hostile frame {i}: {}", r.2.as_deref().unwrap_or(""));
    }
    let overlong = rejected
        .iter()
        .filter(|r| r.2.as_deref().unwrap_or("").contains("max_frame_bytes"))
        .count();
    assert!(overlong >= 1, "the endless frame is rejected as over-long");
    let naks = flood_replies.iter().filter(|&&b| b == NAK).count() + hostile_naks;
    assert_eq!(naks, rejected.len(), "every rejected frame NAKed once");
    assert_eq!(flood_replies.iter().filter(|&&b| b == ACK).count(), 2);

    audit_verify(&gw.cfg);

    // Memory: the 16 MiB of unterminated bytes must not be held.
    let grew = hwm_after.saturating_sub(hwm_before);
    eprintln!(
        "daemon VmHWM before the 16 MiB unterminated flood {hwm_before} KiB, after {hwm_after} KiB \
         (+{grew} KiB); {} rejected frames from the flood",
        rejected.len()
    );
    assert!(
        grew < 4 * 1024,
        "peak memory grew by {grew} KiB while 16 MiB without a terminator arrived"
    );

    // Latency of the normal scanner, for the record (not asserted).
    let db = open_db(&gw.state);
    let decide_ms = |tag: &str| -> Vec<Duration> {
        db.prepare(
            "SELECT decided_ms - captured_ms FROM scans WHERE scanner = 'normal' AND serial LIKE ?1",
        )
        .unwrap()
        .query_map([format!("{tag}%")], |r| r.get::<_, i64>(0))
        .unwrap()
        .map(|v| Duration::from_millis(v.unwrap().max(0) as u64))
        .collect()
    };
    for (what, rtt, tag) in [
        ("baseline", &baseline, "BASE"),
        ("during flood", &during, "FLOOD"),
    ] {
        let d = decide_ms(tag);
        eprintln!(
            "normal scanner, {what}: write->ACK p50 {:.2} ms p99 {:.2} ms max {:.2} ms; \
             capture->decision p50 {:.0} ms max {:.0} ms",
            pct_ms(rtt, 0.5),
            pct_ms(rtt, 0.99),
            pct_ms(rtt, 1.0),
            pct_ms(&d, 0.5),
            pct_ms(&d, 1.0)
        );
    }
}
