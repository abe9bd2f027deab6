//! Where the daemon's log goes, and in what form (`--log-format`): the
//! journal's native protocol only when stderr is the stream
//! `$JOURNAL_STREAM` names, with fields of their own names and the audit
//! records under their own identifier; else text without colour on a
//! stderr that is no terminal; JSON lines on request. Rejected reads are
//! WARN lines with their reason, beside the audit records.
//!
//! The journald tests run the daemon in a mount namespace of its own with
//! a socket of the test's in journald's place ([`FakeJournal`]).

use crate::util::*;
use scangate::pty::VirtualScanner;
use std::path::Path;
use std::process::Command;

/// A scanner `counter-1` on a PTY, its config in `dir`.
fn gateway(dir: &Path) -> (VirtualScanner, std::path::PathBuf) {
    let mut gw = Gateway::builder_in(dir)
        .pty(ScannerSpec::named("counter-1").ack())
        .build();
    let [vs] = gw.take_scanners();
    (vs, gw.cfg)
}

/// A pick, its echo and a misread: committed, suppressed, rejected (the
/// first two ACKed once durable, the misread NAKed).
fn three_decisions(vs: &mut VirtualScanner) {
    for (label, reply) in [
        (dscsa("LOG0001"), ACK),
        (dscsa("LOG0001"), ACK),
        ("]C1NOT-A-GS1-STRING".into(), NAK),
    ] {
        vs.send(&frame(&label)).unwrap();
        assert_eq!(replies(vs, 1).0, [reply], "{label}");
    }
}

/// `scangate run` through `journal`'s wrapper, logging with `format`
/// (None: the default) to a pipe copied into `log`; `journal_stream`:
/// what `$JOURNAL_STREAM` holds, given the pipe's `(device, inode)`.
fn start(
    journal: &FakeJournal,
    config: &Path,
    log: &Path,
    format: Option<&str>,
    journal_stream: impl FnOnce((u64, u64)) -> String,
) -> Daemon {
    let wrapper = journal.wrapper();
    let mut cmd = command_via(&wrapper.iter().map(String::as_str).collect::<Vec<_>>());
    daemon_env(&mut cmd, config, format);
    let (stderr, id) = stderr_pipe(log);
    cmd.env("JOURNAL_STREAM", journal_stream(id)).stderr(stderr);
    Daemon::spawn(cmd, log)
}

/// `cmd` as `scangate [--log-format F] run --config C`, with colour left
/// to the binary (no `NO_COLOR`).
fn daemon_env(cmd: &mut Command, config: &Path, format: Option<&str>) {
    if let Some(f) = format {
        cmd.args(["--log-format", f]);
    }
    run_args(cmd, config);
    cmd.env_remove("NO_COLOR");
}

#[test]
fn stderr_that_is_not_the_journal_stream_gets_plain_text_even_with_journal_stream_set() {
    let dir = tempdir("scangate-log-text-");
    let (mut vs, config) = gateway(dir.path());
    let mut journal = FakeJournal::bind(dir.path());
    let log = dir.path().join("daemon.log");
    // Another stream's identity, as a child of a systemd service whose
    // stderr was redirected inherits it.
    let mut daemon = start(&journal, &config, &log, None, |(dev, ino)| {
        format!("{dev}:{}", ino + 1)
    });
    daemon.wait_open(&[vs.path()]);
    three_decisions(&mut vs);
    wait_until("the rejected read's WARN line on stderr", || {
        daemon.log().contains("scan rejected")
    });
    assert!(daemon.terminate().success(), "{}", daemon.log_digest());
    let text = daemon.log();
    assert!(!text.contains('\x1b'), "ANSI escapes on a pipe:\n{text}");
    let reject = text
        .lines()
        .find(|l| l.contains("scan rejected"))
        .expect("the reject line");
    assert!(
        reject.contains(" WARN ")
            && reject.contains("scanner=counter-1")
            && reject.contains("reason="),
        "{reject}"
    );
    assert!(
        text.lines().any(|l| l.contains("scangate::audit")
            && l.contains("decision=rejected")
            && l.contains("scanner=counter-1")),
        "{text}"
    );
    assert!(
        journal.entries().is_empty(),
        "journald got entries: {:?}",
        journal.entries()
    );
}

