//! `scangate run` as a daemon: its config file, the process guard, and
//! what it leaves in its state directory (outbox, ledger, database).

use super::cli::{Outcome, bin, cli_cfg, command};
use super::wait::{POLL, event_timeout, wait_progressing, wait_until};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A scanner entry for [`write_config`].
pub struct ScannerSpec {
    pub name: String,
    pub path: PathBuf,
    pub scan_type: &'static str,
    pub quantity: u32,
    pub ack: bool,
    /// `None`: the default (4096).
    pub max_frame_bytes: Option<usize>,
    /// Extra TOML lines, e.g. `stx_etx = true`.
    pub extra: String,
}

impl ScannerSpec {
    pub fn new(name: &str, path: &Path) -> ScannerSpec {
        ScannerSpec {
            name: name.into(),
            path: path.to_owned(),
            scan_type: "dispense",
            quantity: 1,
            ack: false,
            max_frame_bytes: None,
            extra: String::new(),
        }
    }

    /// A scanner whose `path` a [`Gateway`](super::Gateway) fills in
    /// with its PTY.
    pub fn named(name: &str) -> ScannerSpec {
        ScannerSpec::new(name, Path::new(""))
    }

    /// With ACK/NAK on.
    pub fn ack(mut self) -> ScannerSpec {
        self.ack = true;
        self
    }

    /// With extra TOML lines.
    pub fn with(mut self, extra: &str) -> ScannerSpec {
        self.extra = extra.into();
        self
    }
}

/// Write `<dir>/scangate.toml` for a gateway whose state lives in `state_dir`.
pub fn write_config(
    dir: &Path,
    state_dir: &Path,
    window_ms: u64,
    scanners: &[ScannerSpec],
) -> PathBuf {
    let path = dir.join("scangate.toml");
    write_site_config(
        &path,
        &config_text("test-gw", state_dir, window_ms, scanners),
    );
    path
}

/// Write a config file at `path` with the mode the package gives one
/// (0640: the service's group reads it, others do not), so that scangate
/// has no mode to warn of.
pub fn write_site_config(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    fs::write(path, text).expect("writing the test config");
    fs::set_permissions(path, fs::Permissions::from_mode(0o640)).expect("chmod the test config");
}

/// The text of a test config: gateway `id` of facility `test-pharmacy`,
/// its state in `state_dir`, the echo window, 72 h retention, and the
/// serial `scanners` (9600 baud).
pub fn config_text(id: &str, state_dir: &Path, window_ms: u64, scanners: &[ScannerSpec]) -> String {
    let mut text = format!(
        "[gateway]\nfacility = \"test-pharmacy\"\nid = {id:?}\nstate_dir = {:?}\n\n\
         [dedup]\nwindow_ms = {window_ms}\nretention_hours = 72\n",
        state_dir.to_str().expect("utf-8 temp path")
    );
    for s in scanners {
        text += &format!(
            "\n[[scanner]]\nname = {:?}\nkind = \"serial\"\npath = {:?}\nbaud = 9600\n\
             scan_type = {:?}\nquantity = {}\nack = {}\n{}{}\n",
            s.name,
            s.path.to_str().expect("utf-8 pty path"),
            s.scan_type,
            s.quantity,
            s.ack,
            s.max_frame_bytes
                .map(|n| format!("max_frame_bytes = {n}\n"))
                .unwrap_or_default(),
            s.extra
        );
    }
    text
}

/// A running `scangate run`. Killed (SIGKILL) and reaped on drop, so no test
/// leaves a daemon behind; its log is printed if the test is failing.
pub struct Daemon {
    child: Option<Child>,
    log: PathBuf,
}

impl Daemon {
    /// Start `scangate run --config <config>`; stderr goes to `log`.
    pub fn start(config: &Path, log: &Path) -> Daemon {
        Daemon::start_with_env(config, log, &[])
    }

    /// [`Daemon::start`] with these environment variables set too.
    pub fn start_with_env(config: &Path, log: &Path, env: &[(&str, &str)]) -> Daemon {
        let err = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("opening the daemon log");
        let mut cmd = command();
        run_args(&mut cmd, config);
        cmd.envs(env.iter().copied()).stderr(Stdio::from(err));
        Daemon::spawn(cmd, log)
    }

