//! Retention with verifiable archives. `audit export`
//! writes a self-verifying archive, `audit prune` removes only what is
//! archived and older than `[records] keep_days` (leaving a checkpoint
//! record), and `audit verify --archive` checks the archives and the
//! database as one chain; a tampered, truncated or foreign archive is
//! caught. Decided outbox rows go after the dedup horizon, and `audit
//! trace` still finds their records.
//!
//! Databases are made by the real pipeline through the library on real
//! SQLite files; export, prune and verify run through the real binary, the
//! prune two years and more in the future under libfaketime.

use crate::util::*;
use scangate::store::Store;
use std::fs;
use std::path::{Path, PathBuf};

const PICKS: i64 = 6;

/// A state directory and its config, with `PICKS` committed picks and one
/// echo of the first (7 audit records), captured an hour ago.
fn gateway(prefix: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempdir(prefix);
    let state = dir.path().join("state");
    let config = write_config(dir.path(), &state, 3000, &[]);
    submit_picks(&state, "A", 0);
    (dir, state, config)
}

/// Submit `PICKS` picks with serials `<prefix>0000…` (and an echo of the
/// first) through the library.
fn submit_picks(state: &Path, prefix: &str, offset_ms: i64) {
    let mut store = Store::open(state).expect("opening the database");
    let mut gate = test_gate(&store);
    let counter = dispense("counter-1");
    let t0 = chrono::Utc::now().timestamp_millis() - 3_600_000 + offset_ms;
    let mut scans = Vec::new();
    for i in 0..PICKS {
        let time = capture_time(
            t0 + i * 10_000,
            "ret-boot",
            1_000_000 + offset_ms + i * 10_000,
            true,
        );
        scans.push(scan(&counter, dscsa(&format!("{prefix}{i:07}")), time));
    }
    let echo = capture_time(t0 + 40, "ret-boot", 1_000_040 + offset_ms, true);
    scans.push(scan(&counter, dscsa(&format!("{prefix}{:07}", 0)), echo));
    scangate::daemon::embedded::submit(&mut store, &mut gate, &scans).expect("submit");
    store.checkpoint().unwrap();
}

fn run(config: &Path, args: &[&str]) -> Outcome {
    cli_cfg(config, args).into()
}

/// `audit verify --archive …` of `config`'s gateway.
fn verify_with(config: &Path, archives: &[&Path]) -> Outcome {
    let mut args = vec!["audit", "verify"];
    for a in archives {
        args.extend(["--archive", a.to_str().unwrap()]);
    }
    run(config, &args)
}

/// `audit verify --archive path` fails (exit 1), saying `what`.
fn caught(config: &Path, path: &Path, what: &str) {
    let out = verify_with(config, &[path]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stdout.contains(what), "expected {what:?}: {out}");
}

fn audit_rows(state: &Path) -> i64 {
    open_db(state)
        .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .unwrap()
}

fn ledger_rows(state: &Path) -> i64 {
    open_db(state)
        .query_row("SELECT count(*) FROM ledger", [], |r| r.get(0))
        .unwrap()
}

/// A minute from now, for `--until`.
fn soon() -> String {
    (chrono::Utc::now() + chrono::Duration::minutes(1)).to_rfc3339()
}

