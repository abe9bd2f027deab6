//! HID report decoding on one thread: `cargo bench --bench hid`.
//!
//! Plain timing loops (no criterion), like `benches/decode.rs`:
//!
//! - **throughput**: reports/s through `HidDecoder::push` (the call the live
//!   HID source makes per report), for a 2-report HID POS DataMatrix and for
//!   a keyboard-wedge DSCSA label typed as press/release reports (US and
//!   German), best of `ROUNDS` rounds of about a second;
//! - **latency**: from the last report of a scan handed to the decoder to
//!   the end of `Scan::capture` (stamp + barcode decoding), i.e. what the
//!   source adds between reading the final report and queueing the scan for
//!   the outbox; p50 / p99 / max over `SAMPLES` scans.

use scangate::capture::{Profile, RawScan, Scan};
use scangate::config::ScanType;
use scangate::source::hid::HidDecoder;
use scangate::source::hid::keyboard::{GsConvention, Terminators};
use scangate::source::hid::layout::{Layout, LayoutKey};
use scangate::source::hid::pos::{self, DEFAULT_REPORT_ID};
use std::hint::black_box;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;
const SAMPLES: usize = 20_000;
const LABEL: &[u8] = b"01003077731050251728123121SN0000012345\x1d10LOT7A\x1d91XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX";

fn typed(layout: Layout, text: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for &b in text {
        let (mods, usage) = if b == 0x1d {
            (0x01, 0x30)
        } else {
            find(layout, b as char)
        };
        out.push(vec![mods, 0, usage, 0, 0, 0, 0, 0]);
        out.push(vec![0; 8]);
    }
    out.push(vec![0, 0, 0x28, 0, 0, 0, 0, 0]);
    out.push(vec![0; 8]);
    out
}

fn find(layout: Layout, c: char) -> (u8, u8) {
    for usage in 0x04..=0x64u8 {
        for (shift, altgr, mods) in [(false, false, 0), (true, false, 0x02), (false, true, 0x40)] {
            if layout.key(usage, shift, altgr) == LayoutKey::Char(c) {
                return (mods, usage);
            }
        }
    }
    panic!("{c:?}")
}

fn decoder(kind: &str) -> HidDecoder {
    let t = Duration::from_millis(500);
    match kind {
        "pos" => HidDecoder::pos(DEFAULT_REPORT_ID, 4096, t),
        "us" => HidDecoder::keyboard(
            Layout::Us,
            GsConvention::Auto,
            Terminators::default(),
            4096,
            t,
        ),
        _ => HidDecoder::keyboard(
            Layout::German,
            GsConvention::Auto,
            Terminators::default(),
            4096,
            t,
        ),
    }
}

fn throughput(kind: &str, reports: &[Vec<u8>]) -> f64 {
    let mut best = 0f64;
    let mut out: Vec<RawScan> = Vec::new();
    let now = Instant::now();
    for _ in 0..ROUNDS {
        let mut d = decoder(kind);
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < Duration::from_secs(1) {
            for _ in 0..100 {
                for r in reports {
                    d.push(black_box(r), now, &mut out);
                }
                n += reports.len() as u64;
                out.clear();
            }
        }
        best = best.max(n as f64 / start.elapsed().as_secs_f64());
    }
    best
}

fn latency(kind: &str, reports: &[Vec<u8>]) -> (Duration, Duration, Duration) {
    let profile = Profile {
        scanner: "bench".into(),
        scan_type: ScanType::Dispense,
        quantity: 1,
        owner: None,
        unserialised: Default::default(),
    };
    let mut d = decoder(kind);
    let mut out = Vec::new();
    let (head, last) = reports.split_at(reports.len() - 1);
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let now = Instant::now();
        for r in head {
            d.push(r, now, &mut out);
        }
        let t0 = Instant::now();
        d.push(&last[0], t0, &mut out);
        for raw in out.drain(..) {
            black_box(Scan::capture(&profile, raw));
        }
        samples.push(t0.elapsed());
    }
    samples.sort();
    (
        samples[SAMPLES / 2],
        samples[SAMPLES * 99 / 100],
        samples[SAMPLES - 1],
    )
}

fn main() {
    let pos_reports = pos::encode(DEFAULT_REPORT_ID, b"]d2", LABEL, true);
    let us = typed(Layout::Us, LABEL);
    let de = typed(Layout::German, LABEL);
    // For latency the keyboard scan ends at the Enter press (the release
    // after it types nothing).
    let us_lat = &us[..us.len() - 1];
    /// (name, decoder kind, reports for throughput, reports for latency)
    type Case<'a> = (&'a str, &'a str, &'a [Vec<u8>], &'a [Vec<u8>]);
    let cases: [Case; 3] = [
        ("HID POS, 2 reports/scan", "pos", &pos_reports, &pos_reports),
        ("keyboard US, press+release", "us", &us, us_lat),
        ("keyboard DE, press+release", "de", &de, &de[..de.len() - 1]),
    ];
    println!("label: {} data bytes (DSCSA + (91) field)", LABEL.len());
    for (name, kind, reports, lat) in cases {
        let rate = throughput(kind, reports);
        let (p50, p99, max) = latency(kind, lat);
        println!(
            "{name:32} {:>12.0} reports/s ({:>9.0} scans/s)   last report -> captured p50 {:?} p99 {:?} max {:?}",
            rate,
            rate / reports.len() as f64,
            p50,
            p99,
            max
        );
    }
}
