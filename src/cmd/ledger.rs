//! `scangate ledger export [--since T] [--echoes | --follow --group G]`: the
//! ledger as JSON lines (or, with `--echoes`, this gateway's suppressed reads). With `[redis]` the ledger is the facility's stream
//! ([`crate::facility::stream`]; `--follow` reads it as a member of a
//! consumer group); without, the embedded store's ([`crate::ledger`]).

use super::{Failure, connect, resolve};
use crate::cli::args::LedgerCommand;
use crate::config::{RedisSettings, Settings};
use crate::exit::Exit;
use crate::facility::FacilityError;
use crate::store::Store;
use std::io::{BufWriter, StdoutLock, Write};

/// Run a `ledger` subcommand.
pub fn run(command: LedgerCommand) -> Result<Exit, Failure> {
    match command {
        LedgerCommand::Export {
            config,
            since,
            echoes,
            follow,
            group,
            consumer,
            claim_idle_secs,
        } => {
            let since_ms = since.as_deref().map(parse_since).transpose()?;
            let settings = resolve(&config)?;
            let stdout = std::io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            if echoes {
                // Echoes are the gateway's own, in either mode.
                let store = Store::open_read_only(&settings.config.state_dir())?;
                let gateway = &settings.config.gateway.id;
                crate::outbox::echoes::for_each(&store, gateway, since_ms, |e| {
                    write_line(&mut out, &e)
                })?;
                let _ = out.flush();
                return Ok(Exit::Ok);
            }
            match &settings.redis {
                // With a facility store, its stream is the ledger.
                Some(redis) => {
                    let follow = group.filter(|_| follow).map(|group| Follow {
                        group,
                        consumer,
                        claim_idle_secs,
                    });
                    export_facility(&settings, redis, since_ms, follow, &mut out)?;
                }
                None if follow => {
                    return Err(Failure::Usage(
                        "--follow reads the facility ledger stream, and this gateway has no [redis] section: its ledger is the embedded one (export it without --follow)".into(),
                    ));
                }
                None => {
                    let store = Store::open_read_only(&settings.config.state_dir())?;
                    crate::ledger::for_each(&store, since_ms, |e| write_line(&mut out, &e))?;
                }
            }
            let _ = out.flush();
            Ok(Exit::Ok)
        }
    }
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
    out: &mut BufWriter<StdoutLock>,
) -> Result<(), Failure> {
    let cfg = &settings.config;
    let mut facility = connect(cfg, redis).map_err(ledger_unreadable)?;
    let Some(follow) = follow else {
        return facility
            .for_each_ledger_entry(since_ms, |v| write_line(out, &v))
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
                write_line(out, v)?;
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
