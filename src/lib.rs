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
//! and those below it (`tests/layout.rs` checks it, and `src/` has no
//! import circle). From the ground up:
//!
//! 0. **Shared vocabulary** — [`model`]: what several stages speak
//!    ([`model::ScanState`], [`model::Verdict`], [`model::Decision`], a
//!    [`model::Claim`] and its [`model::Outcome`], what is known of the
//!    facility store); [`invalid`] (a refused setting), [`shutdown`] (the
//!    stop token), [`backoff`] (the retry schedule), [`exit`] (the exit
//!    codes), [`build`] (the version, schema version and commit),
//!    [`files`] (a file a setting names, read whole up to a limit,
//!    regular files only; a file of scangate's own, opened without
//!    following what another account planted at its name).
//! 1. **What a stage is told and what it tells** — [`config`]: the TOML
//!    file, assembled from the sections each stage owns (`source::config`,
//!    `source::{serial,hid}::config`, `facility::config`: leaves), and its
//!    secrets resolved once ([`config::Settings`]); [`capture`]: UUIDv7,
//!    UTC and boot-clock stamps, barcode decoding, the content key;
//!    observability as leaves: [`telemetry`] (the counters and the status
//!    file's format), [`events`] (one type per operational event, one file
//!    per component; `emit` logs it and moves its metric), [`notify`]
//!    (systemd: readiness, status, the watchdog's rule of progress);
//!    [`controls`]: the REPEAT and QUANTITY labels, their `[controls]`
//!    section, recognising a read as one, and their printed forms;
//!    [`feedback`]: what a scanner is told of a decision, as each
//!    protocol's bytes (Zebra SSI, Honeywell, Datalogic, raw, HID POS
//!    output reports) or a gateway LED's pattern.
//! 2. **Capture and storage** — [`source`]: one task per scanner (serial;
//!    USB HID in [`source::hid`]), the operator's control labels marked on
//!    the reads ([`source::operator`]) and the decisions routed back to the
//!    scanners ([`source::signal`]); [`pty`]: pseudo-terminals standing in
//!    for serial scanners; [`store`]: the SQLite database (one file, WAL,
//!    `synchronous=FULL`), its identity and anchors, the writers' turn,
//!    disk space.
//! 3. **The tables** — [`outbox`]: every scan, written before anything
//!    else (the `scans` table); [`ledger`]: one entry per committed scan;
//!    [`audit`]: the hash-chained decision records, verify, trace, archives
//!    and pruning.
//! 4. **The decision** — [`gate`]: the Bloom pre-filter and the exact
//!    event-time window check; with a facility store, which scans to claim
//!    and in what order ([`gate::facility`]).
//! 5. **The facility Redis adapter** — [`facility`]: connecting, the claim
//!    script and its rounds, the server's checks and clock, the ledger and
//!    conflicts streams. **The HTTP sinks** — [`sink`]: the ledger POSTed
//!    to inventory systems from a durable cursor (its `[[sink]]` section,
//!    `sink::config`, is a leaf of floor 1).
//! 6. **The claimer** — [`daemon::claimer`]: the facility store's two
//!    lanes (live and replay) and what they record of it.
//! 7. **The daemon** — [`daemon`]: the one place that wires the stages,
//!    each started from its own section of the settings (the outbox writer,
//!    the claimer's lanes, the sweeper, the anchor thread, the publisher),
//!    runs them until the stop, and stops them in the order it writes down.
//! 8. **The commands** — [`cli`]: the command line, parsed and dispatched;
//!    [`cmd`]: each command's body, and which failure gets which exit code;
//!    [`logging`]: how the process logs (journald, text, JSON).
//!
//! A scan flows up through them: source → capture → outbox → gate →
//! ledger and audit (embedded), or → claimer → facility (with `[redis]`).

#![warn(missing_docs)]

pub mod audit;
pub mod backoff;
pub mod build;
pub mod capture;
pub mod cli;
pub mod cmd;
pub mod config;
pub mod controls;
pub mod daemon;
pub mod events;
pub mod exit;
pub mod facility;
pub mod feedback;
pub mod files;
pub mod gate;
pub mod invalid;
pub mod ledger;
pub mod logging;
pub mod model;
pub mod notify;
pub mod outbox;
pub mod pty;
pub mod shutdown;
pub mod sink;
pub mod source;
pub mod store;
pub mod telemetry;
