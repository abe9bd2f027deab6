//! Sources: one task per scanner turns device bytes into captured scans.
//!
//! A source frames the byte stream (serial: [`serial::framing`]; HID reports
//! carry their own), stamps each frame right
//! away (so the capture time is the read time) and hands it to the outbox
//! writer together with a [`DurableAck`]: the way back to the scanner for the
//! ACK that follows the durable write. ACK latency is kept per scanner in a
//! small histogram ([`latency`]) and logged.

pub(crate) mod config;
pub mod hid;
pub(crate) mod identity;
pub(crate) mod latency;
pub(crate) mod operator;
pub(crate) mod serial;
pub mod signal;
pub(crate) mod tell;

pub use config::{Scanner, default_max_frame_bytes};

use crate::capture::Scan;
use crate::controls::ControlsConfig;
use crate::events::Event as _;
use operator::Operator;
use signal::Signals;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tokio::sync::mpsc;

/// ACK byte, sent after the scan is durable.
pub const ACK: u8 = 0x06;
/// NAK byte, sent on a framing error so the scanner resends.
pub const NAK: u8 = 0x15;

/// What the sources hand the outbox writer, in read order per source.
/// (Not boxed: nearly every message is a scan, and a lapse is rare.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Inbound {
    /// A read.
    Scan(Captured),
    /// A control read no read followed in time (`gate::control::lapse`):
    /// its scan UUID and why.
    Lapsed(operator::Lapse),
}

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
    queue: mpsc::Sender<Inbound>,
    slots: std::sync::Arc<tokio::sync::Semaphore>,
    telemetry: crate::telemetry::Telemetry,
    /// This source's control labels and the read each applies to.
    operator: Arc<Mutex<Operator>>,
    /// Where its scans' decisions come back.
    signals: Signals,
}

/// The outbox writer is gone (shutting down).
#[derive(Debug)]
pub struct OutboxClosed;

impl ToOutbox {
    /// A new source's handle on the shared queue (its events update a
    /// [`crate::telemetry::Telemetry`] of its own until [`Self::with_telemetry`]).
    pub fn new(queue: mpsc::Sender<Inbound>) -> ToOutbox {
        ToOutbox {
            queue,
            slots: std::sync::Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT_PER_SOURCE)),
            telemetry: crate::telemetry::Telemetry::new(&[], None),
            operator: Arc::new(Mutex::new(Operator::new(Arc::default()))),
            signals: Signals::default(),
        }
    }

    /// Recognise these control labels (the `[controls]` section).
    pub fn with_controls(mut self, controls: Arc<ControlsConfig>) -> ToOutbox {
        self.operator = Arc::new(Mutex::new(Operator::new(controls)));
        self
    }

    /// Route decisions back through `signals`.
    pub fn with_signals(mut self, signals: Signals) -> ToOutbox {
        self.signals = signals;
        self
    }

    /// A handle for another source: the same queue, telemetry, controls
    /// and signals; in-flight slots and control state of its own.
    pub fn for_source(&self) -> ToOutbox {
        let controls = self.lock_operator().controls();
        ToOutbox {
            queue: self.queue.clone(),
            slots: Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT_PER_SOURCE)),
            telemetry: self.telemetry.clone(),
            operator: Arc::new(Mutex::new(Operator::new(controls))),
            signals: self.signals.clone(),
        }
    }

    /// Hear the decisions of scanner `name`'s scans.
    pub fn listen(&self, name: &str) -> mpsc::UnboundedReceiver<signal::Signal> {
        self.signals.listen(name)
    }

    /// Whether `frame` is one of the control labels (a usable read: it is
    /// ACKed, not NAKed, though it is no barcode of a product).
    pub fn is_control(&self, frame: &[u8]) -> bool {
        self.lock_operator().controls().recognise(frame).is_some()
    }

    /// The shared queue (the daemon keeps it open until the stop).
    pub fn queue(&self) -> &mpsc::Sender<Inbound> {
        &self.queue
    }

    fn lock_operator(&self) -> std::sync::MutexGuard<'_, Operator> {
        self.operator.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Mark `scan` with what the operator declared and queue a control
    /// that lapsed meanwhile.
    async fn mark(&self, scan: &mut Scan) -> Result<(), OutboxClosed> {
        let lapsed = self.lock_operator().mark(scan, Instant::now());
        if let Some(l) = lapsed {
            self.queue
                .send(Inbound::Lapsed(l))
                .await
                .map_err(|_| OutboxClosed)?;
        }
        Ok(())
    }

    /// Watch control read `uuid`'s bound (call once the read is queued, so
    /// its lapse can never reach the writer before it), apart from the
    /// source, which may be waiting for bytes: a weak handle on the queue,
    /// so a stop is not held up. A source that ended meanwhile (a reload
    /// changed or removed its scanner) left it waiting for a read that can
    /// no longer come: it lapses too.
    fn watch_control(&self, uuid: uuid::Uuid) {
        let operator = Arc::downgrade(&self.operator);
        let within = self.lock_operator().within();
        let queue = self.queue.downgrade();
        tokio::spawn(async move {
            tokio::time::sleep(within).await;
            let lapsed = match operator.upgrade() {
                Some(op) => op
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .lapse_if_waiting(uuid),
                None => Some(operator::Lapse {
                    uuid: uuid.to_string(),
                    why:
                        "its scanner's source stopped (a reload or the stop) before a read followed"
                            .to_string(),
                    tell: false,
                }),
            };
            if let (Some(l), Some(q)) = (lapsed, queue.upgrade()) {
                let _ = q.send(Inbound::Lapsed(l)).await;
            }
        });
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

    /// Queue a scan, waiting for a free slot of this source first; a
    /// control label, or the read one applies to, marked as such.
    pub async fn send(
        &self,
        mut scan: Scan,
        durable: Option<DurableAck>,
    ) -> Result<(), OutboxClosed> {
        self.mark(&mut scan).await?;
        let mut uuid = [0; 36];
        crate::events::ScanRead {
            scanner: &scan.profile.scanner,
            tapped: self.telemetry.tapped().then(|| {
                let raw = self.telemetry.tapped_raw().then_some(&scan.raw[..]);
                (tap_read(&scan, &mut uuid), raw)
            }),
            telemetry: &self.telemetry,
        }
        .emit();
        let in_flight = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| OutboxClosed)?;
        let control = scan.control.is_some().then_some(scan.uuid);
        self.queue
            .send(Inbound::Scan(Captured {
                scan,
                durable,
                in_flight,
            }))
            .await
            .map_err(|_| OutboxClosed)?;
        if let Some(uuid) = control {
            self.watch_control(uuid);
        }
        Ok(())
    }
}

