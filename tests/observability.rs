//! What facility IT sees of a gateway: its Prometheus metrics, scraped by a
//! real Prometheus from `[metrics] listen` and read by a real node_exporter
//! from `[metrics] textfile`, and `scangate status --json` through a
//! gateway's states (healthy, a scanner unplugged, the facility Redis
//! killed, the daemon stopped), read by a non-root member of the service's
//! group.

use crate::util::*;
use scangate::pty::VirtualScanner;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Send `label` and wait for its ACK.
fn scan_acked(vs: &mut VirtualScanner, label: &str) {
    vs.send(&frame(label)).unwrap();
    assert_eq!(replies(vs, 1).0, [ACK], "{label}");
}

/// Append `text` to the config file `config`.
fn append(config: &Path, text: &str) {
    let old = std::fs::read_to_string(config).unwrap();
    std::fs::write(config, format!("{old}\n{text}\n")).unwrap();
}

/// The sample of `name` with these `label="value"` pairs in Prometheus
/// text (whatever the label order), if present.
fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[test]
fn prometheus_and_node_exporter_see_the_decisions_of_a_running_gateway() {
    let dir = tempdir("scangate-metrics-");
    let textdir = dir.path().join("node-exporter");
    std::fs::create_dir(&textdir).unwrap();
    let textfile = textdir.join("scangate.prom");
    let listen = format!("127.0.0.1:{}", free_port());
    let mut gw = Gateway::builder_in(dir.path())
        .pty(ScannerSpec::named("counter-1").ack())
        .config(&format!(
            "[metrics]\nlisten = {listen:?}\ntextfile = {textfile:?}\ninterval_s = 1"
        ))
        .build();
    let node = NodeExporter::start(&textdir, &dir.path().join("node-exporter.log"));
    let mut daemon = gw.launch();
    let [mut vs] = gw.take_scanners();
    let prom_dir = dir.path().join("prometheus");
    std::fs::create_dir(&prom_dir).unwrap();
    let prom = Prometheus::start(&prom_dir, &[("scangate", &listen), ("node", &node.addr)]);

    // 5 picks, then 2 echoes of them within the window.
    for i in 1..=5 {
        scan_acked(&mut vs, &dscsa(&format!("PICK{i:04}")));
    }
    for i in 1..=2 {
        scan_acked(&mut vs, &dscsa(&format!("PICK{i:04}")));
    }

    let expected: Vec<(String, f64)> = [
        ("committed", 5.0),
        ("control", 0.0),
        ("rejected", 0.0),
        ("suppressed", 2.0),
        ("unresolved", 0.0),
    ]
    .iter()
    .map(|(d, n)| (d.to_string(), *n))
    .collect();
    for job in ["scangate", "node"] {
        let q = format!("scangate_decisions_total{{job=\"{job}\",scanner=\"counter-1\"}}");
        wait_until(
            &format!("Prometheus to have {q} = 5 committed, 2 suppressed"),
            || prom.values_by(&q, "decision") == expected,
        );
        let one = |q: &str| {
            prom.values_by(&format!("{q}{{job=\"{job}\"}}"), "job")
                .first()
                .map(|(_, v)| *v)
        };
        assert_eq!(one("scangate_scans_read_total"), Some(7.0), "{job}");
        assert_eq!(
            one("scangate_ack_latency_seconds_count"),
            Some(7.0),
            "{job}"
        );
        assert_eq!(
            one("scangate_commit_latency_seconds_count"),
            Some(7.0),
            "{job}"
        );
        assert_eq!(one("scangate_scanner_up"), Some(1.0), "{job}");
        assert_eq!(one("scangate_audit_records_total"), Some(7.0), "{job}");
        assert!(one("scangate_database_bytes").unwrap() > 0.0, "{job}");
        assert!(one("scangate_state_free_bytes").unwrap() > 0.0, "{job}");
        let build = prom.values_by(&format!("scangate_build_info{{job=\"{job}\"}}"), "version");
        assert_eq!(
            build,
            [(env!("CARGO_PKG_VERSION").to_string(), 1.0)],
            "{job}"
        );
        let schema = prom.values_by(&format!("scangate_build_info{{job=\"{job}\"}}"), "schema");
        assert_eq!(
            schema,
            [(scangate::build::SCHEMA_VERSION.to_string(), 1.0)],
            "{job}"
        );
    }
    assert_eq!(
        prom.values_by("node_textfile_scrape_error", "job"),
        [("node".to_string(), 0.0)]
    );

    // The textfile is rewritten every second, by temporary file and rename:
    // node_exporter never reads it half-written (a truncated file would be a
    // parse error or miss series), and sees no other file of ours.
    let until = Instant::now() + Duration::from_secs(3);
    let mut scrapes = 0;
    let mut inodes = std::collections::HashSet::new();
    while Instant::now() < until {
        let (code, body) = http_get(&node.addr, "/metrics").expect("node_exporter answers");
        assert_eq!(code, 200);
        assert_eq!(
            sample(&body, "node_textfile_scrape_error", &[]),
            Some(0.0),
            "{body}"
        );
        for (decision, n) in &expected {
            let d = format!("decision=\"{decision}\"");
            assert_eq!(
                sample(
                    &body,
                    "scangate_decisions_total",
                    &[&d, "scanner=\"counter-1\""]
                ),
                Some(*n),
                "{body}"
            );
        }
        let ours: Vec<_> = std::fs::read_dir(&textdir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".prom"))
            .collect();
        assert_eq!(ours, ["scangate.prom"]);
        scrapes += 1;
        // Read directly, between the scrapes, it is always whole (its last
        // series ends it), and each rewrite is a new file renamed over it.
        for _ in 0..20 {
            use std::os::unix::fs::MetadataExt;
            let Ok(text) = std::fs::read_to_string(&textfile) else {
                panic!("{} vanished between two rewrites", textfile.display());
            };
            assert!(
                text.ends_with('\n') && text.contains("\nscangate_state_free_bytes "),
                "a partly written textfile:\n{text}"
            );
            inodes.insert(std::fs::metadata(&textfile).unwrap().ino());
        }
    }
    assert!(scrapes > 10, "only {scrapes} scrapes");
    assert!(
        inodes.len() >= 2,
        "the textfile was not replaced while watched"
    );
    assert!(daemon.terminate().success(), "{}", daemon.log_digest());
}

