//! `scangate run` with a facility Redis (`[redis]`): processes of the real
//! binary, PTYs as scanners, and redis-server processes each test starts on
//! a free port and stops.

use crate::util::*;
use scangate::pty::VirtualScanner;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const WINDOW_MS: u64 = 3000;

/// A gateway: its own state dir and PTY scanner (by default `roaming`,
/// declared `shared`: one scanner heard by every gateway), pointed at
/// `redis`.
pub(crate) struct Gateway {
    pub(crate) cfg: PathBuf,
    pub(crate) scanner: VirtualScanner,
    daemon: Option<Daemon>,
    log: PathBuf,
}

impl Gateway {
    pub(crate) fn new(root: &Path, name: &str, redis: &RedisServer) -> Gateway {
        Gateway::with_scanner(root, name, redis, "roaming", true)
    }

    /// A gateway whose scanner is `scanner`, declared `shared` or not.
    fn with_scanner(
        root: &Path,
        name: &str,
        redis: &RedisServer,
        scanner_name: &str,
        shared: bool,
    ) -> Gateway {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let scanner = VirtualScanner::new().unwrap();
        let spec = ScannerSpec::new(scanner_name, scanner.path())
            .ack()
            .with(&format!("shared = {shared}"));
        let cfg = write_config(&dir, &dir.join("state"), WINDOW_MS, &[spec]);
        let text = std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("id = \"test-gw\"", &format!("id = {name:?}"));
        std::fs::write(&cfg, text).unwrap();
        append_redis(&cfg, redis);
        Gateway {
            cfg,
            scanner,
            daemon: None,
            log: dir.join("run.log"),
        }
    }

    pub(crate) fn start(&mut self) {
        self.start_with_env(&[]);
    }

    /// [`Gateway::start`], with these environment variables set too.
    fn start_with_env(&mut self, env: &[(&str, &str)]) {
        let mut d = Daemon::start_with_env(&self.cfg, &self.log, env);
        d.wait_open(&[self.scanner.path()]);
        self.daemon = Some(d);
    }

    pub(crate) fn send(&mut self, label: &str) {
        self.scanner.send(format!("{label}\r").as_bytes()).unwrap();
    }

    /// The running daemon.
    pub(crate) fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect("running")
    }

    /// Field `field` of the gateway's `outbox status`.
    pub(crate) fn count(&self, field: &str) -> i64 {
        count(&outbox_status(&self.cfg), field)
    }

    /// Rewrite the gateway's config file with `edit`.
    pub(crate) fn edit_config(&self, edit: impl FnOnce(String) -> String) {
        let text = std::fs::read_to_string(&self.cfg).unwrap();
        std::fs::write(&self.cfg, edit(text)).unwrap();
    }

    pub(crate) fn stop(&mut self) {
        let mut d = self.daemon.take().expect("running");
        let st = d.terminate();
        assert!(st.success(), "scangate run exited {st}\n{}", d.log_digest());
    }
}

/// A temporary directory for a test's gateways and a redis-server of the
/// test's own in it, started with `extra` arguments.
fn facility(extra: &[&str]) -> (tempfile::TempDir, RedisServer) {
    let root = tempdir("scangate-fac-");
    let redis = RedisServer::start(&root.path().join("redis"), extra);
    (root, redis)
}

/// A redis-server of the test's own and one started gateway, `gw-a`, using
/// it (the temporary directory holds both).
fn one_gateway() -> (tempfile::TempDir, RedisServer, Gateway) {
    let (root, redis) = facility(&[]);
    let mut g = Gateway::new(root.path(), "gw-a", &redis);
    g.start();
    (root, redis, g)
}

/// Read ACK/NAK bytes from the scanner side until `n` have arrived.
pub(crate) fn read_acks(scanner: &mut VirtualScanner, n: usize) -> Vec<u8> {
    let mut got = Vec::new();
    wait_until(&format!("{n} ACK/NAK bytes at the scanner"), || {
        got.extend(
            scanner
                .read_reply(std::time::Duration::from_millis(50))
                .unwrap(),
        );
        got.len() >= n
    });
    got
}

/// The facility ledger in `redis` holds exactly one entry for each of
/// `picks` physical picks (entries grouped by content key).
/// Wait until `committed + suppressed` scans are decided, with exactly
/// those counts, and one entry per commit in `redis`'s ledger.
fn assert_settled(g: &Gateway, redis: &RedisServer, committed: i64, suppressed: i64) {
    let st = wait_all_decided(&g.cfg, committed + suppressed);
    assert_eq!(
        (count(&st, "committed"), count(&st, "suppressed")),
        (committed, suppressed),
        "{st}"
    );
    assert_eq!(redis.ledger("test-pharmacy").len(), committed as usize);
}

pub(crate) fn assert_each_pick_once(redis: &RedisServer, picks: usize) {
    let ledger = redis.ledger("test-pharmacy");
    let mut per_pick: HashMap<&str, usize> = HashMap::new();
    for (_, key) in &ledger {
        *per_pick.entry(key).or_default() += 1;
    }
    assert_eq!(per_pick.len(), picks, "{ledger:?}");
    assert!(
        per_pick.values().all(|&n| n == 1),
        "a pick was committed twice: {per_pick:?}"
    );
}

/// A roaming scanner's `picks` (labels SN000…): each transmission reaches
/// both gateways, and pick `i` double-fires when `double_fire(i)` — on
/// gateway b if `twice_on_b`, else on a.
fn roam(
    a: &mut Gateway,
    b: &mut Gateway,
    picks: usize,
    twice_on_b: bool,
    double_fire: impl Fn(usize) -> bool,
) {
    for i in 0..picks {
        let label = dscsa(&format!("SN{i:03}"));
        a.send(&label);
        b.send(&label);
        if double_fire(i) {
            if twice_on_b {
                b.send(&label)
            } else {
                a.send(&label)
            }
        }
    }
}

