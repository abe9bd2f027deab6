//! Configuration: the TOML file, its defaults, its validation, and the one
//! step that reads what it points to ([`Settings::resolve`]).
//!
//! Each component owns the keys it reads: the serial source
//! ([`SerialConfig`]), the HID source ([`HidConfig`], per `mode`
//! [`ModeConfig`]), the facility (`[redis]`, [`RedisConfig`]). This module
//! assembles them: `kind` (and, for HID, `mode`) picks the types of a
//! `[[scanner]]` entry ([`ScannerKind`]), and each type takes its own keys.
//!
//! Parsing and validation never touch hardware, so `scangate check-config`
//! can run on a technician's laptop; it also resolves the secrets, exactly as
//! `run` does (and checks the state directory, `src/cmd/check_config.rs`: on
//! a laptop, a `state_dir` it cannot create is exit 3). Unknown keys are rejected by serde (`deny_unknown_fields` on
//! every type) so a typo never silently falls back to a default. Every field
//! is documented in `config/scangate.toml`, which a test parses.
//!
//! Why not serde's `#[serde(tag = "kind")]`: an internally tagged enum
//! buffers the table before it reads the tag, and what serde then reports
//! (an unknown key, a value out of a type's range) has lost its place in the
//! text, so the message could no longer name `scanner[0].usb_port`. The tag
//! is read first instead ([`Config::parse`]), and each type deserializes
//! straight from the parsed TOML, spans intact.
//!
//! This file holds [`Config`] and [`ConfigError`]; the sections' own types
//! and defaults are in `sections.rs`, reading the TOML in `parse.rs`, the
//! checks of the values in `validate.rs`, [`Settings`] (the secrets
//! read) in `settings.rs`, and which of the files it names others may read
//! or change in [`exposure`].

use crate::invalid::Invalid;
use std::fmt;
use std::path::{Path, PathBuf};

mod carried;
pub(crate) mod exposure;
mod parse;
mod sections;
mod settings;
mod validate;

pub use crate::capture::ScanType;
pub use crate::facility::config::{RedisConfig, RedisSettings};
pub use crate::sink::config::{SinkConfig, SinkFormat, SinkSettings};
pub use crate::source::config::Scanner;
pub use crate::source::hid::config::{
    DEFAULT_HID_TIMEOUT_MS, GsKey, HidConfig, HidMode, KeyboardConfig, ModeConfig, PosConfig,
    TerminatorKey,
};
pub use crate::source::serial::config::{
    ByteString, FlowControl, MAX_AFFIX_BYTES, Parity, SerialConfig,
};
pub use carried::{Carried, OLD_KEYS, OldKey};
pub use sections::{
    ChecksConfig, DEFAULT_MAX_DATA_AGE_DAYS, DedupConfig, GatewayConfig, MIN_KEEP_DAYS,
    MetricsConfig, OutboxConfig, RecordsConfig, ScannerConfig, ScannerKind,
};
pub use settings::Settings;
pub use validate::{NAME_MAX_BYTES, STATE_DIR_MAX_BYTES, state_dir_problem};

/// Where a command looks for its config file when neither `--config` nor
/// `SCANGATE_CONFIG` names one ([`locate`]).
pub const DEFAULT_PATH: &str = "/etc/scangate/scangate.toml";

/// The config file a command reads, in this order: `given` (`--config`,
/// else `SCANGATE_CONFIG`: clap reads both into one argument), else the
/// first of `defaults` that exists (every command passes
/// `[DEFAULT_PATH]`), else none: the built-in defaults. The one place
/// that decides it; README ("The config in brief") documents the order.
pub fn locate(given: Option<&Path>, defaults: &[&Path]) -> Option<PathBuf> {
    given.map(Path::to_owned).or_else(|| {
        defaults
            .iter()
            .find(|p| p.exists())
            .map(|p| p.to_path_buf())
    })
}

/// The whole configuration file ([`Config::parse`] reads it).
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `[gateway]`: who this gateway is and where it keeps state.
    pub gateway: GatewayConfig,
    /// `[dedup]`: the echo window and how long exact knowledge is kept.
    pub dedup: DedupConfig,
    /// `[outbox]`: how long scans' raw bytes are kept.
    pub outbox: OutboxConfig,
    /// `[[scanner]]`: the scanners this gateway reads.
    pub scanners: Vec<ScannerConfig>,
    /// `[redis]`: the facility store; absent = embedded (the default).
    pub redis: Option<RedisConfig>,
    /// `[metrics]`: Prometheus metrics (textfile and/or `/metrics`); off by default.
    pub metrics: MetricsConfig,
    /// `[records]`: how long audit records and ledger entries stay in the
    /// database before `scangate audit prune` may remove archived ones.
    pub records: RecordsConfig,
    /// `[controls]`: the REPEAT and QUANTITY labels' contents and how long
    /// a control waits for its read; the defaults without the section.
    pub controls: crate::controls::ControlsConfig,
    /// `[[sink]]`: inventory systems the ledger is POSTed to; none by
    /// default.
    pub sinks: Vec<SinkConfig>,
    /// `[checks]`: the checks against product and recall data; the
    /// defaults without the section.
    pub checks: ChecksConfig,
    /// Keys of an earlier release found in the file and carried over
    /// (renamed or ignored): each is warned of ([`Carried::warning`]).
    pub carried: Vec<Carried>,
}

/// A configuration problem: which file, which key, what is wrong, how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The config file, if one was read.
    pub file: Option<PathBuf>,
    /// The offending key, e.g. `scanner[1].quantity`.
    pub key: String,
    /// What is wrong.
    pub problem: String,
    /// What to do about it.
    pub fix: String,
}

impl ConfigError {
    /// A component's refusal, its key already named from the file's top
    /// ([`Invalid::within`]).
    pub fn new(file: Option<&Path>, e: Invalid) -> ConfigError {
        ConfigError {
            file: file.map(Path::to_owned),
            key: e.key,
            problem: e.problem,
            fix: e.fix,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(p) => write!(f, "{}: ", p.display())?,
            None => write!(f, "built-in defaults: ")?,
        }
        // What the file held may be echoed (a parser's message quotes the
        // value, a key is named as written): cut to a readable length.
        use crate::invalid::cut_long;
        write!(
            f,
            "`{}`: {}. Fix: {}",
            cut_long(&self.key),
            cut_long(&self.problem),
            cut_long(&self.fix)
        )
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// The state directory: `[gateway] state_dir`, else `$STATE_DIRECTORY`
    /// (first entry), else `./scangate-state`.
    pub fn state_dir(&self) -> PathBuf {
        if let Some(dir) = &self.gateway.state_dir {
            return dir.clone();
        }
        if let Some(env) = std::env::var_os("STATE_DIRECTORY") {
            let env = env.to_string_lossy().into_owned();
            if let Some(first) = env.split(':').find(|s| !s.is_empty()) {
                return PathBuf::from(first);
            }
        }
        PathBuf::from("scangate-state")
    }

    /// The echo window (`[dedup] window_ms`).
    pub fn window(&self) -> crate::model::EchoWindow {
        crate::model::EchoWindow::from_ms(self.dedup.window_ms as i64)
    }

    /// `[dedup] retention_hours`: how long a commit is remembered.
    pub fn retention(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.dedup.retention_hours * 3600)
    }
}

#[cfg(test)]
mod tests;
