//! Following the embedded ledger with a durable cursor
//! (`ledger export --follow --consumer NAME`). The real binary follows a
//! real daemon's database while it writes: killed with SIGKILL again and
//! again mid-stream, it still prints every entry at least once and in
//! order; two consumers keep their own cursors, shown in `status`, the
//! metrics and `ledger consumers list`; a prune keeps what a consumer
//! owes unless it is past retention (libfaketime moves the prune's clock).

use crate::util::*;
use scangate::pty::VirtualScanner;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;

/// Send `label` and wait for its ACK.
fn scan_acked(vs: &mut VirtualScanner, label: &str) {
    vs.send(&frame(label)).unwrap();
    assert_eq!(replies(vs, 1).0, [ACK], "{label}");
}

/// A running `ledger export --follow --consumer NAME`, its stdout read
/// line by line on a thread (so what it wrote before it died is read to
/// the end).
struct Follower {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Follower {
    fn start(cfg: &Path, consumer: &str, extra: &[&str]) -> Follower {
        let mut child = command()
            .args(["ledger", "export", "--follow", "--consumer", consumer])
            .args(extra)
            .arg("--config")
            .arg(cfg)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting ledger export --follow");
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            // A line counts only with its newline: a follower killed
            // inside a page's write leaves half a line in the pipe, which
            // a reader drops (docs/integrator.md says so).
            let mut line = String::new();
            while matches!(out.read_line(&mut line), Ok(n) if n > 0) {
                let Some(whole) = line.strip_suffix('\n') else {
                    return;
                };
                if tx.send(whole.to_string()).is_err() {
                    return;
                }
                line.clear();
            }
        });
        Follower { child, lines }
    }

    /// The next line it prints (within the event timeout).
    fn next(&self) -> String {
        self.lines
            .recv_timeout(event_timeout())
            .expect("the follower printed no further line in time")
    }

    /// The next `n` lines.
    fn take(&self, n: usize) -> Vec<String> {
        (0..n).map(|_| self.next()).collect()
    }

    /// SIGKILL it; then everything it had written and was not read yet.
    fn kill9(mut self) -> Vec<String> {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.lines.iter().collect()
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `seq` of a JSON line.
fn seq(line: &str) -> i64 {
    let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    v["seq"]
        .as_i64()
        .unwrap_or_else(|| panic!("no seq: {line}"))
}

/// `ledger consumers list --json`, by name.
fn consumers(cfg: &Path) -> BTreeMap<String, Value> {
    let out: Outcome = cli_cfg(cfg, &["ledger", "consumers", "list", "--json"]).into();
    assert_eq!(out.code, Some(0), "{out}");
    let list: Vec<Value> = serde_json::from_str(out.stdout.trim()).unwrap();
    list.into_iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c))
        .collect()
}

/// Wait until consumer `name` has acknowledged through entry `seq`.
fn wait_acked(cfg: &Path, name: &str, seq: i64) {
    wait_until(
        &format!("consumer {name} to acknowledge entry {seq}"),
        || {
            consumers(cfg)
                .get(name)
                .is_some_and(|c| c["acked_seq"] == seq)
        },
    );
}

