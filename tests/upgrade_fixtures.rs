//! Every earlier state carries over: each state directory in
//! `tests/fixtures/states/` was written by an earlier release's own binary
//! (`script/make-fixtures` says which and how); this release takes it
//! over. Its migrations run (announced, and a copy of the database kept),
//! every ledger entry and audit record stays, `audit verify` passes, a
//! read of the last label straddling the upgrade inside the window is an
//! echo, and scans the release left undecided are decided exactly once.
//!
//! A straddle needs the read after the upgrade to be captured within the
//! window of the read before it, which a fixture made days ago cannot
//! give: the daemon runs with its wall clock set back to just after the
//! fixture's last capture (libfaketime) and, since a fixture may have been
//! written in this very boot (whose boot clock is hours on), with a boot
//! id of its own (a private mount namespace binds a file over
//! `/proc/sys/kernel/random/boot_id`): the gateway was rebooted into the
//! new release. Both need root (CI is); elsewhere the tests say SKIPPED.
//!
//! With a facility store the straddle is not tried: the facility compares
//! captures on the Redis server's clock, and redis-server does not start
//! under libfaketime (its allocator's first clock read recurses into it).
//! The facility fixtures check the rest: the scans the release left
//! waiting are claimed and committed once each, in the gateway's ledger
//! and the facility's stream.

use crate::util::*;
use scangate::pty::VirtualScanner;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// One fixture: its directory and its `fixture.json`.
struct Fixture {
    dir: PathBuf,
    meta: serde_json::Value,
}

impl Fixture {
    fn name(&self) -> String {
        self.dir.file_name().unwrap().to_string_lossy().into_owned()
    }

    fn schema(&self) -> i64 {
        self.meta["schema_version"].as_i64().unwrap()
    }

    fn facility(&self) -> bool {
        self.meta["mode"] == "facility"
    }

    fn frames(&self) -> &[serde_json::Value] {
        self.meta["frames"].as_array().unwrap()
    }

    /// The latest capture time among its scans (Unix ms), from the scan
    /// UUIDs (UUIDv7: minted at capture, on the wall clock).
    fn last_capture_ms(&self) -> i64 {
        self.frames()
            .iter()
            .filter_map(|f| f["scan_uuid"].as_str())
            .map(|u| i64::from_str_radix(&u.replace('-', "")[..12], 16).unwrap())
            .max()
            .unwrap()
    }

    /// Its state files copied into `state`.
    fn copy_state(&self, state: &Path) {
        std::fs::create_dir_all(state).unwrap();
        let mut files: Vec<String> = self.meta["state_files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_string())
            .collect();
        if self.dir.join("state-id").exists() && !files.iter().any(|f| f == "state-id") {
            files.push("state-id".into());
        }
        for f in files {
            std::fs::copy(self.dir.join(&f), state.join(&f)).unwrap();
        }
    }

    /// Its config, placed: state in `state`, the scanner on `pty`, Redis
    /// on `port`.
    fn config(&self, dir: &Path, state: &Path, pty: &Path, port: Option<u16>) -> PathBuf {
        let text = std::fs::read_to_string(self.dir.join("scangate.toml"))
            .unwrap()
            .replace("@STATE@", &state.display().to_string())
            .replace("@PTY@", &pty.display().to_string())
            .replace("@PORT@", &port.map_or(String::new(), |p| p.to_string()));
        let cfg = dir.join("scangate.toml");
        std::fs::write(&cfg, text).unwrap();
        cfg
    }
}

fn fixtures() -> Vec<Fixture> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/states");
    let mut all: Vec<Fixture> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("fixture.json").exists())
        .map(|dir| Fixture {
            meta: serde_json::from_slice(&std::fs::read(dir.join("fixture.json")).unwrap())
                .unwrap(),
            dir,
        })
        .collect();
    all.sort_by_key(|f| f.name());
    all
}

#[test]
fn every_earlier_schema_version_has_a_fixture_of_each_mode() {
    let all = fixtures();
    for v in 1..scangate::build::SCHEMA_VERSION {
        assert!(
            all.iter().any(|f| f.schema() == v && !f.facility()),
            "no embedded fixture of schema {v}: a new migration needs a state the release before it wrote (script/make-fixtures)"
        );
        assert!(
            v < 2 || all.iter().any(|f| f.schema() == v && f.facility()),
            "no facility fixture of schema {v} (script/make-fixtures)"
        );
    }
}

/// Whether this process may make a mount namespace (root); if not, says
/// SKIPPED.
fn may_fake_a_boot() -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!(
            "SKIPPED: the upgrade fixtures run the daemon in a mount namespace of its own (a boot id of its own): that needs root"
        );
    }
    root
}

/// libfaketime's variables for a wall clock at `at_ms` now (the boot
/// clock left alone).
fn clock_at(at_ms: i64) -> Vec<(&'static str, String)> {
    let offset_s = (at_ms - chrono::Utc::now().timestamp_millis()) as f64 / 1e3;
    vec![
        ("LD_PRELOAD", libfaketime()),
        ("FAKETIME", format!("{offset_s:+.3}s")),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
    ]
}

