//! `scangate bench --redis URL`: the facility store, measured through the
//! daemon's own claimer lanes (`claimer/`) while this thread
//! admits as the outbox writer does (one transaction per batch of at most
//! the writer's batch size, then a kick).
//!
//! Phases:
//! 1. with `--backlog N`: N scans are admitted and audited `unresolved` by
//!    offline rounds (an outage), then Redis "comes back": the time until the
//!    last of them is decided, while a live stream of `--rate` scans/s runs
//!    and each live scan's capture → decision time is taken;
//! 2. throughput: `--scans` scans admitted as fast as the writer can, timed
//!    until the last is decided;
//! 3. latency: `--rate` scans/s for `--seconds`, capture → decision.
//!
//! A scan's "decision" is the moment the claimer lane's transaction holding its
//! verdict (and ledger row and audit record) has committed.

use super::{
    BenchArgs, Workload, cpu_time, offered_rate, print_latency, print_peak_rss, written_bytes,
};
use crate::capture::{CaptureTime, Profile, Scan};
use crate::claimer::FacilityGate;
use crate::claimer::LaneKind;
use crate::claimer::{self, LaneStop, Link};
use crate::config::{Config, Settings};
use crate::daemon::ADMIT_BATCH;
use crate::exit::Exit;
use crate::facility::Facility;
use crate::gate::{Gate, GateConfig};
use crate::model::GateStats;
use crate::store::Store;
use crate::store::handoff::Next;
use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Scans whose final verdict a claimer round committed, and when.
type Observed = (Instant, Vec<String>);

/// How long to wait for a decision before declaring the benchmark stuck.
const STUCK: Duration = Duration::from_secs(60);

/// Batches queued for the writer thread at most.
const WRITER_QUEUE: usize = 8;

/// The writer's side: a thread admitting batches as the daemon's outbox
/// writer does (the claimer's verdicts in the same transactions), then
/// kicking the claimer; and the claimer's decisions, collected.
struct Writer {
    /// A connection of the main thread's (the checkpoint between phases).
    own: Store,
    admits: tokio::sync::mpsc::Sender<Vec<Scan>>,
    thread: JoinHandle<Result<(), String>>,
    seen: Receiver<Observed>,
}

impl Writer {
    /// Start the writer thread on `store`.
    fn start(
        store: Store,
        facility: String,
        kick: claimer::Kicker,
        seen: Receiver<Observed>,
    ) -> Result<Writer, String> {
        let own = store.companion().map_err(|e| e.to_string())?;
        let (admits, mut rx) = tokio::sync::mpsc::channel::<Vec<Scan>>(WRITER_QUEUE);
        let thread = std::thread::Builder::new()
            .name("outbox-writer".into())
            .spawn(move || {
                let mut store = store;
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .map_err(|e| e.to_string())?;
                let desk = kick.desk();
                loop {
                    match desk.next(&rt, &mut rx) {
                        Next::Item(batch) => {
                            if !batch.is_empty() {
                                store
                                    .admit_with(&facility, &batch, desk, kick.admitted())
                                    .map_err(|e| e.to_string())?;
                            }
                            if !kick.kick() {
                                return Err("the claimer stopped".into());
                            }
                        }
                        Next::Handed => desk.run_alone(&mut store),
                        Next::Closed => break,
                    }
                }
                desk.close(&mut store);
                Ok(())
            })
            .expect("spawning a thread");
        Ok(Writer {
            own,
            admits,
            thread,
            seen,
        })
    }

    /// Queue `scans` for the writer (none: only kick the claimer).
    fn admit(&mut self, scans: Vec<Scan>) -> Result<(), String> {
        self.admits
            .blocking_send(scans)
            .map_err(|_| "the outbox writer stopped".to_string())
    }

    /// Stop the writer once it has admitted what was queued.
    fn stop(self) -> Result<(), String> {
        drop(self.admits);
        self.thread
            .join()
            .map_err(|_| "the writer thread panicked".to_string())?
    }

    /// The next observation, waiting at most until `until`.
    fn next_until(&self, until: Instant) -> Result<Option<Observed>, String> {
        match self
            .seen
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            Ok(o) => Ok(Some(o)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err("the claimer stopped".into()),
        }
    }

