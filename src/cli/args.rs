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
    ///
    /// Exit codes: 0 stopped by SIGTERM/SIGINT after draining. 2 a
    /// configuration error (the message names the key and the fix), a
    /// `[metrics] listen` address that cannot be bound, or a facility Redis
    /// that would lose claims (`maxmemory-policy` not `noeviction`), that
    /// refuses this gateway's `[dedup]` window and retention, its
    /// credentials (`WRONGPASS`, `NOAUTH`: the message names the ACL user
    /// and `[redis] password_file`) or its `shared` scanners, or whose ACL
    /// user lacks a grant. 3 the state directory not writable or in use by
    /// another scangate; the database damaged, unreadable or of another
    /// schema version (never overwritten); or lost: missing, emptied or
    /// replaced while `state-id` says one was here (restore it, or `state
    /// reset`); also damage the page check after start finds. 4 a stage
    /// of the daemon died, or scans could not be stored while stopping.
    Run(ConfigArg),
    /// Validate the configuration without touching hardware: also that
    /// the state directory is writable by the service user and the
    /// `[redis]` password and CA files readable.
    ///
    /// Run as root, the state directory is checked as user `scangate` by
    /// mode bits; `runuser -u scangate -- scangate check-config` checks it
    /// as the service. A state directory that does not exist yet and
    /// cannot be created is a warning: the unit's `StateDirectory=` creates
    /// it at start.
    ///
    /// Exit codes: 0 the configuration is good. 1 with `--online`: the
    /// facility Redis cannot be reached, or a scanner's device path is not
    /// a character device this user can read and write. 2 a configuration
    /// error, an unreadable `[redis] password_file` or `ca_file`, or with
    /// `--online` a facility Redis that refuses this gateway (eviction
    /// policy, credentials, a missing ACL grant, other window or retention).
    /// 3 the state directory cannot be used.
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
    ///
    /// Three PTY scanners feed the real daemon pipeline in a temporary
    /// state directory for about 10 s: double-fires, retransmits, operator
    /// re-scans, re-dispenses after the window, one product on two
    /// scanners, garbage. The table is computed from the ledger, the outbox
    /// and the audit trail.
    ///
    /// Exit codes: 0 every pick is in the ledger exactly once and nothing
    /// was lost. 1 a scan was lost or a pick doubled. 4 the demo could not
    /// run.
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
    ///
    /// Any member of group `scangate` may run it. Degraded means one or
    /// more of: the daemon not running; a configured scanner not
    /// connected; a scan undecided for over 60 s; the facility store not
    /// answering; free space below `[outbox] min_free_mb` (no scan is
    /// stored or acknowledged) or close to it; fewer days of space left
    /// than `[outbox] warn_days_left`; product or recall data older than
    /// `[checks] max_data_age_days`, or unreadable (without any, the
    /// checks that need it are off, which is no reason).
    ///
    /// Exit codes: 0 healthy. 1 degraded, each reason printed with its
    /// fix. 2 a configuration error. 3 the database cannot be read (lost,
    /// damaged, or its WAL left without its index: start the daemon, or
    /// run as the service user).
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
    /// Product data: the FDA NDC Directory, imported to the gateway.
    Products {
        #[command(subcommand)]
        command: ProductsCommand,
    },
    /// Recall data: openFDA's drug recalls, imported to the gateway.
    Recalls {
        #[command(subcommand)]
        command: RecallsCommand,
    },
    /// The state directory's identity.
    State {
        #[command(subcommand)]
        command: StateCommand,
    },
    /// Decode barcode text (GS as the raw byte, `<GS>`, `\x1d` or `^]`); exit 1 if any is invalid.
    ///
    /// Every input is reported, invalid ones with the reason (which never
    /// repeats the scanned data). Exit codes: 0 every input decoded
    /// (valid barcodes that are no dispensable product included). 1 at
    /// least one input is not a valid barcode. 2 a usage error. 4 stdout
    /// cannot be written.
    Decode(DecodeArgs),
    /// List HID and serial scanner candidates with a config snippet and udev rule each.
    ///
    /// Exit codes: 0 listed (also when nothing is plugged in). 4 the
    /// devices cannot be enumerated.
    Devices(DevicesArgs),
    /// Pair a HID scanner by scanning with it: append its entry and udev rules.
    ///
    /// Listens on every HID scanner interface no `[[scanner]]` of the
    /// config claims, grabbing keyboards so the test scan types nowhere,
    /// and pairs the first one whose scan decodes (text typed on a
    /// keyboard pairs nothing; Esc cancels). Serial scanners are paired by
    /// hand from `scangate devices`. Then: `udevadm control --reload &&
    /// udevadm trigger`, and `systemctl reload scangate`.
    ///
    /// Exit codes: 0 paired. 1 no scan that decodes came before
    /// `--timeout`, the pairing was cancelled (Esc), or there is no
    /// unpaired HID scanner. 2 a usage or configuration error. 4 none of
    /// the scanner interfaces can be read (e.g. not run as root), or a
    /// file cannot be written.
    Pair(PairArgs),
    /// Pack what support needs into one zip archive, without a secret or a
    /// scanned payload in it.
    ///
    /// In it: the version and build, the OS and kernel, the config with
    /// every secret replaced by `<redacted>` (passwords, tokens, a URL's
    /// user part and query), `status --json`, `check-config`, `devices`,
    /// the udev rules that name scangate, the unit's last journal lines
    /// (where `journalctl` is), the state directory's files and sizes, the
    /// database's integrity check and row counts, and a metrics snapshot.
    /// Never a ledger entry, an audit record or a scan's data. Run it as
    /// root or a member of group `scangate`; it works with the daemon
    /// running or stopped, and with a config that does not load.
    ///
    /// Exit codes: 0 written. 2 `--out` exists already (it is never
    /// overwritten). 4 the archive cannot be written.
    Diag {
        #[command(flatten)]
        config: ConfigArg,
        /// The archive to write (a new file).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Every read and its decision, live, from the running daemon: time,
    /// scanner, symbology, GTIN, NDC, lot, expiry, serial, the decision
    /// with its reason or the entry it echoes, the ACK and the signal.
    ///
    /// It attaches to the daemon's tap socket (`tap.sock` in the state
    /// directory: root, the service user and members of group `scangate`)
    /// and shows what happens from then on. Several may run at once; one
    /// that falls behind loses lines (it says how many) and never slows a
    /// scanner. The raw bytes of a read only with `--raw`.
    ///
    /// Exit codes: 0 the daemon stopped, or `--count` decisions shown. 1
    /// the daemon is not running (no tap socket), or refused this reader
    /// (too many attached). 2 a configuration or usage error. 4 the
    /// socket cannot be read.
    Tap(TapArgs),
    /// The gateway at a glance, full screen, refreshed each second: per
    /// scanner its reads per minute, decisions, last read, ACK p99,
    /// feedback channel and whether it is plugged in; the outbox, the
    /// facility store, the disk, the latest alerts.
    ///
    /// Keys: q quits, s changes the sort, / filters by scanner name,
    /// up/down select a scanner (what it is shows below the table). Needs
    /// a terminal of at least 80x24; works over SSH. The decision counts
    /// are those since `top` started (from the tap socket, as `tap`).
    ///
    /// Exit codes: 0 left with q, Ctrl-C, SIGINT, SIGTERM or SIGHUP (the
    /// terminal is put back). 1 the daemon is not running. 2 a
    /// configuration error, no terminal, or one smaller than 80x24. 3 the
    /// database cannot be read. 4 the terminal failed.
    Top {
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Print the control labels (REPEAT, QUANTITY N, ACKNOWLEDGE) for the
    /// counter: SVG files, ZPL for a label printer, or text.
    ///
    /// Staff scan REPEAT before an item the scanner took for an echo of
    /// the one before (the next read on that scanner is another item),
    /// QUANTITY N before an item to count N units, and ACKNOWLEDGE after
    /// an alert, to record that they saw the scanner's alerts. The
    /// contents come from `[controls]` (defaults without it); REPEAT and
    /// QUANTITY apply to the next read on the same scanner within
    /// `[controls] within_ms`. Each label is a Code 128 barcode with what
    /// it does printed above it, for a 50 x 25 mm label. `--format svg`
    /// (default) writes `scangate-repeat.svg`, `scangate-qty-N.svg` and
    /// `scangate-acknowledge.svg` to `--out` and lists
    /// them on stdout; `--format zpl` prints ZPL II for a 203 dpi Zebra
    /// printer (`scangate labels --format zpl | nc PRINTER 9100`);
    /// `--format text` prints each content and what it does, a tab
    /// between, one a line.
    ///
    /// Exit codes: 0 printed. 2 a configuration error (a `[controls]`
    /// content that reads as a product barcode, …) or `--out` with a
    /// format that prints to stdout. 4 a file or stdout cannot be written.
    Labels(LabelsArgs),
}

#[derive(Subcommand)]
pub enum LedgerCommand {
    /// Print ledger entries as JSON lines, or as GS1 EPCIS 2.0 events.
    ///
    /// Embedded, the gateway's own ledger; with `[redis]`, the facility
    /// ledger stream (what it still keeps), or with `--local` the
    /// gateway's own. Exit codes: 0 done (with `--follow`: its output
    /// closed). 2 a usage error (a bad `--since`, `--schedule` or name, `--follow`
    /// without `--consumer` or `--group`, `--group` without `[redis]`,
    /// `--echoes` with `--format epcis`). 3 the database cannot be read.
    /// 4 the facility Redis cannot be read (with `--follow`, only at the
    /// first connection: later failures are retried); with `--format
    /// epcis`, an entry that cannot be an event; with `--consumer`, its
    /// cursor cannot be written (run it as the service user) or the
    /// consumer was removed while following.
    Export {
        #[command(flatten)]
        config: ConfigArg,
        /// json: scangate's JSON lines, one entry a line. epcis: one EPCIS
        /// 2.0 `EPCISDocument` (JSON-LD) with an `ObjectEvent` per entry;
        /// with `--follow`, one `ObjectEvent` (with its `@context`) a line,
        /// as each entry comes. docs/integrator.md has the mapping.
        #[arg(long, value_enum, default_value_t)]
        format: ExportFormat,
        /// Only entries captured at or after this time (RFC 3339).
        #[arg(long, conflicts_with = "follow")]
        since: Option<String>,
        /// Only entries of these DEA schedules (CI, CII, CIII, CIV, CV;
        /// several separated by commas), as the product data listed the
        /// item when it was committed: e.g. the Schedule II records 21 CFR
        /// 1304.04(h) wants kept apart. An entry without a schedule (not
        /// listed as controlled, no product data then, or committed by a
        /// release before 0.7.0) is left out.
        #[arg(long, value_delimiter = ',', conflicts_with = "echoes")]
        schedule: Vec<String>,
        /// Print, instead of entries, the reads this gateway suppressed as
        /// echoes (from its own outbox, with or without `[redis]`): each
        /// names its entry (`echo_of`) and says whether it was `ambiguous`
        /// — a label without a serial that may have been a further
        /// identical item — or a certain echo. Kept for `[dedup]
        /// retention_hours`.
        #[arg(long, conflicts_with_all = ["follow", "local"])]
        echoes: bool,
        /// With `[redis]`: this gateway's own ledger (its database, the
        /// scans it committed) instead of the facility stream.
        #[arg(long, conflicts_with = "group")]
        local: bool,
        /// Keep printing entries as they come, each page flushed before it
        /// is acknowledged (at-least-once: dedup by `scan_uuid`). With
        /// `--consumer` alone: the gateway's own ledger, from a cursor kept
        /// in its database under that name (registered at first use, from
        /// the first entry; a restart first prints what was never
        /// acknowledged; run it as the service user). With `--group`
        /// (`[redis]`): the facility ledger stream as a member of that
        /// consumer group (created if missing, from the first entry).
        /// Runs until killed or its output closes; reconnects when Redis
        /// fails.
        #[arg(long)]
        follow: bool,
        /// The consumer group (`--follow`, `[redis]`): the facility ledger
        /// stream is trimmed only past what every group has acknowledged.
        #[arg(long, requires = "follow")]
        group: Option<String>,
        /// With `--group`: this consumer's name within the group (keep it
        /// stable across restarts; default `[gateway] id`, the host name).
        /// Without: the name of this consumer's cursor in the gateway's
        /// database (`ledger consumers` lists them); `audit prune` keeps
        /// the entries it has not acknowledged.
        #[arg(long, requires = "follow")]
        consumer: Option<String>,
        /// Entries the group gave another consumer that has left them
        /// unacknowledged this many seconds (it is gone, or stuck) are
        /// claimed and printed by this one (`--follow --group`; looked for
        /// at start and every minute; 0: never). They would hold the
        /// stream's trim for ever.
        #[arg(
            long,
            requires = "group",
            default_value_t = 3600,
            value_name = "SECONDS"
        )]
        claim_idle_secs: u64,
    },
    /// The consumers that follow the gateway's own ledger with a cursor in
    /// its database (`ledger export --follow --consumer NAME`).
    Consumers {
        #[command(subcommand)]
        command: ConsumersCommand,
    },
}

