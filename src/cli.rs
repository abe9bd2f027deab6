//! The `scangate` command line: parse the arguments, run the command, and
//! turn its outcome into an exit code ([`crate::exit::Exit`], whose
//! meanings are listed once, there; which error gets which code is decided
//! in `Failure::exit`).

use crate::audit::{self, Verification};
use crate::config::{Config, ConfigError, Settings};
use crate::daemon::DaemonError;
use crate::exit::Exit;
use crate::store::{Store, StoreError};
use args::{AuditCommand, Cli, Command, ConfigArg, LedgerCommand, OutboxCommand, StateCommand};
use clap::Parser;
use std::process::ExitCode;

pub mod args;

/// Why a command failed; each message says what happened and what to do.
enum Failure {
    /// The configuration is invalid (or a file it names unreadable).
    Config(ConfigError),
    /// The state directory or database.
    Store(StoreError),
    /// The daemon could not run, or stopped on a failure.
    Daemon(DaemonError),
    /// A command-line argument or a setting that forbids the command.
    Usage(String),
    /// Anything else at run time.
    Runtime(String),
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        Failure::Config(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}

impl From<DaemonError> for Failure {
    fn from(e: DaemonError) -> Self {
        Failure::Daemon(e)
    }
}

impl Failure {
    /// The exit code of this failure: the one place errors get theirs.
    fn exit(&self) -> Exit {
        fn store(e: &StoreError) -> Exit {
            match e {
                StoreError::Sqlite { .. } => Exit::Runtime,
                _ => Exit::State,
            }
        }
        match self {
            Failure::Config(_) | Failure::Usage(_) => Exit::Config,
            Failure::Store(e) | Failure::Daemon(DaemonError::Store(e)) => store(e),
            Failure::Daemon(DaemonError::CorruptWhileRunning { .. }) => Exit::State,
            // The facility Redis is set up so claims could be lost, or
            // refuses this gateway: a technician's fix, like a config error.
            Failure::Daemon(DaemonError::Facility(_)) => Exit::Config,
            // Another process holds the port: the technician picks another.
            Failure::Daemon(DaemonError::MetricsListen(_)) => Exit::Config,
            Failure::Daemon(_) | Failure::Runtime(_) => Exit::Runtime,
        }
    }

    /// What to print.
    fn message(&self) -> String {
        match self {
            Failure::Config(e) => format!("configuration error: {e}"),
            Failure::Store(e) => e.to_string(),
            Failure::Daemon(e) => e.to_string(),
            Failure::Usage(m) | Failure::Runtime(m) => m.clone(),
        }
    }
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo and the benchmark print their own report; keep the log quiet.
    let quiet = matches!(cli.command, Command::Demo { .. } | Command::Bench(_));
    init_tracing(if quiet { "warn" } else { "info" });
    match dispatch(cli.command) {
        Ok(exit) => exit.into(),
        Err(f) => {
            eprintln!("scangate: {}", f.message());
            f.exit().into()
        }
    }
}

/// Logs to the journal when started by systemd (JOURNAL_STREAM is set),
/// else to stderr. `RUST_LOG` filters (default `default_level`).
fn init_tracing(default_level: &str) {
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let journald = std::env::var_os("JOURNAL_STREAM")
        .is_some()
        .then(|| tracing_journald::layer().ok())
        .flatten();
    let registry = tracing_subscriber::registry().with(filter);
    match journald {
        Some(layer) => registry.with(layer).init(),
        None => registry
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
            .init(),
    }
}

fn load(arg: &ConfigArg) -> Result<Config, Failure> {
    Ok(Config::load(arg.config.as_deref())?)
}

/// [`load`], and read the secrets and files it names (`[redis]`
/// password, CA): what `run` works with.
fn resolve(arg: &ConfigArg) -> Result<Settings, Failure> {
    Ok(Settings::load(arg.config.as_deref())?)
}

fn open_ro(arg: &ConfigArg) -> Result<Store, Failure> {
    let cfg = load(arg)?;
    Ok(Store::open_read_only(&cfg.state_dir())?)
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("cannot start the async runtime: {e}")))
}

