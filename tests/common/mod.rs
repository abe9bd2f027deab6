//! Shared helpers for the integration tests: the real `scangate` binary, real
//! SQLite files in unique temporary directories, real PTYs as scanners.
//!
//! Nothing here sleeps to "let things settle": waits poll an observable
//! condition (a file, `/proc/<pid>/fd`, the outbox) against a deadline and
//! fail with a message that says what was awaited.

#![allow(dead_code)] // each test crate uses a different subset

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// How long any awaited event may take before the test fails.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(20);
/// How often awaited conditions are polled.
pub const POLL: Duration = Duration::from_millis(20);

/// GS1 group separator.
pub const GS: &str = "\x1d";
/// The GTIN of NDC 0777-3105-02 (valid check digit).
pub const GTIN: &str = "00307773105025";
/// A UPC-A carrying NDC 1234567890.
pub const UPC_NDC: &str = "312345678906";
/// ACK byte.
pub const ACK: u8 = 0x06;
/// NAK byte.
pub const NAK: u8 = 0x15;

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_scangate")
}

/// A DSCSA GS1 DataMatrix label (AIM `]d2`), unique per physical pick by `serial`.
pub fn dscsa(serial: &str) -> String {
    dscsa_lot(serial, "LOT7A")
}

/// A DSCSA label with an explicit lot.
pub fn dscsa_lot(serial: &str, lot: &str) -> String {
    // (01) GTIN, (17) expiry 2028-12-31, (21) serial, GS, (10) lot.
    format!("]d201{GTIN}1728123121{serial}{GS}10{lot}")
}

/// Poll `cond` every [`POLL`] until it holds; panic naming `what` after
/// [`EVENT_TIMEOUT`].
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    wait_until_for(what, EVENT_TIMEOUT, &mut cond)
}

/// [`wait_until`] with an explicit deadline.
pub fn wait_until_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        std::thread::sleep(POLL);
    }
}

/// A `scangate` command with an environment that cannot leak the host's
/// configuration into the test.
pub fn command() -> Command {
    let mut c = Command::new(bin());
    c.env_remove("SCANGATE_CONFIG")
        .env_remove("STATE_DIRECTORY")
        .env_remove("JOURNAL_STREAM")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    c
}

/// Run a short-lived CLI command to completion.
pub fn cli(args: &[&str]) -> Output {
    command()
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} {args:?}: {e}", bin()))
}

/// Run `scangate <args> --config <config>` to completion.
pub fn cli_cfg(config: &Path, args: &[&str]) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    all.push("--config");
    all.push(config.to_str().expect("utf-8 temp path"));
    cli(&all)
}

/// Exit code, stdout and stderr as text (for messages and asserts).
pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Outcome {
    fn from(o: Output) -> Self {
        Outcome {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

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
    let mut text = format!(
        "[gateway]\nfacility = \"test-pharmacy\"\nid = \"test-gw\"\nstate_dir = {:?}\n\n\
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
    let path = dir.join("scangate.toml");
    fs::write(&path, text).expect("writing the test config");
    path
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
        let err = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("opening the daemon log");
        let child = command()
            .args(["run", "--config"])
            .arg(config)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(err))
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
    fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().expect("try_wait"))
    }

    /// Wait until the daemon has every device in `paths` open (read from
    /// `/proc/<pid>/fd`), i.e. it is reading those scanners.
    pub fn wait_open(&mut self, paths: &[&Path]) {
        let pid = self.pid();
        let want: Vec<PathBuf> = paths.iter().map(|p| p.to_path_buf()).collect();
        let deadline = Instant::now() + EVENT_TIMEOUT;
        loop {
            if let Some(st) = self.exited() {
                panic!(
                    "scangate run exited ({st}) before opening its scanners\n{}",
                    self.log_digest()
                );
            }
            let open: Vec<PathBuf> = fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .filter_map(|e| fs::read_link(e.path()).ok())
                        .collect()
                })
                .unwrap_or_default();
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

/// Wait until the outbox holds `transmissions` scans, all decided.
pub fn wait_all_decided(config: &Path, transmissions: i64) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    wait_until(
        &format!("{transmissions} transmissions in the outbox, all decided"),
        || {
            let out: Outcome = cli_cfg(config, &["outbox", "status", "--json"]).into();
            if out.code != Some(0) {
                return false; // the database may not exist yet
            }
            let Ok(st) = serde_json::from_str::<serde_json::Value>(out.stdout.trim()) else {
                return false;
            };
            let decided =
                count(&st, "committed") + count(&st, "suppressed") + count(&st, "rejected");
            let open = count(&st, "pending") + count(&st, "unresolved");
            last = st;
            decided == transmissions && open == 0
        },
    );
    last
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

/// A port nothing listens on right now (the OS picks it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("local addr")
        .port()
}