#[derive(Subcommand)]
pub enum ConsumersCommand {
    /// List each consumer: its cursor (the last entry it acknowledged),
    /// the entries after it, the capture time of the oldest of them, and
    /// when it last acknowledged. Read-only; works while the daemon runs.
    ///
    /// Exit codes: 0 listed (also when there is none). 3 the database
    /// cannot be read.
    List {
        #[command(flatten)]
        config: ConfigArg,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove a consumer and its cursor: `audit prune` no longer keeps the
    /// entries it has not acknowledged, and a follower still running
    /// under that name stops (exit 3). For a consumer nobody runs any
    /// more. Works while the daemon runs; run it as the service user.
    ///
    /// Exit codes: 0 removed. 1 no consumer of that name. 3 the database
    /// cannot be written.
    Remove {
        #[command(flatten)]
        config: ConfigArg,
        /// The consumer's name, as `ledger consumers list` shows it.
        name: String,
    },
}

#[derive(Subcommand)]
pub enum AuditCommand {
    /// Check every page of the database file (exit 3 if damaged), then the
    /// whole hash chain (exit 1 naming the first broken record), the
    /// ledger and the anchors; with `--archive`, the archives too, joined
    /// with the database into one chain (they verify without a database).
    ///
    /// The chain is checked from the first record (or from the checkpoint
    /// record, if records were pruned), every ledger entry against the hash
    /// its commit record holds, and the chain's end against the heads
    /// anchored outside the file (`state-id`; with `[redis]` the facility
    /// store).
    ///
    /// Exit codes: 0 intact. 1 a broken record or ledger entry, a lost
    /// tail, an anchor that cannot be reached, or an archive altered,
    /// truncated, not an archive or not joining the chain (each named).
    /// 3 the database is damaged, missing or lost. 4 an archive file
    /// cannot be read.
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
    ///
    /// Exit codes: 0 written and verified. 1 read back, the file is not
    /// what was written. 2 nothing to archive before DATE, the file exists
    /// already, a bad DATE, or the chain or ledger is not intact (nothing
    /// is exported: run `audit verify`). 3 the database cannot be read.
    /// 4 the file cannot be written.
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
    ///
    /// A record whose scan's ledger entry is still inside the dedup
    /// horizon (`[dedup] retention_hours`) is never removed. When nothing
    /// may go, it says which limit held it back.
    ///
    /// Exit codes: 0 done (also when nothing may be pruned yet). 1 an
    /// archive is altered, truncated or not an archive. 2 an archive of
    /// another state, or the database's chain or ledger not intact
    /// (nothing is pruned: run `audit verify`). 3 the daemon runs, or the
    /// database cannot be used. 4 an archive cannot be read, or with
    /// `[redis]` the facility store does not answer (nothing is pruned).
    Prune {
        #[command(flatten)]
        config: ConfigArg,
        /// An archive written by `audit export` (repeat for each).
        #[arg(long, value_name = "FILE")]
        archive: Vec<PathBuf>,
    },
    /// Show the committed scan and every echo suppressed against it.
    ///
    /// Every read of the label on this gateway: the transmissions, the
    /// ledger entries they made, the commit (with `[redis]`, possibly
    /// another gateway's) and each echo suppressed against it.
    ///
    /// Exit codes: 0 found, every decision with its record. 1 no decision
    /// about it, or a decision of this gateway that has no readable audit
    /// record (run `audit verify`). 3 the database cannot be read.
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
    ///
    /// Exit codes: 0 decided. 2 the config still has `[redis]`. 3 the
    /// daemon runs, or the database cannot be used.
    DecideLocally(ConfigArg),
}

#[derive(Subcommand)]
pub enum ProductsCommand {
    /// Import the FDA NDC Directory: `ndctext.zip` as the FDA publishes it,
    /// or its `product.txt` (with `package.txt` beside it), or a directory
    /// holding both.
    ///
    /// The data is built whole in `products.sqlite.new` in the state
    /// directory and renamed to `products.sqlite`: a failed or malformed
    /// file leaves the data imported before as it was. Runs beside the
    /// daemon, which reads the new data at its next lookup; run it as the
    /// service user (`runuser -u scangate --`) or as root.
    ///
    /// Exit codes: 0 imported. 2 the file is not the directory as
    /// published (a cut zip, a missing column, a line that cannot be read:
    /// the message names the file and line), or a configuration error. 3
    /// the state directory cannot be written, or another import runs. 4
    /// the file cannot be read.
    Import {
        #[command(flatten)]
        config: ConfigArg,
        /// `ndctext.zip`, `product.txt` or a directory holding the two files.
        file: PathBuf,
    },
    /// Show the package an NDC or GTIN names, its product, and the ongoing
    /// recalls of it.
    ///
    /// Takes a package NDC hyphenated (`0067-6382-30`, `00067-6382-30`),
    /// its 10 or 11 digits, a GTIN-14 or a UPC-A. Ten digits fit up to
    /// three configurations: every package they name is shown.
    ///
    /// Exit codes: 0 shown. 1 no package of the directory has it, or no
    /// product data is imported. 2 the text is no NDC or GTIN, or a
    /// configuration error. 3 the data file cannot be read.
    Show {
        #[command(flatten)]
        config: ConfigArg,
        /// The NDC or GTIN.
        ndc: String,
        /// With this lot (as the barcode's AI 10 carries it): which recalls
        /// name it.
        #[arg(long)]
        lot: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum RecallsCommand {
    /// Import openFDA's drug enforcement download
    /// (`drug-enforcement-0001-of-0001.json`, or its `.json.zip`): the
    /// ongoing recalls, the packages and lots each names.
    ///
    /// Built whole in `recalls.sqlite.new` and renamed to
    /// `recalls.sqlite`, like `products import`. A recall found for a
    /// read warns; it never refuses one.
    ///
    /// Exit codes: 0 imported. 2 the file is not that download (another
    /// endpoint's, not JSON, cut, not UTF-8: the message names the file
    /// and the line or record), or a configuration error. 3 the state
    /// directory cannot be written, or another import runs. 4 the file
    /// cannot be read.
    Import {
        #[command(flatten)]
        config: ConfigArg,
        /// The JSON file or the zip holding it.
        file: PathBuf,
    },
}

#[derive(Subcommand)]
pub enum StateCommand {
    /// Start over after the database was lost (missing, emptied or
    /// replaced): move what is in its place aside, create a new database
    /// and audit the reset as the first record of its chain, naming the
    /// lost state and its last anchored chain head. Stop the daemon first.
    ///
    /// Exit codes: 0 reset. 2 nothing was lost, or `--confirm` is not the
    /// lost state's identity. 3 the daemon runs, or the state directory
    /// cannot be used.
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
    /// With `--metrics`: attach this many `scangate tap --json` readers
    /// (processes of their own) to a tap socket in `--dir` while the bench
    /// runs, as the daemon serves it: the tap's cost.
    #[arg(long, default_value_t = 0, requires = "metrics")]
    pub tap_readers: u32,
    /// With `--metrics`: attach one more tap reader that never reads.
    #[arg(long, requires = "metrics")]
    pub tap_blocked: bool,
    /// Decide without the checks at the counter (expiry, recall, unknown
    /// product), which run by default as in the daemon, against the
    /// product and recall data in `--dir` if imported there: their cost
    /// is the difference.
    #[arg(long)]
    pub no_checks: bool,
    /// What the embedded bench's reads mean (`receive`, `dispense`,
    /// `waste`, `return`, `adjust`): `receive` keeps every serialised
    /// commit as a receipt, the suspect check's cost.
    #[arg(long, default_value = "dispense",
          value_parser = ["receive", "dispense", "waste", "return", "adjust"])]
    pub scan_type: String,
    /// Simulate this many gateways against the facility store (`--redis`
    /// or `--cluster`), each on its own connection, claiming as the
    /// claimer does: what a facility and a chain cost the store.
    #[arg(long, default_value_t = 0)]
    pub gateways: u32,
    /// With `--gateways`: spread them over this many facilities.
    #[arg(long, default_value_t = 1, requires = "gateways")]
    pub facilities: u32,
    /// With `--gateways`: a Redis Cluster's seed nodes (host:port,…)
    /// instead of `--redis`.
    #[arg(long, value_delimiter = ',', requires = "gateways")]
    pub cluster: Vec<String>,
    /// With `--gateways`: reads a second each gateway offers in the shift
    /// phases, in bursts.
    #[arg(long, default_value_t = 2.0, requires = "gateways")]
    pub gateway_rate: f64,
    /// With `--gateways`: a busy facility's 72 hours of this many claims,
    /// re-published after its keys are deleted while a shift runs.
    #[arg(long, default_value_t = 0, requires = "gateways")]
    pub republish: u64,
}

/// Arguments of `scangate tap`.
#[derive(clap::Args)]
pub struct TapArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Only this scanner's reads (repeat for more).
    #[arg(long, value_name = "NAME")]
    pub scanner: Vec<String>,
    /// Only reads decided so: committed, echo (ambiguous ones too),
    /// ambiguous, rejected, waiting, control (repeat for more).
    #[arg(long, value_name = "D", value_parser = ["committed", "echo", "ambiguous", "rejected", "waiting", "control"])]
    pub decision: Vec<String>,
    /// One JSON object per line, as the daemon sends them (`event`: read,
    /// decided, acked, told, lost).
    #[arg(long)]
    pub json: bool,
    /// The raw bytes of each read too (hex): they may hold more than the
    /// product's identity.
    #[arg(long)]
    pub raw: bool,
    /// Stop after this many decisions shown.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
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

/// Arguments of `scangate labels`.
#[derive(clap::Args, Clone)]
pub struct LabelsArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// svg: one file per label in --out; zpl: ZPL II on stdout, for a
    /// Zebra label printer; text: each content and what it does on stdout.
    #[arg(long, value_enum, default_value_t)]
    pub format: LabelFormat,
    /// Directory the SVG files are written to (created if missing; files
    /// of the same name are replaced). Default: the current directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `scangate ledger export --format`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// scangate's JSON lines: one ledger entry a line.
    #[default]
    Json,
    /// GS1 EPCIS 2.0 JSON-LD: a document, or with --follow an event a line.
    Epcis,
}

/// `scangate labels --format`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LabelFormat {
    /// One SVG file per label (50 x 25 mm), for any printer.
    #[default]
    Svg,
    /// ZPL II on stdout, for a 203 dpi Zebra label printer.
    Zpl,
    /// One line per label: the content, a tab, what it does.
    Text,
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
