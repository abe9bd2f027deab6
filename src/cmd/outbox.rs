//! `scangate outbox status [--json]`: the outbox's counts, what the claimer
//! last recorded of the facility store, and the disk; `scangate outbox
//! decide-locally`: a gateway whose facility store was removed from its
//! configuration decides the scans that store left unresolved itself.

use super::{Failure, load};
use crate::capture::clock::rfc3339_ms;
use crate::claimer::records::{self, FacilityRecords};
use crate::cli::args::{ConfigArg, OutboxCommand};
use crate::config::Config;
use crate::exit::Exit;
use crate::model::ScanState;
use crate::outbox::{DiskStatus, OutboxStatus};
use crate::store::Store;
use crate::store::space::{Floor, days_left_warning};

/// Run an `outbox` subcommand.
pub fn run(command: OutboxCommand) -> Result<Exit, Failure> {
    match command {
        OutboxCommand::Status { config, json } => status(&config, json),
        OutboxCommand::DecideLocally(config) => decide_locally(&config),
    }
}

/// What `scangate outbox status` shows: the outbox's counts, what the
/// claimer last recorded of the facility store, and the disk.
#[derive(serde::Serialize)]
struct OutboxReport {
    #[serde(flatten)]
    counts: OutboxStatus,
    #[serde(flatten)]
    known: FacilityRecords,
    disk: Option<DiskStatus>,
}

/// `outbox status [--json]`.
fn status(config: &ConfigArg, json: bool) -> Result<Exit, Failure> {
    let cfg = load(config)?;
    let st = report(&cfg)?;
    if json {
        println!("{}", serde_json::to_string(&st).expect("status serialises"));
    } else {
        print_counts(&st);
        print_known(&st.known, &cfg);
    }
    Ok(Exit::Ok)
}

/// Read the report from the state directory's database, read-only.
fn report(cfg: &Config) -> Result<OutboxReport, Failure> {
    let store = Store::open_read_only(&cfg.state_dir())?;
    let counts = store.outbox_status()?;
    let mut known = records::read(&store)?;
    if cfg.redis.is_none() {
        // Left by an earlier run with [redis].
        known = FacilityRecords {
            conflicts: known.conflicts,
            ..Default::default()
        };
    }
    let dir = cfg.state_dir();
    let space = store.space(&dir, chrono::Utc::now().timestamp_millis())?;
    let floor = Floor::new(&dir, cfg.outbox.min_free_mb);
    let disk = Some(DiskStatus {
        below_floor: floor.judge(space.free_bytes).is_err(),
        min_free_bytes: floor.bytes(),
        warning: days_left_warning(&dir, &space, cfg.outbox.warn_days_left),
        state_dir: dir,
        space,
    });
    Ok(OutboxReport {
        counts,
        known,
        disk,
    })
}

/// The outbox's counts, its oldest undecided scan and the disk, as text.
fn print_counts(st: &OutboxReport) {
    println!(
        "pending {}  unresolved {}  committed {}  suppressed {}  rejected {}",
        st.counts.pending,
        st.counts.unresolved,
        st.counts.committed,
        st.counts.suppressed,
        st.counts.rejected
    );
    match st.counts.oldest_open_ms {
        Some(ms) => {
            let age = chrono::Utc::now().timestamp_millis() - ms;
            println!(
                "oldest undecided scan: captured {} ({:.1} s ago)",
                rfc3339_ms(ms),
                age as f64 / 1000.0
            );
        }
        None => println!("no undecided scans"),
    }
    if let Some(d) = &st.disk {
        println!(
            "disk: {} in {}",
            super::status::render_space(&d.space, d.min_free_bytes),
            d.state_dir.display()
        );
        if let Some(w) = &d.warning {
            println!("WARNING: {w}");
        }
    }
}

/// What the claimer last recorded of the facility store, as text.
fn print_known(known: &FacilityRecords, cfg: &Config) {
    if let Some(f) = &known.facility {
        let since = rfc3339_ms(f.since_ms);
        match &f.reason {
            None => println!("facility store, as the claimer last saw it: answering since {since}"),
            Some(why) => println!(
                "facility store, as the claimer last saw it: NOT answering since {since}: {why}"
            ),
        }
    }
    if let Some(c) = &known.facility_clock {
        let side = if c.offset_ms < 0.0 {
            "ahead of"
        } else {
            "behind"
        };
        println!(
            "facility clock, as the claimer last measured it ({}): this gateway's wall clock is {:.3} s {side} the facility Redis's (± {:.1} ms)",
            rfc3339_ms(c.at_ms),
            c.offset_ms.abs() / 1e3,
            c.bound_ms
        );
    }
    if known.waiting_for_clock > 0 {
        println!(
            "{} scans wait for the facility clock: their capture times cannot be put on it within [redis] max_clock_error_ms yet; they are claimed once the claimer has measured it closer (at its next connect)",
            known.waiting_for_clock
        );
    }
    if let Some(r) = &known.reconciliation {
        println!(
            "last reconciliation {}: the facility store had lost data (this gateway's commit {} was missing); re-published {} of this gateway's commits in {} ms, {} conflict(s)",
            rfc3339_ms(r.at_ms),
            r.lost_marker,
            r.republished,
            r.took_ms,
            r.conflicts
        );
    }
    for c in &known.conflicts {
        println!(
            "CONFLICT: scan {} (this gateway) and scan {} ({}) were both committed as picks of one label while the facility store had lost data ({}): the facility ledger keeps one entry, both gateways' ledgers have theirs. Check which is right and correct the ledger by hand; `scangate audit trace {}` shows it",
            c.scan_uuid,
            c.other_scan_uuid,
            c.other_gateway
                .as_deref()
                .map_or_else(|| "another gateway".to_string(), |g| format!("gateway {g}")),
            rfc3339_ms(c.at_ms),
            c.scan_uuid
        );
    }
    for c in &known.scanner_clones {
        println!(
            "WARNING: scanner {:?} of this gateway ({}) has the name of a scanner of gateway {:?}: rename one, or, if it is one scanner heard by both, set shared = true in its [[scanner]] on both",
            c.scanner, cfg.gateway.id, c.other_gateway
        );
    }
}

/// `outbox decide-locally` (daemon stopped, `[redis]` removed).
fn decide_locally(config: &ConfigArg) -> Result<Exit, Failure> {
    let cfg = load(config)?;
    if cfg.redis.is_some() {
        return Err(Failure::Usage("this gateway has a [redis] section: its unresolved scans are replayed through the facility store when it answers. Fix: remove [redis] first if that store is gone for good".into()));
    }
    let mut store = Store::open_with_floor(&cfg.state_dir(), cfg.outbox.min_free_mb)?;
    let handed = store.reopen_unresolved()?;
    let mut gate = crate::gate::Gate::new(crate::gate::GateConfig::from_config(&cfg), &store)?;
    gate.bridge_earlier_keys(&mut store, &cfg)?;
    // Only a gateway that had a facility store has scans it left.
    if handed > 0 {
        gate.set_audit_note(Some(
            "decided by this gateway's own store (scangate outbox decide-locally): its facility store was removed from the configuration".into(),
        ));
    }
    let decided = crate::daemon::embedded::decide_pending(&mut store, &mut gate)?;
    let count = |state| {
        decided
            .iter()
            .filter(|d| d.verdict.state() == state)
            .count()
    };
    println!(
        "{handed} unresolved scans handed to this gateway's own store; decided {}: committed {}, suppressed {}, rejected {}",
        decided.len(),
        count(ScanState::Committed),
        count(ScanState::Suppressed),
        count(ScanState::Rejected)
    );
    Ok(Exit::Ok)
}