/// A follower SIGKILLed five times while the daemon commits a stream of
/// picks, and started again each time, prints every entry of the ledger
/// (each line exactly the entry `ledger export` prints), each run in
/// ledger order, each restart from at or before where the run before it
/// stopped: at-least-once, none missing.
#[test]
fn a_follower_killed_mid_stream_prints_every_entry_in_order_none_missing() {
    const PICKS: usize = 400;
    let mut gw = Gateway::builder("scangate-follow-kill-")
        .pty(ScannerSpec::named("counter-1").ack())
        .build();
    let _daemon = gw.launch();
    let [mut vs] = gw.take_scanners();
    let writer = std::thread::spawn(move || {
        for i in 0..PICKS {
            scan_acked(&mut vs, &dscsa(&format!("FOLLOW{i:04}")));
        }
        vs
    });
    let mut runs: Vec<Vec<String>> = Vec::new();
    let mut killed_while_writing = 0;
    for take in [7, 31, 64, 101, 150] {
        // A follower prints (and acknowledges) whole pages, so a killed
        // run may have acknowledged more than was read of it: this run
        // reads at most what is left after that cursor, which comes
        // however slow the writer (each of the picks is committed).
        let acked = consumers(&gw.cfg)
            .get("inventory")
            .map_or(0, |c| c["acked_seq"].as_i64().unwrap());
        let take = take.min(PICKS - usize::try_from(acked).unwrap());
        let f = Follower::start(&gw.cfg, "inventory", &[]);
        let mut run = f.take(take);
        killed_while_writing += usize::from(!writer.is_finished());
        run.extend(f.kill9());
        runs.push(run);
    }
    let _vs = writer.join().unwrap();
    wait_all_decided(&gw.cfg, PICKS as i64);
    let ledger: Vec<String> = {
        let out: Outcome = cli_cfg(&gw.cfg, &["ledger", "export"]).into();
        assert_eq!(out.code, Some(0), "{out}");
        out.stdout.lines().map(str::to_string).collect()
    };
    assert_eq!(ledger.len(), PICKS);
    let last = seq(ledger.last().unwrap());
    // The last run reads to the end of the ledger (unless a killed run
    // had acknowledged all of it: then it owes nothing).
    let mut _reading = None;
    if consumers(&gw.cfg)["inventory"]["acked_seq"] != last {
        let f = Follower::start(&gw.cfg, "inventory", &[]);
        let mut run = Vec::new();
        while run.last().is_none_or(|l: &String| seq(l) < last) {
            run.push(f.next());
        }
        runs.push(run);
        _reading = Some(f); // running until it has acknowledged them
    }

    let by_seq: BTreeMap<i64, &String> = ledger.iter().map(|l| (seq(l), l)).collect();
    let mut printed = BTreeMap::new();
    let mut reached = 0;
    for (i, run) in runs.iter().enumerate() {
        let seqs: Vec<i64> = run.iter().map(|l| seq(l)).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "run {i} out of ledger order: {seqs:?}"
        );
        let first = *seqs.first().expect("every run prints");
        assert!(
            first <= reached + 1,
            "run {i} starts at entry {first}, but the runs before printed only through {reached}: entries missed"
        );
        reached = reached.max(*seqs.last().unwrap());
        for line in run {
            assert_eq!(
                Some(&line),
                by_seq.get(&seq(line)),
                "not the ledger's entry"
            );
            *printed.entry(seq(line)).or_insert(0) += 1;
        }
    }
    let missing: Vec<&i64> = by_seq.keys().filter(|s| !printed.contains_key(s)).collect();
    assert!(missing.is_empty(), "entries never printed: {missing:?}");
    assert!(
        killed_while_writing > 0,
        "no follower was killed while the daemon was still committing"
    );
    let again = printed.values().filter(|n| **n > 1).count();
    eprintln!(
        "{} runs, {killed_while_writing} killed while committing; {again} entries printed more than once",
        runs.len()
    );
    wait_acked(&gw.cfg, "inventory", last);
}

