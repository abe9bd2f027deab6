//! The bytes in docs/scanner-feedback.md are the bytes scangate sends:
//! every `| zebra-ssi |`, `| honeywell |` and `| datalogic |` row of its
//! tables against `feedback::serial_bytes`, and each SSI packet's checksum
//! recomputed here.

use scangate::feedback::{FeedbackConfig, Told, serial_bytes};

fn told(name: &str) -> Told {
    *Told::ALL
        .iter()
        .find(|t| t.as_str() == name)
        .unwrap_or_else(|| panic!("no decision kind {name:?}"))
}

/// "05 E6 04" → bytes; "(nothing)" → none.
fn hex(cell: &str) -> Vec<u8> {
    if cell == "(nothing)" {
        return Vec::new();
    }
    cell.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap_or_else(|_| panic!("{b:?} in {cell:?}")))
        .collect()
}

#[test]
fn feedback_bytes_in_the_docs_are_the_bytes_sent() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/scanner-feedback.md"
    ))
    .unwrap();
    let mut seen = Vec::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        let protocol = cells[0];
        if !["zebra-ssi", "honeywell", "datalogic"].contains(&protocol) || cells.len() < 4 {
            continue;
        }
        let t = told(cells[1]);
        // The bytes are the column before the last one.
        let documented = hex(cells[cells.len() - 2]);
        let cfg: FeedbackConfig = toml::from_str(&format!("protocol = \"{protocol}\"")).unwrap();
        assert_eq!(serial_bytes(&cfg, t), documented, "{protocol} {t}: {line}");
        if protocol == "zebra-ssi" && !documented.is_empty() {
            let (body, ck) = documented.split_at(documented.len() - 2);
            assert_eq!(body[0] as usize, body.len(), "{line}: length byte");
            let sum: u32 = body.iter().map(|&b| u32::from(b)).sum();
            let want = (0x1_0000 - (sum & 0xFFFF)) & 0xFFFF;
            assert_eq!(
                u32::from(ck[0]) << 8 | u32::from(ck[1]),
                want,
                "{line}: checksum"
            );
        }
        seen.push((protocol, t));
    }
    for protocol in ["zebra-ssi", "honeywell", "datalogic"] {
        for t in Told::ALL {
            assert!(
                seen.contains(&(protocol, t)),
                "docs/scanner-feedback.md has no row for {protocol} {t}"
            );
        }
    }
}
