//! The `scangate` command line: parse the arguments, run the command, and
//! turn its outcome into an exit code ([`crate::exit::Exit`], whose
//! meanings are listed once, there; which error gets which code is decided
//! in `Failure::exit`).

use crate::audit::archive::{self, ArchiveError};
use crate::audit::{self, Verification};
use crate::config::{Config, ConfigError, Settings};
use crate::daemon::DaemonError;
use crate::exit::Exit;
use crate::model::ScanState;
use crate::store::{Store, StoreError};
use args::{AuditCommand, Cli, Command, ConfigArg, LedgerCommand, OutboxCommand, StateCommand};
use clap::{CommandFactory, FromArgMatches};
use std::path::PathBuf;
use std::process::ExitCode;

/// `scangate --version`: the version, the commit it was built from and
/// the target triple (from `build.rs`, as `scangate_build_info` has them).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SCANGATE_COMMIT"),
    ", target ",
    env!("SCANGATE_TARGET"),
    ")"
);

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
    /// The facility Redis refuses this gateway or is set up so claims
    /// could be lost (`check-config --online`).
    Facility(crate::facility::FacilityError),
    /// An audit archive: unreadable, not intact, or refused.
    Archive(ArchiveError),
}

impl From<ArchiveError> for Failure {
    fn from(e: ArchiveError) -> Self {
        match e {
            ArchiveError::Store(e) => Failure::Store(e),
            e => Failure::Archive(e),
        }
    }
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
            Failure::Config(_) | Failure::Usage(_) | Failure::Facility(_) => Exit::Config,
            Failure::Store(e) | Failure::Daemon(DaemonError::Store(e)) => store(e),
            Failure::Daemon(DaemonError::CorruptWhileRunning { .. }) => Exit::State,
            // The facility Redis is set up so claims could be lost, or
            // refuses this gateway: a technician's fix, like a config error.
            Failure::Daemon(DaemonError::Facility(_)) => Exit::Config,
            // Another process holds the port: the technician picks another.
            Failure::Daemon(DaemonError::MetricsListen(_)) => Exit::Config,
            Failure::Daemon(_) | Failure::Runtime(_) => Exit::Runtime,
            Failure::Archive(ArchiveError::Broken { .. }) => Exit::CheckFailed,
            Failure::Archive(ArchiveError::Refused(_)) => Exit::Config,
            Failure::Archive(ArchiveError::Store(e)) => store(e),
            Failure::Archive(ArchiveError::Io { .. }) => Exit::Runtime,
        }
    }

    /// What to print.
    fn message(&self) -> String {
        match self {
            Failure::Config(e) => format!("configuration error: {e}"),
            Failure::Store(e) => e.to_string(),
            Failure::Daemon(e) => e.to_string(),
            Failure::Facility(e) => e.to_string(),
            Failure::Usage(m) | Failure::Runtime(m) => m.clone(),
            Failure::Archive(e) => e.to_string(),
        }
    }
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    // (`--version` names the commit and target, which `build.rs` knows
    // only for the binary, not for the man page it generates.)
    let cli = Cli::from_arg_matches(&Cli::command().version(VERSION).get_matches())
        .unwrap_or_else(|e| e.exit());
    // The demo and the benchmark print their own report (the demo's rejects
    // in its table); keep the log quiet.
    let quiet = matches!(cli.command, Command::Demo { .. } | Command::Bench(_));
    crate::logging::init(
        cli.log_format,
        if quiet {
            "warn,scangate::reject=error"
        } else {
            "info"
        },
    );
    // Read before the command runs (it may create what is looked for).
    let no_config_file = cli.command.config().is_some_and(|c| c.path().is_none());
    match dispatch(cli.command) {
        Ok(exit) => exit.into(),
        Err(f) => {
            eprintln!("scangate: {}", f.message());
            if no_config_file && matches!(f, Failure::Store(_) | Failure::Daemon(_)) {
                // The state directory came from the defaults: the likelier
                // fix is the config that was not found.
                eprintln!(
                    "scangate: note: no config file was read (no --config, no SCANGATE_CONFIG, nothing at {}), so the state directory is the default one ($STATE_DIRECTORY, else ./scangate-state in the current directory). If this gateway's config is elsewhere, name it with --config",
                    crate::config::DEFAULT_PATH
                );
            }
            f.exit().into()
        }
    }
}

