//! Unit tests of the module above (kept apart: the module reads on its own).

use super::*;
use crate::config::Config;

fn cfg() -> ControlsConfig {
    ControlsConfig::default()
}

#[test]
fn the_defaults_are_valid_and_documented() {
    let c = cfg();
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(c.repeat, "SGCTL-REPEAT");
    assert_eq!(c.quantity_prefix, "SGCTL-QTY-");
    assert_eq!(c.quantities, [2, 3, 4, 5, 6, 10, 12, 24]);
    assert_eq!(c.within(), Duration::from_secs(20));
    // No [controls] section: the defaults.
    assert_eq!(Config::parse("", None).unwrap().controls, c);
}

/// The commented `[controls]` block of the shipped example, uncommented,
/// parses and sets the defaults.
#[test]
fn the_documented_section_parses_with_its_defaults() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text
        .find("# [controls]\n")
        .expect("the example documents [controls]");
    let block: Vec<&str> = text[start..]
        .lines()
        .map_while(|l| l.strip_prefix("# "))
        .filter(|l| !l.starts_with('#'))
        .collect();
    assert!(block.len() >= 5, "{block:?}");
    let c = Config::parse(&block.join("\n"), None).unwrap();
    assert_eq!(c.controls, cfg());
}

#[test]
fn the_section_is_read_and_refused_by_key() {
    let c = Config::parse(
        "[controls]\nrepeat = \"AGAIN\"\nquantities = [7]\nwithin_ms = 5000\n",
        None,
    )
    .unwrap();
    assert_eq!(c.controls.repeat, "AGAIN");
    assert_eq!(c.controls.quantity_prefix, DEFAULT_QUANTITY_PREFIX);
    assert_eq!(c.controls.quantities, [7]);
    assert_eq!(c.controls.within_ms, 5000);
    for (text, key) in [
        ("[controls]\nrepaet = \"X\"", "controls.repaet"),
        (
            "[controls]\nrepeat = \"0100307773105025\"",
            "controls.repeat",
        ),
        ("[controls]\nwithin_ms = 10", "controls.within_ms"),
        ("[controls]\nquantities = [2, 1]", "controls.quantities[1]"),
    ] {
        let e = Config::parse(text, None).unwrap_err();
        assert_eq!(e.key, key, "{text}: {e}");
    }
}

#[test]
fn repeat_is_recognised_bare_with_an_aim_id_and_trailing_blanks() {
    let c = cfg();
    for frame in [
        &b"SGCTL-REPEAT"[..],
        b"]C0SGCTL-REPEAT",
        b"]Q1SGCTL-REPEAT",
        b"]X0SGCTL-REPEAT",
        b"]Y1aSGCTL-REPEAT",
        b"SGCTL-REPEAT\r\n",
        b"]C0SGCTL-REPEAT \t\r",
    ] {
        assert_eq!(
            c.recognise(frame),
            Some(Control::Repeat),
            "{}",
            String::from_utf8_lossy(frame)
        );
    }
    for frame in [
        &b""[..],
        b"\r\n",
        b"]C0",
        b"sgctl-repeat",
        b"SGCTL-REPEAT2",
        b" SGCTL-REPEAT",
        b"SGCTL-REPEA",
        b"]C0]C0SGCTL-REPEAT",
        b"]0CSGCTL-REPEAT",
        b"]YaSGCTL-REPEAT",
        b"SGCTL-REPEAT\x1d",
        b"]d201003077731050251728123121SN1",
        b"0100307773105025",
    ] {
        assert_eq!(
            c.recognise(frame),
            None,
            "{}",
            String::from_utf8_lossy(frame)
        );
    }
}

#[test]
fn quantities_are_two_to_999_without_leading_zeros() {
    let c = cfg();
    for (frame, n) in [
        (&b"SGCTL-QTY-2"[..], 2),
        (b"SGCTL-QTY-12", 12),
        (b"]C0SGCTL-QTY-999\r", 999),
        (b"SGCTL-QTY-100", 100),
        // Any N in range, printed or not.
        (b"SGCTL-QTY-7", 7),
    ] {
        assert_eq!(c.recognise(frame), Some(Control::Quantity(n)));
    }
    for frame in [
        &b"SGCTL-QTY-"[..],
        b"SGCTL-QTY-0",
        b"SGCTL-QTY-1",
        b"SGCTL-QTY-02",
        b"SGCTL-QTY-1000",
        b"SGCTL-QTY-+5",
        b"SGCTL-QTY-5x",
        b"SGCTL-QTY- 5",
        b"SGCTL-QTY-\xd9\xa3",
        b"SGCTL-QTY-4294967298",
    ] {
        assert_eq!(
            c.recognise(frame),
            None,
            "{}",
            String::from_utf8_lossy(frame)
        );
    }
}

#[test]
fn custom_contents_are_recognised() {
    let c = ControlsConfig {
        repeat: "R".into(),
        quantity_prefix: "Q".into(),
        ..cfg()
    };
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(c.recognise(b"R"), Some(Control::Repeat));
    assert_eq!(c.recognise(b"Q24"), Some(Control::Quantity(24)));
    assert_eq!(c.recognise(b"SGCTL-REPEAT"), None);
    assert_eq!(c.recognise(b"]C0SGCTL-ACK\r\n"), Some(Control::Acknowledge));
    // A QUANTITY prefix that the ACKNOWLEDGE content starts with is no
    // clash: that content is not a quantity.
    let c = ControlsConfig {
        repeat: "AGAIN".into(),
        quantity_prefix: "SGCTL-".into(),
        ..cfg()
    };
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(c.recognise(b"SGCTL-ACK"), Some(Control::Acknowledge));
    assert_eq!(c.recognise(b"SGCTL-12"), Some(Control::Quantity(12)));
}

