//! Bad configuration, an unusable state directory and a corrupt database give
//! a clear message, the documented exit code, and leave everything untouched.
//!
//! Exit codes (src/exit.rs, decided in src/cmd/mod.rs): 0 ok, 1 check failed, 2 config/usage, 3 state/db.

use crate::util::*;
use std::fs;
use std::path::{Path, PathBuf};

const EXIT_CONFIG: i32 = 2;
const EXIT_STATE: i32 = 3;

/// A minimal valid config with one scanner, with `extra` appended to the
/// scanner table and `dedup` as the [dedup] body.
fn config_text(state_dir: &Path, dedup: &str, scanner_extra: &str) -> String {
    format!(
        "[gateway]\nfacility = \"f1\"\nid = \"gw1\"\nstate_dir = {:?}\n\n[dedup]\n{dedup}\n\n\
         [[scanner]]\nname = \"counter-1\"\nkind = \"serial\"\npath = \"/dev/scangate/counter-1\"\n\
         scan_type = \"dispense\"\n{scanner_extra}\n",
        state_dir.to_str().unwrap()
    )
}

/// [`config_text`] (default window) and a second serial scanner `name` at
/// `path`, with `extra` lines after its `scan_type`.
fn with_second_scanner(
    state_dir: &Path,
    name: &str,
    path: &str,
    scan_type: &str,
    extra: &str,
) -> String {
    config_text(state_dir, "window_ms = 3000", "")
        + &format!(
            "\n[[scanner]]\nname = {name:?}\nkind = \"serial\"\npath = {path:?}\n\
             scan_type = {scan_type:?}\n{extra}\n"
        )
}

/// `check-config` on the config `text` makes for a state directory must
/// exit 2, name `key` on stderr, say how to fix it, and not create the state
/// directory.
fn assert_config_error(text: impl FnOnce(&Path) -> String, key: &str) {
    let dir = tempdir("scangate-cli-");
    let state = state_of(&dir);
    let text = text(&state);
    let path = dir.path().join("scangate.toml");
    fs::write(&path, &text).unwrap();
    let out: Outcome = cli_cfg(&path, &["check-config"]).into();
    assert_eq!(out.code, Some(EXIT_CONFIG), "config:\n{text}\n{out}");
    assert!(
        out.stderr.contains(&format!("`{key}`")),
        "stderr must name the key `{key}`:\n{out}"
    );
    assert!(
        out.stderr.contains("Fix:"),
        "stderr must say how to fix it:\n{out}"
    );
    assert!(
        out.stderr.contains(path.to_str().unwrap()),
        "stderr must name the config file:\n{out}"
    );
    assert!(
        !state.exists(),
        "check-config must not create the state directory"
    );
    // `run` refuses the same file with the same code before touching anything.
    let run: Outcome = cli_cfg(&path, &["run"]).into();
    assert_eq!(run.code, Some(EXIT_CONFIG), "run on a bad config:\n{run}");
    assert!(!state.exists(), "run created state on a bad config");
}

/// `<dir>/scangate.toml`: [`config_text`] with the default window and no
/// extra scanner keys.
fn default_config(dir: &Path, state_dir: &Path) -> PathBuf {
    let cfg = dir.join("scangate.toml");
    fs::write(&cfg, config_text(state_dir, "window_ms = 3000", "")).unwrap();
    cfg
}

fn state_of(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("state")
}

#[test]
fn quantity_zero_is_named_with_its_scanner_index() {
    assert_config_error(
        |state| config_text(state, "window_ms = 3000", "quantity = 0"),
        "scanner[0].quantity",
    );
}

#[test]
fn quantity_error_names_the_second_scanner() {
    assert_config_error(
        |state| with_second_scanner(state, "counter-2", "/dev/x", "dispense", "quantity = 0"),
        "scanner[1].quantity",
    );
}

#[test]
fn unknown_key_in_dedup_is_named() {
    assert_config_error(
        |state| config_text(state, "window_msec = 3000", ""),
        "dedup.window_msec",
    );
}

#[test]
fn unknown_key_in_scanner_is_named() {
    assert_config_error(
        |state| config_text(state, "window_ms = 3000", "colour = \"red\""),
        "scanner[0].colour",
    );
}

