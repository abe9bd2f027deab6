//! The person at the counter, as one source hears them: control labels
//! (REPEAT, QUANTITY N, ACKNOWLEDGE; [`crate::controls`]) read on this
//! scanner, and the next read each of the first two applies to. Marked on the scan at its read, so the
//! outbox stores the declaration with the scan and a replay judges it as
//! live; a control no read followed within `[controls] within_ms`
//! lapses (the writer audits it, `gate::control`).

use crate::capture::{Declared, Scan};
use crate::controls::{Control, ControlsConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// A control read that lapsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lapse {
    /// Its scan UUID.
    pub uuid: String,
    /// Why it declared nothing (its audit record says so).
    pub why: String,
    /// Whether its scanner is told ([`crate::feedback::Told::Lapsed`]):
    /// not when the person replaced it with another control label.
    pub tell: bool,
}

impl Lapse {
    /// A control read no read followed within `within`.
    fn unused(uuid: Uuid, within: Duration) -> Lapse {
        Lapse {
            uuid: uuid.to_string(),
            why: no_read_within(within),
            tell: true,
        }
    }
}

/// One source's control state.
#[derive(Debug)]
pub struct Operator {
    controls: Arc<ControlsConfig>,
    waiting: Option<Waiting>,
}

/// A control read waiting for the read it applies to.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    control: Control,
    uuid: Uuid,
    at: Instant,
}

impl Operator {
    /// No control read yet.
    pub fn new(controls: Arc<ControlsConfig>) -> Operator {
        Operator {
            controls,
            waiting: None,
        }
    }

    /// The control labels it recognises.
    pub fn controls(&self) -> Arc<ControlsConfig> {
        Arc::clone(&self.controls)
    }

    /// How long a control waits for its read.
    pub fn within(&self) -> Duration {
        self.controls.within()
    }

    /// Mark `scan`, read at `now`: a control label ([`Scan::control`]), or
    /// the read a waiting control applies to ([`Scan::declared`]; a read
    /// that is not a product, rejected, leaves it waiting). Returns the
    /// control that lapsed meanwhile, if one did.
    pub fn mark(&mut self, scan: &mut Scan, now: Instant) -> Option<Lapse> {
        let within = self.within();
        let mut lapsed = None;
        if let Some(w) = self.waiting
            && now.duration_since(w.at) > within
        {
            self.waiting = None;
            lapsed = Some(Lapse::unused(w.uuid, within));
        }
        if let Some(control) = self.controls.recognise(&scan.raw) {
            scan.control = Some(control.describe());
            // (It looks back at the scanner's alerts: a control waiting
            // for its read goes on waiting.)
            if control == Control::Acknowledge {
                return lapsed;
            }
            let before = self.waiting.replace(Waiting {
                control,
                uuid: scan.uuid,
                at: now,
            });
            return before
                .map(|w| Lapse {
                    uuid: w.uuid.to_string(),
                    why: "another control label was read before a read followed it".into(),
                    tell: false,
                })
                .or(lapsed);
        }
        let product = scan
            .decoded
            .as_ref()
            .is_ok_and(|d| d.product.is_dispensable());
        if product && let Some(w) = self.waiting.take() {
            scan.declared = Some(Declared {
                what: w.control.describe(),
                quantity: match w.control {
                    Control::Quantity(n) => Some(n),
                    Control::Repeat | Control::Acknowledge => None,
                },
                by: w.uuid,
            });
        }
        lapsed
    }

    /// The waiting control read `uuid` lapsed, if it is still the one
    /// waiting (its bound passed with no read): why.
    pub fn lapse_if_waiting(&mut self, uuid: Uuid) -> Option<Lapse> {
        match self.waiting {
            Some(w) if w.uuid == uuid => {
                self.waiting = None;
                Some(Lapse::unused(uuid, self.within()))
            }
            _ => None,
        }
    }
}

fn no_read_within(within: Duration) -> String {
    format!(
        "no read on its scanner followed within {} s ([controls] within_ms)",
        within.as_secs_f64()
    )
}
