//! Replicas of the facility Redis. No claim lost to a failover: a primary
//! and a replica whose replication stream runs through a proxy of the
//! test's that can hold it back (the replica lags), the primary SIGKILLed,
//! the replica promoted — by Redis Sentinel, followed without a restart,
//! or by a technician — and the facility ledger still holds every pick
//! exactly once. Claims wait for a replica's confirmation
//! (`min_replicas_ack`, and the primary's AOF where the server has
//! `WAITAOF`); a gateway pointed at a read-only replica waits until it is
//! promoted. Real redis-server and sentinel processes on free ports.

use crate::util::*;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const FACILITY: &str = "test-pharmacy";
const SERVICE: &str = "facility";

/// A TCP proxy between a replica and its primary that can hold back the
/// primary's replication stream: while held, what the primary sends is
/// kept here, not forwarded (the replica lags but stays connected, so the
/// primary still counts it); what the replica sends (its ACKs) goes
/// through. When the primary goes away, whatever was held is lost with it.
struct HoldingProxy {
    port: u16,
    hold: Arc<AtomicBool>,
}

impl HoldingProxy {
    fn start(upstream: u16) -> HoldingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hold = Arc::new(AtomicBool::new(false));
        let held = hold.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                pipe(
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    None,
                );
                pipe(server, client, Some(held.clone()));
            }
        });
        HoldingProxy { port, hold }
    }

    /// From now on, keep the primary's stream back.
    fn hold(&self) {
        self.hold.store(true, Ordering::SeqCst);
    }
}

/// Copy `from` to `to` on a thread of its own; while `hold` is set, keep
/// the bytes (forwarded once it is cleared).
fn pipe(mut from: TcpStream, mut to: TcpStream, hold: Option<Arc<AtomicBool>>) {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 16384];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&buf[..n]);
            if hold.as_ref().is_some_and(|h| h.load(Ordering::SeqCst)) {
                continue;
            }
            if to.write_all(&kept).is_err() {
                break;
            }
            kept.clear();
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}

/// A Redis Sentinel of the test's own (quorum 1, down after 1 s), killed
/// on drop.
struct Sentinel {
    child: Child,
    port: u16,
}

