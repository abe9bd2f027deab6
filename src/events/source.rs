//! The scanners: a device opened, lost or closed, a read, an ACK and its latency, a source failing, a HID device grabbed.

use super::Event;
use crate::model::Identity;
use crate::telemetry::Telemetry;
use std::time::Duration;

// The log targets operators filter on (`RUST_LOG`, the journal): keep the values.
const ACK_LATENCY_TARGET: &str = "scangate::ack_latency";
const FEEDBACK_TARGET: &str = "scangate::feedback";
const SOURCE_TARGET: &str = "scangate::source";
const HID_TARGET: &str = "scangate::source::hid";
const HID_DEVICE_TARGET: &str = "scangate::source::hid::device";
const SERIAL_TARGET: &str = "scangate::source::serial";

/// A serial scanner's device was opened.
pub struct SerialConnected<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// The device path.
    pub device: &'a str,
    /// Line speed.
    pub baud: u32,
    /// Data bits, parity, stop bits (`8N1`).
    pub line: String,
    /// The framing, as `FrameSpec::describe` tells it.
    pub framing: String,
    /// Whether ACK/NAK is on.
    pub ack: bool,
    /// What the device says it is (a USB serial adapter or CDC-ACM port).
    pub identity: Option<&'a Identity>,
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for SerialConnected<'_> {
    /// Log it (INFO), mark the scanner up, and WARN when it is another
    /// physical device than before under that name.
    fn emit(self) {
        let is = self.identity.map(Identity::describe).unwrap_or_default();
        tracing::info!(
            target: SERIAL_TARGET,
            scanner = %self.scanner, device = %self.device, baud = self.baud,
            line = %self.line, framing = %self.framing, ack = self.ack, identity = %is,
            "scanner connected"
        );
        let before = self
            .telemetry
            .scanner_connected(self.scanner, self.device, self.identity);
        another_device(self.scanner, before, self.identity);
    }
}

/// WARN that scanner `scanner` is now `now`, another physical device than
/// `before` (a swapped scanner, or two scanners behind one name).
fn another_device(scanner: &str, before: Option<Identity>, now: Option<&Identity>) {
    if let (Some(before), Some(now)) = (before, now) {
        tracing::warn!(
            target: SOURCE_TARGET,
            scanner = %scanner,
            "scanner {scanner} is another physical scanner than before: {} (was {}); if that was not meant, check which scanner is plugged in where (`scangate devices`)",
            now.describe(),
            before.describe()
        );
    }
}

/// A Zebra SSI scanner answered the revision request sent when its
/// device was opened (`REPLY_REVISION`).
pub struct SsiRevision<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// The reply's data: its revision string, or what it sent instead.
    pub data: &'a [u8],
    /// The software revision the data names, if it is a revision string.
    pub software: Option<&'a str>,
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for SsiRevision<'_> {
    /// Log it (INFO) and keep its software revision; data that is no
    /// revision string is logged (WARN, once: one request a connection)
    /// and nothing is kept.
    fn emit(self) {
        match self.software {
            Some(revision) => {
                tracing::info!(
                    target: SERIAL_TARGET,
                    scanner = %self.scanner, software = %revision,
                    "scanner {} runs software {revision} (its revision string: {:?})",
                    self.scanner,
                    String::from_utf8_lossy(self.data).trim()
                );
                self.telemetry.scanner_software(self.scanner, revision);
            }
            None => tracing::warn!(
                target: SERIAL_TARGET,
                scanner = %self.scanner,
                "scanner {} answered the revision request with {:02x?}, not a revision string; its reads go on as before",
                self.scanner,
                &self.data[..self.data.len().min(64)]
            ),
        }
    }
}

/// A serial scanner's device went away (it is reopened).
pub struct SerialLost<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// The device path.
    pub device: &'a str,
    /// Why.
    pub reason: &'a str,
    /// Bytes of a frame begun and not finished (never a read).
    pub partial_bytes: usize,
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for SerialLost<'_> {
    /// Log it (WARN; the partial frame too, if any) and mark the scanner
    /// down.
    fn emit(self) {
        self.telemetry.scanner_disconnected(self.scanner);
        if self.partial_bytes > 0 {
            tracing::warn!(
                target: SERIAL_TARGET,
                scanner = %self.scanner, device = %self.device, bytes = self.partial_bytes,
                "scanner went away mid-frame; the partial frame was never a complete read"
            );
        }
        tracing::warn!(
            target: SERIAL_TARGET,
            scanner = %self.scanner, device = %self.device, reason = %self.reason,
            "scanner disconnected: {}; reconnecting", self.reason
        );
    }
}

