//! The state directory trusts nothing it did not make. Whoever holds the
//! service account owns the state directory and can put a symbolic link,
//! a FIFO or a second name of another file where scangate keeps a file of
//! its own; a technician then runs `scangate` there as root. At every
//! name scangate uses, a link to a victim file is planted: whatever the
//! command does (refuse, or replace the link with a file of its own), the
//! victim is left byte for byte, and a refusal names the link and says
//! what to do. The control: the previous release, which opened the lock
//! file through links, writes its pid into the victim.
//!
//! Modes: a state made under `umask 022` is still the owner's and its
//! group's only; a loose one made by hand is told, with the `chmod`.
//!
//! Real daemon, real PTY scanner, real SQLite files.

use crate::util::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const PRECIOUS: &str = "a file scangate must never write\n";

/// A gateway with one ACKing scanner, started once and stopped: a state
/// directory with its database, identity and status file.
fn started(prefix: &str) -> Gateway {
    let mut gw = Gateway::builder(prefix)
        .pty(ScannerSpec::named("counter-1").ack())
        .build();
    gw.start();
    gw.send(&dscsa("L0000001"));
    assert_eq!(gw.replies(1), vec![ACK]);
    gw.stop();
    gw
}

/// A victim file outside the state directory, and a link to it at `name`
/// in it (whatever was there moved to `name.kept`).
fn plant(gw: &Gateway, name: &str) -> PathBuf {
    let victim = gw.dir.join(format!("victim-{name}"));
    fs::write(&victim, PRECIOUS).unwrap();
    let at = gw.state.join(name);
    if at.symlink_metadata().is_ok() {
        fs::rename(&at, gw.state.join(format!("{name}.kept"))).unwrap();
    }
    std::os::unix::fs::symlink(&victim, &at).unwrap();
    victim
}

/// Take the link at `name` away again, putting back what was there.
fn unplant(gw: &Gateway, name: &str) {
    let at = gw.state.join(name);
    if at
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        fs::remove_file(&at).unwrap();
    }
    let kept = gw.state.join(format!("{name}.kept"));
    if kept.exists() {
        fs::rename(kept, at).unwrap();
    }
}

fn untouched(victim: &Path, what: &str) {
    assert_eq!(
        fs::read_to_string(victim).unwrap(),
        PRECIOUS,
        "{what}: the link's target was written through"
    );
}

/// Run the daemon with a link planted at `name`: refused at start (exit 3,
/// the link named), or up and stopped cleanly; either way the victim
/// unchanged. Returns whether it was refused.
fn run_with_link(gw: &mut Gateway, name: &str) -> bool {
    let victim = plant(gw, name);
    let mut daemon = gw.spawn_with_env(&[]);
    let mut exited = None;
    wait_until("the daemon to open its scanner or exit", || {
        exited = daemon.exited();
        exited.is_some()
            || open_files(daemon.pid())
                .iter()
                .any(|p| gw.pty_paths().contains(&p.as_path()))
    });
    let refused = match exited {
        Some(status) => {
            let log = daemon.log();
            assert_eq!(status.code(), Some(3), "{name}: {log}");
            let link = gw.state.join(name);
            assert!(
                log.contains(&format!("{} is a symbolic link", link.display())),
                "{name}: the refusal names the link\n{log}"
            );
            assert!(log.contains("Fix: "), "{name}: and says what to do\n{log}");
            true
        }
        None => {
            gw.send(&dscsa(&format!("L-{name}")));
            assert_eq!(gw.replies(1), vec![ACK], "{name}: a scan goes through");
            let st = daemon.terminate();
            assert!(st.success(), "{name}: {st}\n{}", daemon.log_digest());
            false
        }
    };
    untouched(&victim, name);
    unplant(gw, name);
    refused
}

#[test]
fn a_link_planted_at_any_name_of_the_state_directory_is_never_written_through() {
    let mut gw = started("scangate-links-");
    // Names whose link must stop the start: what the daemon opens and
    // writes in place.
    for name in [
        "scangate.lock",
        "state-id",
        "scangate.db",
        "scangate.db-wal",
        "scangate.db-shm",
        "scangate.db-journal",
    ] {
        assert!(run_with_link(&mut gw, name), "{name}: refused at start");
    }
    // Names it replaces whole (a rename over the link) or writes under a
    // name of its own making: the daemon runs, the link is replaced or
    // refused later, the victim unchanged.
    for name in ["status.json", "state-id.tmp", "scangate.db.new"] {
        run_with_link(&mut gw, name);
    }
    // A first start builds its database under a name of its own.
    let mut fresh = Gateway::builder("scangate-links-first-")
        .pty(ScannerSpec::named("counter-1").ack())
        .build();
    fs::create_dir_all(&fresh.state).unwrap();
    assert!(run_with_link(&mut fresh, "scangate.db.new"));
    assert!(run_with_link(&mut fresh, "state-id.tmp"));
    // The state is whole after all that.
    gw.start();
    gw.send(&dscsa("L0000002"));
    assert_eq!(gw.replies(1), vec![ACK]);
    gw.stop();
    assert!(audit_verify(&gw.cfg).stdout.contains("intact"));
}

