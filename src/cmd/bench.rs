//! `scangate bench`: throughput and latency of capture → outbox → gate →
//! ledger + audit on a real SQLite file with full durability
//! (WAL, `synchronous=FULL`, one `BEGIN IMMEDIATE` transaction per batch).
//!
//! Two phases:
//! 1. **throughput**: `--scans` synthetic reads (unique DSCSA picks, UPC
//!    re-dispenses and echoes), decoded and pushed in batches of `--batch`
//!    exactly as the outbox writer does (one transaction: admit + decide);
//! 2. **latency**: reads offered at `--rate` per second for `--seconds`,
//!    each submitted alone as it arrives (one transaction, one fsync each);
//!    capture → decision percentiles.
//!
//! Peak RSS is the process's high-water mark (`VmHWM`).
//!
//! With `--metrics` every read and decision is also counted in the
//! daemon's metrics ([`crate::telemetry::Telemetry`]) and, every second, the
//! database is sampled and the metrics are encoded and written to
//! `scangate.prom` beside it, as `[metrics]` makes the daemon do (its cost,
//! measured against a run without).
//!
//! With `--redis URL` the same figures are taken through the facility
//! store, with the daemon's own claimer lanes deciding while this thread
//! admits as the outbox writer does (`bench/facility.rs`).

mod facility;
mod load;
mod tap;

use super::Failure;
use crate::capture::{CaptureTime, Profile, RawScan, Scan};
use crate::config::ScanType;
use crate::daemon::publish::StoredSample;
use crate::events::Event as _;
use crate::exit::Exit;
use crate::gate::{Gate, GateConfig};
use crate::store::Store;
use crate::telemetry::Telemetry;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Benchmark arguments (defined with the other clap definitions).
pub use crate::cli::args::BenchArgs;

/// Synthetic but realistic reads: ~70 % unique serialised DSCSA picks,
/// ~10 % UPC-A NDC reads, ~20 % echoes of the previous read.
struct Workload {
    n: u64,
    t0_ms: i64,
    last: Option<String>,
    rng: u64,
    /// The clocks read once at the start: each read's boot stamp is its wall
    /// time on this boot's clock as it ran then, so facility time maps it
    /// (no clock read per synthetic scan).
    clocks: CaptureTime,
    /// Capture time between reads (ms).
    step_ms: i64,
}

impl Workload {
    /// Reads from number `n` on (serials differ between workloads started
    /// far enough apart), the first captured at `t0_ms`, 7 ms apart.
    fn new(n: u64, t0_ms: i64) -> Workload {
        Workload {
            n,
            t0_ms,
            last: None,
            rng: 0x9e37_79b9_7f4a_7c15 ^ n.wrapping_mul(0x2545_f491_4f6c_dd1d),
            clocks: CaptureTime::now(),
            step_ms: 7,
        }
    }

    /// Capture the next read at `first_ms`, the ones after it `step_ms`
    /// apart.
    fn place(&mut self, first_ms: i64, step_ms: i64) {
        self.step_ms = step_ms;
        self.t0_ms = first_ms - (self.n as i64 + 1) * step_ms;
    }

    fn next_label(&mut self) -> String {
        // xorshift64*: deterministic, no dependency.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % 100;
        self.n += 1;
        let label = match (&self.last, r) {
            (Some(last), 0..20) => last.clone(),
            (_, 20..30) => format!("3{:010}", 1_000_000 + self.n % 500)
                .chars()
                .take(11)
                .collect(),
            _ => format!(
                "]d20100307773105025172812312{}SN{:010}\x1d10LOT{}",
                1,
                self.n,
                self.n % 97
            ),
        };
        let label = if label.len() == 11 {
            // UPC-A: number system 3 + NDC10 (11 digits so far) + check digit.
            let digits: Vec<u32> = label.bytes().map(|b| u32::from(b - b'0')).collect();
            let sum: u32 = digits
                .iter()
                .enumerate()
                .map(|(i, d)| if i % 2 == 0 { d * 3 } else { *d })
                .sum();
            format!("{label}{}", (10 - sum % 10) % 10)
        } else {
            label
        };
        self.last = Some(label.clone());
        label
    }

    fn scan(&mut self, profile: &Profile) -> Scan {
        let label = self.next_label();
        let at = self.t0_ms + self.n as i64 * self.step_ms;
        let time = CaptureTime {
            utc_ms: at,
            boot_ns: self.clocks.boot_ns - (self.clocks.utc_ms - at) * 1_000_000,
            boot_id: self.clocks.boot_id.clone(),
            synced: true,
        };
        Scan::at(
            profile,
            RawScan {
                bytes: label.into_bytes(),
                framing_error: None,
            },
            time,
        )
    }
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Bytes this process has caused to be written to storage so far (Linux
/// `/proc/self/io`: WAL appends and checkpoint copies alike).
fn written_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))?
        .trim()
        .parse()
        .ok()
}

