//! The daemon's operational events, typed (as vector's
//! `src/internal_events/`): one type per event, and one shape, [`Event`].
//! The type's fields say what happened; one that moves a metric also
//! carries the [`Telemetry`](crate::telemetry::Telemetry) in its field
//! `telemetry`. Its [`Event::emit`] both logs it (structured fields, fixed
//! prose) and updates that metric, so the log and the metrics cannot
//! disagree and the call site says only *what happened*:
//! `events::X { …, telemetry: &t }.emit()`, with the trait in scope
//! (`use crate::events::Event as _;`).
//!
//! Field names are the journal's too (upper-cased, [`crate::logging`]):
//! `scanner`, `device`, `scan_uuid`, `decision`, `reason`. Each event keeps
//! the log target of the module it happens in, so `RUST_LOG` filters by
//! module as before; each file names the targets it uses once, as
//! `const …_TARGET` (operators filter on the values: they do not change);
//! outside `events/` only the audit copies name one
//! ([`crate::audit::AUDIT_TARGET`]).
//!
//! Events without a metric of their own (a disk error, an anchor) only
//! log; they are here all the same, so every operational line is one type.
//!
//! One file per component; each event is re-exported here, so a call
//! site names `events::X`.

mod claimer;
mod daemon;
mod facility_clock;
mod gate;
mod ledger_consumer;
mod ledger_stream;
mod outbox;
mod publish;
mod reconcile;
mod sink;
mod source;
mod store;
mod sweeper;

pub use claimer::*;
pub use daemon::*;
pub use facility_clock::*;
pub use gate::*;
pub use ledger_consumer::*;
pub use ledger_stream::*;
pub use outbox::*;
pub use publish::*;
pub use reconcile::*;
pub use sink::*;
pub use source::*;
pub use store::*;
pub use sweeper::*;

/// An operational event: what happened, told once.
pub trait Event {
    /// Log it (its level, target, fields and message are its type's), and
    /// move its metric where it has one (through its `telemetry`).
    fn emit(self);
}

#[cfg(test)]
mod tests;
