//! Unit tests of the framer (kept apart: the module reads on its own).

use super::*;

fn frames(f: &mut Framer, input: &[u8]) -> Vec<(Vec<u8>, bool)> {
    f.push(input)
        .into_iter()
        .map(|r| (r.bytes, r.framing_error.is_some()))
        .collect()
}

fn ok(b: &[u8]) -> (Vec<u8>, bool) {
    (b.to_vec(), false)
}

fn spec(end: End) -> FrameSpec {
    FrameSpec {
        prefix: Vec::new(),
        end,
        timeout_ms: None,
        max: 64,
    }
}

/// Feed `input` one byte per push and all at once: same frames.
fn same_split_and_whole(s: FrameSpec, input: &[u8]) -> Vec<(Vec<u8>, bool)> {
    let mut whole = Framer::with_spec(s.clone());
    let a = frames(&mut whole, input);
    let mut split = Framer::with_spec(s);
    let b: Vec<_> = input
        .iter()
        .flat_map(|b| frames(&mut split, std::slice::from_ref(b)))
        .collect();
    assert_eq!(a, b, "byte-by-byte and whole input must frame alike");
    a
}

#[test]
fn cr_lf_and_crlf_end_frames() {
    let mut f = Framer::new(64);
    let got = frames(&mut f, b"a\rb\nc\r\nd");
    assert_eq!(got, vec![ok(b"a"), ok(b"b"), ok(b"c")]);
    assert_eq!(f.partial(), 1);
    assert_eq!(frames(&mut f, b"\r"), vec![ok(b"d")]);
}

#[test]
fn split_writes_join() {
    let mut f = Framer::new(64);
    assert!(frames(&mut f, b"01003").is_empty());
    assert_eq!(frames(&mut f, b"49\r"), vec![ok(b"0100349")]);
    let got = same_split_and_whole(FrameSpec::lines(64), b"]d2010030\r\nsecond\r\n");
    assert_eq!(got, vec![ok(b"]d2010030"), ok(b"second")]);
}

#[test]
fn overlong_frame_is_flagged_and_stream_resyncs() {
    let mut f = Framer::new(16);
    let mut input = vec![b'x'; 100];
    input.extend_from_slice(b"\rok\r");
    let got = frames(&mut f, &input);
    assert_eq!(got.len(), 2);
    assert!(got[0].1, "over-long frame must carry a framing error");
    assert_eq!(got[0].0.len(), 16, "kept bytes are bounded");
    assert_eq!(got[1], ok(b"ok"));
}

#[test]
fn exactly_max_bytes_is_accepted_with_every_terminator() {
    for end in [End::Lines, End::Suffix(b"\r\n".to_vec()), End::StxEtx] {
        let mut s = spec(end.clone());
        s.max = 4;
        let input: &[u8] = match end {
            End::StxEtx => b"\x02abcd\x03\x02abcde\x03",
            End::Suffix(_) => b"abcd\r\nabcde\r\n",
            _ => b"abcd\rabcde\r",
        };
        let got = same_split_and_whole(s, input);
        assert_eq!(got.len(), 2, "{end:?}: {got:?}");
        assert_eq!(got[0], ok(b"abcd"), "{end:?}");
        assert!(got[1].1, "{end:?}: 5 bytes > max 4");
    }
}

#[test]
fn custom_suffix_ends_frames_and_other_control_bytes_are_data() {
    let s = spec(End::Suffix(b"\r\n".to_vec()));
    let got = same_split_and_whole(s, b"one\r\ntwo\rx\r\n\r\nthree\nx\r\n");
    // A lone CR or LF is data (the decoder rejects it); an empty frame is
    // not a scan.
    assert_eq!(got, vec![ok(b"one"), ok(b"two\rx"), ok(b"three\nx")]);
}

#[test]
fn multi_byte_and_self_overlapping_suffixes() {
    let got = same_split_and_whole(spec(End::Suffix(b"#END".to_vec())), b"a#ENb#END#E#END");
    assert_eq!(got, vec![ok(b"a#ENb"), ok(b"#E")]);
    // "aab": after "aa" a further 'a' must keep one 'a' matched.
    let got = same_split_and_whole(spec(End::Suffix(b"aab".to_vec())), b"xaaab1aab");
    assert_eq!(got, vec![ok(b"xa"), ok(b"1")]);
    let got = same_split_and_whole(spec(End::Suffix(b"\r\r\n".to_vec())), b"p\r\r\r\nq\r\r\n");
    assert_eq!(got, vec![ok(b"p\r"), ok(b"q")]);
}

