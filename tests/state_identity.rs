//! A state directory has an identity (`state-id`, and
//! `meta` `state_id` in the database), so a database that is missing,
//! emptied or replaced is refused by `run` and by every read command
//! (exit 3), never taken for a first start; `state reset` starts over on
//! a typed confirmation and audits it as the first record of the new chain.
//!
//! Real daemon, real PTY scanner, real SQLite files.

use crate::util::*;
use scangate::pty::VirtualScanner;
use std::fs;
use std::path::PathBuf;

const WINDOW_MS: u64 = 3000;

/// A gateway's state after a shift, its daemon stopped.
struct Shift {
    gw: Gateway,
}

impl Shift {
    fn db(&self) -> PathBuf {
        self.gw.state.join("scangate.db")
    }

    fn state_id(&self) -> String {
        let text = fs::read_to_string(self.gw.state.join("state-id")).expect("state-id written");
        text.lines()
            .find_map(|l| l.strip_prefix("state_id "))
            .expect("a state_id line")
            .trim()
            .to_string()
    }
}

/// A daemon that commits `picks` picks on one serial scanner, then stops.
fn shift(prefix: &str, picks: usize) -> Shift {
    let mut gw = Gateway::builder(prefix)
        .window_ms(WINDOW_MS)
        .pty(ScannerSpec::named("counter-1").ack())
        .build();
    let mut daemon = gw.launch();
    let [mut vs] = gw.take_scanners();
    let burst: Vec<u8> = (0..picks)
        .flat_map(|i| frame(&dscsa(&format!("R{:07}", 100 + i))))
        .collect();
    vs.send(&burst).unwrap();
    wait_acks(&mut vs, picks);
    assert_eq!(daemon.terminate().code(), Some(0));
    assert_eq!(ledger(&gw.cfg).len(), picks);
    Shift { gw }
}

/// `scangate run` on this config, which must come up (`READY=1`) and stop
/// with exit 0 (its stderr to `log` in the gateway's directory; once per
/// test: it binds the gateway's notify socket).
fn start_and_stop(s: &Shift, log: &str) {
    let socket = NotifySocket::bind(&s.gw.dir);
    let mut daemon = Daemon::start_with_env(
        &s.gw.cfg,
        &s.gw.dir.join(log),
        &[("NOTIFY_SOCKET", socket.path())],
    );
    socket.wait_for("READY", "1", 1);
    assert_eq!(daemon.terminate().code(), Some(0), "{}", daemon.log());
}

/// `scangate run` on this config, which must refuse at once: its outcome.
fn run_refused(s: &Shift) -> Outcome {
    let mut daemon = Daemon::start(&s.gw.cfg, &s.gw.dir.join("refused.log"));
    let status = daemon.wait_exit();
    Outcome {
        code: status.code(),
        stdout: String::new(),
        stderr: daemon.log(),
    }
}

/// `run` and every read command refuse with exit 3, naming `what` and
/// the two ways on.
fn assert_every_command_refuses(s: &Shift, what: &str, confirm: &str) {
    let reset = format!("scangate state reset --confirm {confirm}");
    let mut outcomes: Vec<(String, Outcome)> = [
        &["audit", "verify"][..],
        &["audit", "trace", "00000000-0000-0000-0000-000000000000"],
        &["ledger", "export"],
        &["outbox", "status"],
    ]
    .iter()
    .map(|args| (args.join(" "), cli_cfg(&s.gw.cfg, args).into()))
    .collect();
    outcomes.push(("run".into(), run_refused(s)));
    for (cmd, out) in outcomes {
        assert_eq!(out.code, Some(3), "{cmd} must refuse the state: {out}");
        for needle in [what, "restore", &reset] {
            assert!(
                out.stderr.contains(needle),
                "{cmd} must say {needle:?}: {out}"
            );
        }
    }
}

#[test]
fn a_truncated_database_is_refused_by_run_and_every_read_command() {
    for len in [0u64, 1] {
        let s = shift("scangate-id-trunc-", 30);
        let id = s.state_id();
        fs::OpenOptions::new()
            .write(true)
            .open(s.db())
            .unwrap()
            .set_len(len)
            .unwrap();
        assert_every_command_refuses(&s, &format!("is empty ({len} bytes"), &id);
        assert_eq!(
            fs::metadata(s.db()).unwrap().len(),
            len,
            "the refused file is left untouched"
        );
    }
}

