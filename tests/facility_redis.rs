//! The facility claim script against a real `redis-server` that each test
//! starts on a free port and stops.

use crate::util::{RedisServer, claim_at as claim, free_port, leaked, wait_until};
use scangate::facility::{Claim, Facility, FacilityError, Outcome};
use std::collections::HashMap;
use std::time::Duration;

const WINDOW_MS: i64 = 3000;

fn gateway(server: &RedisServer) -> Facility {
    gateway_with(server, WINDOW_MS, Duration::from_secs(72 * 3600))
}

/// A checked gateway of facility `f1` with its own window and retention.
fn gateway_with(server: &RedisServer, window_ms: i64, retention: Duration) -> Facility {
    let mut f = connect(server, "f1", window_ms, retention);
    f.check_server().unwrap();
    f
}

/// A connection to `server` as a gateway of `facility`, not yet checked.
fn connect(server: &RedisServer, facility: &str, window_ms: i64, retention: Duration) -> Facility {
    Facility::connect(
        &server.url(),
        facility,
        window_ms,
        retention,
        Duration::from_secs(2),
        Duration::from_secs(2),
    )
    .unwrap()
}

/// Delete `key` on `server`; how many keys went.
fn del(server: &RedisServer, key: &str) -> i64 {
    redis::cmd("DEL")
        .arg(key)
        .query(&mut server.connection())
        .unwrap()
}

/// The members of a seen set, by capture time.
fn seen(server: &RedisServer, key: &str) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(&mut server.connection())
        .unwrap()
}

fn xlen(server: &RedisServer) -> i64 {
    redis::cmd("XLEN")
        .arg("scangate:{f1}:ledger")
        .query(&mut server.connection())
        .unwrap()
}

#[test]
fn one_commit_per_pick_idempotent_by_uuid_and_by_window() {
    let server = RedisServer::start_temp(&[]);
    let mut gw = gateway(&server);
    let out = gw
        .claim_batch(&[
            claim("u1", "k1", 0),
            claim("u2", "k1", 40),   // double fire
            claim("u3", "k1", 2900), // re-scan
            claim("u4", "k1", 6000), // re-dispense after the window
            claim("u5", "k2", 10),   // another product
        ])
        .unwrap();
    let sup = |t: &str| Outcome::Suppressed { twin: t.into() };
    assert_eq!(
        out,
        [
            Outcome::Committed,
            sup("u1"),
            sup("u1"),
            Outcome::Committed,
            Outcome::Committed
        ]
    );
    assert_eq!(xlen(&server), 3);
    // A lost reply retried: the same UUIDs get their first decisions again,
    // and the ledger does not grow.
    let again = gw
        .claim_batch(&[claim("u1", "k1", 0), claim("u2", "k1", 40)])
        .unwrap();
    assert_eq!(again, [Outcome::Committed, sup("u1")]);
    assert_eq!(xlen(&server), 3);
}

/// A claim with its own, narrower echo window (a double-fire window, a
/// declared repeat) is judged by it; an ordinary claim of the
/// same label by the facility's, also against the narrow claim's commit;
/// a window wider than the facility's is cut to it. Two gateways' copies
/// of one narrow read are still one pick.
#[test]
fn a_claims_own_narrower_window_is_the_one_it_is_judged_by() {
    let server = RedisServer::start_temp(&[]);
    let mut a = gateway(&server);
    let mut b = gateway(&server);
    let narrow = |uuid: &'static str, at_ms: i64, w: i64| Claim {
        window_ms: Some(w),
        ..claim(uuid, "k", at_ms)
    };
    let sup = |t: &str| Outcome::Suppressed { twin: t.into() };
    assert_eq!(
        a.claim_batch(&[
            claim("a1", "k", 0),
            narrow("a2", 150, 300),   // a double-fire: an echo
            narrow("a3", 1010, 300),  // another item: a pick
            claim("a4", "k", 2000),   // the facility's window: an echo of the nearest
            narrow("a5", 9000, 9999), // cut to 3000: nothing within
        ])
        .unwrap(),
        [
            Outcome::Committed,
            sup("a1"),
            Outcome::Committed,
            sup("a3"),
            Outcome::Committed
        ]
    );
    // Gateway B heard the same reads (a shared scanner), 40 ms later.
    assert_eq!(
        b.claim_batch(&[narrow("b3", 1050, 300), narrow("b5", 9040, 300)])
            .unwrap(),
        [sup("a3"), sup("a5")]
    );
    assert_eq!(xlen(&server), 3);
}

