//! The README's main command, `scangate demo`, runs on this machine and
//! reports a lossless, exactly-once shift, and the receiving tote of
//! identical unserialised bottles under each policy.

use crate::util::{Outcome, cli};

#[test]
fn the_demo_loses_nothing_and_commits_each_pick_once() {
    let out: Outcome = cli(&["demo"]).into();
    assert_eq!(out.code, Some(0), "demo failed: {out}");
    let stdout = &out.stdout;
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
    // The receiving tote: each policy's entries, ambiguous echoes and
    // control reads, and what the scanners were told.
    for (scanner, want) in [
        (
            "tote-window",
            "window            6        2          4         0",
        ),
        (
            "tote-double-fire",
            "double-fire       6        6          0         0",
        ),
        (
            "tote-ask",
            "ask              16        6          5         5",
        ),
    ] {
        assert_eq!(row(scanner), want, "{stdout}");
    }
    assert!(
        stdout
            .contains("tote-ask          committed ambiguous control committed ambiguous control"),
        "{stdout}"
    );
    assert!(
        stdout.contains("each tote policy did what it promises"),
        "{stdout}"
    );
}