impl Command {
    /// The command's config argument, if it reads a config file.
    fn config(&self) -> Option<&ConfigArg> {
        match self {
            Command::Run(c)
            | Command::CheckConfig { config: c, .. }
            | Command::Status { config: c, .. }
            | Command::Ledger {
                command: LedgerCommand::Export { config: c, .. },
            }
            | Command::Audit {
                command:
                    AuditCommand::Verify { config: c, .. }
                    | AuditCommand::Export { config: c, .. }
                    | AuditCommand::Prune { config: c, .. }
                    | AuditCommand::Trace { config: c, .. },
            }
            | Command::Outbox {
                command: OutboxCommand::Status { config: c, .. } | OutboxCommand::DecideLocally(c),
            }
            | Command::State {
                command: StateCommand::Reset { config: c, .. },
            } => Some(c),
            Command::Demo { .. }
            | Command::Bench(_)
            | Command::Decode(_)
            | Command::Devices(_)
            | Command::Pair(_) => None,
        }
    }
}

impl ConfigArg {
    /// The file every command reads ([`crate::config::locate`]).
    fn path(&self) -> Option<PathBuf> {
        crate::config::locate(
            self.config.as_deref(),
            &[std::path::Path::new(crate::config::DEFAULT_PATH)],
        )
    }
}

fn load(arg: &ConfigArg) -> Result<Config, Failure> {
    Ok(Config::load(arg.path().as_deref())?)
}

