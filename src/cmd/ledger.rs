//! `scangate ledger export [--format json|epcis] [--since T] [--local]
//! [--echoes | --follow (--consumer C | --group G)]` and `ledger consumers
//! list | remove`: the ledger as JSON lines or as GS1 EPCIS 2.0 (or, with
//! `--echoes`, this gateway's suppressed reads). With `[redis]` the ledger
//! is the facility's stream ([`crate::facility::stream`]; `--follow
//! --group` reads it as a member of a consumer group); without, or with
//! `--local`, the gateway's own ([`crate::ledger`]; `--follow --consumer`
//! reads it from a cursor in its database: `ledger/follow.rs`).

use super::{Failure, connect, resolve};
use crate::cli::args::{ExportFormat, LedgerCommand};
use crate::config::{RedisSettings, Settings};
use crate::exit::Exit;
use crate::facility::FacilityError;
use crate::ledger::epcis::{self, DocumentWriter, EpcisError, Observation};
use crate::products::directory::SCHEDULES;
use crate::store::Store;
use serde::Deserialize;
use std::io::{BufWriter, StdoutLock, Write};

pub(super) mod consumers;
mod follow;

/// Run a `ledger` subcommand.
pub fn run(command: LedgerCommand) -> Result<Exit, Failure> {
    match command {
        LedgerCommand::Consumers { command } => consumers::run(command),
        LedgerCommand::Export {
            config,
            format,
            since,
            schedule,
            echoes,
            local,
            follow,
            group,
            consumer,
            claim_idle_secs,
        } => {
            let since_ms = since.as_deref().map(parse_since).transpose()?;
            let schedules = parse_schedules(&schedule)?;
            let settings = resolve(&config)?;
            let stdout = std::io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            if echoes {
                if format == ExportFormat::Epcis {
                    return Err(Failure::Usage(
                        "--echoes lists suppressed reads, which are not ledger entries and have no EPCIS form: drop --format epcis".into(),
                    ));
                }
                // Echoes are the gateway's own, in either mode.
                let store = Store::open_read_only(&settings.config.state_dir())?;
                let gateway = &settings.config.gateway.id;
                crate::outbox::echoes::for_each(&store, gateway, since_ms, |e| {
                    write_line(&mut out, &e)
                })?;
                let _ = out.flush();
                return Ok(Exit::Ok);
            }
            let gln = settings.config.gateway.gln.clone();
            match &settings.redis {
                // With a facility store, its stream is the ledger.
                Some(redis) if !local => {
                    if follow && group.is_none() {
                        return Err(Failure::Usage(
                            "--follow with [redis] reads the facility ledger stream as a member of a consumer group: add --group NAME; to follow this gateway's own ledger (the scans it committed) instead, use --local --consumer NAME".into(),
                        ));
                    }
                    let follow = group.filter(|_| follow).map(|group| Follow {
                        group,
                        consumer,
                        claim_idle_secs,
                    });
                    let mut sink = Sink::new(format, follow.is_some(), gln, schedules);
                    export_facility(&settings, redis, since_ms, follow, &mut sink, &mut out)?;
                    sink.finish(&mut out)?;
                }
                _ if group.is_some() => {
                    return Err(Failure::Usage(format!(
                        "--group reads the facility ledger stream, and {}: follow its own ledger with --consumer NAME instead",
                        if local {
                            "--local asks for this gateway's own ledger"
                        } else {
                            "this gateway has no [redis] section (its ledger is the embedded one)"
                        }
                    )));
                }
                _ if follow => {
                    let Some(name) = consumer else {
                        return Err(Failure::Usage(
                            "--follow on the gateway's own ledger needs --consumer NAME: the name its cursor is kept under in the database (keep it stable across restarts)".into(),
                        ));
                    };
                    let sink = Sink::new(format, true, gln, schedules);
                    follow::run(&settings.config.state_dir(), &name, sink, &mut out)?;
                }
                _ => {
                    let store = Store::open_read_only(&settings.config.state_dir())?;
                    let mut sink = Sink::new(format, false, gln, schedules);
                    crate::ledger::for_each(&store, since_ms, |e| {
                        sink.entry(&mut out, Entry::Embedded(&e))
                    })?;
                    sink.finish(&mut out)?;
                }
            }
            let _ = out.flush();
            Ok(Exit::Ok)
        }
    }
}