    /// The next observation; an error if none comes for [`STUCK`].
    fn next(&self) -> Result<Observed, String> {
        self.next_until(Instant::now() + STUCK)?
            .ok_or_else(|| format!("no decision for {STUCK:?}: the claimer is stuck"))
    }
}

/// CPU and storage used during a phase, per scan decided: this process
/// (writer, claimer, checkpointer) and the Redis server, which share the
/// machine's cores in this benchmark.
struct Usage {
    gateway_cpu: Option<Duration>,
    redis_cpu: Option<(f64, f64)>,
    written: Option<u64>,
}

impl Usage {
    fn now(redis: &mut Facility) -> Usage {
        Usage {
            gateway_cpu: cpu_time(),
            redis_cpu: redis.server_cpu().ok(),
            written: written_bytes(),
        }
    }

    /// Print what was used since `self` for `n` scans.
    fn print_since(&self, redis: &mut Facility, n: u64) {
        let now = Usage::now(redis);
        let n = n.max(1) as f64;
        let mut parts = Vec::new();
        if let (Some(a), Some(b)) = (self.gateway_cpu, now.gateway_cpu) {
            parts.push(format!("gateway {:.1} µs", (b - a).as_secs_f64() * 1e6 / n));
        }
        if let (Some(a), Some(b)) = (self.redis_cpu, now.redis_cpu) {
            parts.push(format!(
                "Redis {:.1} µs (+{:.1} µs in its AOF-rewrite children)",
                (b.0 - a.0) * 1e6 / n,
                (b.1 - a.1) * 1e6 / n
            ));
        }
        if !parts.is_empty() {
            println!("  CPU per scan: {}", parts.join(", "));
        }
        if let (Some(a), Some(b)) = (self.written, now.written) {
            println!(
                "  storage writes: {:.1} KB per scan (WAL appends and checkpoint copies)",
                (b - a) as f64 / n / 1e3
            );
        }
    }
}

/// Run the facility phases and print the figures.
pub(super) fn run(
    args: &BenchArgs,
    mut store: Store,
    mut gate: Gate,
    cfg: &GateConfig,
    profile: &Profile,
    work: &mut Workload,
    url: &str,
) -> Result<Exit, String> {
    let dir = store.path().parent().unwrap_or(Path::new(".")).to_owned();
    let (link, first, mut probe) = connect(cfg, &dir, url)?;
    println!(
        "deciding through the facility Redis {} (the daemon's claimer lanes; writer batches of at most {ADMIT_BATCH})",
        crate::facility::redact(url)
    );
    if args.backlog > 0 {
        gate = build_backlog(args, &mut store, gate, &cfg.facility, profile, work)?;
    }
    let (mut w, lane_stop, lanes) = start_lanes(store, gate, link, first, &cfg.facility)?;
    let interval = Duration::from_secs_f64(1.0 / args.rate.max(1) as f64);
    if args.backlog > 0 {
        drain_with_live_stream(args, &mut w, work, profile, interval, &mut probe)?;
        // As the embedded benchmark does between its phases: fold the
        // drain's WAL into the database so the phases do not overlap.
        let t = Instant::now();
        w.own.checkpoint().map_err(|e| e.to_string())?;
        println!(
            "checkpoint after the drain: {:.2} s",
            t.elapsed().as_secs_f64()
        );
    }
    throughput(args, &mut w, work, profile, &mut probe)?;
    latency(args, &mut w, work, profile)?;
    w.stop()?;
    stop_lanes(lane_stop, lanes)?;
    print_peak_rss();
    Ok(Exit::Ok)
}

