//! Migration 8 (lean rows) keeps the audit chain verifiable. A
//! database of schema 7 written by the real pipeline of 9a2c7c8 —
//! commits, echoes, rejections, a label re-dispensed, two scanners, an
//! archive and a prune with its checkpoint record —
//! (tests/vectors/lean_rows/, made by `make_fixture.rs` and
//! `make_fixture.sh` there) is opened by this build, which migrates it in
//! place; then `audit verify` (with and without the archive), `ledger
//! export` (JSON lines and EPCIS) and `audit trace` print byte for byte
//! what 9a2c7c8 printed about it, and decisions made after the migration
//! extend the same chain. Tampering done before the migration is still
//! named after it, at the same record.

use crate::util::*;
use rusqlite::Connection;
use scangate::store::Store;
use std::fs;
use std::path::{Path, PathBuf};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/lean_rows");

fn fixture(name: &str) -> PathBuf {
    Path::new(FIXTURE).join(name)
}

/// The fixture database restored into a fresh state directory (schema 7).
struct Restored {
    dir: tempfile::TempDir,
    state: PathBuf,
    config: PathBuf,
}

fn restore() -> Restored {
    let dir = tempdir("scangate-lean-");
    let state = dir.path().join("state");
    fs::create_dir(&state).unwrap();
    let c = Connection::open(state.join("scangate.db")).unwrap();
    c.execute_batch(&fs::read_to_string(fixture("schema7.sql")).unwrap())
        .unwrap();
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 7, "the fixture is a schema-7 database");
    drop(c);
    fs::copy(fixture("state-id"), state.join("state-id")).unwrap();
    fs::copy(fixture("a.archive"), dir.path().join("a.archive")).unwrap();
    let config = write_config(dir.path(), &state, 3000, &[]);
    Restored { dir, state, config }
}

impl Restored {
    fn db(&self) -> Connection {
        Connection::open(self.state.join("scangate.db")).unwrap()
    }

    /// Open with this build: the migration runs. (Opening to write also
    /// records the chain head in `state-id`, as any build's does; the
    /// fixture's file, with no head, is put back so that `audit verify`'s
    /// last line compares with what 9a2c7c8 printed.)
    fn migrate(&self) {
        drop(Store::open(&self.state).expect("migrating the fixture"));
        fs::copy(fixture("state-id"), self.state.join("state-id")).unwrap();
        let version: i64 = self
            .db()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert!(version > 7, "migrated: {version}");
    }

    fn run(&self, args: &[&str]) -> Outcome {
        cli_cfg(&self.config, args).into()
    }

    fn archive(&self) -> String {
        self.dir.path().join("a.archive").display().to_string()
    }
}

/// What 9a2c7c8 printed (`name.out`, its exit code `name.code`), with the
/// fixture's directory as `dir`.
fn recorded(name: &str, dir: &Path) -> (String, i32) {
    let out = fs::read_to_string(fixture(&format!("{name}.out"))).unwrap();
    let code = fs::read_to_string(fixture(&format!("{name}.code"))).unwrap();
    (
        out.replace("@DIR@", &dir.display().to_string()),
        code.trim().parse().unwrap(),
    )
}

/// `text` without the EPCIS document's `creationDate` (the time of the
/// export, the only field that is not the ledger's).
fn undated(text: &str) -> String {
    const KEY: &str = "\"creationDate\":\"";
    match text.find(KEY) {
        Some(at) => {
            let from = at + KEY.len();
            let to = from + text[from..].find('"').unwrap();
            format!("{}{}", &text[..from], &text[to..])
        }
        None => text.to_string(),
    }
}

/// Every reading command as 9a2c7c8 ran it on the fixture: (recorded
/// name, arguments).
fn commands(r: &Restored) -> Vec<(String, Vec<String>)> {
    let mut all = vec![
        ("verify".to_string(), vec!["audit", "verify"]),
        (
            "verify-archive".to_string(),
            vec!["audit", "verify", "--archive", "ARCHIVE"],
        ),
        ("ledger".to_string(), vec!["ledger", "export"]),
        (
            "ledger-epcis".to_string(),
            vec!["ledger", "export", "--format", "epcis"],
        ),
    ];
    let scans = fs::read_to_string(fixture("trace-scans")).unwrap();
    let traces: Vec<(String, String)> = scans
        .lines()
        .map(|l| {
            let (state, uuid) = l.split_once(' ').unwrap();
            (format!("trace-{state}"), uuid.to_string())
        })
        .collect();
    for (name, uuid) in &traces {
        all.push((name.clone(), vec!["audit", "trace", uuid.as_str()]));
    }
    let archive = r.archive();
    all.into_iter()
        .map(|(name, args)| {
            let args = args
                .into_iter()
                .map(|a| {
                    if a == "ARCHIVE" {
                        archive.clone()
                    } else {
                        a.to_string()
                    }
                })
                .collect();
            (name, args)
        })
        .collect()
}

