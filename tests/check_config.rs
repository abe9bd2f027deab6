//! `scangate check-config`: what it checks beyond the file (the state
//! directory for the service user), and with `--online` the facility Redis
//! (a redis-server each test starts on a free port) and the scanners'
//! device paths (a PTY stands in for a serial scanner).

use crate::util::*;
use scangate::pty::VirtualScanner;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// A config in `dir` with state in `dir/state`, one serial scanner at
/// `scanner`, and `extra` appended (e.g. a `[redis]` section).
fn config(dir: &Path, scanner: &Path, extra: &str) -> std::path::PathBuf {
    let cfg = write_config(
        dir,
        &dir.join("state"),
        3000,
        &[ScannerSpec::new("counter-1", scanner)],
    );
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{text}{extra}")).unwrap();
    cfg
}

fn redis_section(redis: &RedisServer) -> String {
    format!("\n[redis]\nurl = {:?}\n", redis.url())
}

#[test]
fn online_against_a_good_redis_prints_its_version_and_the_clock_offset() {
    let d = tempdir("scangate-check-");
    let redis = RedisServer::start_temp(&["--appendonly", "yes"]);
    let scanner = VirtualScanner::new().unwrap();
    let cfg = config(d.path(), scanner.path(), &redis_section(&redis));
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut redis.connection())
        .unwrap();
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap()
        .trim()
        .to_string();
    let out: Outcome = cli_cfg(&cfg, &["check-config", "--online"]).into();
    assert_eq!(out.code, Some(0), "{out}");
    for shown in [
        format!("127.0.0.1:{}", redis.port),
        format!("Redis {version}"),
        "maxmemory-policy noeviction".into(),
        "appendonly yes".into(),
        "clock offset: this gateway's wall clock is".into(),
        format!("scanner counter-1: {} OK", scanner.path().display()),
    ] {
        assert!(out.stdout.contains(&shown), "{shown:?} not shown: {out}");
    }
    // Nothing of this gateway was written to the facility store.
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("scangate:*")
        .query(&mut redis.connection())
        .unwrap();
    assert!(keys.is_empty(), "check-config wrote {keys:?}");

    // A scanner whose device is not there: exit 1, naming it and what to do.
    let gone = d.path().join("ttyUSB9");
    let cfg = config(d.path(), &gone, &redis_section(&redis));
    let out: Outcome = cli_cfg(&cfg, &["check-config", "--online"]).into();
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stdout
            .contains(&format!("scanner counter-1: {} NOT usable", gone.display()))
            && out.stdout.contains("Fix:"),
        "{out}"
    );
    // Offline, the missing device is no error (it may be unplugged now).
    let out: Outcome = cli_cfg(&cfg, &["check-config"]).into();
    assert_eq!(out.code, Some(0), "{out}");
}

