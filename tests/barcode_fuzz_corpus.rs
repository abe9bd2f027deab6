//! The decoder over the cargo-fuzz corpus (`fuzz/corpus/decode/`): every
//! seed and every crasher ever found decodes without panicking, and hostile
//! inputs stay linear in time.
//!
//! The linear-time check compares *ratios*, not wall-clock limits: the time
//! per byte of a ~8 KiB input must be within 50× the time per byte of a
//! ~100-byte input built from the same pattern (a quadratic scan would give
//! ~80×, anything worse far more). Each timing is the best of several rounds
//! of repeated decodes, so a busy machine slows both sides alike.

use scangate::capture::barcode::{MAX_FRAME_LEN, decode, decode_with_year};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/decode");
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("dir entry").path();
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                data,
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_corpus_file_decodes_without_panic() {
    let files = corpus();
    assert!(files.len() >= 24, "corpus has only {} files", files.len());
    let mut valid = 0;
    for (name, data) in &files {
        for year in [2025, 1999, 2075] {
            // A panic fails the test and names nothing; say which file first.
            let r = std::panic::catch_unwind(|| decode_with_year(data, year));
            let r = r.unwrap_or_else(|_| panic!("decoder panicked on corpus file {name}"));
            if let Ok(d) = &r {
                let _ = d.product.canonical_bytes();
                if year == 2025 {
                    valid += 1;
                }
            }
        }
        let _ = decode(data);
    }
    // The corpus holds both kinds (the vectors are mostly valid).
    assert!(
        valid > 0 && valid < files.len(),
        "{valid} of {}",
        files.len()
    );
}

/// Best-of-rounds seconds per decode of `data`.
fn time_per_decode(data: &[u8]) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let mut n = 0u32;
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(4) || n < 3 {
            let _ = std::hint::black_box(decode_with_year(std::hint::black_box(data), 2025));
            n += 1;
        }
        best = best.min(start.elapsed().as_secs_f64() / n as f64);
    }
    best
}

/// `prefix` + `unit` repeated to at most `len` bytes.
fn fill(prefix: &[u8], unit: &[u8], len: usize) -> Vec<u8> {
    let mut v = prefix.to_vec();
    while v.len() + unit.len() <= len {
        v.extend_from_slice(unit);
    }
    v
}

#[test]
fn hostile_inputs_stay_linear() {
    let gs = b"\x1d";
    let mut patterns: Vec<(String, Vec<u8>, Vec<u8>)> = vec![
        ("fixed AIs".into(), b"]d2".to_vec(), b"17250101".to_vec()),
        ("tiny fixed AIs".into(), b"]d2".to_vec(), b"2011".to_vec()),
        ("separators".into(), b"]d2".to_vec(), gs.to_vec()),
        ("one long value".into(), b"]d210".to_vec(), b"9".to_vec()),
        ("repeated lot".into(), b"]d2".to_vec(), b"10A\x1d".to_vec()),
        (
            "distinct internal AIs".into(),
            b"]d2".to_vec(),
            b"91X\x1d92Y\x1d".to_vec(),
        ),
        (
            "DL path".into(),
            b"]Q1https://a.b".to_vec(),
            b"/10/A".to_vec(),
        ),
        (
            "DL query".into(),
            b"]Q1https://a.b/01/12312312312333?".to_vec(),
            b"&99=A".to_vec(),
        ),
        (
            "DL percent".into(),
            b"]Q1https://a.b/01/12312312312333/10/".to_vec(),
            b"%41".to_vec(),
        ),
        ("digits, no AIM".into(), Vec::new(), b"0".to_vec()),
        ("GS escapes".into(), b"]d2".to_vec(), b"<GS>^]".to_vec()),
    ];
    // Every small corpus file repeated as a unit, too.
    for (name, data) in corpus() {
        if !data.is_empty() && data.len() <= 64 {
            patterns.push((format!("corpus {name}"), Vec::new(), data));
        }
    }
    let mut worst = (0f64, String::new());
    for (name, prefix, unit) in &patterns {
        let small = fill(prefix, unit, 100.max(prefix.len() + unit.len()));
        let large = fill(prefix, unit, MAX_FRAME_LEN);
        if large.len() < 20 * small.len() {
            continue;
        }
        let per_byte = |d: &[u8]| time_per_decode(d) / d.len() as f64;
        let mut ratio = per_byte(&large) / per_byte(&small);
        if ratio > 50.0 {
            // One retry before failing: a burst of load on a shared machine.
            ratio = ratio.min(per_byte(&large) / per_byte(&small));
        }
        assert!(
            ratio <= 50.0,
            "{name}: {} bytes take {ratio:.1}x the per-byte time of {} bytes",
            large.len(),
            small.len()
        );
        if ratio > worst.0 {
            worst = (ratio, name.clone());
        }
    }
    eprintln!(
        "worst per-byte ratio 8 KiB / 100 B: {:.2} ({})",
        worst.0, worst.1
    );
}
