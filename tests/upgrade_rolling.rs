//! This release beside the previous one (`tests/fixtures/previous-release`,
//! built from git by `script/previous-release`; `script/test` exports its
//! path as `SCANGATE_PREVIOUS_BIN`): a facility upgraded one gateway at a
//! time doubles no pick, the previous release runs on a state this one
//! wrote (a rollback of the same schema) or on the copy the migration kept
//! (a rollback across a schema change), and refuses a newer schema
//! without touching it. Without the variable the tests say SKIPPED.

use crate::util::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The previous release's binary, or `None` (said: SKIPPED).
fn previous() -> Option<PathBuf> {
    let found = std::env::var_os("SCANGATE_PREVIOUS_BIN").map(PathBuf::from);
    if found.is_none() {
        eprintln!(
            "SKIPPED: SCANGATE_PREVIOUS_BIN is not set (script/test builds the previous release with script/previous-release and sets it)"
        );
    }
    found
}

/// The previous release's version, as tests/fixtures/previous-release
/// names it.
fn previous_version() -> String {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/previous-release"
    );
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        .expect("a commit and a version")
}

/// `previous run --config` for gateway `g`, its PTYs opened.
fn launch(previous: &Path, g: &Gateway) -> Daemon {
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&g.log)
        .unwrap();
    let mut cmd = Command::new(previous);
    run_args(&mut cmd, &g.cfg);
    cmd.env_remove("SCANGATE_CONFIG")
        .env_remove("STATE_DIRECTORY")
        .stdin(std::process::Stdio::null())
        .stderr(err);
    let mut daemon = Daemon::spawn(cmd, &g.log);
    daemon.wait_open(&g.pty_paths());
    daemon
}

#[test]
fn the_previous_release_says_what_it_is() {
    let Some(previous) = previous() else { return };
    let out: Outcome = Command::new(&previous)
        .arg("--version")
        .output()
        .unwrap()
        .into();
    let version = previous_version();
    assert!(out.stdout.contains(&version), "{out}");
    assert!(!out.stdout.contains(scangate::build::VERSION), "{out}");
}

#[test]
fn a_facility_upgraded_one_gateway_at_a_time_doubles_no_pick() {
    let Some(previous) = previous() else { return };
    let (root, redis) = facility(&[]);
    // gw-a still runs the previous release, gw-b this one; one scanner
    // roams between them (declared shared on both).
    let mut a = Gateway::roaming(root.path(), "gw-a", &redis);
    let mut b = Gateway::roaming(root.path(), "gw-b", &redis);
    // A ten-minute window: the re-reads below are echoes however slowly
    // the test runs.
    for g in [&a, &b] {
        g.set_window_ms(600_000);
    }
    let mut old = launch(&previous, &a);
    b.start();
    // (gw-a's database is the previous release's: read with its binary,
    // this one would refuse an older schema.)
    let a_cfg = a.cfg.clone();
    let on_a = |n| wait_all_decided_by(Some(&previous), &a_cfg, n);
    // 8 picks each heard by both gateways, some double-fired on one.
    roam(&mut a, &mut b, 8, false, |i| i % 3 == 0);
    on_a(8 + 3);
    wait_all_decided(&b.cfg, 8);
    assert_each_pick_once(&redis, 8);
    // The scanner roams: a label read through gw-a only, then sent again
    // (no ACK reached it) through gw-b only.
    a.send(&dscsa("ROAM1"));
    on_a(12);
    b.send(&dscsa("ROAM1"));
    wait_all_decided(&b.cfg, 9);
    // And the other way round.
    b.send(&dscsa("ROAM2"));
    wait_all_decided(&b.cfg, 10);
    a.send(&dscsa("ROAM2"));
    on_a(13);
    assert_each_pick_once(&redis, 10);
    // Then gw-a is upgraded too: stopped, started on this release, and
    // the roaming scanner resends the last label through it.
    assert!(old.terminate().success(), "{}", old.log());
    a.start();
    a.send(&dscsa("ROAM2"));
    wait_all_decided(&a.cfg, 14);
    assert_each_pick_once(&redis, 10);
    for g in [&a, &b] {
        let verify = audit_verify(&g.cfg);
        assert_eq!(verify.code, Some(0), "{verify}");
    }
    a.stop();
    b.stop();
}

