//! Every framing mode on the real binary over a PTY: the frame split into
//! one-byte writes, two frames in one write, and the mode's own broken
//! frames (missing prefix, torn STX frame, stray bytes, a frame left
//! unfinished). Each scanner runs with `ack = true`, so every frame's fate
//! is visible on the scanner side (ACK = stored and usable, NAK = rejected)
//! and the test never has to guess when the daemon is done.

use crate::util::*;
use std::time::Duration;

const STX: u8 = 0x02;
const ETX: u8 = 0x03;

/// A transmission that must be NAKed and stored as rejected with a reason
/// containing `reason`. With `glued`, it is written in one write together
/// with the good frame that follows it (which then ends it).
struct Broken<'a> {
    bytes: &'a [u8],
    reason: &'a str,
    glued: bool,
}

fn broken<'a>(bytes: &'a [u8], reason: &'a str) -> Broken<'a> {
    Broken {
        bytes,
        reason,
        glued: false,
    }
}

/// Run one scanner in `extra`'s framing mode. `encode` frames a label;
/// every transmission in `broken` must be NAKed (rejected, with a reason)
/// and never stored as a scan, and must not disturb the good frame after it.
fn check_mode(
    tag: &str,
    extra: &str,
    encode: impl Fn(&str) -> Vec<u8>,
    two_in_one_write: bool,
    broken: &[Broken],
) {
    let mut gw = Gateway::builder(&format!("scangate-framing-{tag}-"))
        .pty(ScannerSpec::named("s").ack().with(extra))
        .build();
    let mut daemon = gw.launch();
    let [mut vs] = gw.take_scanners();

    // 1. One frame written one byte at a time.
    let f1 = encode(&dscsa(&format!("{tag}-1")));
    for b in &f1 {
        vs.send(std::slice::from_ref(b)).unwrap();
        std::thread::sleep(Duration::from_millis(1)); // the scanner's pace
    }
    assert_eq!(replies(&mut vs, 1).0, [ACK], "{tag}: split frame");

    // 2. Two frames in one write (one frame after another for a scanner
    //    without a terminator: a pause is what separates its frames).
    let f2 = encode(&dscsa(&format!("{tag}-2")));
    let f3 = encode(&dscsa(&format!("{tag}-3")));
    if two_in_one_write {
        vs.send(&[f2, f3].concat()).unwrap();
        assert_eq!(
            replies(&mut vs, 2).0,
            [ACK, ACK],
            "{tag}: two frames, one write"
        );
    } else {
        for f in [f2, f3] {
            vs.send(&f).unwrap();
            assert_eq!(replies(&mut vs, 1).0, [ACK], "{tag}");
        }
    }

    // 3. The mode's broken frames, each followed by a good one so that a
    //    broken frame must not swallow or corrupt the next.
    for (i, b) in broken.iter().enumerate() {
        let good = encode(&dscsa(&format!("{tag}-after-{i}")));
        if b.glued {
            vs.send(&[b.bytes, &good].concat()).unwrap();
            assert_eq!(
                replies(&mut vs, 2).0,
                [NAK, ACK],
                "{tag}: broken frame {i} + good frame"
            );
        } else {
            vs.send(b.bytes).unwrap();
            assert_eq!(
                replies(&mut vs, 1).0,
                [NAK],
                "{tag}: broken frame {i} {:02x?}",
                b.bytes
            );
            vs.send(&good).unwrap();
            assert_eq!(
                replies(&mut vs, 1).0,
                [ACK],
                "{tag}: good frame after broken frame {i}"
            );
        }
    }

    wait_all_decided(&gw.cfg, 3 + 2 * broken.len() as i64);
    assert_eq!(daemon.terminate().code(), Some(0));
    assert!(
        drain(&mut vs, Duration::from_millis(100)).is_empty(),
        "{tag}: no extra replies"
    );

    let rows = rows(&gw.state, "s");
    let committed: Vec<&str> = rows
        .iter()
        .filter(|r| r.0 == "committed")
        .map(|r| r.1.as_deref().unwrap())
        .collect();
    let mut want: Vec<String> = (1..=3).map(|i| format!("{tag}-{i}")).collect();
    want.extend((0..broken.len()).map(|i| format!("{tag}-after-{i}")));
    assert_eq!(
        committed, want,
        "{tag}: every good frame stored once, in order: {rows:?}"
    );
    let rejected: Vec<&str> = rows
        .iter()
        .filter(|r| r.0 == "rejected")
        .map(|r| r.2.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(rejected.len(), broken.len(), "{tag}: {rows:?}");
    for (b, got) in broken.iter().zip(&rejected) {
        assert!(!got.is_empty(), "{tag}: a rejection without a reason");
        assert!(
            got.contains(b.reason),
            "{tag}: reason {got:?} should mention {:?}",
            b.reason
        );
    }
    audit_verify(&gw.cfg);
}

#[test]
fn default_framing_cr_lf_or_crlf() {
    let long = [vec![b'9'; 300], b"\r\n".to_vec()].concat();
    check_mode(
        "lines",
        "max_frame_bytes = 256",
        |l| format!("{l}\r\n").into_bytes(),
        true,
        &[broken(&long, "max_frame_bytes")],
    );
}

#[test]
fn explicit_suffix_crlf() {
    // With suffix "\r\n" a lone CR is data: the decoder rejects it.
    let lone_cr = format!("{}\rX\r\n", dscsa("LONE"));
    check_mode(
        "crlf",
        "suffix = \"\\r\\n\"",
        |l| format!("{l}\r\n").into_bytes(),
        true,
        &[broken(lone_cr.as_bytes(), "")],
    );
}

#[test]
fn multi_byte_suffix_given_as_byte_array() {
    // EOT ETB, written as an array of byte values.
    check_mode(
        "bytes",
        "suffix = [0x04, 0x17]",
        |l| [l.as_bytes(), &[0x04, 0x17]].concat(),
        true,
        &[],
    );
}

#[test]
fn prefix_is_stripped_and_required() {
    let without = format!("{}\r", dscsa("NOPFX"));
    check_mode(
        "prefix",
        "prefix = \"#S1:\"\nsuffix = \"\\r\"",
        |l| format!("#S1:{l}\r").into_bytes(),
        true,
        &[broken(without.as_bytes(), "prefix")],
    );
}

#[test]
fn stx_etx_framing() {
    let wrap = |l: &str| [&[STX][..], l.as_bytes(), &[ETX, b'\r', b'\n']].concat();
    // A frame torn by a new STX, and bytes outside any frame followed by a
    // pause (frame_timeout_ms reports them).
    let torn = [&[STX][..], b"]d201003077"].concat();
    check_mode(
        "stx",
        "stx_etx = true\nframe_timeout_ms = 300",
        wrap,
        true,
        &[
            Broken {
                bytes: &torn,
                reason: "STX before its ETX",
                glued: true,
            },
            broken(b"stray bytes", "outside STX"),
        ],
    );
}

#[test]
fn no_terminator_frames_end_after_a_pause() {
    check_mode(
        "timeout",
        "suffix = \"\"\nframe_timeout_ms = 400",
        |l| l.as_bytes().to_vec(),
        false,
        &[],
    );
}

#[test]
fn a_frame_left_unfinished_is_rejected_after_frame_timeout_ms() {
    // With a terminator and a timeout, half a frame followed by silence is
    // NAKed as torn instead of being glued to the next scan.
    let half = dscsa("HALF");
    let half = &half.as_bytes()[..10];
    check_mode(
        "torn",
        "frame_timeout_ms = 300",
        |l| format!("{l}\r\n").into_bytes(),
        true,
        &[broken(half, "incomplete frame")],
    );
}
