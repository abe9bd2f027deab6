//! `scangate audit verify | export | prune | trace`: the commands over the
//! hash-chained audit trail. What they check, write and remove is
//! [`crate::audit`]'s (archives: [`crate::audit::archive`]); here they are
//! read from the state directory and printed for a technician.

use super::{Failure, connect, load, resolve};
use crate::audit::archive::{self, ArchiveError, Checked};
use crate::audit::{self, Verification};
use crate::cli::args::{AuditCommand, ConfigArg};
use crate::config::Settings;
use crate::events::Event as _;
use crate::exit::Exit;
use crate::store::identity::{self, Head};
use crate::store::{Store, StoreError};
use std::path::{Path, PathBuf};

/// Run an `audit` subcommand.
pub fn run(command: AuditCommand) -> Result<Exit, Failure> {
    match command {
        AuditCommand::Verify { config, archive } => verify(&config, &archive),
        AuditCommand::Export { config, until, out } => export(&config, &until, &out),
        AuditCommand::Prune { config, archive } => prune(&config, &archive),
        AuditCommand::Trace { config, id } => trace(&config, &id),
    }
}

/// The first live record of an intact chain: its seq and the hash it
/// follows (records before it were pruned).
type First = Option<(i64, String)>;

/// `audit verify [--archive FILE…]`.
fn verify(config: &ConfigArg, archives: &[PathBuf]) -> Result<Exit, Failure> {
    let settings = resolve(config)?;
    let dir = settings.config.state_dir();
    // Archives verify on their own: no database is needed for them.
    let store = match Store::open_read_only(&dir) {
        Ok(store) => Some(store),
        Err(StoreError::NotStarted { .. }) if !archives.is_empty() => None,
        Err(e) => return Err(e.into()),
    };
    let mut records = 0;
    let mut first = None;
    if let Some(store) = &store {
        let Some(intact) = verify_chain(store)? else {
            return Ok(Exit::CheckFailed);
        };
        (records, first) = intact;
    }
    let Some(checked) = verify_archives(archives, &first)? else {
        return Ok(Exit::CheckFailed);
    };
    if !archives.is_empty() || first.as_ref().is_some_and(|f| f.0 > 1) {
        let live = match (&store, &first) {
            (Some(s), Some((f, prev))) => Some((s, *f, prev.as_str())),
            _ => None,
        };
        let joined = archive::join(&checked, live)?;
        for line in &joined.lines {
            println!("{line}");
        }
        if !joined.intact {
            return Ok(Exit::CheckFailed);
        }
    }
    let Some(store) = store else {
        println!(
            "no database in {}: the archives were verified on their own",
            dir.display()
        );
        return Ok(Exit::Ok);
    };
    if !verify_ledger(&store)? {
        return Ok(Exit::CheckFailed);
    }
    Ok(if verify_anchors(&settings, &store, records)? {
        Exit::Ok
    } else {
        Exit::CheckFailed
    })
}

/// Check the database's pages and its chain, and print the verdict: the
/// chain's length and first live record if intact, `None` if broken.
fn verify_chain(store: &Store) -> Result<Option<(i64, First)>, Failure> {
    Store::check_pages(store.path())?;
    match audit::verify(store)? {
        Verification::Intact { records, head } => {
            let first =
                audit::first_live(store)?.map(|(seq, prev)| (seq, prev.unwrap_or_default()));
            let from = first.as_ref().map_or(1, |f| f.0);
            println!(
                "audit chain intact: {} records{}, head {head}",
                records - from + 1,
                if from > 1 {
                    format!(
                        " ({from}..={records}; 1..={} pruned, named by a checkpoint record)",
                        from - 1
                    )
                } else {
                    String::new()
                }
            );
            Ok(Some((records, first)))
        }
        Verification::Broken { seq, problem } => {
            println!("audit chain BROKEN at record {seq}: {problem}");
            Ok(None)
        }
    }
}

