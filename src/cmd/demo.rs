//! `scangate demo`: a noisy pharmacy shift on virtual serial scanners.
//!
//! Three PTYs play three scanners; the real daemon pipeline ([`daemon::run`])
//! reads them with a temporary state directory. The script sends physical
//! picks with the echoes real counters produce — trigger double-fires
//! (~40 ms), retransmits (~0.6 s), operator re-scans (~2 s) — plus genuine
//! re-dispenses after the window, one product on two scanners and garbage.
//! The report is computed from the ledger, the outbox and the audit trail;
//! the script only knows what it sent. With `--redis URL` the same shift is
//! decided through a facility Redis (the gateway's claimer lanes).

mod tote;

use super::Failure;
use crate::audit::{self, Verification};
use crate::config::{Config, ConfigError, DedupConfig, GatewayConfig, ScanType, Scanner, Settings};
use crate::daemon;
use crate::exit::Exit;
use crate::facility::config::RedisConfig;
use crate::ledger::{self, LedgerEntry};
use crate::model::GateStats;
use crate::outbox::OutboxStatus;
use crate::pty::VirtualScanner;
use crate::store::Store;
use std::path::Path;
use std::time::{Duration, Instant};

const GS: &str = "\x1d";

/// One physical pick: a label read on a scanner, and its echoes.
struct Pick {
    at_ms: u64,
    scanner: usize,
    label: String,
    /// Offsets (ms after the first read) of the echo transmissions.
    echoes: &'static [u64],
    /// What the echoes are, for the report.
    what: &'static str,
}

/// A GS1 DataMatrix DSCSA label: GTIN, serial, lot, expiry.
fn dscsa(gtin: &str, serial: &str, lot: &str, expiry: &str) -> String {
    format!("]d201{gtin}17{expiry}21{serial}{GS}10{lot}")
}

/// A transmission: when (ms after the start), which scanner, which bytes,
/// and what it is (for the scanner-side view of the ACK scanner).
type Send = (u64, usize, Vec<u8>, String);

fn script() -> (Vec<Pick>, Vec<Send>) {
    // NDC 0777-3105-02 in a GTIN-14; NDC 1234567890 as a UPC-A (number system 3).
    let gtin = "00307773105025";
    let upc = "312345678906";
    let picks = vec![
        Pick {
            at_ms: 0,
            scanner: 0,
            label: dscsa(gtin, "SN1001", "LOT7A", "281231"),
            echoes: &[40],
            what: "trigger double-fire",
        },
        Pick {
            at_ms: 300,
            scanner: 1,
            label: upc.into(),
            echoes: &[2100],
            what: "operator re-scan",
        },
        Pick {
            at_ms: 800,
            scanner: 0,
            label: dscsa(gtin, "SN1002", "LOT7A", "281231"),
            echoes: &[600],
            what: "retransmit",
        },
        Pick {
            at_ms: 1200,
            scanner: 2,
            label: dscsa(gtin, "SN2001", "LOT9C", "290630"),
            echoes: &[],
            what: "single read",
        },
        Pick {
            at_ms: 2000,
            scanner: 1,
            label: dscsa(gtin, "SN1003", "LOT7A", "281231"),
            echoes: &[2000],
            what: "operator re-scan",
        },
        Pick {
            at_ms: 5000,
            scanner: 1,
            label: upc.into(),
            echoes: &[40],
            what: "re-dispense after window + double-fire",
        },
        Pick {
            at_ms: 5500,
            scanner: 0,
            label: upc.into(),
            echoes: &[],
            what: "same product, other scanner",
        },
        Pick {
            at_ms: 6000,
            scanner: 0,
            label: dscsa(gtin, "SN1004", "LOT7A", "281231"),
            echoes: &[40, 600, 2000],
            what: "echo storm",
        },
        Pick {
            at_ms: 9000,
            scanner: 1,
            label: upc.into(),
            echoes: &[600],
            what: "re-dispense after window + retransmit",
        },
    ];
    let mut sends: Vec<Send> = Vec::new();
    for (n, p) in picks.iter().enumerate() {
        for (k, at) in std::iter::once(p.at_ms)
            .chain(p.echoes.iter().map(|e| p.at_ms + e))
            .enumerate()
        {
            let what = if k == 0 {
                format!("pick {} first read", n + 1)
            } else {
                format!("pick {} echo ({})", n + 1, p.what)
            };
            sends.push((at, p.scanner, format!("{}\r\n", p.label).into_bytes(), what));
        }
    }
    // Garbage: a misread, a non-UTF-8 burst, and an over-long frame.
    sends.push((
        2500,
        0,
        b"]C1NOT-A-GS1-STRING\r".to_vec(),
        "garbage: misread".into(),
    ));
    sends.push((
        4200,
        2,
        b"\xff\xfe\x00\x01noise\r".to_vec(),
        "garbage: not UTF-8".into(),
    ));
    let mut long = vec![b'9'; 6000];
    long.push(b'\r');
    sends.push((7300, 1, long, "garbage: over-long".into()));
    sends.sort_by_key(|s| s.0);
    (picks, sends)
}

