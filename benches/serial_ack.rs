//! Serial ACK latency: scan bytes written on a PTY → ACK byte back.
//!
//! `cargo bench --bench serial_ack -- [--scanners 8] [--rate 200] [--seconds 20] [--dir PATH] [--feedback zebra-ssi] [--fsync-delay-ms MS] [--tap-blocked]`
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
//!
//! `--feedback zebra-ssi` gives every scanner `feedback = { protocol =
//! "zebra-ssi" }`: after each ACK the daemon also writes a 7-byte BEEP
//! packet (every frame is a new pick: "one short high"). The virtual
//! scanner then reads the ACK, then the BEEP (checked byte for byte, and
//! checked to come after the ACK), and answers it with CMD_ACK as a Zebra
//! scanner with ACK/NAK handshaking (its default) does, which the daemon
//! drops; only then is the frame done. The ACK latency is taken the same
//! way in both modes; with feedback the time from the write to the last
//! BEEP byte read (what the person at the counter hears, less the
//! scanner's own beeper) is reported as well. The last line of the output,
//! `RESULT …`, has the figures as `key=value` for scripts
//! (docs/benchmarks.md, "Feedback and ACK latency").
//!
//! `--tap-blocked` attaches a `scangate tap` reader to the daemon's tap
//! socket (raw bytes asked for: the longest lines) that never reads: its
//! cost to the ACK is this run's against one without.
//!
//! `--fsync-delay-ms MS` is an SD card's fsync (docs/benchmarks.md,
//! "SD-card profile"): the bench compiles `benches/slowsync.c` with `cc`
//! and runs itself again with it preloaded (`LD_PRELOAD`,
//! `SCANGATE_FSYNC_DELAY_MS`), so every `fsync`/`fdatasync` in this
//! process, the daemon's SQLite commits included, takes at least `MS`
//! milliseconds (`0`: real fsyncs, only counted), queued one at a time as
//! on one card (the writer's commit waits for the WAL checkpointer's
//! fsyncs); `SCANGATE_FSYNC_PARALLEL=1` in the environment: not queued.
//! The shim counts the calls, the time spent in them and the WAL
//! checkpointer's share; the output then also gives the fsyncs made during
//! the measured frames, their mean duration (queue included), and frames
//! per commit (frames per fsync of the outbox writer: the group commit,
//! several scanners' frames sharing one commit). Offer more frames than
//! commits one after another could take (`--scanners 32 --rate 640`: at
//! 20 ms a commit, one frame per commit would stop at 50/s) and compare
//! `achieved` with `--rate`: that is the throughput the group commit keeps.

use scangate::config::{Config, GatewayConfig, ScanType, Scanner, Settings};
use scangate::feedback::{FeedbackConfig, Told, ssi};
use scangate::pty::VirtualScanner;
use scangate::source::{ACK, NAK};
use std::time::{Duration, Instant};

struct Args {
    scanners: usize,
    rate: f64,
    seconds: f64,
    dir: Option<std::path::PathBuf>,
    /// `--feedback zebra-ssi` (or `off`, the default).
    feedback: bool,
    /// `--fsync-delay-ms MS`: run under `benches/slowsync.c`.
    fsync_delay_ms: Option<f64>,
    /// `--tap-blocked`: a tap reader attached that never reads.
    tap_blocked: bool,
}

fn args() -> Args {
    let mut a = Args {
        scanners: 8,
        rate: 200.0,
        seconds: 20.0,
        dir: None,
        feedback: false,
        fsync_delay_ms: None,
        tap_blocked: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--scanners" => a.scanners = val().parse().expect("--scanners N"),
            "--rate" => a.rate = val().parse().expect("--rate N"),
            "--seconds" => a.seconds = val().parse().expect("--seconds N"),
            "--dir" => a.dir = Some(val().into()),
            "--feedback" => {
                a.feedback = match val().as_str() {
                    "zebra-ssi" => true,
                    "off" => false,
                    other => panic!("--feedback zebra-ssi|off, not {other}"),
                }
            }
            "--fsync-delay-ms" => {
                let ms: f64 = val().parse().expect("--fsync-delay-ms MS");
                assert!(ms >= 0.0, "--fsync-delay-ms must be 0 or more");
                a.fsync_delay_ms = Some(ms);
            }
            "--tap-blocked" => a.tap_blocked = true,
            "--bench" => {} // passed by `cargo bench`
            other => panic!(
                "unknown argument {other}; see the comment at the top of benches/serial_ack.rs"
            ),
        }
    }
    a
}

