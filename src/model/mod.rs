//! The ground floor: the vocabulary several stages speak. Nothing here
//! imports a pipeline stage; every stage, the Redis adapter, the events and
//! the commands import from here.
//!
//! - [`scan`]: [`ScanState`], where a scan is in its life;
//! - [`decision`]: [`Verdict`], [`Decision`], [`GateStats`];
//! - [`claim`]: [`Claim`] and [`Outcome`], what the gate asks the
//!   facility store and what it answers;
//! - [`facility`]: what is known of the facility store (its clock, its
//!   state, its server, its ledger stream, reconciliations);
//! - [`told`]: [`Told`], what a scanner is told of a decision;
//! - [`alert`]: [`Alert`], what the checks at the counter find about a
//!   read's product, and the [`Check`]s a scanner runs;
//! - [`window`]: [`EchoWindow`], how far apart two reads of one pick may be.

pub(crate) mod alert;
pub(crate) mod claim;
pub(crate) mod decision;
pub(crate) mod facility;
pub(crate) mod identity;
pub(crate) mod scan;
pub(crate) mod told;
pub(crate) mod window;

pub use alert::{Alert, AlertFound, Check, Findings, Received};
pub use claim::{Claim, Outcome};
pub use decision::{Decision, GateStats, Verdict};
pub use facility::{
    ClockSample, ClockUsed, ConflictRecord, FacilityState, LedgerGroup, LedgerStream,
    Reconciliation, ScannerClone, ServerInfo,
};
pub use identity::Identity;
pub use scan::ScanState;
pub use told::Told;
pub use window::EchoWindow;