/// A ledger entry as read: from the embedded ledger, or the facility
/// stream's JSON object.
enum Entry<'a> {
    Embedded(&'a crate::ledger::LedgerEntry),
    Stream(&'a serde_json::Value),
}

/// Where exported entries go, in the chosen format.
struct Sink {
    /// The facility's GLN, for EPCIS events.
    gln: Option<String>,
    /// `--schedule`: only entries of these DEA schedules (empty: all).
    schedules: Vec<&'static str>,
    shape: Shape,
    /// An entry that could not be an EPCIS event: the export stops there.
    failed: Option<EpcisError>,
}

/// The output's shape.
enum Shape {
    /// scangate's JSON lines.
    Lines,
    /// One EPCIS document, its events written as they come; begun at the
    /// first event or at the end (so nothing is written if the ledger
    /// cannot be read at all), dated when the export started.
    Document {
        doc: Option<DocumentWriter>,
        created: String,
    },
    /// EPCIS events one a line, each with its `@context` (`--follow`: a
    /// consumer reading a stream cannot wait for a document's end).
    Events,
}

impl Sink {
    /// The output of `format` (with `--follow`: `follow`).
    fn new(
        format: ExportFormat,
        follow: bool,
        gln: Option<String>,
        schedules: Vec<&'static str>,
    ) -> Sink {
        let shape = match format {
            ExportFormat::Json => Shape::Lines,
            ExportFormat::Epcis if follow => Shape::Events,
            ExportFormat::Epcis => Shape::Document {
                doc: None,
                created: crate::capture::clock::rfc3339_ms(chrono::Utc::now().timestamp_millis()),
            },
        };
        Sink {
            gln,
            schedules,
            shape,
            failed: None,
        }
    }

    /// Write one entry. An error stops the export: the reader went away,
    /// or (kept in `failed`) the entry cannot be an event.
    fn entry(&mut self, out: &mut impl Write, entry: Entry<'_>) -> std::io::Result<()> {
        if !self.schedules.is_empty() {
            let schedule = match entry {
                Entry::Embedded(e) => e.dea_schedule.as_deref(),
                Entry::Stream(v) => v.get("dea_schedule").and_then(|s| s.as_str()),
            };
            if !schedule.is_some_and(|s| self.schedules.contains(&s)) {
                return Ok(());
            }
        }
        if matches!(self.shape, Shape::Lines) {
            return match entry {
                Entry::Embedded(e) => write_line(out, e),
                Entry::Stream(v) => write_line(out, v),
            };
        }
        let event = match entry {
            Entry::Embedded(e) => epcis::object_event(&Observation::from(e), self.gln.as_deref()),
            Entry::Stream(v) => Observation::deserialize(v)
                .map_err(|e| EpcisError::Unreadable(stream_id(v), e.to_string()))
                .and_then(|o| epcis::object_event(&o, self.gln.as_deref())),
        };
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                let stop = std::io::Error::other(e.to_string());
                self.failed = Some(e);
                return Err(stop);
            }
        };
        match &mut self.shape {
            Shape::Document { doc, created } => {
                let doc = match doc {
                    Some(doc) => doc,
                    None => doc.insert(DocumentWriter::begin(out, created)?),
                };
                doc.event(out, &event)
            }
            _ => write_line(out, &epcis::standalone(event)),
        }
    }

    /// Close the output (a document's end), or say why the export stopped
    /// early if an entry could not be an event. A document cut short is
    /// left open, so that no reader takes it for the whole ledger.
    fn finish(self, out: &mut impl Write) -> Result<(), Failure> {
        if let Some(e) = self.failed {
            return Err(Failure::Runtime(format!(
                "{e}; the export stopped there, its output cut short (the entries before it were written). Export it with --format json and report it"
            )));
        }
        if let Shape::Document { doc, created } = self.shape {
            // A reader that went away is no failure of the export.
            let doc = match doc {
                Some(doc) => Ok(doc),
                None => DocumentWriter::begin(out, &created),
            };
            let _ = doc.and_then(|doc| doc.finish(out));
        }
        Ok(())
    }
}