/// CPU time this process has used so far (all threads, user + system).
fn cpu_time() -> Option<Duration> {
    cpu_of(nix::sys::resource::UsageWho::RUSAGE_SELF)
}

/// CPU time (user + system) of `who`: this process, or its waited-for
/// children.
fn cpu_of(who: nix::sys::resource::UsageWho) -> Option<Duration> {
    let u = nix::sys::resource::getrusage(who).ok()?;
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::new(t.tv_sec().max(0) as u64, (t.tv_usec().max(0) as u32) * 1000)
    };
    Some(tv(u.user_time()) + tv(u.system_time()))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Make a batch durable and decided in one transaction (embedded store),
/// counted in `metrics` if given (as the sources and the writer count).
fn decide(
    store: &mut Store,
    gate: &mut Gate,
    batch: &[Scan],
    metrics: Option<&Telemetry>,
) -> Result<(), String> {
    if let Some(t) = metrics {
        for scan in batch {
            let mut uuid = [0; 36];
            crate::events::ScanRead {
                scanner: &scan.profile.scanner,
                tapped: t.tapped().then(|| {
                    let raw = t.tapped_raw().then_some(&scan.raw[..]);
                    (crate::source::tap_read(scan, &mut uuid), raw)
                }),
                telemetry: t,
            }
            .emit();
        }
    }
    let (_, decisions) =
        crate::daemon::embedded::admit_and_decide(store, gate, batch).map_err(|e| e.to_string())?;
    if let Some(t) = metrics {
        crate::events::Decided {
            decisions: &decisions,
            telemetry: t,
        }
        .emit();
    }
    Ok(())
}

/// With `--metrics`: sample `dir`'s database and write the metrics to
/// `dir/scangate.prom` every second until the returned flag is set.
fn publish_metrics(
    dir: &std::path::Path,
) -> (Telemetry, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let telemetry = Telemetry::new(&[], None);
    let stop = Arc::new(AtomicBool::new(false));
    let (t, flag, dir) = (telemetry.clone(), stop.clone(), dir.to_owned());
    let thread = std::thread::spawn(move || {
        let store = Store::open_read_only(&dir).ok();
        while !flag.load(Ordering::Relaxed) {
            if let Some(store) = &store
                && let Ok(sample) = StoredSample::read(store, &dir)
            {
                t.record(&sample.figures(chrono::Utc::now().timestamp_millis()));
            }
            let _ = crate::daemon::publish::write_atomically(
                &dir.join("scangate.prom"),
                t.encode().as_bytes(),
                None,
            );
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    (telemetry, stop, thread)
}

/// `scangate bench`: run the benchmark and print the figures.
pub fn run(args: &BenchArgs) -> Result<Exit, Failure> {
    measure(args).map_err(|e| Failure::Runtime(format!("bench failed: {e}")))
}

/// Set up the database and workload, then measure through the embedded
/// store (or, with `--redis`, the facility store: [`facility`]).
fn measure(args: &BenchArgs) -> Result<Exit, String> {
    if args.gateways > 0 {
        return load::run(args);
    }
    let tmp;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new()
                .prefix("scangate-bench-")
                .tempdir()
                .map_err(|e| e.to_string())?;
            tmp.path().to_owned()
        }
    };
    let mut store = Store::open(&dir).map_err(|e| e.to_string())?;
    let cfg = GateConfig {
        facility: format!("bench-{}", chrono::Utc::now().timestamp_millis()),
        gateway: "bench-gw".into(),
        window: crate::model::EchoWindow::from_ms(3000),
        retention: Duration::from_secs(72 * 3600),
    };
    let mut gate = Gate::new(cfg.clone(), &store).map_err(|e| e.to_string())?;
    if !args.no_checks {
        let checks = crate::checks::Checks::new(&dir, &crate::config::ChecksConfig::default());
        gate.set_checks(std::sync::Arc::new(checks));
    }
    let profile = Profile {
        scanner: "bench-1".into(),
        // (clap allows only the names `parse` knows.)
        scan_type: ScanType::parse(&args.scan_type).unwrap_or(ScanType::Dispense),
        quantity: 1,
        owner: None,
        unserialised: Default::default(),
    };
    println!(
        "scangate bench: {} reads, batches of {}, database {}",
        args.scans,
        args.batch,
        store.path().display()
    );
    let mut work = Workload::new(0, chrono::Utc::now().timestamp_millis() - 3_600_000);

    if let Some(url) = &args.redis {
        if args.metrics {
            return Err("--metrics is for the embedded store only (without --redis)".into());
        }
        return facility::run(args, store, gate, &cfg, &profile, &mut work, url);
    }
    let publishing = args.metrics.then(|| publish_metrics(&dir));
    let taps = match &publishing {
        Some((t, _, _)) if args.tap_readers > 0 || args.tap_blocked => {
            Some(tap::attach(&dir, t, args.tap_readers, args.tap_blocked)?)
        }
        _ => None,
    };
    let cpu_before = cpu_time();
    let mut embedded = Embedded {
        store: &mut store,
        gate: &mut gate,
        work: &mut work,
        profile: &profile,
        metrics: publishing.as_ref().map(|(t, _, _)| t),
    };
    embedded.throughput(args)?;
    // The throughput phase leaves a large WAL behind; fold it into the
    // database first so the latency phase measures steady state.
    let t = Instant::now();
    embedded.store.checkpoint().map_err(|e| e.to_string())?;
    println!(
        "checkpoint after the throughput phase: {:.2} s",
        t.elapsed().as_secs_f64()
    );
    embedded.latency(args)?;
    if let (Some(before), Some(after)) = (cpu_before, cpu_time()) {
        println!(
            "CPU (this process, both phases): {:.2} s",
            (after - before).as_secs_f64()
        );
    }
    print_peak_rss();
    if let Some(taps) = taps {
        taps.finish();
    }
    if let Some((_, stop, thread)) = publishing {
        stop.store(true, Ordering::Relaxed);
        let _ = thread.join();
        println!("metrics: counted and published every second (--metrics)");
    }
    Ok(Exit::Ok)
}

/// The embedded store's phases: what they decide with and count in.
struct Embedded<'a> {
    store: &'a mut Store,
    gate: &'a mut Gate,
    work: &'a mut Workload,
    profile: &'a Profile,
    metrics: Option<&'a Telemetry>,
}

