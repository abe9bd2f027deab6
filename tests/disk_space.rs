//! Disk space: a state directory on a small tmpfs
//! (`mount -t tmpfs -o size=4m`, as root) reaching `[outbox] min_free_mb`.
//! The daemon stops ACKing there, as on a full disk, says why (state
//! directory, free bytes, floor) in its log, `status` and `outbox status`,
//! and stores and ACKs the held scan once space is back. Days left at the
//! database's rate are shown, and warned of below `warn_days_left`.

use crate::util::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmpfs mounted for the test; lazily unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mount a tmpfs of `size` at `dir`; `None` where that is not allowed
    /// (not root).
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn free(dir: &Path) -> u64 {
    let s = nix::sys::statvfs::statvfs(dir).unwrap();
    #[allow(clippy::unnecessary_cast)]
    let free = s.blocks_available() as u64 * s.fragment_size() as u64;
    free
}

/// Fill `dir`'s file system with `file` until `keep` bytes are free (or
/// none, if something else wrote meanwhile).
fn fill_to(dir: &Path, file: &Path, keep: u64) {
    let have = free(dir);
    let add = have.saturating_sub(keep);
    let old = std::fs::metadata(file).map_or(0, |m| m.len());
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .unwrap();
    use std::io::Write;
    let mut f = std::io::BufWriter::new(f);
    let chunk = vec![0x55u8; 4096];
    let mut written = 0;
    // (Full before `add`: the daemon wrote meanwhile. Full is the aim.)
    let full = |e: &std::io::Error| e.kind() == std::io::ErrorKind::StorageFull;
    while written < add {
        let n = chunk.len().min((add - written) as usize);
        match f.write_all(&chunk[..n]) {
            Ok(()) => written += n as u64,
            Err(e) if full(&e) => break,
            Err(e) => panic!("filling {}: {e}", file.display()),
        }
    }
    if let Err(e) = f.flush()
        && !full(&e)
    {
        panic!("filling {}: {e}", file.display());
    }
    assert!(old + written > 0);
}

fn status_json(cfg: &Path) -> (Option<i32>, serde_json::Value) {
    let out: Outcome = cli_cfg(cfg, &["status", "--json"]).into();
    let v = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("status is not JSON ({e}): {out}"));
    (out.code, v)
}

fn floor_logged(d: &Daemon) -> usize {
    d.log()
        .matches("below the floor [outbox] min_free_mb = 2")
        .count()
}

/// A gateway whose state directory is on a 4 MiB tmpfs of its own, with
/// one ACKing PTY scanner and `config` added, running; `None` where a
/// tmpfs cannot be mounted (not root: the test says SKIPPED).
struct Small {
    fs: Tmpfs,
    filler: PathBuf,
    gw: Gateway,
    daemon: Daemon,
    scanner: scangate::pty::VirtualScanner,
    _dir: tempfile::TempDir,
}

fn small(prefix: &str, config: &str) -> Option<Small> {
    let dir = tempdir(prefix);
    let Some(fs) = Tmpfs::mount(&dir.path().join("small"), "4m") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (the test needs root)");
        return None;
    };
    let filler = fs.0.join("filler");
    let mut gw = Gateway::builder_in(dir.path())
        .state_dir(&fs.0.join("state"))
        .pty(ScannerSpec::named("counter-1").ack())
        .config(config)
        .build();
    let daemon = gw.launch();
    let [scanner] = gw.take_scanners();
    Some(Small {
        fs,
        filler,
        gw,
        daemon,
        scanner,
        _dir: dir,
    })
}

