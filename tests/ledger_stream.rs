//! The facility ledger stream bounded: consumers read it
//! with a consumer group (`ledger export --follow --group`), acknowledging
//! an entry only once it is written out; the stream is trimmed only past
//! what every group acknowledged (and older than `[redis]
//! ledger_stream_keep_days`), never unread; without a group never; `status`
//! shows its length and each group's oldest unacknowledged entry. Real
//! redis-server processes on free ports.

use crate::util::*;
use scangate::facility::Facility;
use scangate::facility::stream::{self, Entry};
use std::io::BufRead;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const FACILITY: &str = "trim-test";

fn key(facility: &str) -> String {
    format!("scangate:{{{facility}}}:ledger")
}

fn connect(redis: &RedisServer) -> Facility {
    Facility::connect(
        &redis.url(),
        FACILITY,
        3000,
        Duration::from_secs(3600),
        Duration::from_secs(2),
        Duration::from_secs(2),
    )
    .unwrap()
}

/// Append `n` entries as the claim script would (fields of a ledger entry).
fn append(redis: &RedisServer, n: usize) -> Vec<String> {
    let mut c = redis.connection();
    (0..n)
        .map(|i| {
            redis::cmd("XADD")
                .arg(key(FACILITY))
                .arg("*")
                .arg("scan_uuid")
                .arg(format!("u{i}"))
                .arg("captured_at")
                .arg("2026-12-01T10:00:00.000Z")
                .arg("quantity")
                .arg("1")
                .query::<String>(&mut c)
                .unwrap()
        })
        .collect()
}

fn ids(page: &[Entry]) -> Vec<String> {
    page.iter().map(|(id, _)| id.clone()).collect()
}

#[test]
fn the_stream_is_trimmed_only_past_what_every_group_acknowledged() {
    let redis = RedisServer::start_temp(&[]);
    let mut f = connect(&redis);
    let first = append(&redis, 5);

    // No consumer group: nothing has read it, nothing goes.
    let s = f.trim_ledger(0).unwrap();
    assert_eq!((s.trimmed, s.length, s.groups.len()), (0, 5, 0), "{s:?}");

    assert!(f.ensure_ledger_group("inventory").unwrap());
    assert!(!f.ensure_ledger_group("inventory").unwrap());
    // Registered, nothing read: all five are unacknowledged.
    let s = f.trim_ledger(0).unwrap();
    assert_eq!((s.trimmed, s.length), (0, 5));
    assert_eq!(
        s.groups[0].oldest_unacked.as_deref(),
        Some(first[0].as_str())
    );

    // Read, not acknowledged: pending entries stay.
    let page = f
        .read_ledger_group("inventory", "c1", false, 2, 10)
        .unwrap();
    assert_eq!(ids(&page), first[..2]);
    assert_eq!(page[0].1["scan_uuid"], "u0");
    let s = f.trim_ledger(0).unwrap();
    assert_eq!((s.trimmed, s.length, s.groups[0].pending), (0, 5, 2));
    assert_eq!(
        s.groups[0].oldest_unacked.as_deref(),
        Some(first[0].as_str())
    );

    // Acknowledged: gone. The three not read yet stay.
    f.ack_ledger("inventory", &ids(&page)).unwrap();
    let s = f.trim_ledger(0).unwrap();
    assert_eq!((s.trimmed, s.length, s.groups[0].pending), (2, 3, 0));
    assert_eq!(
        s.groups[0].oldest_unacked.as_deref(),
        Some(first[2].as_str())
    );
    assert_eq!(redis.ledger(FACILITY).len(), 3);

    // All acknowledged, but younger than the horizon: kept.
    let page = f
        .read_ledger_group("inventory", "c1", false, 10, 10)
        .unwrap();
    f.ack_ledger("inventory", &ids(&page)).unwrap();
    let s = f.trim_ledger(24 * 3600 * 1000).unwrap();
    assert_eq!((s.trimmed, s.length), (0, 3));
    assert_eq!(s.groups[0].oldest_unacked, None);
    assert!(s.oldest_unacked().is_none());
    let s = f.trim_ledger(0).unwrap();
    assert_eq!((s.trimmed, s.length), (3, 0));

    // A second group that has not read the new entries holds them, though
    // the first acknowledged them.
    let mut c = redis.connection();
    redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(key(FACILITY))
        .arg("audit")
        .arg("0")
        .query::<()>(&mut c)
        .unwrap();
    let new = append(&redis, 2);
    let page = f
        .read_ledger_group("inventory", "c1", false, 10, 10)
        .unwrap();
    f.ack_ledger("inventory", &ids(&page)).unwrap();
    let s = f.trim_ledger(0).unwrap();
    assert_eq!((s.trimmed, s.length), (0, 2), "{s:?}");
    let audit = s.groups.iter().find(|g| g.name == "audit").unwrap();
    assert_eq!(audit.oldest_unacked.as_deref(), Some(new[0].as_str()));
    assert_eq!(s.oldest_unacked().map(|(g, _)| g), Some("audit"));
    let page = f.read_ledger_group("audit", "a1", false, 10, 10).unwrap();
    f.ack_ledger("audit", &ids(&page)).unwrap();
    let s = f.trim_ledger(0).unwrap();
    assert_eq!((s.trimmed, s.length), (2, 0), "{s:?}");
}

