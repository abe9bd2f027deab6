//! Unit tests of the module above (kept apart: the module reads on its own).

use super::parse::line_column;
use super::sections::{default_metrics_interval, default_retention_hours, default_window_ms};
use super::*;
use crate::source::config::default_max_frame_bytes;
use crate::source::serial::config::default_baud;

#[test]
fn the_shipped_example_parses_and_matches_the_documented_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
    let c = Config::load(Some(&path)).unwrap();
    assert_eq!(c.gateway.facility, "pharmacy-0042");
    assert_eq!(c.dedup.window_ms, default_window_ms());
    assert_eq!(c.dedup.retention_hours, default_retention_hours());
    assert_eq!(c.outbox.keep_raw_hours, default_retention_hours());
    assert_eq!(c.scanners.len(), 3);
    let hid = c.scanners[2].as_hid().unwrap();
    assert_eq!(hid.mode(), HidMode::Pos);
    assert_eq!(
        (hid.vendor_id, hid.product_id),
        (Some(0x0c2e), Some(0x0b61))
    );
    assert_eq!(hid.timeout_ms(), DEFAULT_HID_TIMEOUT_MS);
    let rx = &c.scanners[1];
    assert_eq!(rx.scan_type, ScanType::Receive);
    let rx_line = rx.as_serial().unwrap();
    assert_eq!(
        (rx_line.baud, rx.quantity, rx_line.ack),
        (default_baud(), 1, false)
    );
    assert_eq!(rx.max_frame_bytes, default_max_frame_bytes());
    // Every line key the example sets explicitly is at its documented
    // default, and equals what an omitted key gives (scanner[1]).
    let c1 = c.scanners[0].as_serial().unwrap();
    for s in [c1, rx_line] {
        assert_eq!(s.data_bits, 8);
        assert_eq!(s.parity, Parity::None);
        assert_eq!(s.stop_bits, 1);
        assert_eq!(s.flow_control, FlowControl::None);
        assert!(!s.stx_etx);
        assert_eq!(
            (&s.prefix, &s.suffix, s.frame_timeout_ms),
            (&None, &None, None)
        );
    }
}

/// The commented-out examples of the unset-by-default keys are valid.
#[test]
fn the_documented_metrics_section_parses_with_its_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text
        .find("# [metrics]\n")
        .expect("the example documents [metrics]");
    let block: Vec<&str> = text[start..]
        .lines()
        .map_while(|l| l.strip_prefix("# "))
        .filter(|l| !l.starts_with('#'))
        .collect();
    let c = Config::parse(&block.join("\n"), None).unwrap();
    assert_eq!(
        c.metrics.textfile.as_deref(),
        Some(Path::new("/var/lib/prometheus/node-exporter/scangate.prom"))
    );
    assert_eq!(c.metrics.listen, Some("127.0.0.1:9464".parse().unwrap()));
    assert_eq!(c.metrics.interval_s, default_metrics_interval());
    assert_eq!(Config::default().metrics.listen, None);
}

#[test]
fn metrics_keys_out_of_range_are_refused_naming_the_key() {
    for (text, key) in [
        ("[metrics]\ninterval_s = 0", "metrics.interval_s"),
        (
            "[metrics]\ntextfile = \"/tmp/scangate.txt\"",
            "metrics.textfile",
        ),
        ("[metrics]\nlisten = \"nowhere\"", "listen"),
        ("[metrics]\nport = 9464", "port"),
    ] {
        let e = Config::parse(text, None).unwrap_err().to_string();
        assert!(e.contains(key), "{text}: {e}");
    }
}

#[test]
fn a_metrics_listen_address_beyond_loopback_is_warned_of_not_refused() {
    let warning = |listen: &str| {
        Config::parse(&format!("[metrics]\nlisten = {listen:?}"), None)
            .unwrap()
            .metrics
            .exposure_warning()
    };
    for quiet in [
        "127.0.0.1:9464",
        "127.0.0.2:9464",
        "[::1]:9464",
        "[::ffff:127.0.0.1]:9464",
    ] {
        assert_eq!(warning(quiet), None, "{quiet}");
    }
    for exposed in [
        "0.0.0.0:9464",
        "192.168.1.20:9464",
        "[::]:9464",
        "[fd00::1]:9464",
    ] {
        let w = warning(exposed).unwrap_or_else(|| panic!("{exposed}: no warning"));
        assert!(
            w.contains(&format!("listen = \"{exposed}\""))
                && w.contains("not a loopback address")
                && w.contains("Fix"),
            "{w}"
        );
    }
    assert_eq!(Config::default().metrics.exposure_warning(), None);
}