#[test]
fn two_gateways_one_roaming_scanner_one_ledger_entry_per_pick() {
    let (root, redis) = facility(&[]);
    let mut a = Gateway::new(root.path(), "gw-a", &redis);
    let mut b = Gateway::new(root.path(), "gw-b", &redis);
    a.start();
    b.start();
    // 12 picks; each transmission reaches both gateways (the scanner roams
    // between their base stations), plus double-fires on one of them.
    roam(&mut a, &mut b, 12, false, |i| i % 3 == 0);
    wait_all_decided(&a.cfg, 16);
    wait_all_decided(&b.cfg, 12);
    assert_each_pick_once(&redis, 12);
    // Each gateway's own trail explains its decisions and verifies.
    let committed_a = a.count("committed");
    let committed_b = b.count("committed");
    assert_eq!(committed_a + committed_b, 12);
    for g in [&a, &b] {
        audit_verify(&g.cfg);
    }
    // Each gateway's trace of an echo it suppressed explains it, also when
    // the commit it names is the other gateway's: every transmission of
    // the pick this gateway read, and one ledger entry.
    let mut foreign_twins = 0;
    for (g, other) in [(&a, &b), (&b, &a)] {
        let db = open_db(&g.cfg.parent().unwrap().join("state"));
        let other_db = open_db(&other.cfg.parent().unwrap().join("state"));
        let echoes: Vec<(String, String, String)> = db
            .prepare(
                "SELECT scan_uuid, twin_uuid, content_key FROM scans WHERE state = 'suppressed'",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (uuid, twin, key) in echoes {
            let here: i64 = db
                .query_row(
                    "SELECT count(*) FROM scans WHERE content_key = ?1",
                    [&key],
                    |r| r.get(0),
                )
                .unwrap();
            let twin_elsewhere: bool = other_db
                .query_row(
                    "SELECT count(*) = 1 FROM scans WHERE scan_uuid = ?1 AND state = 'committed'",
                    [&twin],
                    |r| r.get(0),
                )
                .unwrap();
            foreign_twins += usize::from(twin_elsewhere);
            let out: Outcome = cli_cfg(&g.cfg, &["audit", "trace", &uuid]).into();
            assert_eq!(out.code, Some(0), "{out}");
            assert!(
                out.stdout
                    .contains(&format!("{here} transmission(s), 1 ledger entry"))
                    && out.stdout.contains(&format!("echo suppressed  {uuid}")),
                "{out}"
            );
            if twin_elsewhere {
                assert!(
                    out.stdout.contains(&format!(
                        "committed by another gateway of the facility  {twin}"
                    )),
                    "{out}"
                );
            }
        }
    }
    assert!(
        foreign_twins > 0,
        "no echo named the other gateway's commit"
    );
    // With [redis], `ledger export` reads the facility stream: the same 12
    // entries from either gateway, with the ledger entry's fields.
    for g in [&a, &b] {
        let entries = crate::util::ledger(&g.cfg);
        assert_eq!(entries.len(), 12);
        let e = &entries[0];
        for field in LEDGER_FIELDS {
            assert!(e.get(field).is_some(), "{field} missing in {e}");
        }
        assert_eq!(e["quantity"], 1);
        assert_eq!(e["scanner"], "roaming");
        assert_eq!(e["ndc10"], "0777310502");
    }
    a.stop();
    b.stop();
}

#[test]
fn redis_killed_mid_stream_and_restarted_with_aof_loses_and_doubles_nothing() {
    let (root, mut redis) = facility(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut g = Gateway::new(root.path(), "gw-a", &redis);
    g.start();
    for i in 0..10 {
        g.send(&dscsa(&format!("SN{i:03}")));
    }
    wait_all_decided(&g.cfg, 10);
    assert_eq!(read_acks(&mut g.scanner, 10), vec![ACK; 10]);
    redis.kill9();
    // The counter keeps working while Redis is down: read, stored, ACKed.
    for i in 10..20 {
        g.send(&dscsa(&format!("SN{i:03}")));
        if i % 2 == 0 {
            g.send(&dscsa(&format!("SN{i:03}"))); // double-fire
        }
    }
    wait_until("the outage scans to be stored as unresolved", || {
        g.count("unresolved") == 15
    });
    // Each retry says how many scans wait and how old the oldest is.
    wait_until("the backlog in the log", || {
        g.daemon()
            .log()
            .contains("15 scans wait in the outbox, the oldest captured")
    });
    // Every outage scan was ACKed while Redis was still down.
    assert_eq!(read_acks(&mut g.scanner, 15), vec![ACK; 15]);
    redis.restart();
    let st = wait_all_decided(&g.cfg, 25);
    assert_eq!(count(&st, "committed"), 20, "{st}");
    assert_eq!(count(&st, "suppressed"), 5, "{st}");
    assert_each_pick_once(&redis, 20);
    audit_verify(&g.cfg);
    g.stop();
}

#[test]
fn two_gateways_buffer_a_roaming_scanners_picks_through_an_outage_and_the_replay_commits_each_once()
{
    let (root, mut redis) = facility(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut a = Gateway::new(root.path(), "gw-a", &redis);
    let mut b = Gateway::new(root.path(), "gw-b", &redis);
    a.start();
    b.start();
    redis.kill9();
    // While Redis is down, every transmission reaches both gateways, and
    // gateway b's trigger double-fires on every other pick. Neither gateway
    // can know what the other did: all of it waits.
    roam(&mut a, &mut b, 8, true, |i| i % 2 == 0);
    wait_until("both backlogs stored as unresolved", || {
        a.count("unresolved") == 8 && b.count("unresolved") == 12
    });
    redis.restart();
    let st_a = wait_all_decided(&a.cfg, 8);
    let st_b = wait_all_decided(&b.cfg, 12);
    assert_each_pick_once(&redis, 8);
    assert_eq!(
        count(&st_a, "committed") + count(&st_b, "committed"),
        8,
        "{st_a}\n{st_b}"
    );
    assert_eq!(
        count(&st_a, "suppressed") + count(&st_b, "suppressed"),
        12,
        "{st_a}\n{st_b}"
    );
    for g in [&a, &b] {
        audit_verify(&g.cfg);
    }
    a.stop();
    b.stop();
}

#[test]
fn redis_restarted_empty_still_never_recommits_this_gateways_picks() {
    let (root, mut redis) = facility(&[]);
    let mut g = Gateway::new(root.path(), "gw-a", &redis);
    g.start();
    let label = dscsa("SN001");
    g.send(&label);
    wait_all_decided(&g.cfg, 1);
    redis.restart(); // no persistence: it comes back empty
    assert!(redis.ledger("test-pharmacy").is_empty());
    g.send(&label); // an echo within the window
    let st = wait_all_decided(&g.cfg, 2);
    assert_eq!(count(&st, "committed"), 1, "{st}");
    assert_eq!(count(&st, "suppressed"), 1, "{st}");
    assert!(
        redis.ledger("test-pharmacy").is_empty(),
        "the echo reached the ledger"
    );
    g.stop();
}

#[test]
fn an_evicting_redis_is_refused_at_start_up() {
    let (root, redis) = facility(&["--maxmemory-policy", "allkeys-lru"]);
    let g = Gateway::new(root.path(), "gw-a", &redis);
    let out: Outcome = cli_cfg(&g.cfg, &["run"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("noeviction"), "{out}");
    assert!(out.stderr.contains(&redis.port.to_string()), "{out}");
}

/// A Redis ACL user with exactly the documented grants runs a gateway:
/// claims (and the commands the claim script runs), the start-up checks,
/// `ledger export`. A user lacking one of them is refused at start with
/// exit 2, naming what was refused and the grants to give.
#[test]
fn an_acl_user_with_the_documented_grants_runs_a_gateway_and_one_without_is_refused() {
    let (root, redis) = facility(&[]);
    let grants = scangate::facility::ACL_GRANTS;
    let mut c = redis.connection();
    for (user, grants) in [
        ("scangate", grants.to_string()),
        ("partial", grants.replace(" +config|get", "")),
    ] {
        let mut acl = redis::cmd("ACL");
        acl.arg("SETUSER").arg(user).arg("on").arg(">pw-gw");
        for g in grants.split_whitespace() {
            acl.arg(g);
        }
        let _: () = acl.query(&mut c).expect("ACL SETUSER");
    }
    let password = root.path().join("redis-password");
    std::fs::write(&password, "pw-gw\n").unwrap();
    let mut g = Gateway::new(root.path(), "gw-a", &redis);
    let as_user = |g: &Gateway, user: &str| {
        g.edit_config(|text| {
            let text = match text.find("\nusername = ") {
                Some(at) => text[..at].to_string(),
                None => text,
            };
            format!("{text}\nusername = {user:?}\npassword_file = {password:?}\n")
        });
    };
    as_user(&g, "scangate");
    g.start();
    g.send(&dscsa("SN001"));
    g.send(&dscsa("SN001")); // double-fire
    g.send(&dscsa("SN002"));
    assert_eq!(read_acks(&mut g.scanner, 3), [ACK; 3]);
    assert_settled(&g, &redis, 2, 1);
    let export: Outcome = cli_cfg(&g.cfg, &["ledger", "export"]).into();
    assert_eq!(export.code, Some(0), "{export}");
    assert_eq!(export.stdout.lines().count(), 2, "{export}");
    // The grants cover trimming the ledger stream too (its own script).
    wait_until("the ledger stream's first trim recorded", || {
        let st: Outcome = cli_cfg(&g.cfg, &["status", "--json"]).into();
        serde_json::from_str::<serde_json::Value>(st.stdout.trim())
            .is_ok_and(|v| v["facility"]["ledger_stream"]["at_ms"].is_i64())
    });
    let log = g.daemon().log();
    assert!(
        !log.contains("trimming the facility ledger stream"),
        "{log}"
    );
    g.stop();

    as_user(&g, "partial");
    let out: Outcome = cli_cfg(&g.cfg, &["run"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr
            .contains("the ACL user \"partial\" may not run what scangate needs")
            && out.stderr.contains("config|get")
            && out.stderr.contains(grants),
        "{out}"
    );
}

#[test]
fn gateways_of_one_facility_must_agree_on_window_and_retention() {
    let (root, redis) = facility(&[]);
    // Gateway a's window is ten minutes, so a re-read below is an echo
    // however slowly the test runs.
    let wide = 600_000;
    let with_window = |g: &Gateway, ms: u64| {
        g.edit_config(|text| {
            text.replace(
                &format!("window_ms = {WINDOW_MS}"),
                &format!("window_ms = {ms}"),
            )
        });
    };
    let mut a = Gateway::new(root.path(), "gw-a", &redis);
    with_window(&a, wide);
    a.start();
    a.send(&dscsa("SN001"));
    assert_settled(&a, &redis, 1, 0);
    let settings = "scangate:{test-pharmacy}:settings";
    let mut c = redis.connection();
    let agreed: HashMap<String, String> =
        redis::cmd("HGETALL").arg(settings).query(&mut c).unwrap();
    assert_eq!(agreed["window_ms"], wide.to_string(), "{agreed:?}");

    // A second gateway configured with another window is refused at start.
    let b = Gateway::new(root.path(), "gw-b", &redis);
    with_window(&b, 1000);
    let out: Outcome = cli_cfg(&b.cfg, &["run"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains("window_ms = 1000") && out.stderr.contains(settings),
        "{out}"
    );

    // The facility's settings change under the running gateway a (another
    // one reset them): its claims are refused, and it suppresses no echo by
    // its own window either, since that is no longer the facility's rule.
    // Its scans wait, acknowledged and unresolved, and are decided once,
    // by the facility, when the settings agree again.
    let set_window = |c: &mut redis::Connection, ms: u64| {
        let _: () = redis::cmd("HSET")
            .arg(settings)
            .arg("window_ms")
            .arg(ms)
            .query(c)
            .unwrap();
    };
    set_window(&mut c, 1000);
    // A re-read of a's own commit alone needs no claim: a asks first.
    a.send(&dscsa("SN001"));
    wait_until("the re-read to be unresolved", || {
        a.count("unresolved") == 1
    });
    a.send(&dscsa("SN002"));
    a.send(&dscsa("SN002")); // double-fire
    a.send(&dscsa("SN001")); // another re-read of a's own commit
    wait_until("the scans to be unresolved", || a.count("unresolved") == 4);
    let d = a.daemon();
    wait_until("the refusal in the log", || {
        d.log().contains("window_ms = 1000")
    });
    assert_eq!(redis.ledger("test-pharmacy").len(), 1);
    set_window(&mut c, wide);
    assert_settled(&a, &redis, 2, 3);
    a.stop();
}

#[test]
fn redis_paused_longer_than_the_command_timeout_then_resumed() {
    use nix::sys::signal::Signal;
    let (_root, redis, mut g) = one_gateway();
    g.send(&dscsa("SN000"));
    wait_all_decided(&g.cfg, 1);
    redis.signal(Signal::SIGSTOP);
    for i in 1..6 {
        g.send(&dscsa(&format!("SN{i:03}")));
    }
    g.send(&dscsa("SN005")); // an echo, also while paused
    wait_until("the paused claims to time out into unresolved", || {
        g.count("unresolved") == 6
    });
    redis.signal(Signal::SIGCONT);
    let st = wait_all_decided(&g.cfg, 7);
    assert_eq!(
        (count(&st, "committed"), count(&st, "suppressed")),
        (6, 1),
        "{st}"
    );
    assert_each_pick_once(&redis, 6);
    g.stop();
}

/// A TCP proxy between a gateway and Redis that can swallow Redis's replies
/// (the request still reaches Redis and runs).
struct Proxy {
    port: u16,
    drop_replies: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Proxy {
    /// Swallows every reply while `drop_replies` is set.
    fn start(upstream: u16) -> Proxy {
        Proxy::swallowing(upstream, false)
    }

    /// With `claims_only`: swallows, while `drop_replies` is set, only the
    /// replies on connections that have sent a claim (`EVALSHA`), except
    /// the first connection — the daemon's start-up check, which its live
    /// lane keeps. A later connection (the replay lane's) still connects
    /// and checks the server, then never hears back about its claims.
    fn swallowing(upstream: u16, claims_only: bool) -> Proxy {
        use std::io::{Read, Write};
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let drop_replies = Arc::new(AtomicBool::new(false));
        let flag = drop_replies.clone();
        std::thread::spawn(move || {
            for (index, client) in listener.incoming().enumerate() {
                let Ok(client) = client else { return };
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let spared = claims_only && index == 0;
                // Whether this connection's replies may be swallowed.
                let exposed = Arc::new(AtomicBool::new(!claims_only));
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let claimed = exposed.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 8192];
                    while let Ok(n) = c_in.read(&mut buf) {
                        if !spared && buf[..n].windows(7).any(|w| w == b"EVALSHA") {
                            claimed.store(true, Ordering::SeqCst);
                        }
                        if n == 0 || s_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = s_out.shutdown(std::net::Shutdown::Both);
                });
                let (mut s_in, mut c_out) = (server, client);
                let flag = flag.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 8192];
                    while let Ok(n) = s_in.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let swallow = flag.load(Ordering::SeqCst) && exposed.load(Ordering::SeqCst);
                        if !swallow && c_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = c_out.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Proxy { port, drop_replies }
    }

    /// `g`'s config with its Redis URL pointing at this proxy.
    fn route(&self, g: &Gateway, redis: &RedisServer) {
        g.edit_config(|text| {
            text.replace(&redis.url(), &format!("redis://127.0.0.1:{}/", self.port))
        });
    }
}

/// A started gateway that reaches `redis` through a [`Proxy`] that already
/// swallows every reply — once its live lane's first pass has probed,
/// read the conflicts stream and trimmed (its WARN that no group reads
/// the stream comes last): one of those failing would reconnect, through
/// the proxy, and fail, so no claim would be sent at all.
fn started_behind_a_reply_eating_proxy(root: &Path, redis: &RedisServer) -> (Proxy, Gateway) {
    let proxy = Proxy::start(redis.port);
    let mut g = Gateway::new(root, "gw-a", redis);
    proxy.route(&g, redis);
    g.start();
    let d = g.daemon();
    wait_until("the live lane's first trim", || {
        d.log()
            .contains("no consumer group reads the facility ledger stream")
    });
    proxy
        .drop_replies
        .store(true, std::sync::atomic::Ordering::SeqCst);
    (proxy, g)
}

/// `CONFIG SET maxmemory` on the test's own server.
fn set_maxmemory(redis: &RedisServer, bytes: &str) {
    let mut c = redis.connection();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(bytes)
        .query(&mut c)
        .expect("CONFIG SET maxmemory");
}

#[test]
fn a_full_redis_refuses_claims_scans_wait_and_commit_once_when_it_has_room() {
    let (_root, redis, mut g) = one_gateway();
    // Full, with the eviction policy scangate requires (noeviction): Redis
    // refuses every write, so every claim script fails at its first write,
    // before it changed anything.
    set_maxmemory(&redis, "1");
    g.send(&dscsa("SN001"));
    g.send(&dscsa("SN002"));
    g.send(&dscsa("SN001")); // double-fire
    wait_until("the scans to be unresolved", || g.count("unresolved") == 3);
    assert!(redis.ledger("test-pharmacy").is_empty());
    // One outage, retried with growing back-off: each failed retry logs the
    // backlog. A connection that opens is not the end of it (before, every
    // reconnect said "answers again", reset the back-off, and the gateway
    // retried every 100 ms for as long as Redis was full).
    let d = g.daemon();
    wait_until("two failed retries in the log", || {
        d.log().matches("3 scans wait in the outbox").count() >= 2
    });
    let log = d.log();
    assert!(
        log.contains("is full") && log.contains("raise `maxmemory`"),
        "the log should say Redis is full and what to do: {}",
        d.log_digest()
    );
    assert!(!log.contains("answers again"), "{}", d.log_digest());
    // `outbox status` says so too, without the logs.
    let status = |g: &Gateway| -> String {
        let out: Outcome = cli_cfg(&g.cfg, &["outbox", "status"]).into();
        assert_eq!(out.code, Some(0), "{out}");
        out.stdout
    };
    let st = status(&g);
    assert!(
        st.contains("facility store, as the claimer last saw it: NOT answering since")
            && st.contains("is full"),
        "{st}"
    );
    set_maxmemory(&redis, "0");
    assert_settled(&g, &redis, 2, 1);
    wait_until("status to show the store answering", || {
        status(&g).contains("facility store, as the claimer last saw it: answering since")
    });
    audit_verify(&g.cfg);
    let d = g.daemon();
    assert!(d.log().contains("answers again"), "{}", d.log_digest());
    g.stop();
}

/// Make gateway gw-a's verdict writes fail, as on a full disk (or let them
/// work again): a real trigger on the real file refuses audit records,
/// which only verdicts write. Admits still work.
fn refuse_verdicts(root: &Path, refuse: bool) {
    let c =
        rusqlite::Connection::open(root.join("gw-a").join("state").join("scangate.db")).unwrap();
    c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    c.execute_batch(if refuse {
        "CREATE TRIGGER verdicts_refused BEFORE INSERT ON audit
         BEGIN SELECT RAISE(ABORT, 'injected: disk full'); END;"
    } else {
        "DROP TRIGGER verdicts_refused"
    })
    .unwrap();
}

#[test]
fn verdicts_the_disk_refuses_are_retried_with_growing_back_off_then_written_once() {
    let (root, redis, mut g) = one_gateway();
    // The claimer's writes fail, as on a full disk; admits still work, so
    // scans are stored and ACKed.
    refuse_verdicts(root.path(), true);
    g.send(&dscsa("SN001"));
    g.send(&dscsa("SN001")); // double-fire
    assert_eq!(read_acks(&mut g.scanner, 2), [ACK, ACK]);
    // Claimed in Redis, but the verdicts cannot be written: retried with
    // growing back-off, not at full speed (which re-sent the claims and
    // logged an error as fast as the loop could go).
    let d = g.daemon();
    wait_until("the third retry, 400 ms after the second", || {
        d.log().contains("retrying in 400ms")
    });
    let failures = d.log().matches("writing verdicts failed").count();
    assert!(
        (3..10).contains(&failures),
        "{failures} failed writes logged by the time the back-off reached 400 ms: {}",
        d.log_digest()
    );
    let st = outbox_status(&g.cfg);
    assert_eq!(count(&st, "pending"), 2, "{st}");
    assert_eq!(redis.ledger("test-pharmacy").len(), 1);
    // A new scan during the back-off wakes the claimer early; the retry
    // must still come when the back-off ends, with no further kick.
    g.send(&dscsa("SN002"));
    assert_eq!(read_acks(&mut g.scanner, 1), [ACK]);
    // The disk has room again: the retried claims are recognised as this
    // gateway's own (same UUIDs), and each verdict is written once.
    refuse_verdicts(root.path(), false);
    assert_settled(&g, &redis, 2, 1);
    audit_verify(&g.cfg);
    g.stop();
}

/// CPU time (user + system) a process has used so far.
fn cpu_time(pid: u32) -> std::time::Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is in parentheses).
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    std::time::Duration::from_millis(ticks * 1000 / hz)
}

#[test]
fn a_backlog_longer_than_a_round_waits_out_the_local_back_off_without_spinning() {
    let (root, redis, mut g) = one_gateway();
    refuse_verdicts(root.path(), true);
    // More open scans than one round takes, so each pick says "more".
    for i in 0..70 {
        g.send(&dscsa(&format!("SN{i:03}")));
    }
    assert_eq!(read_acks(&mut g.scanner, 70), vec![ACK; 70]);
    let d = g.daemon();
    wait_until("the back-off to reach 1.6 s", || {
        d.log().contains("retrying in 1.6s")
    });
    // A kick during the back-off wakes the claimer; it must go back to
    // waiting, not pick and hold back round after round until it ends.
    let before = cpu_time(d.pid());
    g.send(&dscsa("SN070"));
    assert_eq!(read_acks(&mut g.scanner, 1), [ACK]);
    // A window to measure over, not a wait for an event: what is checked is
    // that nothing happens in it (the back-off still has ~1.6 s to run).
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let used = cpu_time(g.daemon().pid()) - before;
    assert!(
        used < std::time::Duration::from_millis(400),
        "the daemon used {used:?} of CPU in 1 s of back-off (a spin uses a whole core)"
    );
    refuse_verdicts(root.path(), false);
    assert_settled(&g, &redis, 71, 0);
    g.stop();
}

#[test]
fn a_full_redis_and_a_failing_disk_together_are_one_outage_until_claims_are_answered() {
    let (root, redis, mut g) = one_gateway();
    // The disk fails first, so its back-off runs ahead of Redis's.
    refuse_verdicts(root.path(), true);
    g.send(&dscsa("SN001"));
    assert_eq!(read_acks(&mut g.scanner, 1), [ACK]);
    let d = g.daemon();
    wait_until("the local back-off to reach 400 ms", || {
        d.log().contains("retrying in 400ms")
    });
    // Then Redis fills up and a new scan's claim is refused (SN001's is
    // already decided there and needs no write). The claimer reconnects
    // while the local back-off still holds every round back. An open
    // connection is not an answer: the outage goes on.
    set_maxmemory(&redis, "1");
    g.send(&dscsa("SN002"));
    assert_eq!(read_acks(&mut g.scanner, 1), [ACK]);
    let d = g.daemon();
    wait_until("a reconnect after the refusal", || {
        let log = d.log();
        log.find("is full")
            .is_some_and(|at| log[at..].contains("facility Redis connected"))
    });
    assert!(!d.log().contains("answers again"), "{}", d.log_digest());
    set_maxmemory(&redis, "0");
    refuse_verdicts(root.path(), false);
    assert_settled(&g, &redis, 2, 0);
    let d = g.daemon();
    assert!(d.log().contains("answers again"), "{}", d.log_digest());
    g.stop();
}

#[test]
fn a_claim_whose_reply_was_lost_is_recognised_as_its_own_commit() {
    use std::sync::atomic::Ordering;
    let (root, redis) = facility(&[]);
    let (proxy, mut g) = started_behind_a_reply_eating_proxy(root.path(), &redis);
    g.send(&dscsa("SN001"));
    // The script ran on Redis (the ledger has the entry) but the gateway
    // never heard back: the scan is unresolved.
    wait_until("the claim to reach Redis", || {
        redis.ledger("test-pharmacy").len() == 1
    });
    wait_until("the scan to be unresolved", || g.count("unresolved") == 1);
    proxy.drop_replies.store(false, Ordering::SeqCst);
    let st = wait_all_decided(&g.cfg, 1);
    assert_eq!(
        count(&st, "committed"),
        1,
        "its own claim, not an echo: {st}"
    );
    assert_eq!(redis.ledger("test-pharmacy").len(), 1);
    g.stop();
}

/// `picks` picks (labels OLD0…) that an outage before the gateway's start
/// left waiting as unresolved in its outbox, 10 ms apart.
fn outage_backlog(g: &Gateway, picks: i64) {
    let state = g.cfg.parent().unwrap().join("state");
    let mut store = scangate::store::Store::open(&state).unwrap();
    let old: Vec<_> = (0..picks)
        .map(|i| read_at(&dscsa(&format!("OLD{i}")), (i - picks) * 10))
        .collect();
    store.admit("test-pharmacy", &old).unwrap();
    let mut gate = test_gate(&store);
    let now = scangate::capture::CaptureTime::now();
    while scangate::daemon::claimer::round(&mut store, &mut gate, None, "Redis is down", &now)
        .unwrap()
        .more
    {}
    assert_eq!(store.unresolved().unwrap(), picks);
}

/// A stop during the replay of a long backlog is heard between two rounds:
/// the gateway exits 0 promptly, leaving the rest waiting in the outbox,
/// and the next start replays it (before, the claimer ran on until the
/// whole backlog was decided — past any stop timeout).
#[test]
fn a_stop_during_a_long_replay_leaves_the_rest_waiting_for_the_next_start() {
    const BACKLOG: i64 = 20_000;
    let (root, redis) = facility(&[]);
    let mut g = Gateway::new(root.path(), "gw-a", &redis);
    outage_backlog(&g, BACKLOG);
    g.start();
    wait_until("the replay to begin", || g.count("committed") > 0);
    g.stop();
    let st = outbox_status(&g.cfg);
    let left = count(&st, "unresolved");
    assert!(left > 0, "the replay ran on past the stop: {st}");
    assert_eq!(count(&st, "committed") + left, BACKLOG, "{st}");
    audit_verify(&g.cfg);
    g.start();
    assert_settled(&g, &redis, BACKLOG, 0);
    g.stop();
}

/// The claimer's replay lane stuck on Redis (its claims run there, but it
/// never hears back) does not hold up the counter: new scans are claimed on
/// the live lane's own connection and decided while the backlog still
/// waits; once replies get through, each backlog scan is recognised as its
/// own commit. Only the replay lane's connection is stuck (the proxy lets
/// the first one, the live lane's, through).
#[test]
fn a_stuck_replay_does_not_hold_up_new_scans() {
    use std::sync::atomic::Ordering;
    let (root, redis) = facility(&[]);
    let proxy = Proxy::swallowing(redis.port, true);
    let mut g = Gateway::new(root.path(), "gw-a", &redis);
    proxy.route(&g, &redis);
    outage_backlog(&g, 3);
    proxy.drop_replies.store(true, Ordering::SeqCst);
    g.start();
    wait_until("the replay's claims to run on Redis", || {
        redis.ledger("test-pharmacy").len() == 3
    });
    g.send(&dscsa("NEW1"));
    g.send(&dscsa("NEW2"));
    assert_eq!(read_acks(&mut g.scanner, 2), [ACK, ACK]);
    wait_until("the new scans to be committed", || {
        g.count("committed") == 2
    });
    let st = outbox_status(&g.cfg);
    assert_eq!(count(&st, "unresolved"), 3, "the backlog still waits: {st}");
    proxy.drop_replies.store(false, Ordering::SeqCst);
    assert_settled(&g, &redis, 5, 0);
    g.stop();
}

#[test]
fn a_gateway_killed_between_its_claims_and_its_verdicts_recognises_them_after_restart() {
    use std::sync::atomic::Ordering;
    let (root, redis) = facility(&[]);
    let (proxy, mut g) = started_behind_a_reply_eating_proxy(root.path(), &redis);
    g.send(&dscsa("SN001"));
    g.send(&dscsa("SN002"));
    g.send(&dscsa("SN001")); // double-fire
    wait_until("a claim to run on Redis", || {
        !redis.ledger("test-pharmacy").is_empty()
    });
    // Killed while waiting for the answer: Redis has decided, this gateway
    // has not written a verdict.
    g.daemon.take().expect("running").kill9();
    let st = outbox_status(&g.cfg);
    assert_eq!(
        count(&st, "committed") + count(&st, "suppressed"),
        0,
        "{st}"
    );
    proxy.drop_replies.store(false, Ordering::SeqCst);
    g.start();
    let st = wait_all_decided(&g.cfg, 3);
    assert_eq!(
        count(&st, "committed"),
        2,
        "its own claims, not echoes: {st}"
    );
    assert_eq!(count(&st, "suppressed"), 1, "{st}");
    assert_eq!(redis.ledger("test-pharmacy").len(), 2);
    audit_verify(&g.cfg);
    g.stop();
}

#[test]
fn an_unreachable_redis_at_start_up_buffers_scans_until_it_comes_up() {
    let (root, mut redis) = facility(&[]);
    redis.kill9(); // nothing listens on its port now
    let mut g = Gateway::new(root.path(), "gw-a", &redis);
    g.start(); // not fatal: the gateway runs and buffers
    g.send(&dscsa("SN001"));
    g.send(&dscsa("SN002"));
    assert_eq!(read_acks(&mut g.scanner, 2), [ACK, ACK]);
    wait_until("the scans to wait as unresolved", || {
        g.count("unresolved") == 2
    });
    wait_until("the retries to report the backlog", || {
        g.daemon().log().contains("2 scans wait in the outbox")
    });
    let log = g.daemon().log();
    assert!(log.contains("facility Redis unavailable"), "{log}");
    assert!(
        log.contains(&redis.port.to_string()),
        "names the server: {log}"
    );
    redis.restart();
    assert_settled(&g, &redis, 2, 0);
    g.stop();
}

#[test]
fn min_replicas_ack_holds_claims_until_a_replica_confirms_them() {
    let (root, redis) = facility(&[]);
    let mut g = Gateway::new(root.path(), "gw-a", &redis);
    g.edit_config(|text| format!("{text}min_replicas_ack = 1\n"));
    g.start();
    g.send(&dscsa("SN001"));
    assert_eq!(read_acks(&mut g.scanner, 1), [ACK]);
    // No replica: the claim ran, but is not confirmed, so it is not final.
    wait_until("the scan to wait as unresolved", || {
        g.count("unresolved") == 1
    });
    wait_until("the reason in the log", || {
        g.daemon().log().contains("0 of 1 replicas confirmed")
    });
    // A replica comes up: the retried claim (same UUID) is confirmed.
    let port = redis.port.to_string();
    let _replica = RedisServer::start(
        &root.path().join("replica"),
        &["--replicaof", "127.0.0.1", &port],
    );
    // Committed, not suppressed: its own claim.
    assert_settled(&g, &redis, 1, 0);
    g.stop();
}

#[test]
fn a_read_only_replica_refuses_claims_until_promoted_and_the_log_says_so() {
    let (root, primary) = facility(&[]);
    let port = primary.port.to_string();
    let replica = RedisServer::start(
        &root.path().join("replica"),
        &["--replicaof", "127.0.0.1", &port],
    );
    // Configured with the replica's address (say, the old primary after a
    // failover demoted it).
    let mut g = Gateway::new(root.path(), "gw-a", &replica);
    g.start();
    g.send(&dscsa("SN001"));
    g.send(&dscsa("SN001")); // double-fire
    assert_eq!(read_acks(&mut g.scanner, 2), [ACK, ACK]);
    wait_until("the scans to wait as unresolved", || {
        g.count("unresolved") == 2
    });
    let d = g.daemon();
    wait_until("the refusal in the log", || {
        d.log()
            .contains("is a read-only replica: it refuses claims")
    });
    let log = d.log();
    assert!(
        log.contains("read-only replica of another server") && log.contains("at the primary"),
        "start-up should warn about the replica and say what to do: {}",
        d.log_digest()
    );
    // Promoted: the same claims go through, once.
    let mut c = replica.connection();
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut c)
        .expect("REPLICAOF NO ONE");
    assert_settled(&g, &replica, 1, 1);
    assert!(primary.ledger("test-pharmacy").is_empty());
    g.stop();
}

#[test]
fn ledger_export_from_an_unreachable_facility_redis_says_where_and_what_to_do() {
    let (root, redis) = facility(&[]);
    let g = Gateway::new(root.path(), "gw-a", &redis);
    let url = redis.url();
    drop(redis); // stopped: nothing listens on its port now
    let out: Outcome = cli_cfg(&g.cfg, &["ledger", "export"]).into();
    assert_eq!(out.code, Some(4), "runtime failure exit code: {out}");
    assert!(out.stdout.is_empty(), "{out}");
    assert!(
        out.stderr.contains(&url) && out.stderr.contains("reach that server"),
        "the error should name the server and what to do: {out}"
    );
    // Not the claimer's wording: an export retries nothing.
    assert!(!out.stderr.contains("retried"), "{out}");
}

/// Credentials Redis refuses stop `run` with exit 2 (not an outage
/// retried for ever), naming the server, the ACL user, what was refused
/// and where the password came from; the password never shows.
#[test]
fn refused_credentials_stop_run_with_exit_2_naming_the_user_and_the_password_file() {
    let (root, redis) = facility(&["--requirepass", "right-one"]);
    let g = Gateway::new(root.path(), "gw-a", &redis);
    let secret = root.path().join("redis-password");
    std::fs::write(&secret, "wrong-one\n").unwrap();
    let base = std::fs::read_to_string(&g.cfg).unwrap();
    let file = format!("password_file = {:?}\n", secret.to_str().unwrap());
    for (extra, user, refused) in [
        (String::new(), "default", "NOAUTH"),
        (file.clone(), "default", "WRONGPASS"),
        (
            format!("username = \"scangate\"\n{file}"),
            "scangate",
            "WRONGPASS",
        ),
    ] {
        std::fs::write(&g.cfg, format!("{base}{extra}")).unwrap();
        let out: Outcome = cli_cfg(&g.cfg, &["run"]).into();
        assert_eq!(out.code, Some(2), "{extra}: {out}");
        let server = format!("127.0.0.1:{}", redis.port);
        let acl_user = format!("ACL user {user:?}");
        for named in [&server, &acl_user, "[redis] password_file", refused] {
            assert!(
                out.stderr.contains(named),
                "{extra}: {named:?} is not named: {out}"
            );
        }
        if !extra.is_empty() {
            assert!(out.stderr.contains(secret.to_str().unwrap()), "{out}");
        }
        assert!(
            !out.stderr.contains("wrong-one"),
            "the password leaked: {out}"
        );
    }
}

/// A password refused after the gateway ran fine (its ACL user's password
/// changed): scans are ACKed and wait unresolved, the log has an ERROR
/// naming the user, `status` is degraded saying why, and they are claimed
/// once the password is accepted again.
#[test]
fn a_password_refused_while_running_keeps_scans_waiting_and_says_why() {
    let (root, redis) = facility(&[]);
    let mut c = redis.connection();
    let set_user = |c: &mut redis::Connection, password: &str| {
        let mut acl = redis::cmd("ACL");
        acl.arg("SETUSER")
            .arg("scangate")
            .arg("on")
            .arg("resetpass")
            .arg(format!(">{password}"));
        for g in scangate::facility::ACL_GRANTS.split_whitespace() {
            acl.arg(g);
        }
        let _: () = acl.query(c).expect("ACL SETUSER");
    };
    set_user(&mut c, "pw-gw");
    let password = root.path().join("redis-password");
    std::fs::write(&password, "pw-gw\n").unwrap();
    let mut g = Gateway::new(root.path(), "gw-a", &redis);
    g.edit_config(|text| format!("{text}username = \"scangate\"\npassword_file = {password:?}\n"));
    g.start();
    g.send(&dscsa("SN001"));
    assert_eq!(read_acks(&mut g.scanner, 1), [ACK]);
    wait_until("SN001 committed", || g.count("committed") == 1);

    set_user(&mut c, "changed");
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg("scangate")
        .query(&mut c)
        .expect("CLIENT KILL USER");
    g.send(&dscsa("SN002"));
    assert_eq!(
        read_acks(&mut g.scanner, 1),
        [ACK],
        "ACKed although Redis refuses us"
    );
    wait_until("the refusal logged as an ERROR naming the user", || {
        g.daemon().log().lines().any(|l| {
            l.contains("ERROR") && l.contains("refused the credentials of ACL user \"scangate\"")
        })
    });
    assert_eq!(g.count("unresolved"), 1);
    wait_until("status degraded, saying why", || {
        let out: Outcome = cli_cfg(&g.cfg, &["status", "--json"]).into();
        out.code == Some(1) && out.stdout.contains("refused the credentials")
    });

    set_user(&mut c, "pw-gw");
    wait_until(
        "SN002 committed once the password is accepted again",
        || g.count("committed") == 2,
    );
    assert!(
        !g.daemon().log().contains("pw-gw"),
        "the password leaked into the log"
    );
    g.stop();
}

#[test]
fn the_demo_runs_against_a_facility_redis() {
    let (_root, redis) = facility(&[]);
    let out: Outcome = cli(&["demo", "--redis", &redis.url()]).into();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("facility Redis"), "{out}");
    assert!(out.stdout.contains("exactly once"), "{out}");
    // The facility ledger holds the demo's picks.
    assert_eq!(redis.ledger("demo-pharmacy").len(), 9, "{out}");
}

#[test]
fn rediss_with_the_facility_ca_works_and_a_wrong_ca_is_a_clear_error() {
    let root = tempdir("scangate-fac-");
    let certs = root.path().join("certs");
    let (ca, crt, key) = make_test_ca(&certs, "facility");
    let (other_ca, _, _) = make_test_ca(&certs, "other");
    let redis = RedisServer::start_tls(&root.path().join("redis"), &ca, &crt, &key);

    let configure = |g: &Gateway, ca: &Path| {
        g.edit_config(|text| {
            let text = text.replace(&redis.url(), &redis.tls_url());
            format!("{text}ca_file = {:?}\n", ca.to_str().unwrap())
        });
    };
    let mut good = Gateway::new(root.path(), "gw-a", &redis);
    configure(&good, &ca);
    good.start();
    good.send(&dscsa("SN001"));
    good.send(&dscsa("SN001")); // double-fire
    let st = wait_all_decided(&good.cfg, 2);
    assert_eq!(
        (count(&st, "committed"), count(&st, "suppressed")),
        (1, 1),
        "{st}"
    );
    // `ledger export` reads the stream over TLS too.
    assert_eq!(crate::util::ledger(&good.cfg).len(), 1);
    good.stop();

    let mut bad = Gateway::new(root.path(), "gw-b", &redis);
    configure(&bad, &other_ca);
    bad.start();
    bad.send(&dscsa("SN002"));
    assert_eq!(
        read_acks(&mut bad.scanner, 1),
        [ACK],
        "ACKed although TLS fails"
    );
    wait_until("the scan to wait as unresolved", || {
        bad.count("unresolved") == 1
    });
    // The warning follows the unresolved verdict's commit: await it.
    wait_until("the outage to be logged", || {
        bad.daemon().log().contains("facility Redis unavailable")
    });
    let log = bad.daemon().log();
    assert!(log.contains("facility Redis unavailable"), "{log}");
    assert!(log.to_lowercase().contains("certificate"), "{log}");
    bad.stop();
}

/// The default `[redis]` on a kernel clock that says "unsynchronised"
/// (these machines' own: containers, air-gapped LANs that block NTP): the
/// facility clock is the reference, so scans are claimed at once, on
/// facility time, and the audit keeps the gateway's own stamp beside it.
#[test]
fn an_unsynchronised_kernel_clock_still_claims_at_once_on_facility_time() {
    let (root, redis) = facility(&[]);
    let mut g = Gateway::new(root.path(), "gw-a", &redis);
    g.start();
    g.send(&dscsa("SN001"));
    g.send(&dscsa("SN001")); // double-fire
    assert_eq!(read_acks(&mut g.scanner, 2), [ACK, ACK]);
    let st = wait_all_decided(&g.cfg, 2);
    assert_eq!(
        (count(&st, "committed"), count(&st, "suppressed")),
        (1, 1),
        "{st}"
    );
    assert_each_pick_once(&redis, 1);
    let db = open_db(&g.cfg.parent().unwrap().join("state"));
    let committed: String = db
        .query_row(
            "SELECT record FROM audit WHERE record LIKE '%\"decision\":\"committed\"%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let record: serde_json::Value = serde_json::from_str(&committed).unwrap();
    assert!(record["facility_at"].is_string(), "{record}");
    assert!(
        record["clock_error_ms"].as_i64().unwrap() <= 250,
        "{record}"
    );
    assert_eq!(
        record["clock_synced"],
        scangate::capture::clock::clock_synced(),
        "the gateway's own clock state, as it was: {record}"
    );
    g.stop();
}

/// Two counters whose configs were cloned: each has a scanner `counter-1`,
/// neither declared `shared`. Two pharmacists scan the same five products,
/// one at each counter, at the same moment: ten real picks, ten ledger
/// entries (the gateway id is in each scanner's content keys) — and the
/// gateway that finds the other's name in the facility says so, naming
/// both, in its log and its `outbox status`.
#[test]
fn cloned_scanner_names_on_two_gateways_count_every_pick_and_are_named() {
    let (root, redis) = facility(&[]);
    let mut a = Gateway::with_scanner(root.path(), "gw-a", &redis, "counter-1", false);
    let mut b = Gateway::with_scanner(root.path(), "gw-b", &redis, "counter-1", false);
    a.start();
    b.start();
    for i in 0..5 {
        let label = dscsa(&format!("CL{i:03}"));
        a.send(&label);
        b.send(&label);
    }
    for g in [&a, &b] {
        let st = wait_all_decided(&g.cfg, 5);
        assert_eq!(count(&st, "committed"), 5, "{st}");
    }
    assert_each_pick_once(&redis, 10);
    // gw-b started second: it found gw-a's scanner of that name.
    let warning = "scanner \"counter-1\" of this gateway (gw-b) has the name of a scanner of gateway \"gw-a\"";
    assert!(
        b.daemon().log().contains(warning),
        "{}",
        b.daemon().log_digest()
    );
    let st = outbox_status(&b.cfg);
    assert_eq!(st["scanner_clones"][0]["other_gateway"], "gw-a", "{st}");
    let text: Outcome = cli_cfg(&b.cfg, &["outbox", "status"]).into();
    assert!(
        text.stdout.contains("WARNING: scanner \"counter-1\""),
        "{text}"
    );
    assert!(text.stdout.contains("shared = true"), "{text}");
    a.stop();
    b.stop();
}

/// A scanner one gateway declares `shared` and another uses as its own:
/// their reads would be judged by different rules, so the second is
/// refused at start (exit 2), naming the scanner, the other gateway and
/// the fix.
#[test]
fn gateways_must_agree_on_which_scanners_are_shared() {
    let (root, redis) = facility(&[]);
    let mut a = Gateway::new(root.path(), "gw-a", &redis);
    a.start();
    let b = Gateway::with_scanner(root.path(), "gw-b", &redis, "roaming", false);
    let out: Outcome = cli_cfg(&b.cfg, &["run"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("scanner \"roaming\""), "{out}");
    assert!(out.stderr.contains("shared = true"), "{out}");
    a.stop();
    // And the other way round: gw-b's own scanner first, then gw-a's shared one.
    let (root, redis) = facility(&[]);
    let mut b = Gateway::with_scanner(root.path(), "gw-b", &redis, "roaming", false);
    b.start();
    let a = Gateway::new(root.path(), "gw-a", &redis);
    let out: Outcome = cli_cfg(&a.cfg, &["run"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains("gateway \"gw-b\" uses it as its own"),
        "{out}"
    );
    b.stop();
}

/// A gateway whose wall clock is 1.5 s ahead (an RTC-less board not yet
/// synchronised; libfaketime here) measures the facility Redis's clock at
/// start: the offset, within its bound, is in `outbox status`, and a WARN
/// names it and the fix. A gateway on the true clock measures about zero
/// and warns of nothing.
#[test]
fn a_gateway_whose_clock_is_off_measures_the_offset_and_says_so() {
    let (root, redis) = facility(&[]);
    let mut fast = Gateway::new(root.path(), "gw-fast", &redis);
    let preload = libfaketime();
    fast.start_with_env(&[
        ("LD_PRELOAD", &preload),
        ("FAKETIME", "+1.5s"),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ]);
    let mut honest = Gateway::new(root.path(), "gw-true", &redis);
    honest.start();
    let offset = |g: &Gateway| {
        let st = outbox_status(&g.cfg);
        let clock = &st["facility_clock"];
        (
            clock["offset_ms"]
                .as_f64()
                .unwrap_or_else(|| panic!("{st}")),
            clock["bound_ms"].as_f64().unwrap(),
        )
    };
    // (The slack covers the time between the two clock reads a sample
    // takes, which the bound does not.)
    let (off, bound) = offset(&fast);
    assert!(
        (off + 1500.0).abs() <= bound + 50.0,
        "offset {off} ± {bound} ms"
    );
    let log = fast.daemon().log();
    assert!(log.contains("s ahead of the facility Redis's"), "{log}");
    assert!(
        log.contains("Fix: synchronise this gateway's clock"),
        "{log}"
    );
    let text: Outcome = cli_cfg(&fast.cfg, &["outbox", "status"]).into();
    assert!(
        text.stdout.contains("ahead of the facility Redis's"),
        "{text}"
    );
    let (off, bound) = offset(&honest);
    assert!(off.abs() <= bound + 50.0, "offset {off} ± {bound} ms");
    let log = honest.daemon().log();
    assert!(
        !log.contains("Fix: synchronise this gateway's clock"),
        "{log}"
    );
    fast.stop();
    honest.stop();
}

/// Two gateways hearing one shared scanner, `b` started under libfaketime
/// with the offset in `clock` (a file it re-reads: the test may step it),
/// both with a 1 s echo window — as the issue measured it.
fn two_gateways_one_clock_off(
    root: &Path,
    redis: &RedisServer,
    clock: &Path,
) -> (Gateway, Gateway) {
    let narrow = |g: &Gateway| {
        g.edit_config(|text| text.replace(&format!("window_ms = {WINDOW_MS}"), "window_ms = 1000"))
    };
    let mut a = Gateway::new(root, "gw-a", redis);
    let mut b = Gateway::new(root, "gw-b", redis);
    narrow(&a);
    narrow(&b);
    a.start();
    let preload = libfaketime();
    b.start_with_env(&[
        ("LD_PRELOAD", &preload),
        ("FAKETIME_TIMESTAMP_FILE", clock.to_str().unwrap()),
        ("FAKETIME_NO_CACHE", "1"),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ]);
    (a, b)
}

/// `picks` roaming picks SN{from}…, each heard by both gateways, and
/// every transmission decided.
fn roam_from(a: &mut Gateway, b: &mut Gateway, from: usize, picks: usize) {
    for i in from..from + picks {
        let label = dscsa(&format!("SN{i:03}"));
        a.send(&label);
        b.send(&label);
    }
    wait_all_decided(&a.cfg, (from + picks) as i64);
    wait_all_decided(&b.cfg, (from + picks) as i64);
}

/// Gateway b's wall clock 1.5 s ahead of a's (an RTC-less Pi that has not
/// synced), then 0.4 s: on wall stamps a 1 s window doubles most picks;
/// on facility time none.
#[test]
fn a_gateway_whose_wall_clock_is_off_doubles_no_pick_and_misses_none() {
    for offset in ["+1.5s", "+0.4s"] {
        let (root, redis) = facility(&[]);
        let clock = root.path().join("faketime");
        std::fs::write(&clock, offset).unwrap();
        let (mut a, mut b) = two_gateways_one_clock_off(root.path(), &redis, &clock);
        roam_from(&mut a, &mut b, 0, 25);
        assert_each_pick_once(&redis, 25);
        assert_eq!(a.count("committed") + b.count("committed"), 25, "{offset}");
        let (off, _) = {
            let st = outbox_status(&b.cfg);
            (st["facility_clock"]["offset_ms"].as_f64().unwrap(), st)
        };
        let want = -offset.trim_end_matches('s').parse::<f64>().unwrap() * 1000.0;
        assert!((off - want).abs() < 100.0, "{offset}: measured {off} ms");
        a.stop();
        b.stop();
    }
}

/// Gateway b's wall clock is stepped 1.5 s forward mid-shift (NTP, an
/// operator): captures stay on the boot clock's facility time, so the
/// picks after the step are judged as before it.
#[test]
fn a_wall_clock_stepped_mid_shift_doubles_no_pick() {
    let (root, redis) = facility(&[]);
    let clock = root.path().join("faketime");
    std::fs::write(&clock, "+0s").unwrap();
    let (mut a, mut b) = two_gateways_one_clock_off(root.path(), &redis, &clock);
    roam_from(&mut a, &mut b, 0, 10);
    std::fs::write(&clock, "+1.5s").unwrap();
    roam_from(&mut a, &mut b, 10, 15);
    assert_each_pick_once(&redis, 25);
    assert_eq!(a.count("committed") + b.count("committed"), 25);
    for g in [&a, &b] {
        audit_verify(&g.cfg);
    }
    a.stop();
    b.stop();
}

// Reconciliation (docs/design.md, "Reconciliation"): a facility store that
// lost data is detected by each gateway's marker, and each gateway
// re-publishes its own commits before it claims new scans.

/// Two gateways sharing the roaming scanner, with a window of ten minutes
/// (so a re-read after a Redis replacement is still an echo however slowly
/// the test runs), started.
fn two_wide_gateways(root: &Path, redis: &RedisServer) -> (Gateway, Gateway) {
    let wide = |g: &Gateway| {
        g.edit_config(|text| {
            text.replace(&format!("window_ms = {WINDOW_MS}"), "window_ms = 600000")
        })
    };
    let mut a = Gateway::new(root, "gw-a", redis);
    let mut b = Gateway::new(root, "gw-b", redis);
    wide(&a);
    wide(&b);
    a.start();
    b.start();
    (a, b)
}

/// Read `labels` (SN…) at gateway `g`, and wait until its outbox holds
/// `total` transmissions, all decided.
fn read_labels(g: &mut Gateway, labels: std::ops::Range<usize>, total: i64) -> serde_json::Value {
    for i in labels {
        g.send(&dscsa(&format!("SN{i:03}")));
    }
    wait_all_decided(&g.cfg, total)
}

/// The scan UUIDs in a gateway's own ledger.
fn local_ledger(g: &Gateway) -> Vec<String> {
    let db = open_db(&g.cfg.parent().unwrap().join("state"));
    db.prepare("SELECT scan_uuid FROM ledger ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The facility ledger's scan UUIDs, sorted.
fn facility_uuids(redis: &RedisServer) -> Vec<String> {
    let mut uuids: Vec<String> = redis
        .ledger("test-pharmacy")
        .into_iter()
        .map(|(u, _)| u)
        .collect();
    uuids.sort();
    uuids
}

/// The committed scan of label `serial` in a gateway's outbox.
fn committed_scan(g: &Gateway, serial: &str) -> String {
    let db = open_db(&g.cfg.parent().unwrap().join("state"));
    db.query_row(
        "SELECT scan_uuid FROM scans WHERE state = 'committed' AND serial = ?1",
        [serial],
        |r| r.get(0),
    )
    .unwrap_or_else(|e| panic!("no committed scan of {serial}: {e}"))
}

/// A commit whose outbox row is gone (the sweeper removes decided rows by
/// the gateway's wall clock, which may have been stepped on) is
/// re-published from its ledger entry when the store lost data. Before, it
/// was skipped ("not in its outbox"), and the newest commit — the marker —
/// was never re-published, so every claim was refused for it again.
#[test]
fn a_commit_whose_outbox_row_is_gone_is_republished_from_its_ledger_entry() {
    let (root, mut redis) = facility(&[]);
    let mut a = Gateway::new(root.path(), "gw-a", &redis);
    a.start();
    read_labels(&mut a, 0..3, 3);
    a.stop();
    let gone = local_ledger(&a);
    let db = rusqlite::Connection::open(a.cfg.parent().unwrap().join("state/scangate.db")).unwrap();
    let removed = db
        .execute(
            "DELETE FROM scans WHERE scan_uuid IN (?1, ?2)",
            [&gone[0], &gone[2]],
        )
        .unwrap();
    assert_eq!(removed, 2);
    drop(db);
    redis.restart();
    a.start();
    read_labels(&mut a, 3..4, 2);
    wait_until("every commit back in the facility ledger", || {
        redis.ledger("test-pharmacy").len() == 4
    });
    assert_each_pick_once(&redis, 4);
    let mut local = local_ledger(&a);
    local.sort();
    assert_eq!(facility_uuids(&redis), local);
    let log = a.daemon().log();
    assert_eq!(
        log.matches("re-published from its ledger entry").count(),
        2,
        "{log}"
    );
    a.stop();
}

#[test]
fn redis_replaced_by_an_empty_one_mid_shift_two_gateways_converge_to_every_pick_once() {
    let (root, mut redis) = facility(&[]);
    let (mut a, mut b) = two_wide_gateways(root.path(), &redis);
    // a's picks SN000..SN009, b's SN100..SN104, and b hears a's first five
    // (echoes of a's commits).
    read_labels(&mut a, 0..10, 10);
    read_labels(&mut b, 100..105, 5);
    read_labels(&mut b, 0..5, 10);
    assert_each_pick_once(&redis, 15);
    // The facility Redis is replaced by an empty one (same address).
    redis.restart();
    assert!(redis.ledger("test-pharmacy").is_empty());
    // The next pick at each gateway finds the store without its latest
    // commit: it re-publishes its commits first, then claims the pick.
    let replaced = std::time::Instant::now();
    read_labels(&mut a, 200..201, 11);
    read_labels(&mut b, 300..301, 11);
    wait_until("both gateways' picks back in the facility ledger", || {
        redis.ledger("test-pharmacy").len() == 17
    });
    let converged = replaced.elapsed();
    // Echoes of the re-published picks on the other gateway are echoes.
    read_labels(&mut b, 5..10, 16);
    read_labels(&mut a, 100..105, 16);
    assert_each_pick_once(&redis, 17);
    let mut local: Vec<String> = local_ledger(&a)
        .into_iter()
        .chain(local_ledger(&b))
        .collect();
    local.sort();
    assert_eq!(
        facility_uuids(&redis),
        local,
        "the facility ledger holds exactly the gateways' commits, by their original scan UUIDs"
    );
    assert_eq!((a.count("committed"), b.count("committed")), (11, 6));
    for (g, republished) in [(&a, 10), (&b, 5)] {
        let st = outbox_status(&g.cfg);
        let r = &st["reconciliation"];
        assert_eq!(r["republished"], republished, "{st}");
        assert_eq!(r["conflicts"], 0, "{st}");
        assert_eq!(st["conflicts"].as_array().map(Vec::len), Some(0), "{st}");
        let text: Outcome = cli_cfg(&g.cfg, &["outbox", "status"]).into();
        assert!(
            text.stdout.contains(&format!(
                "re-published {republished} of this gateway's commits"
            )),
            "{text}"
        );
        let log = g.daemon().log();
        assert_eq!(log.matches("has lost data").count(), 1, "{log}");
        audit_verify(&g.cfg);
    }
    eprintln!(
        "converged {} ms after the replacement (reconciliations took {} and {} ms)",
        converged.as_millis(),
        outbox_status(&a.cfg)["reconciliation"]["took_ms"],
        outbox_status(&b.cfg)["reconciliation"]["took_ms"]
    );
    a.stop();
    b.stop();
}

#[test]
fn a_pick_committed_twice_while_the_store_was_empty_is_a_conflict_reported_on_both_sides() {
    let (root, mut redis) = facility(&[]);
    let (mut a, mut b) = two_wide_gateways(root.path(), &redis);
    read_labels(&mut a, 0..3, 3);
    read_labels(&mut b, 100..101, 1);
    redis.restart();
    // b hears an echo of a's SN001 before a has noticed the loss: b
    // reconciles (its own SN100), then commits the echo as a pick.
    read_labels(&mut b, 1..2, 2);
    assert_eq!(b.count("committed"), 2);
    // a's next pick: a re-publishes SN000..SN002, and the facility
    // suppresses its SN001 as an echo of b's: a conflict.
    read_labels(&mut a, 200..201, 4);
    assert_each_pick_once(&redis, 5);
    let (mine, theirs) = (committed_scan(&a, "SN001"), committed_scan(&b, "SN001"));
    let st = outbox_status(&a.cfg);
    assert_eq!(st["reconciliation"]["conflicts"], 1, "{st}");
    assert_eq!(st["conflicts"][0]["scan_uuid"], mine.as_str(), "{st}");
    assert_eq!(
        st["conflicts"][0]["other_scan_uuid"],
        theirs.as_str(),
        "{st}"
    );
    let text: Outcome = cli_cfg(&a.cfg, &["outbox", "status"]).into();
    assert!(
        text.stdout.contains(&format!("CONFLICT: scan {mine}")),
        "{text}"
    );
    let trace: Outcome = cli_cfg(&a.cfg, &["audit", "trace", &mine]).into();
    assert!(
        trace
            .stdout
            .contains(&format!("CONFLICT  another gateway committed {theirs}")),
        "{trace}"
    );
    // b hears of it from the facility's conflicts stream (at connect and
    // every minute): restarted, it connects.
    b.stop();
    b.start();
    wait_until("the conflict audited on gateway b", || {
        outbox_status(&b.cfg)["conflicts"]
            .as_array()
            .is_some_and(|c| c.len() == 1)
    });
    let st = outbox_status(&b.cfg);
    assert_eq!(st["conflicts"][0]["scan_uuid"], theirs.as_str(), "{st}");
    assert_eq!(st["conflicts"][0]["other_scan_uuid"], mine.as_str(), "{st}");
    assert_eq!(st["conflicts"][0]["other_gateway"], "gw-a", "{st}");
    let trace: Outcome = cli_cfg(&b.cfg, &["audit", "trace", &theirs]).into();
    assert!(
        trace
            .stdout
            .contains(&format!("CONFLICT  gateway gw-a committed {mine}")),
        "{trace}"
    );
    for g in [&a, &b] {
        audit_verify(&g.cfg);
    }
    a.stop();
    b.stop();
}

#[test]
fn redis_restored_from_an_older_snapshot_is_detected_and_the_lost_picks_republished_once() {
    let (root, mut redis) = facility(&[]);
    let (mut a, mut b) = two_wide_gateways(root.path(), &redis);
    read_labels(&mut a, 0..3, 3);
    // A snapshot now; the server is restored from it after three more picks
    // (SIGKILL: nothing newer is saved). The settings and the first three
    // picks survive, so no key is simply absent.
    let _: () = redis::cmd("SAVE").query(&mut redis.connection()).unwrap();
    read_labels(&mut a, 3..6, 6);
    assert_eq!(redis.ledger("test-pharmacy").len(), 6);
    redis.restart();
    assert_eq!(
        redis.ledger("test-pharmacy").len(),
        3,
        "restored from the snapshot"
    );
    read_labels(&mut a, 6..7, 7);
    wait_until("a's lost picks back in the facility ledger", || {
        redis.ledger("test-pharmacy").len() == 7
    });
    // b's reads of the restored picks are echoes.
    read_labels(&mut b, 3..6, 3);
    assert_eq!(b.count("committed"), 0);
    assert_each_pick_once(&redis, 7);
    let mut local = local_ledger(&a);
    local.sort();
    assert_eq!(facility_uuids(&redis), local);
    let st = outbox_status(&a.cfg);
    assert_eq!(st["reconciliation"]["republished"], 6, "{st}");
    assert_eq!(st["reconciliation"]["conflicts"], 0, "{st}");
    a.stop();
    b.stop();
}
