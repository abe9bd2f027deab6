//! The ledger pushed over HTTP (`[[sink]]`) to a real
//! receiver the test starts (`tests/sink_receiver.py`, Python's
//! `http.server`, told by a control file how to answer, logging every
//! POST). The receiver answering 500 three times, then 400, killed and
//! started again, slower than `timeout_ms`; the daemon SIGKILLed with a
//! batch held; TLS with a CA of the test's own; EPCIS bodies checked
//! against GS1's schema. Every time: every ledger entry reaches the
//! receiver at least once, in ledger order; a retried batch is the same
//! bytes under the same `Idempotency-Key`.

use crate::util::*;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A receiver process on a fixed port (so it can be started again on it).
struct Receiver {
    child: Option<Child>,
    port: u16,
    control: PathBuf,
    log: PathBuf,
    tls: Option<(PathBuf, PathBuf)>,
    generation: u64,
    max_entries: Option<u64>,
}

impl Receiver {
    /// Started in `dir` on a free port, answering 200 (with `tls`: the
    /// server's certificate and key).
    fn start(dir: &Path, tls: Option<(PathBuf, PathBuf)>) -> Receiver {
        let mut r = Receiver {
            child: None,
            port: free_port(),
            control: dir.join("receiver-control.json"),
            log: dir.join("receiver-log.jsonl"),
            tls,
            generation: 0,
            max_entries: None,
        };
        r.answer(&[], json!({"status": 200}));
        r.restart();
        r
    }

    /// Start the process (again) and wait until it listens.
    fn restart(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sink_receiver.py");
        let mut cmd = Command::new("python3");
        cmd.arg(script)
            .args(["--port", &self.port.to_string()])
            .arg("--control")
            .arg(&self.control)
            .arg("--log")
            .arg(&self.log)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some((cert, key)) = &self.tls {
            cmd.arg("--cert").arg(cert).arg("--key").arg(key);
        }
        let mut child = cmd.spawn().expect("python3 runs the receiver");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "listening", "the receiver did not start");
        self.child = Some(child);
    }

    /// SIGKILL it.
    fn kill(&mut self) {
        let mut c = self.child.take().expect("running");
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// From now on: `script`'s answers in turn, then `default`.
    fn answer(&mut self, script: &[Value], default: Value) {
        self.generation += 1;
        let tmp = self.control.with_extension("tmp");
        let c = json!({"gen": self.generation, "script": script, "default": default,
            "max_entries": self.max_entries});
        std::fs::write(&tmp, c.to_string()).unwrap();
        std::fs::rename(&tmp, &self.control).unwrap();
    }

    /// From now on (with the answers last set): 413 to a request of more
    /// than `max` entries.
    fn limit_entries(&mut self, max: u64) {
        self.max_entries = Some(max);
        self.answer(&[], json!({"status": 200}));
    }

    /// Every POST it got, in order.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}/ledger", self.port)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A gateway with one PTY scanner, `/metrics` on a free port, and `sink`
/// (the keys of one `[[sink]]` table).
fn gateway(prefix: &str, sink: &str) -> (Gateway, String) {
    let listen = format!("127.0.0.1:{}", free_port());
    let gw = Gateway::builder(prefix)
        .pty(ScannerSpec::named("counter-1").ack())
        .config(&format!(
            "[metrics]\nlisten = {listen:?}\ninterval_s = 1\n\n[[sink]]\nname = \"inv\"\n{sink}"
        ))
        .build();
    (gw, listen)
}

/// Send `label` and wait for its ACK.
fn scan(vs: &mut scangate::pty::VirtualScanner, label: &str) {
    vs.send(&frame(label)).unwrap();
    assert_eq!(replies(vs, 1).0, [ACK], "{label}");
}

/// `scangate_sink_*` and the sink's consumer series, by name and labels.
fn metrics(listen: &str) -> BTreeMap<String, f64> {
    let (code, body) = http_get(listen, "/metrics").expect("/metrics answers");
    assert_eq!(code, 200);
    body.lines()
        .filter(|l| l.starts_with("scangate_sink_") || l.contains("consumer=\"sink.inv\""))
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

fn metric(listen: &str, key: &str) -> f64 {
    metrics(listen).get(key).copied().unwrap_or(0.0)
}

/// `status --json` (exit 0 healthy, 1 degraded).
fn status(cfg: &Path) -> Value {
    let out: Outcome = cli_cfg(cfg, &["status", "--json"]).into();
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|_| panic!("{out}"))
}

/// The sink's view in `status`.
fn sink_status(cfg: &Path) -> Value {
    status(cfg)["sinks"][0].clone()
}

/// The scans each request's body carries, in its order.
fn scans_of(req: &Value) -> Vec<String> {
    let body = req["body"].as_str().unwrap();
    if req["content_type"] == "application/ld+json" {
        let doc: Value = serde_json::from_str(body).unwrap();
        doc["epcisBody"]["eventList"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let id = e["eventID"].as_str().unwrap();
                id.strip_prefix("urn:uuid:").unwrap().to_string()
            })
            .collect()
    } else {
        assert_eq!(req["content_type"], "application/x-ndjson");
        assert!(body.ends_with('\n'), "every line ends in a newline");
        body.lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                v["scan_uuid"].as_str().unwrap().to_string()
            })
            .collect()
    }
}