#[test]
fn the_shipped_examples_of_optional_keys_parse() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let mut found = Vec::new();
    for key in ["prefix", "suffix", "frame_timeout_ms"] {
        let line = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("# ")
                    .filter(|l| l.starts_with(&format!("{key} = ")))
            })
            .unwrap_or_else(|| panic!("config/scangate.toml documents no example for {key}"));
        found.push(line.to_string());
    }
    let c = scanner_with(&found.join("\n")).unwrap();
    let s = c.scanners[0].as_serial().unwrap();
    assert_eq!(s.prefix.as_ref().unwrap().as_bytes(), b"#");
    assert_eq!(s.suffix.as_ref().unwrap().as_bytes(), b"\r\n");
    assert_eq!(s.frame_timeout_ms, Some(50));
}

/// The commented-out HID examples are valid (keyboard keys on a
/// keyboard scanner, POS keys on a POS one).
#[test]
fn the_shipped_hid_examples_parse() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let example = |key: &str| {
        text.lines()
            .find_map(|l| {
                l.strip_prefix("# ")
                    .filter(|l| l.starts_with(&format!("{key} = ")))
            })
            .unwrap_or_else(|| panic!("config/scangate.toml documents no example for {key}"))
            .to_string()
    };
    let kbd: Vec<String> = [
        "layout",
        "gs",
        "gs_substitute",
        "terminator",
        "grab",
        "serial_number",
        "usb_port",
    ]
    .iter()
    .map(|k| example(k))
    .collect();
    let c = hid_with("keyboard", &kbd.join("\n")).unwrap();
    let s = c.scanners[0]
        .as_hid()
        .and_then(HidConfig::keyboard)
        .unwrap();
    assert_eq!(s.layout, Some(crate::source::hid::layout::Layout::German));
    assert_eq!(
        (s.gs, s.gs_substitute.as_deref()),
        (Some(GsKey::Substitute), Some("~"))
    );
    assert_eq!(
        s.terminator.as_deref(),
        Some(&[TerminatorKey::Enter, TerminatorKey::Tab][..])
    );
    let pos: Vec<String> = ["report_id", "path", "frame_timeout_ms"]
        .iter()
        .map(|k| example(k))
        .collect();
    let c = hid_with("pos", &pos.join("\n")).unwrap();
    let pos = c.scanners[0].as_hid().and_then(HidConfig::pos).unwrap();
    assert_eq!(pos.report_id, Some(2));
}

fn hid_with(mode: &str, extra: &str) -> Result<Config, ConfigError> {
    let text = format!(
        "[[scanner]]\nname='h'\nkind='hid'\nmode='{mode}'\nvendor_id=0x0c2e\nscan_type='dispense'\n{extra}\n"
    );
    Config::parse(&text, None)
}