#[test]
fn a_consumer_that_stops_before_acknowledging_gets_those_entries_again_first() {
    let redis = RedisServer::start_temp(&[]);
    let mut f = connect(&redis);
    let first = append(&redis, 3);
    // Written out, then the consumer dies before its acknowledgement.
    let mut seen = Vec::new();
    stream::follow(&mut f, "inventory", "c1", 10, None, |page| {
        seen.push(ids(page));
        Err(std::io::Error::other("stdout closed"))
    })
    .unwrap();
    assert_eq!(seen, std::slice::from_ref(&first));
    assert_eq!(
        f.trim_ledger(0).unwrap().length,
        3,
        "unacknowledged entries were trimmed"
    );

    // One of them deleted by hand meanwhile: it is acknowledged (it would
    // hold the trim for ever), not delivered.
    redis::cmd("XDEL")
        .arg(key(FACILITY))
        .arg(&first[0])
        .query::<i64>(&mut redis.connection())
        .unwrap();
    // Restarted with the same name: those first, then a new one.
    let later = append(&redis, 1);
    let mut seen = Vec::new();
    stream::follow(&mut f, "inventory", "c1", 10, None, |page| {
        seen.push(ids(page));
        if seen.len() == 2 {
            return Err(std::io::Error::other("stop"));
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(seen, [first[1..].to_vec(), later.clone()]);
    let s = f.trim_ledger(0).unwrap();
    assert_eq!((s.trimmed, s.length), (2, 1), "{s:?}");
    assert_eq!(
        s.groups[0].oldest_unacked.as_deref(),
        Some(later[0].as_str())
    );
}

/// A consumer gone for good under another name: what the group gave it and
/// it never acknowledged would hold the trim for ever. A follower claims
/// the entries left idle longer than its `claim_idle` (`XAUTOCLAIM`),
/// prints and acknowledges them, then goes on with new ones; entries not
/// idle that long it leaves to their consumer.
#[test]
fn entries_a_gone_consumer_left_unacknowledged_are_claimed_once_idle() {
    let redis = RedisServer::start_temp(&[]);
    let mut f = connect(&redis);
    let first = append(&redis, 3);
    stream::follow(&mut f, "inventory", "old", 10, None, |_| {
        Err(std::io::Error::other("the old consumer dies"))
    })
    .unwrap();
    assert_eq!(pending(&redis, FACILITY, "inventory"), 3);
    // Not idle for an hour yet: nobody takes them.
    let (cursor, none) = f
        .claim_idle_ledger("inventory", "new", 3_600_000, "0-0", 100)
        .unwrap();
    assert_eq!((cursor.as_str(), none.len()), ("0-0", 0));
    let later = append(&redis, 1);
    let mut seen = Vec::new();
    let idle = Some(Duration::ZERO);
    stream::follow(&mut f, "inventory", "new", 10, idle, |page| {
        seen.push(ids(page));
        if seen.len() == 2 {
            return Err(std::io::Error::other("stop"));
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(seen, [first.clone(), later.clone()]);
    let s = f.trim_ledger(0).unwrap();
    assert_eq!((s.trimmed, s.length), (3, 1), "{s:?}");
    assert_eq!(
        pending(&redis, FACILITY, "inventory"),
        1,
        "only the last page"
    );
}

/// A follower whose ACL user may not `XAUTOCLAIM` (the grants documented
/// before it claimed) follows the stream all the same, claiming nothing
/// (a WARN says why), instead of failing and reconnecting for ever.
#[test]
fn a_follower_that_may_not_claim_follows_all_the_same() {
    let redis = RedisServer::start_temp(&[]);
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("inv")
        .arg("on")
        .arg(">pw")
        .arg("resetkeys")
        .arg("~scangate:*")
        .arg("-@all")
        .arg(&["+script|load", "+xgroup|create", "+xreadgroup", "+xack"])
        .query(&mut redis.connection())
        .unwrap();
    let mut f = Facility::connect(
        &redis.url().replace("redis://", "redis://inv:pw@"),
        FACILITY,
        3000,
        Duration::from_secs(3600),
        Duration::from_secs(2),
        Duration::from_secs(2),
    )
    .unwrap();
    let first = append(&redis, 2);
    let mut seen = Vec::new();
    stream::follow(
        &mut f,
        "inventory",
        "c1",
        10,
        Some(Duration::ZERO),
        |page| {
            seen.push(ids(page));
            Err(std::io::Error::other("stop"))
        },
    )
    .unwrap();
    assert_eq!(seen, [first]);
}

/// `scangate ledger export --follow` for `group`, its lines as they come.
struct Follower {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Follower {
    fn start(cfg: &std::path::Path, group: &str) -> Follower {
        let mut child = command()
            .args(["ledger", "export", "--follow", "--group", group, "--config"])
            .arg(cfg)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Follower { child, lines }
    }

    fn take(&self, n: usize) -> Vec<serde_json::Value> {
        (0..n)
            .map(|_| {
                let line = self
                    .lines
                    .recv_timeout(event_timeout())
                    .expect("a ledger line");
                serde_json::from_str(&line).unwrap()
            })
            .collect()
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How many entries `group` of `facility`'s ledger stream has pending.
fn pending(redis: &RedisServer, facility: &str, group: &str) -> i64 {
    let summary: (i64, Option<String>, Option<String>, redis::Value) = redis::cmd("XPENDING")
        .arg(key(facility))
        .arg(group)
        .query(&mut redis.connection())
        .unwrap();
    summary.0
}

fn stream_status(cfg: &std::path::Path) -> serde_json::Value {
    let out: Outcome = cli_cfg(cfg, &["status", "--json"]).into();
    // (Null while status cannot say, e.g. the database is being opened.)
    serde_json::from_str::<serde_json::Value>(out.stdout.trim())
        .map_or(serde_json::Value::Null, |st| {
            st["facility"]["ledger_stream"].clone()
        })
}

/// Restart the gateway and wait for its first trim (at its live lane's
/// first pass) to be recorded.
fn restart_and_await_trim(g: &mut Gateway) -> serde_json::Value {
    g.stop();
    let before = chrono::Utc::now().timestamp_millis();
    g.start();
    let mut seen = serde_json::Value::Null;
    wait_until(
        "the restarted gateway to trim and record the stream",
        || {
            seen = stream_status(&g.cfg);
            seen["at_ms"].as_i64().is_some_and(|at| at >= before)
        },
    );
    seen
}

#[test]
fn the_gateway_trims_what_every_consumer_group_acknowledged_and_nothing_unread() {
    let root = tempdir("scangate-stream-");
    let redis = RedisServer::start(&root.path().join("redis"), &[]);
    let mut g = Gateway::roaming(root.path(), "gw-a", &redis);
    g.edit_config(|t| t + "ledger_stream_keep_days = 0\n");
    g.start();
    wait_until("a WARN that no consumer group reads the stream", || {
        g.daemon()
            .log()
            .contains("no consumer group reads the facility ledger stream")
    });
    // (The status is recorded just after the WARN is logged.)
    let mut s = serde_json::Value::Null;
    wait_until("the stream's status recorded", || {
        s = stream_status(&g.cfg);
        s["groups"].is_array()
    });
    assert_eq!(s["groups"].as_array().map(Vec::len), Some(0), "{s}");
    for i in 0..3 {
        g.send(&dscsa(&format!("ST{i}")));
    }
    wait_until("3 entries in the facility ledger", || {
        redis.ledger("test-pharmacy").len() == 3
    });
    // A group that never reads, and one that reads everything.
    redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(key("test-pharmacy"))
        .arg("audit")
        .arg("0")
        .query::<()>(&mut redis.connection())
        .unwrap();
    let inventory = Follower::start(&g.cfg, "inventory");
    let lines = inventory.take(3);
    assert_eq!(lines[0]["scan_type"], "dispense", "{lines:?}");
    assert!(
        lines.iter().all(|l| l["scan_uuid"].is_string()),
        "{lines:?}"
    );
    wait_until("inventory's entries acknowledged", || {
        pending(&redis, "test-pharmacy", "inventory") == 0
    });
    drop(inventory);

    // The gateway trims: `audit` has read nothing, so everything stays.
    let s = restart_and_await_trim(&mut g);
    assert_eq!(s["length"], 3, "{s}");
    assert_eq!(redis.ledger("test-pharmacy").len(), 3);
    let group = |s: &serde_json::Value, name: &str| {
        s["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == name)
            .cloned()
            .unwrap()
    };
    assert!(
        group(&s, "inventory")["oldest_unacked_age_s"].is_null(),
        "{s}"
    );
    assert!(
        group(&s, "audit")["oldest_unacked_age_s"]
            .as_f64()
            .is_some(),
        "{s}"
    );
    assert!(s["oldest_unacked_age_s"].as_f64().is_some(), "{s}");
    let text: Outcome = cli_cfg(&g.cfg, &["status"]).into();
    assert!(
        text.stdout.contains("facility ledger stream: 3 entries"),
        "{text}"
    );

    // `audit` reads and acknowledges them too: now they go.
    let audit = Follower::start(&g.cfg, "audit");
    audit.take(3);
    wait_until("audit's entries acknowledged", || {
        pending(&redis, "test-pharmacy", "audit") == 0
    });
    drop(audit);
    let s = restart_and_await_trim(&mut g);
    assert_eq!(s["length"], 0, "{s}");
    assert!(redis.ledger("test-pharmacy").is_empty());
    assert!(
        g.daemon().log().contains("trimmed 3 entries"),
        "{}",
        g.daemon().log()
    );
    // (The local ledger keeps every commit of this gateway.)
    let out: Outcome = cli_cfg(&g.cfg, &["outbox", "status", "--json"]).into();
    let st: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(st["committed"], 3);
    g.stop();
}

fn used_memory(redis: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut redis.connection())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// A facility Redis full of acknowledged ledger entries (`noeviction`
/// refuses every new claim) is trimmed all the same: XTRIM is allowed
/// past `maxmemory`, and the room comes back.
#[test]
fn a_full_redis_is_trimmed_and_takes_writes_again() {
    let redis = RedisServer::start_temp(&["--maxmemory-policy", "noeviction"]);
    let mut f = connect(&redis);
    let mut c = redis.connection();
    let filler = "x".repeat(400);
    let mut pipe = redis::pipe();
    for _ in 0..3000 {
        pipe.cmd("XADD")
            .arg(key(FACILITY))
            .arg("*")
            .arg("scan_uuid")
            .arg(&filler)
            .ignore();
    }
    pipe.query::<()>(&mut c).unwrap();
    f.ensure_ledger_group("inventory").unwrap();
    loop {
        let page = f
            .read_ledger_group("inventory", "c1", false, 1000, 10)
            .unwrap();
        if page.is_empty() {
            break;
        }
        f.ack_ledger("inventory", &ids(&page)).unwrap();
    }
    let full = used_memory(&redis);
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(full - 1024)
        .query::<()>(&mut c)
        .unwrap();
    let refused = redis::cmd("XADD")
        .arg(key(FACILITY))
        .arg("*")
        .arg("f")
        .arg("v")
        .query::<String>(&mut c);
    assert!(refused.is_err_and(|e| e.code() == Some("OOM")));
    let s = f.trim_ledger(0).unwrap();
    assert_eq!((s.trimmed, s.length), (3000, 0), "{s:?}");
    assert!(used_memory(&redis) < full - 1024);
    redis::cmd("XADD")
        .arg(key(FACILITY))
        .arg("*")
        .arg("f")
        .arg("v")
        .query::<String>(&mut c)
        .expect("room again after the trim");
}

#[test]
fn follow_needs_a_consumer_or_a_group_and_a_facility_redis() {
    let dir = tempdir("scangate-follow-");
    let cfg = write_config(dir.path(), &dir.path().join("state"), 3000, &[]);
    let out: Outcome = cli_cfg(&cfg, &["ledger", "export", "--follow"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("--consumer NAME"), "{out}");
    let out: Outcome = cli_cfg(&cfg, &["ledger", "export", "--follow", "--group", "g"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("no [redis] section"), "{out}");
}

/// `ledger export --follow` outlives a restart of the facility Redis: it
/// reconnects and goes on (what it had not acknowledged comes again).
#[test]
fn follow_reconnects_after_the_facility_redis_restarts() {
    let root = tempdir("scangate-follow-");
    let mut redis = RedisServer::start(
        &root.path().join("redis"),
        &["--appendonly", "yes", "--appendfsync", "always"],
    );
    let g = Gateway::roaming(root.path(), "gw-a", &redis);
    let mut c = redis.connection();
    let add = |c: &mut redis::Connection, uuid: &str| {
        redis::cmd("XADD")
            .arg(key("test-pharmacy"))
            .arg("*")
            .arg("scan_uuid")
            .arg(uuid)
            .query::<String>(c)
            .unwrap()
    };
    add(&mut c, "before-1");
    add(&mut c, "before-2");
    let follower = Follower::start(&g.cfg, "inventory");
    let got: Vec<_> = follower.take(2);
    assert_eq!(got[1]["scan_uuid"], "before-2", "{got:?}");
    redis.restart();
    wait_until("the restarted Redis to answer", || redis.answers());
    add(&mut redis.connection(), "after");
    loop {
        let line = follower.take(1).remove(0);
        let uuid = line["scan_uuid"].as_str().unwrap().to_string();
        if uuid == "after" {
            break;
        }
        assert!(uuid.starts_with("before-"), "{line}");
    }
    wait_until("everything acknowledged", || {
        pending(&redis, "test-pharmacy", "inventory") == 0
    });
}
