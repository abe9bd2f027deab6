//! The floors of `src/` (`src/lib.rs`, `# Layout`): no module imports from
//! a floor above its own. Read from the source text, as a reader sees it:
//! every `crate::…` path outside comments, in every file under `src/`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Each module path and its floor, read from the table in `src/lib.rs`'s
/// `# Layout` (its rows `//! | N | modules | what |`): the one list of
/// floors. A module path names its subtree; the longest that fits wins.
fn floors() -> &'static [(String, u8)] {
    static FLOORS: OnceLock<Vec<(String, u8)>> = OnceLock::new();
    FLOORS.get_or_init(|| {
        let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
            .unwrap();
        let floors = floor_table(&lib);
        assert!(
            floors.len() > 20,
            "src/lib.rs's # Layout table read as {floors:?}"
        );
        floors
    })
}

/// The rows `//! | N | `a`, [`b`], `c::d` | … |` of a doc comment: each
/// module path in the second cell, with its floor.
fn floor_table(text: &str) -> Vec<(String, u8)> {
    let mut floors = Vec::new();
    for line in text.lines() {
        let Some(row) = line.strip_prefix("//! |") else {
            continue;
        };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (Some(floor), Some(modules)) = (cells.first(), cells.get(1)) else {
            continue;
        };
        let Ok(floor) = floor.parse::<u8>() else {
            continue;
        };
        for name in modules.split(',') {
            let name = name
                .trim()
                .trim_matches(|c| c == '[' || c == ']' || c == '`');
            floors.push((name.to_string(), floor));
        }
    }
    floors
}

fn floor_of(path: &str) -> Option<(&'static str, u8)> {
    floors()
        .iter()
        .filter(|(p, _)| path == p || path.starts_with(&format!("{p}::")))
        .max_by_key(|(p, _)| p.len())
        .map(|(p, f)| (p.as_str(), *f))
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

/// The `crate::a::b` paths a file names outside `//` comments, grouped
/// ones (`use crate::{a::b, c};`, over several lines too) each apart.
fn crate_paths(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        found.extend(paths_at(rest, ""));
    }
    found
}

/// The paths that `text` (what follows a `prefix::`) names: one path, or a
/// `{…}` group of them.
fn paths_at(text: &str, prefix: &str) -> Vec<String> {
    let path: String = text
        .chars()
        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == ':')
        .collect();
    let after = &text[path.len()..];
    let whole = format!("{prefix}{path}");
    if !after.starts_with('{') {
        return vec![whole.trim_end_matches(':').to_string()];
    }
    // A group: split its top level at commas.
    let (mut depth, mut start, mut items) = (0, 1, Vec::new());
    for (i, c) in after.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    items.push(&after[start..i]);
                    break;
                }
            }
            ',' if depth == 1 => {
                items.push(&after[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
        .into_iter()
        .map(str::trim_start)
        .filter(|item| !item.is_empty() && !item.starts_with("self"))
        .flat_map(|item| paths_at(item, &whole))
        .collect()
}

/// What `text`, the source of `module`, names on a floor above its own.
fn upward_from(module: &str, text: &str) -> Vec<String> {
    let Some((_, mine)) = floor_of(module) else {
        return Vec::new();
    };
    crate_paths(text)
        .into_iter()
        .filter_map(|path| {
            let (prefix, theirs) = floor_of(&path)?;
            (theirs > mine).then(|| {
                format!("{module} (floor {mine}) names crate::{path} ({prefix}, floor {theirs})")
            })
        })
        .collect()
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
        if floor_of(&module).is_none() {
            unplaced.push(module);
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for arrow in upward_from(&module, &text) {
            upward.push(format!(
                "{}: {arrow}",
                file.strip_prefix(&src).unwrap().display()
            ));
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules on no floor (add them to the table in src/lib.rs's # Layout): {unplaced:?}"
    );
    assert!(
        upward.is_empty(),
        "imports from a floor above:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_check_sees_an_upward_import() {
    // The control: events naming a stage (feedback) are caught, grouped
    // over lines or not; a stage naming events is not.
    assert_eq!(
        crate_paths("use crate::daemon::Wiring; // crate::cmd::x"),
        ["daemon"]
    );
    let grouped = "use crate::{\n    events::{self, Told},\n    feedback::led,\n};";
    assert_eq!(crate_paths(grouped), ["events", "feedback::led"]);
    assert_eq!(upward_from("events::source", grouped).len(), 1);
    assert_eq!(
        upward_from("events::source", "x: &crate::feedback::Told").len(),
        1
    );
    assert!(upward_from("feedback::led", grouped).is_empty());
    assert_eq!(
        upward_from("gate::bloom", "use crate::claimer::Link;").len(),
        1
    );
    assert_eq!(floor_of("claimer::lane"), Some(("claimer", 7)));
    assert_eq!(
        floor_of("source::hid::config"),
        Some(("source::hid::config", 2))
    );
    assert_eq!(floor_of("capture::clock"), Some(("capture::clock", 1)));
    assert_eq!(floor_of("capture::barcode"), Some(("capture", 2)));
}