/// A HID scanner's device was opened.
pub struct HidConnected<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// `pos` or `keyboard`.
    pub mode: &'a str,
    /// The device, as the opener describes it.
    pub device: &'a str,
    /// What the device says it is.
    pub identity: Option<&'a Identity>,
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for HidConnected<'_> {
    /// Log it (INFO), mark the scanner up, and WARN when it is another
    /// physical device than before under that name.
    fn emit(self) {
        let is = self.identity.map(Identity::describe).unwrap_or_default();
        tracing::info!(
            target: HID_TARGET,
            scanner = %self.scanner, mode = self.mode, device = %self.device, identity = %is,
            "HID scanner connected"
        );
        let before = self
            .telemetry
            .scanner_connected(self.scanner, self.device, self.identity);
        another_device(self.scanner, before, self.identity);
    }
}

/// A HID scanner's device went away (it is reopened when it is back).
pub struct HidLost<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// Why.
    pub reason: &'a str,
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for HidLost<'_> {
    /// Log it (WARN) and mark the scanner down.
    fn emit(self) {
        tracing::warn!(
            target: HID_TARGET,
            scanner = %self.scanner, reason = %self.reason,
            "HID scanner disconnected: {}; reopening when it is back", self.reason
        );
        self.telemetry.scanner_disconnected(self.scanner);
    }
}

/// A scanner's device was closed because scangate stops.
pub struct ScannerClosed<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for ScannerClosed<'_> {
    /// Log it (DEBUG) and mark the scanner down.
    fn emit(self) {
        tracing::debug!(target: SOURCE_TARGET, scanner = %self.scanner, "scanner closed");
        self.telemetry.scanner_disconnected(self.scanner);
    }
}

/// A scanner read a scan (before it is durable).
pub struct ScanRead<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// The read as `scangate tap` shows it, and its raw bytes for a
    /// reader that asked: built only while a reader is attached
    /// ([`Telemetry::tapped`]).
    pub tapped: Option<(crate::telemetry::tap::TapRead<'a>, Option<&'a [u8]>)>,
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for ScanRead<'_> {
    /// Log it (TRACE), count it, and show it to the tap.
    fn emit(self) {
        tracing::trace!(target: SOURCE_TARGET, scanner = %self.scanner, "scan read");
        self.telemetry.scan_read(self.scanner);
        if let Some((read, raw)) = self.tapped {
            self.telemetry.tap_read(read, raw);
        }
    }
}

/// An ACK was written, `took` after its frame was read.
pub struct Acked<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// The read it acknowledges (for the tap).
    pub scan_uuid: Option<uuid::Uuid>,
    /// Frame read to ACK written.
    pub took: Duration,
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for Acked<'_> {
    /// Log it (TRACE) and observe its latency.
    fn emit(self) {
        tracing::trace!(
            target: SERIAL_TARGET,
            scanner = %self.scanner, took_us = self.took.as_micros() as u64,
            "ACK written"
        );
        self.telemetry.acked(self.took);
        if self.telemetry.tapped() {
            let uuid = self.scan_uuid.map(|u| u.to_string());
            self.telemetry
                .tap_acked(self.scanner, uuid.as_deref(), self.took);
        }
    }
}

/// Over which time an ACK latency summary runs ([`AckLatency`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckSpan {
    /// The last report interval.
    Last(Duration),
    /// Since start (told when the scanner's task ends).
    SinceStart,
}

/// A serial scanner's ACK latency summary (INFO, target
/// `scangate::ack_latency`; the histogram is `scangate_ack_latency_seconds`,
/// observed by [`Acked`]).
pub struct AckLatency<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// NAKs written in the span.
    pub naks: u64,
    /// The span.
    pub span: AckSpan,
    /// The latency summary.
    pub summary: &'a dyn std::fmt::Display,
}

impl Event for AckLatency<'_> {
    /// Log it (INFO).
    fn emit(self) {
        let (scanner, naks, summary) = (self.scanner, self.naks, self.summary);
        match self.span {
            AckSpan::Last(every) => tracing::info!(
                target: ACK_LATENCY_TARGET,
                scanner, naks,
                "ACK latency (frame end read -> ACK written), last {}s: {summary}",
                every.as_secs()
            ),
            AckSpan::SinceStart => tracing::info!(
                target: ACK_LATENCY_TARGET,
                scanner = %scanner, naks,
                "ACK latency (frame end read -> ACK written) since start: {summary}"
            ),
        }
    }
}

