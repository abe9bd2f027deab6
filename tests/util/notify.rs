//! systemd's side of sd_notify(3): a unix datagram socket the test binds,
//! passed to the daemon as `NOTIFY_SOCKET`; every datagram it receives is
//! kept with its arrival time.

use super::wait::wait_until;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One datagram: its `KEY=value` lines, and when it came.
#[derive(Debug, Clone)]
pub struct Notice {
    pub lines: Vec<String>,
    pub at: Instant,
}

impl Notice {
    /// The value of `key` in this datagram.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.lines
            .iter()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
    }
}

/// A bound notify socket and what it received so far.
pub struct NotifySocket {
    path: PathBuf,
    got: Arc<Mutex<Vec<Notice>>>,
}

impl NotifySocket {
    /// Bind `<dir>/notify` and receive on a thread of its own.
    pub fn bind(dir: &Path) -> NotifySocket {
        let path = dir.join("notify");
        let sock = UnixDatagram::bind(&path).expect("binding the notify socket");
        let got = Arc::new(Mutex::new(Vec::new()));
        let keep = got.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = sock.recv(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                let lines = text.lines().map(str::to_string).collect();
                keep.lock().unwrap().push(Notice {
                    lines,
                    at: Instant::now(),
                });
            }
        });
        NotifySocket { path, got }
    }

    /// The socket's path, for `NOTIFY_SOCKET`.
    pub fn path(&self) -> &str {
        self.path.to_str().expect("utf-8 temp path")
    }

    /// Everything received so far.
    pub fn all(&self) -> Vec<Notice> {
        self.got.lock().unwrap().clone()
    }

    /// Every value of `key` received so far, with when it came.
    pub fn values(&self, key: &str) -> Vec<(String, Instant)> {
        self.all()
            .iter()
            .filter_map(|n| n.get(key).map(|v| (v.to_string(), n.at)))
            .collect()
    }

    /// Wait until `n` datagrams carried `key=value`; when the n-th came.
    pub fn wait_for(&self, key: &str, value: &str, n: usize) -> Instant {
        let mut at = None;
        wait_until(&format!("{n} x {key}={value} on the notify socket"), || {
            let hits: Vec<Instant> = self
                .values(key)
                .into_iter()
                .filter(|(v, _)| v == value)
                .map(|(_, t)| t)
                .collect();
            at = hits.get(n - 1).copied();
            at.is_some()
        });
        at.expect("awaited")
    }

    /// Wait until a `STATUS=` line satisfies `matches`; returns it.
    pub fn wait_status(&self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        let mut line = String::new();
        wait_until(&format!("a STATUS= line {what}"), || {
            match self
                .values("STATUS")
                .into_iter()
                .rev()
                .find(|(v, _)| matches(v))
            {
                Some((v, _)) => {
                    line = v;
                    true
                }
                None => false,
            }
        });
        line
    }

    /// `WATCHDOG=1` pings received after `since`.
    pub fn pings_after(&self, since: Instant) -> usize {
        self.values("WATCHDOG")
            .into_iter()
            .filter(|(v, t)| v == "1" && *t > since)
            .count()
    }

    /// Wait until `n` pings came after `since`.
    pub fn wait_pings(&self, since: Instant, n: usize) {
        wait_until(&format!("{n} WATCHDOG=1 pings"), || {
            self.pings_after(since) >= n
        });
    }

    /// The longest gap between two pings (or since the last one, up to
    /// now) after `since`.
    pub fn longest_ping_gap(&self, since: Instant) -> Duration {
        let mut times: Vec<Instant> = self
            .values("WATCHDOG")
            .into_iter()
            .filter(|(_, t)| *t > since)
            .map(|(_, t)| t)
            .collect();
        times.insert(0, since);
        times.push(Instant::now());
        times
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or_default()
    }
}
