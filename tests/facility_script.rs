//! The claim script lost from the server's cache (`SCRIPT FLUSH` by another
//! client, a failover to a node that never had it) while gateways run: it
//! is loaded once per connection, so the round that meets `NOSCRIPT`
//! loads it again and resends what was refused, within the round. Every
//! pick is still claimed exactly once. A `redis-server` of each test's own.

use crate::util::claim_at as claim;
use crate::util::*;
use scangate::facility::{Claim, Facility, Outcome};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn flush_scripts(redis: &RedisServer) {
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query::<()>(&mut redis.connection())
        .unwrap();
}

/// A round of three calls whose script the server loses while the round is
/// in flight (its calls held by `CLIENT PAUSE WRITE`, the flush let
/// through): every call is refused `NOSCRIPT`, and the round reloads the
/// script and resends them. Each claim is decided once, in the order
/// sent — the echoes in the second call name their twins in the first —
/// and each decision is this round's own.
#[test]
fn a_round_whose_script_was_flushed_in_flight_reloads_it_and_decides_each_claim_once() {
    let server = RedisServer::start_temp(&[]);
    let mut gw = Facility::connect(
        &server.url(),
        "f1",
        3000,
        Duration::from_secs(72 * 3600),
        Duration::from_secs(2),
        Duration::from_secs(5),
    )
    .unwrap();
    gw.check_server().unwrap();
    // 150 new labels, then an echo of each 150 ms later: calls of 128,
    // 128 and 44 claims.
    let round: Vec<Claim> = (0..300)
        .map(|i| claim(&format!("r{i}"), &format!("k{}", i % 150), i as i64))
        .collect();
    let mut admin = server.connection();
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(10_000)
        .arg("WRITE")
        .query::<()>(&mut admin)
        .unwrap();
    let sent = gw.send_claims(&round).unwrap();
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query::<()>(&mut admin)
        .unwrap();
    redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query::<()>(&mut admin)
        .unwrap();
    let got = gw.recv_claims(sent).unwrap();
    let want: Vec<Outcome> = (0..300)
        .map(|i| match i {
            0..150 => Outcome::Committed,
            _ => Outcome::Suppressed {
                twin: format!("r{}", i - 150),
            },
        })
        .collect();
    assert_eq!(got, want);
    assert!(gw.fresh().iter().all(|&f| f), "{:?}", gw.fresh());
    assert_eq!(server.ledger("f1").len(), 150);
    // Loaded again for the connection: the next round runs as usual.
    assert_eq!(
        gw.claim_batch(&[claim("n1", "kn", 5000)]).unwrap(),
        [Outcome::Committed]
    );
}

/// Send picks `from..to` of a roaming scanner to both gateways, every
/// third one read twice by `a`; the transmissions sent.
fn picks(a: &mut Gateway, b: &mut Gateway, from: usize, to: usize) -> (i64, i64) {
    let (mut on_a, mut on_b) = (0, 0);
    for i in from..to {
        let label = dscsa(&format!("SN{i:03}"));
        a.send(&label);
        b.send(&label);
        on_a += 1;
        on_b += 1;
        if i % 3 == 0 {
            a.send(&label);
            on_a += 1;
        }
    }
    (on_a, on_b)
}

/// Two running gateways of one facility whose Redis loses the claim
/// script between their rounds (four times), and once again over and
/// over while picks arrive: every pick is committed exactly once in the
/// facility ledger, once over both gateways' outboxes, nothing is left
/// unresolved, and the trails verify. The flushes between rounds cost no
/// failed round (no outage is logged), and the reload is logged.
#[test]
fn a_script_cache_flushed_under_running_gateways_loses_and_doubles_no_claim() {
    let (root, redis) = facility(&[]);
    let mut a = Gateway::roaming(root.path(), "gw-a", &redis);
    let mut b = Gateway::roaming(root.path(), "gw-b", &redis);
    a.start();
    b.start();
    let (mut on_a, mut on_b) = (0, 0);
    for batch in 0..4 {
        let (sa, sb) = picks(&mut a, &mut b, batch * 10, batch * 10 + 10);
        (on_a, on_b) = (on_a + sa, on_b + sb);
        wait_all_decided(&a.cfg, on_a);
        wait_all_decided(&b.cfg, on_b);
        flush_scripts(&redis);
    }
    for g in [&a, &b] {
        let log = g.daemon().log();
        assert!(
            log.contains("loaded it again") && !log.contains("facility Redis unavailable"),
            "{}",
            g.daemon().log_digest()
        );
    }
    // Flushed over and over while picks arrive: a round may meet NOSCRIPT
    // again after its reload, and then fails and is claimed again.
    let stop = Arc::new(AtomicBool::new(false));
    let flusher = {
        let stop = stop.clone();
        let mut c = redis.connection();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                redis::cmd("SCRIPT")
                    .arg("FLUSH")
                    .query::<()>(&mut c)
                    .unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let (sa, sb) = picks(&mut a, &mut b, 40, 80);
    (on_a, on_b) = (on_a + sa, on_b + sb);
    stop.store(true, Ordering::SeqCst);
    flusher.join().unwrap();
    wait_all_decided(&a.cfg, on_a);
    wait_all_decided(&b.cfg, on_b);
    assert_each_pick_once(&redis, 80);
    assert_eq!(a.count("committed") + b.count("committed"), 80);
    assert_eq!(a.count("unresolved") + b.count("unresolved"), 0);
    for g in [&a, &b] {
        audit_verify(&g.cfg);
    }
    // The control: the same check fails on a ledger that doubled a pick
    // or lost one.
    let key = "scangate:{test-pharmacy}:ledger";
    let mut c = redis.connection();
    let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(&mut c)
        .unwrap();
    let (first_id, fields) = entries[0].clone();
    let mut again = redis::cmd("XADD");
    again.arg(key).arg("*");
    for (name, value) in &fields {
        again.arg(name).arg(value);
    }
    let doubled: String = again.query(&mut c).unwrap();
    let caught = |what: &str| {
        let r = std::panic::catch_unwind(|| assert_each_pick_once(&redis, 80));
        assert!(r.is_err(), "a {what} pick went unnoticed");
    };
    caught("doubled");
    let _: i64 = redis::cmd("XDEL")
        .arg(key)
        .arg(&doubled)
        .arg(&first_id)
        .query(&mut c)
        .unwrap();
    caught("lost");
    a.stop();
    b.stop();
}
