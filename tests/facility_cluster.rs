//! A facility store that is a Redis Cluster (`[redis] cluster`): 3
//! primaries with a replica each, started by each test on free ports. A
//! lane talks to the primary of its facility's slot on one connection,
//! follows `ASK` and `MOVED` (a resharding) and a failover without losing
//! or doubling a claim, and confirms on that shard's replicas.

use crate::util::*;
use scangate::facility::cluster::facility_slot;
use scangate::facility::{Facility, Outcome};
use std::collections::HashMap;
use std::time::Duration;

/// A facility connection as the claimer makes one (window 3 s, retention
/// 1 h).
fn connect(cluster: &RedisCluster, facility: &str) -> Facility {
    let settings = cluster.settings();
    scangate::facility::connect(&settings, facility, 3000, Duration::from_secs(3600))
        .expect("connect to the cluster")
}

/// Claims `u<i>` of labels `k<i>` for `i` in `range`, a minute apart.
fn claims(range: std::ops::Range<i64>) -> Vec<scangate::facility::Claim<'static>> {
    range
        .map(|i| claim_at(leaked(format!("u{i}")), leaked(format!("k{i}")), i * 60_000))
        .collect()
}

/// Every scan UUID of `facility`'s ledger, each with how often it is there.
fn ledger_counts(cluster: &RedisCluster, facility: &str) -> HashMap<String, usize> {
    let mut n = HashMap::new();
    for (uuid, _) in cluster.ledger(facility) {
        *n.entry(uuid).or_default() += 1;
    }
    n
}

#[test]
fn a_claim_round_follows_ask_and_moved_without_losing_or_doubling() {
    follows_ask_and_moved(&RedisCluster::start(&[]));
}

#[test]
fn a_claim_round_follows_ask_and_moved_on_valkey_too() {
    if RedisServer::valkey_installed() {
        follows_ask_and_moved(&RedisCluster::start_binary("valkey-server", &[]));
    }
}

/// A round and a lookup follow `ASK` while the facility's slot migrates,
/// new claims wait it out, and a connection made before it ends follows
/// the `MOVED`: each claim once in the ledger.
fn follows_ask_and_moved(cluster: &RedisCluster) {
    let f = "pharmacy-moving";
    let slot = facility_slot(f);
    let mut before = connect(cluster, f);
    let first = claims(0..5);
    let decided = before.claim_batch(&first).unwrap();
    assert!(
        decided.iter().all(|o| *o == Outcome::Committed),
        "{decided:?}"
    );
    let from = cluster.owner(f);
    let to = *cluster.primaries().iter().find(|&&p| p != from).unwrap();

    // The slot migrates: its keys are on `to` now, and `from` answers
    // `ASK` for them.
    cluster.begin_migration(slot, from, to);
    assert!(cluster.migrate_keys(slot, from, to) >= 10);
    // A lookup follows the ASK (ASKING, then the command, on `to`); so
    // does a round that only asks again for decisions made (all its keys
    // are on `to`): each answered as before, none made again.
    assert!(before.has_decision("u3").unwrap());
    let again = before.claim_batch(&first).unwrap();
    assert!(again.iter().all(|o| *o == Outcome::Committed), "{again:?}");
    assert!(
        before.fresh().iter().all(|made| !made),
        "{:?}",
        before.fresh()
    );
    // New claims touch keys on neither node yet: both refuse (TRYAGAIN,
    // nothing ran) until the migration ends, and the round fails having
    // claimed nothing.
    let new = claims(5..10);
    assert!(before.claim_batch(&new).is_err());
    drop(before);

    // A connection made before the migration ends, to `from`...
    let mut stale = connect(cluster, f);
    assert!(
        stale
            .server()
            .contains(&cluster.nodes[from].port.to_string())
    );
    cluster.end_migration(slot, to);
    // ...follows the MOVED to `to`, where the round is claimed once.
    let decided = stale.claim_batch(&new).unwrap();
    assert!(
        decided.iter().all(|o| *o == Outcome::Committed),
        "{decided:?}"
    );
    assert!(stale.fresh().iter().all(|made| *made));
    assert!(
        stale.server().contains(&cluster.nodes[to].port.to_string()),
        "{}",
        stale.server()
    );
    // Every claim once in the facility ledger, now on `to`.
    let counts = ledger_counts(cluster, f);
    assert_eq!(cluster.owner(f), to);
    assert_eq!(counts.len(), 10, "{counts:?}");
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    // Other facilities' slots never moved: a connection for one goes to
    // its own primary, without a redirect.
    let other = (0..)
        .map(|i| format!("pharmacy-{i}"))
        .find(|g| cluster.owner(g) == from)
        .unwrap();
    let mut there = connect(cluster, &other);
    assert!(
        there
            .server()
            .contains(&cluster.nodes[from].port.to_string())
    );
    assert!(there.claim_batch(&claims(0..2)).is_ok());
}

