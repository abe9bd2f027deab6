//! Sources: one task per scanner turns device bytes into captured scans.
//!
//! A source frames the byte stream, stamps each frame right away (so the
//! capture time is the read time) and hands it to the outbox writer together
//! with a way back to the scanner for the ACK that follows the durable write.

pub mod framing;
pub mod serial;

use crate::capture::Scan;
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
    /// scanner is not configured for ACK.
    pub durable: Option<mpsc::UnboundedSender<()>>,
}
