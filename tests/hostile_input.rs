//! What a technician (or someone with write access to the config) can put
//! in the config and the files it names, and what the gateway makes of it:
//! a device or FIFO where a file belongs, a file far too large, a value of
//! megabytes, a state directory no directory can be made at, a scanner
//! path that is no serial port, a sink URL no POST can reach — each
//! refused at once with a message of a readable length naming the file or
//! key, the limit and the fix; and secrets or a config others may read,
//! warned of (never refused) by `check-config`, the daemon and `status`.
//!
//! One test per probe, each run against the real binary under a time
//! bound: a read that never ends (`/dev/zero`, a FIFO without a writer)
//! fails the test instead of hanging it.

use crate::util::*;
use scangate::pty::VirtualScanner;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const EXIT_CHECK_FAILED: i32 = 1;
const EXIT_CONFIG: i32 = 2;
const EXIT_STATE: i32 = 3;

/// What a refusal may print at most: a few readable lines.
const READABLE_BYTES: usize = 2048;

/// Run `cmd` to its end, which must come within `secs` seconds (else it
/// is killed and the test fails, saying so).
fn within(secs: u64, mut cmd: Command) -> Outcome {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting scangate");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(scaled(Duration::from_secs(secs))) {
        Ok(out) => out.expect("waiting for scangate").into(),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("{:?} did not finish within {secs} s (killed)", cmd);
        }
    }
}

/// `scangate <args> --config <config>`, within `secs`.
fn cli_within(secs: u64, config: &Path, args: &[&str]) -> Outcome {
    let mut cmd = command();
    cmd.args(args).arg("--config").arg(config);
    within(secs, cmd)
}