#[test]
fn a_round_refused_after_a_call_that_ran_fails_and_is_claimed_again_by_uuid() {
    let cluster = RedisCluster::start(&[]);
    let f = "pharmacy-split";
    let slot = facility_slot(f);
    let mut conn = connect(&cluster, f);
    let first = claims(0..128); // one call
    assert!(conn.claim_batch(&first).is_ok());
    let from = cluster.owner(f);
    let to = *cluster.primaries().iter().find(|&&p| p != from).unwrap();
    cluster.begin_migration(slot, from, to);
    // Two calls: the first only asks again for decisions whose keys are
    // all still on `from` (it runs there), the second claims new scans
    // (keys split between the nodes: TRYAGAIN). The round is not sent
    // again (its first call ran): it fails.
    let round = claims(0..130);
    let evalsha = || -> (i64, i64) {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut cluster.nodes[from].connection())
            .unwrap();
        let line = info
            .lines()
            .find(|l| l.starts_with("cmdstat_evalsha:"))
            .unwrap()
            .to_string();
        let field = |name: &str| -> i64 {
            let at = line.find(&format!("{name}=")).unwrap() + name.len() + 1;
            line[at..].split(',').next().unwrap().parse().unwrap()
        };
        (field("calls"), field("rejected_calls"))
    };
    let before = evalsha();
    let err = conn.claim_batch(&round).unwrap_err();
    assert!(err.to_string().contains("rehashing of slot"), "{err}");
    // One call ran, one was refused, and nothing was sent again.
    let after = evalsha();
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (1, 1),
        "{before:?} {after:?}"
    );
    assert_eq!(cluster.nodes[from].ledger(f).len(), 128);
    drop(conn);
    // Claimed again by UUID once the slot is settled: the first 128
    // answered as before, the two new ones committed, each once.
    cluster.migrate_keys(slot, from, to);
    cluster.end_migration(slot, to);
    let mut conn = connect(&cluster, f);
    let decided = conn.claim_batch(&round).unwrap();
    assert!(decided.iter().all(|o| *o == Outcome::Committed));
    let made: Vec<bool> = conn.fresh().to_vec();
    assert_eq!(made.iter().filter(|m| **m).count(), 2, "{made:?}");
    let counts = ledger_counts(&cluster, f);
    assert_eq!(counts.len(), 130);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
}

/// `n` facility names whose slots are on `n` different primaries.
fn spread(cluster: &RedisCluster, n: usize) -> Vec<String> {
    let mut owners = Vec::new();
    let mut names = Vec::new();
    for i in 0.. {
        let name = format!("pharmacy-{i}");
        let owner = cluster.owner(&name);
        if !owners.contains(&owner) {
            owners.push(owner);
            names.push(name);
        }
        if names.len() == n {
            return names;
        }
    }
    unreachable!()
}

/// Picks `range` of a roaming scanner (labels SN…), each heard by both
/// gateways, every third read twice by `a` (a double-fire); how many
/// transmissions `a` heard.
fn shift(a: &mut Gateway, b: &mut Gateway, range: std::ops::Range<usize>) -> i64 {
    let mut heard_a = 0;
    for i in range {
        let label = dscsa(&format!("SN{i:03}"));
        a.send(&label);
        b.send(&label);
        heard_a += 1;
        if i % 3 == 0 {
            a.send(&label);
            heard_a += 1;
        }
    }
    heard_a
}

