//! A full facility Redis and a disk that refuses the verdicts: scans wait,
//! ACKed; claims and verdict writes are retried with growing back-off (not
//! spinning, a new scan waking the claimer early changes nothing), both at
//! once are one outage, and each verdict is written once when there is
//! room again. Real binary, PTY scanners, a redis-server of each test's
//! own, a trigger on the real database file.

use crate::util::*;
use std::path::Path;

/// `CONFIG SET maxmemory` on the test's own server.
fn set_maxmemory(redis: &RedisServer, bytes: &str) {
    let mut c = redis.connection();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(bytes)
        .query(&mut c)
        .expect("CONFIG SET maxmemory");
}

#[test]
fn a_full_redis_refuses_claims_scans_wait_and_commit_once_when_it_has_room() {
    let (_root, redis, mut g) = one_gateway();
    // Full, with the eviction policy scangate requires (noeviction): Redis
    // refuses every write, so every claim script fails at its first write,
    // before it changed anything.
    set_maxmemory(&redis, "1");
    g.send(&dscsa("SN001"));
    g.send(&dscsa("SN002"));
    g.send(&dscsa("SN001")); // double-fire
    wait_until("the scans to be unresolved", || g.count("unresolved") == 3);
    assert!(redis.ledger("test-pharmacy").is_empty());
    // One outage, retried with growing back-off: each failed retry logs the
    // backlog. A connection that opens is not the end of it (before, every
    // reconnect said "answers again", reset the back-off, and the gateway
    // retried every 100 ms for as long as Redis was full).
    let d = g.daemon();
    wait_until("two failed retries in the log", || {
        d.log().matches("3 scans wait in the outbox").count() >= 2
    });
    let log = d.log();
    assert!(
        log.contains("is full") && log.contains("raise `maxmemory`"),
        "the log should say Redis is full and what to do: {}",
        d.log_digest()
    );
    assert!(!log.contains("answers again"), "{}", d.log_digest());
    // `outbox status` says so too, without the logs.
    let status = |g: &Gateway| -> String {
        let out: Outcome = cli_cfg(&g.cfg, &["outbox", "status"]).into();
        assert_eq!(out.code, Some(0), "{out}");
        out.stdout
    };
    let st = status(&g);
    assert!(
        st.contains("facility store, as the claimer last saw it: NOT answering since")
            && st.contains("is full"),
        "{st}"
    );
    set_maxmemory(&redis, "0");
    assert_settled(&g, &redis, 2, 1);
    wait_until("status to show the store answering", || {
        status(&g).contains("facility store, as the claimer last saw it: answering since")
    });
    audit_verify(&g.cfg);
    let d = g.daemon();
    assert!(d.log().contains("answers again"), "{}", d.log_digest());
    g.stop();
}

/// Make gateway gw-a's verdict writes fail, as on a full disk (or let them
/// work again): a real trigger on the real file refuses audit records,
/// which only verdicts write. Admits still work.
fn refuse_verdicts(root: &Path, refuse: bool) {
    let c =
        rusqlite::Connection::open(root.join("gw-a").join("state").join("scangate.db")).unwrap();
    c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    c.execute_batch(if refuse {
        "CREATE TRIGGER verdicts_refused BEFORE INSERT ON audit
         BEGIN SELECT RAISE(ABORT, 'injected: disk full'); END;"
    } else {
        "DROP TRIGGER verdicts_refused"
    })
    .unwrap();
}