/// Write `text` to `path` at `mode`.
fn write_at(path: &Path, text: &str, mode: u32) {
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// A config in `dir` (mode 0640, as the package makes it) with state in
/// `dir/state`, no scanner, and `extra` appended.
fn config(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("scangate.toml");
    write_at(
        &path,
        &format!(
            "[gateway]\nfacility = \"f1\"\nid = \"gw1\"\nstate_dir = {:?}\n{extra}",
            dir.join("state").to_str().unwrap()
        ),
        0o640,
    );
    path
}

fn fifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

#[test]
fn a_config_that_is_a_device_or_a_fifo_is_refused_at_once_naming_the_limit() {
    let d = tempdir("scangate-hostile-");
    let pipe = d.path().join("scangate.toml");
    fifo(&pipe);
    for (config, kind) in [
        (Path::new("/dev/zero"), "a character device"),
        (pipe.as_path(), "a FIFO"),
    ] {
        for args in [&["check-config"][..], &["run"][..], &["status"][..]] {
            let out = cli_within(10, config, args);
            assert_eq!(out.code, Some(EXIT_CONFIG), "{config:?} {args:?}: {out}");
            for named in [
                &format!("{}: `(file)`", config.display()),
                &format!("it is {kind}"),
                "not a regular file",
                "Fix: name the config file itself: a regular file of at most 1 MiB",
            ] {
                assert!(out.stderr.contains(named), "{named:?} not named: {out}");
            }
            assert!(out.stderr.len() < READABLE_BYTES, "{out}");
        }
    }
}

#[test]
fn a_config_with_a_value_of_100_mb_is_refused_by_its_size_before_it_is_read() {
    let d = tempdir("scangate-hostile-");
    let cfg = d.path().join("scangate.toml");
    {
        use std::io::Write;
        let mut f = fs::File::create(&cfg).unwrap();
        f.write_all(b"[gateway]\nfacility = \"").unwrap();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..100 {
            f.write_all(&chunk).unwrap();
        }
        f.write_all(b"\"\n").unwrap();
    }
    let size = fs::metadata(&cfg).unwrap().len();
    let out = cli_within(10, &cfg, &["check-config"]);
    assert_eq!(out.code, Some(EXIT_CONFIG), "{out}");
    for named in [
        format!("{}: `(file)`", cfg.display()),
        format!("it is {size} bytes, more than the 1 MiB"),
        "a regular file of at most 1 MiB".to_string(),
    ] {
        assert!(out.stderr.contains(&named), "{named:?} not named: {out}");
    }
    assert!(out.stderr.len() < READABLE_BYTES, "{out}");
}

/// Under the file's limit, a value or a key of 900,000 characters: the
/// message names the key and shows the value cut, with its length.
#[test]
fn a_long_value_or_key_in_the_config_is_echoed_cut_naming_the_key() {
    let d = tempdir("scangate-hostile-");
    let long = "x".repeat(900_000);
    for (extra, key, shown) in [
        // Our own check quotes the value.
        (
            format!("[redis]\nsentinels = [\"{long}\"]\nservice_name = \"s\"\n"),
            "`redis.sentinels[0]`",
            "…\" (900000 characters) is not host:port",
        ),
        // serde quotes it (invalid type).
        (
            format!("[dedup]\nwindow_ms = \"{long}\"\n"),
            "`dedup.window_ms`",
            "… (900003 characters)",
        ),
        // An unknown key of that length names itself, twice.
        (
            format!("[dedup]\n{long} = 1\n"),
            "`dedup.xxxxxxxx",
            "… (900006 characters)`: unknown field",
        ),
    ] {
        let cfg = d.path().join("long.toml");
        write_at(
            &cfg,
            &format!("[gateway]\nfacility = \"f1\"\n{extra}"),
            0o640,
        );
        let out = cli_within(20, &cfg, &["check-config"]);
        assert_eq!(
            out.code,
            Some(EXIT_CONFIG),
            "{key}: {}",
            &out.stderr[..300.min(out.stderr.len())]
        );
        assert!(
            out.stderr.len() < READABLE_BYTES,
            "{key}: {} bytes: {}…",
            out.stderr.len(),
            &out.stderr[..300]
        );
        assert!(out.stderr.contains(key), "{key}: {out}");
        assert!(out.stderr.contains(shown), "{shown:?}: {out}");
        assert!(out.stderr.contains("Fix:"), "{out}");
    }
    // The gateway's facility: our message, the value quoted and cut.
    let cfg = d.path().join("long.toml");
    write_at(&cfg, &format!("[gateway]\nfacility = \"{long}\"\n"), 0o640);
    let out = cli_within(20, &cfg, &["check-config"]);
    assert_eq!(out.code, Some(EXIT_CONFIG), "{}", out.stderr.len());
    assert!(out.stderr.len() < READABLE_BYTES, "{}", out.stderr.len());
    assert!(
        out.stderr.contains(&format!(
            "`gateway.facility`: \"{}…\" (900000 characters) is not a valid identifier",
            "x".repeat(80)
        )),
        "{out}"
    );
}

#[test]
fn a_state_dir_too_long_for_the_kernel_is_refused_by_check_config_and_run() {
    let d = tempdir("scangate-hostile-");
    // 5,000 characters in names of 100.
    let long: PathBuf = std::iter::once(d.path().to_owned())
        .chain((0..50).map(|i| PathBuf::from(format!("{i:0>100}"))))
        .collect();
    let one_name = d.path().join("n".repeat(300)).join("state");
    for (dir, problem) in [
        (&long, "bytes long: Linux takes at most 4095 (PATH_MAX)"),
        (
            &one_name,
            "is 300 bytes long: Linux takes at most 255 for one name",
        ),
    ] {
        let cfg = config_with_state_dir(d.path(), dir);
        for args in [&["check-config"][..], &["run"][..]] {
            let out = cli_within(10, &cfg, args);
            assert_eq!(out.code, Some(EXIT_CONFIG), "{args:?}: {out}");
            assert!(
                out.stderr.contains("`gateway.state_dir`")
                    && out.stderr.contains(problem)
                    && out
                        .stderr
                        .contains("Fix: name a directory whose path is at most 4000 bytes"),
                "{args:?}: {out}"
            );
            assert!(out.stderr.len() < READABLE_BYTES, "{out}");
        }
    }
    // $STATE_DIRECTORY is not the config's to check: check-config and run
    // find it too long before the database is opened.
    let cfg = d.path().join("scangate.toml");
    write_at(&cfg, "[gateway]\nfacility = \"f1\"\nid = \"gw1\"\n", 0o640);
    for args in [&["check-config"][..], &["run"][..]] {
        let mut cmd = command();
        cmd.args(args)
            .arg("--config")
            .arg(&cfg)
            .env("STATE_DIRECTORY", &long);
        let out = within(10, cmd);
        assert_eq!(out.code, Some(EXIT_STATE), "{args:?}: {out}");
        assert!(
            out.stderr.contains("the path is") && out.stderr.contains("PATH_MAX"),
            "{args:?}: {out}"
        );
    }
}

#[test]
fn a_state_dir_through_a_link_loop_or_a_dangling_link_is_refused_by_check_config_and_run() {
    let d = tempdir("scangate-hostile-");
    let looped = d.path().join("loop");
    std::os::unix::fs::symlink("loop", &looped).unwrap();
    let dangling = d.path().join("dangling");
    std::os::unix::fs::symlink(d.path().join("nowhere"), &dangling).unwrap();
    for (dir, named) in [
        (looped.join("state"), "leads back to itself, a link loop"),
        (looped.clone(), "leads back to itself, a link loop"),
        (dangling.clone(), "is a symbolic link to"),
    ] {
        let cfg = config_with_state_dir(d.path(), &dir);
        for args in [&["check-config"][..], &["run"][..]] {
            let out = cli_within(10, &cfg, args);
            assert_eq!(out.code, Some(EXIT_STATE), "{dir:?} {args:?}: {out}");
            assert!(
                out.stderr
                    .contains(&format!("state directory {}", dir.display()))
                    && out.stderr.contains(named)
                    && out.stderr.contains("Fix:"),
                "{dir:?} {args:?}: {out}"
            );
            assert!(!out.stderr.contains("File exists"), "{out}");
        }
    }
    assert!(!d.path().join("nowhere").exists());
}

#[test]
fn online_a_serial_scanner_path_that_is_not_a_terminal_is_not_usable() {
    let d = tempdir("scangate-hostile-");
    let pty = VirtualScanner::new().unwrap();
    let cfg = config(
        d.path(),
        &format!(
            "[[scanner]]\nname = \"zero\"\nkind = \"serial\"\npath = \"/dev/zero\"\nscan_type = \"dispense\"\n\
             [[scanner]]\nname = \"pty\"\nkind = \"serial\"\npath = {:?}\nscan_type = \"dispense\"\n",
            pty.path().to_str().unwrap()
        ),
    );
    let out = cli_within(20, &cfg, &["check-config", "--online"]);
    assert_eq!(out.code, Some(EXIT_CHECK_FAILED), "{out}");
    assert!(
        out.stdout
            .contains("scanner zero: /dev/zero NOT usable: not a terminal, so not a serial port")
            && out.stdout.contains("Fix: name the scanner's serial device"),
        "{out}"
    );
    // The control: a terminal (a PTY) is usable.
    assert!(
        out.stdout
            .contains(&format!("scanner pty: {} OK", pty.path().display())),
        "{out}"
    );
    // Offline, the path is not looked at.
    let out = cli_within(20, &cfg, &["check-config"]);
    assert_eq!(out.code, Some(0), "{out}");
}

#[test]
fn sink_urls_that_can_never_work_are_refused_by_check_config() {
    let d = tempdir("scangate-hostile-");
    for (url, problem) in [
        (
            "http://127.0.0.1:99999/",
            "its port 99999 is outside 1-65535",
        ),
        ("http://h st/", "it holds a space at character 9"),
        ("http://:80/", "it names no host"),
    ] {
        let cfg = config(
            d.path(),
            &format!("[[sink]]\nname = \"inv\"\nurl = {url:?}\n"),
        );
        for args in [&["check-config"][..], &["run"][..]] {
            let out = cli_within(10, &cfg, args);
            assert_eq!(out.code, Some(EXIT_CONFIG), "{url} {args:?}: {out}");
            assert!(
                out.stderr.contains("`sink[0].url`")
                    && out
                        .stderr
                        .contains(&format!("{url:?} is not a URL a POST can ever reach"))
                    && out.stderr.contains(problem)
                    && out.stderr.contains("Fix:"),
                "{url}: {out}"
            );
        }
    }
    // The control: a URL a receiver can have.
    let cfg = config(
        d.path(),
        "[[sink]]\nname = \"inv\"\nurl = \"http://127.0.0.1:9/ledger?k=v\"\n",
    );
    let out = cli_within(10, &cfg, &["check-config"]);
    assert_eq!(out.code, Some(0), "{out}");
}

#[test]
fn a_secret_or_ca_file_that_is_a_device_or_a_fifo_is_refused_naming_the_key_and_limit() {
    let d = tempdir("scangate-hostile-");
    let pipe = d.path().join("pipe");
    fifo(&pipe);
    let pipe = pipe.to_str().unwrap();
    for (extra, key, limit) in [
        (
            "[redis]\nurl = \"redis://127.0.0.1:1/\"\npassword_file = \"/dev/zero\"\n".to_string(),
            "`redis.password_file`",
            "64 KiB",
        ),
        (
            format!("[redis]\nurl = \"redis://127.0.0.1:1/\"\npassword_file = {pipe:?}\n"),
            "`redis.password_file`",
            "64 KiB",
        ),
        (
            "[redis]\nurl = \"rediss://127.0.0.1:1/\"\nca_file = \"/dev/zero\"\n".to_string(),
            "`redis.ca_file`",
            "1 MiB",
        ),
        (
            "[[sink]]\nname = \"inv\"\nurl = \"http://127.0.0.1:9/\"\nbearer_token_file = \"/dev/zero\"\n"
                .to_string(),
            "`sink[0].bearer_token_file`",
            "64 KiB",
        ),
        (
            format!("[[sink]]\nname = \"inv\"\nurl = \"http://127.0.0.1:9/\"\nbasic_auth_file = {pipe:?}\n"),
            "`sink[0].basic_auth_file`",
            "64 KiB",
        ),
        (
            "[[sink]]\nname = \"inv\"\nurl = \"https://127.0.0.1:9/\"\nca_file = \"/dev/zero\"\n"
                .to_string(),
            "`sink[0].ca_file`",
            "1 MiB",
        ),
    ] {
        let cfg = config(d.path(), &extra);
        let out = cli_within(10, &cfg, &["check-config"]);
        assert_eq!(out.code, Some(EXIT_CONFIG), "{key}: {out}");
        assert!(
            out.stderr.contains(key)
                && out.stderr.contains("not a regular file")
                && out.stderr.contains(&format!("a regular file of at most {limit}")),
            "{key}: {out}"
        );
        assert!(out.stderr.len() < READABLE_BYTES, "{out}");
    }
    // A token file over its limit: refused by its size.
    let big = d.path().join("token");
    write_at(&big, &"t".repeat(64 * 1024 + 1), 0o600);
    let cfg = config(
        d.path(),
        &format!(
            "[[sink]]\nname = \"inv\"\nurl = \"http://127.0.0.1:9/\"\nbearer_token_file = {:?}\n",
            big.to_str().unwrap()
        ),
    );
    let out = cli_within(10, &cfg, &["check-config"]);
    assert_eq!(out.code, Some(EXIT_CONFIG), "{out}");
    assert!(
        out.stderr
            .contains("it is 65537 bytes, more than the 64 KiB"),
        "{out}"
    );
}

/// The state of a gateway that has run (its database there), for `status`:
/// the daemon started on `cfg` until its page check, then stopped.
fn has_run(cfg: &Path, dir: &Path) {
    let mut daemon = Daemon::start(cfg, &dir.join("daemon.log"));
    wait_until("the daemon's page check", || {
        daemon.log().contains("integrity check passed")
    });
    assert!(daemon.terminate().success(), "{}", daemon.log());
}

/// The `warning:` lines of `check-config`'s output.
fn warnings(out: &Outcome) -> Vec<&str> {
    out.stdout
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect()
}

/// `status --json`'s reasons.
fn reasons(cfg: &Path) -> Vec<String> {
    let out = cli_within(10, cfg, &["status", "--json"]);
    let st: serde_json::Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("status --json: {e}: {out}"));
    st["degraded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_password_file_others_may_read_is_a_check_config_warning_and_a_status_reason() {
    let d = tempdir("scangate-hostile-");
    let cfg = config(d.path(), "");
    has_run(&cfg, d.path());
    let pw = d.path().join("redis-password");
    write_at(&pw, "pw-Zq7\n", 0o644);
    let cfg = config(
        d.path(),
        &format!(
            "[redis]\nurl = \"redis://127.0.0.1:1/\"\npassword_file = {:?}\n",
            pw.to_str().unwrap()
        ),
    );
    let told = format!(
        "{} ([redis] password_file) is mode 0644: every user of this machine may read it",
        pw.display()
    );
    let fix = format!(
        "Fix: `chown root:scangate {p} && chmod 0640 {p}`",
        p = pw.display()
    );
    let out = cli_within(10, &cfg, &["check-config"]);
    assert_eq!(out.code, Some(0), "told, not refused: {out}");
    let w = warnings(&out);
    assert_eq!(w.len(), 1, "{out}");
    assert!(w[0].contains(&told) && w[0].contains(&fix), "{out}");
    assert!(!out.stdout.contains("pw-Zq7"), "{out}");
    let r = reasons(&cfg);
    assert!(
        r.iter()
            .any(|r| r.starts_with(&format!("config: {told}")) && r.contains(&fix)),
        "{r:?}"
    );

    // The controls: the service's group may read a secret; its owner alone
    // may too.
    for mode in [0o640, 0o600] {
        fs::set_permissions(&pw, fs::Permissions::from_mode(mode)).unwrap();
        let out = cli_within(10, &cfg, &["check-config"]);
        assert_eq!(out.code, Some(0), "{out}");
        assert_eq!(warnings(&out), Vec::<&str>::new(), "{mode:o}: {out}");
        let r = reasons(&cfg);
        assert!(!r.iter().any(|r| r.contains("is mode")), "{mode:o}: {r:?}");
    }

    // The config itself, readable by every user: told too.
    fs::set_permissions(&cfg, fs::Permissions::from_mode(0o644)).unwrap();
    let out = cli_within(10, &cfg, &["check-config"]);
    let w = warnings(&out);
    assert_eq!(w.len(), 1, "{out}");
    assert!(
        w[0].contains(&format!(
            "{} (the config file) is mode 0644: every user of this machine may read it",
            cfg.display()
        )),
        "{out}"
    );
}

#[test]
fn files_others_may_read_or_change_are_warned_of_when_the_daemon_starts() {
    let d = tempdir("scangate-hostile-");
    let token = d.path().join("token");
    write_at(&token, "t0ken\n", 0o644);
    let ca = d.path().join("ca.pem");
    write_at(&ca, "not read: http\n", 0o666);
    let cfg = config(
        d.path(),
        &format!(
            "[[sink]]\nname = \"inv\"\nurl = \"http://127.0.0.1:{}/\"\nbearer_token_file = {:?}\n",
            free_port(),
            token.to_str().unwrap()
        ),
    );
    fs::set_permissions(&cfg, fs::Permissions::from_mode(0o664)).unwrap();
    let mut daemon = Daemon::start(&cfg, &d.path().join("daemon.log"));
    wait_until("the daemon's page check", || {
        daemon.log().contains("integrity check passed")
    });
    let log = daemon.log();
    assert!(daemon.terminate().success(), "{log}");
    for told in [
        format!(
            "{} ([[sink]] inv bearer_token_file) is mode 0644: every user of this machine may read it",
            token.display()
        ),
        format!(
            "{} (the config file) is mode 0664: its group may change it, and every user of this machine may read it",
            cfg.display()
        ),
    ] {
        let line = log
            .lines()
            .find(|l| l.contains(&told))
            .unwrap_or_else(|| panic!("{told:?} not in the log:\n{log}"));
        assert!(
            line.contains("WARN") && line.contains("chmod 0640"),
            "{line}"
        );
    }
    assert!(!log.contains("t0ken"), "{log}");
    // Not named by the config: not judged.
    assert!(!log.contains("ca.pem"), "{log}");
}

/// A config in `dir` (0640) of one gateway whose state directory is
/// `state_dir`.
fn config_with_state_dir(dir: &Path, state_dir: &Path) -> PathBuf {
    let cfg = dir.join("scangate.toml");
    write_at(
        &cfg,
        &format!(
            "[gateway]\nfacility = \"f1\"\nid = \"gw1\"\nstate_dir = {:?}\n",
            state_dir.to_str().unwrap()
        ),
        0o640,
    );
    cfg
}