/// [`load`], and read the secrets and files it names (`[redis]`
/// password, CA): what `run` works with.
fn resolve(arg: &ConfigArg) -> Result<Settings, Failure> {
    Ok(Settings::load(arg.path().as_deref())?)
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
                // SIGHUP (`systemctl reload`) reloads; it never kills.
                let reloads = crate::daemon::Reloads {
                    config: arg.config.clone(),
                    requests: reload_signal()?,
                };
                crate::daemon::run_with(settings, shutdown, Some(reloads)).await?;
                Ok(Exit::Ok)
            })
        }
        Command::CheckConfig {
            config: arg,
            online,
        } => {
            // Resolved as `run` resolves it: an unreadable secret fails here too.
            let settings = resolve(&arg)?;
            let cfg = &settings.config;
            match arg.path() {
                Some(p) => println!("config file: {}", p.display()),
                None => println!(
                    "config file: none (no --config, no SCANGATE_CONFIG, no {}): built-in defaults",
                    crate::config::DEFAULT_PATH
                ),
            }
            println!(
                "configuration OK: facility {}, gateway {}, {} scanner(s), window {} ms, state in {}",
                cfg.gateway.facility,
                cfg.gateway.id,
                cfg.scanners.len(),
                cfg.dedup.window_ms,
                cfg.state_dir().display()
            );
            for line in crate::check_config::state_dir(&cfg.state_dir())? {
                println!("{line}");
            }
            Ok(match online {
                true => check_online(&settings)?,
                false => Exit::Ok,
            })
        }
        Command::Demo { redis } => runtime()?
            .block_on(crate::demo::run(redis))
            .map_err(|e| Failure::Runtime(format!("demo failed: {e}"))),
        Command::Bench(args) => {
            crate::bench::run(&args).map_err(|e| Failure::Runtime(format!("bench failed: {e}")))
        }
        Command::Ledger {
            command:
                LedgerCommand::Export {
                    config,
                    since,
                    follow,
                    group,
                    consumer,
                    claim_idle_secs,
                },
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
                    let connect = || {
                        let (f, w, r) = cfg.facility_terms();
                        crate::facility::connect(redis, f, w, r)
                    };
                    let mut facility = connect().map_err(ledger_unreadable)?;
                    match group.filter(|_| follow) {
                        Some(group) => {
                            let consumer = consumer.unwrap_or_else(|| cfg.gateway.id.clone());
                            for (flag, name) in [("--group", &group), ("--consumer", &consumer)] {
                                if name.is_empty() || name.contains(char::is_whitespace) {
                                    return Err(Failure::Usage(format!(
                                        "{flag} {name:?} is not a name: use letters, digits, '-', '_' or '.'"
                                    )));
                                }
                            }
                            let block_ms = (redis.config.command_timeout_ms / 2).max(5);
                            crate::facility::stream::follow_reconnecting(
                                facility,
                                connect,
                                &group,
                                &consumer,
                                block_ms,
                                (claim_idle_secs > 0)
                                    .then(|| std::time::Duration::from_secs(claim_idle_secs)),
                                |page| {
                                    use std::io::Write;
                                    for (_, v) in page {
                                        write_line(&mut out, v)?;
                                    }
                                    out.flush()
                                },
                            );
                        }
                        None => facility
                            .for_each_ledger_entry(since_ms, |v| write_line(&mut out, &v))
                            .map_err(ledger_unreadable)?,
                    }
                }
                None if follow => {
                    return Err(Failure::Usage(
                        "--follow reads the facility ledger stream, and this gateway has no [redis] section: its ledger is the embedded one (export it without --follow)".into(),
                    ));
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
            command: AuditCommand::Verify { config, archive },
        } => audit_verify(&config, &archive),
        Command::Audit {
            command: AuditCommand::Export { config, until, out },
        } => {
            let until_ms = parse_time(&until, "--until")?;
            let cfg = load(&config)?;
            let store = Store::open_read_only(&cfg.state_dir())?;
            let m = archive::export(&store, until_ms, &out, &cfg.gateway.id)?;
            println!(
                "archived records {}..={} ({} records, {} ledger entries; decided {} to {}) to {}, content sha256 {}",
                m.first_seq,
                m.last_seq,
                m.records,
                m.ledger_entries,
                m.first_at,
                m.last_at,
                out.display(),
                m.content_sha256
            );
            println!(
                "keep it (copy it off the gateway); `scangate audit prune --archive {}` may then remove these records from the database once they are older than [records] keep_days ({} days)",
                out.display(),
                cfg.records.keep_days
            );
            Ok(Exit::Ok)
        }
        Command::Audit {
            command: AuditCommand::Prune { config, archive },
        } => audit_prune(&config, &archive),
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
            let counts = store.outbox_status()?;
            let mut known = crate::daemon::claimer::records::read(&store)?;
            if cfg.redis.is_none() {
                // Left by an earlier run with [redis].
                known = crate::daemon::claimer::records::FacilityRecords {
                    conflicts: known.conflicts,
                    ..Default::default()
                };
            }
            let dir = cfg.state_dir();
            let space = store.space(&dir, chrono::Utc::now().timestamp_millis())?;
            let floor = crate::store::space::Floor::new(&dir, cfg.outbox.min_free_mb);
            let disk = Some(crate::outbox::DiskStatus {
                below_floor: floor.judge(space.free_bytes).is_err(),
                min_free_bytes: floor.bytes(),
                warning: crate::store::space::days_left_warning(
                    &dir,
                    &space,
                    cfg.outbox.warn_days_left,
                ),
                state_dir: dir,
                space,
            });
            let st = OutboxReport {
                counts,
                known,
                disk,
            };
            if json {
                println!("{}", serde_json::to_string(&st).expect("status serialises"));
            } else {
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
                            crate::capture::clock::rfc3339_ms(ms),
                            age as f64 / 1000.0
                        );
                    }
                    None => println!("no undecided scans"),
                }
                if let Some(d) = &st.disk {
                    println!(
                        "disk: {} in {}",
                        crate::status::render_space(&d.space, d.min_free_bytes),
                        d.state_dir.display()
                    );
                    if let Some(w) = &d.warning {
                        println!("WARNING: {w}");
                    }
                }
                if let Some(f) = &st.known.facility {
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
                if let Some(c) = &st.known.facility_clock {
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
                if st.known.waiting_for_clock > 0 {
                    println!(
                        "{} scans wait for the facility clock: their capture times cannot be put on it within [redis] max_clock_error_ms yet; they are claimed once the claimer has measured it closer (at its next connect)",
                        st.known.waiting_for_clock
                    );
                }
                if let Some(r) = &st.known.reconciliation {
                    println!(
                        "last reconciliation {}: the facility store had lost data (this gateway's commit {} was missing); re-published {} of this gateway's commits in {} ms, {} conflict(s)",
                        crate::capture::clock::rfc3339_ms(r.at_ms),
                        r.lost_marker,
                        r.republished,
                        r.took_ms,
                        r.conflicts
                    );
                }
                for c in &st.known.conflicts {
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
                for c in &st.known.scanner_clones {
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
            use crate::audit::reset::{Reset, reset};
            let cfg = load(&config)?;
            let dir = cfg.state_dir();
            match reset(&dir, &confirm, &cfg.gateway.id)? {
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

/// `check-config --online`: the facility Redis (a refusal is an error,
/// exit 2; unreachable: exit 1) and the scanners' device paths (exit 1 if
/// one is not usable), each on a line of its own.
fn check_online(settings: &Settings) -> Result<Exit, Failure> {
    let cfg = &settings.config;
    let mut ok = true;
    if let Some(redis) = &settings.redis {
        match crate::check_config::facility(cfg, redis) {
            Err(e) if e.needs_technician() => return Err(Failure::Facility(e)),
            Err(e) => {
                ok = false;
                println!(
                    "facility Redis NOT reachable: {e}. Fix: check that it runs and [redis] url (or sentinels), and the network between"
                );
            }
            Ok(found) => {
                let i = &found.info;
                println!(
                    "facility Redis {}: OK, Redis {} ({}), user {:?} accepted, maxmemory-policy {}, appendonly {}, save {:?}, {} replica(s) connected",
                    found.server,
                    i.version,
                    i.role,
                    redis.config.username.as_deref().unwrap_or("default"),
                    i.maxmemory_policy,
                    i.appendonly,
                    i.save,
                    i.connected_replicas
                );
                if i.appendonly != "yes" {
                    println!(
                        "WARNING: facility Redis has appendonly off: a Redis crash can lose recent claims. Fix: `appendonly yes` in redis.conf"
                    );
                }
                if i.role == "slave" {
                    println!(
                        "WARNING: facility Redis is a read-only replica: it refuses claims. Fix: point [redis] url at the primary"
                    );
                }
                let c = &found.clock;
                let side = if c.offset_ms < 0.0 {
                    "ahead of"
                } else {
                    "behind"
                };
                println!(
                    "clock offset: this gateway's wall clock is {:.3} s {side} the facility Redis's (± {:.1} ms)",
                    c.offset_ms.abs() / 1e3,
                    c.bound_ms
                );
                let max = redis.config.max_clock_error_ms as f64;
                if c.bound_ms > max {
                    ok = false;
                    println!(
                        "clock NOT measurable within [redis] max_clock_error_ms ({max} ms): the round trip alone allows ± {:.1} ms, so scans would wait. Fix: a faster network path to the Redis, or raise max_clock_error_ms (at most a quarter of [dedup] window_ms)",
                        c.bound_ms
                    );
                }
            }
        }
    }
    for p in crate::check_config::scanner_paths(cfg) {
        use crate::check_config::PathFound;
        match &p.found {
            PathFound::Usable => println!("scanner {}: {} OK", p.scanner, p.path.display()),
            PathFound::Matched => println!(
                "scanner {}: found by its match keys when it runs, no path to check (`scangate devices` lists what is attached)",
                p.scanner
            ),
            PathFound::Unusable(problem) => {
                ok = false;
                println!(
                    "scanner {}: {} NOT usable: {problem}",
                    p.scanner,
                    p.path.display()
                );
            }
        }
    }
    Ok(if ok { Exit::Ok } else { Exit::CheckFailed })
}

/// `--until` and the like: RFC 3339, or a date (midnight UTC).
fn parse_time(text: &str, what: &str) -> Result<i64, Failure> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(t.timestamp_millis());
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map(|d| d.and_time(chrono::NaiveTime::MIN).and_utc().timestamp_millis())
        .map_err(|_| {
            Failure::Usage(format!(
                "{what} {text:?} is neither a date (YYYY-MM-DD, midnight UTC) nor an RFC 3339 time; use e.g. 2025-01-01 or 2025-01-01T00:00:00Z"
            ))
        })
}

/// `audit verify [--archive FILE…]`.
fn audit_verify(config: &ConfigArg, archives: &[PathBuf]) -> Result<Exit, Failure> {
    let settings = resolve(config)?;
    let dir = settings.config.state_dir();
    // Archives verify on their own: no database is needed for them.
    let store = match Store::open_read_only(&dir) {
        Ok(store) => Some(store),
        Err(StoreError::StateDir { .. })
            if !archives.is_empty() && !dir.join(crate::store::DB_FILE).exists() =>
        {
            None
        }
        Err(e) => return Err(e.into()),
    };
    let mut records = 0;
    let mut first = None;
    if let Some(store) = &store {
        Store::check_pages(store.path())?;
        match audit::verify(store)? {
            Verification::Intact { records: r, head } => {
                first = audit::first_live(store)?;
                let from = first.as_ref().map_or(1, |f| f.0);
                println!(
                    "audit chain intact: {} records{}, head {head}",
                    r - from + 1,
                    if from > 1 {
                        format!(
                            " ({from}..={r}; 1..={} pruned, named by a checkpoint record)",
                            from - 1
                        )
                    } else {
                        String::new()
                    }
                );
                records = r;
            }
            Verification::Broken { seq, problem } => {
                println!("audit chain BROKEN at record {seq}: {problem}");
                return Ok(Exit::CheckFailed);
            }
        }
    }
    let want: Vec<i64> = first.iter().map(|f| f.0 - 1).filter(|b| *b > 0).collect();
    let mut checked = Vec::new();
    let mut ok = true;
    for path in archives {
        match archive::verify_file(path, &want) {
            Ok(c) => {
                let m = &c.manifest;
                println!(
                    "archive {}: intact: records {}..={} ({} records, {} ledger entries{}; decided {} to {}), content sha256 {}",
                    path.display(),
                    m.first_seq,
                    m.last_seq,
                    m.records,
                    m.ledger_entries,
                    if c.uncovered > 0 {
                        format!(
                            ", {} committed before ledger hashes not covered",
                            c.uncovered
                        )
                    } else {
                        String::new()
                    },
                    m.first_at,
                    m.last_at,
                    m.content_sha256
                );
                checked.push((path.clone(), c));
            }
            Err(e @ ArchiveError::Broken { .. }) => {
                ok = false;
                println!("{e}");
            }
            Err(e) => return Err(e.into()),
        }
    }
    if !ok {
        return Ok(Exit::CheckFailed);
    }
    if !archives.is_empty() || first.as_ref().is_some_and(|f| f.0 > 1) {
        let live = match (&store, &first) {
            (Some(s), Some((f, prev))) => Some((s, *f, prev.as_str())),
            _ => None,
        };
        let joined = archive::join(&checked, live)?;
        for line in &joined.lines {
            println!("{line}");
        }
        if !joined.intact {
            return Ok(Exit::CheckFailed);
        }
    }
    let Some(store) = store else {
        println!(
            "no database in {}: the archives were verified on their own",
            dir.display()
        );
        return Ok(Exit::Ok);
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

/// `audit prune [--archive FILE…]` (daemon stopped).
fn audit_prune(config: &ConfigArg, archives: &[PathBuf]) -> Result<Exit, Failure> {
    let settings = resolve(config)?;
    let cfg = &settings.config;
    let dir = cfg.state_dir();
    let mut store = Store::open(&dir)?;
    for path in archives {
        let m = archive::register(&mut store, path)?;
        println!(
            "archive {}: intact and matching the database; registered (records {}..={}, content sha256 {})",
            path.display(),
            m.first_seq,
            m.last_seq,
            m.content_sha256
        );
    }
    let facility_anchor = match &settings.redis {
        None => None,
        Some(_) => match facility_anchor(&settings) {
            Ok(Some((id, seq, hash))) if Some(&id) == store.state_id()?.as_ref() => {
                Some(Some(crate::store::identity::Head { seq, hash }))
            }
            Ok(_) => Some(None),
            Err(e) => {
                return Err(Failure::Runtime(format!(
                    "the facility store does not answer ({e}); nothing pruned: with [redis] only records anchored there are pruned. Reach that server and prune again"
                )));
            }
        },
    };
    let policy = archive::PrunePolicy {
        now_ms: chrono::Utc::now().timestamp_millis(),
        keep_days: cfg.records.keep_days,
        retention_hours: cfg.dedup.retention_hours,
        facility_anchor,
    };
    match archive::prune(&mut store, &policy)? {
        archive::Pruned::Done {
            first_seq,
            through_seq,
            ledger_entries,
            checkpoint,
        } => {
            audit::emit(&checkpoint);
            crate::store::identity::Anchor::new(&dir)?.tick()?;
            println!(
                "pruned records {first_seq}..={through_seq} and {ledger_entries} ledger entries from {}; checkpoint record {} names them and their archives (`scangate audit verify --archive FILE…` checks them)",
                store.path().display(),
                checkpoint.last().map_or(0, |c| c.seq)
            );
        }
        archive::Pruned::Nothing(why) => println!("nothing pruned: {why}"),
    }
    Ok(Exit::Ok)
}

/// The head anchored in the facility store for this gateway: (state, seq, hash).
fn facility_anchor(
    settings: &Settings,
) -> Result<Option<(String, i64, String)>, crate::facility::FacilityError> {
    let cfg = &settings.config;
    let Some(redis) = &settings.redis else {
        return Ok(None);
    };
    {
        let (f, w, r) = cfg.facility_terms();
        crate::facility::connect(redis, f, w, r)?
    }
    .anchor(&cfg.gateway.id)
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
    let first = audit::first_live(store)?.map_or(1, |f| f.0);
    let mut ok = true;
    let mut compare = |by: &str, head: Option<Head>| -> Result<(), Failure> {
        match head {
            None => println!("{by}: no chain head anchored"),
            Some(h) => match audit::check_anchor(store, records, by, &h)? {
                None if first > h.seq => println!(
                    "{by}: anchored {h}, since pruned (the checkpoint record names it; its archive holds it)"
                ),
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
    if settings.redis.is_some() {
        let by = format!("the facility store (gateway {})", cfg.gateway.id);
        match facility_anchor(settings) {
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
/// One message per SIGHUP, from now on (the default action, which would
/// end the process, is replaced at once).
fn reload_signal() -> Result<tokio::sync::mpsc::UnboundedReceiver<()>, Failure> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hup = signal(SignalKind::hangup())
        .map_err(|e| Failure::Runtime(format!("cannot handle SIGHUP: {e}")))?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            if tx.send(()).is_err() {
                break;
            }
        }
    });
    Ok(rx)
}

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

/// What `scangate outbox status` shows: the outbox's counts, what the
/// claimer last recorded of the facility store, and the disk.
#[derive(serde::Serialize)]
struct OutboxReport {
    #[serde(flatten)]
    counts: crate::outbox::OutboxStatus,
    #[serde(flatten)]
    known: crate::daemon::claimer::records::FacilityRecords,
    disk: Option<crate::outbox::DiskStatus>,
}