/// A scanner's device could not be opened or written, or its reader not
/// started.
pub enum SourceFailed<'a> {
    /// A serial device did not open (WARN; told once per reason).
    SerialOpen {
        /// The scanner's name.
        scanner: &'a str,
        /// The device path.
        device: &'a str,
        /// Why.
        error: &'a str,
        /// The back-off's longest wait.
        every: Duration,
    },
    /// Writing a NAK failed (WARN).
    Nak {
        /// The scanner's name.
        scanner: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
    },
    /// A HID device did not open (WARN; told once per reason).
    HidOpen {
        /// The scanner's name.
        scanner: &'a str,
        /// `pos` or `keyboard`.
        mode: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
        /// What is done about it.
        hint: &'a str,
        /// The back-off's longest wait.
        every: Duration,
    },
    /// The HID reader thread did not start (ERROR).
    HidThread {
        /// The scanner's name.
        scanner: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
    },
}

impl Event for SourceFailed<'_> {
    /// Log it: ERROR when the HID reader did not start, else WARN.
    fn emit(self) {
        match self {
            SourceFailed::SerialOpen {
                scanner,
                device,
                error,
                every,
            } => tracing::warn!(
                target: SERIAL_TARGET,
                scanner = %scanner, device = %device,
                "cannot open scanner: {error}; retrying every {}s at most, and as soon as the device \
                 appears. Check the cable, the udev rule for /dev/scangate/{scanner} and the service \
                 user's access (dialout group)",
                every.as_secs()
            ),
            SourceFailed::Nak { scanner, error } => tracing::warn!(
                target: SERIAL_TARGET,
                scanner = %scanner,
                "writing NAK failed: {error}"
            ),
            SourceFailed::HidOpen {
                scanner,
                mode,
                error,
                hint,
                every,
            } => tracing::warn!(
                target: HID_TARGET,
                scanner = %scanner, mode,
                "cannot open HID scanner: {error}; {hint} (checked every {}s at most)",
                every.as_secs()
            ),
            SourceFailed::HidThread { scanner, error } => tracing::error!(
                target: HID_TARGET,
                scanner = %scanner,
                "cannot start the HID reader thread: {error}"
            ),
        }
    }
}

/// A keyboard-wedge scanner's evdev nodes grabbed, or not (target
/// `scangate::source::hid::device`).
pub enum HidGrab<'a> {
    /// No evdev node was found to grab (ERROR).
    NoNode {
        /// The scanner's name.
        scanner: &'a str,
        /// The hidraw device.
        device: &'a std::path::Path,
        /// Its name under /sys/class/hidraw.
        name: &'a str,
    },
    /// A node could not be grabbed (ERROR).
    Failed {
        /// The scanner's name.
        scanner: &'a str,
        /// The node.
        node: &'a std::path::Path,
        /// Why.
        why: &'a dyn std::fmt::Display,
    },
    /// These nodes are grabbed (INFO).
    Grabbed {
        /// The scanner's name.
        scanner: &'a str,
        /// The nodes.
        nodes: &'a [&'a std::path::Path],
    },
}

impl Event for HidGrab<'_> {
    /// Log it: ERROR when a node is not grabbed, else INFO.
    fn emit(self) {
        match self {
            HidGrab::NoNode {
                scanner,
                device,
                name,
            } => tracing::error!(
                target: HID_DEVICE_TARGET,
                scanner, device = %device.display(),
                "SECURITY: found no evdev node of this keyboard-wedge scanner to grab; if the kernel \
                 created one, every scan is also typed into the console / login prompt. Check /sys/class/hidraw/{name}"
            ),
            HidGrab::Failed { scanner, node, why } => tracing::error!(
                target: HID_DEVICE_TARGET,
                scanner, node = %node.display(),
                "SECURITY: cannot grab (EVIOCGRAB) {}: {why}; this scanner's keystrokes also reach the \
                 console, login prompt or desktop. Give the service user read access to the event node \
                 (udev rule) and make sure no other program grabs it. Scanning continues.",
                node.display()
            ),
            HidGrab::Grabbed { scanner, nodes } => tracing::info!(
                target: HID_DEVICE_TARGET,
                scanner, nodes = ?nodes,
                "keyboard-wedge scanner grabbed: its keystrokes go only to scangate"
            ),
        }
    }
}

