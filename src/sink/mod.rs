//! `[[sink]]`: the ledger pushed over HTTP to an inventory system, in
//! batches, at-least-once, in ledger order.
//!
//! Each sink is a consumer of the gateway's own ledger named
//! `sink.<name>` ([`crate::ledger::cursor`]): `audit prune` keeps what it
//! has not delivered, `ledger consumers list`, `status` and the consumer
//! metrics show its lag. It runs on a thread of its own (the client
//! blocks), started by the daemon (`daemon/sinks.rs`):
//!
//! - [`config`]: the table, its checks, its files read (CA, token);
//! - [`batch`]: a batch's exact body (JSON lines or an `EPCISDocument`)
//!   and its `Idempotency-Key`;
//! - [`held`]: the batch held in the database before its first POST, and
//!   the cursor moved with its removal after a 2xx;
//! - [`deliver`]: one POST and what its answer means;
//! - [`run`]: the loop: retries with back-off, blocked batches kept.
//!
//! docs/integrator.md ("Pushed over HTTP") is the receiver's side of it.

pub mod batch;
pub mod config;
pub mod deliver;
pub mod held;
pub mod run;

pub use config::consumer_name;