#[test]
fn hid_keys_are_validated_with_a_fix() {
    for (mode, extra, key) in [
        ("pos", "layout = 'de'", "layout"),
        ("pos", "grab = false", "grab"),
        ("keyboard", "report_id = 2", "report_id"),
        ("keyboard", "gs = 'substitute'", "gs_substitute"),
        ("keyboard", "gs_substitute = '~'", "gs_substitute"),
        (
            "keyboard",
            "gs = 'substitute'\ngs_substitute = ''",
            "gs_substitute",
        ),
        ("keyboard", "terminator = ['enter', 'enter']", "terminator"),
        ("keyboard", "terminator = ['space']", "terminator"),
        ("keyboard", "layout = 'fr'", "layout"),
        ("pos", "ack = true", "ack"),
        ("pos", "suffix = '\\r'", "suffix"),
        ("pos", "vendor_id = 70000", "vendor_id"),
        ("pos", "frame_timeout_ms = 0", "frame_timeout_ms"),
    ] {
        let text = format!(
            "[[scanner]]\nname='h'\nkind='hid'\nmode='{mode}'\nproduct_id=1\nscan_type='dispense'\n{extra}\n"
        );
        let e = Config::parse(&text, None).unwrap_err();
        assert_eq!(e.key, format!("scanner[0].{key}"), "{extra}: {e}");
    }
    // No mode; nothing to match by.
    let e = Config::parse(
        "[[scanner]]\nname='h'\nkind='hid'\nvendor_id=1\nscan_type='dispense'\n",
        None,
    )
    .unwrap_err();
    assert_eq!(e.key, "scanner[0].mode", "{e}");
    let e = Config::parse(
        "[[scanner]]\nname='h'\nkind='hid'\nmode='pos'\nscan_type='dispense'\n",
        None,
    )
    .unwrap_err();
    assert_eq!(e.key, "scanner[0].vendor_id", "{e}");
    assert!(e.fix.contains("scangate devices"), "{e}");
    // HID keys on a serial scanner are named.
    let e = scanner_with("usb_port = '1-1'").unwrap_err();
    assert_eq!(e.key, "scanner[0].usb_port", "{e}");
    assert!(e.fix.contains("kind = \"hid\""), "{e}");
    // A HID scanner needs no path; a serial one still does.
    hid_with("keyboard", "terminator = []\nlayout = 'us'\ngs = 'f8'").unwrap();
    let e = Config::parse(
        "[[scanner]]\nname='s'\nkind='serial'\nscan_type='dispense'\n",
        None,
    )
    .unwrap_err();
    assert_eq!(e.key, "scanner[0].path", "{e}");
}

fn scanner_with(extra: &str) -> Result<Config, ConfigError> {
    let text = format!(
        "[[scanner]]\nname='a'\nkind='serial'\npath='/dev/x'\nscan_type='dispense'\n{extra}\n"
    );
    Config::parse(&text, None)
}

#[test]
fn byte_strings_as_escaped_strings_or_byte_arrays() {
    let c = scanner_with("suffix = \"\\r\\n\"\nprefix = \"\\u0002]\"").unwrap();
    let s = c.scanners[0].as_serial().unwrap();
    assert_eq!(s.suffix.as_ref().unwrap().as_bytes(), b"\r\n");
    assert_eq!(s.prefix.as_ref().unwrap().as_bytes(), b"\x02]");
    let c = scanner_with("suffix = [0x0d, 0x0a]\nprefix = [0xff]").unwrap();
    let s = c.scanners[0].as_serial().unwrap();
    assert_eq!(s.suffix.as_ref().unwrap().as_bytes(), b"\r\n");
    assert_eq!(s.prefix.as_ref().unwrap().as_bytes(), b"\xff");
    let e = scanner_with("suffix = [13, 256]").unwrap_err();
    assert_eq!(e.key, "scanner[0].suffix", "{e}");
    assert!(e.problem.contains("256"), "{e}");
    let e = scanner_with("suffix = \"\u{e9}\"").unwrap_err();
    assert_eq!(e.key, "scanner[0].suffix", "{e}");
    assert!(e.problem.contains("ASCII"), "{e}");
    let e = scanner_with("suffix = 13").unwrap_err();
    assert_eq!(e.key, "scanner[0].suffix", "{e}");
}

#[test]
fn line_settings_parse_and_bad_ones_are_named() {
    let c = scanner_with(
        "data_bits = 7\nparity = \"even\"\nstop_bits = 2\nflow_control = \"hardware\"",
    )
    .unwrap();
    let s = c.scanners[0].as_serial().unwrap();
    assert_eq!(
        (s.data_bits, s.parity, s.stop_bits, s.flow_control),
        (7, Parity::Even, 2, FlowControl::Hardware)
    );
    for (extra, key) in [
        ("data_bits = 9", "data_bits"),
        ("data_bits = 4", "data_bits"),
        ("stop_bits = 3", "stop_bits"),
        ("parity = \"mark\"", "parity"),
        ("flow_control = \"xon\"", "flow_control"),
        ("frame_timeout_ms = 0", "frame_timeout_ms"),
        ("frame_timeout_ms = 60001", "frame_timeout_ms"),
        ("prefix = \"\"", "prefix"),
        ("suffix = \"0123456789abcdefX\"", "suffix"),
        ("stx_etx = 1", "stx_etx"),
    ] {
        let e = scanner_with(extra).unwrap_err();
        assert_eq!(e.key, format!("scanner[0].{key}"), "{extra}: {e}");
    }
}