/// The virtual scanners; the first, counter-1, has ACK/NAK on.
const NAMES: [&str; 3] = ["counter-1", "counter-2", "receiving"];

/// `scangate demo [--redis URL]`; the exit code is 1 if anything was lost
/// or doubled.
pub fn run(redis: Option<String>) -> Result<Exit, Failure> {
    super::runtime()?
        .block_on(shift(redis))
        .map_err(|e| Failure::Runtime(format!("demo failed: {e}")))
}

/// Play the shift through the daemon and report; returns the exit code (1
/// if anything was lost or doubled).
async fn shift(redis: Option<String>) -> Result<Exit, String> {
    let facility = redis.as_deref().map(facility_config).transpose()?;
    let dir = tempfile::Builder::new()
        .prefix("scangate-demo-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary state directory: {e}"))?;
    let mut scanners = Vec::new();
    for _ in NAMES {
        scanners.push(VirtualScanner::new().map_err(|e| format!("cannot create a PTY: {e}"))?);
    }
    let cfg = demo_config(dir.path(), &scanners, facility);
    let window_ms = cfg.dedup.window_ms;
    let (picks, sends) = script();
    println!(
        "scangate demo: {} virtual serial scanners (PTYs), echo window {window_ms} ms, {}, state in {}",
        NAMES.len(),
        match &redis {
            Some(url) => format!("facility Redis {}", crate::facility::redact(url)),
            None => "embedded store".to_string(),
        },
        dir.path().display()
    );
    println!(
        "playing a {:.0}-second noisy shift ...",
        sends.last().map_or(0, |s| s.0) as f64 / 1000.0
    );

    let daemon = Started::start(&cfg, dir.path()).await?;
    let played = play(&mut scanners, &sends, dir.path()).await?;
    let report = daemon.stop().await?;

    let found = Found::read(dir.path(), &picks, played.start_wall_ms)?;
    let lost = sends.len() as i64 - found.in_outbox;
    print_table(&picks, &sends, &found, &played.replies, &report.stats);
    print_picks(&picks, &found.per_pick);
    print_acker(&played);
    if let Some(storm) = found
        .entries
        .iter()
        .find(|e| e.serial.as_deref() == Some("SN1004"))
    {
        let trail =
            audit::trail_for_key(&found.store, &storm.content_key).map_err(|e| e.to_string())?;
        println!("\n`scangate audit trace` of the echo storm:");
        print!("{}", audit::render_trace(&storm.content_key, &trail).0);
    }
    let exactly_once = found.per_pick.iter().all(|&n| n == 1);
    let shift_ok = lost == 0
        && exactly_once
        && found.audit_records.is_some()
        && found.entries.len() == picks.len();
    // The tote is decided by the embedded store, with or without --redis:
    // what it shows is each scanner's policy, not the facility store.
    let tote_ok = tote::run(None).await?;
    let ok = shift_ok && tote_ok;
    println!(
        "\n{}",
        if ok {
            "result: every physical pick is in the ledger exactly once; nothing lost; each tote policy did what it promises"
        } else {
            "result: MISMATCH — see the tables above"
        }
    );
    Ok(if ok { Exit::Ok } else { Exit::CheckFailed })
}

