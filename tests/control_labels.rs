//! Control labels and feedback end to end, on the real daemon
//! with PTY scanners: REPEAT and QUANTITY N declare the next read; a
//! control no read follows lapses, audited; the scanner is told each
//! decision in Zebra SSI after its ACK (the packets checked against a
//! checksum computed here, not by scangate's encoder); on one facility
//! Redis, two gateways hearing the same scanner make the entries once,
//! also when the control was read during an outage and replayed.

use crate::util::*;
use scangate::pty::VirtualScanner;
use std::time::Duration;

const REPEAT: &str = "SGCTL-REPEAT";

/// A person's pace between two scans (a declared read is still one pick
/// with a read of its label this close: a double-fire, another gateway's
/// copy; with a facility store within twice `max_clock_error_ms`).
fn pace() {
    std::thread::sleep(Duration::from_millis(700));
}

/// What the scanner hears of one read: the ACK (or NAK), then the signal.
fn heard(vs: &mut VirtualScanner, n: usize) -> Vec<u8> {
    replies(vs, n).0
}

/// The audit records of `scan_uuid` whose reason starts with `lapsed`.
fn lapsed(state: &std::path::Path) -> Vec<String> {
    audit_records(&open_db(state))
        .into_iter()
        .filter(|r| r.contains("\"reason\":\"lapsed:"))
        .collect()
}

