//! Decisions back to the scanners that read them: each decided scan's
//! verdict as a [`Told`], routed by scanner name to whoever listens for
//! it — the source's connection (serial bytes) and the gateway LED
//! (`feedback.led`). The writer (embedded) and the claimer's lanes tell
//! after their transaction commits, so a signal always follows the
//! durable ACK; a listener skips a signal that comes later than its
//! `max_delay_ms` after the read (counted: `events::FeedbackSkipped`).

use crate::feedback::Told;
use crate::model::{Decision, ScanState, Verdict};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::mpsc;

/// One decision for one scanner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal {
    /// What it is (an ambiguous echo is [`Told::Ambiguous`] here; a
    /// scanner whose policy is not `ask` tells it as [`Told::Echo`]).
    pub told: Told,
    /// When the scan was read, on this boot's clock (ns), if this boot.
    pub read_boot_ns: Option<i64>,
}

/// Who listens for which scanner's decisions (cheap to clone).
#[derive(Debug, Clone, Default)]
pub struct Signals {
    listeners: Arc<Mutex<HashMap<String, Vec<mpsc::UnboundedSender<Signal>>>>>,
}

impl Signals {
    /// Hear scanner `name`'s decisions from now on (until the receiver is
    /// dropped).
    pub fn listen(&self, name: &str) -> mpsc::UnboundedReceiver<Signal> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut all = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let list = all.entry(name.to_string()).or_default();
        list.retain(|l| !l.is_closed());
        list.push(tx);
        rx
    }

    /// Tell each decision's scanner (call after the decisions' commit).
    /// A scan left unresolved again (a retry) is not told twice; a
    /// pending one is not told at all.
    pub fn tell(&self, decisions: &[Decision]) {
        let all = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if all.is_empty() {
            return;
        }
        for d in decisions {
            let Some(told) = told(d) else { continue };
            let read_boot_ns = d.read_boot_ns;
            send(&all, &d.scanner, Signal { told, read_boot_ns });
        }
    }

    /// Tell scanner `scanner` that its control read lapsed unused (now:
    /// the signal is due whatever the scanner's `max_delay_ms`, which
    /// bounds how late a decision may come after its read).
    pub fn tell_lapsed(&self, scanner: &str) {
        let all = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let read_boot_ns = Some(crate::capture::clock::boot_ns());
        send(
            &all,
            scanner,
            Signal {
                told: Told::Lapsed,
                read_boot_ns,
            },
        );
    }
}

/// `signal` to whoever listens for `scanner` (one gone is skipped).
fn send(all: &HashMap<String, Vec<mpsc::UnboundedSender<Signal>>>, scanner: &str, signal: Signal) {
    for l in all.get(scanner).into_iter().flatten() {
        let _ = l.send(signal);
    }
}

/// What a decision tells its scanner, if anything: what the facility
/// decided, when that differs from the verdict alone
/// ([`Decision::told_as`]), else the verdict; and a commit or a wait with
/// an alert about its item ([`Decision::alert`]) told as that alert.
fn told(d: &Decision) -> Option<Told> {
    let told = match d.told_as {
        Some(told) => told,
        None => told_by_verdict(d)?,
    };
    // An alert about the item is told instead of a commit or a wait.
    Some(match (told, d.alert) {
        (Told::Committed | Told::Waiting, Some(alert)) => alert.told(),
        _ => told,
    })
}

/// What a decision's verdict alone tells its scanner.
fn told_by_verdict(d: &Decision) -> Option<Told> {
    Some(match &d.verdict {
        Verdict::Committed => Told::Committed,
        Verdict::Control { .. } => Told::Control,
        Verdict::Suppressed { .. } if d.ambiguous => Told::Ambiguous,
        Verdict::Suppressed { .. } => Told::Echo,
        Verdict::Rejected { .. } => Told::Rejected,
        Verdict::Unresolved { .. } if d.was != ScanState::Unresolved => Told::Waiting,
        Verdict::Unresolved { .. } | Verdict::Pending => return None,
    })
}
