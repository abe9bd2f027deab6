//! ACK/NAK on the real binary, played as a Honeywell-style ACK/NAK scanner
//! on a PTY: one transmission, then wait for the host's reply.
//!
//! - Every ACK is checked **at the instant it arrives**: the acknowledged
//!   scan must already be in the SQLite file (durable before acknowledged).
//! - A broken frame (bad check digit; a frame torn by silence) gets a NAK;
//!   the scanner resends and the resent frame is stored once, committed.
//! - A retransmit after a "missed" ACK is stored and suppressed by the gate
//!   as the echo of the first; the ledger holds the pick once.
//! - A frame that was never completed gets nothing; a scanner without
//!   `ack` is never written to.
//! - The ACK latency line (count/p50/p99/max) is logged at shutdown.

use crate::util::*;
use std::time::{Duration, Instant};

#[test]
fn ack_only_after_the_row_is_in_the_sqlite_file_nak_and_resend_stored_once() {
    let mut gw = Gateway::builder("scangate-ack-")
        .window_ms(60_000)
        .pty(
            ScannerSpec::named("acker")
                .ack()
                .with("frame_timeout_ms = 300"),
        )
        .pty(ScannerSpec::named("no-ack"))
        .build();
    let mut daemon = gw.launch();
    let [mut vs, mut quiet] = gw.take_scanners();
    let db = gw.state.join("scangate.db");
    wait_until("the database file", || db.exists());
    let conn = open_db(&gw.state);

    // 1. Picks one by one: the row is there when the ACK arrives.
    const PICKS: usize = 25;
    let mut rtt = Vec::new();
    for i in 0..PICKS {
        let serial = format!("ACK{i:03}");
        let sent = Instant::now();
        vs.send(&frame(&dscsa(&serial))).unwrap();
        let (reply, at) = replies(&mut vs, 1);
        assert_eq!(reply, [ACK], "{serial}");
        assert_eq!(
            stored(&conn, "acker", &serial),
            1,
            "{serial}: ACK arrived but the scan is not in the SQLite file"
        );
        rtt.push(at - sent);
    }
    quiet.send(&frame(&dscsa("QUIET1"))).unwrap();

    // 2. A misread (bad GTIN check digit): NAK, stored as rejected. The
    //    scanner resends the good read: ACK, stored once.
    let good = dscsa("NAK001");
    let bad = good.replacen("00307773105025", "00307773105026", 1);
    vs.send(&frame(&bad)).unwrap();
    assert_eq!(
        replies(&mut vs, 1).0,
        [NAK],
        "bad check digit must be NAKed"
    );
    vs.send(&frame(&good)).unwrap();
    assert_eq!(replies(&mut vs, 1).0, [ACK]);
    assert_eq!(stored(&conn, "acker", "NAK001"), 1);

    // 3. A frame torn by the line going quiet (half a frame, no terminator):
    //    NAK after frame_timeout_ms; the resend is stored once.
    let torn = dscsa("TORN01");
    vs.send(&torn.as_bytes()[..12]).unwrap();
    assert_eq!(replies(&mut vs, 1).0, [NAK], "a torn frame must be NAKed");
    vs.send(&frame(&torn)).unwrap();
    assert_eq!(replies(&mut vs, 1).0, [ACK]);
    assert_eq!(stored(&conn, "acker", "TORN01"), 1);

    // 4. The ACK of ECHO01 is "missed" by the scanner, which retransmits:
    //    both transmissions are stored and ACKed; the gate suppresses the
    //    second as the echo of the first.
    vs.send(&frame(&dscsa("ECHO01"))).unwrap();
    assert_eq!(replies(&mut vs, 1).0, [ACK]);
    vs.send(&frame(&dscsa("ECHO01"))).unwrap();
    assert_eq!(replies(&mut vs, 1).0, [ACK]);
    assert_eq!(stored(&conn, "acker", "ECHO01"), 2);

    // 5. Half a frame is still being "sent" at shutdown: never acknowledged.
    let transmissions = PICKS as i64 + 1 + 2 + 2 + 2;
    wait_all_decided(&gw.cfg, transmissions);
    // Not a complete frame and no timeout yet: nothing may come back.
    vs.send(b"]d20100307773").unwrap();
    assert_eq!(daemon.terminate().code(), Some(0));
    let after = drain(&mut vs, Duration::from_millis(100));
    assert!(
        after.is_empty(),
        "nothing for an unfinished frame: {after:02x?}"
    );
    assert!(
        quiet.read_reply(Duration::ZERO).unwrap().is_empty(),
        "ack = false: the daemon never writes to that scanner"
    );

    // Decisions.
    let st = outbox_status(&gw.cfg);
    assert_eq!(count(&st, "committed"), PICKS as i64 + 1 + 3, "{st}");
    assert_eq!(count(&st, "suppressed"), 1, "{st}");
    assert_eq!(count(&st, "rejected"), 2, "{st}");
    let ledger = ledger(&gw.cfg);
    for serial in ["NAK001", "TORN01", "ECHO01"] {
        assert_eq!(
            ledger.iter().filter(|e| e["serial"] == serial).count(),
            1,
            "{serial} must be in the ledger exactly once"
        );
    }
    let rows = rows(&gw.state, "acker");
    let echo: Vec<&str> = rows
        .iter()
        .filter(|r| r.1.as_deref() == Some("ECHO01"))
        .map(|r| r.0.as_str())
        .collect();
    assert_eq!(echo, ["committed", "suppressed"]);
    let reasons: Vec<&str> = rows
        .iter()
        .filter(|r| r.0 == "rejected")
        .map(|r| r.2.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(reasons.len(), 2);
    assert!(reasons.iter().all(|r| !r.is_empty()), "{reasons:?}");
    assert!(reasons[1].contains("incomplete frame"), "{reasons:?}");

    // The ACK latency summary at shutdown.
    let log = daemon.log();
    let line = log
        .lines()
        .find(|l| {
            l.contains("ACK latency") && l.contains("since start") && l.contains("scanner=acker")
        })
        .unwrap_or_else(|| panic!("no ACK latency line at shutdown\n{}", daemon.log_digest()));
    let acks = PICKS + 4;
    assert!(line.contains(&format!("count={acks} ")), "{line}");
    assert!(line.contains("naks=2"), "{line}");
    assert!(line.contains("p99<=") && line.contains("max="), "{line}");
    eprintln!(
        "scanner-side round trip (write -> ACK read), {PICKS} picks: p50 {:.2} ms, max {:.2} ms\n{line}",
        pct_ms(&rtt, 0.5),
        pct_ms(&rtt, 1.0)
    );
}
