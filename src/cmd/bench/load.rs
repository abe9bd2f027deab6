//! `scangate bench --gateways N [--facilities F] (--redis URL | --cluster
//! NODES)`: what a facility — and a chain of them — costs the facility
//! store. N simulated gateways, each on its own connection made as the
//! claimer's lanes make theirs ([`Link`]), send the claimer's rounds of
//! the same claims (the claim script, its markers-free form, and the
//! confirmation the config asks for) for F facilities spread over the
//! store's slots. The gateways' own SQLite work is not simulated: it is
//! the other benchmarks' subject, and it costs the store nothing.
//!
//! Phases:
//! 1. **capacity**: every gateway claims rounds of fresh scans back to
//!    back for `--seconds`: claims per second, the store's CPU per claim,
//!    and the busiest primary's CPU use;
//! 2. **shift**: every gateway offers `--gateway-rate` scans a second in
//!    bursts (one to eight reads 40 ms apart, a tote or a counter rush)
//!    for `--seconds`, claiming what is waiting whenever its last round
//!    has answered, as a claimer lane does: capture → decision p50/p99;
//! 3. with `--republish K`: a busy facility's 72 hours of commits (K of
//!    them, claimed first) are re-published after its keys were deleted
//!    (its store replaced), in the rounds a reconciliation sends, while
//!    the shift runs again: how long it takes and what it does to the
//!    other facilities' decisions.
//!
//! Then the store's memory per claim (the decision and seen keys, which
//! expire after the retention) and per commit (the ledger stream, kept
//! until its consumers have read it), from `INFO memory` and `MEMORY
//! USAGE` on every primary.

use super::{BenchArgs, Workload, percentile};
use crate::capture::{Profile, Scan};
use crate::claimer::Link;
use crate::claimer::claim_for;
use crate::config::{Config, ScanType, Settings};
use crate::exit::Exit;
use crate::facility::{Facility, Outcome};
use crate::outbox::ScanRow;
use std::time::{Duration, Instant};

/// Scans a round claims at most (the claimer's writer batch).
const ROUND: usize = crate::daemon::ADMIT_BATCH;

/// The re-published commits of a reconciliation per round.
const REPUBLISH_ROUND: usize = crate::claimer::REPUBLISH_ROUND;

/// Reads of a burst at most, and how far apart.
const BURST_MAX: u64 = 8;
const BURST_GAP: Duration = Duration::from_millis(40);

/// The facility store's retention the benchmark runs with (the default).
const RETENTION: Duration = Duration::from_secs(72 * 3600);

/// Where the store is: one server or a cluster's seed nodes.
enum Target {
    Server(String),
    Cluster(Vec<String>),
}

impl Target {
    /// The `[redis]` section's lines for it.
    fn toml(&self) -> String {
        match self {
            Target::Server(url) => format!("url = {url:?}\n"),
            Target::Cluster(nodes) => format!("cluster = {nodes:?}\n"),
        }
    }

    /// The URLs of its primaries (a cluster's, from `CLUSTER NODES` on the
    /// first seed node that answers).
    fn primaries(&self) -> Result<Vec<String>, String> {
        let nodes = match self {
            Target::Server(url) => return Ok(vec![url.clone()]),
            Target::Cluster(nodes) => nodes,
        };
        let mut last = String::new();
        for node in nodes {
            let url = format!("redis://{node}");
            let listed: Result<String, String> = connection(&url).and_then(|mut c| {
                redis::cmd("CLUSTER")
                    .arg("NODES")
                    .query(&mut c)
                    .map_err(|e| format!("{url}: CLUSTER NODES: {e}"))
            });
            match listed {
                Ok(text) => return Ok(primaries_of(&text)),
                Err(e) => last = e,
            }
        }
        Err(format!("no seed node of the cluster answered: {last}"))
    }
}

