//! The command line's clap definitions, and nothing else: this file uses
//! only `clap`, `std` and [`crate::exit`], so `build.rs` includes it (with
//! `src/exit.rs`) to generate the man pages and shell completions from the
//! very definitions `scangate` parses with. Doc comments here are clap's
//! help texts (a doc comment on `Cli` or a subcommand field would change
//! `--help`), hence no Rust docs on the items themselves.
#![allow(missing_docs)]

use crate::exit::Exit;
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "scangate",
    version,
    about = "Barcode-scan ingestion for pharmacy-floor gateways: write-ahead outbox, exact echo suppression, hash-chained audit",
    after_help = Exit::summary()
)]
pub struct Cli {
    /// Log format: journald (native protocol), text or json on stderr;
    /// auto: journald when stderr is the journal stream ($JOURNAL_STREAM
    /// names its device and inode), else text.
    #[arg(long, global = true, value_enum, default_value_t)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Args, Clone)]
pub struct ConfigArg {
    /// Config file (TOML). Without it (and without SCANGATE_CONFIG):
    /// /etc/scangate/scangate.toml if it exists, else built-in defaults,
    /// embedded store, state in $STATE_DIRECTORY or ./scangate-state.
    #[arg(long, short = 'c', env = "SCANGATE_CONFIG")]
    pub config: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the daemon until SIGTERM/SIGINT; SIGHUP re-reads the config
    /// (scanners added, removed or changed start and stop alone).
    Run(ConfigArg),
    /// Validate the configuration without touching hardware: also that
    /// the state directory is writable by the service user and the
    /// `[redis]` password and CA files readable.
    CheckConfig {
        #[command(flatten)]
        config: ConfigArg,
        /// Also check what the config points to over the network and on
        /// the machine: the facility Redis (credentials, eviction policy,
        /// persistence, version, clock offset) and each scanner's device
        /// path. Writes nothing to Redis, opens no scanner.
        #[arg(long)]
        online: bool,
    },
    /// Play a noisy pharmacy shift on virtual serial scanners and report.
    Demo {
        /// Decide through this facility Redis (`redis://host:port/`) instead
        /// of the embedded store.
        #[arg(long)]
        redis: Option<String>,
    },
    /// Measure throughput and latency on a real SQLite file.
    Bench(BenchArgs),
    /// The ledger of committed scans.
    Ledger {
        #[command(subcommand)]
        command: LedgerCommand,
    },
    /// The hash-chained audit trail.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// The gateway's health at one glance: scanners, outbox, facility
    /// store, storage, audit. Exit 0 healthy, 1 degraded (each reason
    /// listed). Read-only; works while the daemon is stopped.
    Status {
        #[command(flatten)]
        config: ConfigArg,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The write-ahead outbox.
    Outbox {
        #[command(subcommand)]
        command: OutboxCommand,
    },
    /// The state directory's identity.
    State {
        #[command(subcommand)]
        command: StateCommand,
    },
    /// Decode barcode text (GS as the raw byte, `<GS>`, `\x1d` or `^]`); exit 1 if any is invalid.
    Decode(DecodeArgs),
    /// List HID and serial scanner candidates with a config snippet and udev rule each.
    Devices(DevicesArgs),
    /// Pair a HID scanner by scanning with it: append its entry and udev rules.
    Pair(PairArgs),
}

#[derive(Subcommand)]
pub enum LedgerCommand {
    /// Print ledger entries as JSON lines.
    Export {
        #[command(flatten)]
        config: ConfigArg,
        /// Only entries captured at or after this time (RFC 3339).
        #[arg(long, conflicts_with = "follow")]
        since: Option<String>,
        /// With `[redis]`: keep reading the facility ledger stream as a
        /// member of consumer group `--group` (created if missing, from the
        /// first entry), printing each entry and flushing before it is
        /// acknowledged (at-least-once: dedup by `scan_uuid`). A restart
        /// with the same `--consumer` first prints what it was given and
        /// never acknowledged. Runs until killed or its output closes; reconnects when Redis fails.
        #[arg(long, requires = "group")]
        follow: bool,
        /// The consumer group (`--follow`): the facility ledger stream is
        /// trimmed only past what every group has acknowledged.
        #[arg(long, requires = "follow")]
        group: Option<String>,
        /// This consumer's name within the group (`--follow`; keep it
        /// stable across restarts). Default: `[gateway] id` (the host name).
        #[arg(long, requires = "follow")]
        consumer: Option<String>,
        /// Entries the group gave another consumer that has left them
        /// unacknowledged this many seconds (it is gone, or stuck) are
        /// claimed and printed by this one (`--follow`; looked for at
        /// start and every minute; 0: never). They would hold the stream's
        /// trim for ever.
        #[arg(
            long,
            requires = "follow",
            default_value_t = 3600,
            value_name = "SECONDS"
        )]
        claim_idle_secs: u64,
    },
}

