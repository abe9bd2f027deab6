//! Serial ACK latency: scan bytes written on a PTY → ACK byte back.
//!
//! `cargo bench --bench serial_ack -- [--scanners 8] [--rate 200] [--seconds 20] [--dir PATH]`
//!
//! The real pipeline ([`scangate::daemon::run`], full durability: WAL,
//! `synchronous=FULL`) runs in this process on a temporary state directory
//! (or `--dir`, to measure another disk). Each of `--scanners` PTYs is
//! played by its own thread as an ACK/NAK scanner: at its slot it writes one
//! unique DSCSA frame, then waits for the ACK; the slots of all scanners are
//! staggered so that `--rate` frames per second are offered in total. The
//! latency of one frame is from just before the write on the scanner side
//! to the moment the ACK byte is read there (it includes the PTY both ways
//! and the thread wake-ups). A scanner whose ACK comes after its next slot
//! sends the next frame at once (like a real scanner, which waits for the
//! ACK); such late slots are counted.
//!
//! The daemon's own view (frame end read → ACK written, per scanner) is
//! printed from its `scangate::ack_latency` log line at shutdown.

use scangate::config::{Config, GatewayConfig, ScanType, Scanner, Settings};
use scangate::pty::VirtualScanner;
use scangate::source::ACK;
use std::time::{Duration, Instant};

struct Args {
    scanners: usize,
    rate: f64,
    seconds: f64,
    dir: Option<std::path::PathBuf>,
}

fn args() -> Args {
    let mut a = Args {
        scanners: 8,
        rate: 200.0,
        seconds: 20.0,
        dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--scanners" => a.scanners = val().parse().expect("--scanners N"),
            "--rate" => a.rate = val().parse().expect("--rate N"),
            "--seconds" => a.seconds = val().parse().expect("--seconds N"),
            "--dir" => a.dir = Some(val().into()),
            "--bench" => {} // passed by `cargo bench`
            other => panic!(
                "unknown argument {other}; see the comment at the top of benches/serial_ack.rs"
            ),
        }
    }
    a
}

fn label(scanner: usize, n: usize) -> Vec<u8> {
    format!("]d201003077731050251728123121S{scanner:02}B{n:07}\x1d10LOT7A\r\n").into_bytes()
}

/// Wait for one ACK byte; `None` after `timeout`.
fn wait_ack(vs: &mut VirtualScanner, timeout: Duration) -> Option<Instant> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let got = vs.read_reply(left).expect("reading the PTY");
        if got.contains(&ACK) {
            return Some(Instant::now());
        }
        assert!(
            got.is_empty() || got.iter().all(|&b| b == ACK),
            "unexpected reply {got:02x?}"
        );
        if left.is_zero() {
            return None;
        }
    }
}

fn pct(sorted: &[Duration], q: f64) -> f64 {
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

fn main() {
    let a = args();
    tracing_subscriber::fmt()
        .with_env_filter("scangate::ack_latency=info,scangate::daemon=warn,scangate::source=warn")
        .with_writer(std::io::stderr)
        .init();
    let tmp = tempfile::Builder::new()
        .prefix("scangate-serial-bench-")
        .tempdir_in(a.dir.clone().unwrap_or_else(std::env::temp_dir))
        .expect("temporary state directory");
    let mut ptys: Vec<VirtualScanner> = (0..a.scanners)
        .map(|_| VirtualScanner::new().expect("a PTY"))
        .collect();
    let cfg = Config {
        gateway: GatewayConfig {
            facility: "bench".into(),
            id: "bench-gw".into(),
            state_dir: Some(tmp.path().to_owned()),
        },
        scanners: ptys
            .iter()
            .enumerate()
            .map(|(i, vs)| {
                let mut s = Scanner::serial(&format!("bench-{i}"), vs.path(), ScanType::Dispense);
                s.kind.ack = true;
                s.into()
            })
            .collect(),
        ..Config::default()
    };
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let settings = Settings::resolve(&cfg).expect("nothing to read");
    let daemon = rt.spawn(scangate::daemon::run(settings, async {
        let _ = stop_rx.await;
    }));

    // Warm-up: one ACKed frame per scanner (the device is open, the
    // database created, the first transaction done).
    for (i, vs) in ptys.iter_mut().enumerate() {
        vs.send(&label(i, 9_999_999)).unwrap();
        wait_ack(vs, Duration::from_secs(20)).expect("no ACK during warm-up");
    }

    let period = Duration::from_secs_f64(a.scanners as f64 / a.rate);
    let per_scanner = (a.seconds * a.rate / a.scanners as f64).round() as usize;
    println!(
        "serial ACK latency: {} scanners, offered {} frames/s in total ({:.1} ms apart per scanner), {} s, state in {}",
        a.scanners,
        a.rate,
        period.as_secs_f64() * 1000.0,
        a.seconds,
        tmp.path().display()
    );
    let start = Instant::now() + Duration::from_millis(100);
    let players: Vec<_> = ptys
        .into_iter()
        .enumerate()
        .map(|(i, mut vs)| {
            let offset = period.mul_f64(i as f64 / a.scanners as f64);
            std::thread::spawn(move || {
                let mut lat = Vec::with_capacity(per_scanner);
                let mut late = 0;
                for n in 0..per_scanner {
                    let slot = start + offset + period * n as u32;
                    match slot.checked_duration_since(Instant::now()) {
                        Some(wait) => std::thread::sleep(wait),
                        None if n > 0 => late += 1,
                        None => {}
                    }
                    let t0 = Instant::now();
                    vs.send(&label(i, n)).unwrap();
                    let t1 = wait_ack(&mut vs, Duration::from_secs(10)).expect("ACK within 10 s");
                    lat.push(t1 - t0);
                }
                (lat, late, vs)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut late = 0;
    let mut keep = Vec::new();
    for p in players {
        let (l, lt, vs) = p.join().unwrap();
        all.extend(l);
        late += lt;
        keep.push(vs);
    }
    let elapsed = start.elapsed();
    let _ = stop_tx.send(());
    let report = rt
        .block_on(daemon)
        .expect("daemon task")
        .expect("daemon run");
    all.sort();
    println!(
        "frames {}  achieved {:.1}/s  late slots {}  committed {}",
        all.len(),
        all.len() as f64 / elapsed.as_secs_f64(),
        late,
        report.stats.committed
    );
    println!(
        "write -> ACK read (scanner side): p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms",
        pct(&all, 0.50),
        pct(&all, 0.90),
        pct(&all, 0.99),
        pct(&all, 0.999),
        pct(&all, 1.0)
    );
    let within = all
        .iter()
        .filter(|d| **d <= Duration::from_millis(2))
        .count();
    println!(
        "within 2 ms: {:.2} %  (target: p99 <= 2 ms)",
        100.0 * within as f64 / all.len() as f64
    );
    drop(keep);
}