/// The primaries `CLUSTER NODES` lists that serve slots, as URLs (a node
/// just made a replica may still call itself a master, without slots).
fn primaries_of(nodes: &str) -> Vec<String> {
    nodes
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let flags = f.get(2)?;
            let master = flags.split(',').any(|x| x == "master");
            let failed = flags.split(',').any(|x| x == "fail");
            // Fields 9 on: the slots it serves.
            let serves = f.len() > 8;
            // ip:port@cport[,hostname]
            let addr = f.get(1)?.split('@').next()?;
            (master && !failed && serves).then(|| format!("redis://{addr}"))
        })
        .collect()
}

/// A plain connection to `url`, for the server's counters.
fn connection(url: &str) -> Result<redis::Connection, String> {
    redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
        .map_err(|e| format!("{}: {e}", crate::facility::redact(url)))
}

/// One primary's counters at a moment.
#[derive(Clone, Copy, Default)]
struct Counters {
    /// CPU seconds (user + system, the main process).
    cpu: f64,
    /// `used_memory` less the clients' buffers (`mem_clients_normal`,
    /// `mem_clients_slaves`): what the data takes, bytes.
    memory: u64,
}

/// Every primary's counters, in the order of `urls`.
fn sample(urls: &[String]) -> Result<Vec<Counters>, String> {
    urls.iter()
        .map(|url| {
            let mut c = connection(url)?;
            let info: String = redis::cmd("INFO")
                .arg("ALL")
                .query(&mut c)
                .map_err(|e| format!("{}: INFO: {e}", crate::facility::redact(url)))?;
            let field = |name: &str| -> f64 {
                info.lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0.0)
            };
            Ok(Counters {
                cpu: field("used_cpu_sys") + field("used_cpu_user"),
                memory: (field("used_memory")
                    - field("mem_clients_normal")
                    - field("mem_clients_slaves"))
                .max(0.0) as u64,
            })
        })
        .collect()
}

/// The CPU the primaries used between two samples: in all, and the
/// busiest one's.
fn cpu_between(a: &[Counters], b: &[Counters]) -> (f64, f64) {
    let each: Vec<f64> = a.iter().zip(b).map(|(a, b)| b.cpu - a.cpu).collect();
    (each.iter().sum(), each.iter().cloned().fold(0.0, f64::max))
}

/// One simulated gateway: its connection, its reads, its facility.
struct Sim {
    /// How it connects (again, after a failed round, as a lane does).
    link: Link,
    f: Facility,
    /// Rounds that failed (a timeout, a dropped connection) and were sent
    /// again on a new connection.
    failed: u64,
    gateway: String,
    facility: String,
    work: Workload,
    profile: Profile,
    /// The content key of its last read (its next read's echo check).
    last_key: Option<String>,
}

impl Sim {
    /// The rows of `scans` a gateway would claim: not its own immediate
    /// echoes (its local window decides those) and not rejected reads.
    fn rows(&mut self, scans: &[Scan]) -> Vec<ScanRow> {
        self.rows_marked(scans).0
    }

    /// [`Sim::rows`], and for each scan whether it is among them.
    fn rows_marked(&mut self, scans: &[Scan]) -> (Vec<ScanRow>, Vec<bool>) {
        let mut rows: Vec<ScanRow> = Vec::with_capacity(scans.len());
        let mut claimed = Vec::with_capacity(scans.len());
        for scan in scans {
            let row = ScanRow::of_scan(scan, &self.facility);
            let claim = row.content_key.is_some() && row.content_key != self.last_key;
            if claim {
                self.last_key.clone_from(&row.content_key);
                rows.push(row);
            }
            claimed.push(claim);
        }
        (rows, claimed)
    }

    /// Claim `rows` in rounds of at most `round`; the commits among them.
    fn claim(&mut self, rows: &[ScanRow], round: usize) -> Result<u64, String> {
        let mut committed = 0;
        let gateway = self.gateway.clone();
        for chunk in rows.chunks(round) {
            let claims: Vec<_> = chunk
                .iter()
                .map(|r| claim_for(r, &gateway, None, None))
                .collect();
            let outcomes = self.claim_round(&claims)?;
            committed += outcomes
                .iter()
                .filter(|o| **o == Outcome::Committed)
                .count() as u64;
        }
        Ok(committed)
    }
}

