//! Sources: one task per scanner turns device bytes into captured scans.
//!
//! A source frames the byte stream ([`framing`]), stamps each frame right
//! away (so the capture time is the read time) and hands it to the outbox
//! writer together with a [`DurableAck`]: the way back to the scanner for the
//! ACK that follows the durable write. ACK latency is kept per scanner in a
//! small histogram ([`latency`]) and logged.

pub mod framing;
pub mod latency;
pub mod serial;

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