/// Connect to the facility Redis at `url` as the daemon does, for the
/// gateway of `cfg` with state in `dir`: the claimer's link, its first
/// connection and a second one, for the server's CPU counters.
fn connect(cfg: &GateConfig, dir: &Path, url: &str) -> Result<(Link, Facility, Facility), String> {
    let toml = format!(
        "[gateway]\nfacility = {:?}\nid = {:?}\nstate_dir = {:?}\n\
         [dedup]\nwindow_ms = {}\n\
         [redis]\nurl = {:?}\n",
        cfg.facility,
        cfg.gateway,
        dir.display().to_string(),
        cfg.window.ms(),
        url
    );
    let config = Config::parse(&toml, None).map_err(|e| e.to_string())?;
    let settings = Settings::resolve(&config).map_err(|e| e.to_string())?;
    let redis = settings.redis.as_ref().ok_or("[redis] missing")?;
    let link = Link::new(&config, redis);
    let first = link.connect_checked().map_err(|e| e.to_string())?;
    let probe = link.connect_checked().map_err(|e| e.to_string())?;
    Ok((link, first, probe))
}

/// `--backlog N`: admit N scans and audit them `unresolved` by offline
/// rounds, as an outage leaves them.
fn build_backlog(
    args: &BenchArgs,
    store: &mut Store,
    gate: Gate,
    facility: &str,
    profile: &Profile,
    work: &mut Workload,
) -> Result<Gate, String> {
    let mut gate = FacilityGate::new(gate, store).map_err(|e| e.to_string())?;
    let t = Instant::now();
    work.t0_ms = chrono::Utc::now().timestamp_millis() - args.backlog as i64 * 7 - 60_000;
    let mut left = args.backlog;
    while left > 0 {
        let n = left.min(args.batch as u64);
        let batch: Vec<Scan> = (0..n).map(|_| work.scan(profile)).collect();
        store.admit(facility, &batch).map_err(|e| e.to_string())?;
        left -= n;
    }
    loop {
        let r = crate::claimer::round(
            store,
            &mut gate,
            None,
            "bench: Redis withheld to build a backlog",
            &CaptureTime::now(),
        )
        .map_err(|e| e.to_string())?;
        if !r.more {
            break;
        }
    }
    store.checkpoint().map_err(|e| e.to_string())?;
    println!(
        "backlog: {} scans admitted and audited unresolved (an outage) in {:.1} s",
        args.backlog,
        t.elapsed().as_secs_f64()
    );
    Ok(gate.into_local())
}

/// The claimer's lanes on their threads, each reporting the scans it
/// decided to the returned writer.
fn start_lanes(
    store: Store,
    gate: Gate,
    link: Link,
    first: Facility,
    facility: &str,
) -> Result<(Writer, LaneStop, [JoinHandle<GateStats>; 2]), String> {
    let (seen_tx, seen) = mpsc::channel::<Observed>();
    let (kick, lane_stop, lanes) =
        claimer::lanes(&store, gate, link, Some(first), move |decided| {
            let uuids: Vec<String> = decided
                .iter()
                .filter(|d| d.verdict.is_final())
                .map(|d| d.scan_uuid.clone())
                .collect();
            if !uuids.is_empty() {
                let _ = seen_tx.send((Instant::now(), uuids));
            }
        })
        .map_err(|e| e.to_string())?;
    let lanes = lanes.map(|lane| {
        std::thread::Builder::new()
            .name(lane.thread_name())
            .spawn(move || lane.run())
            .expect("spawning a thread")
    });
    let w = Writer::start(store, facility.to_string(), kick, seen)?;
    Ok((w, lane_stop, lanes))
}

/// Throughput: admit as fast as the writer can; timed to the last decision.
fn throughput(
    args: &BenchArgs,
    w: &mut Writer,
    work: &mut Workload,
    profile: &Profile,
    probe: &mut Facility,
) -> Result<(), String> {
    work.t0_ms = chrono::Utc::now().timestamp_millis() - work.n as i64 * 7;
    let started = Instant::now();
    let usage = Usage::now(probe);
    let (mut admitted, mut decided) = (0u64, 0u64);
    while admitted < args.scans {
        let n = (args.scans - admitted).min(ADMIT_BATCH as u64);
        let batch: Vec<Scan> = (0..n).map(|_| work.scan(profile)).collect();
        w.admit(batch)?;
        admitted += n;
        while let Ok((_, uuids)) = w.seen.try_recv() {
            decided += uuids.len() as u64;
        }
    }
    while decided < admitted {
        decided += w.next()?.1.len() as u64;
    }
    let elapsed = started.elapsed();
    println!(
        "throughput: {decided} decisions in {:.2} s = {:.0} decisions/s (writer admitting, claimer deciding, concurrently)",
        elapsed.as_secs_f64(),
        decided as f64 / elapsed.as_secs_f64()
    );
    usage.print_since(probe, decided);
    Ok(())
}