/// Every entry of the ledger reached the receiver (answered 2xx) at
/// least once; each batch is in ledger order and starts at or before
/// the entry after the last one delivered before it (nothing skipped);
/// each request's key is the same whenever its body is. The ledger.
fn assert_every_entry_delivered_in_order(cfg: &Path, r: &Receiver) -> Vec<Value> {
    let ledger = ledger(cfg);
    let seq_of: HashMap<String, i64> = ledger
        .iter()
        .map(|e| {
            (
                e["scan_uuid"].as_str().unwrap().into(),
                e["seq"].as_i64().unwrap(),
            )
        })
        .collect();
    let mut reached = 0;
    let mut keys: HashMap<String, String> = HashMap::new();
    for req in r.requests() {
        let key = req["key"].as_str().unwrap().to_string();
        let body = req["body"].as_str().unwrap().to_string();
        assert_eq!(
            keys.entry(key.clone()).or_insert(body.clone()),
            &body,
            "key {key}: another body"
        );
        if req["status"].as_u64().unwrap() / 100 != 2 {
            continue;
        }
        let seqs: Vec<i64> = scans_of(&req).iter().map(|u| seq_of[u]).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "out of order: {seqs:?}"
        );
        assert!(
            seqs[0] <= reached + 1,
            "entries {}..{} skipped",
            reached + 1,
            seqs[0]
        );
        assert_eq!(req["seq"], format!("{}-{}", seqs[0], seqs.last().unwrap()));
        reached = reached.max(*seqs.last().unwrap());
    }
    assert_eq!(
        reached,
        ledger.last().unwrap()["seq"].as_i64().unwrap(),
        "not all delivered"
    );
    ledger
}

/// Wait until the sink has delivered through the ledger's last entry
/// (`count` entries).
fn wait_delivered(cfg: &Path, count: usize) {
    wait_all_decided(cfg, count as i64);
    let last = ledger(cfg).last().unwrap()["seq"].as_i64().unwrap();
    wait_until(&format!("the sink to deliver through entry {last}"), || {
        sink_status(cfg)["delivered_through_seq"] == last
    });
}

fn sighup(d: &Daemon) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(d.pid() as i32), Signal::SIGHUP)
        .expect("SIGHUP");
}