#[test]
fn repeat_and_quantity_declare_the_next_read_a_lapsed_control_nothing_and_the_scanner_hears_each() {
    let mut gw = Gateway::builder("scangate-controls-")
        .window_ms(60_000)
        .pty(
            ScannerSpec::named("receiving")
                .ack()
                .with("unserialised = \"ask\"\nfeedback = { protocol = \"zebra-ssi\" }"),
        )
        .config("[controls]\nwithin_ms = 1500")
        .build();
    let mut daemon = gw.launch();
    let [mut vs] = gw.take_scanners();
    let bottle = gtin_lot("LOT7A");
    let committed = [&[ACK][..], &ssi_beep(0x00)].concat();
    let ambiguous = [&[ACK][..], &ssi_beep(0x18)].concat();
    // A control read has a signal of its own (three short high), never
    // the commit's: staff learn "committed" as "a pick was recorded".
    let control = [&[ACK][..], &ssi_beep(0x02)].concat();

    // A bottle: committed. The next, identical, inside the window: taken
    // for an echo, and the scanner says "ambiguous" (policy ask).
    vs.send(&frame(&bottle)).unwrap();
    assert_eq!(heard(&mut vs, 8), committed);
    vs.send(&frame(&bottle)).unwrap();
    assert_eq!(heard(&mut vs, 8), ambiguous);
    // REPEAT (a control: acknowledged, never a pick), then the bottle:
    // another item.
    pace();
    vs.send(&frame(REPEAT)).unwrap();
    assert_eq!(heard(&mut vs, 8), control);
    pace();
    vs.send(&frame(&bottle)).unwrap();
    assert_eq!(heard(&mut vs, 8), committed);
    // REPEAT replaced by QUANTITY 3 (the REPEAT lapses, recorded but not
    // told: the person chose the second), then the bottle: one entry of 3
    // units. A lapse told here would come before the bottle's beep.
    vs.send(&frame(REPEAT)).unwrap();
    assert_eq!(heard(&mut vs, 8), control);
    vs.send(&frame("SGCTL-QTY-3")).unwrap();
    assert_eq!(heard(&mut vs, 8), control);
    pace();
    vs.send(&frame(&bottle)).unwrap();
    assert_eq!(heard(&mut vs, 8), committed);
    // A misread: NAK, and the error beep.
    let bad = bottle.replacen("00307773105025", "00307773105026", 1);
    vs.send(&frame(&bad)).unwrap();
    assert_eq!(heard(&mut vs, 8), [&[NAK][..], &ssi_beep(0x10)].concat());
    // REPEAT, and no read within 1.5 s: it lapses, audited, and the
    // scanner is told (two short low, no ACK: nothing was read); the
    // bottle read after it is an (ambiguous) echo again.
    vs.send(&frame(REPEAT)).unwrap();
    assert_eq!(heard(&mut vs, 8), control);
    assert_eq!(heard(&mut vs, 7), ssi_beep(0x06));
    assert_eq!(lapsed(&gw.state).len(), 2);
    vs.send(&frame(&bottle)).unwrap();
    assert_eq!(heard(&mut vs, 8), ambiguous);

    let entries = ledger(&gw.cfg);
    let quantities: Vec<i64> = entries
        .iter()
        .map(|e| e["quantity"].as_i64().unwrap())
        .collect();
    assert_eq!(quantities, [1, 1, 3], "{entries:?}");
    // Each echo names the commit nearest to it: the last bottle's, the
    // declared QUANTITY 3 entry, not the first bottle's older one.
    let echoes = echoes_named(&gw.cfg);
    assert_eq!(echoes.len(), 2, "{echoes:?}");
    assert_eq!(echoes[0], entries[0]["scan_uuid"], "{echoes:?}");
    assert_eq!(echoes[1], entries[2]["scan_uuid"], "{echoes:?}");
    let st = outbox_status(&gw.cfg);
    assert_eq!(
        (count(&st, "committed"), count(&st, "control")),
        (3, 4),
        "{st}"
    );
    assert_eq!(count(&st, "ambiguous"), 2, "{st}");
    let records = lapsed(&gw.state);
    assert_eq!(records.len(), 2, "{records:?}");
    assert!(
        records
            .iter()
            .all(|r| r.contains("\"decision\":\"control\"")),
        "{records:?}"
    );
    assert!(
        records[0].contains("another control label was read"),
        "{records:?}"
    );
    // The declared commits say who declared them, in the audit trail.
    let conn = open_db(&gw.state);
    let declared: Vec<String> = audit_records(&conn)
        .into_iter()
        .filter(|r| r.contains("declared a repeat by the operator"))
        .collect();
    assert_eq!(declared.len(), 1, "{declared:?}");
    assert_eq!(daemon.terminate().code(), Some(0), "{}", daemon.log());
    // The chain, with its control and lapse records, verifies; the trace
    // of the bottle's label marks its ambiguous echoes.
    audit_verify(&gw.cfg);
    let uuid: String = conn
        .query_row(
            "SELECT scan_uuid FROM scans WHERE state = 'committed' ORDER BY seq LIMIT 1",
            [],
            |r| {
                r.get::<_, scangate::store::packed::Unpacked>(0)
                    .map(|u| u.0)
            },
        )
        .unwrap();
    let trace: Outcome = cli_cfg(&gw.cfg, &["audit", "trace", &uuid]).into();
    assert_eq!(trace.code, Some(0), "{trace}");
    assert_eq!(trace.stdout.matches("AMBIGUOUS echo").count(), 2, "{trace}");
}

#[test]
fn a_control_waiting_when_the_daemon_stops_lapses_at_the_next_start() {
    let mut gw = Gateway::builder("scangate-controls-stop-")
        .pty(ScannerSpec::named("receiving").ack())
        .build();
    let mut daemon = gw.launch();
    let [mut vs] = gw.take_scanners();
    vs.send(&frame(REPEAT)).unwrap();
    assert_eq!(heard(&mut vs, 1), [ACK]);
    assert_eq!(daemon.terminate().code(), Some(0), "{}", daemon.log());
    assert!(lapsed(&gw.state).is_empty(), "not lapsed before its bound");
    let mut again = gw.launch();
    wait_until("the REPEAT to lapse at the start", || {
        lapsed(&gw.state)
            .iter()
            .any(|r| r.contains("scangate stopped before a read"))
    });
    // Control: a read now is not declared (it is a pick of its own, not
    // "declared a repeat").
    vs.send(&frame(&gtin_lot("LOT9"))).unwrap();
    assert_eq!(heard(&mut vs, 1), [ACK]);
    wait_until("the read to be decided", || ledger(&gw.cfg).len() == 1);
    assert_eq!(again.terminate().code(), Some(0), "{}", again.log());
}