/// `scangate run --config <cfg>` with a boot id of its own and `env`.
fn start(dir: &Path, cfg: &Path, env: &[(&'static str, String)], socket: &NotifySocket) -> Daemon {
    let boot = dir.join("boot_id");
    std::fs::write(&boot, format!("{}\n", uuid::Uuid::now_v7())).unwrap();
    let log = dir.join("daemon.log");
    let err = std::fs::File::create(&log).unwrap();
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount --bind "$0" /proc/sys/kernel/random/boot_id && exec "$@""#)
        .arg(&boot)
        .arg(bin())
        .args(["run", "--config"])
        .arg(cfg)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("NOTIFY_SOCKET", socket.path())
        .stderr(Stdio::from(err));
    Daemon::spawn(cmd, &log)
}

/// Send `frame` and wait for its ACK.
fn send(scanner: &mut VirtualScanner, frame: &str) {
    scanner.send(frame.as_bytes()).unwrap();
    let reply = scanner.read_reply(Duration::from_secs(60)).unwrap();
    assert_eq!(reply, b"\x06", "ACK for {frame:?}");
}

/// The newest scan: its state and its twin's UUID (hex, no dashes).
fn newest(state: &Path) -> (String, Option<String>) {
    open_db(state)
        .query_row(
            "SELECT state, lower(hex(twin_uuid)) FROM scans ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

fn ledger_uuids(cfg: &Path) -> Vec<String> {
    ledger(cfg)
        .iter()
        .map(|e| e["scan_uuid"].as_str().unwrap().to_string())
        .collect()
}

/// Take `f` over with this release and check everything the module says.
fn upgrade(f: &Fixture) {
    let name = f.name();
    let d = tempdir("scangate-fixture-");
    let state = d.path().join("state");
    f.copy_state(&state);
    let redis = f
        .facility()
        .then(|| RedisServer::start(&d.path().join("redis"), &[]));
    let clock = match redis {
        None => clock_at(f.last_capture_ms() + 3_000),
        Some(_) => Vec::new(),
    };
    let mut scanner = VirtualScanner::new().unwrap();
    let cfg = f.config(
        d.path(),
        &state,
        scanner.path(),
        redis.as_ref().map(|r| r.port),
    );
    let socket = NotifySocket::bind(d.path());
    let mut daemon = start(d.path(), &cfg, &clock, &socket);
    socket.wait_for("READY", "1", 1);
    let log = daemon.log();
    let (from, to) = (f.schema(), scangate::build::SCHEMA_VERSION);
    if from < to {
        for said in [
            format!("migrating the database from schema {from} to {to}"),
            format!("database migrated from schema {from} to {to}"),
        ] {
            assert!(
                log.contains(&said),
                "{name}: {said:?} not in the log:\n{log}"
            );
        }
        let copy = scangate::store::upgrade::copy_path(&state.join("scangate.db"), from);
        assert!(copy.exists(), "{name}: no copy {} kept", copy.display());
    }
    let before = f.meta["counts"]["ledger"].as_i64().unwrap();
    let scans_before: i64 = f.meta["counts"]["scans_by_state"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .sum();
    // What the release left undecided is decided, each scan once.
    let waiting: Vec<&serde_json::Value> = f
        .frames()
        .iter()
        .filter(|fr| fr["expected"] == "unresolved" || fr["expected"] == "pending")
        .collect();
    wait_all_decided(&cfg, scans_before);
    assert_eq!(
        ledger(&cfg).len() as i64,
        before + waiting.len() as i64,
        "{name}: every waiting scan committed once"
    );
    let mut sent = 0;
    if redis.is_none() {
        // The label read last before the upgrade, again (the scanner
        // resends it, or staff scan it again): an echo of its commit,
        // not a new pick.
        let again = f
            .frames()
            .iter()
            .rev()
            .find(|fr| fr["expected"] == "committed")
            .unwrap_or_else(|| panic!("{name}: no committed frame"));
        send(&mut scanner, again["raw"].as_str().unwrap());
        sent += 1;
        wait_all_decided(&cfg, scans_before + sent);
        let twin = again["scan_uuid"].as_str().unwrap().replace('-', "");
        assert_eq!(
            newest(&state),
            ("suppressed".to_string(), Some(twin)),
            "{name}: the read straddling the upgrade\n{}",
            daemon.log()
        );
    }
    // Control: a label never read before is a new pick.
    send(
        &mut scanner,
        "]d201003077731050251728123110LOTUP\u{1d}21UPGRADE0001\r",
    );
    sent += 1;
    wait_all_decided(&cfg, scans_before + sent);
    assert_eq!(newest(&state).0, "committed", "{name}");
    let exit = daemon.terminate();
    assert!(exit.success(), "{name}: {exit:?}\n{}", daemon.log());
    // Nothing the release recorded is lost.
    let entries = ledger_uuids(&cfg);
    assert_eq!(
        entries.len() as i64,
        before + waiting.len() as i64 + 1,
        "{name}"
    );
    for fr in f.frames() {
        if matches!(
            fr["expected"].as_str(),
            Some("committed" | "unresolved" | "pending")
        ) {
            let uuid = fr["scan_uuid"].as_str().unwrap();
            assert!(
                entries.iter().any(|e| e == uuid),
                "{name}: {uuid} not in the ledger"
            );
        }
    }
    let records: i64 = open_db(&state)
        .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .unwrap();
    assert!(
        records >= f.meta["counts"]["audit"].as_i64().unwrap() + sent,
        "{name}: {records} audit records"
    );
    let verify = audit_verify(&cfg);
    assert_eq!(verify.code, Some(0), "{name}: {verify}");
    if let Some(redis) = &redis {
        assert_eq!(
            redis.ledger("fixture-pharmacy").len() as i64,
            waiting.len() as i64 + 1,
            "{name}: the facility ledger"
        );
    }
}

#[test]
fn each_embedded_fixture_upgrades_keeping_everything_and_doubling_nothing() {
    if !may_fake_a_boot() {
        return;
    }
    for f in fixtures().iter().filter(|f| !f.facility()) {
        upgrade(f);
    }
}

#[test]
fn each_facility_fixture_upgrades_and_decides_its_waiting_scans_once() {
    if !may_fake_a_boot() {
        return;
    }
    for f in fixtures().iter().filter(|f| f.facility()) {
        upgrade(f);
    }
}