#[test]
fn framing_combinations_that_cannot_work_are_rejected_with_a_fix() {
    let e = scanner_with("stx_etx = true\nsuffix = \"\\r\"").unwrap_err();
    assert_eq!(e.key, "scanner[0].suffix", "{e}");
    assert!(e.fix.contains("remove `suffix`"), "{e}");
    let e = scanner_with("suffix = \"\"").unwrap_err();
    assert_eq!(e.key, "scanner[0].frame_timeout_ms", "{e}");
    assert!(e.fix.contains("set frame_timeout_ms"), "{e}");
    let e = scanner_with("prefix = \"A\\r\"").unwrap_err();
    assert_eq!(e.key, "scanner[0].prefix", "{e}");
    let e = scanner_with("stx_etx = true\nprefix = \"\\u0002\"").unwrap_err();
    assert_eq!(e.key, "scanner[0].prefix", "{e}");
    let e = scanner_with("suffix = \"#!\"\nprefix = \"x#!\"").unwrap_err();
    assert_eq!(e.key, "scanner[0].prefix", "{e}");
    // Valid combinations.
    for ok in [
        "suffix = \"\"\nframe_timeout_ms = 50",
        "stx_etx = true\nframe_timeout_ms = 200\nprefix = \"]\"",
        "suffix = \"\\r\\n\"\nprefix = \"#\"\nframe_timeout_ms = 500",
        "frame_timeout_ms = 100",
    ] {
        scanner_with(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
}

#[test]
fn no_file_means_defaults() {
    let c = Config::load(None).unwrap();
    assert_eq!(c.dedup.window_ms, 3000);
    assert!(c.scanners.is_empty());
}

#[test]
fn keep_raw_hours_defaults_to_the_retention_and_zero_is_named() {
    let c = Config::parse("[outbox]\n", None).unwrap();
    assert_eq!(c.outbox.keep_raw_hours, 72);
    let e = Config::parse("[outbox]\nkeep_raw_hours = 0\n", None).unwrap_err();
    assert_eq!(e.key, "outbox.keep_raw_hours");
    assert!(e.fix.contains("1..=8784"), "{e}");
}

#[test]
fn unknown_key_is_named() {
    let e = Config::parse("[dedup]\nwindow_msec = 5\n", None).unwrap_err();
    assert_eq!(e.key, "dedup.window_msec");
    assert!(e.problem.contains("window_msec"), "{e}");
}

#[test]
fn bad_value_is_named_with_index() {
    let text = "[[scanner]]\nname='a'\nkind='serial'\npath='/dev/x'\nscan_type='dispense'\n\
                [[scanner]]\nname='b'\nkind='serial'\npath='/dev/y'\nscan_type='dispense'\nquantity=0\n";
    let e = Config::parse(text, None).unwrap_err();
    assert_eq!(e.key, "scanner[1].quantity");
}

#[test]
fn bad_enum_is_named() {
    let text = "[[scanner]]\nname='a'\nkind='serial'\npath='/dev/x'\nscan_type='sell'\n";
    let e = Config::parse(text, None).unwrap_err();
    assert_eq!(e.key, "scanner[0].scan_type", "{e}");
}

/// The tag is read first and each kind's type deserializes its own keys:
/// what serde refuses still names the key where it stands.
#[test]
fn kind_and_mode_pick_the_types_and_errors_keep_their_key() {
    for (text, key) in [
        (
            "[[scanner]]\nname='a'\npath='/dev/x'\nscan_type='dispense'\n",
            "scanner[0]",
        ),
        (
            "[[scanner]]\nname='a'\nkind='usb'\npath='/dev/x'\nscan_type='dispense'\n",
            "scanner[0].kind",
        ),
        (
            "[[scanner]]\nname='h'\nkind='hid'\nmode='wedge'\nvendor_id=1\nscan_type='dispense'\n",
            "scanner[0].mode",
        ),
        (
            "[[scanner]]\nname='h'\nkind='hid'\nmode='pos'\nvendor_id=1\nscan_type='dispense'\ncolour='red'\n",
            "scanner[0].colour",
        ),
        ("scanner = [1]\n", "scanner"),
        ("scanner = 1\n", "scanner"),
    ] {
        let e = Config::parse(text, None).unwrap_err();
        assert!(e.key.starts_with(key), "{text}: {e}");
    }
    let e = scanner_with("colour = 'red'").unwrap_err();
    assert_eq!(e.key, "scanner[0].colour", "{e}");
    assert!(e.problem.contains("unknown field `colour`"), "{e}");
    let e = scanner_with("mode = 'pos'").unwrap_err();
    assert_eq!(e.key, "scanner[0].mode", "{e}");
    assert!(e.fix.contains("kind = \"hid\""), "{e}");
    let e = hid_with("keyboard", "report_id = 2").unwrap_err();
    assert_eq!(e.fix, "remove it, or change `mode`", "{e}");
}

/// A HID entry copied from a serial one keeps parsing as it always did:
/// the line settings are accepted (and ignored), `baud`'s range and
/// every type still checked; framing keys are refused.
#[test]
fn a_hid_scanner_accepts_the_line_settings_it_always_accepted() {
    let c = hid_with(
        "pos",
        "baud = 9600\ndata_bits = 8\nparity = 'none'\nstop_bits = 1\nflow_control = 'none'\nack = false\nstx_etx = false",
    )
    .unwrap();
    assert_eq!(
        c.scanners[0].as_hid().map(HidConfig::mode),
        Some(HidMode::Pos)
    );
    for (extra, key) in [
        ("baud = 0", "baud"),
        ("parity = 'mark'", "parity"),
        ("ack = true", "ack"),
        ("stx_etx = true", "stx_etx"),
        ("prefix = '#'", "prefix"),
    ] {
        let e = hid_with("keyboard", extra).unwrap_err();
        assert_eq!(e.key, format!("scanner[0].{key}"), "{extra}: {e}");
    }
    let e = hid_with("pos", "ack = true").unwrap_err();
    assert!(e.fix.contains("HID reports carry their own framing"), "{e}");
}

#[test]
fn scanners_built_in_code_have_the_parsed_defaults() {
    let c = scanner_with("").unwrap();
    let parsed = c.scanners[0].as_serial().unwrap();
    let built = Scanner::serial("a", "/dev/x", ScanType::Dispense);
    assert_eq!(
        (built.kind.baud, built.kind.data_bits, built.kind.stop_bits),
        (parsed.baud, parsed.data_bits, parsed.stop_bits)
    );
    assert_eq!(built.quantity, c.scanners[0].quantity);
    assert_eq!(built.max_frame_bytes, c.scanners[0].max_frame_bytes);
    let hid = Scanner::hid("h", HidMode::Keyboard, ScanType::Dispense);
    assert_eq!(hid.kind.mode(), HidMode::Keyboard);
    assert_eq!(hid.kind.timeout_ms(), DEFAULT_HID_TIMEOUT_MS);
}

#[test]
fn resolve_reads_the_redis_secrets_once_and_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "s3cret\n").unwrap();
    let text = |extra: &str| {
        format!("[redis]\nurl = \"rediss://r:6379/0\"\npassword_file = {pw:?}\n{extra}")
    };
    let cfg = Config::parse(&text(""), None).unwrap();
    let s = Settings::resolve(&cfg).unwrap();
    let redis = s.redis.as_ref().unwrap();
    assert_eq!(redis.url(), "rediss://:s3cret@r:6379/0");
    assert!(!format!("{s:?}").contains("s3cret"), "{s:?}");
    let missing = dir.path().join("missing.pem");
    let cfg = Config::parse(&text(&format!("ca_file = {missing:?}\n")), None).unwrap();
    let e = Settings::resolve(&cfg).unwrap_err();
    assert_eq!(e.key, "redis.ca_file", "{e}");
    assert!(e.fix.contains("ca_file"), "{e}");
    std::fs::remove_file(&pw).unwrap();
    let cfg = Config::parse(&text(""), None).unwrap();
    let e = Settings::resolve(&cfg).unwrap_err();
    assert_eq!(e.key, "redis.password_file", "{e}");
    assert!(e.problem.contains(pw.to_str().unwrap()), "{e}");
}