/// A decision was signalled to a scanner (its device, or the gateway LED).
pub struct ScannerTold<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// What it was told.
    pub told: crate::model::Told,
    /// How: `serial`, `hid-pos`, `led`.
    pub via: &'static str,
    /// When its read was read, on this boot's clock (ns), if this boot:
    /// the read → signal latency the tap shows.
    pub read_boot_ns: Option<i64>,
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for ScannerTold<'_> {
    /// Log it (DEBUG), count it, and show it to the tap.
    fn emit(self) {
        tracing::debug!(target: FEEDBACK_TARGET, scanner = %self.scanner, told = %self.told, via = self.via, "told the scanner");
        self.telemetry
            .feedback(self.scanner, self.told.as_str(), "sent");
        if self.telemetry.tapped() {
            let took = self.read_boot_ns.map(|read| {
                let ns = crate::capture::clock::boot_ns() - read;
                Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
            });
            self.telemetry
                .tap_told(self.scanner, self.told, self.via, took);
        }
    }
}

/// A decision came too late to be signalled: skipped (the person has
/// moved on; a late beep would be taken for the next read's).
pub struct FeedbackSkipped<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// What it would have been told.
    pub told: crate::model::Told,
    /// From the read to the decision (`None`: read before this boot).
    pub after: Option<std::time::Duration>,
    /// Its `feedback.max_delay_ms`.
    pub bound: std::time::Duration,
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for FeedbackSkipped<'_> {
    /// Log it (DEBUG: an outage's replay skips every signal) and count it.
    fn emit(self) {
        tracing::debug!(
            target: FEEDBACK_TARGET,
            scanner = %self.scanner, told = %self.told,
            after_ms = self.after.map(|a| a.as_millis() as u64),
            bound_ms = self.bound.as_millis() as u64,
            "decision came after the feedback bound: not signalled"
        );
        self.telemetry
            .feedback(self.scanner, self.told.as_str(), "skipped");
    }
}

/// The gateway LED of a scanner's `feedback.led` could not be used.
pub struct LedFailed<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// What failed, where, and the fix (a `feedback::led::LedError`).
    pub error: &'a dyn std::fmt::Display,
}

impl Event for LedFailed<'_> {
    /// Log it (WARN: decisions go on, unseen).
    fn emit(self) {
        tracing::warn!(
            target: FEEDBACK_TARGET,
            scanner = %self.scanner,
            "the feedback LED of scanner {} does not work, decisions are not shown on it: {}",
            self.scanner, self.error
        );
    }
}

/// What a `hid-pos` scanner's report descriptor offers for feedback, told
/// when a connection's descriptor says something other than the last.
pub struct HidPosOutputs<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// Whether decisions are sent to it as output reports.
    pub usable: bool,
    /// What it offers, or why nothing can be sent (and the fix).
    pub note: &'a str,
}

impl Event for HidPosOutputs<'_> {
    /// Log it: INFO when decisions are sent to it, else WARN.
    fn emit(self) {
        let note = self.note;
        if self.usable {
            tracing::info!(target: FEEDBACK_TARGET, scanner = %self.scanner, "{note}");
        } else {
            tracing::warn!(target: FEEDBACK_TARGET, scanner = %self.scanner, "{note}");
        }
    }
}

/// A decision's output report could not be written to a `hid-pos`
/// scanner: the scanner was not told (`scangate_feedback_total`, outcome
/// `failed`).
pub struct FeedbackFailed<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// What it was to be told.
    pub told: crate::model::Told,
    /// Why.
    pub error: &'a dyn std::fmt::Display,
    /// The device went away (it is reopened when it is back).
    pub gone: bool,
    /// The same error as the last one told at WARN.
    pub repeated: bool,
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for FeedbackFailed<'_> {
    /// Count it; log it: WARN, or DEBUG when it repeats the last error.
    fn emit(self) {
        let (told, e) = (self.told, self.error);
        self.telemetry
            .feedback(self.scanner, told.as_str(), "failed");
        if self.repeated {
            tracing::debug!(target: FEEDBACK_TARGET, scanner = %self.scanner, %told, "the scanner was not told {told}: {e}");
        } else {
            tracing::warn!(
                target: FEEDBACK_TARGET,
                scanner = %self.scanner, %told,
                "the scanner was not told {told}: {e}{}",
                if self.gone { " (it is reopened when it is back)" } else { "; scanning goes on" }
            );
        }
    }
}