#[test]
fn stderr_that_is_the_journal_stream_gets_the_native_protocol_audit_under_its_own_identifier() {
    let dir = tempdir("scangate-log-journald-");
    let (mut vs, config) = gateway(dir.path());
    let mut journal = FakeJournal::bind(dir.path());
    let log = dir.path().join("daemon.log");
    let mut daemon = start(&journal, &config, &log, None, |(dev, ino)| {
        format!("{dev}:{ino}")
    });
    daemon.wait_open(&[vs.path()]);
    three_decisions(&mut vs);
    let audit =
        |e: &Entry| e.get("SYSLOG_IDENTIFIER").map(String::as_str) == Some("scangate-audit");
    let is = |e: &Entry, k: &str, v: &str| e.get(k).map(String::as_str) == Some(v);
    wait_until(
        "3 audit records and the reject's WARN in the journal",
        || {
            let got = journal.entries();
            got.iter().filter(|e| audit(e)).count() >= 3
                && got
                    .iter()
                    .any(|e| is(e, "DECISION", "rejected") && !audit(e))
        },
    );
    assert!(daemon.terminate().success(), "{}", daemon.log_digest());
    let entries = journal.entries().to_vec();

    for e in &entries {
        assert!(
            e.keys().all(|k| !k.starts_with("F_")),
            "a prefixed field: {e:?}"
        );
        assert_eq!(
            audit(e),
            is(e, "TARGET", "scangate::audit"),
            "audit records, and only they, under scangate-audit: {e:?}"
        );
        assert!(audit(e) || is(e, "SYSLOG_IDENTIFIER", "scangate"), "{e:?}");
    }
    let records: Vec<&Entry> = entries.iter().filter(|e| audit(e)).collect();
    let decisions: Vec<&str> = records.iter().map(|e| e["DECISION"].as_str()).collect();
    assert_eq!(decisions, ["committed", "suppressed", "rejected"]);
    for r in &records {
        assert!(is(r, "SCANNER", "counter-1"), "{r:?}");
        assert_eq!(r["SCAN_UUID"].len(), 36, "{r:?}");
        assert!(r["RECORD"].contains(&r["SCAN_UUID"]), "{r:?}");
        assert_eq!(r["HASH"].len(), 64, "{r:?}");
    }
    let reject = entries
        .iter()
        .find(|e| !audit(e) && is(e, "DECISION", "rejected"))
        .unwrap();
    assert!(
        is(reject, "PRIORITY", "4"),
        "WARN is priority 4: {reject:?}"
    );
    assert_eq!(reject["SCAN_UUID"], records[2]["SCAN_UUID"]);
    assert!(is(reject, "SCANNER", "counter-1"), "{reject:?}");
    assert!(!reject["REASON"].is_empty(), "{reject:?}");
    assert!(reject["MESSAGE"].contains(&reject["REASON"]), "{reject:?}");
    assert!(
        entries
            .iter()
            .any(|e| is(e, "SCANNER", "counter-1") && e["MESSAGE"] == "scanner connected"),
        "{entries:?}"
    );
    assert_eq!(
        daemon.log(),
        "",
        "nothing on stderr when logging to the journal"
    );
}

#[test]
fn log_format_json_writes_one_object_per_line_with_the_fields() {
    let dir = tempdir("scangate-log-json-");
    let (mut vs, config) = gateway(dir.path());
    let log = dir.path().join("daemon.log");
    let mut cmd = command();
    daemon_env(&mut cmd, &config, Some("json"));
    let (stderr, _) = stderr_pipe(&log);
    cmd.stderr(stderr);
    let mut daemon = Daemon::spawn(cmd, &log);
    daemon.wait_open(&[vs.path()]);
    three_decisions(&mut vs);
    let lines = || -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
            .collect()
    };
    wait_until("3 audit records on stderr", || {
        lines()
            .iter()
            .filter(|l| l["target"] == "scangate::audit")
            .count()
            >= 3
    });
    assert!(daemon.terminate().success(), "{}", daemon.log_digest());
    let lines = lines();
    let audit: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["target"] == "scangate::audit")
        .collect();
    let decisions: Vec<&str> = audit
        .iter()
        .filter_map(|l| l["decision"].as_str())
        .collect();
    assert_eq!(
        decisions,
        ["committed", "suppressed", "rejected"],
        "{lines:?}"
    );
    for a in &audit {
        assert_eq!(a["scanner"], "counter-1", "{a}");
        assert!(
            a["scan_uuid"].as_str().is_some_and(|u| u.len() == 36),
            "{a}"
        );
    }
    let reject = lines
        .iter()
        .find(|l| l["target"] != "scangate::audit" && l["decision"] == "rejected")
        .unwrap_or_else(|| panic!("no reject line: {lines:?}"));
    assert_eq!(reject["level"], "WARN", "{reject}");
    assert_eq!(reject["scanner"], "counter-1", "{reject}");
    assert_eq!(reject["scan_uuid"], audit[2]["scan_uuid"], "{reject}");
    assert!(
        reject["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{reject}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["message"] == "scanner connected" && l["scanner"] == "counter-1"),
        "{lines:?}"
    );
}