#[test]
fn labels_and_their_words() {
    let labels = cfg().labels();
    assert_eq!(labels.len(), 10);
    assert_eq!(
        labels[9],
        Label {
            control: Control::Acknowledge,
            content: "SGCTL-ACK".into()
        }
    );
    assert_eq!(Control::Acknowledge.describe(), "acknowledge");
    assert_eq!(
        labels[0],
        Label {
            control: Control::Repeat,
            content: "SGCTL-REPEAT".into()
        }
    );
    assert_eq!(labels[8].content, "SGCTL-QTY-24");
    assert_eq!(Control::Repeat.describe(), "repeat");
    assert_eq!(Control::Quantity(3).describe(), "quantity 3");
    assert_eq!(
        Control::Quantity(3).caption(),
        "QUANTITY 3 — the next read counts 3 units"
    );
    assert_eq!(
        Control::Repeat.caption(),
        "REPEAT — the next read on this scanner is another item"
    );
    // Every printed label is recognised as what it declares.
    let c = cfg();
    for l in &labels {
        assert_eq!(c.recognise(l.content.as_bytes()), Some(l.control));
    }
}

/// Each refusal names its key, and the fix is not empty.
#[test]
fn invalid_values_are_refused_naming_the_key() {
    let with = |f: &dyn Fn(&mut ControlsConfig)| {
        let mut c = cfg();
        f(&mut c);
        c.validate().unwrap_err()
    };
    let cases: Vec<(Invalid, &str, &str)> = vec![
        (with(&|c| c.repeat.clear()), "repeat", "is empty"),
        (
            with(&|c| c.repeat = "X".repeat(41)),
            "repeat",
            "longer than 40",
        ),
        (
            with(&|c| c.repeat = "SG REPEAT".into()),
            "repeat",
            "' ' at position 2",
        ),
        (
            with(&|c| c.repeat = "]C0REPEAT".into()),
            "repeat",
            "']' at position 0",
        ),
        (
            with(&|c| c.repeat = "R\u{e9}P".into()),
            "repeat",
            "at position 1",
        ),
        // A GS1 element string with a GTIN: a scanner without AIM ids
        // would deliver a pick.
        (
            with(&|c| c.repeat = "0100307773105025".into()),
            "repeat",
            "GTIN 00307773105025",
        ),
        // A UPC-A.
        (
            with(&|c| c.repeat = "036000291452".into()),
            "repeat",
            "product barcode",
        ),
        (
            with(&|c| c.quantity_prefix = "X".repeat(38)),
            "quantity_prefix",
            "longer than 37",
        ),
        (
            with(&|c| c.quantity_prefix = "QTY^".into()),
            "quantity_prefix",
            "'^'",
        ),
        // "0100307773105" + "025": a GTIN for QUANTITY 25.
        (
            with(&|c| c.quantity_prefix = "0100307773105".into()),
            "quantity_prefix",
            "product barcode",
        ),
        (
            with(&|c| c.repeat = "SGCTL-QTY-REPEAT".into()),
            "repeat",
            "starts with quantity_prefix",
        ),
        (
            with(&|c| c.quantity_prefix = "SGCTL-REPEAT-".into()),
            "quantity_prefix",
            "starts with the REPEAT",
        ),
        (with(&|c| c.acknowledge.clear()), "acknowledge", "is empty"),
        (
            with(&|c| c.acknowledge = "036000291452".into()),
            "acknowledge",
            "product barcode",
        ),
        (
            with(&|c| c.acknowledge = "SGCTL-REPEAT".into()),
            "acknowledge",
            "reads as another control label",
        ),
        (
            with(&|c| c.acknowledge = "SGCTL-QTY-12".into()),
            "acknowledge",
            "reads as another control label",
        ),
        (
            with(&|c| c.quantities = vec![2, 1000]),
            "quantities[1]",
            "1000 is out of range",
        ),
        (
            with(&|c| c.quantities = vec![1]),
            "quantities[0]",
            "out of range",
        ),
        (
            with(&|c| c.quantities = vec![3, 4, 3]),
            "quantities[2]",
            "listed twice",
        ),
        (with(&|c| c.within_ms = 999), "within_ms", "999"),
        (with(&|c| c.within_ms = 600_001), "within_ms", "600001"),
    ];
    for (e, key, problem) in cases {
        assert_eq!(e.key, key, "{e}");
        assert!(e.problem.contains(problem), "{e}");
        assert!(!e.fix.is_empty(), "{e}");
    }
    let mut edge = cfg();
    edge.within_ms = 1000;
    edge.quantities = vec![];
    edge.repeat = "X".repeat(40);
    assert_eq!(edge.validate(), Ok(()));
    edge.within_ms = 600_000;
    edge.quantities = vec![999];
    assert_eq!(edge.validate(), Ok(()));
}