#[test]
fn a_taken_metrics_port_fails_the_start_with_exit_2_naming_it() {
    let dir = tempdir("scangate-metrics-port-");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let config = write_config(dir.path(), &dir.path().join("state"), 3000, &[]);
    append(&config, &format!("[metrics]\nlisten = {addr:?}"));
    let mut daemon = Daemon::start(&config, &dir.path().join("daemon.log"));
    let status = daemon.wait_exit();
    assert_eq!(status.code(), Some(2), "{}", daemon.log());
    assert!(
        daemon
            .log()
            .contains(&format!("[metrics] listen = \"{addr}\"")),
        "{}",
        daemon.log()
    );
}

/// `[metrics] listen` beyond loopback is a choice, not an error: a
/// `warning:` line from `check-config` and a WARN when the daemon starts
/// (the key cannot change at a reload), which serves all the same; a
/// loopback address gets neither.
#[test]
fn a_metrics_listen_address_beyond_loopback_is_warned_of_not_refused() {
    // A port free on 127.0.0.1 a moment ago may be taken on another
    // address (an outgoing connection's own port) before the daemon binds
    // it on all of them: then the next free port.
    let (gw, mut daemon, exposed, port) = (0..5)
        .find_map(|_| {
            let port = free_port();
            let exposed = format!("0.0.0.0:{port}");
            let gw = Gateway::builder("scangate-metrics-exposed-")
                .pty(ScannerSpec::named("counter-1").ack())
                .config(&format!("[metrics]\nlisten = {exposed:?}"))
                .build();
            let warning = format!("[metrics] listen = \"{exposed}\" is not a loopback address");
            let out: Outcome = cli_cfg(&gw.cfg, &["check-config"]).into();
            assert_eq!(out.code, Some(0), "{out}");
            assert!(out.stdout.contains(&format!("warning: {warning}")), "{out}");
            let mut daemon = gw.spawn_with_env(&[]);
            wait_until(
                "the daemon to warn of the exposed endpoint, or stop",
                || {
                    daemon.exited().is_some()
                        || daemon
                            .log()
                            .lines()
                            .any(|l| l.contains(" WARN ") && l.contains(&warning))
                },
            );
            if daemon.exited().is_some() && daemon.log().contains("Address already in use") {
                return None;
            }
            Some((gw, daemon, exposed, port))
        })
        .expect("a free port in 5 tries");
    daemon.wait_open(&gw.pty_paths());
    let local = format!("127.0.0.1:{port}");
    wait_until("/metrics answered", || {
        matches!(http_get(&local, "/metrics"), Some((200, _)))
    });
    assert!(daemon.terminate().success(), "{}", daemon.log_digest());

    gw.edit_config(|text| text.replace(&exposed, &local));
    let out: Outcome = cli_cfg(&gw.cfg, &["check-config"]).into();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!out.stdout.contains("loopback"), "{out}");
}

