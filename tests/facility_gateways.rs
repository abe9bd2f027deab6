//! Gateways of one facility Redis: two hearing one roaming scanner record
//! one ledger entry per pick, each gateway's trail explaining the echoes
//! the other committed; the gateways must agree on the echo window and
//! retention and on which scanners are shared (else refused at start, or
//! their claims refused while running); cloned scanner names on two
//! gateways count every pick and are named. Real binary, PTY scanners,
//! a redis-server of each test's own.

use crate::util::*;
use std::collections::HashMap;

#[test]
fn two_gateways_one_roaming_scanner_one_ledger_entry_per_pick() {
    let (root, redis) = facility(&[]);
    let mut a = Gateway::roaming(root.path(), "gw-a", &redis);
    let mut b = Gateway::roaming(root.path(), "gw-b", &redis);
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
        let db = open_db(&g.state.clone());
        let other_db = open_db(&other.state.clone());
        let echoes: Vec<(String, String, String)> = db
            .prepare(
                "SELECT scan_uuid, twin_uuid, content_key FROM scans WHERE state = 'suppressed'",
            )
            .unwrap()
            .query_map([], |r| {
                Ok((
                    r.get::<_, scangate::store::packed::Unpacked>(0)?.0,
                    r.get::<_, scangate::store::packed::Unpacked>(1)?.0,
                    r.get::<_, scangate::store::packed::Unpacked>(2)?.0,
                ))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (uuid, twin, key) in echoes {
            let here: i64 = db
                .query_row(
                    "SELECT count(*) FROM scans WHERE content_key = ?1",
                    [scangate::store::packed::packed(&key)],
                    |r| r.get(0),
                )
                .unwrap();
            let twin_elsewhere: bool = other_db
                .query_row(
                    "SELECT count(*) = 1 FROM scans WHERE scan_uuid = ?1 AND state = 'committed'",
                    [scangate::store::packed::packed(&twin)],
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
fn gateways_of_one_facility_must_agree_on_window_and_retention() {
    let (root, redis) = facility(&[]);
    // Gateway a's window is ten minutes, so a re-read below is an echo
    // however slowly the test runs.
    let wide = 600_000;
    let mut a = Gateway::roaming(root.path(), "gw-a", &redis);
    a.set_window_ms(wide);
    a.start();
    a.send(&dscsa("SN001"));
    assert_settled(&a, &redis, 1, 0);
    let settings = "scangate:{test-pharmacy}:settings";
    let mut c = redis.connection();
    let agreed: HashMap<String, String> =
        redis::cmd("HGETALL").arg(settings).query(&mut c).unwrap();
    assert_eq!(agreed["window_ms"], wide.to_string(), "{agreed:?}");

    // A second gateway configured with another window is refused at start.
    let b = Gateway::roaming(root.path(), "gw-b", &redis);
    b.set_window_ms(1000);
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

/// Two counters whose configs were cloned: each has a scanner `counter-1`,
/// neither declared `shared`. Two pharmacists scan the same five products,
/// one at each counter, at the same moment: ten real picks, ten ledger
/// entries (the gateway id is in each scanner's content keys) — and the
/// gateway that finds the other's name in the facility says so, naming
/// both, in its log and its `outbox status`.
#[test]
fn cloned_scanner_names_on_two_gateways_count_every_pick_and_are_named() {
    let (root, redis) = facility(&[]);
    let mut a = Gateway::in_facility(root.path(), "gw-a", &redis, "counter-1", false);
    let mut b = Gateway::in_facility(root.path(), "gw-b", &redis, "counter-1", false);
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
    let mut a = Gateway::roaming(root.path(), "gw-a", &redis);
    a.start();
    let b = Gateway::in_facility(root.path(), "gw-b", &redis, "roaming", false);
    let out: Outcome = cli_cfg(&b.cfg, &["run"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("scanner \"roaming\""), "{out}");
    assert!(out.stderr.contains("shared = true"), "{out}");
    a.stop();
    // And the other way round: gw-b's own scanner first, then gw-a's shared one.
    let (root, redis) = facility(&[]);
    let mut b = Gateway::in_facility(root.path(), "gw-b", &redis, "roaming", false);
    b.start();
    let a = Gateway::roaming(root.path(), "gw-a", &redis);
    let out: Outcome = cli_cfg(&a.cfg, &["run"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains("gateway \"gw-b\" uses it as its own"),
        "{out}"
    );
    b.stop();
}
