//! A `[[scanner]]` entry's keys every scanner has ([`Scanner`]); each
//! kind's own keys are in `hid/config.rs` and `serial/config.rs`. A leaf:
//! `crate::config` assembles these sections.

use super::hid::config::{HidConfig, HidMode};
use super::serial::config::SerialConfig;
use crate::capture::{Profile, ScanType, Unserialised};
use crate::model::Check;
use serde::Deserialize;
use std::path::PathBuf;

/// One `[[scanner]]` entry: the keys every scanner has, and in `kind` the
/// keys of its kind ([`crate::config::ScannerConfig`]). A source takes the entry with its
/// own kind's config: `Scanner<SerialConfig>`, `Scanner<HidConfig>`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scanner<K> {
    /// Stable scanner name (letters, digits, `-`, `_`); part of the content key.
    pub name: String,
    /// What a read from this scanner means.
    pub scan_type: ScanType,
    /// Units per read.
    #[serde(default = "default_quantity")]
    pub quantity: u32,
    /// Longest accepted frame (HID: scan data) in bytes; longer frames are
    /// rejected and audited.
    #[serde(default = "default_max_frame_bytes")]
    pub max_frame_bytes: usize,
    /// Heard by several gateways of the facility (the same name on each, a
    /// roaming or shared scanner): its reads are judged facility-wide, so
    /// an echo heard by another gateway is suppressed. Off (the default),
    /// the scanner belongs to this gateway: its content keys carry the
    /// gateway id, so a scanner of another gateway with the same name (a
    /// cloned config) never suppresses its picks.
    #[serde(default)]
    pub shared: bool,
    /// How reads of a label without a serial are judged (`window`, the
    /// default; `double-fire`; `ask`): see [`Unserialised`].
    #[serde(default)]
    pub unserialised: UnserialisedPolicy,
    /// `unserialised = "double-fire"`: the short window (ms), default 300.
    #[serde(default = "default_double_fire_ms")]
    pub double_fire_ms: u32,
    /// What the scanner (and the gateway's LED) is told of each decision
    /// ([`crate::feedback`]); off unless set.
    #[serde(default)]
    pub feedback: Option<crate::feedback::FeedbackConfig>,
    /// The checks at the counter its reads get (`expiry`, `recall`,
    /// `unknown`); unset: those of its scan type
    /// ([`Check::defaults_for`]).
    #[serde(default)]
    pub checks: Option<Vec<Check>>,
    /// The gateway a scanner that is not `shared` belongs to (part of its
    /// content keys); set where the daemon starts the source
    /// ([`Scanner::owned_by`]).
    #[serde(skip)]
    pub owner: Option<String>,
    /// `kind` and its keys (read by [`crate::config::Config::parse`], not by
    /// this derive).
    #[serde(skip)]
    pub kind: K,
}

impl<K> Scanner<K> {
    /// What this scanner contributes to every scan it reads.
    pub fn profile(&self) -> Profile {
        Profile {
            scanner: self.name.clone(),
            scan_type: self.scan_type,
            quantity: self.quantity,
            owner: self.owner.clone(),
            unserialised: match self.unserialised {
                UnserialisedPolicy::Window => Unserialised::Window,
                UnserialisedPolicy::DoubleFire => Unserialised::DoubleFire {
                    ms: self.double_fire_ms,
                },
                UnserialisedPolicy::Ask => Unserialised::Ask,
            },
        }
    }

    /// This entry as a scanner of gateway `gateway`: its owner, unless it
    /// is `shared`.
    pub fn owned_by(mut self, gateway: &str) -> Scanner<K> {
        self.owner = (!self.shared).then(|| gateway.to_string());
        self
    }

    /// The same entry with `kind` as its kind's config.
    pub fn with_kind<L>(&self, kind: L) -> Scanner<L> {
        Scanner {
            name: self.name.clone(),
            scan_type: self.scan_type,
            quantity: self.quantity,
            max_frame_bytes: self.max_frame_bytes,
            shared: self.shared,
            unserialised: self.unserialised,
            double_fire_ms: self.double_fire_ms,
            feedback: self.feedback.clone(),
            checks: self.checks.clone(),
            owner: self.owner.clone(),
            kind,
        }
    }
}

impl Scanner<()> {
    /// `name` reading `scan_type`, every optional common key at its default.
    fn common(name: &str, scan_type: ScanType) -> Scanner<()> {
        Scanner {
            name: name.into(),
            scan_type,
            quantity: default_quantity(),
            max_frame_bytes: default_max_frame_bytes(),
            shared: false,
            unserialised: UnserialisedPolicy::default(),
            double_fire_ms: default_double_fire_ms(),
            feedback: None,
            checks: None,
            owner: None,
            kind: (),
        }
    }
}

impl Scanner<SerialConfig> {
    /// A serial scanner with every optional key at its default (8N1, 9600
    /// baud, CR/LF/CRLF framing, no ACK, one unit per read).
    pub fn serial(
        name: &str,
        path: impl Into<PathBuf>,
        scan_type: ScanType,
    ) -> Scanner<SerialConfig> {
        Scanner::common(name, scan_type).with_kind(SerialConfig::new(path))
    }
}

impl Scanner<HidConfig> {
    /// A HID scanner in `mode` with every optional key at its default and
    /// no match keys (set `vendor_id` etc. or `path`).
    pub fn hid(name: &str, mode: HidMode, scan_type: ScanType) -> Scanner<HidConfig> {
        Scanner::common(name, scan_type).with_kind(HidConfig::new(mode))
    }
}

/// `unserialised` as the config names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnserialisedPolicy {
    /// [`Unserialised::Window`].
    #[default]
    Window,
    /// [`Unserialised::DoubleFire`], with `double_fire_ms`.
    DoubleFire,
    /// [`Unserialised::Ask`].
    Ask,
}

/// `double_fire_ms` unless set: a trigger's second decode of one label
/// comes within ~100–250 ms; a person scanning a second item needs more.
fn default_double_fire_ms() -> u32 {
    300
}

/// One unit per read, unless `quantity` says otherwise.
fn default_quantity() -> u32 {
    1
}
/// `max_frame_bytes` unless set.
pub fn default_max_frame_bytes() -> usize {
    4096
}