/// The real daemon running a demo config, its database open and its
/// devices set up.
struct Started {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<daemon::RunReport, daemon::DaemonError>>,
}

impl Started {
    /// Start the daemon on `cfg` (state in `dir`) and let it open its
    /// database and devices before anything is played.
    async fn start(cfg: &Config, dir: &Path) -> Result<Started, String> {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let settings = Settings::resolve(cfg).map_err(|e| e.to_string())?;
        let task = tokio::spawn(daemon::run(settings, async {
            let _ = stopped.await;
        }));
        let db = dir.join(crate::store::DB_FILE);
        let t0 = Instant::now();
        while !db.exists() && t0.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(Started { stop, task })
    }

    /// Stop it (drained) and return its report.
    async fn stop(self) -> Result<daemon::RunReport, String> {
        let _ = self.stop.send(());
        self.task
            .await
            .map_err(|e| format!("daemon task failed: {e}"))?
            .map_err(|e| e.to_string())
    }
}

/// Whether the outbox in `dir` holds `transmissions` scans, none undecided.
fn all_decided(dir: &Path, transmissions: i64) -> bool {
    Store::open_read_only(dir)
        .ok()
        .and_then(|store| store.outbox_status().ok())
        .is_some_and(|st| st.total() >= transmissions && st.pending == 0 && st.unresolved == 0)
}

/// `--redis URL`: the facility store's section, as the daemon would take it.
fn facility_config(url: &str) -> Result<RedisConfig, String> {
    let r = RedisConfig {
        url: url.to_string(),
        sentinels: Vec::new(),
        cluster: Vec::new(),
        service_name: None,
        username: None,
        password_file: None,
        ca_file: None,
        connect_timeout_ms: 1000,
        command_timeout_ms: 1000,
        min_replicas_ack: Default::default(),
        max_clock_error_ms: 250,
        ledger_stream_keep_days: 7,
    };
    r.validate()
        .map_err(|e| format!("--redis: {}", ConfigError::new(None, e.within("redis"))))?;
    Ok(r)
}

/// The demo gateway: state in `dir`, the [`NAMES`] scanners on `scanners`'
/// PTYs (the last one receives, counter-1 has ACK/NAK on).
fn demo_config(dir: &Path, scanners: &[VirtualScanner], redis: Option<RedisConfig>) -> Config {
    Config {
        gateway: GatewayConfig {
            facility: "demo-pharmacy".into(),
            id: "demo-gw".into(),
            state_dir: Some(dir.to_owned()),
            gln: None,
        },
        dedup: DedupConfig::default(),
        outbox: Default::default(),
        redis,
        metrics: Default::default(),
        records: Default::default(),
        controls: Default::default(),
        sinks: Vec::new(),
        checks: Default::default(),
        scanners: NAMES
            .iter()
            .zip(scanners)
            .enumerate()
            .map(|(i, (name, vs))| {
                let scan_type = if i == 2 {
                    ScanType::Receive
                } else {
                    ScanType::Dispense
                };
                let mut sc = Scanner::serial(name, vs.path(), scan_type);
                sc.kind.ack = i == 0;
                sc.into()
            })
            .collect(),
        carried: Vec::new(),
    }
}

/// What the shift played: when it started, counter-1's replies and its
/// transmissions.
struct Played<'a> {
    /// The wall clock at the start (Unix ms).
    start_wall_ms: i64,
    /// counter-1's reply bytes, each with when it arrived.
    replies: Vec<(u8, Instant)>,
    /// counter-1's transmissions, each with when it was sent.
    sent_acker: Vec<(Instant, &'a Send)>,
}