impl Embedded<'_> {
    /// Phase 1: `--scans` reads in batches of `--batch`, as fast as they go.
    fn throughput(&mut self, args: &BenchArgs) -> Result<(), String> {
        let before = self.gate.stats();
        let started = Instant::now();
        let mut done = 0u64;
        let mut batch = Vec::with_capacity(args.batch);
        while done < args.scans {
            batch.clear();
            let take = (args.scans - done).min(args.batch as u64);
            for _ in 0..take {
                batch.push(self.work.scan(self.profile));
            }
            decide(self.store, self.gate, &batch, self.metrics)?;
            done += take;
        }
        let elapsed = started.elapsed();
        let s = self.gate.stats().since(&before);
        println!(
            "throughput: {} decisions in {:.2} s = {:.0} decisions/s (committed {}, suppressed {}, rejected {}; Bloom skipped {} of {} lookups)",
            s.decided,
            elapsed.as_secs_f64(),
            s.decided as f64 / elapsed.as_secs_f64(),
            s.committed,
            s.suppressed,
            s.rejected,
            s.lookups_saved,
            s.lookups_saved + s.exact_lookups
        );
        Ok(())
    }

    /// Phase 2: latency at an offered rate, one read per transaction.
    fn latency(&mut self, args: &BenchArgs) -> Result<(), String> {
        self.work.t0_ms = chrono::Utc::now().timestamp_millis() - self.work.n as i64 * 7;
        offered_rate(args, || {
            let t = Instant::now();
            let scan = self.work.scan(self.profile);
            decide(
                self.store,
                self.gate,
                std::slice::from_ref(&scan),
                self.metrics,
            )?;
            Ok(t.elapsed())
        })
    }
}

/// The latency phase: `--rate` reads a second offered for `--seconds`, each
/// by `read` at its time, which returns its capture → decision time; then
/// the percentiles are printed.
fn offered_rate(
    args: &BenchArgs,
    mut read: impl FnMut() -> Result<Duration, String>,
) -> Result<(), String> {
    let total = args.rate * args.seconds;
    let interval = Duration::from_secs_f64(1.0 / args.rate.max(1) as f64);
    let mut latencies = Vec::with_capacity(total as usize);
    let phase = Instant::now();
    for i in 0..total {
        let due = phase + interval * i as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        latencies.push(read()?);
    }
    print_latency(
        &format!(
            "latency at {} reads/s offered for {} s",
            args.rate, args.seconds
        ),
        &mut latencies,
    );
    Ok(())
}

/// Print the capture → decision percentiles of `latencies` (sorted here).
fn print_latency(what: &str, latencies: &mut [Duration]) {
    latencies.sort();
    println!(
        "{what}: capture->decision p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        percentile(latencies, 0.50).as_secs_f64() * 1e3,
        percentile(latencies, 0.99).as_secs_f64() * 1e3,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3
    );
}

/// Print the process's peak RSS.
fn print_peak_rss() {
    match peak_rss_kib() {
        Some(kib) => println!("peak RSS: {:.1} MB", kib as f64 / 1024.0),
        None => println!("peak RSS: unavailable (/proc/self/status unreadable)"),
    }
}