/// The lookup order: the given path (`--config` / `SCANGATE_CONFIG`) wins
/// even when it does not exist (the command then names it); else the first
/// default that exists; else none (built-in defaults).
#[test]
fn the_config_file_is_the_given_one_else_the_first_default_that_exists() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("scangate.toml");
    let absent = dir.path().join("absent.toml");
    let given = dir.path().join("given.toml");
    assert_eq!(locate(None, &[&absent, &etc]), None);
    std::fs::write(&etc, "").unwrap();
    assert_eq!(locate(None, &[&absent, &etc]), Some(etc.clone()));
    assert_eq!(locate(Some(&given), &[&etc]), Some(given));
    assert_eq!(DEFAULT_PATH, "/etc/scangate/scangate.toml");
}

#[test]
fn toml_syntax_errors_name_line_and_column() {
    let text = "[gateway]\nfacility = \"f1\"\nid = gw1\n";
    let e = Config::parse(text, None).unwrap_err();
    assert!(e.problem.contains("(line 3, column 6)"), "{e}");
    assert_eq!(line_column("a\nbé\nc", 5), (2, 3));
    assert_eq!(line_column("", 0), (1, 1));
}

// `[redis]`, the facility store's section.

/// The commented `[redis]` block of the shipped example, uncommented.
fn example_redis_block() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text
        .find("# [redis]\n")
        .expect("the example documents [redis]");
    text[start..]
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_documented_redis_section_parses_with_its_defaults() {
    let c = Config::parse(&example_redis_block(), None).unwrap();
    let r = c.redis.unwrap();
    assert_eq!(r.url, "rediss://redis.pharmacy.lan:6379/0");
    assert!(r.ca_file.is_some());
    assert_eq!((r.connect_timeout_ms, r.command_timeout_ms), (1000, 1000));
    assert_eq!(
        r.min_replicas_ack,
        crate::facility::config::ReplicaAck::Auto
    );
    assert_eq!(r.max_clock_error_ms, 250);
    assert_eq!(r.ledger_stream_keep_days, 7);
    assert_eq!(
        r.url_with_credentials(Some("p@ss word")),
        "rediss://scangate:p%40ss%20word@redis.pharmacy.lan:6379/0"
    );
}