#[test]
fn two_gateways_share_one_ledger() {
    let server = RedisServer::start_temp(&[]);
    let mut a = gateway(&server);
    let mut b = gateway(&server);
    assert_eq!(
        a.claim_batch(&[claim("a1", "k", 0)]).unwrap(),
        [Outcome::Committed]
    );
    assert_eq!(
        b.claim_batch(&[claim("b1", "k", 500)]).unwrap(),
        [Outcome::Suppressed { twin: "a1".into() }]
    );
    assert_eq!(xlen(&server), 1);
}

#[test]
fn every_key_but_the_ledger_expires_and_the_stream_holds_the_fields() {
    let server = RedisServer::start_temp(&[]);
    let mut gw = gateway(&server);
    gw.claim_batch(&[claim("u1", "k1", 0), claim("u2", "k1", 10)])
        .unwrap();
    let mut c = server.connection();
    let ttl =
        |c: &mut redis::Connection, k: &str| -> i64 { redis::cmd("PTTL").arg(k).query(c).unwrap() };
    assert!(ttl(&mut c, "scangate:{f1}:scan:u1") > 0);
    assert!(ttl(&mut c, "scangate:{f1}:scan:u2") > 0);
    assert!(ttl(&mut c, "scangate:{f1}:seen:k1") > 0);
    assert_eq!(ttl(&mut c, "scangate:{f1}:ledger"), -1);
    let entries: redis::Value = redis::cmd("XRANGE")
        .arg("scangate:{f1}:ledger")
        .arg("-")
        .arg("+")
        .query(&mut c)
        .unwrap();
    let text = format!("{entries:?}");
    assert!(
        text.contains("scan_uuid") && text.contains("u1") && text.contains("k1"),
        "{text}"
    );
}

#[test]
fn a_server_that_lost_its_script_cache_is_reloaded() {
    let server = RedisServer::start_temp(&[]);
    let mut gw = gateway(&server);
    gw.claim_batch(&[claim("u1", "k1", 0)]).unwrap();
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query::<()>(&mut server.connection())
        .unwrap();
    assert_eq!(
        gw.claim_batch(&[claim("u2", "k1", 100)]).unwrap(),
        [Outcome::Suppressed { twin: "u1".into() }]
    );
}