#[test]
fn unknown_section_is_named() {
    assert_config_error(
        |state| config_text(state, "window_ms = 3000", "") + "\n[gatewya]\nid = \"x\"\n",
        "gatewya",
    );
}

#[test]
fn bad_scan_type_is_named() {
    assert_config_error(
        |state| {
            config_text(state, "window_ms = 3000", "")
                .replace("scan_type = \"dispense\"", "scan_type = \"sell\"")
        },
        "scanner[0].scan_type",
    );
}

#[test]
fn window_ms_zero_is_named() {
    assert_config_error(
        |state| config_text(state, "window_ms = 0", ""),
        "dedup.window_ms",
    );
}

#[test]
fn negative_window_ms_is_named() {
    assert_config_error(
        |state| config_text(state, "window_ms = -5", ""),
        "dedup.window_ms",
    );
}

#[test]
fn duplicate_scanner_name_is_named() {
    assert_config_error(
        |state| with_second_scanner(state, "counter-1", "/dev/y", "waste", ""),
        "scanner[1].name",
    );
}

/// `check-config` resolves the config as `run` does: a `[redis]` password
/// or CA file that cannot be read fails both with exit 2, naming the key
/// and the fix (`run` before it touches the state directory).
#[test]
fn an_unreadable_redis_secret_fails_check_config_as_it_fails_run() {
    for (key, file) in [
        ("password_file", "redis-password"),
        ("ca_file", "redis-ca.pem"),
    ] {
        let d = tempdir("scangate-cli-");
        let missing = d.path().join(file);
        let text = |state: &Path| {
            config_text(state, "window_ms = 3000", "")
                + &format!(
                    "\n[redis]\nurl = \"rediss://127.0.0.1:1/0\"\n{key} = {:?}\n",
                    missing.to_str().unwrap()
                )
        };
        assert_config_error(text, &format!("redis.{key}"));
    }
}

#[test]
fn valid_config_passes_check_config() {
    let d = tempdir("scangate-cli-");
    let path = d.path().join("scangate.toml");
    fs::write(
        &path,
        config_text(
            &state_of(&d),
            "window_ms = 1500",
            "quantity = 2\nack = true",
        ),
    )
    .unwrap();
    let out: Outcome = cli_cfg(&path, &["check-config"]).into();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("1 scanner(s)"), "{out}");
    assert!(out.stdout.contains("window 1500 ms"), "{out}");
    assert!(
        !state_of(&d).exists(),
        "check-config must not create the state dir"
    );
}

#[test]
fn missing_config_file_exits_2_naming_it() {
    let d = tempdir("scangate-cli-");
    let path = d.path().join("does-not-exist.toml");
    for args in [
        &["check-config"][..],
        &["run"][..],
        &["outbox", "status"][..],
    ] {
        let out: Outcome = cli_cfg(&path, args).into();
        assert_eq!(out.code, Some(EXIT_CONFIG), "{args:?}: {out}");
        assert!(
            out.stderr.contains(path.to_str().unwrap()),
            "{args:?}: the message must name the missing file:\n{out}"
        );
    }
}

#[test]
fn unwritable_state_dir_exits_3_naming_it() {
    // Running as root, permission bits do not stop writes: make the state
    // dir's parent a regular file instead.
    let d = tempdir("scangate-cli-");
    let file = d.path().join("a-regular-file");
    fs::write(&file, b"not a directory").unwrap();
    let state = file.join("state");
    let cfg = default_config(d.path(), &state);

    let out: Outcome = cli_cfg(&cfg, &["run"]).into();
    assert_eq!(out.code, Some(EXIT_STATE), "{out}");
    assert!(
        out.stderr.contains(state.to_str().unwrap()),
        "the message must name the state directory {}:\n{out}",
        state.display()
    );
    assert!(
        out.stderr.contains("Fix:"),
        "the message must say what to do:\n{out}"
    );
    assert_eq!(fs::read(&file).unwrap(), b"not a directory");
}