/// Two gateways hear one scanner (`shared`): each transmission reaches both.
fn both(a: &mut Gateway, b: &mut Gateway, label: &str) {
    a.send(label);
    b.send(label);
    assert_eq!(a.replies(1), [ACK]);
    assert_eq!(b.replies(1), [ACK]);
}

/// `label`, REPEAT + `label`, QUANTITY 3 + `label`, each heard by both.
fn declare_on_both(a: &mut Gateway, b: &mut Gateway, label: &str) {
    both(a, b, label);
    both(a, b, REPEAT);
    pace();
    both(a, b, label);
    both(a, b, "SGCTL-QTY-3");
    pace();
    both(a, b, label);
}

/// The units of each facility ledger entry, sorted, once there are `n`.
fn units(redis: &RedisServer, cfg: &std::path::Path, n: usize) -> Vec<i64> {
    wait_until(&format!("{n} facility ledger entries"), || {
        redis.ledger("test-pharmacy").len() >= n
    });
    let mut q: Vec<i64> = ledger(cfg)
        .iter()
        .map(|e| e["quantity"].as_i64().unwrap())
        .collect();
    q.sort();
    q
}

#[test]
fn two_gateways_hearing_one_scanner_make_each_declared_entry_once_live_and_replayed() {
    let (root, redis) = facility(&[]);
    let mut a = Gateway::roaming(root.path(), "gw-a", &redis);
    let mut b = Gateway::roaming(root.path(), "gw-b", &redis);
    a.start();
    b.start();
    let bottle = gtin_lot("LOT7A");
    // Live: the bottle, REPEAT + the bottle, QUANTITY 3 + the bottle:
    // three entries (1, 1, 3 units), however many gateways heard them.
    declare_on_both(&mut a, &mut b, &bottle);
    wait_all_decided(&a.cfg, 5);
    wait_all_decided(&b.cfg, 5);
    assert_eq!(units(&redis, &a.cfg, 3), [1, 1, 3]);
    // Each echo here is the other gateway's copy of one read (a shared
    // scanner): certain, never ambiguous.
    let ambiguous =
        count(&outbox_status(&a.cfg), "ambiguous") + count(&outbox_status(&b.cfg), "ambiguous");
    assert_eq!(ambiguous, 0);

    // An outage (Redis stopped, its data kept): the same again, read while
    // it does not answer, replayed when it is back: the same entries as live.
    redis.signal(nix::sys::signal::Signal::SIGSTOP);
    let lot = gtin_lot("LOT8B");
    declare_on_both(&mut a, &mut b, &lot);
    let waiting = outbox_status(&a.cfg);
    assert_eq!(
        count(&waiting, "pending") + count(&waiting, "unresolved"),
        3,
        "the reads wait for the facility (the controls are decided here): {waiting}"
    );
    redis.signal(nix::sys::signal::Signal::SIGCONT);
    wait_all_decided(&a.cfg, 10);
    wait_all_decided(&b.cfg, 10);
    assert_eq!(units(&redis, &a.cfg, 6), [1, 1, 1, 1, 3, 3]);
    assert_eq!(redis.ledger("test-pharmacy").len(), 6);
    // Control: without the declarations the same reads are one entry per
    // lot (the others echoes), so the test could see a doubled or lost one.
    let st = outbox_status(&a.cfg);
    assert_eq!(count(&st, "control"), 4, "{st}");
}

