//! The facility Redis down, paused, unreachable at start or its replies
//! lost: the counter keeps working (scans stored, ACKed, waiting as
//! unresolved, the backlog logged), and the replay commits each pick once,
//! a claim whose reply was lost recognised as the gateway's own. The
//! replay of a long backlog: a stop is heard between two rounds, and a
//! stuck replay does not hold up new scans. Real binary, PTY scanners, a
//! redis-server of each test's own (and a TCP proxy that can swallow its
//! replies).

use crate::util::*;
use std::path::Path;

#[test]
fn redis_killed_mid_stream_and_restarted_with_aof_loses_and_doubles_nothing() {
    let (root, mut redis) = facility(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut g = Gateway::roaming(root.path(), "gw-a", &redis);
    g.start();
    for i in 0..10 {
        g.send(&dscsa(&format!("SN{i:03}")));
    }
    wait_all_decided(&g.cfg, 10);
    assert_eq!(g.replies(10), vec![ACK; 10]);
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
    assert_eq!(g.replies(15), vec![ACK; 15]);
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
    let mut a = Gateway::roaming(root.path(), "gw-a", &redis);
    let mut b = Gateway::roaming(root.path(), "gw-b", &redis);
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

#[test]
fn an_unreachable_redis_at_start_up_buffers_scans_until_it_comes_up() {
    let (root, mut redis) = facility(&[]);
    redis.kill9(); // nothing listens on its port now
    let mut g = Gateway::roaming(root.path(), "gw-a", &redis);
    g.start(); // not fatal: the gateway runs and buffers
    g.send(&dscsa("SN001"));
    g.send(&dscsa("SN002"));
    assert_eq!(g.replies(2), [ACK, ACK]);
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
    let mut g = Gateway::roaming(root, "gw-a", redis);
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
    g.kill9();
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

/// `picks` picks (labels OLD0…) that an outage before the gateway's start
/// left waiting as unresolved in its outbox, 10 ms apart.
fn outage_backlog(g: &Gateway, picks: i64) {
    let state = g.state.clone();
    let mut store = scangate::store::Store::open(&state).unwrap();
    let old: Vec<_> = (0..picks)
        .map(|i| read_at(&dscsa(&format!("OLD{i}")), (i - picks) * 10))
        .collect();
    store.admit("test-pharmacy", &old).unwrap();
    let mut gate = test_facility_gate(&store);
    let now = scangate::capture::CaptureTime::now();
    while scangate::claimer::round(&mut store, &mut gate, None, "Redis is down", &now)
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
    let mut g = Gateway::roaming(root.path(), "gw-a", &redis);
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
    let mut g = Gateway::roaming(root.path(), "gw-a", &redis);
    proxy.route(&g, &redis);
    outage_backlog(&g, 3);
    proxy.drop_replies.store(true, Ordering::SeqCst);
    g.start();
    wait_until("the replay's claims to run on Redis", || {
        redis.ledger("test-pharmacy").len() == 3
    });
    g.send(&dscsa("NEW1"));
    g.send(&dscsa("NEW2"));
    assert_eq!(g.replies(2), [ACK, ACK]);
    wait_until("the new scans to be committed", || {
        g.count("committed") == 2
    });
    let st = outbox_status(&g.cfg);
    assert_eq!(count(&st, "unresolved"), 3, "the backlog still waits: {st}");
    proxy.drop_replies.store(false, Ordering::SeqCst);
    assert_settled(&g, &redis, 5, 0);
    g.stop();
}
