//! Gateways of a facility Redis: a [`Gateway`] of its own directory under
//! the test's, with one ACKing PTY scanner (by default `roaming`, declared
//! `shared`: one scanner heard by every gateway), pointed at a
//! redis-server of the test's own; and what the facility tests check of
//! them.

use super::daemon::{ScannerSpec, count, tempdir, wait_all_decided};
use super::gateway::Gateway;
use super::redis_server::RedisServer;
use super::scans::dscsa;
use scangate::facility::Claim;
use std::collections::HashMap;
use std::path::Path;

impl Gateway {
    /// Gateway `name` (its directory `root/name`) of facility
    /// `test-pharmacy` at `redis`, hearing the shared scanner `roaming`;
    /// not started.
    pub fn roaming(root: &Path, name: &str, redis: &RedisServer) -> Gateway {
        Gateway::in_facility(root, name, redis, "roaming", true)
    }

    /// [`Gateway::roaming`] with scanner `scanner`, declared `shared` or not.
    pub fn in_facility(
        root: &Path,
        name: &str,
        redis: &RedisServer,
        scanner: &str,
        shared: bool,
    ) -> Gateway {
        Gateway::builder_in(&root.join(name))
            .id(name)
            .pty(
                ScannerSpec::named(scanner)
                    .ack()
                    .with(&format!("shared = {shared}")),
            )
            .redis(redis)
            .build()
    }
}

/// A temporary directory for a test's gateways and a redis-server of the
/// test's own in it, started with `extra` arguments.
pub fn facility(extra: &[&str]) -> (tempfile::TempDir, RedisServer) {
    let root = tempdir("scangate-fac-");
    let redis = RedisServer::start(&root.path().join("redis"), extra);
    (root, redis)
}

/// A redis-server of the test's own and one started gateway, `gw-a`, using
/// it (the temporary directory holds both).
pub fn one_gateway() -> (tempfile::TempDir, RedisServer, Gateway) {
    let (root, redis) = facility(&[]);
    let mut g = Gateway::roaming(root.path(), "gw-a", &redis);
    g.start();
    (root, redis, g)
}

/// Wait until `committed + suppressed` scans are decided, with exactly
/// those counts, and one entry per commit in `redis`'s ledger.
pub fn assert_settled(g: &Gateway, redis: &RedisServer, committed: i64, suppressed: i64) {
    let st = wait_all_decided(&g.cfg, committed + suppressed);
    assert_eq!(
        (count(&st, "committed"), count(&st, "suppressed")),
        (committed, suppressed),
        "{st}"
    );
    assert_eq!(redis.ledger("test-pharmacy").len(), committed as usize);
}

/// The facility ledger in `redis` holds exactly one entry for each of
/// `picks` physical picks (entries grouped by content key).
pub fn assert_each_pick_once(redis: &RedisServer, picks: usize) {
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
pub fn roam(
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

/// `s` for the rest of the test: a [`Claim`] borrows its names.
pub fn leaked(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// A claim of scan `uuid` of label `key`, captured `at_ms` after a fixed
/// instant, with three ledger fields.
pub fn claim_at<'a>(uuid: &'a str, key: &'a str, at_ms: i64) -> Claim<'a> {
    Claim {
        scan_uuid: uuid,
        content_key: key,
        captured_ms: 1_800_000_000_000 + at_ms,
        window_ms: None,
        fields: vec![
            ("scan_uuid", uuid.into()),
            ("gateway", "gw".into()),
            ("content_key", key.into()),
        ],
    }
}
