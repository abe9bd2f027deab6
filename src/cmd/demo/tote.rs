//! The demo's receiving tote: six identical bottles whose label
//! carries no serial (GTIN + lot), scanned one second apart at three
//! receiving scanners that differ only in `unserialised`: `window` (the
//! default), `double-fire`, and `ask`, where staff answer each "taken as
//! an echo" with the REPEAT label and the bottle again. Each scanner acks
//! and hears Zebra SSI feedback; the report says what each scanner was
//! told, read from the bytes the PTY received, and what the ledger and
//! the outbox hold.

use crate::config::{Config, ScanType, Scanner};
use crate::feedback::{FeedbackConfig, Protocol, Told};
use crate::pty::VirtualScanner;
use crate::source::config::UnserialisedPolicy;
use crate::store::Store;
use std::path::Path;
use std::time::{Duration, Instant};

/// The scanners and their policies.
const SCANNERS: [(&str, UnserialisedPolicy); 3] = [
    ("tote-window", UnserialisedPolicy::Window),
    ("tote-double-fire", UnserialisedPolicy::DoubleFire),
    ("tote-ask", UnserialisedPolicy::Ask),
];

/// A policy's name, as the config writes it.
fn policy_name(p: UnserialisedPolicy) -> &'static str {
    match p {
        UnserialisedPolicy::Window => "window",
        UnserialisedPolicy::DoubleFire => "double-fire",
        UnserialisedPolicy::Ask => "ask",
    }
}

/// Bottles in the tote, and the time between two.
const BOTTLES: u64 = 6;
const APART_MS: u64 = 1010;

/// What each policy is to make of the tote: (ledger entries, ambiguous
/// echoes, control reads).
fn expected(policy: UnserialisedPolicy) -> (i64, i64, i64) {
    match policy {
        // Commits at 0 and 3.03 s; the rest inside the 3 s window.
        UnserialisedPolicy::Window => (2, 4, 0),
        UnserialisedPolicy::DoubleFire => (6, 0, 0),
        // Each bottle after the first: an ambiguous echo, REPEAT, the
        // bottle again (declared).
        UnserialisedPolicy::Ask => (6, 5, 5),
    }
}

/// The tote's transmissions: (ms after the start, scanner, bytes).
fn script(repeat: &str) -> Vec<(u64, usize, Vec<u8>)> {
    let bottle = "]d20100307773105025172812311010LOT7A\r".as_bytes().to_vec();
    let mut sends = Vec::new();
    for k in 0..BOTTLES {
        let at = k * APART_MS;
        for i in 0..SCANNERS.len() {
            sends.push((at, i, bottle.clone()));
        }
        if k > 0 {
            // tote-ask said "ambiguous": REPEAT, then the bottle again.
            sends.push((at + 350, 2, format!("{repeat}\r").into_bytes()));
            sends.push((at + 700, 2, bottle.clone()));
        }
    }
    sends.sort_by_key(|s| s.0);
    sends
}

/// Play the tote through the daemon (with `redis`, through the facility
/// store; the demo passes none) and print what happened; `Ok(true)` if
/// each policy did what it promises.
pub(super) async fn run(
    redis: Option<crate::facility::config::RedisConfig>,
) -> Result<bool, String> {
    let dir = tempfile::Builder::new()
        .prefix("scangate-demo-tote-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary state directory: {e}"))?;
    let mut scanners = Vec::new();
    for _ in SCANNERS {
        scanners.push(VirtualScanner::new().map_err(|e| format!("cannot create a PTY: {e}"))?);
    }
    let cfg = config(dir.path(), &scanners, redis);
    let sends = script(&cfg.controls.repeat);
    println!(
        "\nreceiving a tote: {BOTTLES} identical bottles without a serial (GTIN + lot), {APART_MS} ms apart, at three receiving scanners (ACK on, Zebra SSI feedback) ..."
    );
    let daemon = super::Started::start(&cfg, dir.path()).await?;
    let heard = play(&mut scanners, &sends, dir.path()).await?;
    daemon.stop().await?;
    let store = Store::open_read_only(dir.path()).map_err(|e| e.to_string())?;
    let mut ok = true;
    println!(
        "\n  {:<18}{:<13}{:>6}{:>9}{:>11}{:>10}",
        "scanner", "unserialised", "reads", "entries", "ambiguous", "controls"
    );
    for (i, (name, policy)) in SCANNERS.iter().enumerate() {
        let c = store.scanner_counts(name).map_err(|e| e.to_string())?;
        let reads = sends.iter().filter(|s| s.1 == i).count();
        let want = expected(*policy);
        let matches = (c.committed, c.ambiguous, c.control) == want;
        ok &= matches;
        println!(
            "  {name:<18}{:<13}{reads:>6}{:>9}{:>11}{:>10}{}",
            policy_name(*policy),
            c.committed,
            c.ambiguous,
            c.control,
            if matches { "" } else { "   MISMATCH" }
        );
    }
    println!(
        "\n  what each scanner was told, read by read (after its ACK; \"-\" = nothing: SSI has no echo sound):"
    );
    for ((name, _), told) in SCANNERS.iter().zip(&heard) {
        println!("  {name:<18}{}", told.join(" "));
    }
    println!(
        "\n  window: bottles inside the window are taken for echoes, counted as ambiguous (status, metrics, alert, audit);\n  double-fire: every bottle counts; ask: the scanner says \"ambiguous\", staff scan REPEAT and the bottle, and it counts."
    );
    Ok(ok)
}