/// The `stream_id` of a facility stream entry, for a message.
fn stream_id(v: &serde_json::Value) -> String {
    v.get("stream_id")
        .and_then(|s| s.as_str())
        .unwrap_or("?")
        .to_string()
}

/// `--schedule`: each a DEA schedule (any case), as the ledger writes it
/// ([`SCHEDULES`], the NDC Directory's).
fn parse_schedules(given: &[String]) -> Result<Vec<&'static str>, Failure> {
    given
        .iter()
        .map(|g| {
            SCHEDULES
                .into_iter()
                .find(|s| s.eq_ignore_ascii_case(g.trim()))
                .ok_or_else(|| {
                    Failure::Usage(format!(
                        "--schedule {g:?} is not a DEA schedule: use {} (several separated by commas)",
                        SCHEDULES.join(", ")
                    ))
                })
        })
        .collect()
}

/// `--since`: an RFC 3339 time, as Unix ms.
fn parse_since(s: &str) -> Result<i64, Failure> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp_millis())
        .map_err(|e| {
            Failure::Usage(format!(
                "--since {s:?} is not an RFC 3339 time ({e}); use e.g. 2026-11-30T08:00:00Z"
            ))
        })
}

/// `--follow`: read the stream as this member of this consumer group.
struct Follow {
    group: String,
    consumer: Option<String>,
    claim_idle_secs: u64,
}

/// Export the facility ledger stream: what it holds (from `since_ms`), or,
/// with `follow`, for as long as it runs.
fn export_facility(
    settings: &Settings,
    redis: &RedisSettings,
    since_ms: Option<i64>,
    follow: Option<Follow>,
    sink: &mut Sink,
    out: &mut BufWriter<StdoutLock>,
) -> Result<(), Failure> {
    let cfg = &settings.config;
    let mut facility = connect(cfg, redis).map_err(ledger_unreadable)?;
    let Some(follow) = follow else {
        return facility
            .for_each_ledger_entry(since_ms, |v| sink.entry(out, Entry::Stream(&v)))
            .map_err(ledger_unreadable);
    };
    let consumer = follow.consumer.unwrap_or_else(|| cfg.gateway.id.clone());
    for (flag, name) in [("--group", &follow.group), ("--consumer", &consumer)] {
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(Failure::Usage(format!(
                "{flag} {name:?} is not a name: use letters, digits, '-', '_' or '.'"
            )));
        }
    }
    let block_ms = (redis.config.command_timeout_ms / 2).max(5);
    crate::facility::stream::follow_reconnecting(
        facility,
        || connect(cfg, redis),
        &follow.group,
        &consumer,
        block_ms,
        (follow.claim_idle_secs > 0)
            .then(|| std::time::Duration::from_secs(follow.claim_idle_secs)),
        |page| {
            for (_, v) in page {
                sink.entry(out, Entry::Stream(v))?;
            }
            out.flush()
        },
    );
    Ok(())
}

/// `ledger export` could not read the facility stream.
fn ledger_unreadable(e: FacilityError) -> Failure {
    Failure::Runtime(format!(
        "{e}. With [redis] set, the ledger is the facility's stream: reach that server (is it running, is [redis] url right?) and export again"
    ))
}

/// Write `value` as one JSON line.
fn write_line(out: &mut impl Write, value: &impl serde::Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value).map_err(std::io::Error::other)?;
    out.write_all(b"\n")
}
