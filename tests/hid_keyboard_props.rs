//! Property test: random barcode text (printable ASCII and GS), typed as
//! boot keyboard reports by an encoder written here — under every layout
//! and GS convention, with the quirks real scanners and keyboards show
//! (duplicated press reports, releases left out between different keys,
//! ErrorRollOver reports, modifiers held into the release, a leading report
//! id) — decodes back to the same text through `HidDecoder`.

use proptest::prelude::*;
use scangate::source::hid::HidDecoder;
use scangate::source::hid::keyboard::{GsConvention, Terminators, USAGE_F8};
use scangate::source::hid::layout::{Layout, LayoutKey};
use std::time::{Duration, Instant};

const GS: char = '\u{1d}';
const SHIFT: [u8; 2] = [0x02, 0x20];
const ALTGR: u8 = 0x40;

/// (modifiers, usage) presses that type `c` under `layout` (a dead key is
/// followed by Space).
fn keys_for(layout: Layout, c: char, right_shift: bool) -> Vec<(u8, u8)> {
    for usage in 0x04..=0x64u8 {
        for (shift, altgr) in [(false, false), (true, false), (false, true)] {
            let mods = if shift {
                SHIFT[usize::from(right_shift)]
            } else {
                0
            } | if altgr { ALTGR } else { 0 };
            match layout.key(usage, shift, altgr) {
                LayoutKey::Char(k) if k == c => return vec![(mods, usage)],
                LayoutKey::Dead(k) if k == c => return vec![(mods, usage), (0, 0x2C)],
                _ => {}
            }
        }
    }
    panic!("{c:?} is not typeable under {layout:?}");
}

#[derive(Debug, Clone)]
struct Quirks {
    duplicate: Vec<bool>,
    skip_release: Vec<bool>,
    rollover: Vec<bool>,
    hold_mods: Vec<bool>,
    right_shift: Vec<bool>,
    alt_gs: Vec<bool>,
    report_id: bool,
}

fn quirks(n: usize) -> impl Strategy<Value = Quirks> {
    let v = move || proptest::collection::vec(any::<bool>(), n..=n);
    (v(), v(), v(), v(), v(), v(), any::<bool>()).prop_map(
        |(duplicate, skip_release, rollover, hold_mods, right_shift, alt_gs, report_id)| Quirks {
            duplicate,
            skip_release,
            rollover,
            hold_mods,
            right_shift,
            alt_gs,
            report_id,
        },
    )
}

/// Type `text` + Enter as reports.
fn type_text(layout: Layout, gs: &GsConvention, text: &str, q: &Quirks) -> Vec<Vec<u8>> {
    let mut presses: Vec<(u8, u8)> = Vec::new();
    for (i, c) in text.chars().enumerate() {
        if c == GS {
            match gs {
                GsConvention::F8 => presses.push((0, USAGE_F8)),
                GsConvention::CtrlBracket => presses.push(ctrl_bracket(layout, q.alt_gs[i])),
                GsConvention::Auto if q.alt_gs[i] => presses.push((0, USAGE_F8)),
                GsConvention::Auto => presses.push(ctrl_bracket(layout, i % 2 == 0)),
                GsConvention::Substitute(s) => {
                    for sc in String::from_utf8(s.clone()).unwrap().chars() {
                        presses.extend(keys_for(layout, sc, q.right_shift[i]));
                    }
                }
                GsConvention::None => unreachable!(),
            }
        } else {
            presses.extend(keys_for(layout, c, q.right_shift[i % q.right_shift.len()]));
        }
    }
    presses.push((0, 0x28)); // Enter
    let n = q.duplicate.len();
    let mut out = Vec::new();
    for (i, &(mods, usage)) in presses.iter().enumerate() {
        let press = [mods, 0, usage, 0, 0, 0, 0, 0];
        out.push(press);
        if q.duplicate[i % n] {
            out.push(press); // key still held: the same report again
        }
        if q.rollover[i % n] {
            out.push([0, 0, 1, 1, 1, 1, 1, 1]);
        }
        let next_differs = presses.get(i + 1).is_some_and(|&(_, u)| u != usage);
        if q.skip_release[i % n] && next_differs {
            continue; // the next key appears without this one released
        }
        let held_mods = if q.hold_mods[i % n] { mods } else { 0 };
        out.push([held_mods, 0, 0, 0, 0, 0, 0, 0]);
    }
    out.into_iter()
        .map(|r| {
            if q.report_id {
                [&[0x02u8][..], &r].concat()
            } else {
                r.to_vec()
            }
        })
        .collect()
}