/// The environment variable that says this process was started again
/// under the shim (its value: the shim's path).
const SHIM_ENV: &str = "SCANGATE_SLOWSYNC_SO";

/// With `--fsync-delay-ms`: unless this process already runs under the
/// shim, compile `benches/slowsync.c` and replace this process with itself
/// under it (`exec`, same arguments). Returns only in the process that has
/// it loaded, or without the option.
fn under_slow_fsync(a: &Args) {
    let Some(ms) = a.fsync_delay_ms else { return };
    if std::env::var_os(SHIM_ENV).is_some() {
        return;
    }
    use std::os::unix::process::CommandExt;
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/slowsync.c");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let so = dir.join("slowsync.so");
    // Built beside and renamed: another bench may be loading the old one.
    let tmp = dir.join(format!("slowsync.so.{}", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = std::process::Command::new(&cc)
        .args(["-O2", "-Wall", "-shared", "-fPIC", "-o"])
        .arg(&tmp)
        .arg(src)
        .arg("-ldl")
        .status()
        .unwrap_or_else(|e| panic!("running {cc} to build {src}: {e}"));
    assert!(built.success(), "{cc} could not build {src}");
    std::fs::rename(&tmp, &so).expect("installing slowsync.so");
    let preload = match std::env::var_os("LD_PRELOAD") {
        Some(p) if !p.is_empty() => {
            let mut v = so.clone().into_os_string();
            v.push(":");
            v.push(p);
            v
        }
        _ => so.clone().into_os_string(),
    };
    let err = std::process::Command::new(std::env::current_exe().expect("this bench's path"))
        .args(std::env::args_os().skip(1))
        .env("LD_PRELOAD", preload)
        .env("SCANGATE_FSYNC_DELAY_MS", ms.to_string())
        .env(SHIM_ENV, &so)
        .exec();
    panic!("running the bench again under {}: {err}", so.display());
}

/// The shim's counters, found with `dlsym` (which also proves it is
/// loaded).
struct SlowSync {
    calls: &'static std::sync::atomic::AtomicU64,
    ns: &'static std::sync::atomic::AtomicU64,
    /// Calls by the WAL checkpointer's thread.
    checkpointer: &'static std::sync::atomic::AtomicU64,
    delay_ns: i64,
    /// `SCANGATE_FSYNC_PARALLEL=1`: calls not queued behind each other.
    parallel: bool,
}

// The shim's counters are C `unsigned long`s, read here as `AtomicU64`s.
const _: () = assert!(std::mem::size_of::<libc::c_ulong>() == 8);

impl SlowSync {
    fn find() -> Option<SlowSync> {
        fn sym(name: &std::ffi::CStr) -> Option<*mut libc::c_void> {
            // SAFETY: dlsym with a NUL-terminated name; a null result is
            // handled.
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            (!p.is_null()).then_some(p)
        }
        let calls = sym(c"scangate_slowsync_calls")?;
        let ns = sym(c"scangate_slowsync_ns")?;
        let checkpointer = sym(c"scangate_slowsync_checkpointer_calls")?;
        let delay = sym(c"scangate_slowsync_delay_ns")?;
        let parallel = sym(c"scangate_slowsync_parallel")?;
        // SAFETY: the shim's globals live as long as the process, are
        // 8-byte aligned `unsigned long`s that it only changes with atomic
        // adds, and a `long` and an `int` written once by its constructor.
        unsafe {
            Some(SlowSync {
                calls: std::sync::atomic::AtomicU64::from_ptr(calls.cast()),
                ns: std::sync::atomic::AtomicU64::from_ptr(ns.cast()),
                checkpointer: std::sync::atomic::AtomicU64::from_ptr(checkpointer.cast()),
                delay_ns: *delay.cast::<i64>(),
                parallel: *parallel.cast::<libc::c_int>() != 0,
            })
        }
    }

    /// The counters so far.
    fn now(&self) -> Synced {
        use std::sync::atomic::Ordering::Relaxed;
        Synced {
            calls: self.calls.load(Relaxed),
            ns: self.ns.load(Relaxed),
            checkpointer: self.checkpointer.load(Relaxed),
        }
    }
}

/// The shim's counters at one moment, or their growth over a span.
#[derive(Clone, Copy)]
struct Synced {
    calls: u64,
    ns: u64,
    checkpointer: u64,
}

impl Synced {
    fn since(self, before: Synced) -> Synced {
        Synced {
            calls: self.calls - before.calls,
            ns: self.ns - before.ns,
            checkpointer: self.checkpointer - before.checkpointer,
        }
    }
}

fn label(scanner: usize, n: usize) -> Vec<u8> {
    format!("]d201003077731050251728123121S{scanner:02}B{n:07}\x1d10LOT7A\r\n").into_bytes()
}

/// What the scanner got back for one frame: when the ACK byte was read,
/// and with feedback when the last byte of the BEEP packet was.
struct Reply {
    ack: Instant,
    beep: Option<Instant>,
}

/// Wait for one ACK byte and, if `beep` is set, then for exactly that BEEP
/// packet (answered with CMD_ACK, as a Zebra scanner does). Panics on a
/// NAK, on any other byte, and on a BEEP byte before the ACK; `None` if
/// either does not come within `timeout`.
fn wait_reply(vs: &mut VirtualScanner, beep: Option<&[u8]>, timeout: Duration) -> Option<Reply> {
    let deadline = Instant::now() + timeout;
    let mut ack = None;
    let mut got_beep: Vec<u8> = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let got = vs.read_reply(left).expect("reading the PTY");
        let now = Instant::now();
        for &b in &got {
            if ack.is_none() {
                assert_eq!(
                    b, ACK,
                    "expected the ACK first, got {b:#04x} (NAK is {NAK:#04x}; a BEEP byte before the ACK is a bug)"
                );
                ack = Some(now);
                continue;
            }
            let want = beep.unwrap_or_else(|| panic!("unexpected byte {b:#04x} after the ACK"));
            got_beep.push(b);
            assert_eq!(
                got_beep[..],
                want[..got_beep.len()],
                "not the BEEP packet expected"
            );
        }
        match (ack, beep) {
            (Some(ack), None) => return Some(Reply { ack, beep: None }),
            (Some(ack), Some(want)) if got_beep.len() == want.len() => {
                // The scanner's CMD_ACK: the daemon must drop it, not frame it.
                vs.send(&ssi_cmd_ack()).expect("writing CMD_ACK");
                return Some(Reply {
                    ack,
                    beep: Some(now),
                });
            }
            _ => {}
        }
        if left.is_zero() {
            return None;
        }
    }
}

/// A scanner's CMD_ACK packet (source: decoder).
fn ssi_cmd_ack() -> Vec<u8> {
    let mut p = vec![0x04, ssi::CMD_ACK, ssi::SOURCE_DECODER, 0x00];
    p.extend_from_slice(&ssi::checksum(&p).to_be_bytes());
    p
}

fn pct(sorted: &[Duration], q: f64) -> f64 {
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

fn main() {
    let a = args();
    under_slow_fsync(&a);
    let slow = a.fsync_delay_ms.map(|ms| {
        let s = SlowSync::find().expect(
            "benches/slowsync.c is not loaded (LD_PRELOAD ignored?): the fsync delay would not apply",
        );
        assert_eq!(
            s.delay_ns,
            (ms * 1e6) as i64,
            "the shim's delay is not the one asked for"
        );
        s
    });
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
            gln: None,
        },
        scanners: ptys
            .iter()
            .enumerate()
            .map(|(i, vs)| {
                let mut s = Scanner::serial(&format!("bench-{i}"), vs.path(), ScanType::Dispense);
                s.kind.ack = true;
                if a.feedback {
                    let fb: FeedbackConfig =
                        toml::from_str("protocol = \"zebra-ssi\"").expect("feedback table");
                    s.feedback = Some(fb);
                }
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

    // Every frame is a new pick: told "committed".
    let beep = a.feedback.then(|| ssi::bytes(Told::Committed));
    assert!(beep.as_ref().is_none_or(|b| b.len() == 7 && ssi::verify(b)));

    // Warm-up: one ACKed frame per scanner (the device is open, the
    // database created, the first transaction done).
    for (i, vs) in ptys.iter_mut().enumerate() {
        vs.send(&label(i, 9_999_999)).unwrap();
        wait_reply(vs, beep.as_deref(), Duration::from_secs(20))
            .expect("no ACK (or BEEP) during warm-up");
    }

    // A tap reader that greets and never reads (held until the end).
    let _blocked = a.tap_blocked.then(|| {
        use std::io::Write as _;
        let mut conn = std::os::unix::net::UnixStream::connect(tmp.path().join("tap.sock"))
            .expect("the daemon's tap socket");
        conn.write_all(b"{\"raw\":true}\n")
            .expect("greeting the tap");
        conn
    });
    let period = Duration::from_secs_f64(a.scanners as f64 / a.rate);
    let per_scanner = (a.seconds * a.rate / a.scanners as f64).round() as usize;
    println!(
        "serial ACK latency: {} scanners, feedback {}{}, offered {} frames/s in total ({:.1} ms apart per scanner), {} s, state in {}{}",
        a.scanners,
        if a.feedback { "zebra-ssi" } else { "off" },
        if a.tap_blocked {
            ", a tap reader that never reads"
        } else {
            ""
        },
        a.rate,
        period.as_secs_f64() * 1000.0,
        a.seconds,
        tmp.path().display(),
        match a.fsync_delay_ms {
            Some(ms) => format!(
                ", every fsync at least {ms} ms, {} (benches/slowsync.c)",
                if slow.as_ref().is_some_and(|s| s.parallel) {
                    "not queued"
                } else {
                    "one at a time"
                }
            ),
            None => String::new(),
        }
    );
    let synced_before = slow.as_ref().map(SlowSync::now);
    let start = Instant::now() + Duration::from_millis(100);
    let players: Vec<_> = ptys
        .into_iter()
        .enumerate()
        .map(|(i, mut vs)| {
            let offset = period.mul_f64(i as f64 / a.scanners as f64);
            let beep = beep.clone();
            std::thread::spawn(move || {
                let mut lat = Vec::with_capacity(per_scanner);
                let mut beeps = Vec::with_capacity(per_scanner);
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
                    let r = wait_reply(&mut vs, beep.as_deref(), Duration::from_secs(10))
                        .expect("ACK (and BEEP) within 10 s");
                    lat.push(r.ack - t0);
                    if let Some(b) = r.beep {
                        beeps.push((b - t0, b - r.ack));
                    }
                }
                (lat, beeps, late, vs)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut beeps = Vec::new();
    let mut gaps = Vec::new();
    let mut late = 0;
    let mut keep = Vec::new();
    for p in players {
        let (l, b, lt, vs) = p.join().unwrap();
        all.extend(l);
        for (to_beep, gap) in b {
            beeps.push(to_beep);
            gaps.push(gap);
        }
        late += lt;
        keep.push(vs);
    }
    let elapsed = start.elapsed();
    let synced = slow
        .as_ref()
        .zip(synced_before)
        .map(|(s, before)| s.now().since(before));
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
    let mut result = format!(
        "RESULT feedback={} frames={} late={} ack_p50={:.3} ack_p99={:.3} ack_max={:.3} offered={} achieved={:.1}",
        if a.feedback { "zebra-ssi" } else { "off" },
        all.len(),
        late,
        pct(&all, 0.50),
        pct(&all, 0.99),
        pct(&all, 1.0),
        a.rate,
        all.len() as f64 / elapsed.as_secs_f64()
    );
    if let (Some(ms), Some(sy)) = (a.fsync_delay_ms, synced) {
        let Synced {
            calls,
            ns,
            checkpointer,
        } = sy;
        let mean = ns as f64 / 1e6 / calls.max(1) as f64;
        let commits = calls - checkpointer;
        let per = all.len() as f64 / commits.max(1) as f64;
        println!(
            "fsync (at least {ms} ms each): {calls} during the frames ({commits} by the outbox writer, {checkpointer} by the WAL checkpointer), mean {mean:.2} ms, {per:.1} frames per writer fsync (a commit is one)"
        );
        let queue = if slow.as_ref().is_some_and(|s| s.parallel) {
            "parallel"
        } else {
            "card"
        };
        result += &format!(
            " fsync_delay_ms={ms} fsync_queue={queue} fsyncs={calls} fsyncs_checkpointer={checkpointer} fsync_mean={mean:.3} frames_per_writer_fsync={per:.2}"
        );
    }
    if !beeps.is_empty() {
        beeps.sort();
        gaps.sort();
        assert_eq!(beeps.len(), all.len(), "a BEEP for every frame");
        println!(
            "write -> BEEP read (scanner side): p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms",
            pct(&beeps, 0.50),
            pct(&beeps, 0.90),
            pct(&beeps, 0.99),
            pct(&beeps, 0.999),
            pct(&beeps, 1.0)
        );
        println!(
            "ACK read -> BEEP read: p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms (every BEEP after its ACK)",
            pct(&gaps, 0.50),
            pct(&gaps, 0.99),
            pct(&gaps, 1.0)
        );
        result += &format!(
            " beep_p50={:.3} beep_p99={:.3} beep_max={:.3} gap_p50={:.3} gap_p99={:.3}",
            pct(&beeps, 0.50),
            pct(&beeps, 0.99),
            pct(&beeps, 1.0),
            pct(&gaps, 0.50),
            pct(&gaps, 0.99)
        );
    }
    println!("{result}");
    drop(keep);
}