/// The previous release's schema version, as its `--version` says.
fn previous_schema(previous: &Path) -> i64 {
    let out: Outcome = Command::new(previous)
        .arg("--version")
        .output()
        .unwrap()
        .into();
    out.stdout
        .split("(schema ")
        .nth(1)
        .and_then(|rest| rest.split([',', ')']).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no schema in {out}"))
}

#[test]
fn the_previous_release_runs_on_a_state_this_one_wrote() {
    let Some(previous) = previous() else { return };
    if previous_schema(&previous) != scangate::build::SCHEMA_VERSION {
        eprintln!(
            "SKIPPED: the previous release has another schema (the rollback across it is tested)"
        );
        return;
    }
    let mut g = Gateway::builder("scangate-rollback-")
        .window_ms(600_000)
        .pty(ScannerSpec::named("counter-1").ack())
        .build();
    g.start();
    g.send(&dscsa("R1"));
    g.send(&dscsa("R1"));
    wait_all_decided(&g.cfg, 2);
    g.stop();
    // Rolled back: the previous release (same schema) takes the state on.
    let mut old = launch(&previous, &g);
    g.send(&dscsa("R2"));
    g.send(&dscsa("R1"));
    let st = wait_all_decided(&g.cfg, 4);
    assert_eq!(
        (count(&st, "committed"), count(&st, "suppressed")),
        (2, 2),
        "{st}"
    );
    // This release's `status` says which release the running daemon is.
    let mut reasons = Vec::new();
    wait_until("status to see the previous release running", || {
        let out: Outcome = cli_cfg(&g.cfg, &["status", "--json"]).into();
        let Ok(st) = serde_json::from_str::<serde_json::Value>(&out.stdout) else {
            return false;
        };
        assert_eq!(st["build"]["version"], scangate::build::VERSION, "{st}");
        assert_eq!(
            st["build"]["schema"],
            scangate::build::SCHEMA_VERSION,
            "{st}"
        );
        reasons = st["degraded"].as_array().cloned().unwrap_or_default();
        st["daemon"]["running"] == true
    });
    // (Releases before 0.2.0 did not say which they were.)
    let said = match previous_version().as_str() {
        "0.1.0" => "a release before 0.2.0".to_string(),
        v => format!("release {v}"),
    };
    assert!(
        reasons.iter().any(|r| r
            .as_str()
            .is_some_and(|r| r.contains(&said) && r.contains("systemctl restart"))),
        "{said}: {reasons:?}"
    );
    assert!(old.terminate().success(), "{}", old.log());
    // And forward again.
    g.start();
    g.send(&dscsa("R3"));
    wait_all_decided(&g.cfg, 5);
    g.stop();
    let verify = audit_verify(&g.cfg);
    assert_eq!(verify.code, Some(0), "{verify}");
    assert_eq!(ledger(&g.cfg).len(), 3);
}

/// Rolled back across a schema change as docs/technician.md says: the
/// copy the migration kept restored under the previous release, what this
/// release recorded since the upgrade exported first; then forward again.
#[test]
fn a_rollback_across_a_schema_change_restores_the_copy_the_migration_kept() {
    let Some(previous) = previous() else { return };
    let old_schema = previous_schema(&previous);
    if old_schema == scangate::build::SCHEMA_VERSION {
        eprintln!(
            "SKIPPED: the previous release has this schema (its rollback is tested as it is)"
        );
        return;
    }
    let mut g = Gateway::builder("scangate-rollback-schema-")
        .window_ms(600_000)
        .pty(ScannerSpec::named("counter-1").ack())
        .build();
    // The previous release's state.
    let mut old = launch(&previous, &g);
    g.send(&dscsa("S1"));
    g.send(&dscsa("S1"));
    wait_all_decided_by(Some(&previous), &g.cfg, 2);
    assert!(old.terminate().success(), "{}", old.log());
    // Upgraded: this release migrates it, keeping a copy.
    let upgraded_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    g.start();
    g.send(&dscsa("S2"));
    wait_all_decided(&g.cfg, 3);
    g.stop();
    let copy = g.state.join(format!(
        "scangate.db.schema-{old_schema}.before-{}",
        scangate::build::VERSION
    ));
    assert!(copy.is_file(), "no copy {}", copy.display());
    // What it recorded since, exported first.
    let since: Outcome = cli_cfg(&g.cfg, &["ledger", "export", "--since", &upgraded_at]).into();
    assert_eq!(since.code, Some(0), "{since}");
    assert!(since.stdout.contains("\"S2\""), "{since}");
    // The copy restored, the previous release on it.
    let db = g.state.join("scangate.db");
    std::fs::rename(&db, g.state.join("scangate.db.after-upgrade")).unwrap();
    for side in ["scangate.db-wal", "scangate.db-shm"] {
        let _ = std::fs::remove_file(g.state.join(side));
    }
    std::fs::copy(&copy, &db).unwrap();
    let mut old = launch(&previous, &g);
    g.send(&dscsa("S3"));
    g.send(&dscsa("S1"));
    let st = wait_all_decided_by(Some(&previous), &g.cfg, 4);
    assert_eq!(
        (count(&st, "committed"), count(&st, "suppressed")),
        (2, 2),
        "S1 still an echo of its commit, S2 gone with the upgrade's records: {st}"
    );
    let verify: Outcome = Command::new(&previous)
        .args(["audit", "verify", "--config"])
        .arg(&g.cfg)
        .output()
        .unwrap()
        .into();
    // (Until the previous release anchors its own head, its verify
    // reports the records the rollback gave up, as the docs say.)
    assert!(
        verify.code == Some(0) || verify.stdout.contains("state-id"),
        "{verify}"
    );
    assert!(old.terminate().success(), "{}", old.log());
    // And forward again: migrated (and copied) once more.
    g.start();
    g.send(&dscsa("S4"));
    wait_all_decided(&g.cfg, 5);
    g.stop();
    audit_verify(&g.cfg);
    let serials: Vec<String> = ledger(&g.cfg)
        .iter()
        .map(|e| e["serial"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(serials, ["S1", "S3", "S4"]);
}

#[test]
fn the_previous_release_refuses_a_newer_schema_and_changes_nothing() {
    let Some(previous) = previous() else { return };
    let mut g = Gateway::builder("scangate-rollback-")
        .pty(ScannerSpec::named("counter-1").ack())
        .build();
    g.start();
    g.send(&dscsa("N1"));
    wait_all_decided(&g.cfg, 1);
    g.stop();
    // A later release's schema, as a later release would leave it.
    let db = g.state.join("scangate.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .pragma_update(None, "user_version", scangate::build::SCHEMA_VERSION + 1)
        .unwrap();
    let before = std::fs::read(&db).unwrap();
    let mut cmd = Command::new(&previous);
    run_args(&mut cmd, &g.cfg);
    let out: Outcome = cmd.output().unwrap().into();
    assert_eq!(out.code, Some(3), "{out}");
    assert!(out.stderr.contains("newer"), "{out}");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the database was touched"
    );
    // Control: this release refuses it the same way.
    let out: Outcome = cli_cfg(&g.cfg, &["run"]).into();
    assert_eq!(out.code, Some(3), "{out}");
}
