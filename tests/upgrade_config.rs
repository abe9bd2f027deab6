//! Every config an earlier release shipped starts this one: each file in
//! `tests/fixtures/configs/` (the `config/scangate.toml` of an earlier
//! release, named by its commit, and a site's edit of one) passes
//! `check-config` and `run` comes up ready, with its state directory moved
//! into the test's. A key an earlier release read and this one does not
//! is carried over with a warning from `check-config`, the daemon's log
//! and `status`.

use crate::util::*;
use std::path::{Path, PathBuf};

/// The fixtures, by file name.
fn shipped_configs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/configs");
    let mut all: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    all.sort();
    all
}

/// `fixture` as a site would have it (mode 0640, as the package creates
/// it), its state directory in `dir`.
fn placed(fixture: &Path, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(fixture).unwrap();
    let state = dir.join("state");
    let moved = text.replace(
        "state_dir = \"/var/lib/scangate\"",
        &format!("state_dir = {:?}", state.display().to_string()),
    );
    assert_ne!(moved, text, "{}: no state_dir to move", fixture.display());
    let cfg = dir.join("scangate.toml");
    write_site_config(&cfg, &moved);
    cfg
}

/// What is expected of a fixture: the carried keys its name promises.
fn carried_keys(fixture: &Path) -> &'static [&'static str] {
    if fixture.to_string_lossy().contains("site-redis") {
        &["redis.require_synced_clock"]
    } else {
        &[]
    }
}

#[test]
fn every_earlier_releases_shipped_config_passes_check_config() {
    let configs = shipped_configs();
    assert!(configs.len() >= 12, "{configs:?}");
    for fixture in configs {
        let d = tempdir("scangate-oldcfg-");
        let cfg = placed(&fixture, d.path());
        let out = Outcome::from(cli_cfg(&cfg, &["check-config"]));
        assert_eq!(out.code, Some(0), "{}: {out}", fixture.display());
        let warned: Vec<&str> = out
            .stdout
            .lines()
            .filter(|l| l.starts_with("warning: "))
            .collect();
        let expected = carried_keys(&fixture);
        assert_eq!(warned.len(), expected.len(), "{}: {out}", fixture.display());
        for (line, key) in warned.iter().zip(expected) {
            assert!(
                line.contains(&format!("`{key}`")) && line.contains("Fix: "),
                "{line}"
            );
        }
    }
}

#[test]
fn every_earlier_releases_shipped_config_runs() {
    for fixture in shipped_configs() {
        let d = tempdir("scangate-oldcfg-");
        let cfg = placed(&fixture, d.path());
        let socket = NotifySocket::bind(d.path());
        let log = d.path().join("daemon.log");
        let mut daemon = Daemon::start_with_env(&cfg, &log, &[("NOTIFY_SOCKET", socket.path())]);
        socket.wait_for("READY", "1", 1);
        for key in carried_keys(&fixture) {
            let logged = daemon.log();
            assert!(
                logged.contains(&format!("`{key}`")) && logged.contains("deprecated since"),
                "{}: no warning for {key} in the log:\n{logged}",
                fixture.display()
            );
            let status = Outcome::from(cli_cfg(&cfg, &["status", "--json"]));
            let st: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
            let reasons = st["degraded"].as_array().unwrap();
            assert!(
                reasons
                    .iter()
                    .any(|r| r.as_str().unwrap().starts_with(&format!("config: `{key}`"))),
                "{reasons:?}"
            );
        }
        let exit = daemon.terminate();
        assert!(
            exit.success(),
            "{}: {exit:?}\n{}",
            fixture.display(),
            daemon.log()
        );
    }
}

#[test]
fn a_key_no_release_accepted_is_still_refused() {
    // Control: carrying old keys over does not let any unknown key in.
    let d = tempdir("scangate-oldcfg-");
    let fixture = shipped_configs().pop().unwrap();
    let cfg = placed(&fixture, d.path());
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replace("[dedup]\n", "[dedup]\nrequire_synced_clocks = true\n"),
    )
    .unwrap();
    let out = Outcome::from(cli_cfg(&cfg, &["check-config"]));
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("require_synced_clocks"), "{out}");
}