/// The group `scangate` and a non-root member of it (created once).
pub(crate) fn group_member() -> &'static str {
    static MEMBER: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    MEMBER.get_or_init(|| {
        let ok = |cmd: &mut Command| {
            cmd.stdout(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ok(Command::new("getent").args(["group", "scangate"])) {
            assert!(
                ok(Command::new("groupadd").args(["--system", "scangate"])),
                "groupadd"
            );
        }
        if !ok(Command::new("id").arg("scangate-probe")) {
            assert!(
                ok(Command::new("useradd").args([
                    "--system",
                    "-M",
                    "-N",
                    "-g",
                    "scangate",
                    "-s",
                    "/usr/sbin/nologin",
                    "scangate-probe"
                ])),
                "useradd"
            );
        }
    });
    "scangate-probe"
}

/// `scangate <args> --config <config>`, as `user` of group `scangate` when
/// given; the exit code and stdout as JSON (null if it is not JSON).
fn run_as(user: Option<&str>, config: &Path, args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let mut cmd = match user {
        Some(u) => {
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={u}"),
                "--regid=scangate",
                "--init-groups",
                bin(),
            ]);
            c
        }
        None => Command::new(bin()),
    };
    let out = cmd.args(args).arg("--config").arg(config).output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    if json.is_null() {
        eprintln!(
            "{args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (out.status.code(), json)
}

fn degraded_by(status: &serde_json::Value, what: &str) -> bool {
    status["degraded"].as_array().is_some_and(|d| {
        d.iter()
            .any(|r| r.as_str().is_some_and(|r| r.contains(what)))
    })
}

#[test]
fn status_tells_healthy_unplugged_redis_down_and_stopped_also_to_a_group_member() {
    use std::os::unix::fs::PermissionsExt;
    let member = group_member();
    let dir = tempdir("scangate-status-");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The state directory as the package sets it up: the service's group,
    // setgid, so that every file the daemon makes is the group's.
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    assert!(
        Command::new("chgrp")
            .arg("scangate")
            .arg(&state)
            .status()
            .unwrap()
            .success()
    );
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o2750)).unwrap();
    let redis_dir = dir.path().join("redis");
    std::fs::create_dir(&redis_dir).unwrap();
    let mut redis = RedisServer::start(&redis_dir, &[]);
    // counter-2 through a symlink (as udev's /dev/scangate/<name>): unplugged,
    // the link goes too, so a PTY another test opens meanwhile under the
    // same /dev/pts number is not taken for it.
    let b_link = dir.path().join("counter-2");
    let mut gw = Gateway::builder_in(dir.path())
        .state_dir(&state)
        .pty(ScannerSpec::named("counter-1").ack())
        .pty_behind(&b_link, ScannerSpec::named("counter-2").ack())
        .redis(&redis)
        .build();
    // The config as the package makes it: root:scangate 0640, read by the
    // group member too.
    assert!(
        Command::new("chgrp")
            .arg("scangate")
            .arg(&gw.cfg)
            .status()
            .unwrap()
            .success()
    );
    std::fs::set_permissions(&gw.cfg, std::fs::Permissions::from_mode(0o640)).unwrap();
    let mut daemon = gw.launch();
    let [mut a, b] = gw.take_scanners();
    let status = |user| run_as(user, &gw.cfg, &["status", "--json"]);

    // Healthy: both scanners connected, the facility store answering.
    scan_acked(&mut a, &dscsa("STATUS0001"));
    // (The status file is rewritten every 2 s: the read shows by then.)
    wait_until(
        "status: healthy, the read counted, facility answering",
        || {
            let (code, s) = status(None);
            code == Some(0)
                && s["facility"]["answering"] == true
                && s["scanners"][0]["reads_today"] == 1
        },
    );
    let (code, s) = status(Some(member));
    assert_eq!(code, Some(0), "{s}");
    assert_eq!(s["healthy"], true, "{s}");
    assert_eq!(s["scanners"][0]["connected"], true, "{s}");
    assert_eq!(s["scanners"][0]["reads_today"], 1, "{s}");
    assert_eq!(
        s["scanners"][0]["device"],
        a.path().to_str().unwrap(),
        "{s}"
    );
    assert_eq!(s["audit"]["records"], 1, "{s}");

    // A scanner unplugged: degraded, naming it.
    std::fs::remove_file(&b_link).unwrap();
    drop(b);
    wait_until("status to name the unplugged scanner", || {
        let (code, s) = status(None);
        code == Some(1) && degraded_by(&s, "scanner counter-2 is not connected")
    });
    let (_, s) = status(None);
    assert_eq!(s["scanners"][1]["connected"], false, "{s}");
    assert!(!degraded_by(&s, "counter-1"), "{s}");
    assert!(!degraded_by(&s, "facility store"), "{s}");

    // The facility Redis killed: degraded, naming it; scans wait unresolved.
    redis.kill9();
    scan_acked(&mut a, &dscsa("STATUS0002"));
    wait_until("status to name the facility store", || {
        let (code, s) = status(None);
        code == Some(1) && degraded_by(&s, "facility store (Redis) is not answering")
    });

    // The daemon stopped: a group member still gets an answer, without
    // writing, and so does `outbox status`.
    assert!(daemon.terminate().success(), "{}", daemon.log_digest());
    let (code, s) = status(Some(member));
    assert_eq!(code, Some(1), "{s}");
    assert_eq!(s["daemon"]["running"], false, "{s}");
    assert!(degraded_by(&s, "the daemon is not running"), "{s}");
    assert_eq!(s["outbox"]["unresolved"], 1, "{s}");
    assert_eq!(s["scanners"][0]["connected"], false, "{s}");
    let (code, o) = run_as(Some(member), &gw.cfg, &["outbox", "status", "--json"]);
    assert_eq!(code, Some(0), "{o}");
    assert_eq!(o["committed"], 1, "{o}");
    assert_eq!(o["unresolved"], 1, "{o}");
}

