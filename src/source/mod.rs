//! Sources: one task per scanner turns device bytes into captured scans.
//!
//! A source frames the byte stream (serial: [`serial::framing`]; HID reports
//! carry their own), stamps each frame right
//! away (so the capture time is the read time) and hands it to the outbox
//! writer together with a [`DurableAck`]: the way back to the scanner for the
//! ACK that follows the durable write. ACK latency is kept per scanner in a
//! small histogram ([`latency`]) and logged.

pub mod config;
pub mod hid;
pub mod latency;
pub mod serial;

pub use config::{Scanner, default_max_frame_bytes};

use crate::capture::Scan;
use std::time::Instant;
use tokio::sync::mpsc;

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