/// Latency at an offered rate, nothing else running.
fn latency(
    args: &BenchArgs,
    w: &mut Writer,
    work: &mut Workload,
    profile: &Profile,
) -> Result<(), String> {
    work.t0_ms = chrono::Utc::now().timestamp_millis() - work.n as i64 * 7;
    offered_rate(args, || {
        let t = Instant::now();
        let scan = work.scan(profile);
        let uuid = scan.uuid.to_string();
        w.admit(vec![scan])?;
        loop {
            let (at, uuids) = w.next()?;
            if uuids.contains(&uuid) {
                return Ok(at - t);
            }
        }
    })
}

/// Stop the lanes in the daemon's order (the live lane, then the replay
/// lane) and print what they decided.
fn stop_lanes(mut lane_stop: LaneStop, lanes: [JoinHandle<GateStats>; 2]) -> Result<(), String> {
    let mut stats = GateStats::default();
    for (kind, lane) in [LaneKind::Live, LaneKind::Replay].into_iter().zip(lanes) {
        lane_stop.stop(kind);
        let lane = lane
            .join()
            .map_err(|_| "a claimer thread panicked".to_string())?;
        stats = stats.plus(&lane);
    }
    println!(
        "claimer totals: committed {}, suppressed {}, rejected {}; Bloom skipped {} of {} local lookups",
        stats.committed,
        stats.suppressed,
        stats.rejected,
        stats.lookups_saved,
        stats.lookups_saved + stats.exact_lookups
    );
    Ok(())
}

/// Redis is back: drain the backlog while live scans arrive at `interval`;
/// live scans go ahead of the backlog (claimer/claims.rs, "Order").
fn drain_with_live_stream(
    args: &BenchArgs,
    w: &mut Writer,
    work: &mut Workload,
    profile: &Profile,
    interval: Duration,
    probe: &mut Facility,
) -> Result<(), String> {
    work.t0_ms = chrono::Utc::now().timestamp_millis() - work.n as i64 * 7;
    let started = Instant::now();
    let usage = Usage::now(probe);
    w.admit(Vec::new())?;
    let mut tally = Tally {
        live: HashMap::new(),
        latencies: Vec::new(),
        backlog_left: args.backlog,
        drained_at: None,
    };
    let mut i = 0u32;
    while tally.drained_at.is_none() {
        let due = started + interval * i;
        while let Some(o) = w.next_until(due)? {
            tally.note(o);
        }
        let t = Instant::now();
        let scan = work.scan(profile);
        tally.live.insert(scan.uuid.to_string(), t);
        w.admit(vec![scan])?;
        i += 1;
    }
    while !tally.live.is_empty() {
        tally.note(w.next()?);
    }
    let took = tally.drained_at.map_or(Duration::ZERO, |at| at - started);
    println!(
        "backlog drain: {} unresolved scans decided in {:.2} s = {:.0} scans/s",
        args.backlog,
        took.as_secs_f64(),
        args.backlog as f64 / took.as_secs_f64()
    );
    usage.print_since(probe, args.backlog + tally.latencies.len() as u64);
    print_latency(
        &format!(
            "  meanwhile {} live reads at {}/s",
            tally.latencies.len(),
            args.rate
        ),
        &mut tally.latencies,
    );
    Ok(())
}

/// Decisions seen during the drain: live scans' latencies, the backlog's end.
struct Tally {
    live: HashMap<String, Instant>,
    latencies: Vec<Duration>,
    backlog_left: u64,
    drained_at: Option<Instant>,
}

impl Tally {
    fn note(&mut self, (at, uuids): Observed) {
        for u in uuids {
            match self.live.remove(&u) {
                Some(t) => self.latencies.push(at - t),
                None => {
                    self.backlog_left = self.backlog_left.saturating_sub(1);
                    if self.backlog_left == 0 && self.drained_at.is_none() {
                        self.drained_at = Some(at);
                    }
                }
            }
        }
    }
}