/// A Zebra SSI scanner answers each BEEP with CMD_ACK on the line it scans
/// on: split across writes, or written together with the next scan, the
/// reply is never framed as (or into) a scan.
#[test]
fn a_zebra_scanners_replies_to_its_beeps_are_never_read_as_scans() {
    let mut gw = Gateway::builder("scangate-ssi-replies-")
        .pty(
            ScannerSpec::named("receiving")
                .ack()
                .with("feedback = { protocol = \"zebra-ssi\" }"),
        )
        .build();
    let mut daemon = gw.launch();
    let [mut vs] = gw.take_scanners();
    let cmd_ack: [u8; 6] = [0x04, 0xD0, 0x00, 0x00, 0xFF, 0x2C];
    let committed = [&[ACK][..], &ssi_beep(0x00)].concat();
    vs.send(&frame(&dscsa("SSI-1"))).unwrap();
    assert_eq!(heard(&mut vs, 8), committed);
    // The reply in two writes, then the next scan.
    vs.send(&cmd_ack[..2]).unwrap();
    vs.send(&cmd_ack[2..]).unwrap();
    vs.send(&frame(&dscsa("SSI-2"))).unwrap();
    assert_eq!(heard(&mut vs, 8), committed);
    // The reply and the next scan in one write.
    vs.send(&[&cmd_ack[..], &frame(&dscsa("SSI-3"))].concat())
        .unwrap();
    assert_eq!(heard(&mut vs, 8), committed);
    // A scan, then the reply to its beep, in one write (the scanner was
    // quick): the reply after the frame is dropped as well.
    vs.send(&[&frame(&dscsa("SSI-4"))[..], &cmd_ack].concat())
        .unwrap();
    assert_eq!(heard(&mut vs, 8), committed);
    vs.send(&frame(&dscsa("SSI-5"))).unwrap();
    assert_eq!(heard(&mut vs, 8), committed);
    let st = wait_all_decided(&gw.cfg, 5);
    assert_eq!(
        (count(&st, "committed"), count(&st, "rejected")),
        (5, 0),
        "{st}"
    );
    assert_eq!(daemon.terminate().code(), Some(0), "{}", daemon.log());
}

/// Honeywell, Datalogic and raw feedback on the wire: after the ACK of a
/// committed read, and after the NAK of a misread, exactly the bytes their
/// documents give (docs/scanner-feedback.md), written out here.
#[test]
fn each_protocols_bytes_follow_the_ack_and_the_nak() {
    // (protocol table, committed, rejected)
    let cases: [(&str, &[u8], &[u8]); 3] = [
        // Honeywell host commands: ESC 7 , (good read), ESC 8 , (error tone).
        ("{ protocol = \"honeywell\" }", b"\x1b7,", b"\x1b8,"),
        // Datalogic: 0x01 (good-read beep), F then E.
        ("{ protocol = \"datalogic\" }", b"\x01", b"FE"),
        (
            "{ protocol = \"raw\", committed = \"\\u0007\", rejected = \"\\u0007\\u0007\" }",
            b"\x07",
            b"\x07\x07",
        ),
    ];
    let mut gw = Gateway::builder("scangate-protocols-")
        .ptys(cases.iter().enumerate().map(|(i, (table, _, _))| {
            ScannerSpec::named(&format!("s{i}"))
                .ack()
                .with(&format!("feedback = {table}"))
        }))
        .build();
    let mut daemon = gw.launch();
    let mut scanners: Vec<VirtualScanner> = std::mem::take(&mut gw.scanners);
    for (i, ((_, committed, rejected), vs)) in cases.iter().zip(&mut scanners).enumerate() {
        let label = dscsa(&format!("PROTO{i}"));
        vs.send(&frame(&label)).unwrap();
        assert_eq!(
            heard(vs, 1 + committed.len()),
            [&[ACK][..], committed].concat(),
            "s{i}"
        );
        let bad = label.replacen("00307773105025", "00307773105026", 1);
        vs.send(&frame(&bad)).unwrap();
        assert_eq!(
            heard(vs, 1 + rejected.len()),
            [&[NAK][..], rejected].concat(),
            "s{i}"
        );
    }
    assert_eq!(daemon.terminate().code(), Some(0), "{}", daemon.log());
}