#[test]
fn a_schema_7_database_migrates_and_every_output_stays_byte_for_byte() {
    let r = restore();
    r.migrate();
    for (name, args) in commands(&r) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = r.run(&args);
        let (want, code) = recorded(&name, r.dir.path());
        assert_eq!(out.code, Some(code), "{name}: exit code\n{out}");
        assert_eq!(
            undated(&out.stdout),
            undated(&want),
            "{name}: output differs from 9a2c7c8's"
        );
    }
    // The rows are lean now: identifiers and hashes as bytes, no
    // content_key column, prev_hash only where the row before is gone.
    let c = r.db();
    let count = |sql: &str| -> i64 { c.query_row(sql, [], |r| r.get(0)).unwrap() };
    let records = count("SELECT count(*) FROM audit");
    assert!(records > 50, "{records}");
    let head = count("SELECT max(seq) FROM audit");
    assert_eq!(
        count("SELECT count(*) FROM audit WHERE length(hash) = 32 AND length(scan_uuid) = 16"),
        records
    );
    assert_eq!(
        count("SELECT count(*) FROM audit WHERE prev_hash IS NOT NULL"),
        1
    );
    assert!(
        c.prepare("SELECT content_key FROM audit").is_err(),
        "audit.content_key is gone"
    );
    let entries = count("SELECT count(*) FROM ledger");
    assert_eq!(
        count(
            "SELECT count(*) FROM ledger WHERE length(scan_uuid) = 16 AND length(boot_id) = 16
               AND length(content_key) = 32"
        ),
        entries
    );
    drop(c);

    // A commit from before the migration is still found by the exact
    // lookup (key bytes and prefix converted): a re-read 40 ms later on
    // its boot's clock, and one from another boot on the wall clock, are
    // echoes of it.
    let (twin, at_ms, boot_ns): (String, i64, i64) = r
        .db()
        .query_row(
            &format!(
                "SELECT {UUID_TEXT}, captured_ms, boot_ns FROM ledger
                 WHERE serial = 'B0005' AND scanner = 'counter-1'"
            ),
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let mut store = Store::open(&r.state).unwrap();
    let mut gate = test_gate(&store);
    let counter = dispense("counter-1");
    let old_boot = "6f1d3a52-8c2e-4f7a-9d3b-2a1c0e5f7b90";
    let echoes = vec![
        scan(
            &counter,
            dscsa("B0005"),
            capture_time(at_ms + 40, old_boot, boot_ns / 1_000_000 + 40, true),
        ),
        scan(
            &counter,
            dscsa("B0005"),
            capture_time(
                at_ms + 80,
                "0b5c7e4a-0000-4c3b-8a9e-7d6f5e4c3b2a",
                9_000,
                true,
            ),
        ),
    ];
    scangate::daemon::embedded::submit(&mut store, &mut gate, &echoes).unwrap();
    for echo in &echoes {
        let record = audit_of(&store, echo);
        assert_eq!(record["decision"], "suppressed", "{record}");
        assert_eq!(record["twin_uuid"], twin.as_str(), "{record}");
    }

    // Decisions made after the migration extend the same chain, packed.
    let now = chrono::Utc::now().timestamp_millis();
    let boot = "0b5c7e4a-2f1d-4c3b-8a9e-7d6f5e4c3b2a";
    let scans = vec![
        scan(
            &counter,
            dscsa("AFTER1"),
            capture_time(now, boot, 5_000, true),
        ),
        scan(
            &counter,
            dscsa("AFTER1"),
            capture_time(now + 40, boot, 5_040, true),
        ),
        scan(
            &counter,
            b"]C1NOT-GS1".to_vec(),
            capture_time(now + 90, boot, 5_090, true),
        ),
    ];
    scangate::daemon::embedded::submit(&mut store, &mut gate, &scans).unwrap();
    drop(store);
    let out = r.run(&["audit", "verify", "--archive", &r.archive()]);
    assert_eq!(out.code, Some(0), "{out}");
    let c = r.db();
    let packed: i64 = c
        .query_row(
            "SELECT count(*) FROM audit WHERE seq > ?1 AND typeof(record) = 'blob'",
            [head],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(packed, 5, "the five new decision records are stored packed");
    let (first, _) = recorded("verify", r.dir.path());
    assert!(first.starts_with("audit chain intact:"), "{first}");
}

/// A record of the fixture's live chain with a content key, in the middle.
fn a_commit_record(c: &Connection) -> i64 {
    c.query_row(
        "SELECT seq FROM audit WHERE content_key IS NOT NULL ORDER BY seq LIMIT 1 OFFSET 10",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn tampering_before_the_migration_is_still_named_after_it() {
    let edits: [(&str, &str); 5] = [
        // The column migration 8 drops.
        (
            "its content_key column",
            "UPDATE audit SET content_key = '00' || substr(content_key, 3) WHERE seq = ?1",
        ),
        (
            "its prev_hash",
            "UPDATE audit SET prev_hash = '00' || substr(prev_hash, 3) WHERE seq = ?1",
        ),
        (
            "its record",
            "UPDATE audit SET record = replace(record, '\"raw_len\":', '\"raw_len\":1') WHERE seq = ?1",
        ),
        // Upper-case hex: the same bytes, another text.
        (
            "its hash",
            "UPDATE audit SET hash = upper(hash) WHERE seq = ?1",
        ),
        ("it, deleted", "DELETE FROM audit WHERE seq = ?1"),
    ];
    for (what, sql) in edits {
        let r = restore();
        let seq = {
            let c = r.db();
            let seq = a_commit_record(&c);
            assert_eq!(c.execute(sql, [seq]).unwrap(), 1, "{what}");
            seq
        };
        r.migrate();
        let out = r.run(&["audit", "verify"]);
        assert_eq!(out.code, Some(1), "{what}: verify must fail\n{out}");
        let want = format!("audit chain BROKEN at record {seq}:");
        assert!(
            out.stdout.contains(&want) || out.stderr.contains(&want),
            "{what}: must name record {seq}\n{out}"
        );
    }
}
