//! Decisions told to a HID POS scanner as output reports
//! (`feedback = { protocol = "hid-pos" }`).
//!
//! On each connection the reader thread reads the device's report
//! descriptor and looks for Output fields on the Bar Code Scanner page
//! ([`crate::feedback::hid_pos::outputs`]). If there are some, it listens
//! for the scanner's decisions for as long as the connection lasts and,
//! between two reads, writes each due decision's output report(s) to the
//! device (hidapi `write`, on the reader thread: hidapi's device handle is
//! not shared between threads, and a report is a few bytes; input reports
//! that come meanwhile wait in hidraw's queue). A decision is signalled
//! only after its read is durable and decided (the writer tells after its
//! commit), so nothing waits for a report. If there are none, that is
//! said once and nothing is sent.
//!
//! A write that fails is logged and counted (`scangate_feedback{outcome =
//! "failed"}`) and scanning goes on; a device that is gone is noticed by
//! the next read, which reopens it.

use super::device::{DeviceErrorKind, ReportDevice};
use crate::capture::Unserialised;
use crate::events::Event as _;
use crate::feedback::hid_pos::{self, PosOutputs};
use crate::feedback::{FeedbackConfig, Protocol};
use crate::source::signal::Signal;
use crate::source::{Scanner, ToOutbox};
use crate::telemetry::Telemetry;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::mpsc::error::TryRecvError;

/// Longest blocking read while decisions are listened for: bounds how late
/// after its decision a report is written.
pub const FEEDBACK_SLICE: Duration = Duration::from_millis(20);

/// A scanner's `feedback = { protocol = "hid-pos" }`, across connections.
pub struct PosFeedback {
    fb: FeedbackConfig,
    policy: Unserialised,
    scanner: String,
    /// What was said about the last connection's descriptor: a reconnect
    /// of the same scanner does not say it again.
    said: Option<String>,
    /// The last write error logged at WARN (the same one again: DEBUG).
    failed: Option<String>,
}

/// One connection's outputs and the decisions to tell it.
pub struct Connected {
    outputs: PosOutputs,
    signals: UnboundedReceiver<Signal>,
}

impl PosFeedback {
    /// The feedback of scanner `cfg`, if it has `protocol = "hid-pos"`.
    pub fn of<K>(cfg: &Scanner<K>) -> Option<PosFeedback> {
        let fb = cfg.feedback.as_ref()?;
        (fb.protocol == Some(Protocol::HidPos)).then(|| PosFeedback {
            fb: fb.clone(),
            policy: cfg.profile().unserialised,
            scanner: cfg.name.clone(),
            said: None,
            failed: None,
        })
    }

    /// A connection was opened: read its descriptor, and if it offers
    /// 0x8C outputs, listen for decisions from now on.
    pub fn connect(&mut self, dev: &mut dyn ReportDevice, out: &ToOutbox) -> Option<Connected> {
        let (outputs, note) = match dev.report_descriptor() {
            Err(why) => (
                None,
                format!(
                    "cannot read this scanner's report descriptor ({why}): no output reports are sent; use led"
                ),
            ),
            Ok(d) => match hid_pos::output_fields(&d) {
                Err(e) => (
                    None,
                    format!("{e}: no output reports are sent; use led"),
                ),
                Ok(_) => match hid_pos::outputs(&d) {
                    None => (
                        None,
                        "this scanner's report descriptor offers no Bar Code Scanner output usages: nothing can be sent; use led"
                            .to_string(),
                    ),
                    Some(o) => {
                        let offered = o
                            .fields()
                            .iter()
                            .map(|f| format!("{:#04x} (report {}, bit {})", f.usage, f.report_id, f.bit))
                            .collect::<Vec<_>>()
                            .join(", ");
                        let note = format!(
                            "decisions are sent to the scanner as HID POS output reports; its report descriptor offers the Bar Code Scanner outputs {offered}"
                        );
                        (Some(o), note)
                    }
                },
            },
        };
        if self.said.as_deref() != Some(note.as_str()) {
            crate::events::HidPosOutputs {
                scanner: &self.scanner,
                usable: outputs.is_some(),
                note: &note,
            }
            .emit();
            self.said = Some(note);
        }
        let outputs = outputs?;
        Some(Connected {
            outputs,
            signals: out.listen(&self.scanner),
        })
    }

    /// Write the output reports of every decision that came since the last
    /// call, late ones skipped (counted by [`crate::source::tell::due`]).
    pub fn tell(
        &mut self,
        conn: &mut Connected,
        dev: &mut dyn ReportDevice,
        telemetry: &Telemetry,
    ) {
        loop {
            let signal = match conn.signals.try_recv() {
                Ok(s) => s,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return,
            };
            let Some(told) =
                crate::source::tell::due(&self.fb, signal, self.policy, &self.scanner, telemetry)
            else {
                continue;
            };
            let reports = conn.outputs.reports(told);
            if reports.is_empty() {
                continue; // this decision sets nothing this device offers
            }
            let mut sent = true;
            for report in &reports {
                let bytes = conn.outputs.for_hidapi(report);
                if let Err(e) = dev.write_report(&bytes) {
                    sent = false;
                    let repeated = self.failed.as_deref() == Some(e.message.as_str());
                    crate::events::FeedbackFailed {
                        scanner: &self.scanner,
                        told,
                        error: &e,
                        gone: e.kind == DeviceErrorKind::Disconnected,
                        repeated,
                        telemetry,
                    }
                    .emit();
                    if !repeated {
                        self.failed = Some(e.message);
                    }
                    break;
                }
            }
            if sent {
                self.failed = None;
                crate::events::ScannerTold {
                    scanner: &self.scanner,
                    told,
                    via: "hid-pos",
                    read_boot_ns: signal.read_boot_ns,
                    telemetry,
                }
                .emit();
            }
        }
    }
}