/// A Redis that may evict keys is refused with exit 2, naming the setting
/// and the fix; one that is not reachable is a failed check (exit 1).
#[test]
fn online_refuses_an_evicting_redis_naming_the_key_and_the_fix() {
    let d = tempdir("scangate-check-");
    let redis = RedisServer::start_temp(&["--maxmemory-policy", "allkeys-lru"]);
    let scanner = VirtualScanner::new().unwrap();
    let cfg = config(d.path(), scanner.path(), &redis_section(&redis));
    let out: Outcome = cli_cfg(&cfg, &["check-config", "--online"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    for named in [
        format!("127.0.0.1:{}", redis.port),
        "maxmemory-policy is \"allkeys-lru\"".into(),
        "Fix: set `maxmemory-policy noeviction`".into(),
    ] {
        assert!(out.stderr.contains(&named), "{named:?} not named: {out}");
    }
    // Offline it is not asked.
    let out: Outcome = cli_cfg(&cfg, &["check-config"]).into();
    assert_eq!(out.code, Some(0), "{out}");

    let port = free_port();
    let cfg = config(
        d.path(),
        scanner.path(),
        &format!("\n[redis]\nurl = \"redis://127.0.0.1:{port}/\"\nconnect_timeout_ms = 300\n"),
    );
    let out: Outcome = cli_cfg(&cfg, &["check-config", "--online"]).into();
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stdout.contains("facility Redis NOT reachable")
            && out.stdout.contains(&port.to_string()),
        "{out}"
    );
}

/// A password the server refuses: exit 2 naming the ACL user and the
/// password file, as `run` refuses it.
#[test]
fn online_names_a_refused_password_and_its_file() {
    let d = tempdir("scangate-check-");
    let redis = RedisServer::start_temp(&["--requirepass", "right-one"]);
    let secret = d.path().join("redis-password");
    std::fs::write(&secret, "wrong-one\n").unwrap();
    let scanner = VirtualScanner::new().unwrap();
    let cfg = config(
        d.path(),
        scanner.path(),
        &format!(
            "{}password_file = {:?}\n",
            redis_section(&redis),
            secret.to_str().unwrap()
        ),
    );
    let out: Outcome = cli_cfg(&cfg, &["check-config", "--online"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains("ACL user \"default\"")
            && out
                .stderr
                .contains(&format!("[redis] password_file ({})", secret.display())),
        "{out}"
    );
    assert!(!out.stderr.contains("wrong-one"), "{out}");
}

/// `check-config` as the service user (what the unit's ExecStartPre runs):
/// a state directory it cannot write is exit 3 naming it (one it cannot
/// create yet, a warning); a password file
/// it cannot read is exit 2 naming it. As root, it says as whom it checked.
#[test]
fn the_state_dir_and_the_password_file_are_checked_for_the_service_user() {
    let user = crate::observability::group_member();
    let d = tempdir("scangate-check-");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let scanner = VirtualScanner::new().unwrap();
    // The state directory's parent is root's, 0755: the service user cannot create it.
    let cfg = config(d.path(), scanner.path(), "");
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
    let as_user = |cfg: &Path| -> Outcome {
        Command::new("setpriv")
            .args([
                &format!("--reuid={user}"),
                "--regid=scangate",
                "--init-groups",
                bin(),
            ])
            .args(["check-config", "--config"])
            .arg(cfg)
            .env_remove("SCANGATE_CONFIG")
            .env_remove("STATE_DIRECTORY")
            .output()
            .unwrap()
            .into()
    };
    // Not there yet: a warning (systemd's StateDirectory= creates it at
    // start, after the technician ran check-config), not a failure.
    let state = d.path().join("state");
    let out = as_user(&cfg);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.stdout.contains("WARNING") && out.stdout.contains("StateDirectory="),
        "{out}"
    );
    assert!(!state.exists(), "check-config created the state directory");
    // There, root's and 0755: exit 3 naming it.
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = as_user(&cfg);
    assert_eq!(out.code, Some(3), "{out}");
    assert!(
        out.stderr
            .contains(&format!("state directory {}", state.display()))
            && out.stderr.contains("not writable by this user")
            && out.stderr.contains("Fix:"),
        "{out}"
    );

    // As root: checked as the unit's user, named.
    let out: Outcome = cli_cfg(&cfg, &["check-config"]).into();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("user scangate"), "{out}");

    // Writable for it: fine. A password file only root may read: named.
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let secret = d.path().join("redis-password");
    std::fs::write(&secret, "pw\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let cfg = config(
        d.path(),
        scanner.path(),
        &format!(
            "\n[redis]\nurl = \"redis://127.0.0.1:1/\"\npassword_file = {:?}\n",
            secret.to_str().unwrap()
        ),
    );
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = as_user(&cfg);
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains("`redis.password_file`")
            && out.stderr.contains(secret.to_str().unwrap()),
        "{out}"
    );
    std::fs::remove_file(&secret).unwrap();
    let cfg = config(d.path(), scanner.path(), "");
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = as_user(&cfg);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("writable by this user"), "{out}");
}

/// `check-config --online` says per backend what confirms a claim round
/// and what covers a guarantee it lacks, and fails on none of them: a
/// Redis 7.0 without AOF and without replicas (no confirmation but the
/// primary's answer), one with AOF (no WAITAOF before 7.2), a Valkey with
/// AOF (WAITAOF), and a Redis Cluster (the facility's shard's replica).
#[test]
fn online_reports_what_confirms_a_claim_on_each_backend() {
    let d = tempdir("scangate-check-confirm-");
    let scanner = VirtualScanner::new().unwrap();
    let report = |section: &str| -> String {
        let cfg = config(d.path(), scanner.path(), section);
        let out: Outcome = cli_cfg(&cfg, &["check-config", "--online"]).into();
        assert_eq!(out.code, Some(0), "{out}");
        out.stdout
    };
    let bare = RedisServer::start_temp(&["--appendonly", "no"]);
    let out = report(&redis_section(&bare));
    for shown in [
        "confirmation:",
        "replicas: WAIT available, but no replica is connected",
        "on disk: NOT available",
        "appendonly is off",
        "covered by the reconciliation",
    ] {
        assert!(out.contains(shown), "{shown:?} not shown: {out}");
    }
    let aof = RedisServer::start_temp(&["--appendonly", "yes"]);
    let out = report(&redis_section(&aof));
    assert!(
        out.contains("has no WAITAOF") && out.contains("appendonly yes writes it within a second"),
        "{out}"
    );
    if RedisServer::valkey_installed() {
        let dir = tempdir("scangate-check-valkey-");
        let valkey =
            RedisServer::start_binary("valkey-server", dir.path(), &["--appendonly", "yes"]);
        let out = report(&redis_section(&valkey));
        assert!(
            out.contains("on disk: WAITAOF available, appendonly yes"),
            "{out}"
        );
    }
    let cluster = RedisCluster::start(&[]);
    let out = report(&format!("\n{}", cluster.section()));
    let slot = scangate::facility::cluster::facility_slot("test-pharmacy");
    for shown in [
        format!("Redis Cluster: slot {slot}'s shard"),
        "WAIT available, 1 replica(s) connected; each round waits for 1".to_string(),
    ] {
        assert!(out.contains(&shown), "{shown:?} not shown: {out}");
    }
}