/// Two consumers keep their own cursors: `ledger consumers list`,
/// `status` (text and JSON) and the metrics show each; a consumer started
/// again prints only what it has not acknowledged; `--format epcis`
/// follows one event a line; a consumer removed is gone, and a follower
/// running under its name stops.
#[test]
fn two_consumers_keep_their_own_cursors_shown_in_status_and_the_metrics() {
    let listen = format!("127.0.0.1:{}", free_port());
    let mut gw = Gateway::builder("scangate-follow-two-")
        .pty(ScannerSpec::named("counter-1").ack())
        .config(&format!("[metrics]\nlisten = {listen:?}\ninterval_s = 1\n"))
        .build();
    let _daemon = gw.launch();
    let [mut vs] = gw.take_scanners();
    for i in 0..5 {
        scan_acked(&mut vs, &dscsa(&format!("TWO{i:04}")));
    }
    let a = Follower::start(&gw.cfg, "a", &[]);
    assert_eq!(
        a.take(5).iter().map(|l| seq(l)).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    wait_acked(&gw.cfg, "a", 5);
    drop(a);
    for i in 5..8 {
        scan_acked(&mut vs, &dscsa(&format!("TWO{i:04}")));
    }
    let b = Follower::start(&gw.cfg, "b", &[]);
    assert_eq!(
        b.take(8).iter().map(|l| seq(l)).collect::<Vec<_>>(),
        (1..=8).collect::<Vec<_>>()
    );
    wait_acked(&gw.cfg, "b", 8);
    drop(b);

    // a: 5 acknowledged, 3 behind; b: all of them.
    let c = consumers(&gw.cfg);
    assert_eq!(
        (&c["a"]["acked_seq"], &c["a"]["behind"]),
        (&5.into(), &3.into()),
        "{c:?}"
    );
    assert_eq!(
        (&c["b"]["acked_seq"], &c["b"]["behind"]),
        (&8.into(), &0.into()),
        "{c:?}"
    );
    assert!(c["a"]["oldest_unacked_ms"].is_i64() && c["b"]["oldest_unacked_ms"].is_null());
    let status: Outcome = cli_cfg(&gw.cfg, &["status", "--json"]).into();
    let s: Value =
        serde_json::from_str(status.stdout.trim()).unwrap_or_else(|_| panic!("{status}"));
    let views = s["ledger_consumers"].as_array().unwrap();
    assert_eq!(views.len(), 2, "{s}");
    assert_eq!(
        (
            &views[0]["name"],
            &views[0]["acked_seq"],
            &views[0]["behind"]
        ),
        (&"a".into(), &5.into(), &3.into())
    );
    assert!(
        views[0]["oldest_unacked_age_s"].as_f64().unwrap() < 600.0,
        "{s}"
    );
    assert_eq!(
        (&views[1]["acked_seq"], &views[1]["oldest_unacked_age_s"]),
        (&8.into(), &Value::Null)
    );
    let text: Outcome = cli_cfg(&gw.cfg, &["status"]).into();
    assert!(
        text.stdout
            .contains("ledger consumer a: acknowledged through entry 5, 3 entries after it")
            && text
                .stdout
                .contains("ledger consumer b: acknowledged through entry 8, all acknowledged"),
        "{text}"
    );
    let want = [
        "scangate_ledger_consumer_acked_seq{consumer=\"a\"} 5",
        "scangate_ledger_consumer_behind_entries{consumer=\"a\"} 3",
        "scangate_ledger_consumer_acked_seq{consumer=\"b\"} 8",
        "scangate_ledger_consumer_oldest_unacked_age_seconds{consumer=\"b\"} 0",
    ];
    wait_until("the metrics to show both cursors", || {
        http_get(&listen, "/metrics").is_some_and(|(_, body)| want.iter().all(|w| body.contains(w)))
    });

    // a started again: only what it has not acknowledged.
    let a = Follower::start(&gw.cfg, "a", &[]);
    assert_eq!(
        a.take(3).iter().map(|l| seq(l)).collect::<Vec<_>>(),
        [6, 7, 8]
    );
    wait_acked(&gw.cfg, "a", 8);
    drop(a);

    // EPCIS, followed: one ObjectEvent a line with its @context, in ledger order.
    let scans: Vec<String> = ledger(&gw.cfg)
        .iter()
        .map(|e| e["scan_uuid"].as_str().unwrap().to_string())
        .collect();
    let e = Follower::start(&gw.cfg, "epcis", &["--format", "epcis"]);
    for scan in &scans {
        let event: Value = serde_json::from_str(&e.next()).unwrap();
        assert_eq!(event["type"], "ObjectEvent", "{event}");
        assert!(event["@context"].is_string(), "{event}");
        assert_eq!(event["eventID"], format!("urn:uuid:{scan}"));
    }
    wait_acked(&gw.cfg, "epcis", 8);

    // Removed while it follows: at its next look it stops, printing
    // nothing more.
    let mut follower = e;
    let removed: Outcome = cli_cfg(&gw.cfg, &["ledger", "consumers", "remove", "epcis"]).into();
    assert_eq!(removed.code, Some(0), "{removed}");
    assert!(!consumers(&gw.cfg).contains_key("epcis"));
    scan_acked(&mut vs, &dscsa("TWO0009"));
    let status = follower.child.wait().unwrap();
    assert_eq!(
        follower.lines.iter().count(),
        0,
        "nothing printed after the removal"
    );
    assert_eq!(
        status.code(),
        Some(4),
        "a follower whose consumer was removed stops"
    );
    let again: Outcome = cli_cfg(&gw.cfg, &["ledger", "consumers", "remove", "epcis"]).into();
    assert_eq!(again.code, Some(1), "{again}");
}

/// Following the gateway's own ledger needs a consumer name; `--group`
/// needs `[redis]`; a name must be a name.
#[test]
fn following_the_embedded_ledger_needs_a_consumer_name() {
    let dir = tempdir("scangate-follow-usage-");
    let cfg = write_config(dir.path(), &dir.path().join("state"), 3000, &[]);
    for (args, says) in [
        (&["--follow"][..], "--consumer NAME"),
        (&["--follow", "--group", "g"], "no [redis] section"),
        (&["--follow", "--consumer", "a b"], "is not a name"),
    ] {
        let out: Outcome = cli_cfg(&cfg, &[&["ledger", "export"][..], args].concat()).into();
        assert_eq!(out.code, Some(2), "{args:?}: {out}");
        assert!(out.stderr.contains(says), "{args:?}: {out}");
    }
}

/// A gateway with 6 picks (entries 1..=6) captured now, archived, and a
/// consumer `inventory` that has acknowledged through entry `acked`.
fn archived_with_consumer(
    prefix: &str,
    acked: i64,
) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    use scangate::ledger::cursor;
    let dir = tempdir(prefix);
    let state = dir.path().join("state");
    let cfg = write_config(dir.path(), &state, 3000, &[]);
    let mut store = scangate::store::Store::open(&state).unwrap();
    let mut gate = test_gate(&store);
    let t0 = chrono::Utc::now().timestamp_millis() - 60_000;
    let scans: Vec<_> = (0..6)
        .map(|i| {
            let time = capture_time(t0 + i * 5_000, "hold-boot", 1_000_000 + i * 5_000, true);
            scan(&dispense("counter-1"), dscsa(&format!("HOLD{i:04}")), time)
        })
        .collect();
    scangate::daemon::embedded::submit(&mut store, &mut gate, &scans).unwrap();
    let w = store.write().unwrap();
    cursor::register(&w, "inventory", t0).unwrap();
    if acked > 0 {
        let page = cursor::page(&w, "inventory", acked as usize)
            .unwrap()
            .unwrap();
        cursor::ack(&w, "inventory", page.entries.last().unwrap(), t0).unwrap();
    }
    w.commit().unwrap();
    drop(store);
    let archive = dir.path().join("a.scangate-archive");
    let until = (chrono::Utc::now() + chrono::Duration::minutes(1)).to_rfc3339();
    let out: Outcome = cli_cfg(
        &cfg,
        &[
            "audit",
            "export",
            "--until",
            &until,
            "--out",
            archive.to_str().unwrap(),
        ],
    )
    .into();
    assert_eq!(out.code, Some(0), "{out}");
    (dir, cfg, archive)
}