/// Send the script's transmissions on time, then wait until the daemon has
/// every one in the outbox (state in `dir`) and decided; meanwhile listen
/// to counter-1's replies.
async fn play<'a>(
    scanners: &mut [VirtualScanner],
    sends: &'a [Send],
    dir: &Path,
) -> Result<Played<'a>, String> {
    let start = tokio::time::Instant::now();
    let start_wall_ms = chrono::Utc::now().timestamp_millis();
    // counter-1 is an ACK/NAK scanner: while the script waits for its next
    // transmission, it listens for counter-1's replies and notes when each
    // byte arrived.
    let mut replies: Vec<(u8, Instant)> = Vec::new();
    let mut sent_acker: Vec<(Instant, &Send)> = Vec::new();
    for send in sends {
        let (at, idx, bytes, _) = send;
        let due = start + Duration::from_millis(*at);
        listen(&mut scanners[0], &mut replies, due).await?;
        scanners[*idx]
            .send(bytes)
            .map_err(|e| format!("writing to virtual scanner {}: {e}", NAMES[*idx]))?;
        if *idx == 0 {
            sent_acker.push((Instant::now(), send));
        }
    }

    // Wait until every transmission is in the outbox and decided.
    let transmissions = sends.len() as i64;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if all_decided(dir, transmissions) {
            break;
        }
        if Instant::now() > deadline {
            break; // report what we have: "lost" will show it
        }
        let until = tokio::time::Instant::now() + Duration::from_millis(50);
        listen(&mut scanners[0], &mut replies, until).await?;
    }
    // The last ACK follows the commit that made the outbox complete.
    let until = tokio::time::Instant::now() + Duration::from_millis(100);
    listen(&mut scanners[0], &mut replies, until).await?;
    Ok(Played {
        start_wall_ms,
        replies,
        sent_acker,
    })
}

/// What the shift left in the database: computed from the ledger, the
/// outbox and the audit trail, not from the script.
struct Found {
    store: Store,
    /// The outbox's counts.
    outbox: OutboxStatus,
    /// Scans in the outbox.
    in_outbox: i64,
    /// The ledger.
    entries: Vec<LedgerEntry>,
    /// The audit chain's length if it verifies.
    audit_records: Option<i64>,
    /// Ledger entries per pick of the script.
    per_pick: Vec<usize>,
}

impl Found {
    /// Read the database in `dir`; match its ledger entries to `picks`.
    fn read(dir: &Path, picks: &[Pick], start_wall_ms: i64) -> Result<Found, String> {
        let store = Store::open_read_only(dir).map_err(|e| e.to_string())?;
        let outbox = store.outbox_status().map_err(|e| e.to_string())?;
        let in_outbox = outbox.total();
        let mut entries = Vec::new();
        ledger::for_each(&store, None, |e| {
            entries.push(e);
            Ok(())
        })
        .map_err(|e| e.to_string())?;
        let audit_records = match audit::verify(&store).map_err(|e| e.to_string())? {
            Verification::Intact { records, .. } => Some(records),
            Verification::Broken { .. } => None,
        };
        // Match ledger entries to picks: same scanner and label identity,
        // captured within the pick's burst.
        let per_pick: Vec<usize> = picks
            .iter()
            .map(|p| {
                entries
                    .iter()
                    .filter(|e| entry_matches(e, p, NAMES[p.scanner], start_wall_ms))
                    .count()
            })
            .collect();
        Ok(Found {
            store,
            outbox,
            in_outbox,
            entries,
            audit_records,
            per_pick,
        })
    }
}