/// `facility`'s ledger holds exactly one entry for each of `picks` picks.
fn assert_each_pick_once_in(cluster: &RedisCluster, facility: &str, picks: usize) {
    let mut per_pick: HashMap<String, usize> = HashMap::new();
    for (_, key) in cluster.ledger(facility) {
        *per_pick.entry(key).or_default() += 1;
    }
    assert_eq!(per_pick.len(), picks, "{facility}: {per_pick:?}");
    assert!(
        per_pick.values().all(|&n| n == 1),
        "{facility}: a pick was committed twice: {per_pick:?}"
    );
}

#[test]
fn gateways_of_facilities_across_the_cluster_record_each_pick_once() {
    let cluster = RedisCluster::start(&[]);
    let root = tempdir("scangate-cluster-gw-");
    let facilities = spread(&cluster, 3);
    let mut pairs: Vec<(Gateway, Gateway)> = facilities
        .iter()
        .map(|f| {
            let mut a = Gateway::in_cluster(root.path(), &format!("{f}-a"), f, &cluster);
            let mut b = Gateway::in_cluster(root.path(), &format!("{f}-b"), f, &cluster);
            a.start();
            b.start();
            (a, b)
        })
        .collect();
    let heard: Vec<i64> = pairs.iter_mut().map(|(a, b)| shift(a, b, 0..9)).collect();
    for ((a, b), heard_a) in pairs.iter().zip(heard) {
        wait_all_decided(&a.cfg, heard_a);
        wait_all_decided(&b.cfg, 9);
    }
    for f in &facilities {
        assert_each_pick_once_in(&cluster, f, 9);
    }
    for (a, b) in &mut pairs {
        // Confirmed on the facility's shard: its primary's one replica.
        assert!(
            a.daemon()
                .log()
                .contains("once 1 of 1 connected replicas confirmed them"),
            "{}",
            a.daemon().log()
        );
        a.stop();
        b.stop();
    }
}

#[test]
fn a_busy_facility_resharded_during_the_shift_loses_and_doubles_nothing() {
    let cluster = RedisCluster::start(&[]);
    let root = tempdir("scangate-cluster-reshard-");
    let f = "pharmacy-busy";
    let mut a = Gateway::in_cluster(root.path(), "gw-a", f, &cluster);
    let mut b = Gateway::in_cluster(root.path(), "gw-b", f, &cluster);
    a.start();
    b.start();
    let mut heard_a = shift(&mut a, &mut b, 0..6);
    wait_all_decided(&a.cfg, heard_a);
    wait_all_decided(&b.cfg, 6);
    let (slot, from) = (facility_slot(f), cluster.owner(f));
    let to = *cluster.primaries().iter().find(|&&p| p != from).unwrap();
    // The slot migrates while the gateways claim: first its keys move
    // (ASK, and TRYAGAIN for claims whose keys are split), then the slot
    // (MOVED).
    cluster.begin_migration(slot, from, to);
    heard_a += shift(&mut a, &mut b, 6..9);
    assert!(cluster.migrate_keys(slot, from, to) > 0);
    heard_a += shift(&mut a, &mut b, 9..12);
    cluster.end_migration(slot, to);
    heard_a += shift(&mut a, &mut b, 12..18);
    wait_all_decided(&a.cfg, heard_a);
    wait_all_decided(&b.cfg, 18);
    assert_eq!(cluster.owner(f), to);
    assert_each_pick_once_in(&cluster, f, 18);
    // Nothing of the facility is left on the old primary.
    let left: i64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query(&mut cluster.nodes[from].connection())
        .unwrap();
    assert_eq!(left, 0);
    for g in [&a, &b] {
        audit_verify(&g.cfg);
    }
    a.stop();
    b.stop();
}