#[test]
fn at_the_floor_the_gateway_stops_acking_says_why_and_resumes_when_space_is_back() {
    // A floor of 2 MiB on a 4 MiB file system; warned when it lasts less
    // than 10 years at the database's rate (it does: a few scans are a
    // good part of it).
    let Some(Small {
        fs,
        filler,
        gw,
        mut daemon,
        mut scanner,
        _dir,
    }) = small(
        "scangate-disk-",
        "[outbox]\nmin_free_mb = 2\nwarn_days_left = 3650",
    )
    else {
        return;
    };

    scanner
        .send(format!("{}\r", dscsa("SN0")).as_bytes())
        .unwrap();
    assert_eq!(scanner.read_reply(event_timeout()).unwrap(), [ACK]);
    wait_all_decided(&gw.cfg, 1);

    // Days left at the rate of the last 24 hours: shown, and warned of.
    let disk = &outbox_status(&gw.cfg)["disk"];
    assert!(disk["growth_bytes_per_day"].as_u64().unwrap() > 0, "{disk}");
    let days = disk["days_left"].as_f64().unwrap();
    assert!(days > 0.0 && days < 3650.0, "{disk}");
    assert!(
        disk["warning"]
            .as_str()
            .is_some_and(|w| w.contains("warn_days_left = 3650")),
        "{disk}"
    );
    assert_eq!(disk["below_floor"], false, "{disk}");
    let (_, st) = status_json(&gw.cfg);
    assert_eq!(st["storage"]["below_floor"], false, "{st}");
    assert!(st["storage"]["days_left"].as_f64().is_some(), "{st}");

    // Scans fill the file system up to the floor: space above it is left
    // for 64 KiB, and scans go on until one is refused.
    fill_to(&fs.0, &filler, 2 * 1024 * 1024 + 64 * 1024);
    let mut acked = 1;
    let mut held = None;
    for i in 1..200 {
        let before = floor_logged(&daemon);
        scanner
            .send(format!("{}\r", dscsa(&format!("SN{i}"))).as_bytes())
            .unwrap();
        let deadline = Instant::now() + event_timeout();
        let mut reply = Vec::new();
        while reply.is_empty() && floor_logged(&daemon) == before {
            assert!(Instant::now() < deadline, "neither ACK nor refusal");
            reply = scanner.read_reply(POLL).unwrap();
        }
        if reply.is_empty() {
            held = Some(i);
            break;
        }
        assert_eq!(reply, [ACK]);
        acked += 1;
    }
    let mut held = held.expect("the floor was never reached");
    // Free space is not monotonic: a WAL checkpoint that truncates the
    // WAL gives some back, and a held write that then finds space above
    // the floor is rightly stored and ACKed. So fill far below the floor
    // (where no truncation reaches it back), let such an ACK arrive, and
    // from then on no scan may be ACKed.
    fill_to(&fs.0, &filler, 256 * 1024);
    if scanner.read_reply(Duration::from_millis(300)).unwrap() == [ACK] {
        acked += 1;
        held += 1;
        let before = floor_logged(&daemon);
        scanner
            .send(format!("{}\r", dscsa(&format!("SN{held}"))).as_bytes())
            .unwrap();
        wait_until("the next scan's refusal", || floor_logged(&daemon) > before);
    }
    assert_eq!(
        scanner.read_reply(Duration::from_millis(300)).unwrap(),
        Vec::<u8>::new(),
        "an ACK went out below the floor"
    );
    let log = daemon.log();
    let line = log
        .lines()
        .find(|l| l.contains("below the floor"))
        .unwrap()
        .to_string();
    assert!(line.contains(gw.state.to_str().unwrap()), "{line}");
    assert!(line.contains("MiB free"), "{line}");
    // Degraded, naming the floor and why; outbox status says so too.
    let (code, st) = status_json(&gw.cfg);
    assert_eq!(code, Some(1), "{st}");
    assert_eq!(st["storage"]["below_floor"], true, "{st}");
    assert!(
        st["degraded"].as_array().unwrap().iter().any(|r| r
            .as_str()
            .unwrap()
            .contains("below the floor [outbox] min_free_mb = 2")),
        "{st}"
    );
    assert_eq!(outbox_status(&gw.cfg)["disk"]["below_floor"], true);

    // Space back: the held scan is stored once and ACKed.
    std::fs::remove_file(&filler).unwrap();
    assert_eq!(scanner.read_reply(event_timeout()).unwrap(), [ACK]);
    wait_all_decided(&gw.cfg, acked + 1);
    assert_eq!(
        ledger(&gw.cfg).len() as i64,
        acked + 1,
        "held scan SN{held}"
    );
    wait_until("the log to say writes go through again", || {
        daemon.log().contains("the outbox takes writes again")
    });
    let (_, st) = status_json(&gw.cfg);
    assert_eq!(st["storage"]["below_floor"], false, "{st}");
    assert_eq!(
        daemon.terminate().code(),
        Some(0),
        "{}",
        daemon.log_digest()
    );
    drop(fs);
}

/// The audit anchor rewrites `state-id` (atomically: a new file renamed
/// over it) as the chain head moves. On a full disk that fails; the
/// message names the full file system and the floor, says the file is
/// intact, and does not send anyone to a backup.
#[test]
fn a_full_disk_fails_the_anchor_with_advice_about_space_not_backups() {
    let Some(Small {
        fs,
        filler,
        gw,
        mut daemon,
        mut scanner,
        _dir,
    }) = small("scangate-disk-anchor-", "[outbox]\nmin_free_mb = 1")
    else {
        return;
    };
    let failed = |d: &Daemon| {
        d.log()
            .matches("cannot anchor the audit chain head")
            .count()
    };
    // A scan moves the head; the disk is filled before the anchor (every
    // 5 s) writes it. Should the anchor have been quicker than the fill,
    // space is given back and the next scan tries again.
    let mut line = None;
    for i in 0..5 {
        let _ = std::fs::remove_file(&filler);
        scanner
            .send(format!("{}\r", dscsa(&format!("AN{i}"))).as_bytes())
            .unwrap();
        assert_eq!(scanner.read_reply(event_timeout()).unwrap(), [ACK]);
        fill_to(&fs.0, &filler, 0);
        let deadline = Instant::now() + Duration::from_secs(8);
        while Instant::now() < deadline && failed(&daemon) == 0 {
            std::thread::sleep(POLL);
        }
        if failed(&daemon) > 0 {
            line = daemon
                .log()
                .lines()
                .find(|l| l.contains("cannot anchor the audit chain head"))
                .map(str::to_string);
            break;
        }
    }
    let line = line.expect("the anchor never met the full disk");
    for needle in [
        "No space left on device",
        "the file on disk is intact",
        "is full",
        fs.0.join("state").to_str().unwrap(),
        "[outbox] min_free_mb = 1",
        "journalctl --vacuum-size",
    ] {
        assert!(line.contains(needle), "{needle:?} in: {line}");
    }
    assert!(!line.contains("backup"), "{line}");
    eprintln!("{line}");
    // Space back: the head is anchored (at the latest at stop), and the
    // trail verifies against it.
    std::fs::remove_file(&filler).unwrap();
    assert_eq!(
        daemon.terminate().code(),
        Some(0),
        "{}",
        daemon.log_digest()
    );
    let verify = audit_verify(&gw.cfg);
    assert_eq!(verify.code, Some(0), "{verify}");
    drop(fs);
}