#[test]
fn a_deleted_database_with_its_wal_shm_and_lock_left_is_refused() {
    let s = shift("scangate-id-deleted-", 30);
    let id = s.state_id();
    // Its -wal and -shm as a running daemon leaves them.
    fs::write(s.gw.state.join("scangate.db-wal"), b"").unwrap();
    fs::write(s.gw.state.join("scangate.db-shm"), b"").unwrap();
    fs::remove_file(s.db()).unwrap();
    assert_every_command_refuses(&s, "is missing", &id);
    assert!(!s.db().exists(), "no new database was created");

    // A state from before identities (no state-id): its leftovers say a
    // database was here.
    fs::remove_file(s.gw.state.join("state-id")).unwrap();
    assert_every_command_refuses(&s, "is missing", "unidentified");
    assert!(!s.db().exists(), "no new database was created");
}

#[test]
fn another_gateways_database_in_its_place_is_refused() {
    let a = shift("scangate-id-a-", 3);
    let b = shift("scangate-id-b-", 5);
    fs::copy(b.db(), a.db()).unwrap();
    assert_every_command_refuses(
        &a,
        &format!("belongs to state {}", b.state_id()),
        &a.state_id(),
    );
}

#[test]
fn a_database_from_before_identities_is_adopted_and_a_first_start_creates_both() {
    let s = shift("scangate-id-adopt-", 4);
    let id = s.state_id();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    let in_db: String = open_db(&s.gw.state)
        .query_row("SELECT value FROM meta WHERE key = 'state_id'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(in_db, id, "the database holds the identity of its state-id");
    // The stop anchored the chain head in the file.
    let text = fs::read_to_string(s.gw.state.join("state-id")).unwrap();
    assert!(text.contains("\nhead 4 "), "{text}");

    // As an older scangate left it: no identity anywhere.
    fs::remove_file(s.gw.state.join("state-id")).unwrap();
    {
        let c = rusqlite::Connection::open(s.db()).unwrap();
        c.execute("DELETE FROM meta WHERE key = 'state_id'", [])
            .unwrap();
    }
    audit_verify(&s.gw.cfg); // a read command accepts it as it is
    let mut daemon = Daemon::start(&s.gw.cfg, &s.gw.dir.join("adopt.log"));
    wait_until("the adopted state-id", || {
        s.gw.state.join("state-id").exists()
    });
    assert_eq!(daemon.terminate().code(), Some(0));
    let adopted = s.state_id();
    assert_ne!(adopted, id, "a new identity, given to the old database");
    let in_db: String = open_db(&s.gw.state)
        .query_row("SELECT value FROM meta WHERE key = 'state_id'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(in_db, adopted);
    assert_eq!(ledger(&s.gw.cfg).len(), 4, "the old ledger is kept");
}

#[test]
fn state_reset_takes_the_lost_identity_and_audits_the_reset_first() {
    let s = shift("scangate-id-reset-", 30);
    let id = s.state_id();
    let text = fs::read_to_string(s.gw.state.join("state-id")).unwrap();
    let head = text
        .lines()
        .find_map(|l| l.strip_prefix("head "))
        .expect("an anchored head")
        .to_string();
    let (head_seq, head_hash) = head.split_once(' ').unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(s.db())
        .unwrap()
        .set_len(0)
        .unwrap();

    // Nothing is reset without the lost identity.
    let wrong: Outcome = cli_cfg(&s.gw.cfg, &["state", "reset", "--confirm", "yes"]).into();
    assert_eq!(wrong.code, Some(2), "{wrong}");
    assert!(wrong.stderr.contains(&format!("--confirm {id}")), "{wrong}");
    assert_eq!(fs::metadata(s.db()).unwrap().len(), 0);

    let done: Outcome = cli_cfg(&s.gw.cfg, &["state", "reset", "--confirm", &id]).into();
    assert_eq!(done.code, Some(0), "{done}");
    let new_id = s.state_id();
    assert_ne!(new_id, id);
    let aside: Vec<PathBuf> = fs::read_dir(&s.gw.state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("scangate.db.lost-"))
        .collect();
    assert!(
        aside
            .iter()
            .any(|p| p.to_string_lossy().ends_with('Z') && fs::metadata(p).unwrap().len() == 0),
        "the emptied file is moved aside, not deleted: {aside:?}"
    );

    let verify = audit_verify(&s.gw.cfg);
    assert!(verify.stdout.contains("intact: 1 records"), "{verify}");
    let record: serde_json::Value =
        serde_json::from_str(&audit_records(&open_db(&s.gw.state))[0]).unwrap();
    let reset = &record["state_reset"];
    assert_eq!(reset["lost_state_id"], id.as_str(), "{record}");
    assert_eq!(reset["lost_head_seq"], head_seq.parse::<i64>().unwrap());
    assert_eq!(reset["lost_head_hash"], head_hash);
    assert_eq!(record["scan_uuid"], new_id.as_str());
    assert!(ledger(&s.gw.cfg).is_empty());

    // An intact state is not reset.
    let again: Outcome = cli_cfg(&s.gw.cfg, &["state", "reset", "--confirm", &new_id]).into();
    assert_eq!(again.code, Some(2), "{again}");
    assert!(again.stderr.contains("nothing to reset"), "{again}");
}

#[test]
fn a_reset_cut_before_its_identity_file_was_rewritten_is_finished_by_the_next_start() {
    let s = shift("scangate-id-reset-cut-", 5);
    let id = s.state_id();
    let old_file = fs::read_to_string(s.gw.state.join("state-id")).unwrap();
    fs::remove_file(s.db()).unwrap();
    let done: Outcome = cli_cfg(&s.gw.cfg, &["state", "reset", "--confirm", &id]).into();
    assert_eq!(done.code, Some(0), "{done}");
    let new_id = s.state_id();
    // The cut: the new database is in place, the file still the lost
    // state's (its id, its old head).
    fs::write(s.gw.state.join("state-id"), &old_file).unwrap();
    // In that window: the new chain verifies (the file's head is the lost
    // state's, not compared), and `state reset` again finishes the file.
    let verify = audit_verify(&s.gw.cfg);
    assert_eq!(verify.code, Some(0), "{verify}");
    assert!(verify.stdout.contains("not compared"), "{verify}");
    let _: Outcome = cli_cfg(&s.gw.cfg, &["state", "reset", "--confirm", &id]).into();
    assert_eq!(s.state_id(), new_id, "state reset finished the file");
    fs::write(s.gw.state.join("state-id"), &old_file).unwrap();
    start_and_stop(&s, "after-cut.log");
    assert_eq!(s.state_id(), new_id, "the file is the new state's");
    let verify = audit_verify(&s.gw.cfg);
    assert_eq!(
        verify.code,
        Some(0),
        "the new chain, its own head: {verify}"
    );

    // The control: another state's database in its place is still refused.
    let other = shift("scangate-id-reset-other-", 2);
    fs::copy(other.db(), s.db()).unwrap();
    assert_every_command_refuses(
        &s,
        &format!("belongs to state {}", other.state_id()),
        &new_id,
    );
}

/// A running gateway with a facility Redis of its own and one ACKing PTY
/// scanner: the anchors' tests.
struct Anchored {
    redis: RedisServer,
    gw: Gateway,
    vs: VirtualScanner,
    daemon: Daemon,
}

fn anchored_gateway(prefix: &str) -> Anchored {
    let redis = RedisServer::start_temp(&[]);
    let mut gw = Gateway::builder(prefix)
        .window_ms(WINDOW_MS)
        .pty(ScannerSpec::named("counter-1").ack())
        .redis(&redis)
        .build();
    let daemon = gw.launch();
    let [vs] = gw.take_scanners();
    Anchored {
        redis,
        gw,
        vs,
        daemon,
    }
}

/// Until the facility store's anchor of this gateway is record `seq`.
fn wait_anchored(redis: &RedisServer, seq: i64) {
    let mut conn = redis.connection();
    wait_until(&format!("the facility store anchors record {seq}"), || {
        redis::cmd("HGET")
            .arg("scangate:{test-pharmacy}:anchor:test-gw")
            .arg("seq")
            .query::<Option<i64>>(&mut conn)
            .ok()
            .flatten()
            == Some(seq)
    });
}

/// The chain head is anchored outside the file (the
/// state-id file, the log, the facility Redis). The database loses its
/// tail after a SIGKILL (the WAL frames of the last 20 decisions gone:
/// emulated by removing them, consistently, from the file) — its own chain
/// still verifies, but `audit verify` names the lost tail from the anchors.
#[test]
fn a_lost_tail_is_named_from_the_anchors_outside_the_database() {
    let Anchored {
        redis,
        gw,
        mut vs,
        mut daemon,
    } = anchored_gateway("scangate-anchor-");
    const PICKS: i64 = 40;
    let burst: Vec<u8> = (0..PICKS)
        .flat_map(|i| frame(&dscsa(&format!("T{i:07}"))))
        .collect();
    vs.send(&burst).unwrap();
    wait_acks(&mut vs, PICKS as usize);
    wait_anchored(&redis, PICKS);
    assert!(
        daemon.log().contains("audit_head_seq"),
        "the head goes to the log too: {}",
        daemon.log_digest()
    );
    daemon.kill9();
    {
        let c = rusqlite::Connection::open(gw.state.join("scangate.db")).unwrap();
        let head: String = c
            .query_row(
                "SELECT seq || ' ' || lower(hex(hash)) FROM audit WHERE seq = 20",
                [],
                |r| r.get(0),
            )
            .unwrap();
        c.execute_batch(&format!(
            "DELETE FROM ledger WHERE scan_uuid IN (SELECT scan_uuid FROM audit WHERE seq > 20);
             DELETE FROM scans WHERE scan_uuid IN (SELECT scan_uuid FROM audit WHERE seq > 20);
             DELETE FROM audit WHERE seq > 20;
             UPDATE meta SET value = '{head}' WHERE key = 'audit_head';"
        ))
        .unwrap();
    }
    let out: Outcome = cli_cfg(&gw.cfg, &["audit", "verify"]).into();
    assert_eq!(out.code, Some(1), "verify must name the lost tail: {out}");
    assert!(
        out.stdout.contains("audit chain intact: 20 records"),
        "{out}"
    );
    assert!(
        out.stdout.contains(
            "audit chain TAIL LOST: the database ends at record 20; the facility store (gateway test-gw) saw record 40"
        ),
        "{out}"
    );

    // An anchor that cannot be reached is said so, not taken as intact.
    drop(redis);
    let out: Outcome = cli_cfg(&gw.cfg, &["audit", "verify"]).into();
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stdout.contains("NOT reachable"), "{out}");
}

/// The power cut's damage for real: the WAL is lost (SQLite
/// then has the database file alone: the commits the checkpointer had
/// copied into it). A reader of the test's own holds a snapshot at record
/// 20, so the checkpointer cannot copy the later commits into the file
/// (copying stops at the oldest reader's snapshot); 20 more picks are
/// committed and anchored in the facility store, the daemon and the reader
/// are SIGKILLed and the WAL is emptied. The database then ends at or
/// before record 20, verifies on its own, and `audit verify` names the
/// lost tail from the facility store's anchor.
#[test]
fn wal_frames_lost_after_a_sigkill_are_named_from_the_facility_anchor() {
    let Anchored {
        redis,
        gw,
        mut vs,
        mut daemon,
    } = anchored_gateway("scangate-wal-");
    let db = gw.state.join("scangate.db");
    let picks = |range: std::ops::Range<i64>| -> Vec<u8> {
        range
            .flat_map(|i| frame(&dscsa(&format!("W{i:07}"))))
            .collect()
    };
    vs.send(&picks(0..20)).unwrap();
    wait_acks(&mut vs, 20);
    wait_anchored(&redis, 20);

    // The reader: a snapshot at record 20.
    let mut reader = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3, sys, time\n\
             c = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True, isolation_level=None)\n\
             c.execute('BEGIN')\n\
             print(c.execute('SELECT count(*) FROM audit').fetchone()[0], flush=True)\n\
             time.sleep(3600)\n",
        )
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs the snapshot reader");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(reader.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "20", "the snapshot holds the first 20 records");

    vs.send(&picks(20..40)).unwrap();
    wait_acks(&mut vs, 20);
    wait_anchored(&redis, 40);
    daemon.kill9();
    reader.kill().unwrap();
    reader.wait().unwrap();

    // The power cut: the WAL is gone.
    let wal = gw.state.join("scangate.db-wal");
    assert!(
        fs::metadata(&wal).unwrap().len() > 0,
        "the later commits are in the WAL"
    );
    fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .unwrap()
        .set_len(0)
        .unwrap();
    let left: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .unwrap();
    assert!(
        (1..=20).contains(&left),
        "the database ends at or before the snapshot: {left} records"
    );

    let out: Outcome = cli_cfg(&gw.cfg, &["audit", "verify"]).into();
    assert_eq!(out.code, Some(1), "verify must name the lost tail: {out}");
    assert!(
        out.stdout
            .contains(&format!("audit chain intact: {left} records")),
        "the database verifies on its own: {out}"
    );
    assert!(
        out.stdout.contains(&format!(
            "audit chain TAIL LOST: the database ends at record {left}; the facility store (gateway test-gw) saw record 40"
        )),
        "{out}"
    );
}

#[test]
fn an_edited_identity_file_is_refused_with_the_ways_on_and_moved_aside_is_written_again() {
    let s = shift("scangate-id-edited-", 3);
    let id = s.state_id();
    let file = s.gw.state.join("state-id");
    fs::write(&file, "state_id not-a-uuid\nhead 7 zz\n").unwrap();
    let out: Outcome = cli_cfg(&s.gw.cfg, &["outbox", "status"]).into();
    assert_eq!(out.code, Some(3), "{out}");
    for needle in [
        "not as scangate writes it",
        "restore it from a backup",
        "move it aside",
    ] {
        assert!(out.stderr.contains(needle), "{needle:?}: {out}");
    }
    // Moved aside: the next start writes it from the database.
    fs::rename(&file, s.gw.state.join("state-id.edited")).unwrap();
    start_and_stop(&s, "after-edit.log");
    assert_eq!(s.state_id(), id);
    assert_eq!(ledger(&s.gw.cfg).len(), 3);
}