fn ledger_seqs(cfg: &Path) -> Vec<i64> {
    ledger(cfg)
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect()
}

/// `audit prune` 800 days on (past `keep_days` = 730, not past 730 + the
/// default `consumer_hold_days` 90) keeps the entries consumer
/// `inventory` has not acknowledged, and says so; removed, it holds
/// nothing. 830 days on, they are past retention: pruned, and the log and
/// the checkpoint record name the consumer and its entries.
#[test]
fn a_prune_keeps_what_a_consumer_owes_unless_past_retention() {
    // Acknowledged through entry 2: entries 3..=6 stay.
    let (_dir, cfg, archive) = archived_with_consumer("scangate-hold-", 2);
    let prune = ["audit", "prune", "--archive", archive.to_str().unwrap()];
    let held = cli_later(&cfg, 800, &prune);
    assert_eq!(held.code, Some(0), "{held}");
    assert!(
        held.stdout
            .contains("pruned records 1..=2 and 2 ledger entries"),
        "{held}"
    );
    assert_eq!(ledger_seqs(&cfg), [3, 4, 5, 6]);
    let again = cli_later(&cfg, 800, &prune);
    assert!(
        again
            .stdout
            .contains("which consumer inventory has not acknowledged (it has through entry 2)")
            && again.stdout.contains("ledger consumers remove inventory"),
        "{again}"
    );
    assert_eq!(ledger_seqs(&cfg), [3, 4, 5, 6]);
    // Removed: it holds nothing any more (the control).
    let removed: Outcome = cli_cfg(&cfg, &["ledger", "consumers", "remove", "inventory"]).into();
    assert_eq!(removed.code, Some(0), "{removed}");
    let all = cli_later(&cfg, 800, &prune);
    assert!(all.stdout.contains("and 4 ledger entries"), "{all}");
    assert!(ledger_seqs(&cfg).is_empty());
    assert_eq!(
        cli_later(
            &cfg,
            800,
            &["audit", "verify", "--archive", archive.to_str().unwrap()]
        )
        .code,
        Some(0)
    );

    // Past retention: 830 days > 730 + 90. Nothing acknowledged.
    let (_dir, cfg, archive) = archived_with_consumer("scangate-hold-past-", 0);
    let prune = ["audit", "prune", "--archive", archive.to_str().unwrap()];
    let held = cli_later(&cfg, 800, &prune);
    assert!(
        held.stdout.contains("nothing pruned") && held.stdout.contains("consumer inventory"),
        "{held}"
    );
    assert_eq!(ledger_seqs(&cfg).len(), 6);
    let past = cli_later(&cfg, 830, &prune);
    assert_eq!(past.code, Some(0), "{past}");
    assert!(
        past.stdout
            .contains("6 of those entries (1..=6) consumer inventory had not acknowledged"),
        "{past}"
    );
    assert!(
        past.stderr.contains("WARN")
            && past.stderr.contains(
                "pruned 6 ledger entries (1..=6) that consumer \"inventory\" had not acknowledged"
            ),
        "the log says so: {past}"
    );
    assert!(ledger_seqs(&cfg).is_empty());
    let state = cfg.parent().unwrap().join("state");
    let checkpoint: String = open_db(&state)
        .query_row(
            "SELECT record FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let checkpoint: Value = serde_json::from_str(&checkpoint).unwrap();
    assert_eq!(
        checkpoint["pruned"]["unacknowledged"],
        serde_json::json!([{"consumer": "inventory", "entries": 6, "first_seq": 1, "through_seq": 6, "held_days": 820}]),
        "{checkpoint}"
    );
    assert!(
        checkpoint["reason"]
            .as_str()
            .unwrap()
            .contains("consumer inventory had not acknowledged")
    );
    assert_eq!(
        cli_later(
            &cfg,
            830,
            &["audit", "verify", "--archive", archive.to_str().unwrap()]
        )
        .code,
        Some(0)
    );
}

/// With `[redis]`, `--local` reads and follows the gateway's own ledger
/// (its commits, with their `seq`), while `--follow` without `--group`
/// or `--local` is refused, naming both.
#[test]
fn with_a_facility_redis_local_follows_the_gateways_own_ledger() {
    let (_root, redis, mut g) = one_gateway();
    for i in 0..3 {
        g.send(&dscsa(&format!("LOCAL{i:04}")));
    }
    assert_settled(&g, &redis, 3, 0);
    let out: Outcome = cli_cfg(&g.cfg, &["ledger", "export", "--local"]).into();
    assert_eq!(out.code, Some(0), "{out}");
    let local: Vec<String> = out.stdout.lines().map(str::to_string).collect();
    assert_eq!(local.iter().map(|l| seq(l)).collect::<Vec<_>>(), [1, 2, 3]);
    let f = Follower::start(&g.cfg, "inv", &["--local"]);
    assert_eq!(f.take(3), local);
    wait_acked(&g.cfg, "inv", 3);
    let refused: Outcome = cli_cfg(
        &g.cfg,
        &["ledger", "export", "--follow", "--consumer", "inv"],
    )
    .into();
    assert_eq!(refused.code, Some(2), "{refused}");
    assert!(
        refused.stderr.contains("--group NAME") && refused.stderr.contains("--local"),
        "{refused}"
    );
}