#[test]
fn verdicts_the_disk_refuses_are_retried_with_growing_back_off_then_written_once() {
    let (root, redis, mut g) = one_gateway();
    // The claimer's writes fail, as on a full disk; admits still work, so
    // scans are stored and ACKed.
    refuse_verdicts(root.path(), true);
    g.send(&dscsa("SN001"));
    g.send(&dscsa("SN001")); // double-fire
    assert_eq!(g.replies(2), [ACK, ACK]);
    // Claimed in Redis, but the verdicts cannot be written: retried with
    // growing back-off, not at full speed (which re-sent the claims and
    // logged an error as fast as the loop could go).
    let d = g.daemon();
    wait_until("the third retry, 400 ms after the second", || {
        d.log().contains("retrying in 400ms")
    });
    let failures = d.log().matches("writing verdicts failed").count();
    assert!(
        (3..10).contains(&failures),
        "{failures} failed writes logged by the time the back-off reached 400 ms: {}",
        d.log_digest()
    );
    let st = outbox_status(&g.cfg);
    assert_eq!(count(&st, "pending"), 2, "{st}");
    assert_eq!(redis.ledger("test-pharmacy").len(), 1);
    // A new scan during the back-off wakes the claimer early; the retry
    // must still come when the back-off ends, with no further kick.
    g.send(&dscsa("SN002"));
    assert_eq!(g.replies(1), [ACK]);
    // The disk has room again: the retried claims are recognised as this
    // gateway's own (same UUIDs), and each verdict is written once.
    refuse_verdicts(root.path(), false);
    assert_settled(&g, &redis, 2, 1);
    audit_verify(&g.cfg);
    g.stop();
}

/// CPU time (user + system) a process has used so far.
fn cpu_time(pid: u32) -> std::time::Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is in parentheses).
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    std::time::Duration::from_millis(ticks * 1000 / hz)
}

#[test]
fn a_backlog_longer_than_a_round_waits_out_the_local_back_off_without_spinning() {
    let (root, redis, mut g) = one_gateway();
    refuse_verdicts(root.path(), true);
    // More open scans than one round takes, so each pick says "more".
    for i in 0..70 {
        g.send(&dscsa(&format!("SN{i:03}")));
    }
    assert_eq!(g.replies(70), vec![ACK; 70]);
    let d = g.daemon();
    wait_until("the back-off to reach 1.6 s", || {
        d.log().contains("retrying in 1.6s")
    });
    // A kick during the back-off wakes the claimer; it must go back to
    // waiting, not pick and hold back round after round until it ends.
    let before = cpu_time(d.pid());
    g.send(&dscsa("SN070"));
    assert_eq!(g.replies(1), [ACK]);
    // A window to measure over, not a wait for an event: what is checked is
    // that nothing happens in it (the back-off still has ~1.6 s to run).
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let used = cpu_time(g.daemon().pid()) - before;
    assert!(
        used < std::time::Duration::from_millis(400),
        "the daemon used {used:?} of CPU in 1 s of back-off (a spin uses a whole core)"
    );
    refuse_verdicts(root.path(), false);
    assert_settled(&g, &redis, 71, 0);
    g.stop();
}

#[test]
fn a_full_redis_and_a_failing_disk_together_are_one_outage_until_claims_are_answered() {
    let (root, redis, mut g) = one_gateway();
    // The disk fails first, so its back-off runs ahead of Redis's.
    refuse_verdicts(root.path(), true);
    g.send(&dscsa("SN001"));
    assert_eq!(g.replies(1), [ACK]);
    let d = g.daemon();
    wait_until("the local back-off to reach 400 ms", || {
        d.log().contains("retrying in 400ms")
    });
    // Then Redis fills up and a new scan's claim is refused (SN001's is
    // already decided there and needs no write). The claimer reconnects
    // while the local back-off still holds every round back. An open
    // connection is not an answer: the outage goes on.
    set_maxmemory(&redis, "1");
    g.send(&dscsa("SN002"));
    assert_eq!(g.replies(1), [ACK]);
    let d = g.daemon();
    wait_until("a reconnect after the refusal", || {
        let log = d.log();
        log.find("is full")
            .is_some_and(|at| log[at..].contains("facility Redis connected"))
    });
    assert!(!d.log().contains("answers again"), "{}", d.log_digest());
    set_maxmemory(&redis, "0");
    refuse_verdicts(root.path(), false);
    assert_settled(&g, &redis, 2, 0);
    // The replay lane may settle both scans before the live lane, whose
    // outage it is, makes its next pass: await its word, do not race it.
    let d = g.daemon();
    wait_until("the live lane to log that Redis answers again", || {
        d.log().contains("answers again")
    });
    g.stop();
}