#[test]
fn suffix_split_across_reads() {
    let mut f = Framer::with_spec(spec(End::Suffix(b"\r\n".to_vec())));
    assert!(frames(&mut f, b"abc\r").is_empty());
    assert_eq!(frames(&mut f, b"\nde\r\nf"), vec![ok(b"abc"), ok(b"de")]);
}

#[test]
fn overlong_with_suffix_resyncs_at_the_suffix() {
    let mut s = spec(End::Suffix(b"\r\n".to_vec()));
    s.max = 8;
    let mut input = vec![b'z'; 50];
    input.extend_from_slice(b"\r\r\r\nok\r\n");
    let got = same_split_and_whole(s, &input);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].1);
    assert_eq!(got[0].0.len(), 8);
    assert_eq!(got[1], ok(b"ok"));
}

#[test]
fn prefix_is_stripped_or_the_frame_rejected() {
    let mut s = FrameSpec::lines(64);
    s.prefix = b"PX".to_vec();
    let got = same_split_and_whole(s, b"PXabc\rPabc\rPX\r");
    assert_eq!(got[0], ok(b"abc"));
    assert!(got[1].1, "missing prefix is a framing error");
    assert_eq!(got[1].0, b"Pabc", "the frame is kept as received");
    assert_eq!(got[2], ok(b""), "prefix only: empty data, left to capture");
    let mut f = Framer::with_spec({
        let mut s = FrameSpec::lines(64);
        s.prefix = b"PX".to_vec();
        s
    });
    let r = f.push(b"nope\r").pop().unwrap();
    assert!(r.framing_error.unwrap().contains("prefix"));
}

#[test]
fn stx_etx_frames_ignore_crlf_between_and_report_strays() {
    let s = spec(End::StxEtx);
    let got = same_split_and_whole(s, b"\x02one\x03\r\n\x02two\x03junk\x02three\x03");
    assert_eq!(
        got,
        vec![
            ok(b"one"),
            ok(b"two"),
            (b"junk".to_vec(), true),
            ok(b"three")
        ]
    );
}

#[test]
fn stx_inside_a_frame_reports_the_torn_frame_and_restarts() {
    let got = same_split_and_whole(spec(End::StxEtx), b"\x02tor\x02whole\x03");
    assert_eq!(got, vec![(b"tor".to_vec(), true), ok(b"whole")]);
}

#[test]
fn stx_etx_overlong_resyncs_at_etx_or_stx() {
    let mut s = spec(End::StxEtx);
    s.max = 4;
    let got = same_split_and_whole(s, b"\x02abcdefgh\x03\x02ok\x03\x02toolong\x02ok2\x03");
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(got[0].1 && got[2].1);
    assert_eq!(got[1], ok(b"ok"));
    assert_eq!(got[3], ok(b"ok2"));
}

#[test]
fn stx_etx_with_prefix() {
    let mut s = spec(End::StxEtx);
    s.prefix = b"]".to_vec();
    let got = same_split_and_whole(s, b"\x02]d2x\x03\x02d2x\x03");
    assert_eq!(got[0], ok(b"d2x"));
    assert!(got[1].1);
}

#[test]
fn timeout_mode_frames_end_on_expire_only() {
    let mut s = spec(End::Timeout);
    s.timeout_ms = Some(50);
    let mut f = Framer::with_spec(s);
    assert!(frames(&mut f, b"]d20100").is_empty());
    assert!(frames(&mut f, b"307\r\n").is_empty(), "CR/LF are data here");
    assert!(f.pending());
    let r = f.expire().unwrap();
    assert_eq!(r.bytes, b"]d20100307\r\n");
    assert!(r.framing_error.is_none());
    assert!(!f.pending());
    assert!(f.expire().is_none(), "nothing pending, nothing to end");
}