impl Sim {
    /// One round, sent again by UUID on a new connection after a failure
    /// (back-off 100 ms doubling to 2 s) as a claimer lane does; an error
    /// only after [`ATTEMPTS`] failures.
    fn claim_round(&mut self, claims: &[crate::facility::Claim]) -> Result<Vec<Outcome>, String> {
        let mut pause = Duration::from_millis(100);
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            match self.f.claim_batch(claims) {
                Ok(outcomes) => return Ok(outcomes),
                Err(e) => last = e.to_string(),
            }
            self.failed += 1;
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_secs(2));
            if let Ok(f) = self.link.connect_checked() {
                self.f = f;
            }
        }
        Err(format!(
            "gateway {}: {ATTEMPTS} rounds failed: {last}",
            self.gateway
        ))
    }
}

/// ", N rounds failed and were sent again", if any did.
fn resent(failed: u64) -> String {
    if failed == 0 {
        String::new()
    } else {
        format!(", {failed} rounds failed and were sent again")
    }
}

/// Gateways per primary that claim flat out in the capacity phase.
const CAPACITY_SENDERS: usize = 4;

/// Times a round is sent before the benchmark gives up.
const ATTEMPTS: u32 = 10;

/// A gateway's read arrivals: bursts at exponential intervals averaging
/// `rate` reads a second.
struct Arrivals {
    next: Instant,
    left: u64,
    rng: u64,
    rate: f64,
}

impl Arrivals {
    fn new(start: Instant, rate: f64, seed: u64) -> Arrivals {
        let mut a = Arrivals {
            next: start,
            left: 0,
            rng: seed | 1,
            rate,
        };
        // A random phase, so the gateways do not burst in step.
        let (gap, u) = (a.gap(), a.uniform());
        a.next += gap.mul_f64(u);
        a
    }

