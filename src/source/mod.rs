//! Sources: one task per scanner turns device bytes into captured scans.
//!
//! A source frames the byte stream (serial: [`serial::framing`]; HID reports
//! carry their own), stamps each frame right
//! away (so the capture time is the read time) and hands it to the outbox
//! writer together with a [`DurableAck`]: the way back to the scanner for the
//! ACK that follows the durable write. ACK latency is kept per scanner in a
//! small histogram ([`latency`]) and logged.

pub mod hid;
pub mod latency;
pub mod serial;

use crate::capture::{Profile, Scan, ScanType};
use hid::config::{HidConfig, HidMode};
use serde::Deserialize;
use serial::config::SerialConfig;
use std::path::PathBuf;
use std::time::Instant;
use tokio::sync::mpsc;

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

fn default_quantity() -> u32 {
    1
}
pub(crate) fn default_max_frame_bytes() -> usize {
    4096
}

/// ACK byte, sent after the scan is durable.
pub const ACK: u8 = 0x06;
/// NAK byte, sent on a framing error so the scanner resends.
pub const NAK: u8 = 0x15;

/// A captured scan on its way to the outbox.
#[derive(Debug)]
pub struct Captured {
    /// The stamped scan.
    pub scan: Scan,
    /// Where to report "durable" so the source can ACK; `None` when the
    /// scanner is not configured for ACK (or the frame is NAKed).
    pub durable: Option<DurableAck>,
    /// One of its source's in-flight slots; released when the writer drops
    /// it after the commit.
    pub in_flight: tokio::sync::OwnedSemaphorePermit,
}

/// Scans one source may have on their way to the outbox (queued or in the
/// transaction being written). A scanner spewing garbage fills its own
/// slots and then waits; it cannot queue thousands of frames ahead of
/// another scanner's scan (tests/serial_hostile.rs measures the effect).
pub const IN_FLIGHT_PER_SOURCE: usize = 32;

/// A source's way into the outbox: the shared queue plus its own
/// in-flight limit.
#[derive(Debug, Clone)]
pub struct ToOutbox {
    queue: mpsc::Sender<Captured>,
    slots: std::sync::Arc<tokio::sync::Semaphore>,
    telemetry: crate::telemetry::Telemetry,
}

/// The outbox writer is gone (shutting down).
#[derive(Debug)]
pub struct OutboxClosed;

impl ToOutbox {
    /// A new source's handle on the shared queue (its events update a
    /// [`crate::telemetry::Telemetry`] of its own until [`Self::with_telemetry`]).
    pub fn new(queue: mpsc::Sender<Captured>) -> ToOutbox {
        ToOutbox {
            queue,
            slots: std::sync::Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT_PER_SOURCE)),
            telemetry: crate::telemetry::Telemetry::new(&[], None),
        }
    }

    /// Report this source's events ([`crate::events`]: connects, reads,
    /// ACKs) to `telemetry`.
    pub fn with_telemetry(mut self, telemetry: crate::telemetry::Telemetry) -> ToOutbox {
        self.telemetry = telemetry;
        self
    }

    /// Where this source's events are counted.
    pub fn telemetry(&self) -> &crate::telemetry::Telemetry {
        &self.telemetry
    }

    /// Queue a scan, waiting for a free slot of this source first.
    pub async fn send(&self, scan: Scan, durable: Option<DurableAck>) -> Result<(), OutboxClosed> {
        crate::events::ScanRead {
            scanner: &scan.profile.scanner,
        }
        .emit(&self.telemetry);
        let in_flight = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| OutboxClosed)?;
        self.queue
            .send(Captured {
                scan,
                durable,
                in_flight,
            })
            .await
            .map_err(|_| OutboxClosed)
    }
}

/// "This scan is durable": lets the source that read it write the ACK.
#[derive(Debug)]
pub struct DurableAck {
    tx: mpsc::UnboundedSender<Instant>,
    frame_end: Instant,
}

impl DurableAck {
    /// A notice for the frame whose last byte was read at `frame_end`,
    /// delivered on `tx` (the source's connection to its scanner).
    pub fn new(tx: mpsc::UnboundedSender<Instant>, frame_end: Instant) -> DurableAck {
        DurableAck { tx, frame_end }
    }

    /// Call only after the scan's outbox row is committed. If the scanner
    /// has reconnected since, nothing is sent: it will resend the frame.
    pub fn confirm(&self) {
        let _ = self.tx.send(self.frame_end);
    }
}