    /// Start `cmd`, a `scangate run` (see [`run_args`]) whose stderr the
    /// caller has sent to `log`.
    pub fn spawn(mut cmd: Command, log: &Path) -> Daemon {
        let child = cmd
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} run: {e}", bin()));
        Daemon {
            child: Some(child),
            log: log.to_owned(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("daemon is running").id()
    }

    /// The daemon's stderr so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Warnings, errors, start lines and the last lines of the log, for
    /// failure messages (the full log holds one line per audit record).
    pub fn log_digest(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        let notable: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR ") || l.contains("starting"))
            .collect();
        let tail = &lines[lines.len().saturating_sub(15)..];
        format!(
            "--- scangate run log {}: warnings, errors, starts ---\n{}\n--- last lines ---\n{}",
            self.log.display(),
            notable.join("\n"),
            tail.join("\n")
        )
    }

    /// Has it exited (without reaping twice)?
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().expect("try_wait"))
    }

    /// Wait until the daemon has every device in `paths` open (read from
    /// `/proc/<pid>/fd`), i.e. it is reading those scanners.
    pub fn wait_open(&mut self, paths: &[&Path]) {
        let pid = self.pid();
        let want: Vec<PathBuf> = paths.iter().map(|p| p.to_path_buf()).collect();
        let deadline = Instant::now() + event_timeout();
        loop {
            if let Some(st) = self.exited() {
                panic!(
                    "scangate run exited ({st}) before opening its scanners\n{}",
                    self.log_digest()
                );
            }
            let open = open_files(pid);
            if want.iter().all(|w| open.contains(w)) {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "timed out waiting for scangate (pid {pid}) to open {want:?}; it has {open:?}\n{}",
                    self.log_digest()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// Send SIGTERM and wait for the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        self.stop_with(nix::sys::signal::Signal::SIGTERM)
    }

    /// Send `signal` and wait for the exit status.
    pub fn stop_with(&mut self, signal: nix::sys::signal::Signal) -> ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        nix::sys::signal::kill(pid, signal).expect("sending a signal to scangate");
        self.wait_exit()
    }

    /// SIGKILL (kill -9) and reap.
    pub fn kill9(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("daemon is running");
        child.kill().expect("sending SIGKILL");
        child.wait().expect("reaping the daemon")
    }

    /// Wait (with the event deadline) until the process exits; reap it.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut status = None;
        wait_until("scangate run to exit", || {
            status = self.exited();
            status.is_some()
        });
        self.child = None;
        status.expect("exited")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!("{}", self.log_digest());
        }
    }
}

/// Make `cmd` (a [`command`]) `scangate run --config <config>`, logging
/// at INFO.
pub fn run_args(cmd: &mut Command, config: &Path) {
    cmd.args(["run", "--config"])
        .arg(config)
        .env("RUST_LOG", "info");
}

/// A pipe whose read end is copied into `log` (appended, as it comes) by a
/// thread of its own until every write end is closed: the write end, to
/// give a daemon as its stderr, and that end's `(device, inode)`, as
/// systemd puts them in `$JOURNAL_STREAM`.
pub fn stderr_pipe(log: &Path) -> (std::io::PipeWriter, (u64, u64)) {
    use std::os::unix::fs::MetadataExt;
    let (mut reader, writer) = std::io::pipe().expect("creating a pipe");
    let mut file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("opening the daemon log");
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut buf = [0u8; 8192];
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            if file.write_all(&buf[..n]).is_err() {
                return;
            }
        }
    });
    let fd = std::os::fd::AsFd::as_fd(&writer)
        .try_clone_to_owned()
        .expect("duplicating the pipe's write end");
    let meta = fs::File::from(fd).metadata().expect("fstat of the pipe");
    (writer, (meta.dev(), meta.ino()))
}