/// 500 three times, then 200: four POSTs of one body under one key, the
/// failures counted; then 400: blocked (status DEGRADED, the metric,
/// nothing acknowledged) until the receiver is fixed and the daemon
/// reloaded; then the receiver killed: nothing delivered meanwhile, all
/// of it once it is back.
#[test]
fn retried_blocked_and_killed_receivers_get_every_entry_in_order() {
    let tmp = tempdir("scangate-sink-retry-");
    let mut r = Receiver::start(tmp.path(), None);
    let five = json!({"status": 500, "body": "try later"});
    r.answer(&[five.clone(), five.clone(), five], json!({"status": 200}));
    let (mut gw, listen) = gateway(
        "scangate-sink-retry-",
        &format!("url = {:?}\nbatch = 2\n", r.url()),
    );
    let d = gw.launch();
    let [mut vs] = gw.take_scanners();
    for i in 0..3 {
        scan(&mut vs, &dscsa(&format!("RETRY{i:03}")));
    }
    wait_delivered(&gw.cfg, 3);
    let reqs = r.requests();
    assert!(reqs.len() >= 4, "{reqs:?}");
    let first: Vec<&Value> = reqs[..4].iter().collect();
    for req in &first[1..] {
        assert_eq!(req["key"], first[0]["key"], "the same key on every retry");
        assert_eq!(
            req["body"], first[0]["body"],
            "the same body on every retry"
        );
    }
    assert_eq!(
        first
            .iter()
            .map(|q| q["status"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [500, 500, 500, 200]
    );
    wait_until("the failures counted", || {
        metric(
            &listen,
            r#"scangate_sink_failures_total{sink="inv",kind="status_5xx"}"#,
        ) == 3.0
    });
    assert_eq!(
        metric(
            &listen,
            r#"scangate_sink_delivered_entries_total{sink="inv"}"#
        ),
        3.0
    );
    assert!(d.log().contains("after 4 attempts"), "{}", d.log());

    // 400: blocked, kept, nothing acknowledged.
    r.answer(
        &[],
        json!({"status": 400, "body": "unknown GTIN 00312345678906"}),
    );
    scan(&mut vs, &dscsa("BLOCK000"));
    wait_until("the sink to be blocked in status", || {
        sink_status(&gw.cfg)["blocked"] == true
    });
    let st = status(&gw.cfg);
    assert_eq!(st["healthy"], false);
    assert!(
        st["degraded"].to_string().contains("sink inv:"),
        "{}",
        st["degraded"]
    );
    let sink = &st["sinks"][0];
    assert_eq!(
        sink["delivered_through_seq"], 3,
        "nothing acknowledged: {sink}"
    );
    assert_eq!(
        (&sink["held"]["first_seq"], &sink["behind"]),
        (&json!(4), &json!(1))
    );
    assert!(
        sink["held"]["last_error"]
            .as_str()
            .unwrap()
            .contains("unknown GTIN"),
        "{sink}"
    );
    wait_until("the blocked gauge", || {
        metric(&listen, r#"scangate_sink_blocked{sink="inv"}"#) == 1.0
    });
    let text: Outcome = cli_cfg(&gw.cfg, &["status"]).into();
    assert!(text.stdout.contains("sink inv (json to"), "{text}");
    assert!(text.stdout.contains("BLOCKED"), "{text}");
    // Fixed, then reloaded: sent at once (not after 10 minutes).
    r.answer(&[], json!({"status": 200}));
    sighup(&d);
    wait_delivered(&gw.cfg, 4);
    assert_eq!(metric(&listen, r#"scangate_sink_blocked{sink="inv"}"#), 0.0);
    assert_eq!(sink_status(&gw.cfg)["blocked"], false);

    // Killed: connections refused, retried; started again: all of it.
    r.kill();
    for i in 0..5 {
        scan(&mut vs, &dscsa(&format!("KILLED{i:03}")));
    }
    wait_until("a refused connection counted", || {
        metric(
            &listen,
            r#"scangate_sink_failures_total{sink="inv",kind="connect"}"#,
        ) >= 1.0
    });
    assert_eq!(sink_status(&gw.cfg)["delivered_through_seq"], 4);
    r.restart();
    wait_delivered(&gw.cfg, 9);
    wait_until("the sink's consumer lag sampled at 0", || {
        metrics(&listen).get(r#"scangate_ledger_consumer_behind_entries{consumer="sink.inv"}"#)
            == Some(&0.0)
    });
    assert_every_entry_delivered_in_order(&gw.cfg, &r);
    let consumers: Outcome = cli_cfg(&gw.cfg, &["ledger", "consumers", "list"]).into();
    assert!(consumers.stdout.contains("sink.inv"), "{consumers}");
    // A sink added takes a restart: the reload is refused, naming it.
    gw.edit_config(|text| text + "\n[[sink]]\nname = \"other\"\nurl = \"http://127.0.0.1:9/\"\n");
    sighup(&d);
    wait_until("the reload refused for the added sink", || {
        d.log().contains("reload refused: `sink` changed")
    });
}

/// A receiver slower than `timeout_ms`: the POST times out (counted) and
/// the same batch is sent again, and taken; basic auth from its file.
#[test]
fn a_receiver_slower_than_the_timeout_gets_the_batch_again() {
    let tmp = tempdir("scangate-sink-slow-");
    let mut r = Receiver::start(tmp.path(), None);
    r.answer(
        &[json!({"status": 200, "delay_s": 3})],
        json!({"status": 200}),
    );
    let basic = tmp.path().join("basic");
    std::fs::write(&basic, "scangate:pa ss\n").unwrap();
    let (mut gw, listen) = gateway(
        "scangate-sink-slow-",
        &format!(
            "url = {:?}\ntimeout_ms = 500\nbasic_auth_file = {basic:?}\n",
            r.url()
        ),
    );
    let _d = gw.launch();
    let [mut vs] = gw.take_scanners();
    scan(&mut vs, &dscsa("SLOW000"));
    wait_delivered(&gw.cfg, 1);
    assert!(
        metric(
            &listen,
            r#"scangate_sink_failures_total{sink="inv",kind="timeout"}"#
        ) >= 1.0
    );
    let reqs = r.requests();
    assert!(
        reqs.len() >= 2 && reqs[0]["key"] == reqs[1]["key"],
        "{reqs:?}"
    );
    // base64("scangate:pa ss")
    assert!(
        reqs.iter()
            .all(|q| q["authorization"] == "Basic c2NhbmdhdGU6cGEgc3M=")
    );
    assert_every_entry_delivered_in_order(&gw.cfg, &r);
}

/// A `Retry-After: 0` is held to the first retry's second (it spun), and
/// 409 and 425 (the same Idempotency-Key still in progress) are retried,
/// not blocked: the batch arrives after them, the same bytes under the
/// same key, each attempt at least ~1 s after the one before (a floor the
/// back-off's sleep guarantees, not a speed).
#[test]
fn a_zero_retry_after_and_a_409_are_retried_a_second_apart() {
    let tmp = tempdir("scangate-sink-409-");
    let mut r = Receiver::start(tmp.path(), None);
    r.answer(
        &[
            json!({"status": 503, "retry_after": 0}),
            json!({"status": 409, "body": "in progress"}),
            json!({"status": 425}),
        ],
        json!({"status": 200}),
    );
    let (mut gw, listen) = gateway("scangate-sink-409-", &format!("url = {:?}\n", r.url()));
    let _d = gw.launch();
    let [mut vs] = gw.take_scanners();
    scan(&mut vs, &dscsa("AGAIN000"));
    wait_delivered(&gw.cfg, 1);
    let reqs = r.requests();
    assert_eq!(
        reqs.iter()
            .map(|q| q["status"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [503, 409, 425, 200],
        "{reqs:?}"
    );
    for pair in reqs.windows(2) {
        assert_eq!(pair[1]["key"], pair[0]["key"]);
        assert_eq!(pair[1]["body"], pair[0]["body"]);
        let gap = pair[1]["t"].as_f64().unwrap() - pair[0]["t"].as_f64().unwrap();
        assert!(gap >= 0.9, "attempts {gap:.3} s apart: {reqs:?}");
    }
    assert_eq!(
        metric(
            &listen,
            r#"scangate_sink_failures_total{sink="inv",kind="status_409"}"#
        ),
        1.0
    );
    assert_eq!(sink_status(&gw.cfg)["blocked"], false);
    assert_every_entry_delivered_in_order(&gw.cfg, &r);
}

/// A receiver refusing a batch's size (413) blocks the sink; with `batch`
/// lowered and the daemon reloaded, the held batch is cut again at the new
/// size and every entry arrives once, in order. Control: a reload that
/// leaves `batch` as it was sends the same batch (key and bytes) again,
/// and it is refused again.
#[test]
fn a_batch_too_large_for_the_receiver_is_cut_again_when_batch_is_lowered() {
    let tmp = tempdir("scangate-sink-413-");
    let mut r = Receiver::start(tmp.path(), None);
    r.limit_entries(2);
    // Three entries in the ledger before the sink exists, so its first
    // batch holds all three (a sink added takes a restart).
    let mut gw = Gateway::builder("scangate-sink-413-")
        .pty(ScannerSpec::named("counter-1").ack())
        .build();
    let mut d = gw.launch();
    let [mut vs] = gw.take_scanners();
    for i in 0..3 {
        scan(&mut vs, &dscsa(&format!("SIZE{i:03}")));
    }
    wait_all_decided(&gw.cfg, 3);
    d.terminate();
    gw.edit_config(|text| {
        text + &format!(
            "\n[[sink]]\nname = \"inv\"\nurl = {:?}\nbatch = 3\n",
            r.url()
        )
    });
    let d = gw.launch();
    wait_until("the sink to be blocked by the 413", || {
        sink_status(&gw.cfg)["blocked"] == true
    });
    let refused = r.requests();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(
        (&refused[0]["status"], &refused[0]["entries"]),
        (&json!(413), &json!("3"))
    );
    // Control: reloaded with `batch` unchanged, the same batch again.
    sighup(&d);
    wait_until("the held batch sent again after the reload", || {
        r.requests().len() == 2
    });
    let again = &r.requests()[1];
    assert_eq!(again["key"], refused[0]["key"]);
    assert_eq!(again["body"], refused[0]["body"]);
    assert_eq!(again["status"], 413);
    wait_until("the sink blocked again", || {
        sink_status(&gw.cfg)["blocked"] == true
    });
    assert_eq!(sink_status(&gw.cfg)["delivered_through_seq"], 0);
    // Lowered: cut again, two entries then one.
    gw.edit_config(|text| text.replace("batch = 3\n", "batch = 2\n"));
    sighup(&d);
    wait_delivered(&gw.cfg, 3);
    let taken: Vec<(Value, Value)> = r
        .requests()
        .iter()
        .filter(|q| q["status"] == 200)
        .map(|q| (q["entries"].clone(), q["key"].clone()))
        .collect();
    assert_eq!(
        taken.iter().map(|t| t.0.clone()).collect::<Vec<_>>(),
        [json!("2"), json!("1")],
        "{taken:?}"
    );
    assert_ne!(
        taken[0].1, refused[0]["key"],
        "a batch cut again has its own key"
    );
    assert_eq!(sink_status(&gw.cfg)["blocked"], false);
    assert_every_entry_delivered_in_order(&gw.cfg, &r);
}

/// The daemon SIGKILLed while its batch is held (the receiver answering
/// 503): started again, it sends that batch, byte for byte, under the
/// same key, first.
#[test]
fn a_batch_held_at_a_sigkill_is_sent_again_the_same_after_restart() {
    let tmp = tempdir("scangate-sink-kill9-");
    let mut r = Receiver::start(tmp.path(), None);
    r.answer(&[], json!({"status": 503, "retry_after": 1}));
    let (mut gw, _listen) = gateway(
        "scangate-sink-kill9-",
        &format!("url = {:?}\nbatch = 3\n", r.url()),
    );
    let mut d = gw.launch();
    let [mut vs] = gw.take_scanners();
    for i in 0..2 {
        scan(&mut vs, &dscsa(&format!("HELD{i:03}")));
    }
    wait_until("a held batch tried twice", || {
        sink_status(&gw.cfg)["held"]["attempts"].as_i64() >= Some(2)
    });
    let held = sink_status(&gw.cfg)["held"].clone();
    d.kill9();
    let before = r.requests().len();
    let last = &r.requests()[before - 1];
    assert_eq!(last["key"], held["idempotency_key"]);
    r.answer(&[], json!({"status": 200}));
    let _d = gw.launch();
    wait_delivered(&gw.cfg, 2);
    let after = &r.requests()[before];
    assert_eq!(after["key"], last["key"], "the held batch's key");
    assert_eq!(after["body"], last["body"], "the held batch's bytes");
    assert_every_entry_delivered_in_order(&gw.cfg, &r);
}

/// HTTPS with a CA of the test's own, as EPCIS with a bearer token: the
/// system's trust store refuses the receiver (counted, nothing
/// delivered); with `ca_file` added and a reload, every entry arrives,
/// each body an EPCIS document valid against GS1's schema, the token in
/// the `Authorization` header.
#[test]
fn tls_with_a_test_ca_delivers_epcis_documents_with_a_bearer_token() {
    let tmp = tempdir("scangate-sink-tls-");
    let (ca, cert, key) = make_test_ca(tmp.path(), "sink");
    let r = Receiver::start(tmp.path(), Some((cert, key)));
    let token = tmp.path().join("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    let (mut gw, listen) = gateway(
        "scangate-sink-tls-",
        &format!(
            "url = {:?}\nformat = \"epcis\"\nbearer_token_file = {:?}\n",
            r.url(),
            token
        ),
    );
    let checked: Outcome = cli_cfg(&gw.cfg, &["check-config"]).into();
    assert!(
        checked.stdout.contains(&format!(
            "sink inv: epcis to {}, 100 entries per POST, timeout 10000 ms, bearer token from {} (read), CA: the system's trust store",
            r.url(),
            token.display()
        )),
        "{checked}"
    );
    let d = gw.launch();
    let [mut vs] = gw.take_scanners();
    for i in 0..3 {
        scan(&mut vs, &dscsa(&format!("TLS{i:03}")));
    }
    wait_until("the receiver's certificate refused", || {
        metric(
            &listen,
            r#"scangate_sink_failures_total{sink="inv",kind="tls"}"#,
        ) >= 1.0
    });
    assert!(r.requests().is_empty(), "nothing reached the receiver");
    assert_eq!(sink_status(&gw.cfg)["delivered_through_seq"], 0);
    gw.edit_config(|text| {
        text.replace(
            "format = \"epcis\"\n",
            &format!("format = \"epcis\"\nca_file = {ca:?}\n"),
        )
    });
    sighup(&d);
    wait_delivered(&gw.cfg, 3);
    let validator = crate::epcis::Validator::new();
    for req in r.requests() {
        assert_eq!(req["authorization"], "Bearer s3cret-token");
        let doc: Value = serde_json::from_str(req["body"].as_str().unwrap()).unwrap();
        if let Some(e) = validator.errors(&doc) {
            panic!("not valid EPCIS 2.0: {e}\n{doc}");
        }
    }
    assert!(!d.log().contains("s3cret"), "the token is never logged");
    assert_every_entry_delivered_in_order(&gw.cfg, &r);
}

/// A CA file whose certificate rustls cannot read (PEM around bytes that
/// are not one) blocks the sink, kind `ca_file`, naming the file, and
/// nothing is sent — not retried every minute against a trust store with
/// no root. Control: the same sink with the real CA file, reloaded,
/// delivers everything.
#[test]
fn an_unreadable_ca_file_blocks_the_sink_and_names_the_file() {
    let tmp = tempdir("scangate-sink-badca-");
    let (ca, cert, key) = make_test_ca(tmp.path(), "sink");
    let r = Receiver::start(tmp.path(), Some((cert, key)));
    let bad = tmp.path().join("bad-ca.pem");
    std::fs::write(
        &bad,
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let (mut gw, listen) = gateway(
        "scangate-sink-badca-",
        &format!("url = {:?}\nca_file = {:?}\n", r.url(), bad),
    );
    let d = gw.launch();
    let [mut vs] = gw.take_scanners();
    scan(&mut vs, &dscsa("BADCA000"));
    wait_until("the sink blocked by its CA file", || {
        sink_status(&gw.cfg)["blocked"] == true
    });
    let sink = sink_status(&gw.cfg);
    assert_eq!(sink["held"]["last_kind"], "ca_file", "{sink}");
    let error = sink["held"]["last_error"].as_str().unwrap();
    assert!(
        error.contains(bad.to_str().unwrap()) && error.contains("ca_file"),
        "{error}"
    );
    assert!(r.requests().is_empty(), "nothing sent");
    wait_until("the blocked gauge", || {
        metric(&listen, r#"scangate_sink_blocked{sink="inv"}"#) == 1.0
    });
    gw.edit_config(|text| text.replace(bad.to_str().unwrap(), ca.to_str().unwrap()));
    sighup(&d);
    wait_delivered(&gw.cfg, 1);
    assert_eq!(sink_status(&gw.cfg)["blocked"], false);
    assert_every_entry_delivered_in_order(&gw.cfg, &r);
}

/// With a facility store, each gateway pushes its own ledger: the scans
/// it committed, from its own database (`ledger export --local`).
#[test]
fn with_a_facility_store_a_gateway_pushes_its_own_ledger() {
    let tmp = tempdir("scangate-sink-facility-");
    let r = Receiver::start(tmp.path(), None);
    let redis = RedisServer::start_temp(&[]);
    let mut gw = Gateway::builder("scangate-sink-facility-")
        .pty(ScannerSpec::named("counter-1").ack())
        .config(&format!("[[sink]]\nname = \"inv\"\nurl = {:?}\n", r.url()))
        .redis(&redis)
        .build();
    let _d = gw.launch();
    let [mut vs] = gw.take_scanners();
    for i in 0..3 {
        scan(&mut vs, &dscsa(&format!("FACILITY{i:03}")));
    }
    wait_until("the sink to deliver the gateway's 3 commits", || {
        sink_status(&gw.cfg)["delivered_through_seq"] == 3
    });
    let out: Outcome = cli_cfg(&gw.cfg, &["ledger", "export", "--local"]).into();
    let local: Vec<String> = out
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["scan_uuid"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(local.len(), 3, "{out}");
    let sent: Vec<String> = r
        .requests()
        .iter()
        .filter(|q| q["status"] == 200)
        .flat_map(scans_of)
        .collect();
    assert_eq!(
        sent, local,
        "the gateway's own entries, in its ledger order"
    );
}