/// The tote gateway: state in `dir`, the [`SCANNERS`] on `scanners`' PTYs.
fn config(
    dir: &Path,
    scanners: &[VirtualScanner],
    redis: Option<crate::facility::config::RedisConfig>,
) -> Config {
    let mut cfg = super::demo_config(dir, &[], redis);
    // A facility of its own: the shift's ledger stays the shift's.
    cfg.gateway.facility = "demo-tote".into();
    cfg.scanners = SCANNERS
        .iter()
        .zip(scanners)
        .map(|((name, policy), vs)| {
            let mut sc = Scanner::serial(name, vs.path(), ScanType::Receive);
            sc.kind.ack = true;
            sc.unserialised = *policy;
            sc.feedback = Some(FeedbackConfig::speaking(Protocol::ZebraSsi));
            sc.into()
        })
        .collect();
    cfg
}

/// Send on time while collecting every scanner's replies; then wait until
/// every read is decided and its signal heard. Returns, per scanner, what
/// it was told read by read.
async fn play(
    scanners: &mut [VirtualScanner],
    sends: &[(u64, usize, Vec<u8>)],
    dir: &Path,
) -> Result<Vec<Vec<String>>, String> {
    let start = tokio::time::Instant::now();
    let mut bytes: Vec<Vec<u8>> = vec![Vec::new(); scanners.len()];
    for (at, i, frame) in sends {
        collect(scanners, &mut bytes, start + Duration::from_millis(*at)).await?;
        scanners[*i]
            .send(frame)
            .map_err(|e| format!("writing to virtual scanner {}: {e}", SCANNERS[*i].0))?;
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if super::all_decided(dir, sends.len() as i64) {
            break;
        }
        if Instant::now() > deadline {
            break;
        }
        collect(
            scanners,
            &mut bytes,
            tokio::time::Instant::now() + Duration::from_millis(50),
        )
        .await?;
    }
    collect(
        scanners,
        &mut bytes,
        tokio::time::Instant::now() + Duration::from_millis(300),
    )
    .await?;
    Ok(bytes.iter().map(|b| told(b)).collect())
}

/// Read every scanner's replies until `until`.
async fn collect(
    scanners: &mut [VirtualScanner],
    bytes: &mut [Vec<u8>],
    until: tokio::time::Instant,
) -> Result<(), String> {
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        let slice = left.min(Duration::from_millis(5));
        for (vs, got) in scanners.iter_mut().zip(bytes.iter_mut()) {
            let more = tokio::task::block_in_place(|| vs.read_reply(slice / 3))
                .map_err(|e| format!("reading a virtual scanner's replies: {e}"))?;
            got.extend(more);
        }
    }
}

/// A scanner's reply bytes as what it was told per read: each ACK (or
/// NAK) followed by the SSI BEEP packet that came with it, if any.
fn told(bytes: &[u8]) -> Vec<String> {
    let packets: Vec<(Told, Vec<u8>)> = Told::ALL
        .iter()
        .map(|&t| (t, crate::feedback::ssi::bytes(t)))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    let mut out: Vec<String> = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if let Some((t, p)) = packets.iter().find(|(_, p)| bytes[at..].starts_with(p)) {
            match out.last_mut() {
                Some(last) if last == "-" => *last = t.as_str().to_string(),
                _ => out.push(t.as_str().to_string()),
            }
            at += p.len();
            continue;
        }
        match bytes[at] {
            crate::source::ACK => out.push("-".into()),
            crate::source::NAK => out.push("NAK".into()),
            _ => {}
        }
        at += 1;
    }
    out
}