/// The fields of a ledger entry (DESIGN.md), in both export forms.
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

/// A `redis-server` of the test's own on a free port, killed on drop.
/// `restart` starts it again on the same port and directory (so an AOF
/// file, if enabled, is replayed).
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
    extra: Vec<String>,
    tls: bool,
}

impl RedisServer {
    /// Start with extra `redis-server` arguments, e.g. `["--appendonly", "yes"]`.
    pub fn start(dir: &Path, extra: &[&str]) -> RedisServer {
        let port = free_port();
        RedisServer::launch(
            dir,
            port,
            extra.iter().map(|s| s.to_string()).collect(),
            false,
        )
    }

    /// A TLS-only server (`rediss://`) with the given PEM files.
    pub fn start_tls(dir: &Path, ca: &Path, cert: &Path, key: &Path) -> RedisServer {
        let port = free_port();
        let p = |p: &Path| p.to_str().expect("utf-8 path").to_string();
        let port_s = port.to_string();
        let extra = [
            "--port",
            "0",
            "--tls-port",
            &port_s,
            "--tls-cert-file",
            &p(cert),
            "--tls-key-file",
            &p(key),
            "--tls-ca-cert-file",
            &p(ca),
            "--tls-auth-clients",
            "no",
        ]
        .map(String::from)
        .to_vec();
        RedisServer::launch(dir, port, extra, true)
    }

    fn launch(dir: &Path, port: u16, extra: Vec<String>, tls: bool) -> RedisServer {
        fs::create_dir_all(dir).expect("redis dir");
        let mut server = RedisServer {
            child: None,
            port,
            dir: dir.to_owned(),
            extra,
            tls,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", ""])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)");
        self.child = Some(child);
        wait_until(
            &format!("redis-server on port {} to answer", self.port),
            || {
                if self.tls {
                    std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                } else {
                    self.answers()
                }
            },
        );
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Whether the server answers on its port (any reply to PING, so a
    /// password-protected one counts too).
    pub fn answers(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
        let mut buf = [0u8; 64];
        c.write_all(b"PING\r\n").is_ok() && matches!(c.read(&mut buf), Ok(n) if n > 0)
    }

    /// A fresh connection, if the server answers PING.
    pub fn connection(&self) -> Option<redis::Connection> {
        let mut c = redis::Client::open(self.url())
            .ok()?
            .get_connection_with_timeout(Duration::from_millis(200))
            .ok()?;
        redis::cmd("PING").query::<String>(&mut c).ok()?;
        Some(c)
    }

    /// Send a signal (SIGSTOP / SIGCONT to pause and resume it).
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        let pid = self.child.as_ref().expect("redis is running").id();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).expect("kill");
    }