#[derive(Subcommand)]
pub enum AuditCommand {
    /// Check every page of the database file (exit 3 if damaged), then the
    /// whole hash chain (exit 1 naming the first broken record), the
    /// ledger and the anchors; with `--archive`, the archives too, joined
    /// with the database into one chain (they verify without a database).
    Verify {
        #[command(flatten)]
        config: ConfigArg,
        /// An archive written by `audit export` (repeat for each; any order).
        #[arg(long, value_name = "FILE")]
        archive: Vec<PathBuf>,
    },
    /// Write the records not archived yet that were decided before DATE,
    /// with the ledger entries they committed, to a new self-verifying
    /// archive file. Read-only; works while the daemon runs.
    Export {
        #[command(flatten)]
        config: ConfigArg,
        /// Archive records decided before this time (RFC 3339, or a date
        /// YYYY-MM-DD: midnight UTC).
        #[arg(long, value_name = "DATE")]
        until: String,
        /// The archive file to create (never overwritten).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Verify archives against the database and register them, then
    /// remove the records that are archived, older than `[records]
    /// keep_days` and (with `[redis]`) anchored, with their ledger entries,
    /// leaving a checkpoint record. Stop the daemon first.
    Prune {
        #[command(flatten)]
        config: ConfigArg,
        /// An archive written by `audit export` (repeat for each).
        #[arg(long, value_name = "FILE")]
        archive: Vec<PathBuf>,
    },
    /// Show the committed scan and every echo suppressed against it.
    Trace {
        #[command(flatten)]
        config: ConfigArg,
        /// A scan UUID or a content key.
        id: String,
    },
}

#[derive(Subcommand)]
pub enum OutboxCommand {
    /// Counts by state and the age of the oldest undecided scan.
    Status {
        #[command(flatten)]
        config: ConfigArg,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Decide the scans a facility Redis left unresolved with this
    /// gateway's own store, for a gateway whose `[redis]` is gone for good.
    /// Stop the daemon first. A scan whose claim Redis did record (its
    /// reply was lost) is then decided again here, so use it only when the
    /// facility ledger is abandoned.
    DecideLocally(ConfigArg),
}

#[derive(Subcommand)]
pub enum StateCommand {
    /// Start over after the database was lost (missing, emptied or
    /// replaced): move what is in its place aside, create a new database
    /// and audit the reset as the first record of its chain, naming the
    /// lost state and its last anchored chain head. Stop the daemon first.
    Reset {
        #[command(flatten)]
        config: ConfigArg,
        /// The lost state's identity, as the refusal names it (typed
        /// confirmation).
        #[arg(long)]
        confirm: String,
    },
}

/// `--log-format` (what each means: [`crate::logging`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// journald if stderr is the journal stream (`$JOURNAL_STREAM`), else text.
    #[default]
    Auto,
    /// Plain text on stderr.
    Text,
    /// One JSON object per line on stderr.
    Json,
    /// The journal's native protocol.
    Journald,
}

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Reads in the throughput phase.
    #[arg(long, default_value_t = 1_000_000)]
    pub scans: u64,
    /// Reads per outbox/gate transaction in the throughput phase.
    #[arg(long, default_value_t = 1024)]
    pub batch: usize,
    /// Offered reads per second in the latency phase.
    #[arg(long, default_value_t = 200)]
    pub rate: u64,
    /// Duration of the latency phase in seconds.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Directory for the database (default: a temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Decide through this facility Redis (`redis://…`) instead of the
    /// embedded store: this thread admits (durable) as the daemon's outbox
    /// writer does, the daemon's claimer lanes decide.
    #[arg(long)]
    pub redis: Option<String>,
    /// With `--redis`: first build a backlog of this many `unresolved`
    /// scans (an outage), then time how fast it drains while a live stream
    /// of `--rate` scans/s is decided ahead of it.
    #[arg(long, default_value_t = 0)]
    pub backlog: u64,
    /// Count reads and decisions in the daemon's metrics and publish them
    /// every second (embedded store only), as `[metrics]` does.
    #[arg(long)]
    pub metrics: bool,
}

/// Arguments of `scangate decode`.
#[derive(clap::Args, Debug, Clone)]
pub struct DecodeArgs {
    /// Print exactly one JSON object per input (one per line) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Treat every argument as one raw HID report in hex and decode them
    /// as this scanner mode does: `pos` or `keyboard`.
    #[arg(long, value_name = "MODE", value_parser = ["pos", "keyboard"])]
    pub hid: Option<String>,
    /// Keyboard layout for `--hid keyboard`: `us` (default) or `de`.
    #[arg(long, value_name = "L", requires = "hid", value_parser = ["us", "de"])]
    pub layout: Option<String>,
    /// GS convention for `--hid keyboard`: auto, ctrl-], f8, none, substitute:STRING.
    #[arg(long, value_name = "G", requires = "hid")]
    pub gs: Option<String>,
    /// Keys that end a scan for `--hid keyboard`: enter (default), tab, both, none.
    #[arg(long, value_name = "K", requires = "hid", value_parser = ["enter", "tab", "both", "none"])]
    pub terminator: Option<String>,
    /// Barcode text, one scanned frame per argument. GS (0x1D) as the raw
    /// byte or written as `<GS>`, `\x1d` or `^]`. With `--hid`: one raw
    /// report per argument, in hex.
    #[arg(required = true, value_name = "TEXT")]
    pub text: Vec<OsString>,
}

/// Arguments of `scangate devices`.
#[derive(clap::Args, Debug, Clone)]
pub struct DevicesArgs {}

/// Arguments of `scangate pair`.
#[derive(clap::Args, Debug, Clone)]
pub struct PairArgs {
    /// Name of the new scanner (letters, digits, '-', '_', '.').
    pub name: String,
    /// Config file to append the `[[scanner]]` entry to.
    #[arg(long, short = 'c', env = "SCANGATE_CONFIG")]
    pub config: PathBuf,
    /// udev rules file to append the scanner's rules to.
    #[arg(long, default_value = "/etc/udev/rules.d/99-scangate.rules")]
    pub rules: PathBuf,
    /// What a read from it means: receive, dispense, waste, return, adjust.
    #[arg(long, default_value = "dispense")]
    pub scan_type: String,
    /// Give up after this many seconds without a scan.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
}
