//! The fixture most daemon tests start from: a gateway with N PTY serial
//! scanners. Its directory holds the config (`scangate.toml`), the log
//! (`daemon.log`) and by default the state (`state/`); the config names
//! each PTY's slave side (or a link to it), and is checked with
//! `check-config` before anything starts. [`Gateway::start`] runs
//! `scangate run` on it, returns once the daemon has every PTY open and
//! keeps the daemon (to stop and start it again, or for tests of several
//! gateways); [`Gateway::launch`] does the same and hands the daemon to
//! the test:
//!
//! ```ignore
//! let mut gw = Gateway::builder("scangate-ack-")
//!     .window_ms(60_000)
//!     .pty(ScannerSpec::named("acker").ack())
//!     .pty(ScannerSpec::named("no-ack"))
//!     .build();
//! let mut daemon = gw.launch();
//! let [mut acker, mut quiet] = gw.take_scanners();
//! ```
//!
//! A test that starts its daemon its own way (that is what it tests: the
//! log's destination, readiness) builds the gateway and waits on
//! [`Gateway::pty_paths`] itself, or uses [`Gateway::spawn_with_env`].

use super::daemon::{Daemon, ScannerSpec, config_text, count, outbox_status, tempdir};
use super::pty::{check_config, replies};
use super::redis_server::{RedisServer, redis_section};
use scangate::pty::VirtualScanner;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

/// How a [`Gateway`] is made: see [`Gateway::builder`].
pub struct GatewayBuilder {
    temp: Option<tempfile::TempDir>,
    dir: PathBuf,
    state: PathBuf,
    id: String,
    window_ms: u64,
    scanners: Vec<(ScannerSpec, Option<PathBuf>)>,
    tail: String,
}

/// A gateway under test: its config, its PTY scanners and, once started,
/// its `scangate run` (killed on drop).
pub struct Gateway {
    // Fields drop in this order: the daemon before the PTYs it reads, the
    // temporary directory last.
    daemon: Option<Daemon>,
    /// The scanner side of each PTY, in the order they were added (empty
    /// once [taken](Gateway::take_scanners)).
    pub scanners: Vec<VirtualScanner>,
    /// The directory of the config and the log.
    pub dir: PathBuf,
    /// The config file.
    pub cfg: PathBuf,
    /// The state directory.
    pub state: PathBuf,
    /// The daemon's log (its stderr), kept across restarts.
    pub log: PathBuf,
    ptys: Vec<PathBuf>,
    _temp: Option<tempfile::TempDir>,
}

impl Gateway {
    /// A gateway in a temporary directory of its own (named `prefix…`),
    /// removed on drop.
    pub fn builder(prefix: &str) -> GatewayBuilder {
        let temp = tempdir(prefix);
        let dir = temp.path().to_owned();
        GatewayBuilder::new(Some(temp), dir)
    }

    /// A gateway in `dir` (created if missing), which the test owns.
    pub fn builder_in(dir: &Path) -> GatewayBuilder {
        std::fs::create_dir_all(dir).expect("creating the gateway's directory");
        GatewayBuilder::new(None, dir.to_owned())
    }

    /// Start `scangate run` and wait until it has every PTY open; the
    /// gateway keeps the daemon (see [`Gateway::daemon`], [`Gateway::stop`]).
    pub fn start(&mut self) -> &mut Daemon {
        self.start_with_env(&[])
    }

    /// [`Gateway::start`] with these environment variables set too.
    pub fn start_with_env(&mut self, env: &[(&str, &str)]) -> &mut Daemon {
        assert!(self.daemon.is_none(), "the gateway is already running");
        let daemon = self.launch_with_env(env);
        self.daemon.insert(daemon)
    }

    /// [`Gateway::start`], the daemon handed to the caller: a test that
    /// uses the daemon and the gateway's scanners and paths side by side.
    pub fn launch(&self) -> Daemon {
        self.launch_with_env(&[])
    }

    /// [`Gateway::launch`] with these environment variables set too.
    pub fn launch_with_env(&self, env: &[(&str, &str)]) -> Daemon {
        let mut daemon = self.spawn_with_env(env);
        daemon.wait_open(&self.pty_paths());
        daemon
    }

    /// Start `scangate run` with these environment variables, waiting for
    /// nothing: for a test whose subject is what it waits on (`READY=1` on
    /// a notify socket).
    pub fn spawn_with_env(&self, env: &[(&str, &str)]) -> Daemon {
        Daemon::start_with_env(&self.cfg, &self.log, env)
    }

    /// The device paths of the PTYs (their slave sides), in order.
    pub fn pty_paths(&self) -> Vec<&Path> {
        self.ptys.iter().map(PathBuf::as_path).collect()
    }

    /// The daemon [`Gateway::start`] started.
    pub fn daemon(&self) -> &Daemon {
        self.daemon
            .as_ref()
            .expect("the gateway's daemon was started")
    }

    /// SIGTERM; it must exit 0.
    pub fn stop(&mut self) {
        let mut d = self.daemon.take().expect("running");
        let st = d.terminate();
        assert!(st.success(), "scangate run exited {st}\n{}", d.log_digest());
    }

    /// SIGKILL (kill -9), reaped.
    pub fn kill9(&mut self) -> ExitStatus {
        self.daemon.take().expect("running").kill9()
    }