#[test]
fn an_evicting_server_is_refused_with_the_reason_and_the_fix() {
    let server = RedisServer::start_temp(&["--maxmemory-policy", "allkeys-lru"]);
    let mut f = connect(&server, "f1", WINDOW_MS, Duration::from_secs(3600));
    match f.check_server() {
        Err(e @ FacilityError::Misconfigured { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("allkeys-lru") && msg.contains("noeviction"),
                "{msg}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn an_unreachable_server_is_a_clear_retryable_error() {
    let port = free_port(); // nothing listens here
    let err = Facility::connect(
        &format!("redis://:secret@127.0.0.1:{port}/"),
        "f1",
        WINDOW_MS,
        Duration::from_secs(3600),
        Duration::from_millis(300),
        Duration::from_millis(300),
    )
    .err()
    .expect("nothing listens there");
    let msg = err.to_string();
    assert!(matches!(err, FacilityError::Unavailable { .. }), "{msg}");
    assert!(msg.contains(&port.to_string()), "{msg}");
    assert!(
        !msg.contains("secret"),
        "the password leaked into the message: {msg}"
    );
}

#[test]
fn one_batch_may_mix_ledger_field_sets_and_each_entry_keeps_its_own() {
    let server = RedisServer::start_temp(&[]);
    let mut gw = gateway(&server);
    let mut with_lot = claim("u2", "k2", 10);
    with_lot.fields.push(("lot", "L1".into()));
    let out = gw
        .claim_batch(&[claim("u1", "k1", 0), with_lot, claim("u3", "k3", 20)])
        .unwrap();
    assert_eq!(out, vec![Outcome::Committed; 3]);
    let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg("scangate:{f1}:ledger")
        .arg("-")
        .arg("+")
        .query(&mut server.connection())
        .unwrap();
    let fields: Vec<Vec<(String, String)>> = entries.into_iter().map(|(_, f)| f).collect();
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    assert_eq!(
        fields,
        vec![
            vec![
                pair("scan_uuid", "u1"),
                pair("gateway", "gw"),
                pair("content_key", "k1")
            ],
            vec![
                pair("scan_uuid", "u2"),
                pair("gateway", "gw"),
                pair("content_key", "k2"),
                pair("lot", "L1")
            ],
            vec![
                pair("scan_uuid", "u3"),
                pair("gateway", "gw"),
                pair("content_key", "k3")
            ],
        ]
    );
}

#[test]
fn capture_times_beyond_the_horizon_are_pruned_and_the_earliest_twin_is_named() {
    let server = RedisServer::start_temp(&[]);
    let mut gw = gateway(&server);
    let now = chrono::Utc::now().timestamp_millis();
    let hour = 3_600_000;
    let at = |uuid: &'static str, ms: i64| Claim {
        captured_ms: ms,
        ..claim(uuid, "kp", 0)
    };
    // A label re-dispensed over four days (retention 72 h).
    let out = gw
        .claim_batch(&[
            at("d1", now - 100 * hour),
            at("d2", now - 50 * hour),
            at("d3", now - 50 * hour + 1000), // echo of d2
            at("d4", now - 10 * hour),
            at("d5", now - 10 * hour - 500), // echo of d4, captured earlier
        ])
        .unwrap();
    let suppressed = |twin: &str| Outcome::Suppressed { twin: twin.into() };
    assert_eq!(
        out,
        vec![
            Outcome::Committed,
            Outcome::Committed,
            suppressed("d2"),
            Outcome::Committed,
            suppressed("d4"),
        ]
    );
    // d1 fell out of the horizon when d2 was committed; d2 and d4 remain.
    let members = seen(&server, "scangate:{f1}:seen:kp");
    assert_eq!(members, vec!["d2".to_string(), "d4".to_string()]);
    // A scan between d2 and d4, within the window of neither, commits; one
    // within both windows names the earliest.
    let out = gw
        .claim_batch(&[at("m1", now - 30 * hour), at("m2", now - 10 * hour + 2000)])
        .unwrap();
    assert_eq!(out, vec![Outcome::Committed, suppressed("d4")]);
    assert_eq!(xlen(&server), 4);
}

#[test]
fn a_gateway_with_another_window_or_retention_is_refused_and_claims_nothing() {
    let server = RedisServer::start_temp(&[]);
    let mut first = gateway(&server); // window 3 s, retention 72 h
    assert_eq!(
        first.claim_batch(&[claim("w1", "k", 2000)]).unwrap(),
        [Outcome::Committed]
    );
    let settings: HashMap<String, String> = redis::cmd("HGETALL")
        .arg("scangate:{f1}:settings")
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(settings["window_ms"], "3000");
    assert_eq!(settings["retention_ms"], (72 * 3_600_000).to_string());
    let ttl: i64 = redis::cmd("PTTL")
        .arg("scangate:{f1}:settings")
        .query(&mut server.connection())
        .unwrap();
    assert!(ttl > 0, "the settings expire like every key but the ledger");

    let refused = |e: FacilityError, theirs: &str| {
        let msg = e.to_string();
        assert!(
            matches!(e, FacilityError::SettingsDiffer { .. })
                && msg.contains("window_ms = 3000")
                && msg.contains(theirs)
                && msg.contains("DEL 'scangate:{f1}:settings'"),
            "{msg}"
        );
    };
    // At start-up: the server check refuses a narrower window, and a
    // shorter retention.
    for (window_ms, retention_h, theirs) in
        [(500, 72, "window_ms = 500"), (3000, 24, "retention 24 h")]
    {
        let mut other = connect(
            &server,
            "f1",
            window_ms,
            Duration::from_secs(retention_h * 3600),
        );
        refused(other.check_server().unwrap_err(), theirs);
        // A gateway that skipped the check (or started before the settings
        // were set) is refused by the claim itself, and nothing is recorded.
        refused(
            other.claim_batch(&[claim("n1", "k", 500)]).unwrap_err(),
            theirs,
        );
        assert!(seen(&server, "scangate:{f1}:seen:k") == ["w1"]);
        assert_eq!(xlen(&server), 1);
    }
    // Another facility on the same server has its own settings.
    let mut elsewhere = connect(&server, "f2", 500, Duration::from_secs(3600));
    elsewhere.check_server().unwrap();
    assert_eq!(
        elsewhere.claim_batch(&[claim("e1", "k", 0)]).unwrap(),
        [Outcome::Committed]
    );
    // The facility-wide change the message describes: the settings key is
    // deleted, and the first gateway to claim sets the new ones.
    del(&server, "scangate:{f1}:settings");
    let mut changed = gateway_with(&server, 500, Duration::from_secs(72 * 3600));
    assert_eq!(
        changed.claim_batch(&[claim("n2", "k", 60_000)]).unwrap(),
        [Outcome::Committed]
    );
    refused_by_new(first.claim_batch(&[claim("w2", "k", 90_000)]).unwrap_err());
    assert_eq!(xlen(&server), 2);
    // A hash edited by hand (a field missing) is named as such, by the
    // start-up check and by the claim.
    let _: i64 = redis::cmd("HDEL")
        .arg("scangate:{f1}:settings")
        .arg("retention_ms")
        .query(&mut server.connection())
        .unwrap();
    for e in [
        changed.check_server().unwrap_err(),
        changed
            .claim_batch(&[claim("n3", "k", 120_000)])
            .unwrap_err(),
    ] {
        let msg = e.to_string();
        assert!(
            msg.contains("window_ms = 500 and retention (unset)"),
            "{msg}"
        );
    }
    assert_eq!(xlen(&server), 2);
}

/// The old settings' gateway, refused after a facility-wide change.
fn refused_by_new(e: FacilityError) {
    let msg = e.to_string();
    assert!(
        matches!(e, FacilityError::SettingsDiffer { .. })
            && msg.contains("window_ms = 500")
            && msg.contains("this gateway with window_ms = 3000"),
        "{msg}"
    );
}

#[test]
fn a_replayed_commit_is_recognised_even_after_its_label_was_pruned() {
    let server = RedisServer::start_temp(&[]);
    let mut gw = gateway_with(&server, WINDOW_MS, Duration::from_secs(3600));
    let now = chrono::Utc::now().timestamp_millis();
    let at = |uuid: &'static str, ms: i64| Claim {
        captured_ms: ms,
        ..claim(uuid, "kr", 0)
    };
    // Captured two hours ago (retention 1 h), replayed after an outage.
    assert_eq!(
        gw.claim_batch(&[at("old", now - 7_200_000)]).unwrap(),
        [Outcome::Committed]
    );
    // The next pick of the label prunes "old" from the seen set.
    assert_eq!(
        gw.claim_batch(&[at("new", now)]).unwrap(),
        [Outcome::Committed]
    );
    let members = seen(&server, "scangate:{f1}:seen:kr");
    assert_eq!(members, ["new"]);
    // "old"'s reply was lost: the retry is still answered as its commit.
    assert_eq!(
        gw.claim_batch(&[at("old", now - 7_200_000)]).unwrap(),
        [Outcome::Committed]
    );
    assert_eq!(xlen(&server), 2);
}

#[test]
fn a_retried_commit_is_known_by_its_key_or_else_by_its_seen_member() {
    let server = RedisServer::start_temp(&[]);
    let mut gw = gateway(&server);
    let first = gw
        .claim_batch(&[claim("u1", "k", 0), claim("u2", "k2", 0)])
        .unwrap();
    assert_eq!(first, [Outcome::Committed, Outcome::Committed]);
    // u1's seen set expired first (a gateway with a shorter retention
    // committed the label last): its decision key answers.
    assert_eq!(del(&server, "scangate:{f1}:seen:k"), 1);
    // u2's decision key expired first: its member of the seen set answers,
    // not the window check (which would name u2 itself as its twin).
    assert_eq!(del(&server, "scangate:{f1}:scan:u2"), 1);
    assert_eq!(
        gw.claim_batch(&[claim("u1", "k", 0), claim("u2", "k2", 0)])
            .unwrap(),
        [Outcome::Committed, Outcome::Committed]
    );
    assert_eq!(xlen(&server), 2);
}

#[test]
fn a_full_server_refuses_a_new_claim_before_writing_anything_but_answers_a_decided_one() {
    let server = RedisServer::start_temp(&[]);
    let mut gw = gateway(&server);
    assert_eq!(
        gw.claim_batch(&[claim("u1", "k1", 0)]).unwrap(),
        [Outcome::Committed]
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1")
        .query(&mut server.connection())
        .unwrap();
    // Every claim call also refreshes the settings' expiry, a write Redis
    // allows when full; it comes last, so the claim's own first write is the
    // one refused, and nothing of the call is recorded.
    match gw.claim_batch(&[claim("u2", "k2", 0)]) {
        Err(FacilityError::Full { .. }) => {}
        other => panic!("expected the full server's refusal, got {other:?}"),
    }
    assert!(seen(&server, "scangate:{f1}:seen:k2").is_empty());
    assert_eq!(xlen(&server), 1);
    // A retried claim that was decided needs no new write — also with the
    // settings gone (nothing decided, so nothing to record them for).
    let mut again = gateway(&server);
    assert_eq!(
        again.claim_batch(&[claim("u1", "k1", 0)]).unwrap(),
        [Outcome::Committed]
    );
    del(&server, "scangate:{f1}:settings");
    assert_eq!(
        again.claim_batch(&[claim("u1", "k1", 0)]).unwrap(),
        [Outcome::Committed]
    );
}

#[test]
fn a_read_only_replica_still_answers_claims_that_were_decided() {
    let primary = RedisServer::start_temp(&[]);
    let mut gw = gateway(&primary);
    assert_eq!(
        gw.claim_batch(&[claim("u1", "k1", 0)]).unwrap(),
        [Outcome::Committed]
    );
    let replica = RedisServer::start_temp(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
    wait_until("the replica to sync", || {
        redis::cmd("EXISTS")
            .arg("scangate:{f1}:scan:u1")
            .query::<i64>(&mut replica.connection())
            .unwrap()
            == 1
    });
    let mut on_replica = connect(&replica, "f1", WINDOW_MS, Duration::from_secs(72 * 3600));
    // A retry after a lost reply: answered, nothing written.
    assert_eq!(
        on_replica.claim_batch(&[claim("u1", "k1", 0)]).unwrap(),
        [Outcome::Committed]
    );
    // A new claim needs a write: refused as read-only.
    match on_replica.claim_batch(&[claim("u2", "k2", 0)]) {
        Err(FacilityError::ReadOnly { .. }) => {}
        other => panic!("expected the replica's refusal, got {other:?}"),
    }
}

/// A decision answered again (a retried claim, its reply lost) says so:
/// it has the earlier call's place in the store's history, and its key
/// expires as that call set it, so it must not become a lane's marker.
#[test]
fn a_decision_answered_again_is_told_from_one_made_now() {
    let server = RedisServer::start_temp(&[]);
    let mut gw = gateway(&server);
    let round = [claim("a1", "ka", 0), claim("e1", "ka", 10)];
    let first = gw.claim_batch(&round).unwrap();
    assert_eq!(gw.fresh(), [true, true]);
    let again = gw.claim_batch(&[round[0].clone(), round[1].clone(), claim("b1", "kb", 20)]);
    assert_eq!(again.unwrap()[..2], first[..]);
    assert_eq!(gw.fresh(), [false, false, true]);
    // Found by identity in the seen set alone (the decision key gone).
    assert_eq!(del(&server, "scangate:{f1}:scan:a1"), 1);
    assert_eq!(
        gw.claim_batch(&[claim("a1", "ka", 0)]).unwrap(),
        [Outcome::Committed]
    );
    assert_eq!(gw.fresh(), [false]);
}

/// A claim whose marker (the caller's latest commit) the server lacks is
/// refused with `Lost`, nothing changed, by every call of a round (here
/// two calls of 128 and 72); the connection goes on. With the marker
/// there, the same claims are decided; without a marker, nothing is
/// checked.
#[test]
fn a_claim_whose_marker_the_server_lacks_is_refused_with_nothing_changed() {
    let server = RedisServer::start_temp(&[]);
    let mut gw = gateway(&server);
    assert_eq!(
        gw.claim_batch(&[claim("m1", "km", 0)]).unwrap(),
        [Outcome::Committed]
    );
    let round: Vec<Claim> = (0..200)
        .map(|i| claim(leaked(format!("r{i}")), leaked(format!("k{i}")), 10))
        .collect();
    // Two markers (the ledger's latest commit and a lane's), one missing:
    // refused, naming that one.
    match gw.claim_batch_checked(&round, &["m1".into(), "gone".into()]) {
        Err(FacilityError::Lost { marker, url }) => {
            assert_eq!(marker, "gone");
            assert!(url.contains(&server.port.to_string()), "{url}");
        }
        other => panic!("expected Lost, got {other:?}"),
    }
    assert_eq!(xlen(&server), 1, "a refused round changed the ledger");
    assert_eq!(del(&server, "scangate:{f1}:scan:r0"), 0);
    // The same connection: the refused round's replies were all read.
    let outcomes = gw.claim_batch_checked(&round, &["m1".into()]).unwrap();
    assert!(outcomes.iter().all(|o| *o == Outcome::Committed));
    assert_eq!(xlen(&server), 201);
    assert!(gw.has_decision("m1").unwrap());
    assert!(!gw.has_decision("gone").unwrap());
    assert_eq!(
        gw.claim_batch(&[claim("n1", "kn", 20)]).unwrap(),
        [Outcome::Committed]
    );
}

/// A round refused for a lost store on a server that also confirms the AOF
/// write (`WAITAOF`, Valkey here: Debian 12's Redis 7.0 has none): every
/// reply the round is owed is read, so the same connection goes on — the
/// reconciliation that follows asks it first (before, it read the
/// round's stale WAITAOF reply and failed, every time).
#[test]
fn a_refused_round_on_a_server_with_waitaof_leaves_the_connection_in_step() {
    if !RedisServer::valkey_installed() {
        return;
    }
    let dir = crate::util::tempdir("scangate-waitaof-lost-");
    let server = RedisServer::start_binary("valkey-server", dir.path(), &["--appendonly", "yes"]);
    let mut gw = gateway(&server);
    gw.set_on_disk(true);
    assert_eq!(
        gw.claim_batch(&[claim("m1", "km", 0)]).unwrap(),
        [Outcome::Committed]
    );
    let round: Vec<Claim> = (0..3)
        .map(|i| claim(leaked(format!("r{i}")), leaked(format!("k{i}")), 10))
        .collect();
    assert!(matches!(
        gw.claim_batch_checked(&round, &["gone".into()]),
        Err(FacilityError::Lost { .. })
    ));
    assert!(matches!(gw.has_decision("m1"), Ok(true)));
    assert_eq!(
        gw.claim_batch(&[claim("n1", "kn", 20)]).unwrap(),
        [Outcome::Committed]
    );
}

/// On a server with `WAITAOF` (Valkey, appendonly), an ACL user with the
/// grants scangate names for it claims; one with only the grants a Redis
/// 7.0 takes is refused when the server is checked (at start), naming
/// `+waitaof`, not when its first round comes (each round ends with
/// `WAITAOF`: every claim would have been refused). A replica's rounds do
/// not wait for `WAITAOF` (`ServerInfo::confirms_on_disk`): it refuses it,
/// which failed every round, also one asking again for a decision it has.
#[test]
fn acl_grants_for_a_server_with_waitaof_are_checked_at_start() {
    if !RedisServer::valkey_installed() {
        return;
    }
    let dir = crate::util::tempdir("scangate-waitaof-acl-");
    let server = RedisServer::start_binary("valkey-server", dir.path(), &["--appendonly", "yes"]);
    let mut c = server.connection();
    for (user, extra) in [
        ("gw", Some(scangate::facility::ACL_GRANTS_WAITAOF)),
        ("old", None),
    ] {
        let mut acl = redis::cmd("ACL");
        acl.arg("SETUSER").arg(user).arg("on").arg(">pw");
        for g in scangate::facility::ACL_GRANTS
            .split_whitespace()
            .chain(extra)
        {
            acl.arg(g);
        }
        let _: () = acl.query(&mut c).expect("ACL SETUSER");
    }
    let connect_to = |url: &str| {
        Facility::connect(
            url,
            "f1",
            WINDOW_MS,
            Duration::from_secs(72 * 3600),
            Duration::from_secs(2),
            Duration::from_secs(2),
        )
        .unwrap()
    };
    let as_user = |user: &str| {
        connect_to(
            &server
                .url()
                .replace("redis://", &format!("redis://{user}:pw@")),
        )
    };
    let refused = as_user("old").check_server().unwrap_err();
    assert!(
        matches!(refused, FacilityError::NoPermission { .. })
            && refused.to_string().contains("+waitaof"),
        "{refused}"
    );
    let mut gw = as_user("gw");
    let info = gw.check_server().unwrap();
    assert!(info.has_waitaof && info.appendonly == "yes", "{info:?}");
    gw.set_on_disk(true);
    let got = gw.claim_batch(&[claim("a1", "ka", 0)]);
    assert!(
        matches!(got.as_deref(), Ok([Outcome::Committed])),
        "{got:?}"
    );
    // A replica refuses WAITAOF whoever asks: the check still tells it by
    // its role (the caller waits for a promotion), not as unavailable.
    let port = server.port.to_string();
    let replica = RedisServer::start_binary(
        "valkey-server",
        &dir.path().join("replica"),
        &["--appendonly", "yes", "--replicaof", "127.0.0.1", &port],
    );
    let mut on_replica = connect_to(&replica.url());
    let info = on_replica.check_server().unwrap();
    assert_eq!(info.role, "slave", "{info:?}");
    // No round on it waits for WAITAOF (which it would refuse): it still
    // answers a claim it has the decision of (asked again after a lost
    // reply), and refuses a new one as read-only.
    assert!(!info.confirms_on_disk(), "{info:?}");
    on_replica.set_on_disk(info.confirms_on_disk());
    wait_until("the replica to have a1's decision", || {
        on_replica.has_decision("a1").unwrap_or(false)
    });
    let again = on_replica.claim_batch(&[claim("a1", "ka", 0)]);
    assert!(
        matches!(again.as_deref(), Ok([Outcome::Committed])),
        "{again:?}"
    );
    assert!(matches!(
        on_replica.claim_batch(&[claim("b1", "kb", 0)]),
        Err(FacilityError::ReadOnly { .. })
    ));
}

/// A round whose answers did not come within the command timeout (the
/// server paused) leaves them owed on the connection; the claimer drops
/// such a connection, and the claim itself never takes them for a later
/// round's: here a round of 129 claims (two calls) times out, and an echo
/// claimed next on the same connection would have been answered by the
/// first round's second call ("committed", one decision for one claim).
/// It fails instead, and on a fresh connection the echo is suppressed.
#[test]
fn a_round_never_takes_the_replies_a_timed_out_round_left_owed() {
    use nix::sys::signal::Signal;
    let server = RedisServer::start_temp(&[]);
    let mut gw = Facility::connect(
        &server.url(),
        "f1",
        WINDOW_MS,
        Duration::from_secs(72 * 3600),
        Duration::from_secs(2),
        Duration::from_millis(300),
    )
    .unwrap();
    gw.check_server().unwrap();
    assert_eq!(
        gw.claim_batch(&[claim("l1", "kl", 0)]).unwrap(),
        [Outcome::Committed]
    );
    server.signal(Signal::SIGSTOP);
    let round: Vec<Claim> = (0..129)
        .map(|i| claim(leaked(format!("r{i}")), leaked(format!("k{i}")), 10))
        .collect();
    let timed_out = gw.claim_batch(&round);
    server.signal(Signal::SIGCONT);
    assert!(
        matches!(timed_out, Err(FacilityError::Unavailable { .. })),
        "{timed_out:?}"
    );
    // The paused server runs the round now; its replies wait on the socket.
    wait_until("the timed-out round to be run", || xlen(&server) == 130);
    let echo = [claim("e1", "kl", 20)];
    let answer = gw.claim_batch(&echo);
    assert!(
        matches!(answer, Err(FacilityError::Protocol { .. })),
        "an answer owed to the earlier round was taken for this one: {answer:?}"
    );
    let mut fresh = gateway(&server);
    assert_eq!(
        fresh.claim_batch(&echo).unwrap(),
        [Outcome::Suppressed { twin: "l1".into() }]
    );
}