#[test]
fn commands_run_by_hand_refuse_links_too() {
    let gw = started("scangate-links-cli-");
    // `state reset` takes the lock first: the old way wrote its pid into
    // the lock's target.
    let victim = plant(&gw, "scangate.lock");
    let out: Outcome = cli_cfg(&gw.cfg, &["state", "reset", "--confirm", "x"]).into();
    assert_eq!(out.code, Some(3), "{out}");
    assert!(out.stderr.contains("is a symbolic link"), "{out}");
    untouched(&victim, "state reset, link at the lock");
    unplant(&gw, "scangate.lock");
    // Read-only commands do not read through a link at the database
    // either, nor at the status file.
    for (name, args) in [
        ("scangate.db", &["ledger", "export"][..]),
        ("scangate.db", &["status"][..]),
        ("state-id", &["audit", "verify"][..]),
    ] {
        let victim = plant(&gw, name);
        let out: Outcome = cli_cfg(&gw.cfg, args).into();
        assert_ne!(out.code, Some(0), "{args:?}: {out}");
        assert!(
            out.stderr.contains("is a symbolic link"),
            "{args:?}, link at {name}: {out}"
        );
        untouched(&victim, name);
        unplant(&gw, name);
    }
    let victim = plant(&gw, "status.json");
    let out: Outcome = cli_cfg(&gw.cfg, &["status", "--json"]).into();
    assert!(
        !out.stdout.contains(PRECIOUS.trim()) && !out.stderr.contains(PRECIOUS.trim()),
        "{out}"
    );
    untouched(&victim, "status");
    unplant(&gw, "status.json");
    // A FIFO at the lock does not hang the command: refused.
    fs::rename(gw.state.join("scangate.lock"), gw.state.join("lock.kept")).unwrap();
    nix::unistd::mkfifo(
        &gw.state.join("scangate.lock"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let out: Outcome = cli_cfg(&gw.cfg, &["state", "reset", "--confirm", "x"]).into();
    assert_eq!(out.code, Some(3), "{out}");
    assert!(out.stderr.contains("named pipe"), "{out}");
}

#[test]
fn a_reset_moves_the_lost_database_aside_over_planted_links_without_writing_through() {
    let gw = started("scangate-links-reset-");
    let id = fs::read_to_string(gw.state.join("state-id"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("state_id ").map(str::to_string))
        .unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(gw.state.join("scangate.db"))
        .unwrap()
        .set_len(0)
        .unwrap();
    // The moved-aside names carry the second: links for the next minute.
    let victim = gw.dir.join("victim-lost");
    fs::write(&victim, PRECIOUS).unwrap();
    let now = chrono::Utc::now();
    for s in 0..60 {
        let stamp = (now + chrono::Duration::seconds(s)).format("%Y%m%dT%H%M%SZ");
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let name = gw.state.join(format!("scangate.db.lost-{stamp}{suffix}"));
            std::os::unix::fs::symlink(&victim, name).unwrap();
        }
    }
    let done: Outcome = cli_cfg(&gw.cfg, &["state", "reset", "--confirm", &id]).into();
    assert_eq!(done.code, Some(0), "{done}");
    untouched(&victim, "state reset");
    let aside: Vec<_> = fs::read_dir(&gw.state)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_file())
        .filter(|e| e.file_name().to_string_lossy().contains(".lost-"))
        .collect();
    assert!(
        aside
            .iter()
            .any(|e| e.file_name().to_string_lossy().ends_with('Z')),
        "the lost database is moved aside as a file"
    );
}

#[test]
fn a_migration_copy_is_never_written_through_a_link_at_its_name() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/states/schema-10-684a3f6");
    let dir = tempdir("scangate-links-copy-");
    let state = dir.path().join("state");
    fs::create_dir(&state).unwrap();
    for name in [
        "scangate.db",
        "scangate.db-wal",
        "scangate.db-shm",
        "state-id",
    ] {
        fs::copy(fixture.join(name), state.join(name)).unwrap();
    }
    let mut gw = Gateway::builder_in(dir.path())
        .state_dir(&state)
        .pty(ScannerSpec::named("counter-1").ack())
        .build();
    let version = env!("CARGO_PKG_VERSION");
    let copy = format!("scangate.db.schema-10.before-{version}");
    let victim = plant(&gw, &format!("{copy}.tmp"));
    let victim_wal = plant(&gw, &format!("{copy}.tmp-journal"));
    gw.start();
    gw.stop();
    untouched(&victim, "the copy's temporary name");
    untouched(&victim_wal, "the copy's journal");
    let kept = fs::symlink_metadata(state.join(&copy)).expect("the copy is kept");
    assert!(kept.file_type().is_file() && kept.len() > 0);
}

