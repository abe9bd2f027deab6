//! The claim script lost from the server's cache (`SCRIPT FLUSH` by another
//! client, a failover to a node that never had it) while gateways run: it
//! is loaded once per connection, so a round whose first call meets
//! `NOSCRIPT` loads it again and resends the round, within the round; one
//! that meets it after a call ran fails and is claimed again by UUID.
//! Every pick is still claimed exactly once. A `redis-server` of each
//! test's own (and, for the failover, a proxy in Python).

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
        .map(|i| {
            claim(
                leaked(format!("r{i}")),
                leaked(format!("k{}", i % 150)),
                i as i64,
            )
        })
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
/// failed round (no outage is logged), and a reload is logged.
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
    // The cache is the server's: after a flush, whichever gateway claims
    // first meets NOSCRIPT and loads the script for both.
    let logs = [a.daemon().log(), b.daemon().log()];
    assert!(
        logs.iter().any(|l| l.contains("loaded it again")),
        "{}\n{}",
        a.daemon().log_digest(),
        b.daemon().log_digest()
    );
    for g in [&a, &b] {
        assert!(
            !g.daemon().log().contains("facility Redis unavailable"),
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

/// A failover behind a proxy that keeps the connection: the round's first
/// call runs on the old primary, then the proxy switches to the new one,
/// which never had the script, and the second call is refused
/// `NOSCRIPT`. The round must fail (the first call's decision may be lost
/// with the old primary) and be claimed again by UUID on the new one; an
/// echo of its pick is then suppressed there. (Resending only the refused
/// call within the round took the first call's commit as made, and the
/// echo committed a second time on the new primary: a review showed it.)
#[test]
fn a_noscript_after_a_call_that_ran_fails_the_round_and_no_pick_is_doubled() {
    let old = RedisServer::start_temp(&[]);
    let new = RedisServer::start_temp(&[]);
    let port = free_port();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/util/switch_proxy.py");
    let mut proxy = std::process::Command::new("python3")
        .arg(script)
        .args([port, old.port, new.port, 1].map(|p| p.to_string()))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 for the proxy");
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(proxy.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready.trim(), "ready");
    let connect = |url: String| {
        Facility::connect(
            &url,
            "f1",
            3000,
            Duration::from_secs(72 * 3600),
            Duration::from_secs(2),
            Duration::from_secs(5),
        )
        .unwrap()
    };
    let mut gw1 = connect(format!("redis://127.0.0.1:{port}/"));
    // Two calls: X, then Z with other field names.
    let mut z = claim("Z", "kz", 10);
    z.fields.pop();
    let round = [claim("X", "kx", 0), z];
    let first = gw1.claim_batch(&round);
    let _ = proxy.kill();
    let _ = proxy.wait();
    assert!(first.is_err(), "the round was taken: {first:?}");
    // The claimer connects again (to the new primary) and claims by UUID.
    let mut again = connect(new.url());
    assert_eq!(
        again.claim_batch(&round).unwrap(),
        [Outcome::Committed, Outcome::Committed]
    );
    // Another gateway's read of X's label 150 ms later: an echo.
    let mut gw2 = connect(new.url());
    assert_eq!(
        gw2.claim_batch(&[claim("Y", "kx", 150)]).unwrap(),
        [Outcome::Suppressed { twin: "X".into() }]
    );
    assert_eq!(new.ledger("f1").len(), 2, "X and Z, once each");
}