#[test]
fn sentinels_name_the_primary_and_url_keeps_scheme_and_database() {
    use crate::facility::config::ReplicaAck;
    let text = "[redis]\nurl = \"rediss:///2\"\nusername = \"u\"\n\
                sentinels = [\"s1:26379\", \"[::1]:26380\"]\nservice_name = \"scangate\"\n\
                min_replicas_ack = 0\n";
    let r = Config::parse(text, None).unwrap().redis.unwrap();
    assert!(r.uses_sentinel());
    assert_eq!(r.scheme(), "rediss");
    assert_eq!(r.min_replicas_ack, ReplicaAck::Exactly(0));
    assert_eq!(
        r.url_at(Some("10.0.0.7:6379"), Some("pw")),
        "rediss://u:pw@10.0.0.7:6379/2"
    );
    let text =
        "[redis]\nsentinels = [\"s1:26379\"]\nservice_name = \"m\"\nmin_replicas_ack = \"auto\"\n";
    let r = Config::parse(text, None).unwrap().redis.unwrap();
    assert_eq!(
        (r.scheme(), r.min_replicas_ack),
        ("redis", ReplicaAck::Auto)
    );
    assert_eq!(r.url_at(Some("h:1"), None), "redis://h:1/");
    assert_eq!(ReplicaAck::Auto.wanted(2), 2);
    assert_eq!(ReplicaAck::Exactly(1).wanted(2), 1);
}

