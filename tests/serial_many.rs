//! Sixteen serial scanners at once on the real binary, each with its own
//! profile: scan type, quantity, framing (CR/LF, CRLF suffix, STX/ETX,
//! prefix, no terminator + timeout) and ACK on or off. All scan at the same
//! time; each scanner's picks land in the ledger once, with its own scan
//! type and quantity; ACK scanners get exactly one ACK per transmission and
//! the others are never written to.

use crate::util::*;
use scangate::pty::VirtualScanner;
use std::time::Duration;

const SCANNERS: usize = 16;
const PICKS: usize = 5;
const TYPES: [&str; 5] = ["dispense", "receive", "waste", "return", "adjust"];

/// (config lines, how a label is framed)
fn framing(i: usize) -> (&'static str, fn(&str) -> Vec<u8>) {
    match i % 5 {
        0 => ("", |l| format!("{l}\r").into_bytes()),
        1 => ("suffix = \"\\r\\n\"", |l| format!("{l}\r\n").into_bytes()),
        2 => ("stx_etx = true", |l| format!("\x02{l}\x03").into_bytes()),
        3 => ("prefix = \"@\"\nsuffix = \"\\n\"", |l| {
            format!("@{l}\n").into_bytes()
        }),
        _ => ("suffix = \"\"\nframe_timeout_ms = 150", |l| {
            l.as_bytes().to_vec()
        }),
    }
}

#[test]
fn sixteen_scanners_each_with_its_own_profile() {
    let mut gw = Gateway::builder("scangate-many-")
        .ptys((0..SCANNERS).map(|i| {
            let mut s = ScannerSpec::named(&format!("sc-{i:02}")).with(framing(i).0);
            s.scan_type = TYPES[i % TYPES.len()];
            s.quantity = i as u32 + 1;
            s.ack = i % 2 == 0;
            s
        }))
        .build();
    let mut daemon = gw.launch();
    let ptys: [VirtualScanner; SCANNERS] = gw.take_scanners();

    // Every scanner at once: PICKS picks, then an echo of the last one.
    let players: Vec<_> = ptys
        .into_iter()
        .enumerate()
        .map(|(i, mut vs)| {
            std::thread::spawn(move || {
                let encode = framing(i).1;
                let mut replies_seen = Vec::new();
                for p in 0..=PICKS {
                    let serial = format!("M{i:02}P{}", p.min(PICKS - 1));
                    vs.send(&encode(&dscsa(&serial))).unwrap();
                    if i % 2 == 0 {
                        replies_seen.extend(replies(&mut vs, 1).0);
                    } else {
                        // No ACK to wait for: the scanner's own pace, longer
                        // than a no-terminator scanner's frame timeout.
                        std::thread::sleep(Duration::from_millis(600));
                    }
                }
                (vs, replies_seen)
            })
        })
        .collect();
    let mut ptys = Vec::new();
    for (i, p) in players.into_iter().enumerate() {
        let (vs, replies_seen) = p.join().unwrap();
        if i % 2 == 0 {
            assert_eq!(replies_seen, vec![ACK; PICKS + 1], "sc-{i:02}");
        }
        ptys.push(vs);
    }
    let st = wait_all_decided(&gw.cfg, (SCANNERS * (PICKS + 1)) as i64);
    assert_eq!(count(&st, "committed"), (SCANNERS * PICKS) as i64, "{st}");
    assert_eq!(count(&st, "suppressed"), SCANNERS as i64, "{st}");
    assert_eq!(count(&st, "rejected"), 0, "{st}");
    assert_eq!(daemon.terminate().code(), Some(0));
    for (i, vs) in ptys.iter_mut().enumerate() {
        let extra = drain(vs, Duration::from_millis(20));
        assert!(extra.is_empty(), "sc-{i:02}: unexpected bytes {extra:02x?}");
    }

    let ledger = ledger(&gw.cfg);
    assert_eq!(ledger.len(), SCANNERS * PICKS);
    for i in 0..SCANNERS {
        let name = format!("sc-{i:02}");
        let mine: Vec<_> = ledger
            .iter()
            .filter(|e| e["scanner"] == name.as_str())
            .collect();
        assert_eq!(mine.len(), PICKS, "{name}");
        for e in mine {
            assert_eq!(e["scan_type"], TYPES[i % TYPES.len()], "{name}: {e}");
            assert_eq!(e["quantity"], i as u64 + 1, "{name}: {e}");
            assert!(
                e["serial"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("M{i:02}P"))
            );
        }
    }
}
