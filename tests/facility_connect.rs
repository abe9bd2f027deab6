//! What a gateway needs of the facility Redis it connects to, and what it
//! says when it does not get it: the eviction policy (`noeviction`), an
//! ACL user with the documented grants, credentials (refused at start:
//! exit 2; refused while running: scans wait and `status` says why), TLS
//! with the facility CA; `ledger export` from an unreachable server, and
//! `demo --redis`. Real binary, PTY scanners, a redis-server of each
//! test's own.

use crate::util::*;
use std::path::Path;

#[test]
fn an_evicting_redis_is_refused_at_start_up() {
    let (root, redis) = facility(&["--maxmemory-policy", "allkeys-lru"]);
    let g = Gateway::roaming(root.path(), "gw-a", &redis);
    let out: Outcome = cli_cfg(&g.cfg, &["run"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("noeviction"), "{out}");
    assert!(out.stderr.contains(&redis.port.to_string()), "{out}");
}

/// A Redis ACL user with exactly the documented grants runs a gateway:
/// claims (and the commands the claim script runs), receipts of serialised
/// items, the start-up checks, `ledger export`. A user lacking one of them is refused at start with
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
    let mut g = Gateway::roaming(root.path(), "gw-a", &redis);
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
    // Receiving: the claims of serialised reads ask the facility's
    // receipts first (their own script).
    g.edit_config(|text| text.replace("scan_type = \"dispense\"", "scan_type = \"receive\""));
    g.start();
    g.send(&dscsa("SN001"));
    g.send(&dscsa("SN001")); // double-fire
    g.send(&dscsa("SN002"));
    assert_eq!(g.replies(3), [ACK; 3]);
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

/// Credentials Redis refuses stop `run` with exit 2 (not an outage
/// retried for ever), naming the server, the ACL user, what was refused
/// and where the password came from; the password never shows.
#[test]
fn refused_credentials_stop_run_with_exit_2_naming_the_user_and_the_password_file() {
    let (root, redis) = facility(&["--requirepass", "right-one"]);
    let g = Gateway::roaming(root.path(), "gw-a", &redis);
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
    let mut g = Gateway::roaming(root.path(), "gw-a", &redis);
    g.edit_config(|text| format!("{text}username = \"scangate\"\npassword_file = {password:?}\n"));
    g.start();
    g.send(&dscsa("SN001"));
    assert_eq!(g.replies(1), [ACK]);
    wait_until("SN001 committed", || g.count("committed") == 1);

    set_user(&mut c, "changed");
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg("scangate")
        .query(&mut c)
        .expect("CLIENT KILL USER");
    g.send(&dscsa("SN002"));
    assert_eq!(g.replies(1), [ACK], "ACKed although Redis refuses us");
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
    let mut good = Gateway::roaming(root.path(), "gw-a", &redis);
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

    let mut bad = Gateway::roaming(root.path(), "gw-b", &redis);
    configure(&bad, &other_ca);
    bad.start();
    bad.send(&dscsa("SN002"));
    assert_eq!(bad.replies(1), [ACK], "ACKed although TLS fails");
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

#[test]
fn ledger_export_from_an_unreachable_facility_redis_says_where_and_what_to_do() {
    let (root, redis) = facility(&[]);
    let g = Gateway::roaming(root.path(), "gw-a", &redis);
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

#[test]
fn the_demo_runs_against_a_facility_redis() {
    let (_root, redis) = facility(&[]);
    let out: Outcome = cli(&["demo", "--redis", &redis.url()]).into();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("facility Redis"), "{out}");
    assert!(out.stdout.contains("exactly once"), "{out}");
    // The facility ledger holds the demo's picks.
    assert_eq!(redis.ledger("demo-pharmacy").len(), 9, "{out}");
    // The receiving tote runs on the embedded store.
    assert_eq!(redis.ledger("demo-tote").len(), 0, "{out}");
    assert!(
        out.stdout.contains("each tote policy did what it promises"),
        "{out}"
    );
}
