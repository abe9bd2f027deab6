//! A real Prometheus and node_exporter of the test's own (Debian's
//! `prometheus` and `prometheus-node-exporter`), on free ports with their
//! own config and storage, killed on drop; and a plain HTTP GET.

use super::redis_server::free_port;
use super::wait::wait_until;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `GET http://addr/path`: the status code and body (`None`: no answer).
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut conn = std::net::TcpStream::connect(addr).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split(' ').nth(1)?.parse().ok()?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_string()
    };
    Some((code, body))
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A child process killed and reaped on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(binary: &str, args: &[String], log: &Path) -> Killed {
    let log = std::fs::File::create(log).expect("creating a log file");
    let child = Command::new(binary)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {binary} ({e}): apt-get install prometheus prometheus-node-exporter"
            )
        });
    Killed(child)
}

/// node_exporter with only its textfile collector, reading `dir`.
pub struct NodeExporter {
    _child: Killed,
    /// `127.0.0.1:port`.
    pub addr: String,
}

impl NodeExporter {
    pub fn start(textfile_dir: &Path, log: &Path) -> NodeExporter {
        let addr = format!("127.0.0.1:{}", free_port());
        let child = spawn(
            "prometheus-node-exporter",
            &[
                format!("--web.listen-address={addr}"),
                "--collector.disable-defaults".into(),
                "--collector.textfile".into(),
                format!("--collector.textfile.directory={}", textfile_dir.display()),
            ],
            log,
        );
        wait_until("node_exporter to answer", || {
            http_get(&addr, "/metrics").is_some_and(|(c, _)| c == 200)
        });
        NodeExporter {
            _child: child,
            addr,
        }
    }
}

/// Prometheus scraping `targets` (job name, `host:port`) every 500 ms.
pub struct Prometheus {
    _child: Killed,
    /// `127.0.0.1:port`.
    pub addr: String,
}

impl Prometheus {
    pub fn start(dir: &Path, targets: &[(&str, &str)]) -> Prometheus {
        let mut config = String::from(
            "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\nscrape_configs:\n",
        );
        for (job, target) in targets {
            config += &format!(
                "  - job_name: {job:?}\n    static_configs:\n      - targets: [{target:?}]\n"
            );
        }
        let file = dir.join("prometheus.yml");
        std::fs::write(&file, config).unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let child = spawn(
            "prometheus",
            &[
                format!("--config.file={}", file.display()),
                format!("--storage.tsdb.path={}", dir.join("tsdb").display()),
                format!("--web.listen-address={addr}"),
            ],
            &dir.join("prometheus.log"),
        );
        wait_until("Prometheus to be ready", || {
            http_get(&addr, "/-/ready").is_some_and(|(c, _)| c == 200)
        });
        Prometheus {
            _child: child,
            addr,
        }
    }

    /// An instant query's result vector (`[]` while Prometheus has none).
    pub fn query(&self, promql: &str) -> Vec<serde_json::Value> {
        let mut q = String::new();
        for b in promql.bytes() {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                q.push(b as char);
            } else {
                q += &format!("%{b:02X}");
            }
        }
        let Some((200, body)) = http_get(&self.addr, &format!("/api/v1/query?query={q}")) else {
            return Vec::new();
        };
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// `label` → value of each series `promql` returns.
    pub fn values_by(&self, promql: &str, label: &str) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = self
            .query(promql)
            .iter()
            .map(|s| {
                (
                    s["metric"][label].as_str().unwrap_or_default().to_string(),
                    s["value"][1]
                        .as_str()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(f64::NAN),
                )
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}