fn export(config: &Path, out: &Path) -> Outcome {
    let out = run(
        config,
        &[
            "audit",
            "export",
            "--until",
            &soon(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, Some(0), "audit export failed: {out}");
    out
}

#[test]
fn export_prune_and_verify_join_the_archives_and_the_database_into_one_chain() {
    let (dir, state, config) = gateway("ret-join-");
    let a = dir.path().join("2026.scangate-archive");
    let out = export(&config, &a);
    assert!(
        out.stdout
            .contains("archived records 1..=7 (7 records, 6 ledger entries"),
        "{out}"
    );

    // Two years and 70 days later: archived and older than keep_days (730).
    let pruned = cli_later(
        &config,
        800,
        &["audit", "prune", "--archive", a.to_str().unwrap()],
    );
    assert_eq!(pruned.code, Some(0), "{pruned}");
    assert!(
        pruned
            .stdout
            .contains("pruned records 1..=7 and 6 ledger entries"),
        "{pruned}"
    );
    assert_eq!(audit_rows(&state), 1, "only the checkpoint record is left");
    assert_eq!(ledger_rows(&state), 0);

    // The database alone still verifies (from the checkpoint), anchors too.
    let alone = run(&config, &["audit", "verify"]);
    assert_eq!(alone.code, Some(0), "{alone}");
    assert!(
        alone
            .stdout
            .contains("1..=7 pruned, named by a checkpoint record"),
        "{alone}"
    );
    assert!(
        alone.stdout.contains("give their archives with --archive"),
        "{alone}"
    );
    // With the archive: one chain across the boundary.
    let joined = verify_with(&config, &[&a]);
    assert_eq!(joined.code, Some(0), "{joined}");
    assert!(
        joined.stdout.contains("archive ") && joined.stdout.contains("intact: records 1..=7"),
        "{joined}"
    );
    assert!(
        joined
            .stdout
            .contains("record 7, the last pruned, is in the archives, and record 8"),
        "{joined}"
    );

    // The chain goes on after the checkpoint; the next archive begins
    // where the registered one ended, and both join the database.
    submit_picks(&state, "B", 600_000);
    // (The checkpoint record was written 800 days ahead.)
    let b = dir.path().join("2027.scangate-archive");
    let until = (chrono::Utc::now() + chrono::Duration::days(801)).to_rfc3339();
    let out = cli_later(
        &config,
        800,
        &[
            "audit",
            "export",
            "--until",
            &until,
            "--out",
            b.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("archived records 8..=15"), "{out}");
    let both = verify_with(&config, &[&b, &a]);
    assert_eq!(both.code, Some(0), "{both}");
    // Given without the first archive, the gap is named.
    let gap = verify_with(&config, &[&b]);
    assert_eq!(gap.code, Some(1), "{gap}");
    assert!(
        gap.stdout.contains("records 1..=7 are in no archive given"),
        "{gap}"
    );

    // Archives verify on their own, with no database at all.
    let empty = tempdir("ret-nodb-");
    let other = write_config(empty.path(), &empty.path().join("state"), 3000, &[]);
    let offline = verify_with(&other, &[&a, &b]);
    assert_eq!(offline.code, Some(0), "{offline}");
    assert!(
        offline.stdout.contains("verified on their own"),
        "{offline}"
    );
}

#[test]
fn a_tampered_truncated_or_foreign_archive_is_caught() {
    let (dir, _state, config) = gateway("ret-tamper-");
    let a = dir.path().join("a.scangate-archive");
    export(&config, &a);
    let text = fs::read_to_string(&a).unwrap();
    assert_eq!(verify_with(&config, &[&a]).code, Some(0));

    // One character of record 3 changed (its scanner): named by record.
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("{\"record\":{\"seq\":3,"))
        .expect("record 3 in the archive");
    let mut altered: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    altered[at] = altered[at].replacen("counter-1", "counter-2", 1);
    let tampered = dir.path().join("tampered");
    fs::write(&tampered, altered.join("\n") + "\n").unwrap();
    caught(
        &config,
        &tampered,
        "record 3: content does not match its hash (altered)",
    );

    // A ledger entry altered (its quantity).
    let entry = lines
        .iter()
        .position(|l| l.starts_with("{\"ledger_entry\""))
        .expect("a ledger entry in the archive");
    let mut altered: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    altered[entry] = altered[entry].replacen("\"quantity\":1", "\"quantity\":7", 1);
    fs::write(&tampered, altered.join("\n") + "\n").unwrap();
    caught(
        &config,
        &tampered,
        "is not what record 1 committed: altered",
    );

    // A record removed (with its ledger entry): named.
    let mut removed: Vec<&str> = lines.clone();
    removed.remove(at);
    if removed[at].starts_with("{\"ledger_entry\"") {
        removed.remove(at);
    }
    fs::write(&tampered, removed.join("\n") + "\n").unwrap();
    caught(&config, &tampered, "record 3 is missing");

    // Cut off in the middle.
    fs::write(&tampered, &text[..text.len() / 2]).unwrap();
    caught(&config, &tampered, "truncated");
    // Cut at a line end: no manifest.
    fs::write(&tampered, lines[..lines.len() - 1].join("\n") + "\n").unwrap();
    caught(
        &config,
        &tampered,
        "without its manifest: the file is truncated",
    );

    // Not an archive at all (the config file), and binary bytes.
    caught(&config, &config, "not a scangate audit archive");
    fs::write(&tampered, [0xffu8, 0xfe, 0x00, 0x01, b'\n']).unwrap();
    caught(&config, &tampered, "not a scangate audit archive");

    // A missing file: named.
    let out = verify_with(&config, &[&dir.path().join("nowhere")]);
    assert_eq!(out.code, Some(4), "{out}");
    assert!(out.stderr.contains("nowhere"), "{out}");

    // A tampered archive is refused by prune too: nothing removed.
    altered = lines.iter().map(|l| l.to_string()).collect();
    altered[at] = altered[at].replacen("counter-1", "counter-2", 1);
    fs::write(&tampered, altered.join("\n") + "\n").unwrap();
    let out = cli_later(
        &config,
        800,
        &["audit", "prune", "--archive", tampered.to_str().unwrap()],
    );
    assert_eq!(out.code, Some(1), "{out}");
    assert_eq!(audit_rows(&_state), 7);
}

#[test]
fn prune_removes_nothing_unarchived_or_younger_than_keep_days() {
    let (dir, state, config) = gateway("ret-refuse-");
    // Old enough, but in no archive.
    let out = cli_later(&config, 800, &["audit", "prune"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.stdout
            .contains("nothing pruned: record 1, the first in the database, is in no archive"),
        "{out}"
    );
    assert_eq!((audit_rows(&state), ledger_rows(&state)), (7, 6));

    // Archived, but younger than keep_days (729 days later).
    let a = dir.path().join("a.scangate-archive");
    export(&config, &a);
    let out = cli_later(
        &config,
        729,
        &["audit", "prune", "--archive", a.to_str().unwrap()],
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.stdout
            .contains("less than [records] keep_days = 730 days ago"),
        "{out}"
    );
    assert_eq!((audit_rows(&state), ledger_rows(&state)), (7, 6));

    // An archive of another gateway's state is refused.
    let (other_dir, _other_state, other_config) = gateway("ret-other-");
    let foreign = other_dir.path().join("other.scangate-archive");
    export(&other_config, &foreign);
    let out = cli_later(
        &config,
        800,
        &["audit", "prune", "--archive", foreign.to_str().unwrap()],
    );
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains("does not belong to the database"),
        "{out}"
    );

    // keep_days below two years is a config error naming the key.
    let text = fs::read_to_string(&config).unwrap() + "\n[records]\nkeep_days = 365\n";
    fs::write(&config, text).unwrap();
    let out = run(&config, &["check-config"]);
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("records.keep_days"), "{out}");
}

/// The ledger entries the gate still looks at (inside the dedup horizon)
/// hold back the records that committed them, whatever their age.
#[test]
fn prune_keeps_ledger_entries_inside_the_dedup_horizon() {
    use scangate::audit::archive::{self, PrunePolicy, Pruned};
    let (dir, state, config) = gateway("ret-horizon-");
    let a = dir.path().join("a.scangate-archive");
    export(&config, &a);
    let mut store = Store::open(&state).unwrap();
    archive::register(&mut store, &a).unwrap();
    let later = chrono::Utc::now().timestamp_millis() + 800 * 86_400_000;
    let policy = PrunePolicy {
        now_ms: later,
        keep_days: 730,
        // A horizon reaching back before the picks.
        retention_hours: 800 * 24 + 2,
        consumer_hold_days: 90,
        facility_anchor: None,
    };
    match archive::prune(&mut store, &policy).unwrap() {
        Pruned::Nothing(why) => assert!(why.contains("inside the dedup horizon"), "{why}"),
        done => panic!("pruned inside the dedup horizon: {done:?}"),
    }
    // With [redis], only what the facility store anchored.
    let policy = PrunePolicy {
        retention_hours: 72,
        facility_anchor: Some(None),
        ..policy
    };
    match archive::prune(&mut store, &policy).unwrap() {
        Pruned::Nothing(why) => assert!(
            why.contains("anchored in the facility store through record 0"),
            "{why}"
        ),
        done => panic!("pruned what the facility store did not anchor: {done:?}"),
    }
    drop(store);
    assert_eq!((audit_rows(&state), ledger_rows(&state)), (7, 6));
}

/// Decided outbox rows go after the dedup horizon; open rows and kept
/// scans stay; `audit trace` still shows the commit and its echo.
#[test]
fn decided_outbox_rows_are_removed_and_trace_still_finds_their_records() {
    let (_dir, state, config) = gateway("ret-outbox-");
    let mut store = Store::open(&state).unwrap();
    let key: String = open_db(&state)
        .query_row(
            "SELECT lower(hex(content_key)) FROM ledger ORDER BY seq LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let kept: String = open_db(&state)
        .query_row(
            &format!("SELECT {UUID_TEXT} FROM ledger ORDER BY seq DESC LIMIT 1"),
            [],
            |r| r.get(0),
        )
        .unwrap();
    let keep = std::collections::HashSet::from([kept.clone()]);
    let now = chrono::Utc::now().timestamp_millis() + 1000;
    let removed = store.prune_decided(now, &keep, &mut || true).unwrap();
    drop(store);
    let left: Vec<String> = {
        let db = open_db(&state);
        let mut q = db
            .prepare("SELECT scan_uuid FROM scans ORDER BY seq")
            .unwrap();
        q.query_map([], |r| {
            r.get::<_, scangate::store::packed::Unpacked>(0)
                .map(|u| u.0)
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    // Outbox order: picks 0..5, then the echo; pick 5 is kept, so it and
    // everything after it stays.
    assert_eq!(removed, 5);
    assert_eq!(left.first(), Some(&kept), "{left:?}");
    assert_eq!(left.len(), 2);
    let trace = run(&config, &["audit", "trace", &key]);
    assert_eq!(trace.code, Some(0), "{trace}");
    assert!(
        trace.stdout.contains("2 transmission(s), 1 ledger entry"),
        "{trace}"
    );
    assert!(trace.stdout.contains("echo suppressed"), "{trace}");
    audit_verify(&config);
}

/// With `[redis]`, only what the facility store anchored is pruned, the
/// pruned-then-verified chain still matches that anchor, and a facility
/// store that does not answer prunes nothing (a real `redis-server`).
#[test]
fn with_a_facility_store_only_anchored_records_are_pruned() {
    let redis = RedisServer::start_temp(&[]);
    let (dir, state, config) = gateway("ret-redis-");
    let text = fs::read_to_string(&config).unwrap();
    fs::write(
        &config,
        format!("{text}\n[redis]\nurl = {:?}\n", redis.url()),
    )
    .unwrap();
    let a = dir.path().join("a.scangate-archive");
    export(&config, &a);
    let (state_id, hash3): (String, String) = {
        let db = open_db(&state);
        (
            db.query_row("SELECT value FROM meta WHERE key = 'state_id'", [], |r| {
                r.get(0)
            })
            .unwrap(),
            db.query_row(
                "SELECT lower(hex(hash)) FROM audit WHERE seq = 3",
                [],
                |r| r.get(0),
            )
            .unwrap(),
        )
    };
    // The daemon anchored record 3 in the facility store, then stopped.
    redis::cmd("HSET")
        .arg("scangate:{test-pharmacy}:anchor:test-gw")
        .arg("state_id")
        .arg(&state_id)
        .arg("seq")
        .arg(3)
        .arg("hash")
        .arg(&hash3)
        .query::<()>(&mut redis.connection())
        .unwrap();
    let out = cli_later(
        &config,
        800,
        &["audit", "prune", "--archive", a.to_str().unwrap()],
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("pruned records 1..=3 and "), "{out}");
    // Records 4..=7 and the checkpoint stay.
    assert_eq!(audit_rows(&state), 5);
    let out = verify_with(&config, &[&a]);
    assert_eq!(out.code, Some(0), "{out}");
    let anchored = "the facility store (gateway test-gw): anchored record 3";
    assert!(out.stdout.contains(anchored), "{out}");
    assert!(
        out.stdout
            .contains("since pruned (the checkpoint record names it"),
        "{out}"
    );

    drop(redis);
    let out = cli_later(&config, 800, &["audit", "prune"]);
    assert_eq!(out.code, Some(4), "{out}");
    assert!(
        out.stderr.contains("the facility store does not answer"),
        "{out}"
    );
    assert_eq!(audit_rows(&state), 5);
}