impl Sentinel {
    fn start(dir: &Path, primary: u16) -> Sentinel {
        std::fs::create_dir_all(dir).unwrap();
        let port = free_port();
        let conf = dir.join("sentinel.conf");
        // failover-timeout is long: Sentinel re-points a replica that
        // replicates from another address than the primary's (ours: the
        // proxy's) only that long after it first saw it.
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {SERVICE} 127.0.0.1 {primary} 1\n\
                 sentinel down-after-milliseconds {SERVICE} 1000\n\
                 sentinel failover-timeout {SERVICE} 60000\n",
                dir.display()
            ),
        )
        .unwrap();
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (with --sentinel) must be installed");
        let sentinel = Sentinel { child, port };
        wait_until("the sentinel to answer", || sentinel.connection().is_ok());
        sentinel
    }

    fn connection(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?
            .get_connection_with_timeout(std::time::Duration::from_secs(1))
    }

    /// The port the sentinel names as the primary now.
    fn primary_port(&self) -> Option<u16> {
        let (_, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(SERVICE)
            .query(&mut self.connection().ok()?)
            .ok()?;
        Some(port)
    }

    /// Whether the sentinel knows a healthy replica of the primary.
    fn knows_a_replica(&self) -> bool {
        let Ok(mut c) = self.connection() else {
            return false;
        };
        let replicas: Vec<std::collections::HashMap<String, String>> = redis::cmd("SENTINEL")
            .arg("replicas")
            .arg(SERVICE)
            .query(&mut c)
            .unwrap_or_default();
        replicas
            .iter()
            .any(|r| r.get("flags").is_some_and(|f| f == "slave"))
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `INFO <section>` of `redis`.
fn info(redis: &RedisServer, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query(&mut redis.connection())
        .expect("INFO")
}

/// A primary and a replica whose replication goes through a
/// [`HoldingProxy`], in sync.
struct LaggingPair {
    root: tempfile::TempDir,
    primary: RedisServer,
    replica: RedisServer,
    proxy: HoldingProxy,
}

fn lagging_pair() -> LaggingPair {
    let root = tempdir("scangate-failover-");
    let primary = RedisServer::start(&root.path().join("primary"), &[]);
    let proxy = HoldingProxy::start(primary.port);
    let via = proxy.port.to_string();
    let replica = RedisServer::start(
        &root.path().join("replica"),
        &["--replicaof", "127.0.0.1", &via],
    );
    wait_until("the replica to be in sync", || {
        info(&replica, "replication").contains("master_link_status:up")
    });
    LaggingPair {
        root,
        primary,
        replica,
        proxy,
    }
}

/// Picks SN000… with numbers `range`, each read once, all ACKed.
fn picks(g: &mut Gateway, range: std::ops::Range<usize>) {
    let n = range.len();
    for i in range {
        g.send(&dscsa(&format!("SN{i:03}")));
    }
    assert_eq!(g.replies(n), vec![ACK; n]);
}

/// Three picks confirmed by the replica, then the stream held back and
/// four more: those ran on the primary, but are not confirmed, so they
/// wait as unresolved (not decided) and the replica lacks them.
fn three_confirmed_then_four_held(pair: &LaggingPair, g: &mut Gateway) {
    picks(g, 0..3);
    wait_until("3 picks committed", || g.count("committed") == 3);
    assert_eq!(
        pair.replica.ledger(FACILITY).len(),
        3,
        "confirmed = on the replica"
    );
    let log = g.daemon().log();
    assert!(
        log.contains("once 1 of 1 connected replicas confirmed them (WAIT)"),
        "the confirmation in force should be logged: {}",
        g.daemon().log_digest()
    );
    pair.proxy.hold();
    picks(g, 3..7);
    wait_until("the 4 unconfirmed picks to wait as unresolved", || {
        g.count("unresolved") == 4
    });
    wait_until("the reason in the log", || {
        g.daemon().log().contains("0 of 1 replicas confirmed")
    });
    // (The replay lane retries them, by UUID, until each has run there.)
    wait_until_for(
        "the held picks' claims to have run on the primary",
        std::time::Duration::from_secs(60),
        || pair.primary.ledger(FACILITY).len() == 7,
    );
    assert_eq!(g.count("committed"), 3, "unconfirmed picks are not decided");
    assert_eq!(pair.replica.ledger(FACILITY).len(), 3, "the replica lags");
    // The replica's script cache is empty (scripts are not replicated):
    // once promoted, the claims run there only because the gateway loads
    // the script when it connects (or reloads it on NOSCRIPT).
    let sha = redis::Script::new(scangate::facility::CLAIM_LUA)
        .get_hash()
        .to_string();
    let cached: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(&sha)
        .query(&mut pair.replica.connection())
        .unwrap();
    assert_eq!(cached, [false]);
}

/// After the failover: all 7 picks decided on the gateway, each exactly
/// once in the promoted node's facility ledger.
fn all_seven_once(g: &Gateway, promoted: &RedisServer) {
    wait_until_for(
        "all 7 picks committed after the failover",
        std::time::Duration::from_secs(60),
        || g.count("committed") == 7 && g.count("unresolved") == 0,
    );
    assert_eq!(g.count("suppressed"), 0, "nothing judged an echo of itself");
    assert_eq!(promoted.ledger(FACILITY).len(), 7);
    assert_each_pick_once(promoted, 7);
}

#[test]
fn a_failover_through_sentinel_is_followed_without_a_restart_and_loses_no_confirmed_claim() {
    let mut pair = lagging_pair();
    let sentinel = Sentinel::start(&pair.root.path().join("sentinel"), pair.primary.port);
    wait_until("the sentinel to know the replica", || {
        sentinel.knows_a_replica()
    });
    let mut g = Gateway::roaming(pair.root.path(), "gw-a", &pair.primary);
    let url_line = format!("url = {:?}", pair.primary.url());
    g.edit_config(|text| {
        text.replace(
            &url_line,
            &format!(
                "sentinels = [\"127.0.0.1:{}\"]\nservice_name = {SERVICE:?}",
                sentinel.port
            ),
        )
    });
    g.start();
    three_confirmed_then_four_held(&pair, &mut g);
    pair.primary.kill9();
    wait_until_for(
        "Sentinel to promote the replica",
        std::time::Duration::from_secs(60),
        || sentinel.primary_port() == Some(pair.replica.port),
    );
    all_seven_once(&g, &pair.replica);
    let log = g.daemon().log();
    assert!(
        log.contains(&format!("server=redis://127.0.0.1:{}/", pair.replica.port)),
        "the gateway should have connected to the promoted node: {}",
        g.daemon().log_digest()
    );
    g.stop();
}

#[test]
fn a_technician_promoting_the_replica_and_changing_the_url_loses_no_confirmed_claim() {
    let mut pair = lagging_pair();
    let mut g = Gateway::roaming(pair.root.path(), "gw-a", &pair.primary);
    g.start();
    three_confirmed_then_four_held(&pair, &mut g);
    pair.primary.kill9();
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut pair.replica.connection())
        .expect("REPLICAOF NO ONE");
    g.stop();
    let (old, new) = (pair.primary.url(), pair.replica.url());
    g.edit_config(|text| text.replace(&old, &new));
    g.start();
    all_seven_once(&g, &pair.replica);
    g.stop();
}

#[test]
fn confirmation_switched_off_while_a_replica_is_attached_is_warned_of() {
    let pair = lagging_pair();
    let mut g = Gateway::roaming(pair.root.path(), "gw-a", &pair.primary);
    g.edit_config(|text| format!("{text}min_replicas_ack = 0\n"));
    g.start();
    wait_until("the warning", || {
        g.daemon()
            .log()
            .contains("1 replicas are connected to the facility Redis, but min_replicas_ack = 0")
    });
    // Off means off: a held-back replica does not hold claims.
    pair.proxy.hold();
    picks(&mut g, 0..2);
    wait_until("2 picks committed", || g.count("committed") == 2);
    g.stop();
}

/// `WAITAOF` needs Redis 7.2 or later; Debian 12's redis-server is 7.0, so
/// this runs with Valkey (bookworm-backports, installed by `.ci/run`).
#[test]
fn on_a_server_with_waitaof_claims_also_wait_for_the_primarys_aof() {
    if !RedisServer::valkey_installed() {
        return;
    }
    let root = tempdir("scangate-waitaof-");
    let primary = RedisServer::start_binary(
        "valkey-server",
        &root.path().join("primary"),
        &["--appendonly", "yes"],
    );
    let port = primary.port.to_string();
    let replica = RedisServer::start_binary(
        "valkey-server",
        &root.path().join("replica"),
        &["--replicaof", "127.0.0.1", &port],
    );
    wait_until("the replica to be in sync", || {
        info(&replica, "replication").contains("master_link_status:up")
    });
    let mut g = Gateway::roaming(root.path(), "gw-a", &primary);
    g.start();
    picks(&mut g, 0..3);
    wait_until("3 picks committed", || g.count("committed") == 3);
    assert!(
        g.daemon().log().contains(
            "once 1 of 1 connected replicas confirmed them (WAIT) and the primary has written them to its append-only file (WAITAOF)"
        ),
        "{}",
        g.daemon().log_digest()
    );
    assert_each_pick_once(&primary, 3);
    assert_eq!(replica.ledger(FACILITY).len(), 3);
    let calls = info(&primary, "commandstats");
    assert!(calls.contains("cmdstat_waitaof:calls="), "{calls}");
    g.stop();
}

#[test]
fn min_replicas_ack_holds_claims_until_a_replica_confirms_them() {
    let (root, redis) = facility(&[]);
    let mut g = Gateway::roaming(root.path(), "gw-a", &redis);
    g.edit_config(|text| format!("{text}min_replicas_ack = 1\n"));
    g.start();
    g.send(&dscsa("SN001"));
    assert_eq!(g.replies(1), [ACK]);
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
    let mut g = Gateway::roaming(root.path(), "gw-a", &replica);
    g.start();
    g.send(&dscsa("SN001"));
    g.send(&dscsa("SN001")); // double-fire
    assert_eq!(g.replies(2), [ACK, ACK]);
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
