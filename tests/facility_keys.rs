//! Every key of a facility stays in its Redis Cluster slot: the Rust side
//! builds facility keys in one place only (`facility::cluster::facility_key`,
//! which puts the facility in the hash tag), and the scripts build none
//! (every key they touch is passed in `KEYS`, so Redis Cluster checks its
//! slot). Fails when a new key builder or a key made inside a script
//! appears.

use std::path::{Path, PathBuf};

fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

#[test]
fn every_facility_key_carries_the_facility_hash_tag() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut rust = Vec::new();
    files(&src, "rs", &mut rust);
    let mut builders = Vec::new();
    // (Unit tests, after `#[cfg(test)]` or under a `tests` directory,
    // name keys as data.)
    for path in rust
        .iter()
        .filter(|p| !p.components().any(|c| c.as_os_str() == "tests"))
    {
        let text = std::fs::read_to_string(path).unwrap();
        for (n, line) in text
            .lines()
            .take_while(|l| !l.contains("#[cfg(test)]"))
            .enumerate()
        {
            let code = line.split("//").next().unwrap_or("");
            // A string literal that begins a key: "scangate:" and a name or
            // a hash tag (not "scangate::" nor "scangate: " of a message,
            // nor a serde name such as EPCIS's "scangate:alerts").
            let starts = code.match_indices("\"scangate:").filter(|(i, _)| {
                code[i + 10..]
                    .chars()
                    .next()
                    .is_some_and(|c| c == '{' || c.is_ascii_alphanumeric())
                    && !code[..*i].trim_end().ends_with("rename =")
            });
            for _ in starts {
                builders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert_eq!(
        builders.len(),
        1,
        "facility keys are built only by facility::cluster::facility_key (one hash tag, one slot); found: {builders:#?}"
    );
    assert!(
        builders[0].contains("cluster.rs") && builders[0].contains("scangate:{{{facility}}}:"),
        "{builders:?}"
    );
    let mut lua = Vec::new();
    files(&src.join("facility"), "lua", &mut lua);
    assert!(lua.len() >= 2, "{lua:?}");
    for path in &lua {
        let text = std::fs::read_to_string(path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("--").next().unwrap_or("");
            assert!(
                !code.contains("scangate:"),
                "{}:{}: a script builds a key ({line:?}): pass it in KEYS, so Redis Cluster checks it is in the facility's slot",
                path.display(),
                n + 1
            );
        }
    }
}