/// `scan` as `scangate tap` shows it (product identity, never the
/// bytes); `uuid`: room for its capture UUID's text.
pub fn tap_read<'a>(scan: &'a Scan, uuid: &'a mut [u8; 36]) -> crate::telemetry::tap::TapRead<'a> {
    let decoded = scan.decoded.as_ref().ok();
    let product = decoded.map(|d| &d.product);
    crate::telemetry::tap::TapRead {
        event: "read",
        scan_uuid: scan.uuid.hyphenated().encode_lower(uuid),
        at_ms: scan.time.utc_ms,
        scanner: &scan.profile.scanner,
        scan_type: scan.profile.scan_type.as_str(),
        aim: decoded.map(|d| d.aim.as_str()),
        symbology: decoded.map(|d| d.symbology),
        gtin: product.and_then(|p| p.gtin.as_deref()),
        ndc: product.and_then(|p| p.ndc10.as_deref()),
        lot: product.and_then(|p| p.lot.as_deref()),
        expiry: product.and_then(|p| p.expiry),
        serial: product.and_then(|p| p.serial.as_deref()),
        undecoded: scan.decoded.as_ref().err().map(|e| e.to_string()),
        control: scan.control.as_deref(),
        bytes: scan.raw.len(),
        raw: None,
    }
}

/// "This scan is durable": lets the source that read it write the ACK.
#[derive(Debug)]
pub struct DurableAck {
    tx: mpsc::UnboundedSender<Durable>,
    durable: Durable,
}

/// What a [`DurableAck`] delivers: when the frame's last byte was read,
/// and the read's capture UUID.
pub type Durable = (Instant, uuid::Uuid);

impl DurableAck {
    /// A notice for read `uuid`, whose frame's last byte was read at
    /// `frame_end`, delivered on `tx` (the source's connection to its
    /// scanner).
    pub fn new(
        tx: mpsc::UnboundedSender<Durable>,
        frame_end: Instant,
        uuid: uuid::Uuid,
    ) -> DurableAck {
        DurableAck {
            tx,
            durable: (frame_end, uuid),
        }
    }

    /// Call only after the scan's outbox row is committed. If the scanner
    /// has reconnected since, nothing is sent: it will resend the frame.
    pub fn confirm(&self) {
        let _ = self.tx.send(self.durable);
    }
}
