//! scangate: barcode-scan ingestion for pharmacy-floor gateways.
//!
//! Every read from a USB-HID or serial scanner is stamped, made durable in a
//! SQLite outbox, and then decided: a new physical movement of a controlled
//! substance (one ledger entry), an echo of one already recorded (suppressed,
//! naming its twin), or invalid input (rejected, with the reason). Every
//! decision gets a PHI-free, hash-chained audit record. Nothing is dropped
//! silently.
//!
//! # Layout
//!
//! The modules, in the order a scan flows through them:
//!
//! - [`config`]: the TOML file, defaults and validation (no hardware needed);
//!   it assembles the sections each component owns, and resolves secrets once
//!   ([`config::Settings`]). [`invalid`]: the refusal a component returns.
//! - [`source`]: one task per scanner: open, read, frame, reconnect
//!   (serial; USB HID in [`source::hid`]: HID POS and keyboard wedge).
//! - [`capture`]: UUIDv7, UTC + boot-time stamps, barcode decoding, the
//!   content key.
//! - [`store`]: the SQLite database (one file, WAL, `synchronous=FULL`):
//!   schema, the writers' turn, read and write transactions; disk space,
//!   growth and the `min_free_mb` floor in [`store::space`].
//! - [`outbox`]: the write-ahead record of every scan; owns the `scans`
//!   table (every statement on it), its record type and [`crate::model::ScanState`].
//! - [`gate`]: the decision policy — Bloom pre-filter, exact event-time
//!   window check; with a facility Redis ([`gate::facility`]) which scans
//!   to claim and in what order. Handed a transaction; owns no table but
//!   its record of clock steps.
//! - [`ledger`]: one entry per committed scan and the exact twin lookup;
//!   JSON-lines export.
//! - [`audit`]: hash-chained decision records; verify and trace;
//!   archives, their verification and pruning by them in [`audit::archive`].
//! - [`facility`]: the facility Redis: the claim script, claim rounds, checks;
//!   the ledger stream's consumer groups and trimming in [`facility::stream`].
//! - [`daemon`]: the one place that wires the stages together, opens
//!   their transactions and stops them in order: the embedded store's
//!   admit-and-decide in [`daemon::embedded`], with `[redis]` the claimer's
//!   live and replay lanes in [`daemon::claimer`], the raw-bytes sweeper in
//!   [`daemon::sweeper`]; every stage started and heard ending through
//!   [`daemon::supervisor`]; a reload (SIGHUP) in [`daemon::reload`].
//! - [`events`]: the daemon's operational events, one type each, whose
//!   `emit` logs it and updates its metric.
//! - [`metrics`]: what the running daemon publishes: Prometheus metrics
//!   (`[metrics]` textfile, `/metrics` in [`metrics::http`]) and the status
//!   file that [`cmd::status`] (`scangate status`) reads with the database.
//! - Shared by the stages: [`shutdown`] (the one stop token), [`backoff`]
//!   (the one retry schedule), [`notify`] (systemd: readiness, status, the
//!   watchdog's rule of progress).
//! - [`cli`]: the command line, parsed and dispatched; [`cmd`]: the
//!   commands, one module each (`check-config`, `status`, `outbox`,
//!   `ledger`, `audit`, `state`, `decode`, `devices`/`pair`, `demo`,
//!   `bench`), and which error gets which exit code; [`exit`]: the exit
//!   codes; [`logging`]: `--log-format` (journald, text, json).
//! - [`pty`]: pseudo-terminals that stand in for serial scanners.

#![warn(missing_docs)]

pub mod audit;
pub mod backoff;
pub mod capture;
pub mod cli;
pub mod cmd;
pub mod config;
pub mod daemon;
pub mod events;
pub mod exit;
pub mod facility;
pub mod gate;
pub mod invalid;
pub mod ledger;
pub mod logging;
pub mod model;
pub mod notify;
pub mod outbox;
pub mod pty;
pub mod shutdown;
pub mod source;
pub mod store;
pub mod telemetry;