    fn uniform(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The time from a burst's last read to the next burst: a mean burst
    /// every mean burst size / `rate` seconds, less the burst's own length.
    fn gap(&mut self) -> Duration {
        let burst = (BURST_MAX - 1) as f64 / 2.0 * BURST_GAP.as_secs_f64();
        let mean = ((1 + BURST_MAX) as f64 / 2.0 / self.rate - burst).max(0.0);
        Duration::from_secs_f64(-(1.0 - self.uniform()).ln() * mean)
    }

    /// When the next read arrives; the arrivals move on past it.
    fn take(&mut self) -> Instant {
        let at = self.next;
        if self.left == 0 {
            self.left = 1 + (self.uniform() * BURST_MAX as f64) as u64 % BURST_MAX;
        }
        self.left -= 1;
        let gap = if self.left > 0 { BURST_GAP } else { self.gap() };
        self.next += gap;
        at
    }
}

/// What the gateways of a phase did.
#[derive(Default)]
struct Done {
    claims: u64,
    committed: u64,
    /// Rounds that failed and were sent again.
    failed: u64,
    /// Each read: when it was decided, its capture → decision time.
    reads: Vec<Read>,
}

/// A read of the shift phases.
struct Read {
    decided: Instant,
    took: Duration,
    /// The server its gateway claimed on.
    server: String,
}

impl Done {
    fn add(&mut self, other: Done) {
        self.claims += other.claims;
        self.committed += other.committed;
        self.failed += other.failed;
        self.reads.extend(other.reads);
    }
}

/// Phase 1 for one gateway: rounds back to back until `until`.
fn flat_out(sim: &mut Sim, until: Instant) -> Result<Done, String> {
    let mut done = Done::default();
    let failed = sim.failed;
    while Instant::now() < until {
        let scans: Vec<Scan> = (0..ROUND).map(|_| sim.work.scan(&sim.profile)).collect();
        let rows = sim.rows(&scans);
        done.committed += sim.claim(&rows, ROUND)?;
        done.claims += rows.len() as u64;
    }
    done.failed = sim.failed - failed;
    Ok(done)
}

/// Phase 2 for one gateway: reads arriving at `rate` until `until`, each
/// claimed in the first round after it arrived; capture → decision times.
fn shift(sim: &mut Sim, rate: f64, seed: u64, until: Instant) -> Result<Done, String> {
    let mut arrivals = Arrivals::new(Instant::now(), rate, seed);
    let mut done = Done::default();
    let mut waiting: Vec<(Instant, Scan)> = Vec::new();
    let failed = sim.failed;
    loop {
        let now = Instant::now();
        while arrivals.next <= now && arrivals.next < until {
            let at = arrivals.take();
            waiting.push((at, sim.work.scan(&sim.profile)));
        }
        if waiting.is_empty() {
            if arrivals.next >= until {
                done.failed = sim.failed - failed;
                return Ok(done);
            }
            std::thread::sleep(arrivals.next.saturating_duration_since(now));
            continue;
        }
        let take = waiting.len().min(ROUND);
        let batch: Vec<(Instant, Scan)> = waiting.drain(..take).collect();
        let scans: Vec<Scan> = batch.iter().map(|(_, s)| s.clone()).collect();
        let (rows, claimed) = sim.rows_marked(&scans);
        done.committed += sim.claim(&rows, ROUND)?;
        done.claims += rows.len() as u64;
        let decided = Instant::now();
        // (A read the gateway decides alone is not the store's to time.)
        done.reads.extend(
            batch
                .iter()
                .zip(claimed)
                .filter(|(_, c)| *c)
                .map(|((at, _), _)| Read {
                    decided,
                    took: decided.saturating_duration_since(*at),
                    server: sim.f.server().to_string(),
                }),
        );
    }
}

/// Run `phase` on every gateway at once, each on its own thread.
fn on_all(
    sims: &mut [Sim],
    phase: impl Fn(usize, &mut Sim) -> Result<Done, String> + Sync,
) -> Result<Done, String> {
    let phase = &phase;
    std::thread::scope(|s| {
        let running: Vec<_> = sims
            .iter_mut()
            .enumerate()
            .map(|(i, sim)| s.spawn(move || phase(i, sim)))
            .collect();
        let mut all = Done::default();
        for r in running {
            all.add(r.join().map_err(|_| "a gateway thread panicked")??);
        }
        Ok(all)
    })
}

/// The config of gateway `gateway` of `facility` on `target`.
fn settings(target: &Target, facility: &str, gateway: &str) -> Result<(Config, Settings), String> {
    let toml = format!(
        "[gateway]\nfacility = {facility:?}\nid = {gateway:?}\nstate_dir = \"/nonexistent\"\n[redis]\n{}",
        target.toml()
    );
    let config = Config::parse(&toml, None).map_err(|e| e.to_string())?;
    let settings = Settings::resolve(&config).map_err(|e| e.to_string())?;
    Ok((config, settings))
}

/// Connect a simulated gateway `g` of `facility` to the store.
fn connect(target: &Target, facility: &str, g: usize, seed_n: u64) -> Result<Sim, String> {
    let gateway = format!("sim-gw-{g}");
    let (config, settings) = settings(target, facility, &gateway)?;
    let redis = settings.redis.as_ref().ok_or("[redis] missing")?;
    let link = Link::new(&config, redis);
    let f = link
        .connect_checked()
        .map_err(|e| format!("gateway {gateway} of {facility}: {e}"))?;
    Ok(Sim {
        link,
        f,
        failed: 0,
        last_key: None,
        gateway: gateway.clone(),
        facility: facility.to_string(),
        work: {
            let mut w = Workload::new(seed_n, 0);
            w.place(chrono::Utc::now().timestamp_millis(), 7);
            w
        },
        profile: Profile {
            scanner: format!("{gateway}-counter"),
            scan_type: ScanType::Dispense,
            quantity: 1,
            owner: None,
            unserialised: Default::default(),
        },
    })
}

/// The facility names of this run: `F` of them, spread over the slots by
/// their hash tags.
fn facility_names(run: &str, f: usize) -> Vec<String> {
    (0..f).map(|i| format!("{run}-f{i}")).collect()
}

/// `scangate bench --gateways N`: connect, run the phases, print.
pub(super) fn run(args: &BenchArgs) -> Result<Exit, String> {
    let target = match (&args.redis, args.cluster.is_empty()) {
        (Some(url), true) => Target::Server(url.clone()),
        (None, false) => Target::Cluster(args.cluster.clone()),
        (Some(_), false) => return Err("give --redis URL or --cluster NODES, not both".into()),
        (None, true) => {
            return Err("--gateways simulates gateways against a facility store: give --redis URL or --cluster host:port,…".into());
        }
    };
    let n = args.gateways as usize;
    let fac_n = (args.facilities as usize).clamp(1, n.max(1));
    let run_id = format!("load-{}", chrono::Utc::now().timestamp_millis());
    let facilities = facility_names(&run_id, fac_n);
    let primaries = target.primaries()?;
    println!(
        "scangate bench: {n} simulated gateways, {fac_n} facilities ({run_id}-f0 …), {} primar{} ({}); rounds of at most {ROUND} claims",
        primaries.len(),
        if primaries.len() == 1 { "y" } else { "ies" },
        match &target {
            Target::Server(url) => crate::facility::redact(url),
            Target::Cluster(nodes) => format!("cluster {}", nodes.join(",")),
        }
    );
    let keep_days = settings(&target, &facilities[0], "sim")?
        .1
        .redis
        .map_or(0, |r| r.config.ledger_stream_keep_days);
    let t = Instant::now();
    let mut sims = (0..n)
        .map(|g| connect(&target, &facilities[g % fac_n], g, g as u64 * 10_000_000))
        .collect::<Result<Vec<Sim>, String>>()?;
    // (After connecting: the connections' buffers are not the data's.)
    let start = sample(&primaries)?;
    println!(
        "connected {n} gateways in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let seconds = Duration::from_secs(args.seconds.max(1));

    // 1. capacity: enough gateways to keep every primary busy, not all
    // of them (200 gateways flat out would only queue behind each other).
    let senders = n.min(CAPACITY_SENDERS * primaries.len());
    let before = sample(&primaries)?;
    let t = Instant::now();
    let until = t + seconds;
    let done = on_all(&mut sims[..senders], |_, sim| flat_out(sim, until))?;
    let wall = t.elapsed().as_secs_f64();
    let (cpu, busiest) = cpu_between(&before, &sample(&primaries)?);
    println!(
        "capacity: {senders} gateways flat out: {} claims in {wall:.2} s = {:.0} claims/s ({} committed){}; store CPU {:.1} µs per claim, busiest primary at {:.0} % of a core (a primary's ceiling at this cost: {:.0} claims/s)",
        done.claims,
        done.claims as f64 / wall,
        done.committed,
        resent(done.failed),
        cpu * 1e6 / done.claims.max(1) as f64,
        busiest / wall * 100.0,
        done.claims as f64 / cpu.max(1e-9)
    );

    // 2. shift
    let rate = args.gateway_rate;
    let quiet = shift_phase(&mut sims, &primaries, rate, seconds, "shift")?;
    let claimed = done.claims + quiet.claims;

    // What phases 1 and 2 left in the store (before phase 3's facility).
    memory(&primaries, &facilities, &start, claimed, keep_days)?;

    // 3. a busy facility re-published during a shift
    if args.republish > 0 {
        republish(args, &target, &run_id, &mut sims, &primaries, &quiet.reads)?;
    }
    Ok(Exit::Ok)
}

/// Phase 2 (and the load beside phase 3): the shift, printed as `what`;
/// its reads' decision times.
fn shift_phase(
    sims: &mut [Sim],
    primaries: &[String],
    rate: f64,
    seconds: Duration,
    what: &str,
) -> Result<Done, String> {
    let before = sample(primaries)?;
    let t = Instant::now();
    let until = t + seconds;
    let done = on_all(sims, |i, sim| shift(sim, rate, 0x5eed + i as u64, until))?;
    let wall = t.elapsed().as_secs_f64();
    let (_, busiest) = cpu_between(&before, &sample(primaries)?);
    println!(
        "{what}: {rate} reads/s offered per gateway in bursts, {} claims in {wall:.1} s ({:.0}/s, {} committed){}; {}; busiest primary at {:.1} % of a core",
        done.claims,
        done.claims as f64 / wall,
        done.committed,
        resent(done.failed),
        latency(done.reads.iter().map(|r| r.took)),
        busiest / wall * 100.0
    );
    Ok(done)
}

/// "capture->decision p50 …, p99 …, max …" of `latencies`.
fn latency(latencies: impl Iterator<Item = Duration>) -> String {
    let mut l: Vec<Duration> = latencies.collect();
    l.sort();
    format!(
        "capture->decision p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} reads)",
        ms(percentile(&l, 0.50)),
        ms(percentile(&l, 0.99)),
        ms(l.last().copied().unwrap_or_default()),
        l.len()
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Phase 3: a busy facility's horizon claimed, its keys deleted, then
/// re-published while the others run a shift.
fn republish(
    args: &BenchArgs,
    target: &Target,
    run_id: &str,
    sims: &mut [Sim],
    primaries: &[String],
    quiet: &[Read],
) -> Result<(), String> {
    let busy = format!("{run_id}-busy");
    let mut sim = connect(target, &busy, 999_999, 900_000_000)?;
    // Its 72 hours: captures spread evenly over the retention.
    let k = args.republish;
    let horizon_ms = RETENTION.as_millis() as i64 - 600_000;
    let step = (horizon_ms / k.max(1) as i64).max(1);
    sim.work
        .place(chrono::Utc::now().timestamp_millis() - horizon_ms, step);
    let mut rows = Vec::with_capacity(k as usize);
    while (rows.len() as u64) < k {
        let scans: Vec<Scan> = (0..ROUND).map(|_| sim.work.scan(&sim.profile)).collect();
        rows.extend(sim.rows(&scans));
    }
    rows.truncate(k as usize);
    let t = Instant::now();
    let committed = sim.claim(&rows, REPUBLISH_ROUND)?;
    println!(
        "republish: the busy facility's {k} claims over 72 h ({committed} commits) claimed in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let deleted = delete_facility(target, primaries, &busy)?;
    println!("republish: its {deleted} keys deleted (the store replaced)");
    let seconds = Duration::from_secs(args.seconds.max(1));
    let started = Instant::now();
    let (again, load) = std::thread::scope(|s| {
        let again = s.spawn(|| {
            sim.claim(&rows, REPUBLISH_ROUND)
                .map(|c| (c, started.elapsed()))
        });
        let load = shift_phase(
            sims,
            primaries,
            args.gateway_rate,
            seconds,
            "shift during the re-publish",
        );
        (again.join(), load)
    });
    let (recommitted, took) = again.map_err(|_| "the re-publishing thread panicked")??;
    let load = load?.reads;
    let busy_server = sim.f.server().to_string();
    let meanwhile = |same: bool| {
        let busy_server = &busy_server;
        load.iter()
            .filter(move |r| r.decided <= started + took && (r.server == *busy_server) == same)
            .map(|r| r.took)
    };
    println!(
        "republish: {} claims re-published in {:.2} s ({:.0} claims/s, {recommitted} commits again, as many as before: {})",
        rows.len(),
        took.as_secs_f64(),
        rows.len() as f64 / took.as_secs_f64().max(1e-9),
        recommitted == committed,
    );
    println!(
        "republish: meanwhile, the other facilities' reads on its primary: {}; on the other primaries: {}; all reads in the shift without it: {}",
        latency(meanwhile(true)),
        latency(meanwhile(false)),
        latency(quiet.iter().map(|r| r.took))
    );
    Ok(())
}

/// Delete every key of `facility` (its slot's primary holds them all);
/// how many.
fn delete_facility(target: &Target, primaries: &[String], facility: &str) -> Result<u64, String> {
    let pattern = crate::facility::cluster::facility_key(facility, "*");
    let mut deleted = 0;
    for url in primaries {
        let mut c = connection(url)?;
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query(&mut c)
                .map_err(|e| format!("SCAN on {}: {e}", crate::facility::redact(url)))?;
            if !keys.is_empty() {
                let n: u64 = redis::cmd("UNLINK")
                    .arg(&keys)
                    .query(&mut c)
                    .map_err(|e| format!("UNLINK on {}: {e}", crate::facility::redact(url)))?;
                deleted += n;
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        if matches!(target, Target::Server(_)) {
            break;
        }
    }
    Ok(deleted)
}

/// The store's memory: what the run added, per claim and per commit, the
/// ledger streams apart (`MEMORY USAGE`).
fn memory(
    primaries: &[String],
    facilities: &[String],
    start: &[Counters],
    claims: u64,
    keep_days: u64,
) -> Result<(), String> {
    let now = sample(primaries)?;
    let added: i64 = start
        .iter()
        .zip(&now)
        .map(|(a, b)| b.memory as i64 - a.memory as i64)
        .sum();
    let (mut stream_bytes, mut entries) = (0u64, 0u64);
    for url in primaries {
        let mut c = connection(url)?;
        for f in facilities {
            let key = crate::facility::cluster::facility_key(f, "ledger");
            let used: Option<u64> = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(&key)
                .arg("SAMPLES")
                .arg(0)
                .query(&mut c)
                .unwrap_or(None);
            if let Some(b) = used {
                stream_bytes += b;
                entries += redis::cmd("XLEN")
                    .arg(&key)
                    .query::<u64>(&mut c)
                    .unwrap_or(0);
            }
        }
    }
    let keys_bytes = (added - stream_bytes as i64).max(0) as f64;
    println!(
        "memory: the run added {:.1} MB over {} facilities: decision and seen keys {:.0} B per claim ({claims} claims; they expire after the retention), ledger streams {:.0} B per commit ({entries} entries; kept until read and {} days old)",
        added as f64 / 1e6,
        facilities.len(),
        keys_bytes / claims.max(1) as f64,
        stream_bytes as f64 / entries.max(1) as f64,
        keep_days
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primaries_are_the_masters_not_failed() {
        let nodes = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7001@17001 slave a1 0 0 1 connected
c3 127.0.0.1:7002@17002,host master - 0 0 2 connected 5461-10922
d4 127.0.0.1:7003@17003 master,fail - 0 0 3 disconnected
e5 127.0.0.1:7004@17004 master - 0 0 4 connected
";
        assert_eq!(
            primaries_of(nodes),
            ["redis://127.0.0.1:7000", "redis://127.0.0.1:7002"]
        );
    }

    #[test]
    fn arrivals_average_the_rate_in_bursts() {
        let t0 = Instant::now();
        let mut a = Arrivals::new(t0, 2.0, 7);
        let mut last = t0;
        let mut close = 0;
        for _ in 0..20_000 {
            let at = a.take();
            assert!(at >= last);
            close += usize::from(at - last == BURST_GAP);
            last = at;
        }
        let rate = 20_000.0 / (last - t0).as_secs_f64();
        assert!((1.9..2.1).contains(&rate), "{rate}");
        assert!(close > 10_000, "bursts: {close}");
    }
}