/// Every command that opens the database on `state` must exit 3 naming `db`,
/// and leave its bytes (and its directory listing) exactly as they were.
fn assert_refuses_corrupt_db(state: &Path, cfg: &Path) {
    let db = state.join("scangate.db");
    let before = fs::read(&db).unwrap();
    let listing = || {
        let mut v: Vec<_> = fs::read_dir(state)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let files_before = listing();
    for args in [
        &["run"][..],
        &["outbox", "status", "--json"][..],
        &["outbox", "status"][..],
        &["ledger", "export"][..],
        &["audit", "verify"][..],
    ] {
        let out: Outcome = cli_cfg(cfg, args).into();
        assert_eq!(
            out.code,
            Some(EXIT_STATE),
            "{args:?} on a corrupt db: {out}"
        );
        assert!(
            out.stderr.contains(db.to_str().unwrap()),
            "{args:?}: the message must name {}:\n{out}",
            db.display()
        );
        assert!(
            fs::read(&db).unwrap() == before,
            "{args:?} modified the corrupt database file"
        );
    }
    // Opening a WAL-mode file makes SQLite create its -wal/-shm side files,
    // and `run` takes the state directory's lock file; that is allowed, but
    // nothing may have been written to the WAL.
    let added: Vec<_> = listing()
        .into_iter()
        .filter(|f| !files_before.contains(f))
        .collect();
    for f in &added {
        let name = f.to_string_lossy();
        assert!(
            name == "scangate.db-wal" || name == "scangate.db-shm" || name == "scangate.lock",
            "unexpected file {name} was created next to the corrupt db"
        );
    }
    let wal = state.join("scangate.db-wal");
    if wal.exists() {
        assert_eq!(
            fs::metadata(&wal).unwrap().len(),
            0,
            "something was written into the corrupt database's WAL"
        );
    }
}

#[test]
fn garbage_database_exits_3_and_is_left_untouched() {
    let d = tempdir("scangate-cli-");
    let state = state_of(&d);
    fs::create_dir(&state).unwrap();
    // 16 KiB of deterministic noise: not an SQLite header.
    let mut x: u32 = 0x1234_5678;
    let garbage: Vec<u8> = (0..16 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect();
    fs::write(state.join("scangate.db"), &garbage).unwrap();
    let cfg = default_config(d.path(), &state);
    assert_refuses_corrupt_db(&state, &cfg);
    assert_eq!(fs::read(state.join("scangate.db")).unwrap(), garbage);
}

#[test]
fn damaged_sqlite_database_exits_3_and_is_left_untouched() {
    // A real scangate database whose pages after the header are overwritten:
    // the header still says "SQLite format 3", the content does not hold up.
    let d = tempdir("scangate-cli-");
    let state = state_of(&d);
    {
        let _store = scangate::store::Store::open(&state).expect("creating a database");
    }
    let db = state.join("scangate.db");
    let mut bytes = fs::read(&db).unwrap();
    assert!(bytes.len() > 4096, "a migrated database has several pages");
    for (i, b) in bytes.iter_mut().enumerate().skip(100) {
        *b = (i as u8).wrapping_mul(31) ^ 0xA5;
    }
    fs::write(&db, &bytes).unwrap();
    let cfg = default_config(d.path(), &state);
    assert_refuses_corrupt_db(&state, &cfg);
}

#[test]
fn foreign_sqlite_database_is_refused_not_adopted() {
    // Someone else's SQLite file where ours should be: never migrate into it.
    let d = tempdir("scangate-cli-");
    let state = state_of(&d);
    fs::create_dir(&state).unwrap();
    {
        let c = rusqlite::Connection::open(state.join("scangate.db")).unwrap();
        c.execute_batch("CREATE TABLE inventory (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO inventory (name) VALUES ('x');")
            .unwrap();
    }
    let before = fs::read(state.join("scangate.db")).unwrap();
    let cfg = default_config(d.path(), &state);
    let out: Outcome = cli_cfg(&cfg, &["run"]).into();
    assert_eq!(out.code, Some(EXIT_STATE), "{out}");
    assert!(out.stderr.contains("scangate.db"), "{out}");
    assert_eq!(fs::read(state.join("scangate.db")).unwrap(), before);
}

#[test]
fn shipped_example_config_passes_check_config() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
    if !example.exists() {
        eprintln!(
            "SKIPPED: {} does not exist yet; nothing to check",
            example.display()
        );
        return;
    }
    let out: Outcome = cli_cfg(&example, &["check-config"]).into();
    assert_eq!(
        out.code,
        Some(0),
        "the shipped example must be valid:\n{out}"
    );
    assert!(out.stdout.contains("configuration OK"), "{out}");
}

#[test]
fn no_config_file_at_all_uses_defaults() {
    let d = tempdir("scangate-cli-");
    let out: Outcome = command()
        .arg("check-config")
        .current_dir(d.path())
        .output()
        .unwrap()
        .into();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("0 scanner(s)"), "{out}");
    assert!(out.stdout.contains("window 3000 ms"), "defaults: {out}");
    assert!(
        out.stdout.contains("scangate-state"),
        "state in ./scangate-state: {out}"
    );
    assert!(
        !d.path().join("scangate-state").exists(),
        "check-config must not create the state directory"
    );
}

