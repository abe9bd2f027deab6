//! A shared scanner's feedback follows the facility's decision, whichever
//! gateway claimed: two gateways hear one scanner, feedback is set on one
//! of them only (as docs/technician.md advises), and the person at the
//! counter hears "committed" for a new pick and "ambiguous" for a second
//! identical bottle under `unserialised = "ask"`, also when the other
//! gateway made the decision. An ambiguous echo is counted once, by one
//! gateway, and names the nearest commit. Real binary, PTY scanners, a
//! redis-server of the test's own.

use crate::util::*;
use std::time::Duration;

/// A Zebra SSI `BEEP` with `code` (length, opcode 0xE6, source 0x04,
/// status, code, two's-complement checksum), after the ACK.
fn acked_beep(code: u8) -> Vec<u8> {
    let mut p = vec![0x05, 0xE6, 0x04, 0x00, code];
    let sum: u16 = p.iter().map(|&b| u16::from(b)).sum();
    p.extend((!sum).wrapping_add(1).to_be_bytes());
    [vec![ACK], p].concat()
}

/// Gateway `name` hearing the shared scanner `roaming` (policy `ask`),
/// with Zebra SSI feedback if `feedback`; facility time trusted within
/// 500 ms, so two copies of one read are at most 1 s apart.
fn gateway(root: &std::path::Path, name: &str, redis: &RedisServer, feedback: bool) -> Gateway {
    let fb = if feedback {
        "\nfeedback = { protocol = \"zebra-ssi\" }"
    } else {
        ""
    };
    Gateway::builder_in(&root.join(name))
        .id(name)
        .window_ms(10_000)
        .pty(
            ScannerSpec::named("roaming")
                .ack()
                .with(&format!("shared = true\nunserialised = \"ask\"{fb}")),
        )
        .redis(redis)
        .config("max_clock_error_ms = 500")
        .build()
}

/// What the gateway with feedback (`b`) hears of one read that both
/// gateways receive, `a` first when `a_first` (and decided before `b`
/// hears it), else `b`.
fn read_on_both(
    a: &mut Gateway,
    b: &mut Gateway,
    label: &str,
    a_first: bool,
    decided: i64,
) -> Vec<u8> {
    if a_first {
        a.send(label);
        assert_eq!(a.replies(1), [ACK]);
        wait_all_decided(&a.cfg, decided);
        b.send(label);
        b.replies(8)
    } else {
        b.send(label);
        let heard = b.replies(8);
        a.send(label);
        assert_eq!(a.replies(1), [ACK]);
        wait_all_decided(&a.cfg, decided);
        heard
    }
}

#[test]
fn a_shared_scanners_feedback_follows_the_facility_whichever_gateway_claimed() {
    let (root, redis) = facility(&[]);
    let mut a = gateway(root.path(), "gw-a", &redis, false);
    let mut b = gateway(root.path(), "gw-b", &redis, true);
    a.start();
    b.start();
    let committed = acked_beep(0x00);
    let ambiguous = acked_beep(0x18);
    for (n, (lot, a_first)) in [("LOTA1", true), ("LOTB1", false)].into_iter().enumerate() {
        let bottle = gtin_lot(lot);
        let decided = 2 * n as i64;
        // A bottle: a new pick, whichever gateway claimed it.
        let heard = read_on_both(&mut a, &mut b, &bottle, a_first, decided + 1);
        assert_eq!(heard, committed, "{lot}: the first bottle");
        // A person's pace later (more than twice max_clock_error_ms), an
        // identical bottle: taken for an echo, and the scanner asks.
        std::thread::sleep(Duration::from_millis(1_500));
        let heard = read_on_both(&mut a, &mut b, &bottle, a_first, decided + 2);
        assert_eq!(heard, ambiguous, "{lot}: the second bottle");
        wait_all_decided(&b.cfg, decided + 2);
        // One entry, and the ambiguous echo counted once, by one gateway.
        let ambiguous_echoes = a.count("ambiguous") + b.count("ambiguous");
        assert_eq!(ambiguous_echoes, n as i64 + 1, "{lot}");
    }
    assert_eq!(redis.ledger("test-pharmacy").len(), 2);
    a.stop();
    b.stop();
}

/// Two commits of one label inside the window (the second declared by
/// REPEAT), then a read of it: on both gateways the echo names the nearer,
/// declared commit, and it is ambiguous on exactly one.
#[test]
fn an_echo_names_the_nearest_commit_on_every_gateway() {
    let (root, redis) = facility(&[]);
    let mut a = gateway(root.path(), "gw-a", &redis, false);
    let mut b = gateway(root.path(), "gw-b", &redis, false);
    a.start();
    b.start();
    let bottle = gtin_lot("LOTN1");
    let pace = || std::thread::sleep(Duration::from_millis(1_200));
    let mut both = |label: &str| {
        a.send(label);
        b.send(label);
        assert_eq!(a.replies(1), [ACK]);
        assert_eq!(b.replies(1), [ACK]);
    };
    both(&bottle);
    pace();
    both("SGCTL-REPEAT");
    pace();
    both(&bottle);
    pace();
    both(&bottle);
    wait_all_decided(&a.cfg, 4);
    wait_all_decided(&b.cfg, 4);
    let entries = ledger(&a.cfg);
    assert_eq!(entries.len(), 2, "{entries:?}");
    let declared = entries[1]["scan_uuid"].as_str().unwrap();
    for g in [&a, &b] {
        let named = echoes_named(&g.cfg);
        assert_eq!(
            named.last().map(String::as_str),
            Some(declared),
            "{named:?}"
        );
    }
    let ambiguous = (a.count("ambiguous"), b.count("ambiguous"));
    assert_eq!(
        ambiguous.0 + ambiguous.1,
        1,
        "{ambiguous:?}: {}",
        outbox_status(&a.cfg)
    );
    a.stop();
    b.stop();
}