/// Ctrl with the key at the US `]` position, or (second form) with the key
/// that types `]` in the layout.
fn ctrl_bracket(layout: Layout, layout_key: bool) -> (u8, u8) {
    if layout_key {
        let (mods, usage) = keys_for(layout, ']', false)[0];
        (mods | 0x01, usage)
    } else {
        (0x10, 0x30) // right Ctrl this time
    }
}

fn conventions() -> impl Strategy<Value = GsConvention> {
    prop_oneof![
        Just(GsConvention::Auto),
        Just(GsConvention::CtrlBracket),
        Just(GsConvention::F8),
        Just(GsConvention::Substitute(b"~".to_vec())),
        Just(GsConvention::Substitute(b"{GS}".to_vec())),
    ]
}

/// Printable ASCII and GS; without `~`, `{` (the substitutes' first chars).
fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            8 => (0x20u8..=0x7e).prop_filter("substitute chars", |b| *b != b'~' && *b != b'{').prop_map(char::from),
            1 => Just(GS),
        ],
        1..60,
    )
    .prop_map(|v| v.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn typed_text_decodes_back(
        layout in prop_oneof![Just(Layout::Us), Just(Layout::German)],
        gs in conventions(),
        (text, q) in text().prop_flat_map(|t| { let n = t.chars().count() * 5 + 8; (Just(t), quirks(n)) }),
    ) {
        let reports = type_text(layout, &gs, &text, &q);
        let mut d = HidDecoder::keyboard(layout, gs.clone(), Terminators::default(), 4096, Duration::from_millis(500));
        let now = Instant::now();
        let mut out = Vec::new();
        for r in &reports {
            d.push(r, now, &mut out);
        }
        prop_assert!(!d.pending(), "Enter must have ended the scan");
        prop_assert_eq!(out.len(), 1);
        prop_assert!(out[0].framing_error.is_none());
        prop_assert_eq!(String::from_utf8(out[0].bytes.clone()).unwrap(), text);
    }
}

/// Real-keyboard behaviour, spelled out: a held key (no release ever) is
/// one character however many reports repeat it; a repeated character
/// needs a release in between; a missing Enter is a torn scan, rejected
/// after the pause, and the next scan starts clean.
#[test]
fn stuck_keys_and_missing_terminators() {
    let press = |u: u8| vec![0, 0, u, 0, 0, 0, 0, 0];
    let up = vec![0u8; 8];
    let mut d = HidDecoder::keyboard(
        Layout::Us,
        GsConvention::Auto,
        Terminators::default(),
        4096,
        Duration::from_millis(500),
    );
    let t0 = Instant::now();
    let mut out = Vec::new();
    for _ in 0..50 {
        d.push(&press(0x1E), t0, &mut out); // '1' stuck
    }
    d.push(&press(0x28), t0, &mut out); // Enter appears: '1' released implicitly
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bytes, b"1");
    out.clear();
    for r in [press(0x1E), up.clone(), press(0x1E), up.clone()] {
        d.push(&r, t0, &mut out);
    }
    assert!(out.is_empty() && d.pending());
    d.expire(t0 + Duration::from_millis(499), &mut out);
    assert!(out.is_empty());
    d.expire(t0 + Duration::from_millis(500), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bytes, b"11");
    assert!(
        out[0]
            .framing_error
            .as_deref()
            .unwrap()
            .contains("no terminator")
    );
    out.clear();
    for r in [press(0x1F), up.clone(), press(0x28), up] {
        d.push(&r, t0, &mut out);
    }
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bytes, b"2", "the torn scan is not glued to the next");
}
