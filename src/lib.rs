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
//! The modules stand on floors; a module imports only from its own floor
//! and those below it. This table is the one list of floors:
//! `tests/layout.rs` reads it and checks every `crate::` path in `src/`
//! against it, and `src/` has no import circle. A module path names its
//! own subtree; the longest one that fits a module places it (so the
//! config sections, leaves owned by their stages, sit on floor 2 with
//! [`config`]).
//!
//! | floor | modules | what lives there |
//! |---|---|---|
//! | 0 | [`model`], [`invalid`], [`shutdown`], [`backoff`], [`exit`], [`build`], [`files`] | the vocabulary several stages speak ([`model::ScanState`], [`model::Verdict`], [`model::Decision`], a [`model::Claim`] and its [`model::Outcome`], what a scanner is told: [`model::Told`], the echo window: [`model::EchoWindow`], what is known of the facility store), a refused setting, the stop token, the retry schedule, the exit codes, the version, and files (one a setting names, read up to a limit; one of scangate's own, opened without following what another account planted) |
//! | 1 | [`telemetry`], [`events`], [`notify`], `capture::clock` | what the stages tell, as leaves every stage may use: the counters and the status file's format, one type per operational event (one file per component; `emit` logs it and moves its metric), systemd (readiness, status, the watchdog's rule of progress), and the clocks a record is stamped with |
//! | 2 | [`config`], `source::config`, `source::hid::config`, `source::hid::layout`, `source::serial::config`, `facility::config`, `sink::config`, [`capture`], [`controls`], [`feedback`] | what a stage is told: the TOML file, assembled from the sections each stage owns (leaves), its secrets resolved once ([`config::Settings`]); capture stamps (UUIDv7, UTC, boot clock), barcode decoding and the content key; the REPEAT and QUANTITY labels; what a scanner is told of a decision, as each protocol's bytes (Zebra SSI, Honeywell, Datalogic, raw, HID POS output reports) or a gateway LED's pattern |
//! | 3 | [`source`], [`pty`], [`store`], [`products`], [`checks`] | one task per scanner (serial; USB HID in [`source::hid`]), the operator's control labels marked on the reads ([`source::operator`]), the decisions routed back to the scanners ([`source::signal`]); pseudo-terminals standing in for serial scanners; the SQLite database (one file, WAL, `synchronous=FULL`), its identity and anchors, the writers' turn, disk space; the product and recall data (the FDA NDC Directory, openFDA's drug recalls), each a file of its own imported whole, looked up by NDC or GTIN, and the checks at the counter that read it (recalled, suspect, expired, unknown, expiring) |
//! | 4 | [`outbox`], [`ledger`], [`audit`] | the tables: every scan, written before anything else; one entry per committed scan; the hash-chained decision records, verify, trace, archives and pruning |
//! | 5 | [`decided`], [`gate`] | what a decision writes, in one place (the scan's row, a commit's ledger entry, its audit record; a lapsed control's and a conflict's later records); this gateway's own verdict: the Bloom pre-filter and the exact event-time window check |
//! | 6 | [`facility`], [`sink`] | the facility Redis adapter (connecting, the claim script and its rounds, the server's checks and clock, the ledger and conflicts streams); the ledger POSTed to inventory systems from a durable cursor |
//! | 7 | [`claimer`] | the facility claim path end to end: started from `[redis]`, the facility clock, which scans to claim and in what order, the two lanes (live and replay), reconciliation, and what they record of the facility store |
//! | 8 | [`daemon`] | the one place that wires the stages, each started from its own section of the settings, runs them until the stop, and stops them in the order it writes down |
//! | 9 | [`cli`], [`cmd`], [`logging`] | the command line, parsed and dispatched; each command's body, and which failure gets which exit code; how the process logs (journald, text, JSON) |
//!
//! A scan flows up through them: source → capture → outbox → gate →
//! ledger and audit (embedded), or → claimer → facility (with `[redis]`).
//!
//! # Surface
//!
//! The library is the `scangate` binary's ([`cli::main`]), and what its
//! integration tests and benches drive: the stages whose behaviour they
//! prove against real files, processes and devices ([`capture`],
//! [`source`], [`pty`], [`store`], [`outbox`], [`ledger`], [`audit`],
//! [`gate`], [`claimer`], [`facility`], [`daemon`], [`feedback`],
//! [`products`]) and
//! the vocabulary those speak ([`model`], [`config`], [`build`],
//! [`shutdown`]). The rest is the crate's own: events and telemetry,
//! systemd notification, the commands' bodies, logging, the sinks, the
//! decision writer, files and exit codes. Within a public module, a
//! submodule is public only where a test or bench names it.

#![warn(missing_docs)]
// The library serves the binary, its benches and its integration tests; it
// is no published API. Its docs are the maintainers' map and are built with
// `--document-private-items` (as `.ci/run` does), where links to private
// items resolve; a broken link is still an error.
#![allow(rustdoc::private_intra_doc_links)]

pub mod audit;
mod backoff;
pub mod build;
pub mod capture;
pub mod checks;
pub mod claimer;
pub mod cli;
mod cmd;
pub mod config;
mod controls;
pub mod daemon;
mod decided;
mod events;
mod exit;
pub mod facility;
pub mod feedback;
mod files;
pub mod gate;
mod invalid;
pub mod ledger;
mod logging;
pub mod model;
mod notify;
pub mod outbox;
pub mod products;
pub mod pty;
pub mod shutdown;
mod sink;
pub mod source;
pub mod store;
mod telemetry;