/// The files process `pid` holds open right now (from `/proc/<pid>/fd`).
pub fn open_files(pid: u32) -> Vec<PathBuf> {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| fs::read_link(e.path()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// `outbox status --json`, parsed.
pub fn outbox_status(config: &Path) -> serde_json::Value {
    let out: Outcome = cli_cfg(config, &["outbox", "status", "--json"]).into();
    assert_eq!(out.code, Some(0), "outbox status failed: {out}");
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("outbox status is not JSON ({e}): {out}"))
}

/// Field of [`outbox_status`] as a number.
pub fn count(status: &serde_json::Value, field: &str) -> i64 {
    status[field]
        .as_i64()
        .unwrap_or_else(|| panic!("outbox status has no numeric {field}: {status}"))
}

/// Wait until the outbox holds `transmissions` scans, all decided (for as
/// long as decisions keep coming: a long backlog on a loaded machine is
/// slow, not stuck).
pub fn wait_all_decided(config: &Path, transmissions: i64) -> serde_json::Value {
    wait_all_decided_by(None, config, transmissions)
}

/// [`wait_all_decided`], read by the scangate binary `bin` (`None`: this
/// build's): a gateway another release runs, whose database this build
/// would refuse to read (an older schema).
pub fn wait_all_decided_by(
    bin: Option<&Path>,
    config: &Path,
    transmissions: i64,
) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    wait_progressing(
        &format!("{transmissions} transmissions in the outbox, all decided"),
        || {
            let args = ["outbox", "status", "--json"];
            let out: Outcome = match bin {
                None => cli_cfg(config, &args).into(),
                Some(bin) => std::process::Command::new(bin)
                    .args(args)
                    .arg("--config")
                    .arg(config)
                    .output()
                    .expect("running the other release")
                    .into(),
            };
            if out.code != Some(0) {
                return (false, -1); // the database may not exist yet
            }
            let Ok(st) = serde_json::from_str::<serde_json::Value>(out.stdout.trim()) else {
                return (false, -1);
            };
            let decided = count(&st, "committed")
                + count(&st, "suppressed")
                + count(&st, "rejected")
                + count(&st, "control");
            let open = count(&st, "pending") + count(&st, "unresolved");
            last = st;
            (decided == transmissions && open == 0, decided)
        },
    );
    last
}

/// `audit verify` of `config`'s database: it must pass (exit 0).
pub fn audit_verify(config: &Path) -> Outcome {
    let out: Outcome = cli_cfg(config, &["audit", "verify"]).into();
    assert_eq!(out.code, Some(0), "audit verify failed: {out}");
    out
}

/// `ledger export`, parsed (one JSON object per line).
pub fn ledger(config: &Path) -> Vec<serde_json::Value> {
    let out: Outcome = cli_cfg(config, &["ledger", "export"]).into();
    assert_eq!(out.code, Some(0), "ledger export failed: {out}");
    out.stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("ledger line is not JSON ({e}): {l:?}"))
        })
        .collect()
}

/// The `echo_of` of each echo `ledger export --echoes` prints, in the
/// order they were read.
pub fn echoes_named(config: &Path) -> Vec<String> {
    let out: Outcome = cli_cfg(config, &["ledger", "export", "--echoes"]).into();
    assert_eq!(out.code, Some(0), "ledger export --echoes failed: {out}");
    out.stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let echo: serde_json::Value = serde_json::from_str(l).unwrap();
            echo["echo_of"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Every audit record on `c` as its JSON, in chain order (records are
/// stored packed: `scangate::audit::stored`).
pub fn audit_records(c: &rusqlite::Connection) -> Vec<String> {
    let mut q = c.prepare("SELECT record FROM audit ORDER BY seq").unwrap();
    q.query_map([], |r| r.get::<_, scangate::audit::stored::RecordJson>(0))
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect()
}

/// SQL: the text of a UUID column of `ledger` or `audit` (stored as its
/// 16 bytes), to compare with the outbox's text.
pub const UUID_TEXT: &str = "lower(substr(hex(scan_uuid), 1, 8) || '-' || substr(hex(scan_uuid), 9, 4) || '-' || substr(hex(scan_uuid), 13, 4) || '-' || substr(hex(scan_uuid), 17, 4) || '-' || substr(hex(scan_uuid), 21))";

/// A read-only connection to a state dir's database (for cross-checks the
/// CLI does not expose, e.g. per-scan twins).
pub fn open_db(state_dir: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open_with_flags(
        state_dir.join("scangate.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("opening the database read-only");
    c.busy_timeout(Duration::from_secs(5))
        .expect("busy timeout");
    c
}

/// Unique temporary directory for one test.
pub fn tempdir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("creating a temporary directory")
}

/// The fields of a ledger entry (`scangate::ledger::LedgerEntry`), in both export forms.
pub const LEDGER_FIELDS: [&str; 14] = [
    "scan_uuid",
    "gateway",
    "scanner",
    "captured_at",
    "clock_synced",
    "scan_type",
    "quantity",
    "gtin",
    "ndc10",
    "lot",
    "serial",
    "expiry",
    "symbology",
    "content_key",
];