#[test]
fn a_cluster_names_seed_nodes_and_url_keeps_only_the_scheme() {
    let text = "[redis]\nurl = \"rediss://\"\ncluster = [\"n1:6379\", \"[::1]:6380\"]\n";
    let r = Config::parse(text, None).unwrap().redis.unwrap();
    assert!(r.is_cluster() && !r.uses_sentinel());
    assert_eq!(r.scheme(), "rediss");
    assert_eq!(
        r.url_at(Some("10.0.0.7:6379"), None),
        "rediss://10.0.0.7:6379/"
    );
    let r = Config::parse("[redis]\ncluster = [\"n1:6379\"]\n", None)
        .unwrap()
        .redis
        .unwrap();
    assert_eq!(r.url_at(Some("h:1"), None), "redis://h:1/");
    let bad = |text: &str| Config::parse(text, None).unwrap_err().key;
    assert_eq!(bad("[redis]\ncluster = [\"n1\"]\n"), "redis.cluster[0]");
    assert_eq!(
        bad("[redis]\nurl = \"redis://x:1\"\ncluster = [\"n1:1\"]\n"),
        "redis.url"
    );
    assert_eq!(
        bad("[redis]\nurl = \"redis:///3\"\ncluster = [\"n1:1\"]\n"),
        "redis.url"
    );
    assert_eq!(
        bad("[redis]\ncluster = [\"n1:1\"]\nsentinels = [\"s:1\"]\nservice_name = \"m\"\n"),
        "redis.cluster"
    );
}

#[test]
fn bad_redis_values_name_the_key() {
    let bad = |text: &str| Config::parse(text, None).unwrap_err().key;
    assert_eq!(bad("[redis]\nurl = \"http://x\"\n"), "redis.url");
    assert_eq!(bad("[redis]\nurl = \"redis://u:secret@x\"\n"), "redis.url");
    assert_eq!(
        bad("[redis]\nurl = \"redis://x\"\ncommand_timeout_ms = 0\n"),
        "redis.command_timeout_ms"
    );
    assert_eq!(
        bad("[redis]\nurl = \"redis://x\"\nmax_retries = 3\n"),
        "redis.max_retries"
    );
    assert_eq!(bad("[redis]\ncommand_timeout_ms = 100\n"), "redis.url");
    assert_eq!(
        bad("[redis]\nurl = \"redis://x\"\nmin_replicas_ack = \"all\"\n"),
        "redis.min_replicas_ack"
    );
    assert_eq!(
        bad("[redis]\nurl = \"redis://x\"\nmin_replicas_ack = 17\n"),
        "redis.min_replicas_ack"
    );
    assert_eq!(
        bad("[redis]\nsentinels = [\"s1:26379\"]\n"),
        "redis.service_name"
    );
    assert_eq!(
        bad("[redis]\nurl = \"redis://x\"\nservice_name = \"m\"\n"),
        "redis.service_name"
    );
    assert_eq!(
        bad("[redis]\nsentinels = [\"s1\"]\nservice_name = \"m\"\n"),
        "redis.sentinels[0]"
    );
    assert_eq!(
        bad(
            "[redis]\nurl = \"redis://x:6379/0\"\nsentinels = [\"s1:26379\"]\nservice_name = \"m\"\n"
        ),
        "redis.url"
    );
    let e = Config::parse("[redis]\nurl = \"redis://u:secret@x\"\n", None).unwrap_err();
    assert!(!e.to_string().contains("secret"), "{e}");
}

/// `[gateway] gln`: the shipped example is a valid GLN; a mistyped check
/// digit or a wrong length is refused naming the key and what is wrong.
#[test]
fn the_gln_is_checked_and_its_example_parses() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let example = text
        .lines()
        .find_map(|l| l.strip_prefix("# ").filter(|l| l.starts_with("gln = ")))
        .expect("config/scangate.toml documents an example gln");
    let c = Config::parse(&format!("[gateway]\n{example}"), None).unwrap();
    assert_eq!(c.gateway.gln.as_deref(), Some("0614141000005"));
    assert_eq!(Config::default().gateway.gln, None);
    for (gln, says) in [
        ("0614141000006", "ends in 6, and its GS1 check digit is 5"),
        ("614141000005", "is not 13 digits"),
        ("06141410000050", "is not 13 digits"),
        ("O614141000005", "is not 13 digits"),
    ] {
        let e = Config::parse(&format!("[gateway]\ngln = {gln:?}"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("gateway.gln") && e.contains(says), "{gln}: {e}");
    }
}