/// With a facility store that does not answer, the scanner hears
/// "waiting" after the ACK; the decision made when it answers again comes
/// later than `max_delay_ms`: not signalled (a late beep would be taken
/// for the next read's), and counted as skipped.
#[test]
fn a_decision_later_than_the_bound_is_not_signalled_and_is_counted() {
    let (root, redis) = facility(&[]);
    let textfile = root.path().join("gw.prom");
    let mut gw = Gateway::builder_in(&root.path().join("gw"))
        .pty(
            ScannerSpec::named("receiving")
                .ack()
                .with("feedback = { protocol = \"zebra-ssi\", max_delay_ms = 1500 }"),
        )
        .config(&format!(
            "[metrics]\ntextfile = {:?}\ninterval_s = 1",
            textfile.to_str().unwrap()
        ))
        .redis(&redis)
        .build();
    let mut daemon = gw.launch();
    let [mut vs] = gw.take_scanners();
    vs.send(&frame(&dscsa("ON-TIME"))).unwrap();
    assert_eq!(heard(&mut vs, 8), [&[ACK][..], &ssi_beep(0x00)].concat());
    redis.signal(nix::sys::signal::Signal::SIGSTOP);
    vs.send(&frame(&dscsa("LATE"))).unwrap();
    // Stored (ACK), and "waiting" (two short high beeps, code 0x01).
    assert_eq!(heard(&mut vs, 8), [&[ACK][..], &ssi_beep(0x01)].concat());
    std::thread::sleep(Duration::from_millis(2000)); // past max_delay_ms
    redis.signal(nix::sys::signal::Signal::SIGCONT);
    wait_all_decided(&gw.cfg, 2);
    wait_until("the skip to be counted", || {
        std::fs::read_to_string(&textfile).is_ok_and(|t| {
            t.lines().any(|l| {
                l.starts_with("scangate_feedback_total")
                    && l.contains("outcome=\"skipped\"")
                    && l.contains("told=\"committed\"")
                    && l.ends_with(" 1")
            })
        })
    });
    assert!(
        drain(&mut vs, Duration::from_millis(300)).is_empty(),
        "a late signal was sent"
    );
    assert_eq!(daemon.terminate().code(), Some(0), "{}", daemon.log());
}

/// The gateway's own indicator for a scanner with no channel back: the
/// LED class device (here a directory laid out as the kernel's, given by
/// its absolute path) is taken from its trigger while the scanner runs,
/// shows each decision, and gets its trigger back at the stop.
#[test]
fn the_gateway_led_shows_decisions_and_gets_its_trigger_back() {
    let root = tempdir("scangate-led-");
    let led = root.path().join("leds").join("ACT");
    std::fs::create_dir_all(&led).unwrap();
    std::fs::write(led.join("max_brightness"), "255\n").unwrap();
    std::fs::write(led.join("trigger"), "none [mmc0] timer heartbeat\n").unwrap();
    std::fs::write(led.join("brightness"), "0\n").unwrap();
    let textfile = root.path().join("gw.prom");
    let mut gw = Gateway::builder_in(&root.path().join("gw"))
        .pty(ScannerSpec::named("counter-1").with(&format!(
            "feedback = {{ led = {:?} }}",
            led.to_str().unwrap()
        )))
        .config(&format!(
            "[metrics]\ntextfile = {:?}\ninterval_s = 1",
            textfile.to_str().unwrap()
        ))
        .build();
    let mut daemon = gw.launch();
    let [mut vs] = gw.take_scanners();
    wait_until("the LED taken from its trigger", || {
        std::fs::read_to_string(led.join("trigger")).is_ok_and(|t| t.trim() == "none")
    });
    vs.send(&frame(&dscsa("LED-1"))).unwrap();
    wait_until("the committed read shown on the LED", || {
        std::fs::read_to_string(&textfile).is_ok_and(|t| {
            t.contains(
                "scangate_feedback_total{scanner=\"counter-1\",told=\"committed\",outcome=\"sent\"} 1",
            )
        })
    });
    assert_eq!(
        std::fs::read_to_string(led.join("brightness")).unwrap(),
        "0",
        "the pattern ends dark"
    );
    assert_eq!(daemon.terminate().code(), Some(0), "{}", daemon.log());
    assert_eq!(
        std::fs::read_to_string(led.join("trigger")).unwrap().trim(),
        "mmc0",
        "the trigger is given back"
    );
}
