//! `scangate diag`: the archive support gets holds what it says and
//! neither a planted password nor a scanned label's serial; it refuses an
//! existing file and works with a config that does not load.

use crate::util::*;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

const PASSWORD: &str = "Pl4ntedPassw0rd";
const QUERY_SECRET: &str = "QuerySecret77";
const SERIAL: &str = "DIAGSER1AL42";

/// Every file of the zip archive at `path`, by name.
fn unzip(path: &Path) -> BTreeMap<String, String> {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut files = BTreeMap::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).unwrap();
        let mut text = String::new();
        f.read_to_string(&mut text).unwrap();
        files.insert(f.name().unwrap().to_string(), text);
    }
    files
}

/// The planted secrets and the serial: none in the archive's bytes, none
/// in any of its files.
fn assert_clean(archive: &Path, files: &BTreeMap<String, String>) {
    let raw = std::fs::read(archive).unwrap();
    for s in [PASSWORD, QUERY_SECRET, SERIAL] {
        assert!(
            !raw.windows(s.len()).any(|w| w == s.as_bytes()),
            "{s} in the archive's bytes"
        );
        for (name, text) in files {
            assert!(!text.contains(s), "{s} in {name}:\n{text}");
        }
    }
}

#[test]
fn the_archive_holds_what_support_needs_and_no_secret_or_serial() {
    let port = free_port();
    let dir = tempdir("scangate-diag-");
    let basic = dir.path().join("sink-basic");
    std::fs::write(&basic, format!("ledger:{PASSWORD}\n")).unwrap();
    let mut gw = Gateway::builder_in(dir.path())
        .pty(ScannerSpec::named("counter-1"))
        .config(&format!(
            "[metrics]\nlisten = \"127.0.0.1:{port}\"\n\n[[sink]]\nname = \"inventory\"\nurl = \"http://127.0.0.1:9/ledger?key={QUERY_SECRET}\"\nbasic_auth_file = {basic:?}\n"
        ))
        .build();
    gw.start();
    gw.send(&dscsa(SERIAL));
    wait_until("the read in the ledger", || {
        ledger(&gw.cfg).iter().any(|e| e["serial"] == SERIAL)
    });
    // The controls: the secrets are in the config and its file, the
    // serial in the state directory's files, so an archive that copied
    // them would be caught.
    let cfg_text = std::fs::read_to_string(&gw.cfg).unwrap();
    assert!(cfg_text.contains(QUERY_SECRET));
    let in_state = ["scangate.db", "scangate.db-wal"].iter().any(|f| {
        std::fs::read(gw.state.join(f))
            .is_ok_and(|b| b.windows(SERIAL.len()).any(|w| w == SERIAL.as_bytes()))
    });
    assert!(
        in_state,
        "the serial is not in the state files: the control cannot catch a leak"
    );

    let archive = dir.path().join("diag.zip");
    let out: Outcome = cli_cfg(&gw.cfg, &["diag", "--out", archive.to_str().unwrap()]).into();
    assert_eq!(out.code, Some(0), "{out}");
    let files = unzip(&archive);
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    for want in [
        "README.txt",
        "version.txt",
        "system.txt",
        "config.toml",
        "status.json",
        "check-config.txt",
        "devices.txt",
        "commands.txt",
        "udev-rules.txt",
        "journal.txt",
        "database.txt",
        "metrics.txt",
    ] {
        assert!(names.contains(&want), "{want} missing: {names:?}");
    }
    assert_clean(&archive, &files);
    assert!(files["version.txt"].contains(env!("CARGO_PKG_VERSION")));
    assert!(files["system.txt"].contains("# kernel"));
    let cfg = &files["config.toml"];
    assert!(
        cfg.contains("?<redacted>") && cfg.contains("counter-1"),
        "{cfg}"
    );
    assert!(
        cfg.contains("sink-basic"),
        "the secret file's path stays: {cfg}"
    );
    let status: serde_json::Value = serde_json::from_str(&files["status.json"])
        .unwrap_or_else(|e| panic!("status.json is not JSON ({e}): {}", files["status.json"]));
    assert!(status.is_object(), "{status}");
    assert!(
        files["commands.txt"].contains("scangate status --json --config"),
        "{}",
        files["commands.txt"]
    );
    let db = &files["database.txt"];
    assert!(db.contains("quick_check: ok"), "{db}");
    assert!(
        db.lines().any(|l| l.trim() == "ledger\t1"),
        "one ledger row counted: {db}"
    );
    assert!(
        files["metrics.txt"].contains("scangate_"),
        "{}",
        files["metrics.txt"]
    );

    // An existing file is refused and left as it was.
    let before = std::fs::read(&archive).unwrap();
    let again: Outcome = cli_cfg(&gw.cfg, &["diag", "--out", archive.to_str().unwrap()]).into();
    assert_eq!(again.code, Some(2), "{again}");
    assert!(again.stderr.contains("exists"), "{again}");
    assert_eq!(std::fs::read(&archive).unwrap(), before);

    // A config that does not load (a password in the Redis URL, which
    // check-config refuses, quoting the key): the archive is still
    // written, and the password is not in it.
    gw.stop();
    gw.edit_config(|t| format!("{t}\n[redis]\nurl = \"redis://:{PASSWORD}@127.0.0.1:1/\"\n"));
    let broken = dir.path().join("diag-broken.zip");
    let out: Outcome = cli_cfg(&gw.cfg, &["diag", "--out", broken.to_str().unwrap()]).into();
    assert_eq!(out.code, Some(0), "{out}");
    let files = unzip(&broken);
    assert_clean(&broken, &files);
    assert!(
        files["commands.txt"].contains("exit 2"),
        "{}",
        files["commands.txt"]
    );
    assert!(
        files["config.toml"].contains("redis://<redacted>@127.0.0.1:1/"),
        "{}",
        files["config.toml"]
    );
}
