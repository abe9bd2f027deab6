//! A `redis-server` of the test's own, and TLS certificates for it.

use super::daemon::tempdir;
use super::scans::gate_config;
use super::wait::wait_until;
use scangate::claimer::FacilityGate;
use scangate::facility::Facility;
use scangate::gate::Gate;
use scangate::store::Store;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tempfile::TempDir;

/// A port nothing listens on right now (the OS picks it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("local addr")
        .port()
}

/// A `redis-server` of the test's own on a free port, killed on drop.
/// `restart` starts it again on the same port and directory (so an AOF
/// file, if enabled, is replayed).
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
    extra: Vec<String>,
    tls: bool,
    /// The server binary (`redis-server`, or e.g. `valkey-server`).
    binary: String,
    /// The directory, when the server owns it ([`RedisServer::start_temp`]).
    _temp: Option<TempDir>,
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

    /// [`RedisServer::start`] with another server binary (`valkey-server`).
    pub fn start_binary(binary: &str, dir: &Path, extra: &[&str]) -> RedisServer {
        let mut server = RedisServer::start_unspawned(dir, extra);
        server.binary = binary.to_string();
        server.spawn();
        server
    }

    /// Whether `valkey-server` is installed (Valkey 8 from
    /// bookworm-backports, which `.ci/run` installs: the `WAITAOF` tests
    /// need Redis 7.2 or later and Debian 12's redis-server is 7.0). When
    /// it is not, says so on stderr: the caller skips its test.
    pub fn valkey_installed() -> bool {
        let there = std::process::Command::new("valkey-server")
            .arg("--version")
            .output()
            .is_ok();
        if !there {
            eprintln!(
                "SKIPPED: valkey-server is not installed (apt-get install -t bookworm-backports valkey-server; .ci/run does): WAITAOF is not tested"
            );
        }
        there
    }

    fn start_unspawned(dir: &Path, extra: &[&str]) -> RedisServer {
        fs::create_dir_all(dir).expect("redis dir");
        RedisServer {
            child: None,
            port: free_port(),
            dir: dir.to_owned(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            tls: false,
            binary: "redis-server".into(),
            _temp: None,
        }
    }

    /// [`RedisServer::start`] in a temporary directory of its own.
    pub fn start_temp(extra: &[&str]) -> RedisServer {
        let temp = tempdir("scangate-redis-");
        let mut server = RedisServer::start(temp.path(), extra);
        server._temp = Some(temp);
        server
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
            binary: "redis-server".into(),
            _temp: None,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new(&self.binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", ""])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{} must be installed (apt-get install redis-server): {e}",
                    self.binary
                )
            });
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
    /// password-protected one counts too; not `-LOADING`: a restarted
    /// server reading its AOF refuses commands until it is done).
    pub fn answers(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
        let mut buf = [0u8; 64];
        c.write_all(b"PING\r\n").is_ok()
            && matches!(c.read(&mut buf), Ok(n) if n > 0 && !buf[..n].starts_with(b"-LOADING"))
    }

    /// A fresh connection to the server.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .unwrap_or_else(|e| panic!("connecting to redis-server on port {}: {e}", self.port))
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
        let mut c = self.connection();
        let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
            .arg(format!("scangate:{{{facility}}}:ledger"))
            .arg("-")
            .arg("+")
            .query(&mut c)
            .expect("XRANGE");
        entries
            .into_iter()
            .map(|(_, fields)| {
                let get = |name| scangate::facility::stream_field(&fields, name);
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

/// A redis-server of the test's own and a claimer lane's gate of gateway "gw" in facility
/// `f1` (window 3 s, retention 72 h) on a fresh database, with its facility
/// connection — for tests that drive facility rounds themselves. The
/// temporary directory holds both.
pub fn facility_rig(prefix: &str) -> (TempDir, RedisServer, Store, FacilityGate, Facility) {
    let root = tempdir(prefix);
    let redis = RedisServer::start(&root.path().join("redis"), &[]);
    let store = Store::open(&root.path().join("state")).expect("open the store");
    let gate = Gate::new(gate_config("f1", "gw"), &store).expect("a gate");
    let gate = FacilityGate::new(gate, &store).expect("a claimer lane's gate");
    let connect = Duration::from_secs(2);
    let retention = Duration::from_secs(72 * 3600);
    let facility = Facility::connect(&redis.url(), "f1", 3000, retention, connect, connect)
        .expect("connect to the test's redis-server");
    (root, redis, store, gate, facility)
}

/// A `[redis]` section for `redis`, with short timeouts (300 ms connect,
/// 500 ms per command).
pub fn redis_section(redis: &RedisServer) -> String {
    format!(
        "[redis]\nurl = {:?}\nconnect_timeout_ms = 300\ncommand_timeout_ms = 500\n",
        redis.url()
    )
}