fn dispatch(cmd: Command) -> Result<Exit, Failure> {
    match cmd {
        Command::Decode(args) => Ok(crate::decode_cmd::run(&args)),
        Command::Devices(args) => Ok(crate::devices_cmd::run_devices(&args)),
        Command::Pair(args) => Ok(crate::devices_cmd::run_pair(&args)),
        Command::Run(arg) => {
            let settings = resolve(&arg)?;
            runtime()?.block_on(async {
                // Installed before anything starts: a SIGTERM that comes
                // while the daemon starts up stops it in order too (the
                // default action would kill it).
                let shutdown = shutdown_signal()?;
                crate::daemon::run(settings, shutdown).await?;
                Ok(Exit::Ok)
            })
        }
        Command::CheckConfig(arg) => {
            // Resolved as `run` resolves it: an unreadable secret fails here too.
            let settings = resolve(&arg)?;
            let cfg = &settings.config;
            println!(
                "configuration OK: facility {}, gateway {}, {} scanner(s), window {} ms, state in {}",
                cfg.gateway.facility,
                cfg.gateway.id,
                cfg.scanners.len(),
                cfg.dedup.window_ms,
                cfg.state_dir().display()
            );
            Ok(Exit::Ok)
        }
        Command::Demo { redis } => runtime()?
            .block_on(crate::demo::run(redis))
            .map_err(|e| Failure::Runtime(format!("demo failed: {e}"))),
        Command::Bench(args) => {
            crate::bench::run(&args).map_err(|e| Failure::Runtime(format!("bench failed: {e}")))
        }
        Command::Ledger {
            command: LedgerCommand::Export { config, since },
        } => {
            let since_ms = match since {
                None => None,
                Some(s) => Some(
                    chrono::DateTime::parse_from_rfc3339(&s)
                        .map_err(|e| {
                            Failure::Usage(format!(
                                "--since {s:?} is not an RFC 3339 time ({e}); use e.g. 2026-11-30T08:00:00Z"
                            ))
                        })?
                        .timestamp_millis(),
                ),
            };
            let settings = resolve(&config)?;
            let cfg = &settings.config;
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            match &settings.redis {
                // With a facility store, its stream is the ledger.
                Some(redis) => {
                    let url = redis.primary_url().map_err(ledger_unreadable)?;
                    let mut facility = crate::facility::Facility::connect_with_ca(
                        &url,
                        redis.ca_pem.clone(),
                        &cfg.gateway.facility,
                        cfg.window_ms(),
                        std::time::Duration::from_secs(cfg.dedup.retention_hours * 3600),
                        redis.config.connect_timeout(),
                        redis.config.command_timeout(),
                    )
                    .map_err(ledger_unreadable)?;
                    facility
                        .for_each_ledger_entry(since_ms, |v| write_line(&mut out, &v))
                        .map_err(ledger_unreadable)?;
                }
                None => {
                    let store = Store::open_read_only(&cfg.state_dir())?;
                    crate::ledger::for_each(&store, since_ms, |e| write_line(&mut out, &e))?;
                }
            }
            use std::io::Write;
            let _ = out.flush();
            Ok(Exit::Ok)
        }
        Command::Audit {
            command: AuditCommand::Verify(arg),
        } => {
            let settings = resolve(&arg)?;
            let store = Store::open_read_only(&settings.config.state_dir())?;
            Store::check_pages(store.path())?;
            let records = match audit::verify(&store)? {
                Verification::Intact { records, head } => {
                    println!("audit chain intact: {records} records, head {head}");
                    records
                }
                Verification::Broken { seq, problem } => {
                    println!("audit chain BROKEN at record {seq}: {problem}");
                    return Ok(Exit::CheckFailed);
                }
            };
            match audit::verify_ledger(&store)? {
                audit::LedgerCheck::Intact { entries, uncovered } => println!(
                    "ledger intact: {entries} entries, each as its commit record recorded it{}",
                    if uncovered > 0 {
                        format!(" ({uncovered} committed before ledger hashes are not covered)")
                    } else {
                        String::new()
                    }
                ),
                audit::LedgerCheck::Broken { entry, problem } => {
                    println!("ledger BROKEN at entry {entry}: {problem}");
                    return Ok(Exit::CheckFailed);
                }
            }
            Ok(if verify_anchors(&settings, &store, records)? {
                Exit::Ok
            } else {
                Exit::CheckFailed
            })
        }
        Command::Audit {
            command: AuditCommand::Trace { config, id },
        } => {
            let store = open_ro(&config)?;
            let Some(key) = audit::key_of(&store, &id)? else {
                // A rejected scan has no content key: show its own record.
                let records = audit::records_for_scan(&store, &id)?;
                if records.is_empty() {
                    println!("no decision about {id} in the audit trail");
                    return Ok(Exit::CheckFailed);
                }
                for r in records {
                    println!(
                        "{}  {}  captured {}  scanner {}  audit #{}{}",
                        r.decision,
                        r.scan_uuid,
                        r.captured_at,
                        r.scanner,
                        r.seq,
                        r.reason
                            .map(|x| format!("  reason: {x}"))
                            .unwrap_or_default()
                    );
                }
                return Ok(Exit::Ok);
            };
            let trail = audit::trail_for_key(&store, &key)?;
            if trail.records.is_empty() && trail.unrecorded.is_empty() {
                println!("no decision about {id} in the audit trail");
                return Ok(Exit::CheckFailed);
            }
            let (text, complete) = audit::render_trace(&key, &trail);
            print!("{text}");
            Ok(if complete {
                Exit::Ok
            } else {
                Exit::CheckFailed
            })
        }
        Command::Status { config, json } => {
            let cfg = load(&config)?;
            let st = crate::status::gather(&cfg, chrono::Utc::now().timestamp_millis())?;
            if json {
                println!("{}", serde_json::to_string(&st).expect("status serialises"));
            } else {
                print!("{}", crate::status::render(&st));
            }
            Ok(if st.healthy {
                Exit::Ok
            } else {
                Exit::CheckFailed
            })
        }
        Command::Outbox {
            command: OutboxCommand::Status { config, json },
        } => {
            let cfg = load(&config)?;
            let store = Store::open_read_only(&cfg.state_dir())?;
            let mut st = store.outbox_status()?;
            if cfg.redis.is_none() {
                // Left by an earlier run with [redis].
                st.facility = None;
                st.scanner_clones.clear();
                st.facility_clock = None;
                st.waiting_for_clock = 0;
                st.reconciliation = None;
            }
            if json {
                println!("{}", serde_json::to_string(&st).expect("status serialises"));
            } else {
                println!(
                    "pending {}  unresolved {}  committed {}  suppressed {}  rejected {}",
                    st.pending, st.unresolved, st.committed, st.suppressed, st.rejected
                );
                match st.oldest_open_ms {
                    Some(ms) => {
                        let age = chrono::Utc::now().timestamp_millis() - ms;
                        println!(
                            "oldest undecided scan: captured {} ({:.1} s ago)",
                            crate::capture::clock::rfc3339_ms(ms),
                            age as f64 / 1000.0
                        );
                    }
                    None => println!("no undecided scans"),
                }
                if let Some(f) = &st.facility {
                    let since = crate::capture::clock::rfc3339_ms(f.since_ms);
                    match &f.reason {
                        None => println!(
                            "facility store, as the claimer last saw it: answering since {since}"
                        ),
                        Some(why) => println!(
                            "facility store, as the claimer last saw it: NOT answering since {since}: {why}"
                        ),
                    }
                }
                if let Some(c) = &st.facility_clock {
                    let side = if c.offset_ms < 0.0 {
                        "ahead of"
                    } else {
                        "behind"
                    };
                    println!(
                        "facility clock, as the claimer last measured it ({}): this gateway's wall clock is {:.3} s {side} the facility Redis's (± {:.1} ms)",
                        crate::capture::clock::rfc3339_ms(c.at_ms),
                        c.offset_ms.abs() / 1e3,
                        c.bound_ms
                    );
                }
                if st.waiting_for_clock > 0 {
                    println!(
                        "{} scans wait for the facility clock: their capture times cannot be put on it within [redis] max_clock_error_ms yet; they are claimed once the claimer has measured it closer (at its next connect)",
                        st.waiting_for_clock
                    );
                }
                if let Some(r) = &st.reconciliation {
                    println!(
                        "last reconciliation {}: the facility store had lost data (this gateway's commit {} was missing); re-published {} of this gateway's commits in {} ms, {} conflict(s)",
                        crate::capture::clock::rfc3339_ms(r.at_ms),
                        r.lost_marker,
                        r.republished,
                        r.took_ms,
                        r.conflicts
                    );
                }
                for c in &st.conflicts {
                    println!(
                        "CONFLICT: scan {} (this gateway) and scan {} ({}) were both committed as picks of one label while the facility store had lost data ({}): the facility ledger keeps one entry, both gateways' ledgers have theirs. Check which is right and correct the ledger by hand; `scangate audit trace {}` shows it",
                        c.scan_uuid,
                        c.other_scan_uuid,
                        c.other_gateway.as_deref().map_or_else(
                            || "another gateway".to_string(),
                            |g| format!("gateway {g}")
                        ),
                        crate::capture::clock::rfc3339_ms(c.at_ms),
                        c.scan_uuid
                    );
                }
                for c in &st.scanner_clones {
                    println!(
                        "WARNING: scanner {:?} of this gateway ({}) has the name of a scanner of gateway {:?}: rename one, or, if it is one scanner heard by both, set shared = true in its [[scanner]] on both",
                        c.scanner, cfg.gateway.id, c.other_gateway
                    );
                }
            }
            Ok(Exit::Ok)
        }
        Command::State {
            command: StateCommand::Reset { config, confirm },
        } => {
            use crate::store::identity::{self, Reset};
            let cfg = load(&config)?;
            let dir = cfg.state_dir();
            match identity::reset(&dir, &confirm, &cfg.gateway.id)? {
                Reset::Done {
                    new_id,
                    lost_id,
                    moved_aside,
                } => {
                    println!(
                        "state reset: state {lost_id} is gone; new state {new_id} in {}, with an empty ledger; its audit chain starts with the reset (record 1)",
                        dir.display()
                    );
                    for p in moved_aside {
                        println!("moved aside (not deleted): {}", p.display());
                    }
                    Ok(Exit::Ok)
                }
                Reset::Intact { id } => Err(Failure::Usage(format!(
                    "nothing to reset: the database in {} is there and is this state's own (state {}). A reset is only for a state that lost its database",
                    dir.display(),
                    id.as_deref().unwrap_or("without an identity yet")
                ))),
                Reset::WrongConfirm { expected } => Err(Failure::Usage(format!(
                    "--confirm {confirm:?} does not name the lost state of {}: type `--confirm {expected}` to reset it (its ledger and audit trail are then abandoned)",
                    dir.display()
                ))),
            }
        }
        Command::Outbox {
            command: OutboxCommand::DecideLocally(arg),
        } => {
            let cfg = load(&arg)?;
            if cfg.redis.is_some() {
                return Err(Failure::Usage("this gateway has a [redis] section: its unresolved scans are replayed through the facility store when it answers. Fix: remove [redis] first if that store is gone for good".into()));
            }
            let mut store = Store::open(&cfg.state_dir())?;
            let handed = store.reopen_unresolved()?;
            let mut gate =
                crate::gate::Gate::new(crate::gate::GateConfig::from_config(&cfg), &store)?;
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
            use crate::outbox::ScanState;
            println!(
                "{handed} unresolved scans handed to this gateway's own store; decided {}: committed {}, suppressed {}, rejected {}",
                decided.len(),
                count(ScanState::Committed),
                count(ScanState::Suppressed),
                count(ScanState::Rejected)
            );
            Ok(Exit::Ok)
        }
    }
}