#[test]
fn no_config_file_uses_state_directory_from_systemd() {
    let d = tempdir("scangate-cli-");
    let state = d.path().join("systemd-state");
    let out: Outcome = command()
        .arg("check-config")
        .current_dir(d.path())
        .env("STATE_DIRECTORY", format!("{}:/elsewhere", state.display()))
        .output()
        .unwrap()
        .into();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains(state.to_str().unwrap()), "{out}");
}

#[test]
fn bad_since_is_a_usage_error() {
    let d = tempdir("scangate-cli-");
    let cfg = default_config(d.path(), &state_of(&d));
    let out: Outcome = cli_cfg(&cfg, &["ledger", "export", "--since", "yesterday"]).into();
    assert_eq!(out.code, Some(EXIT_CONFIG), "{out}");
    assert!(out.stderr.contains("RFC 3339"), "{out}");
}

#[test]
fn read_only_commands_without_a_database_exit_3() {
    let d = tempdir("scangate-cli-");
    let state = state_of(&d);
    let cfg = default_config(d.path(), &state);
    let out: Outcome = cli_cfg(&cfg, &["audit", "verify"]).into();
    assert_eq!(out.code, Some(EXIT_STATE), "{out}");
    assert!(out.stderr.contains(state.to_str().unwrap()), "{out}");
    assert!(
        !state.exists(),
        "a read-only command must not create the state dir"
    );
}

#[test]
fn damage_deep_in_the_file_stops_the_running_daemon_with_exit_3() {
    // A database of 3000 decided scans (the benchmark writes it), with one
    // page in the middle of the outbox table overwritten: nothing read at
    // start touches it, only the integrity check that runs after start.
    let d = tempdir("scangate-cli-");
    let state = state_of(&d);
    fs::create_dir(&state).unwrap();
    let out: Outcome = cli(&[
        "bench",
        "--scans",
        "3000",
        "--seconds",
        "0",
        "--dir",
        state.to_str().unwrap(),
    ])
    .into();
    assert_eq!(out.code, Some(0), "{out}");
    let db = state.join("scangate.db");
    // The raw bytes of scan 1500 are stored in its outbox row only.
    let raw: Vec<u8> = open_db(&state)
        .query_row("SELECT raw FROM scans WHERE seq = 1500", [], |r| r.get(0))
        .unwrap();
    let mut bytes = fs::read(&db).unwrap();
    let at = bytes
        .windows(raw.len())
        .position(|w| w == raw)
        .expect("the outbox row is in the file");
    let page = at / 4096 * 4096;
    assert!(page > 0, "not the header page");
    for (i, b) in bytes[page..page + 4096].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31) ^ 0xA5;
    }
    fs::write(&db, &bytes).unwrap();
    let cfg = default_config(d.path(), &state);

    let mut daemon = Daemon::start(&cfg, &d.path().join("daemon.log"));
    let status = daemon.wait_exit();
    assert_eq!(status.code(), Some(EXIT_STATE), "{}", daemon.log());
    let log = daemon.log();
    let started = log.find("scangate starting").expect("it started");
    let failed = log
        .find("failed its integrity check after start")
        .expect("the reason is printed");
    assert!(started < failed, "{log}");
    assert!(
        log.contains(db.to_str().unwrap()) && log.contains("Fix:"),
        "{log}"
    );
    // `audit verify` checks every page, not only the audit table's;
    // `ledger export` reads no outbox page and answers at once.
    let out: Outcome = cli_cfg(&cfg, &["audit", "verify"]).into();
    assert_eq!(out.code, Some(EXIT_STATE), "{out}");
    assert!(out.stderr.contains(db.to_str().unwrap()), "{out}");
    let out: Outcome = cli_cfg(&cfg, &["ledger", "export"]).into();
    assert_eq!(out.code, Some(0), "{out}");
}