/// The shipped alerting rules load in Prometheus's own checker and fire as
/// their unit tests say (a scanner unplugged, the facility store down and
/// back, scans undecided for long, the backlog growing, the clock error
/// beyond the bound, fewer than 14 days of disk left, the audit anchor stale).
#[test]
fn the_shipped_alert_rules_check_and_pass_their_promtool_tests() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/prometheus");
    for args in [
        ["check", "rules", "scangate-alerts.yml"],
        ["test", "rules", "scangate-alerts.test.yml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("promtool (apt-get install prometheus)");
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The names of the samples in a Prometheus text exposition.
fn exposed_names(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect()
}

/// A running gateway's /metrics, once it has every series `ready` names.
fn scrape_until(listen: &str, what: &str, ready: impl Fn(&str) -> bool) -> String {
    let mut body = String::new();
    wait_until(what, || match http_get(listen, "/metrics") {
        Some((200, b)) if ready(&b) => {
            body = b;
            true
        }
        _ => false,
    });
    body
}

/// A started gateway with one scanner (`counter-1`, ACKing) and `[metrics]
/// listen` on a free port (refreshed every second), `extra` appended to its
/// config: the gateway, its scanner, listen address and daemon.
fn metrics_gateway(extra: &str) -> (Gateway, VirtualScanner, String, Daemon) {
    let listen = format!("127.0.0.1:{}", free_port());
    let mut gw = Gateway::builder("scangate-metrics-")
        .pty(ScannerSpec::named("counter-1").ack())
        .config(&format!(
            "[metrics]\nlisten = {listen:?}\ninterval_s = 1\n{extra}"
        ))
        .build();
    let daemon = gw.launch();
    let [vs] = gw.take_scanners();
    (gw, vs, listen, daemon)
}

/// The anchor thread sets `scangate_audit_last_anchor_timestamp_seconds`
/// when it anchors the audit chain head, and `scangate status` shows the
/// last anchor.
#[test]
fn the_last_audit_anchor_is_a_recent_metric_and_in_status() {
    let started = chrono::Utc::now().timestamp_millis() as f64 / 1e3;
    let (gw, mut vs, listen, mut daemon) = metrics_gateway("");
    scan_acked(&mut vs, &dscsa("ANCHOR01"));
    let name = "scangate_audit_last_anchor_timestamp_seconds";
    let body = scrape_until(&listen, "an anchor written since the start", |b| {
        sample(b, name, &[]).is_some_and(|v| v >= started)
    });
    let at = sample(&body, name, &[]).unwrap();
    let now = chrono::Utc::now().timestamp_millis() as f64 / 1e3;
    assert!(at <= now + 1.0 && now - at < 60.0, "{name} {at}, now {now}");
    wait_until("status to show the anchored record", || {
        let out: Outcome = cli_cfg(&gw.cfg, &["status"]).into();
        out.stdout.contains("last anchored: record 1, at ")
    });
    let (_, json) = run_as(None, &gw.cfg, &["status", "--json"]);
    assert_eq!(json["audit"]["anchored_seq"], 1, "{json}");
    daemon.terminate();
}

/// Every `scangate_*` series the shipped alert rules and Grafana dashboard
/// (contrib/) name is one a running gateway exposes (with `[redis]`, so
/// the facility series are there too).
#[test]
fn every_series_contrib_names_is_one_a_gateway_exposes() {
    let redis = RedisServer::start_temp(&[]);
    // A consumer group of the facility ledger stream, so its series exist.
    redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("scangate:{test-pharmacy}:ledger")
        .arg("inventory")
        .arg("0")
        .arg("MKSTREAM")
        .query::<()>(&mut redis.connection())
        .unwrap();
    // And a [[sink]] (its receiver need not answer), so the sinks' too.
    let (gw, _vs, listen, mut daemon) = metrics_gateway(&format!(
        "\n[redis]\nurl = {:?}\n\n[[sink]]\nname = \"inv\"\nurl = \"http://127.0.0.1:9/ledger\"\n",
        redis.url()
    ));
    // A consumer of the gateway's own ledger, so its series exist too
    // (registered beside the running daemon, as a follower does).
    let mut store = scangate::store::Store::open_unlocked(&gw.state).unwrap();
    let w = store.write().unwrap();
    scangate::ledger::cursor::register(&w, "inventory", 0).unwrap();
    w.commit().unwrap();
    let body = scrape_until(&listen, "/metrics with the facility series", |b| {
        b.contains("scangate_facility_up")
            && b.contains("scangate_facility_ledger_oldest_unacked_age_seconds")
            && b.contains("scangate_ledger_consumer_oldest_unacked_age_seconds")
    });
    let exposed = exposed_names(&body);
    let contrib = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib");
    let mut named = std::collections::BTreeMap::<String, String>::new();
    for file in [
        "prometheus/scangate-alerts.yml",
        "prometheus/scangate-alerts.test.yml",
        "grafana/scangate.json",
    ] {
        let text = std::fs::read_to_string(contrib.join(file)).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("scangate_") {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            if end > "scangate_".len() {
                named.insert(tail[..end].to_string(), file.to_string());
            }
            rest = &tail[end..];
        }
    }
    assert!(named.len() >= 10, "too few names found: {named:?}");
    let missing: Vec<_> = named
        .iter()
        .filter(|(n, _)| !exposed.contains(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "named in contrib/ but not exposed by a gateway: {missing:?}\nexposed: {exposed:?}"
    );
    daemon.terminate();
}