/// Verify each archive on its own and print the verdict; `None` if one is
/// not intact. `first`: the database's first live record, whose
/// predecessor's hash an archive should hold.
fn verify_archives(
    archives: &[PathBuf],
    first: &First,
) -> Result<Option<Vec<(PathBuf, Checked)>>, Failure> {
    let want: Vec<i64> = first.iter().map(|f| f.0 - 1).filter(|b| *b > 0).collect();
    let mut checked = Vec::new();
    let mut ok = true;
    for path in archives {
        match archive::verify_file(path, &want) {
            Ok(c) => {
                let m = &c.manifest;
                println!(
                    "archive {}: intact: records {}..={} ({} records, {} ledger entries{}; decided {} to {}), content sha256 {}",
                    path.display(),
                    m.first_seq,
                    m.last_seq,
                    m.records,
                    m.ledger_entries,
                    if c.uncovered > 0 {
                        format!(
                            ", {} committed before ledger hashes not covered",
                            c.uncovered
                        )
                    } else {
                        String::new()
                    },
                    m.first_at,
                    m.last_at,
                    m.content_sha256
                );
                checked.push((path.clone(), c));
            }
            Err(e @ ArchiveError::Broken { .. }) => {
                ok = false;
                println!("{e}");
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(ok.then_some(checked))
}

/// Check every ledger entry against its commit record and print the
/// verdict; false if one does not match.
fn verify_ledger(store: &Store) -> Result<bool, Failure> {
    match audit::verify_ledger(store)? {
        audit::LedgerCheck::Intact { entries, uncovered } => {
            println!(
                "ledger intact: {entries} entries, each as its commit record recorded it{}",
                if uncovered > 0 {
                    format!(" ({uncovered} committed before ledger hashes are not covered)")
                } else {
                    String::new()
                }
            );
            Ok(true)
        }
        audit::LedgerCheck::Broken { entry, problem } => {
            println!("ledger BROKEN at entry {entry}: {problem}");
            Ok(false)
        }
    }
}

/// `audit verify`: compare the chain (intact, `records` long) with every
/// head anchored outside the database that can be reached: the state-id
/// file and, with `[redis]`, the facility store. Prints one line each;
/// false if one shows a lost tail or cannot be reached.
fn verify_anchors(settings: &Settings, store: &Store, records: i64) -> Result<bool, Failure> {
    let cfg = &settings.config;
    let dir = cfg.state_dir();
    let state_id = store.state_id()?;
    let first = audit::first_live(store)?.map_or(1, |f| f.0);
    let mut ok = true;
    let mut compare = |by: &str, head: Option<Head>| -> Result<(), Failure> {
        match head {
            None => println!("{by}: no chain head anchored"),
            Some(h) => match audit::check_anchor(store, records, by, &h)? {
                None if first > h.seq => println!(
                    "{by}: anchored {h}, since pruned (the checkpoint record names it; its archive holds it)"
                ),
                None => println!("{by}: anchored {h}, in the database"),
                Some(problem) => {
                    ok = false;
                    println!("audit chain TAIL LOST: {problem}");
                }
            },
        }
        Ok(())
    };
    let by = format!(
        "the state-id file {}",
        dir.join(identity::ID_FILE).display()
    );
    match identity::read(&dir)? {
        // (A state reset cut before it rewrote the file: the next start,
        // or `state reset` again, rewrites it.)
        Some(f) if Some(&f.id) != state_id.as_ref() => {
            println!(
                "{by}: of the state this one was reset from ({}), not compared",
                f.id
            )
        }
        file => compare(&by, file.and_then(|f| f.head))?,
    }
    if settings.redis.is_some() {
        let by = format!("the facility store (gateway {})", cfg.gateway.id);
        match facility_anchor(settings) {
            Err(e) => {
                ok = false;
                println!(
                    "{by}: NOT reachable ({e}): the chain's tail is not checked against it. Reach that server and verify again"
                );
            }
            Ok(Some((id, _, _))) if Some(&id) != state_id.as_ref() => {
                println!("{by}: its anchor is of another state ({id}), not compared");
            }
            Ok(Some((_, seq, hash))) => compare(&by, Some(Head { seq, hash }))?,
            Ok(None) => compare(&by, None)?,
        }
    }
    Ok(ok)
}

/// The head anchored in the facility store for this gateway: (state, seq, hash).
fn facility_anchor(
    settings: &Settings,
) -> Result<Option<(String, i64, String)>, crate::facility::FacilityError> {
    let cfg = &settings.config;
    let Some(redis) = &settings.redis else {
        return Ok(None);
    };
    connect(cfg, redis)?.anchor(&cfg.gateway.id)
}

/// `audit export --until T --out FILE`.
fn export(config: &ConfigArg, until: &str, out: &Path) -> Result<Exit, Failure> {
    let until_ms = parse_time(until, "--until")?;
    let cfg = load(config)?;
    let store = Store::open_read_only(&cfg.state_dir())?;
    let m = archive::export(&store, until_ms, out, &cfg.gateway.id)?;
    println!(
        "archived records {}..={} ({} records, {} ledger entries; decided {} to {}) to {}, content sha256 {}",
        m.first_seq,
        m.last_seq,
        m.records,
        m.ledger_entries,
        m.first_at,
        m.last_at,
        out.display(),
        m.content_sha256
    );
    println!(
        "keep it (copy it off the gateway); `scangate audit prune --archive {}` may then remove these records from the database once they are older than [records] keep_days ({} days)",
        out.display(),
        cfg.records.keep_days
    );
    Ok(Exit::Ok)
}

/// `--until` and the like: RFC 3339, or a date (midnight UTC).
fn parse_time(text: &str, what: &str) -> Result<i64, Failure> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(t.timestamp_millis());
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map(|d| d.and_time(chrono::NaiveTime::MIN).and_utc().timestamp_millis())
        .map_err(|_| {
            Failure::Usage(format!(
                "{what} {text:?} is neither a date (YYYY-MM-DD, midnight UTC) nor an RFC 3339 time; use e.g. 2025-01-01 or 2025-01-01T00:00:00Z"
            ))
        })
}

/// `audit prune [--archive FILE…]` (daemon stopped).
fn prune(config: &ConfigArg, archives: &[PathBuf]) -> Result<Exit, Failure> {
    let settings = resolve(config)?;
    let cfg = &settings.config;
    let dir = cfg.state_dir();
    let mut store = Store::open_with_floor(&dir, cfg.outbox.min_free_mb)?;
    for path in archives {
        let m = archive::register(&mut store, path)?;
        println!(
            "archive {}: intact and matching the database; registered (records {}..={}, content sha256 {})",
            path.display(),
            m.first_seq,
            m.last_seq,
            m.content_sha256
        );
    }
    let facility_anchor = match &settings.redis {
        None => None,
        Some(_) => match facility_anchor(&settings) {
            Ok(Some((id, seq, hash))) if Some(&id) == store.state_id()?.as_ref() => {
                Some(Some(Head { seq, hash }))
            }
            Ok(_) => Some(None),
            Err(e) => {
                return Err(Failure::Runtime(format!(
                    "the facility store does not answer ({e}); nothing pruned: with [redis] only records anchored there are pruned. Reach that server and prune again"
                )));
            }
        },
    };
    let policy = archive::PrunePolicy {
        now_ms: chrono::Utc::now().timestamp_millis(),
        keep_days: cfg.records.keep_days,
        retention_hours: cfg.dedup.retention_hours,
        consumer_hold_days: cfg.records.consumer_hold_days,
        facility_anchor,
    };
    match archive::prune(&mut store, &policy)? {
        archive::Pruned::Done {
            first_seq,
            through_seq,
            ledger_entries,
            unacknowledged,
            checkpoint,
        } => {
            audit::emit(&checkpoint);
            for u in &unacknowledged {
                crate::events::LedgerConsumer::PrunedUnacknowledged {
                    consumer: &u.consumer,
                    entries: u.entries,
                    first_seq: u.first_seq,
                    through_seq: u.through_seq,
                    held_days: u.held_days,
                }
                .emit();
            }
            identity::Anchor::new(&dir, None)?.tick()?;
            println!(
                "pruned records {first_seq}..={through_seq} and {ledger_entries} ledger entries from {}; checkpoint record {} names them and their archives (`scangate audit verify --archive FILE…` checks them)",
                store.path().display(),
                checkpoint.last().map_or(0, |c| c.seq)
            );
            for u in &unacknowledged {
                println!(
                    "  {} of those entries ({}..={}) consumer {} had not acknowledged: pruned as past [records] keep_days + consumer_hold_days ({} days); the archive holds them",
                    u.entries, u.first_seq, u.through_seq, u.consumer, u.held_days
                );
            }
        }
        archive::Pruned::Nothing(why) => println!("nothing pruned: {why}"),
    }
    Ok(Exit::Ok)
}

/// `audit trace ID`: every decision about a scan's label (or a rejected
/// scan's own record); exit 1 if none, or if the trail is incomplete.
fn trace(config: &ConfigArg, id: &str) -> Result<Exit, Failure> {
    let cfg = load(config)?;
    let store = Store::open_read_only(&cfg.state_dir())?;
    let Some(key) = audit::key_of(&store, id)? else {
        // A rejected scan has no content key: show its own record.
        let records = audit::records_for_scan(&store, id)?;
        if records.is_empty() {
            println!("no decision about {id} in the audit trail");
            return Ok(Exit::CheckFailed);
        }
        for r in records {
            println!(
                "{}  {}  captured {}  scanner {}  audit #{}{}",
                r.decision,
                r.scan_uuid,
                r.captured_at,
                r.scanner,
                r.seq,
                r.reason
                    .map(|x| format!("  reason: {x}"))
                    .unwrap_or_default()
            );
        }
        return Ok(Exit::Ok);
    };
    let trail = audit::trail_for_key(&store, &key)?;
    if trail.records.is_empty() && trail.unrecorded.is_empty() {
        println!("no decision about {id} in the audit trail");
        return Ok(Exit::CheckFailed);
    }
    let (text, complete) = audit::render_trace(&key, &trail);
    print!("{text}");
    Ok(if complete {
        Exit::Ok
    } else {
        Exit::CheckFailed
    })
}