#[test]
fn a_gateway_without_scanners_runs_idle_until_stopped_and_says_why() {
    let d = tempdir("scangate-cli-");
    let cfg = d.path().join("scangate.toml");
    fs::write(
        &cfg,
        format!(
            "[gateway]\nfacility = \"f\"\nid = \"g\"\nstate_dir = {:?}\n",
            state_of(&d)
        ),
    )
    .unwrap();
    let mut daemon = Daemon::start(&cfg, &d.path().join("daemon.log"));
    // The page check runs on its own thread after start: by then the
    // writer has long been waiting for scans (it used to stop at once, and
    // the daemon exited 0 with "the outbox writer stopped unexpectedly").
    wait_until("the page check after start", || {
        daemon.log().contains("integrity check passed")
    });
    let status = daemon.terminate();
    let log = daemon.log();
    assert!(status.success(), "{log}");
    assert!(!log.contains("stopped unexpectedly"), "{log}");
    assert!(log.contains("stopping: closing scanners"), "{log}");
    assert!(
        log.contains("no [[scanner]] is configured") && log.contains("scangate devices"),
        "{log}"
    );
}

/// A TOML syntax error names the file, the line and the column.
#[test]
fn a_toml_syntax_error_exits_2_naming_line_and_column() {
    let d = tempdir("scangate-cli-");
    let path = d.path().join("scangate.toml");
    fs::write(&path, "[gateway]\nfacility = \"f1\"\nid = gw1\n").unwrap();
    for args in [&["check-config"][..], &["outbox", "status"][..]] {
        let out: Outcome = cli_cfg(&path, args).into();
        assert_eq!(out.code, Some(EXIT_CONFIG), "{args:?}: {out}");
        assert!(
            out.stderr.contains("line 3, column 6") && out.stderr.contains(path.to_str().unwrap()),
            "{args:?}: the message must name the file, line and column:\n{out}"
        );
    }
}

/// `--version` names the release, the schema version, the commit and the
/// target triple it was built for.
#[test]
fn version_names_the_schema_the_commit_and_the_target() {
    let out: Outcome = cli(&["--version"]).into();
    assert_eq!(out.code, Some(0), "{out}");
    let schema = format!("schema {}", scangate::build::SCHEMA_VERSION);
    for fact in [env!("SCANGATE_COMMIT"), env!("SCANGATE_TARGET"), &schema] {
        assert!(out.stdout.contains(fact), "{fact} not in: {out}");
    }
    assert!(
        out.stdout.contains(env!("CARGO_PKG_VERSION")),
        "the version number: {out}"
    );
}

/// Without any config file, a read command that finds no database says
/// that no config file was read and where it looked, instead of only
/// advising to create the default state directory.
#[test]
fn without_a_config_file_a_missing_database_names_the_config_lookup() {
    let d = tempdir("scangate-cli-");
    let out: Outcome = command()
        .args(["outbox", "status"])
        .current_dir(d.path())
        .output()
        .unwrap()
        .into();
    assert_eq!(out.code, Some(EXIT_STATE), "{out}");
    assert!(
        out.stderr.contains("no config file was read")
            && out.stderr.contains("/etc/scangate/scangate.toml")
            && out.stderr.contains("--config"),
        "{out}"
    );
    // With a config file, no such note.
    let cfg = default_config(d.path(), &state_of(&d));
    let out: Outcome = cli_cfg(&cfg, &["outbox", "status"]).into();
    assert_eq!(out.code, Some(EXIT_STATE), "{out}");
    assert!(!out.stderr.contains("no config file was read"), "{out}");
}