    /// SIGKILL the server.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `rediss://127.0.0.1:<port>/`.
    pub fn tls_url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.port)
    }

    /// Start it again on the same port and directory.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// The ledger stream's entries' `scan_uuid` and `content_key` fields.
    pub fn ledger(&self, facility: &str) -> Vec<(String, String)> {
        let mut c = self.connection().expect("redis answers");
        let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
            .arg(format!("scangate:{{{facility}}}:ledger"))
            .arg("-")
            .arg("+")
            .query(&mut c)
            .expect("XRANGE");
        entries
            .into_iter()
            .map(|(_, fields)| {
                let get = |name: &str| {
                    fields
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default()
                };
                (get("scan_uuid"), get("content_key"))
            })
            .collect()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A CA and a server certificate for 127.0.0.1, made with the `openssl` CLI
/// in `dir`: returns (ca.crt, server.crt, server.key).
pub fn make_test_ca(dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    fs::create_dir_all(dir).expect("cert dir");
    let f = |n: &str| {
        dir.join(format!("{name}-{n}"))
            .to_str()
            .expect("utf-8")
            .to_string()
    };
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl must be installed (apt-get install openssl)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let (ca_key, ca, key, csr, crt, ext) = (
        f("ca.key"),
        f("ca.crt"),
        f("server.key"),
        f("server.csr"),
        f("server.crt"),
        f("ext"),
    );
    fs::write(&ext, "subjectAltName=IP:127.0.0.1\n").expect("ext file");
    let subject = format!("/CN={name}-test-ca");
    run(&[
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", &ca_key, "-out", &ca, "-days",
        "2", "-subj", &subject,
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        &key,
        "-out",
        &csr,
        "-subj",
        "/CN=127.0.0.1",
    ]);
    run(&[
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca,
        "-CAkey",
        &ca_key,
        "-CAcreateserial",
        "-out",
        &crt,
        "-days",
        "2",
        "-extfile",
        &ext,
    ]);
    (PathBuf::from(ca), PathBuf::from(crt), PathBuf::from(key))
}

/// A gate of gateway "gw" in `facility` (window 3 s, retention 72 h) over a
/// new SQLite store in `state_dir`, and its facility Redis connection at
/// `url` — for tests that drive facility rounds themselves.
pub fn facility_gate(
    state_dir: &Path,
    facility: &str,
    url: &str,
) -> (
    scangate::store::Store,
    scangate::gate::Gate,
    scangate::facility::Facility,
) {
    let store = scangate::store::Store::open(state_dir).expect("open the store");
    let retention = Duration::from_secs(72 * 3600);
    let cfg = scangate::gate::GateConfig {
        facility: facility.into(),
        gateway: "gw".into(),
        window_ms: 3000,
        retention,
    };
    let gate = scangate::gate::Gate::new(cfg, &store).expect("a gate");
    let connect = Duration::from_secs(2);
    let f = scangate::facility::Facility::connect(url, facility, 3000, retention, connect, connect)
        .expect("connect to the test's redis-server");
    (store, gate, f)
}

/// A read of `text` by scanner `counter-1` (dispense, quantity 1), captured
/// `at_ms` from now on a synchronised clock of boot `boot-a`.
pub fn read_at(text: &str, at_ms: i64) -> scangate::capture::Scan {
    use scangate::capture::{CaptureTime, Profile, RawScan, Scan};
    let time = CaptureTime {
        utc_ms: chrono::Utc::now().timestamp_millis() + at_ms,
        boot_ns: 1_000_000_000_000 + at_ms * 1_000_000,
        boot_id: "boot-a".into(),
        synced: true,
    };
    let profile = Profile {
        scanner: "counter-1".into(),
        scan_type: scangate::config::ScanType::Dispense,
        quantity: 1,
    };
    let raw = RawScan {
        bytes: text.as_bytes().to_vec(),
        framing_error: None,
    };
    Scan::at(&profile, raw, time)
}

/// The gate of the gateway [`write_config`] describes (facility
/// `test-pharmacy`, gateway `test-gw`, window 3 s, retention 72 h), for
/// preparing a state directory before the daemon starts on it.
pub fn test_gate(store: &scangate::store::Store) -> scangate::gate::Gate {
    let cfg = scangate::gate::GateConfig {
        facility: "test-pharmacy".into(),
        gateway: "test-gw".into(),
        window_ms: 3000,
        retention: Duration::from_secs(72 * 3600),
    };
    scangate::gate::Gate::new(cfg, store).expect("a gate on the test store")
}