#[test]
fn a_cluster_failover_keeps_confirmed_claims_and_replays_in_flight_scans_once() {
    let mut cluster = RedisCluster::start(&[]);
    let root = tempdir("scangate-cluster-failover-");
    let f = "pharmacy-failover";
    let mut a = Gateway::in_cluster(root.path(), "gw-a", f, &cluster);
    let mut b = Gateway::in_cluster(root.path(), "gw-b", f, &cluster);
    a.start();
    b.start();
    let mut heard_a = shift(&mut a, &mut b, 0..6);
    wait_all_decided(&a.cfg, heard_a);
    wait_all_decided(&b.cfg, 6);
    let confirmed: Vec<(String, String)> = cluster.ledger(f);
    let first = cluster.owner(f);
    let promoted = cluster.replica_of(first);
    // A manual failover (CLUSTER FAILOVER on the replica) amid the shift:
    // the old primary answers MOVED, the gateways follow.
    heard_a += shift(&mut a, &mut b, 6..9);
    cluster.failover(promoted);
    heard_a += shift(&mut a, &mut b, 9..12);
    wait_all_decided(&a.cfg, heard_a);
    wait_all_decided(&b.cfg, 12);
    assert_eq!(cluster.owner(f), promoted);
    assert_each_pick_once_in(&cluster, f, 12);
    // SCRIPT LOAD is not replicated: the gateways loaded the claim script
    // on the promoted node themselves.
    let sha = redis::Script::new(scangate::facility::CLAIM_LUA)
        .get_hash()
        .to_string();
    let there: Vec<i64> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(&sha)
        .query(&mut cluster.nodes[promoted].connection())
        .unwrap();
    assert_eq!(there, [1]);
    // Now the promoted primary is killed (kill -9): its replica, the first
    // primary, takes over once the cluster sees it failed.
    heard_a += shift(&mut a, &mut b, 12..15);
    cluster.nodes[promoted].kill9();
    heard_a += shift(&mut a, &mut b, 15..18);
    wait_until("the first primary to be promoted again", || {
        cluster.role(first) == "master"
    });
    heard_a += shift(&mut a, &mut b, 18..21);
    wait_all_decided(&a.cfg, heard_a);
    wait_all_decided(&b.cfg, 21);
    // Claims confirmed before either failover are there after both; the
    // scans in flight were replayed once each.
    let after = cluster.ledger(f);
    for entry in &confirmed {
        assert!(after.contains(entry), "{entry:?} lost");
    }
    assert_each_pick_once_in(&cluster, f, 21);
    a.stop();
    b.stop();
}

/// Receipts of serialised packages (the suspect check) in a cluster: each
/// facility's on the primary of its own slot, the first receipt of a
/// package named to a later read there and to the read itself asked
/// again, and a package received in one facility unknown to another (the
/// control: receipts are per facility).
#[test]
fn receipts_are_kept_per_facility_on_its_own_primary() {
    use scangate::checks::received::Receipt;
    let cluster = RedisCluster::start(&[]);
    let facilities = spread(&cluster, 2);
    let keep = Duration::from_secs(3600);
    // (Captured now: a receipt is kept until the retention after its
    // capture.)
    let now = chrono::Utc::now().timestamp_millis();
    let receipt = |scan_uuid: &'static str, after_ms: i64| Receipt {
        gtin: "00300676382302",
        serial: "SN0001",
        scan_uuid,
        at_ms: now + after_ms,
        scanner: "dock",
    };
    let mut first = connect(&cluster, &facilities[0]);
    let kept = first
        .receive_serials("gw-a", &[receipt("u1", 0)], keep)
        .unwrap();
    assert_eq!(kept, [None], "the first receipt, kept");
    let later = first
        .receive_serials("gw-b", &[receipt("u2", 900_000), receipt("u1", 0)], keep)
        .unwrap();
    assert_eq!(
        later[0]
            .as_ref()
            .map(|r| (r.scan_uuid.as_str(), r.gateway.as_str())),
        Some(("u1", "gw-a"))
    );
    assert_eq!(later[1].as_ref().map(|r| r.scan_uuid.as_str()), Some("u1"));
    let mut other = connect(&cluster, &facilities[1]);
    let own = other
        .receive_serials("gw-c", &[receipt("u3", 900_000)], keep)
        .unwrap();
    assert_eq!(own, [None], "another facility's: a first receipt there");
    for f in &facilities {
        let key = format!("scangate:{{{f}}}:rcv:00300676382302:SN0001");
        let mut c = cluster.nodes[cluster.owner(f)].connection();
        let held: Option<String> = redis::cmd("GET").arg(&key).query(&mut c).unwrap();
        assert!(held.is_some(), "{key} not on its slot's primary");
    }
}
