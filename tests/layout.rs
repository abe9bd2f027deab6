//! The floors of `src/` (`src/lib.rs`, `# Layout`): no module imports from
//! a floor above its own. Read from the source text, as a reader sees it:
//! every `crate::…` path outside comments, in every file under `src/`.

use std::path::{Path, PathBuf};

/// Each module path prefix and its floor; the longest prefix wins. The
/// same list as `src/lib.rs`'s `# Layout`.
const FLOORS: &[(&str, u8)] = &[
    // 0: the shared vocabulary and the tools every floor uses.
    ("model", 0),
    ("invalid", 0),
    ("backoff", 0),
    ("shutdown", 0),
    ("exit", 0),
    ("build", 0),
    ("files", 0),
    // 1: what each stage is told (the config and the sections each stage
    // owns) and what it tells (telemetry, events, logs, systemd).
    ("config", 1),
    ("source::config", 1),
    ("source::hid::config", 1),
    ("source::hid::layout", 1),
    ("source::serial::config", 1),
    ("facility::config", 1),
    ("sink::config", 1),
    ("capture", 1),
    ("telemetry", 1),
    ("events", 1),
    ("notify", 1),
    ("feedback", 1),
    ("controls", 1),
    // 2: reading scanners; the database.
    ("source", 2),
    ("pty", 2),
    ("store", 2),
    // 3: the tables: outbox, ledger, audit trail.
    ("outbox", 3),
    ("ledger", 3),
    ("audit", 3),
    // 4: the decision.
    ("gate", 4),
    // 5: the facility Redis adapter.
    ("facility", 5),
    ("sink", 5),
    // 6: the facility claimer.
    ("daemon::claimer", 6),
    // 7: the running daemon: its stages wired.
    ("daemon", 7),
    // 8: the commands, and how the process logs.
    ("cli", 8),
    ("cmd", 8),
    ("logging", 8),
];

fn floor_of(path: &str) -> Option<(&'static str, u8)> {
    FLOORS
        .iter()
        .filter(|(p, _)| path == *p || path.starts_with(&format!("{p}::")))
        .max_by_key(|(p, _)| p.len())
        .copied()
}

/// `src/a/b.rs` and `src/a/b/mod.rs` → `a::b`; `lib.rs`, `main.rs` → None.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    match parts.as_slice() {
        [one] if one == "lib" || one == "main" => None,
        _ => Some(parts.join("::")),
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `crate::a::b` paths a file names outside `//` comments.
fn crate_paths(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let tail = &rest[at + "crate::".len()..];
            let path: String = tail
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_' || *c == ':')
                .collect();
            found.push(path.trim_end_matches(':').to_string());
            rest = tail;
        }
    }
    found
}

#[test]
fn no_module_imports_from_a_floor_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut upward = Vec::new();
    let mut unplaced = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let Some((_, mine)) = floor_of(&module) else {
            unplaced.push(module);
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for path in crate_paths(&text) {
            if let Some((prefix, theirs)) = floor_of(&path)
                && theirs > mine
            {
                upward.push(format!(
                    "{} (floor {mine}) names crate::{path} ({prefix}, floor {theirs})",
                    file.strip_prefix(&src).unwrap().display()
                ));
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules on no floor (add them to FLOORS here and to src/lib.rs's Layout): {unplaced:?}"
    );
    assert!(
        upward.is_empty(),
        "imports from a floor above:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_check_sees_an_upward_import() {
    // The control: a gate naming the daemon is caught, a daemon naming the
    // gate is not.
    let (_, gate) = floor_of("gate::facility").unwrap();
    let (_, daemon) = floor_of("daemon::writer").unwrap();
    assert!(daemon > gate);
    assert_eq!(
        crate_paths("use crate::daemon::Wiring; // crate::cmd::x"),
        ["daemon"]
    );
    assert_eq!(
        floor_of("daemon::claimer::lane"),
        Some(("daemon::claimer", 6))
    );
    assert_eq!(
        floor_of("source::hid::config"),
        Some(("source::hid::config", 1))
    );
}
