//! The README's main command, `scangate demo`, runs on this machine and
//! reports a lossless, exactly-once shift.

use std::process::Command;

#[test]
fn the_demo_loses_nothing_and_commits_each_pick_once() {
    let out = Command::new(env!("CARGO_BIN_EXE_scangate"))
        .arg("demo")
        .output()
        .expect("running scangate demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed ({:?})\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let row = |name: &str| -> String {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} row in:\n{stdout}"))
            .trim_start()[name.len()..]
            .trim()
            .to_string()
    };
    assert_eq!(row("lost"), "0", "{stdout}");
    assert_eq!(
        row("committed (ledger entries)"),
        row("physical picks (script)")
    );
    assert_eq!(
        row("scans in the outbox"),
        row("transmissions sent (script)")
    );
    assert!(row("audit chain").starts_with("verified"), "{stdout}");
    assert!(stdout.contains("exactly once"), "{stdout}");
}