/// `audit verify`: compare the chain (intact, `records` long) with every
/// head anchored outside the database that can be reached: the state-id
/// file and, with `[redis]`, the facility store. Prints one line each;
/// false if one shows a lost tail or cannot be reached.
fn verify_anchors(settings: &Settings, store: &Store, records: i64) -> Result<bool, Failure> {
    use crate::store::identity::{self, Head};
    let cfg = &settings.config;
    let dir = cfg.state_dir();
    let state_id = store.state_id()?;
    let mut ok = true;
    let mut compare = |by: &str, head: Option<Head>| -> Result<(), Failure> {
        match head {
            None => println!("{by}: no chain head anchored"),
            Some(h) => match audit::check_anchor(store, records, by, &h)? {
                None => println!("{by}: anchored {h}, in the database"),
                Some(problem) => {
                    ok = false;
                    println!("audit chain TAIL LOST: {problem}");
                }
            },
        }
        Ok(())
    };
    let file = identity::read(&dir)?;
    compare(
        &format!(
            "the state-id file {}",
            dir.join(identity::ID_FILE).display()
        ),
        file.and_then(|f| f.head),
    )?;
    if let Some(redis) = &settings.redis {
        let by = format!("the facility store (gateway {})", cfg.gateway.id);
        let anchor = redis.primary_url().and_then(|url| {
            crate::facility::Facility::connect_with_ca(
                &url,
                redis.ca_pem.clone(),
                &cfg.gateway.facility,
                cfg.window_ms(),
                std::time::Duration::ZERO,
                redis.config.connect_timeout(),
                redis.config.command_timeout(),
            )?
            .anchor(&cfg.gateway.id)
        });
        match anchor {
            Err(e) => {
                ok = false;
                println!(
                    "{by}: NOT reachable ({e}): the chain's tail is not checked against it. Reach that server and verify again"
                );
            }
            Ok(Some((id, _, _))) if Some(&id) != state_id.as_ref() => {
                println!("{by}: its anchor is of another state ({id}), not compared");
            }
            Ok(Some((_, seq, hash))) => compare(&by, Some(Head { seq, hash }))?,
            Ok(None) => compare(&by, None)?,
        }
    }
    Ok(ok)
}

/// `ledger export` could not read the facility stream.
fn ledger_unreadable(e: crate::facility::FacilityError) -> Failure {
    Failure::Runtime(format!(
        "{e}. With [redis] set, the ledger is the facility's stream: reach that server (is it running, is [redis] url right?) and export again"
    ))
}

/// Write `value` as one JSON line.
fn write_line(out: &mut impl std::io::Write, value: &impl serde::Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value).map_err(std::io::Error::other)?;
    out.write_all(b"\n")
}

/// Handle SIGTERM and SIGINT from now on; the future completes on the
/// first of them. Call inside the runtime.
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>, Failure> {
    use tokio::signal::unix::{SignalKind, signal};
    let handler = |kind: SignalKind, name: &str| {
        signal(kind).map_err(|e| Failure::Runtime(format!("cannot handle {name}: {e}")))
    };
    let mut term = handler(SignalKind::terminate(), "SIGTERM")?;
    let mut int = handler(SignalKind::interrupt(), "SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