/// `cmd` under `umask 022`, as a technician's shell has it.
fn with_umask_022(cmd: &mut Command) -> &mut Command {
    // SAFETY: umask is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o022);
            Ok(())
        })
    }
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// A fresh state made by `bin run` under umask 022, stopped: each file's
/// mode, and whether any is open to others.
fn modes_made_by(bin: &str, prefix: &str) -> Vec<(String, u32)> {
    let gw = Gateway::builder(prefix)
        .pty(ScannerSpec::named("counter-1").ack())
        .build();
    let err = fs::File::create(&gw.log).unwrap();
    let mut cmd = Command::new(bin);
    run_args(&mut cmd, &gw.cfg);
    with_umask_022(&mut cmd)
        .env_remove("SCANGATE_CONFIG")
        .env_remove("STATE_DIRECTORY")
        .stdin(std::process::Stdio::null())
        .stderr(err);
    let mut daemon = Daemon::spawn(cmd, &gw.log);
    daemon.wait_open(&gw.pty_paths());
    wait_until("the status file", || gw.state.join("status.json").exists());
    let mut found = vec![("(state directory)".to_string(), mode(&gw.state))];
    for e in fs::read_dir(&gw.state).unwrap().flatten() {
        found.push((
            e.file_name().to_string_lossy().into_owned(),
            mode(&e.path()),
        ));
    }
    assert!(daemon.terminate().success());
    found
}

#[test]
fn a_state_made_under_a_loose_umask_is_still_closed_to_others() {
    let found = modes_made_by(bin(), "scangate-modes-");
    assert!(found.len() >= 5, "{found:?}");
    for (name, mode) in &found {
        if name == "tap.sock" {
            // The tap socket: its group connects (connect(2) needs write
            // permission on a socket); others nothing.
            assert_eq!(mode & 0o777, 0o660, "{name} is {mode:o}: {found:?}");
            continue;
        }
        assert_eq!(mode & 0o027, 0, "{name} is {mode:o}: {found:?}");
    }
    // The control: the last release before the hardening left them to
    // the umask.
    let Ok(previous) = std::env::var("SCANGATE_UNHARDENED_BIN") else {
        eprintln!("SKIPPED (control): SCANGATE_UNHARDENED_BIN is not set");
        return;
    };
    let before = modes_made_by(&previous, "scangate-modes-prev-");
    assert!(
        before.iter().any(|(_, mode)| mode & 0o004 != 0),
        "the previous release left files readable by all: {before:?}"
    );
}

#[test]
fn a_state_open_to_others_is_told_with_its_fix() {
    let mut gw = started("scangate-modes-loose-");
    fs::set_permissions(&gw.state, fs::Permissions::from_mode(0o755)).unwrap();
    let db = gw.state.join("scangate.db");
    fs::set_permissions(&db, fs::Permissions::from_mode(0o666)).unwrap();
    gw.start();
    let status: Outcome = cli_cfg(&gw.cfg, &["status"]).into();
    gw.stop();
    let log = fs::read_to_string(&gw.log).unwrap();
    for fix in [
        format!("chmod 0750 {}", gw.state.display()),
        format!("chmod 0640 {}", db.display()),
    ] {
        assert!(log.contains(&fix), "the daemon's log: {fix}\n{log}");
        assert!(status.stdout.contains(&fix), "status: {fix}\n{status}");
    }
    assert_eq!(status.code, Some(1), "a reason to worry: {status}");
    // The control: closed again, nothing is said.
    fs::set_permissions(&gw.state, fs::Permissions::from_mode(0o750)).unwrap();
    fs::set_permissions(&db, fs::Permissions::from_mode(0o640)).unwrap();
    let status: Outcome = cli_cfg(&gw.cfg, &["status"]).into();
    assert!(!status.stdout.contains("chmod"), "{status}");
}

#[test]
fn the_previous_release_wrote_through_a_link_at_its_lock() {
    // The control for the tests above: they catch a scangate that follows
    // links (the last release before the hardening writes its pid through
    // the lock's link).
    let Ok(previous) = std::env::var("SCANGATE_UNHARDENED_BIN") else {
        eprintln!("SKIPPED: SCANGATE_UNHARDENED_BIN is not set");
        return;
    };
    let gw = started("scangate-links-prev-");
    let victim = plant(&gw, "scangate.lock");
    let err = fs::File::create(gw.dir.join("prev.log")).unwrap();
    let mut cmd = Command::new(previous);
    run_args(&mut cmd, &gw.cfg);
    cmd.env_remove("SCANGATE_CONFIG")
        .env_remove("STATE_DIRECTORY")
        .stdin(std::process::Stdio::null())
        .stderr(err);
    let mut daemon = Daemon::spawn(cmd, &gw.dir.join("prev.log"));
    wait_until("the previous release to write through the link", || {
        fs::read_to_string(&victim).unwrap() != PRECIOUS
    });
    daemon.kill9();
    let written = fs::read_to_string(&victim).unwrap();
    assert!(
        written.trim().parse::<u32>().is_ok(),
        "its pid: {written:?}"
    );
}