    /// The scanners, out of the gateway (to move them into threads, or to
    /// hold one while the daemon is used): they stay open until dropped,
    /// and [`Gateway::start`] still waits for their devices.
    pub fn take_scanners<const N: usize>(&mut self) -> [VirtualScanner; N] {
        let all = std::mem::take(&mut self.scanners);
        let n = all.len();
        all.try_into()
            .unwrap_or_else(|_| panic!("the gateway has {n} scanners, not {N}"))
    }

    /// The first scanner transmits `label`, ended with CR.
    pub fn send(&mut self, label: &str) {
        self.scanners[0]
            .send(format!("{label}\r").as_bytes())
            .unwrap();
    }

    /// Read from the first scanner until `n` reply bytes (ACK/NAK) came.
    pub fn replies(&mut self, n: usize) -> Vec<u8> {
        replies(&mut self.scanners[0], n).0
    }

    /// Field `field` of the gateway's `outbox status`.
    pub fn count(&self, field: &str) -> i64 {
        count(&outbox_status(&self.cfg), field)
    }

    /// Rewrite the gateway's config file with `edit`.
    pub fn edit_config(&self, edit: impl FnOnce(String) -> String) {
        let text = std::fs::read_to_string(&self.cfg).unwrap();
        std::fs::write(&self.cfg, edit(text)).unwrap();
    }

    /// Rewrite the config's `[dedup] window_ms` to `ms`.
    pub fn set_window_ms(&self, ms: u64) {
        self.edit_config(|text| {
            text.lines()
                .map(|l| {
                    if l.starts_with("window_ms = ") {
                        format!("window_ms = {ms}\n")
                    } else {
                        format!("{l}\n")
                    }
                })
                .collect()
        });
    }
}

impl GatewayBuilder {
    fn new(temp: Option<tempfile::TempDir>, dir: PathBuf) -> GatewayBuilder {
        GatewayBuilder {
            temp,
            state: dir.join("state"),
            dir,
            id: "test-gw".into(),
            window_ms: 3000,
            scanners: Vec::new(),
            tail: String::new(),
        }
    }

    /// `[gateway] id` (default `test-gw`).
    pub fn id(mut self, id: &str) -> Self {
        self.id = id.into();
        self
    }

    /// `[dedup] window_ms` (default 3000).
    pub fn window_ms(mut self, ms: u64) -> Self {
        self.window_ms = ms;
        self
    }

    /// `[gateway] state_dir` (default `<dir>/state`).
    pub fn state_dir(mut self, state: &Path) -> Self {
        self.state = state.to_owned();
        self
    }

    /// A scanner on a PTY of its own: `spec` with the PTY's slave side as
    /// its `path`.
    pub fn pty(mut self, spec: ScannerSpec) -> Self {
        self.scanners.push((spec, None));
        self
    }

    /// [`GatewayBuilder::pty`] for each of `specs`.
    pub fn ptys(mut self, specs: impl IntoIterator<Item = ScannerSpec>) -> Self {
        self.scanners.extend(specs.into_iter().map(|s| (s, None)));
        self
    }

    /// A scanner on a PTY of its own whose `path` is `link` (relative: in
    /// the gateway's directory; its directory made if missing), a symlink
    /// to the PTY's slave side (as udev's `/dev/scangate/<name>`).
    pub fn pty_behind(mut self, link: impl AsRef<Path>, spec: ScannerSpec) -> Self {
        let link = self.dir.join(link);
        self.scanners.push((spec, Some(link)));
        self
    }

    /// A `[redis]` section for `redis` (300 ms connect, 500 ms per command).
    pub fn redis(self, redis: &RedisServer) -> Self {
        self.config(&redis_section(redis))
    }

    /// More TOML at the end of the file (after `[redis]`, if that came
    /// first: its keys then belong to it).
    pub fn config(mut self, toml: &str) -> Self {
        self.tail += "\n";
        self.tail += toml;
        if !toml.ends_with('\n') {
            self.tail += "\n";
        }
        self
    }

    /// Make the PTYs and write the config (checked by `check-config`);
    /// nothing started.
    pub fn build(self) -> Gateway {
        let mut scanners = Vec::new();
        let mut ptys = Vec::new();
        let mut specs = Vec::new();
        for (mut spec, link) in self.scanners {
            let vs = VirtualScanner::new().expect("a PTY");
            spec.path = match link {
                Some(link) => {
                    let parent = link.parent().expect("a link in a directory");
                    std::fs::create_dir_all(parent).expect("the link's directory");
                    std::os::unix::fs::symlink(vs.path(), &link).expect("the scanner's link");
                    link
                }
                None => vs.path().to_owned(),
            };
            ptys.push(vs.path().to_owned());
            scanners.push(vs);
            specs.push(spec);
        }
        let cfg = self.dir.join("scangate.toml");
        let text = config_text(&self.id, &self.state, self.window_ms, &specs) + &self.tail;
        super::daemon::write_site_config(&cfg, &text);
        check_config(&cfg);
        Gateway {
            daemon: None,
            scanners,
            log: self.dir.join("daemon.log"),
            cfg,
            state: self.state,
            dir: self.dir,
            ptys,
            _temp: self.temp,
        }
    }
}
