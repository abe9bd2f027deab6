//! Decoding throughput on one thread: `cargo bench --bench decode`.
//!
//! A plain timing loop (no criterion: one number is all the issue asks for,
//! and it keeps the dev build small). Each input is decoded in a tight loop
//! on the calling thread for about `SECONDS` seconds, after a warm-up; the
//! best of `ROUNDS` rounds is reported as decodes per second.
//!
//! `SCANGATE_BENCH_SECONDS` overrides the time per round (default 1).
//! `SCANGATE_BENCH_COUNT=N` instead runs exactly N decodes per input with no
//! timing (for `valgrind --tool=callgrind` instruction counts, which don't
//! depend on what else the machine is doing). An argument filters inputs by
//! name, e.g. `cargo bench --bench decode -- ]d2`.

use scangate::capture::barcode::{self, decode_with_year};
use std::hint::black_box;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;
const YEAR: i32 = 2025;

/// A realistic DSCSA GS1 DataMatrix string: AIM id, (01) GTIN-14
/// with a US NDC, (17) expiry, (21) serial, GS, (10) lot.
const DSCSA: &[u8] = b"]d201003077731050251728123121SN0000012345\x1d10LOT7A";

fn inputs() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("DSCSA ]d2 (01)(17)(21)<GS>(10)", DSCSA.to_vec()),
        ("DSCSA, no AIM id", DSCSA[3..].to_vec()),
        ("UPC-A ]E0", b"]E00307773105025".to_vec()),
        (
            "Digital Link ]Q1",
            b"]Q1https://id.gs1.org/01/00307773105025/10/LOT7A/21/SN0000012345?17=281231".to_vec(),
        ),
        ("invalid: bad check digit", b"]d20100307773105026".to_vec()),
    ]
}

fn rate(data: &[u8], per_round: Duration) -> f64 {
    // Warm-up, and a batch size that makes one clock read per ~1 ms.
    let mut batch = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..batch {
            let _ = black_box(decode_with_year(black_box(data), black_box(YEAR)));
        }
        if t.elapsed() >= Duration::from_millis(1) {
            break;
        }
        batch *= 2;
    }
    let mut best = 0f64;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < per_round {
            for _ in 0..batch {
                let _ = black_box(decode_with_year(black_box(data), black_box(YEAR)));
            }
            n += batch;
        }
        best = best.max(n as f64 / start.elapsed().as_secs_f64());
    }
    best
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects inputs.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let secs: f64 = std::env::var("SCANGATE_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let per_round = Duration::from_secs_f64(secs);
    // Fixed-count mode for instruction counting (no clock in the loop):
    // `SCANGATE_BENCH_COUNT=100000 valgrind --tool=callgrind <bench binary> ]d2`.
    if let Some(count) = std::env::var("SCANGATE_BENCH_COUNT")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        for (name, data) in inputs() {
            if filter.as_deref().is_some_and(|f| !name.contains(f)) {
                continue;
            }
            for _ in 0..count {
                let _ = black_box(decode_with_year(black_box(&data), black_box(YEAR)));
            }
            println!("{name}: {count} decodes");
        }
        return;
    }
    println!("scangate decode benchmark: one thread, best of {ROUNDS} rounds of {secs} s");
    for (name, data) in inputs() {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        // The bench is only meaningful if the valid inputs really decode.
        let ok = barcode::decode_with_year(&data, YEAR).is_ok();
        let r = rate(&data, per_round);
        println!(
            "{name:<34} {:>4} bytes  {:>12.0} decodes/s  {:>7.1} ns/decode  ({})",
            data.len(),
            r,
            1e9 / r,
            if ok { "valid" } else { "rejected" }
        );
    }
}
