//! The `scangate` commands: what each does once [`crate::cli`] has parsed
//! its arguments, one module a command or command group. A command returns
//! the exit code of its outcome ([`Exit::Ok`], or [`Exit::CheckFailed`]
//! when what it checks is not so) or a [`Failure`], whose exit code is
//! decided here, in [`Failure::exit`] (the codes and what they mean:
//! [`crate::exit`]).
//!
//! - [`run`](mod@run): `scangate run`, the daemon, stopped and reloaded by signals.
//! - [`check_config`]: `check-config [--online]`: the config, the state
//!   directory, the facility Redis and the scanners' paths.
//! - [`status`]: `status [--json]`: the gateway's health at one glance.
//! - [`outbox`]: `outbox status`, `outbox decide-locally`.
//! - [`ledger`]: `ledger export [--follow]`.
//! - [`audit`]: `audit verify`, `export`, `prune`, `trace`.
//! - [`state`]: `state reset`.
//! - [`products`](mod@products): `products import`, `products show`, `recalls import`.
//! - [`decode`]: `decode`: barcode text or raw HID reports, decoded as the daemon does.
//! - [`devices`]: `devices` lists scanners, `pair` pairs one.
//! - [`labels`]: `labels`: the REPEAT and QUANTITY control labels, printed.
//! - [`diag`]: `diag --out FILE`: what support needs, in one archive.
//! - [`demo`]: `demo`: a noisy shift on virtual serial scanners.
//! - [`bench`](mod@bench): `bench`: throughput and latency.

use crate::audit::archive::ArchiveError;
use crate::cli::args::ConfigArg;
use crate::config::{Config, ConfigError, RedisSettings, Settings};
use crate::daemon::DaemonError;
use crate::exit::Exit;
use crate::facility::{Facility, FacilityError};
use crate::store::StoreError;
use std::path::PathBuf;

pub mod audit;
pub mod bench;
pub mod check_config;
pub mod confirmation;
pub mod decode;
pub mod demo;
pub mod devices;
pub mod diag;
pub mod labels;
pub mod ledger;
pub mod outbox;
pub mod products;
pub mod run;
pub mod state;
pub mod status;
pub mod tap;
pub mod top;

/// Why a command failed; each message says what happened and what to do.
#[derive(Debug)]
pub enum Failure {
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
    Facility(FacilityError),
    /// An audit archive: unreadable, not intact, or refused.
    Archive(ArchiveError),
    /// Product or recall data: an input that is not as published, or its
    /// data file.
    Products(crate::products::ProductsError),
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
    pub fn exit(&self) -> Exit {
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
            Failure::Products(e) => {
                use crate::products::ProductsError as P;
                match e {
                    P::Read { .. } => Exit::Runtime,
                    P::Busy { .. } | P::File(_) | P::Sqlite { .. } | P::Io { .. } => Exit::State,
                    _ => Exit::Config,
                }
            }
        }
    }

    /// What to print.
    pub fn message(&self) -> String {
        match self {
            Failure::Config(e) => format!("configuration error: {e}"),
            Failure::Store(e) => e.to_string(),
            Failure::Daemon(e) => e.to_string(),
            Failure::Facility(e) => e.to_string(),
            Failure::Usage(m) | Failure::Runtime(m) => m.clone(),
            Failure::Archive(e) => e.to_string(),
            Failure::Products(e) => e.to_string(),
        }
    }
}

impl ConfigArg {
    /// The file every command reads ([`crate::config::locate`]).
    pub fn path(&self) -> Option<PathBuf> {
        crate::config::locate(
            self.config.as_deref(),
            &[std::path::Path::new(crate::config::DEFAULT_PATH)],
        )
    }
}

/// The configuration, parsed and validated.
fn load(arg: &ConfigArg) -> Result<Config, Failure> {
    Ok(Config::load(arg.path().as_deref())?)
}

/// [`load`], and read the secrets and files it names (`[redis]`
/// password, CA): what `run` works with.
fn resolve(arg: &ConfigArg) -> Result<Settings, Failure> {
    Ok(Settings::load(arg.path().as_deref())?)
}

/// The async runtime of the commands that need one (`run`, `demo`).
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("cannot start the async runtime: {e}")))
}

/// Connect to the facility Redis as the daemon does: `redis` (its
/// `[redis]` section, secrets read), for `cfg`'s facility, window and retention.
fn connect(cfg: &Config, redis: &RedisSettings) -> Result<Facility, FacilityError> {
    crate::facility::connect(
        redis,
        &cfg.gateway.facility,
        cfg.window().ms(),
        cfg.retention(),
    )
}