#[test]
fn timeout_with_a_terminator_rejects_a_torn_frame() {
    let mut s = FrameSpec::lines(64);
    s.timeout_ms = Some(50);
    let mut f = Framer::with_spec(s);
    assert!(frames(&mut f, b"torn").is_empty());
    let r = f.expire().unwrap();
    assert_eq!(r.bytes, b"torn");
    assert!(r.framing_error.unwrap().contains("incomplete frame"));
    assert_eq!(frames(&mut f, b"next\r"), vec![ok(b"next")], "not glued");
    // Stray bytes outside STX/ETX are reported on a pause too.
    let mut s = spec(End::StxEtx);
    s.timeout_ms = Some(50);
    let mut f = Framer::with_spec(s);
    assert!(frames(&mut f, b"\x02ok\x03zz").len() == 1);
    assert!(f.expire().unwrap().framing_error.is_some());
}

#[test]
fn timeout_mode_overlong_is_delivered_once_and_resyncs_at_the_pause() {
    let mut s = spec(End::Timeout);
    s.timeout_ms = Some(50);
    s.max = 16;
    let mut f = Framer::with_spec(s);
    let got = frames(&mut f, &[b'x'; 1000]);
    assert_eq!(got.len(), 1);
    assert!(got[0].1);
    assert!(frames(&mut f, &[b'x'; 1000]).is_empty(), "delivered once");
    assert!(f.pending());
    assert!(f.expire().is_none(), "already delivered");
    assert!(frames(&mut f, b"ok").is_empty());
    assert_eq!(f.expire().unwrap().bytes, b"ok");
}

/// A binary flood with no terminator: memory stays at the limit, one
/// rejection is delivered, and the stream recovers at the next terminator.
#[test]
fn flood_without_terminator_is_bounded() {
    for end in [
        End::Lines,
        End::Suffix(b"\r\n".to_vec()),
        End::StxEtx,
        End::Timeout,
    ] {
        let mut s = spec(end.clone());
        s.max = 4096;
        s.timeout_ms = Some(50);
        let mut f = Framer::with_spec(s);
        // Pseudo-random bytes without CR, LF, STX, ETX.
        let mut x: u32 = 1;
        let chunk: Vec<u8> = (0..65536)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                match (x >> 16) as u8 {
                    b'\r' | b'\n' | STX | ETX => b'?',
                    b => b,
                }
            })
            .collect();
        let start = if end == End::StxEtx {
            vec![STX]
        } else {
            vec![]
        };
        let mut delivered = frames(&mut f, &start);
        for _ in 0..160 {
            // 10 MiB in all
            delivered.extend(frames(&mut f, &chunk));
            assert!(
                f.buffered() <= 4096 + 2,
                "{end:?}: framer holds {} bytes",
                f.buffered()
            );
        }
        assert_eq!(delivered.len(), 1, "{end:?}: one rejection per flood");
        assert!(delivered[0].1 && delivered[0].0.len() == 4096, "{end:?}");
        assert!(f.partial() > 10_000_000, "{end:?}: discarded bytes counted");
        let tail: &[u8] = match end {
            End::Lines => b"\rok\r",
            End::Suffix(_) => b"\r\nok\r\n",
            End::StxEtx => b"\x03\x02ok\x03",
            End::Timeout => b"",
        };
        if end == End::Timeout {
            assert!(f.expire().is_none());
            frames(&mut f, b"ok");
            assert_eq!(f.expire().unwrap().bytes, b"ok");
        } else {
            assert_eq!(frames(&mut f, tail), vec![ok(b"ok")], "{end:?}");
        }
    }
}

#[test]
fn hostile_bytes_never_panic_and_stay_bounded() {
    // Every byte value, in every mode, byte by byte and in bulk.
    let all: Vec<u8> = (0..=255u8).cycle().take(256 * 40).collect();
    for end in [
        End::Lines,
        End::Suffix(vec![0x00, 0xff]),
        End::StxEtx,
        End::Timeout,
    ] {
        let mut s = spec(end);
        s.max = 16;
        s.prefix = b"P".to_vec();
        s.timeout_ms = Some(5);
        let got = same_split_and_whole(s.clone(), &all);
        assert!(got.iter().all(|(b, _)| b.len() <= 16));
        let mut f = Framer::with_spec(s);
        f.push(&all);
        assert!(f.buffered() <= 16 + 2);
        f.expire();
        assert!(!f.pending());
    }
}
