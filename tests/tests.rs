//! The integration tests, as one test binary (`cargo test --test
//! integration`): one link of the library instead of one per file. Each
//! file beside this one is a module of it; the helpers they share are in
//! `util/`, where `util::Gateway` is the fixture the daemon tests start
//! from (a gateway with N PTY scanners). Run one group with `cargo test
//! --test integration serial_`.

mod util;

// Barcode decoding: the public vectors, property tests, the fuzz corpus.
mod barcode_fuzz_corpus;
mod barcode_props;
mod barcode_vectors;

// The CLI: decode, errors and exit codes, the demo, the bench, the
// control labels.
mod bench_smoke;
mod check_config;
mod cli_errors;
mod decode_cli;
mod demo;
mod diag;
mod hostile_input;
mod labels_cli;

// Product and recall data: imports, lookups, status; the checks at the
// counter that read it.
mod counter_checks;
mod products;
mod suspect_serials;

// The gate and the audit trail, through the library on real SQLite files.
mod audit_tamper;
mod gate;
mod ledger_chain;
mod raw_retention;
mod retention;
mod state_identity;
mod state_links;
mod unserialised;

// Upgrades: every earlier release's shipped config; keys of an earlier form.
mod upgrade_config;
mod upgrade_cut;
mod upgrade_fixtures;
mod upgrade_keys;
mod upgrade_rolling;

// What inventory systems read: the ledger as GS1 EPCIS 2.0, checked
// against GS1's JSON Schema; the embedded ledger followed with a cursor;
// the ledger pushed over HTTP to a receiver the test starts.
mod epcis;
mod ledger_follow;
mod sink_http;

// Serial scanners on PTYs against the real daemon.
mod control_labels;
mod crash_recovery;
mod disk_space;
mod first_start;
mod serial_ack;
mod serial_e2e;
mod serial_framing;
mod serial_hostile;
mod serial_hotplug;
mod serial_many;
mod ssi_revision;

// systemd: readiness, status, the watchdog, reload (SIGHUP).
mod systemd_notify;
mod systemd_reload;
mod write_faults;

// USB HID scanners, without hardware.
mod hid_decode_cli;
mod hid_feedback;
mod hid_keyboard_props;
mod hid_source;
mod hid_vectors;

// The facility store: redis-server processes of each test's own.
mod embedded_takeover;
mod facility_backoff;
mod facility_clock;
mod facility_cluster;
mod facility_connect;
mod facility_failover;
mod facility_feedback;
mod facility_gateways;
mod facility_keys;
mod facility_order;
mod facility_outage;
mod facility_reconcile;
mod facility_redis;
mod facility_script;
mod ledger_stream;

// The log: text, JSON, the journal's native protocol.
mod logging;

// What facility IT sees: metrics through a real Prometheus and node_exporter,
// `scangate status`; `/metrics` answered under a flood of idle clients.
mod metrics_starve;
mod observability;
// `scangate tap`: reads and decisions, live, from another process.
mod tap;
// `scangate top` in a real terminal (tmux).
mod top;

// The shape of src/: no module imports from a floor above its own.
mod layout;
mod lean_rows;

// Scanner feedback: the bytes docs/scanner-feedback.md shows are the bytes sent.
mod feedback_bytes;