/// The report's table: what the script sent against what was found.
fn print_table(
    picks: &[Pick],
    sends: &[Send],
    found: &Found,
    replies: &[(u8, Instant)],
    stats: &GateStats,
) {
    let transmissions = sends.len() as i64;
    let acks: Vec<u8> = replies.iter().map(|r| r.0).collect();
    println!();
    println!("  {:<40}{:>8}", "physical picks (script)", picks.len());
    println!(
        "  {:<40}{:>8}",
        "transmissions sent (script)", transmissions
    );
    println!("  {:<40}{:>8}", "scans in the outbox", found.in_outbox);
    println!(
        "  {:<40}{:>8}",
        "committed (ledger entries)",
        found.entries.len()
    );
    println!(
        "  {:<40}{:>8}",
        "suppressed echoes", found.outbox.suppressed
    );
    println!(
        "  {:<40}{:>8}",
        "  of them ambiguous (label w/o serial)", found.outbox.ambiguous
    );
    println!(
        "  {:<40}{:>8}",
        "rejected (audited, with reason)", found.outbox.rejected
    );
    println!("  {:<40}{:>8}", "lost", transmissions - found.in_outbox);
    println!(
        "  {:<40}{:>8}",
        "audit chain",
        match found.audit_records {
            Some(records) => format!("verified ({records})"),
            None => "BROKEN".into(),
        }
    );
    println!(
        "  {:<40}{:>8}",
        "ACKs / NAKs seen by counter-1",
        format!(
            "{} / {}",
            acks.iter().filter(|&&b| b == crate::source::ACK).count(),
            acks.iter().filter(|&&b| b == crate::source::NAK).count()
        )
    );
    println!(
        "  {:<40}{:>8}",
        "exact lookups skipped by the Bloom filter",
        format!(
            "{} of {}",
            stats.lookups_saved,
            stats.lookups_saved + stats.exact_lookups
        )
    );
    println!();
}

/// One line per pick: its transmissions and the ledger entries it got.
fn print_picks(picks: &[Pick], per_pick: &[usize]) {
    for (p, n) in picks.iter().zip(per_pick) {
        println!(
            "  pick at {:>5} ms on {:<10} {:<40} {} transmission(s) -> {} ledger entr{}",
            p.at_ms,
            NAMES[p.scanner],
            p.what,
            1 + p.echoes.len(),
            n,
            if *n == 1 { "y" } else { "ies" }
        );
    }
}

/// The ACK scanner's side: one reply per transmission, in order (a real
/// ACK/NAK scanner waits for it; the demo's echoes come fast enough to
/// overlap, so replies are matched to transmissions in order).
fn print_acker(played: &Played<'_>) {
    println!(
        "\n  counter-1 has ACK/NAK on; what the scanner saw (ACK = stored, NAK = send again):"
    );
    for (k, (sent_at, (at, _, _, what))) in played.sent_acker.iter().enumerate() {
        let reply = match played.replies.get(k) {
            Some((b, t)) => format!(
                "{} after {:.1} ms",
                match *b {
                    crate::source::ACK => "ACK",
                    crate::source::NAK => "NAK",
                    _ => "?",
                },
                t.saturating_duration_since(*sent_at).as_secs_f64() * 1000.0
            ),
            None => "no reply".into(),
        };
        println!("  {at:>7} ms  {what:<52} -> {reply}");
    }
}

/// Collect the ACK scanner's reply bytes until `until`, timestamping each.
async fn listen(
    vs: &mut VirtualScanner,
    replies: &mut Vec<(u8, Instant)>,
    until: tokio::time::Instant,
) -> Result<(), String> {
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        // Short blocking polls, off the async workers' hot path.
        let got = tokio::task::block_in_place(|| vs.read_reply(left.min(Duration::from_millis(5))))
            .map_err(|e| format!("reading ACK/NAK from counter-1: {e}"))?;
        let now = Instant::now();
        replies.extend(got.into_iter().map(|b| (b, now)));
    }
}

fn parse_ms(t: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|d| d.timestamp_millis())
}

fn entry_matches(e: &LedgerEntry, p: &Pick, scanner: &str, start_ms: i64) -> bool {
    let Some(at) = parse_ms(&e.captured_at) else {
        return false;
    };
    let offset = at - start_ms;
    let burst_end = p.at_ms + p.echoes.last().copied().unwrap_or(0) + 500;
    let same_label = match &e.serial {
        Some(serial) => p.label.contains(serial.as_str()),
        None => !p.label.starts_with(']'),
    };
    e.scanner == scanner
        && same_label
        && offset >= p.at_ms as i64 - 500
        && offset <= burst_end as i64
}