#[test]
fn records_consumer_hold_days_defaults_to_90_and_is_bounded() {
    assert_eq!(Config::default().records.consumer_hold_days, 90);
    let c = Config::parse("[records]\nconsumer_hold_days = 0", None).unwrap();
    assert_eq!(c.records.consumer_hold_days, 0);
    let e = Config::parse("[records]\nconsumer_hold_days = 40000", None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("records.consumer_hold_days"), "{e}");
}

/// A `[[sink]]` table: the shipped example parses; refusals name
/// `sink[i].key` and say what to do; the files it names are read at
/// resolve, their secrets never shown.
#[test]
fn sinks_are_checked_and_their_files_read() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text
        .find("# [[sink]]")
        .expect("the example documents [[sink]]");
    let example: String = text[start..]
        .lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let c = Config::parse(&example, None).unwrap();
    let s = &c.sinks[0];
    assert_eq!(
        (s.name.as_str(), s.format, s.batch, s.timeout_ms),
        ("inventory", SinkFormat::Json, 100, 10_000)
    );
    let refused = |table: &str| {
        let text = format!("[[sink]]\nname = \"a\"\nurl = \"http://h/x\"\n\n[[sink]]\n{table}");
        Config::parse(&text, None).unwrap_err()
    };
    for (table, key, fix) in [
        (
            "name = \"b\"\nurl = \"ftp://h\"\n",
            "sink[1].url",
            "https://",
        ),
        (
            "name = \"b\"\nurl = \"https://u:p@h/\"\n",
            "sink[1].url",
            "bearer_token_file",
        ),
        (
            "name = \"a\"\nurl = \"http://h/\"\n",
            "sink[1].name",
            "a name of its own",
        ),
        (
            "name = \"b c\"\nurl = \"http://h/\"\n",
            "sink[1].name",
            "letters",
        ),
        (
            "name = \"b\"\nurl = \"http://h/\"\nbatch = 0\n",
            "sink[1].batch",
            "1..=1000",
        ),
        (
            "name = \"b\"\nurl = \"http://h/\"\ntimeout_ms = 5\n",
            "sink[1].timeout_ms",
            "100..=300000",
        ),
        (
            "name = \"b\"\nurl = \"http://h/\"\nca_file = \"/x\"\n",
            "sink[1].ca_file",
            "https://",
        ),
        (
            "name = \"b\"\nurl = \"http://h/\"\nformat = \"xml\"\n",
            "sink[1].format",
            "scangate.toml",
        ),
        (
            "name = \"b\"\nurl = \"http://h/\"\ntoken = \"t\"\n",
            "sink[1].token",
            "scangate.toml",
        ),
    ] {
        let e = refused(table);
        assert_eq!(e.key, key, "{table}: {e}");
        assert!(e.fix.contains(fix), "{table}: {e}");
    }
    let dir = tempfile::tempdir().unwrap();
    let basic = dir.path().join("basic");
    std::fs::write(&basic, "inventory:s3cret\n").unwrap();
    let text =
        format!("[[sink]]\nname = \"a\"\nurl = \"https://h/\"\nbasic_auth_file = {basic:?}\n");
    let s = Settings::resolve(&Config::parse(&text, None).unwrap()).unwrap();
    assert_eq!(
        s.sinks[0].authorization.as_deref(),
        Some("Basic aW52ZW50b3J5OnMzY3JldA==")
    );
    assert!(
        !format!("{s:?}").contains("aW52ZW50b3J5OnMzY3JldA=="),
        "{s:?}"
    );
    std::fs::remove_file(&basic).unwrap();
    let e = Settings::resolve(&Config::parse(&text, None).unwrap()).unwrap_err();
    assert_eq!(e.key, "sink[0].basic_auth_file", "{e}");
    assert!(e.problem.contains(basic.to_str().unwrap()), "{e}");
}
