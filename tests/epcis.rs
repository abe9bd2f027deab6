//! `ledger export --format epcis`: every ledger entry as
//! a GS1 EPCIS 2.0 `ObjectEvent` in one `EPCISDocument`, checked against
//! GS1's EPCIS 2.0 JSON Schema (tests/vectors/epcis/, with a control that
//! the validator refuses broken events), the mapping of every scan type
//! and of serialised, lot-only and UPC-only labels against hand-written
//! identifiers (read back by scangate's own Digital Link decoder), and
//! eventIDs that stay the same from one export to the next.

use crate::util::*;
use scangate::capture::Profile;
use scangate::config::ScanType;
use scangate::store::Store;
use serde_json::{Value, json};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The EPCIS 2.0 JSON-LD context.
const CONTEXT: &str = "https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld";
/// A GLN with a valid check digit (GS1's example company prefix 0614141).
const GLN: &str = "0614141000005";

/// A serial with characters GS1 Digital Link percent-encodes (all in GS1's
/// character set 82, so a valid AI 21 value).
const SERIAL: &str = "SN/7%&+?";
/// A lot with a character Digital Link percent-encodes.
const LOT: &str = "LOT/9";

/// Each scan type, its scanner, and what CBV 2.0 calls it: bizStep,
/// disposition, and whether the objects stay at the facility (bizLocation).
const TYPES: &[(ScanType, &str, &str, Option<&str>, bool)] = &[
    (
        ScanType::Receive,
        "dock-1",
        "receiving",
        Some("in_progress"),
        true,
    ),
    (
        ScanType::Dispense,
        "counter-1",
        "dispensing",
        Some("dispensed"),
        false,
    ),
    (
        ScanType::Waste,
        "waste-bin",
        "destroying",
        Some("destroyed"),
        false,
    ),
    (
        ScanType::Return,
        "rts-1",
        "shipping",
        Some("returned"),
        false,
    ),
    (ScanType::Adjust, "shelf-1", "cycle_counting", None, true),
];

/// The three kinds of label, and the identifier each becomes: a
/// serialised DSCSA DataMatrix (epcList), a GTIN + lot DataMatrix and a
/// UPC-A (quantityList, with the scanner's quantity).
fn labels() -> Vec<(String, Value)> {
    vec![
        (
            dscsa_lot(SERIAL, "LOT7A"),
            json!({"epcList": ["https://id.gs1.org/01/00307773105025/21/SN%2F7%25%26%2B%3F"]}),
        ),
        (
            gtin_lot(LOT),
            json!({"quantityList": [{"epcClass": "https://id.gs1.org/01/00307773105025/10/LOT%2F9", "quantity": 2}]}),
        ),
        (
            UPC_NDC.to_string(),
            json!({"quantityList": [{"epcClass": "https://id.gs1.org/01/00312345678906", "quantity": 2}]}),
        ),
    ]
}

/// A gateway state with one entry per scan type and label (15), each
/// scanner counting 2 units a read; its config with `gln` (if any).
fn ledger(dir: &Path, gln: Option<&str>) -> PathBuf {
    let state = dir.join("state");
    let mut store = Store::open(&state).expect("opening the database");
    let mut gate = test_gate(&store);
    let t0 = chrono::Utc::now().timestamp_millis() - 3_600_000;
    let mut scans = Vec::new();
    for (i, (scan_type, scanner, ..)) in TYPES.iter().enumerate() {
        let profile = Profile {
            quantity: 2,
            scan_type: *scan_type,
            ..dispense(scanner)
        };
        for (j, (label, _)) in labels().iter().enumerate() {
            let at = (i * 3 + j) as i64 * 10_000;
            let time = capture_time(t0 + at, "epcis-boot", 1_000_000 + at, true);
            scans.push(scan(&profile, label.as_str(), time));
        }
    }
    scangate::daemon::embedded::submit(&mut store, &mut gate, &scans).expect("submit");
    store.checkpoint().unwrap();
    drop(store);
    config(dir, &state, gln)
}

/// The config of the gateway whose state is `state`, with `gln`.
fn config(dir: &Path, state: &Path, gln: Option<&str>) -> PathBuf {
    let path = write_config(dir, state, 3000, &[]);
    if let Some(gln) = gln {
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.replacen("\n\n[dedup]", &format!("\ngln = {gln:?}\n\n[dedup]"), 1);
        std::fs::write(&path, text).unwrap();
    }
    path
}

/// `ledger export` with `args`: its stdout (it must succeed).
pub fn export(config: &Path, args: &[&str]) -> String {
    let mut all = vec!["ledger", "export"];
    all.extend_from_slice(args);
    let out: Outcome = cli_cfg(config, &all).into();
    assert_eq!(out.code, Some(0), "{out}");
    out.stdout
}

/// GS1's EPCIS 2.0 JSON Schema (draft-07), compiled with format
/// assertions on (`uri`, `date-time`).
pub struct Validator(jsonschema::Validator);

impl Validator {
    pub fn new() -> Validator {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/vectors/epcis/EPCIS-JSON-Schema.json");
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft7)
            .should_validate_formats(true)
            .build(&schema)
            .expect("GS1's schema compiles");
        Validator(validator)
    }

    /// Why `value` is not valid EPCIS, if it is not.
    pub fn errors(&self, value: &Value) -> Option<String> {
        let errors: Vec<String> = self
            .0
            .iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        (!errors.is_empty()).then(|| errors.join("\n"))
    }
}

/// The document of `export --format epcis`, checked: one JSON value,
/// valid against GS1's schema, with the standard context.
pub fn document(text: &str, validator: &Validator) -> Value {
    let doc: Value = serde_json::from_str(text).expect("one JSON document");
    if let Some(e) = validator.errors(&doc) {
        panic!("the document is not valid EPCIS 2.0: {e}\n{text}");
    }
    assert_eq!(doc["@context"], json!([CONTEXT]));
    assert_eq!(doc["type"], "EPCISDocument");
    assert_eq!(doc["schemaVersion"], "2.0");
    let created = doc["creationDate"].as_str().unwrap();
    chrono::DateTime::parse_from_rfc3339(created).expect("creationDate is RFC 3339");
    doc
}

#[test]
fn every_entry_is_a_valid_object_event_mapped_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let config = ledger(dir.path(), Some(GLN));
    let validator = Validator::new();

    // Today's JSON lines stay the default, unchanged.
    let lines = export(&config, &[]);
    assert_eq!(export(&config, &["--format", "json"]), lines);
    let entries: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), TYPES.len() * 3, "{lines}");

    let text = export(&config, &["--format", "epcis"]);
    let doc = document(&text, &validator);
    let events = doc["epcisBody"]["eventList"].as_array().unwrap();
    assert_eq!(events.len(), entries.len());
    let place = json!({"id": format!("https://id.gs1.org/414/{GLN}")});
    for (k, (event, entry)) in events.iter().zip(&entries).enumerate() {
        let (_, scanner, biz_step, disposition, stays) = TYPES[k / 3];
        let (_, what) = &labels()[k % 3];
        assert_eq!(entry["scanner"], scanner);
        let mut want = json!({
            "type": "ObjectEvent",
            "eventID": format!("urn:uuid:{}", entry["scan_uuid"].as_str().unwrap()),
            "eventTime": entry["captured_at"],
            "eventTimeZoneOffset": "+00:00",
            "action": "OBSERVE",
            "bizStep": biz_step,
            "readPoint": place,
        });
        let fields = want.as_object_mut().unwrap();
        fields.extend(what.as_object().unwrap().clone());
        if let Some(d) = disposition {
            fields.insert("disposition".into(), d.into());
        }
        if stays {
            fields.insert("bizLocation".into(), place.clone());
        }
        assert_eq!(event, &want, "entry {entry}");

        // The identifiers read back, by scangate's own Digital Link
        // decoder, as the entry's product.
        let uri = event["epcList"][0]
            .as_str()
            .or(event["quantityList"][0]["epcClass"].as_str())
            .unwrap();
        let product = scangate::capture::barcode::decode(uri.as_bytes())
            .unwrap_or_else(|e| panic!("{uri}: {e}"))
            .product;
        assert_eq!(product.gtin.as_deref(), entry["gtin"].as_str(), "{uri}");
        assert_eq!(product.serial.as_deref(), entry["serial"].as_str(), "{uri}");
        if entry["serial"].is_null() {
            assert_eq!(product.lot.as_deref(), entry["lot"].as_str(), "{uri}");
        }
        // Nothing of the gateway's own beyond the event: no scanner or
        // gateway names, no content key.
        let raw = event.to_string();
        for private in ["scanner", "gateway", "content_key", "test-gw", scanner] {
            assert!(!raw.contains(private), "{private} in {raw}");
        }
    }
}

#[test]
fn event_ids_are_the_same_in_every_export() {
    let dir = tempfile::tempdir().unwrap();
    let config = ledger(dir.path(), None);
    let validator = Validator::new();
    let ids = |doc: &Value| -> Vec<Value> {
        doc["epcisBody"]["eventList"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["eventID"].clone())
            .collect()
    };
    let first = document(&export(&config, &["--format", "epcis"]), &validator);
    let second = document(&export(&config, &["--format", "epcis"]), &validator);
    assert_eq!(ids(&first), ids(&second));
    assert_eq!(
        first["epcisBody"], second["epcisBody"],
        "the same entries, the same events"
    );
    // One export from a later point has the same ID for the same entry.
    let entries: Vec<Value> = export(&config, &[])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let since = entries[7]["captured_at"].as_str().unwrap();
    let later = document(
        &export(&config, &["--format", "epcis", "--since", since]),
        &validator,
    );
    assert_eq!(ids(&later)[..], ids(&first)[7..]);
    // Without [gateway] gln: no readPoint, no bizLocation, and still valid.
    for event in first["epcisBody"]["eventList"].as_array().unwrap() {
        assert!(
            event.get("readPoint").is_none() && event.get("bizLocation").is_none(),
            "{event}"
        );
    }
}

/// A way to break an event.
type Breaks = Box<dyn Fn(&mut Value)>;

#[test]
fn the_validator_refuses_broken_events() {
    // The control: GS1's schema, as compiled here, does refuse what is not
    // EPCIS, so the passes above mean something.
    let validator = Validator::new();
    let event = json!({
        "type": "ObjectEvent",
        "eventID": "urn:uuid:019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30",
        "eventTime": "2026-12-02T16:40:44.896Z",
        "eventTimeZoneOffset": "+00:00",
        "epcList": ["https://id.gs1.org/01/00307773105025/21/SN1"],
        "action": "OBSERVE",
        "bizStep": "dispensing",
        "disposition": "dispensed",
    });
    let doc = |event: Value| {
        json!({
            "@context": [CONTEXT],
            "type": "EPCISDocument",
            "schemaVersion": "2.0",
            "creationDate": "2026-12-03T00:00:00.000Z",
            "epcisBody": {"eventList": [event]},
        })
    };
    assert_eq!(validator.errors(&doc(event.clone())), None);
    let mut standalone = event.clone();
    standalone["@context"] = json!(CONTEXT);
    assert_eq!(validator.errors(&standalone), None);
    // scangate's extension, named under its prefix, passes.
    let mut extended = event.clone();
    extended["@context"] = json!({"scangate": "urn:scangate:epcis:"});
    extended["scangate:deaSchedule"] = json!("CII");
    extended["scangate:alerts"] = json!([
        {"scangate:kind": "recalled", "scangate:recallNumber": "D-0201-2026"},
        {"scangate:kind": "suspect", "scangate:firstReceivedAt": "2026-11-02T09:15:00.250Z",
         "scangate:firstReceivedEvent": "urn:uuid:019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a34"}
    ]);
    assert_eq!(validator.errors(&doc(extended)), None);

    let broken: Vec<(&str, Breaks)> = vec![
        (
            "no eventTime",
            Box::new(|e| drop(e.as_object_mut().unwrap().remove("eventTime"))),
        ),
        (
            "an eventTime that is no time",
            Box::new(|e| e["eventTime"] = json!("yesterday")),
        ),
        (
            "scangate's scan type as bizStep",
            Box::new(|e| e["bizStep"] = json!("dispense")),
        ),
        (
            "ilmd on an OBSERVE event",
            Box::new(|e| e["ilmd"] = json!({"cbvmda:lotNumber": "L1"})),
        ),
        (
            "an extension property not named by a URI",
            Box::new(|e| e["deaSchedule"] = json!("CII")),
        ),
        (
            "an unknown action",
            Box::new(|e| e["action"] = json!("DISPENSE")),
        ),
        (
            "no epcList or quantityList",
            Box::new(|e| drop(e.as_object_mut().unwrap().remove("epcList"))),
        ),
        (
            "a quantity that is a string",
            Box::new(|e| {
                e.as_object_mut().unwrap().remove("epcList");
                e["quantityList"] =
                    json!([{"epcClass": "https://id.gs1.org/01/00307773105025", "quantity": "2"}]);
            }),
        ),
    ];
    for (what, breaks) in broken {
        let mut bad = event.clone();
        breaks(&mut bad);
        assert!(validator.errors(&doc(bad)).is_some(), "accepted: {what}");
    }
    // A standalone event needs its @context.
    assert!(
        validator.errors(&event).is_some(),
        "accepted an event without @context"
    );
}

#[test]
fn echoes_have_no_epcis_form_and_a_bad_gln_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = ledger(dir.path(), Some(GLN));
    let out: Outcome = cli_cfg(
        &config,
        &["ledger", "export", "--echoes", "--format", "epcis"],
    )
    .into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("drop --format epcis"), "{out}");

    for (gln, says) in [
        ("0614141000006", "its GS1 check digit is 5"),
        ("061414100000", "is not 13 digits"),
        ("06141410000X5", "is not 13 digits"),
    ] {
        let bad = dir.path().join("bad");
        std::fs::create_dir_all(&bad).unwrap();
        let config = self::config(&bad, &dir.path().join("state"), Some(gln));
        let out: Outcome = cli_cfg(&config, &["check-config"]).into();
        assert_eq!(out.code, Some(2), "{out}");
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(
            all.contains("gateway.gln") && all.contains(says),
            "{gln}: {out}"
        );
    }
}

/// Append to `redis`'s ledger stream of facility `test-pharmacy` an entry
/// as the claim script does (absent values as empty strings).
fn xadd(redis: &RedisServer, fields: &[(&str, &str)]) {
    let mut cmd = redis::cmd("XADD");
    cmd.arg("scangate:{test-pharmacy}:ledger").arg("*");
    for (k, v) in fields {
        cmd.arg(*k).arg(*v);
    }
    let _: String = cmd.query(&mut redis.connection()).unwrap();
}

/// The fields of a facility ledger entry: `scan_type`, a serial (or "").
fn stream_entry<'a>(uuid: &'a str, scan_type: &'a str, serial: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("scan_uuid", uuid),
        ("gateway", "gw-a"),
        ("scanner", "counter-1"),
        ("captured_at", "2026-12-02T16:40:44.896Z"),
        ("clock_synced", "true"),
        ("scan_type", scan_type),
        ("quantity", "1"),
        ("gtin", GTIN),
        ("ndc10", "0777310502"),
        ("lot", "LOT1"),
        ("serial", serial),
        ("expiry", "2028-12-31"),
        ("symbology", "]d2"),
        (
            "content_key",
            "e9ed2338008099730808550dd420d0774954b39563ff5b55010378d39ed22178",
        ),
    ]
}

/// With a facility Redis, its ledger stream is exported the same way: one
/// document, or with `--follow` one event a line (each with `@context`,
/// each valid on its own), with the same event IDs; an entry that cannot
/// be an event stops the export, naming it, after the ones before it.
#[test]
fn the_facility_stream_as_a_document_and_followed_an_event_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let redis = RedisServer::start_temp(&[]);
    let cfg = config(dir.path(), &dir.path().join("state"), Some(GLN));
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text += &redis_section(&redis);
    std::fs::write(&cfg, text).unwrap();
    let validator = Validator::new();
    let a = "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30";
    let b = "019ae4c4-114a-7a2e-8d47-51c0f6a2b9e1";
    xadd(&redis, &stream_entry(a, "dispense", "SN0000000001"));
    xadd(&redis, &stream_entry(b, "receive", ""));

    let doc = document(&export(&cfg, &["--format", "epcis"]), &validator);
    let events = doc["epcisBody"]["eventList"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{doc}");
    assert_eq!(events[0]["eventID"], format!("urn:uuid:{a}"));
    assert_eq!(
        events[0]["epcList"],
        json!(["https://id.gs1.org/01/00307773105025/21/SN0000000001"])
    );
    assert_eq!(events[0]["bizStep"], "dispensing");
    assert_eq!(events[1]["eventID"], format!("urn:uuid:{b}"));
    assert_eq!(
        events[1]["quantityList"],
        json!([{"epcClass": "https://id.gs1.org/01/00307773105025/10/LOT1", "quantity": 1}])
    );
    assert_eq!(
        events[1]["bizLocation"]["id"],
        format!("https://id.gs1.org/414/{GLN}")
    );

    // Followed: one event a line, as each comes, each a valid EPCIS event
    // on its own; the same events as in the document.
    let mut child = command()
        .args([
            "ledger", "export", "--format", "epcis", "--follow", "--group", "inv", "--config",
        ])
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    for want in events {
        let line = lines.next().expect("a line").unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        if let Some(e) = validator.errors(&event) {
            panic!("not a valid standalone EPCIS event: {e}\n{line}");
        }
        assert_eq!(event["@context"], CONTEXT);
        let mut without = event.clone();
        without.as_object_mut().unwrap().remove("@context");
        assert_eq!(&without, want);
    }
    let _ = child.kill();
    let _ = child.wait();

    // A stream entry without a GTIN (none is ever appended: the gate
    // rejects such reads) stops the export, naming it, after the events
    // before it; the document is left open, so no reader takes it whole.
    let c = "019ae4c4-1f00-7000-8000-000000000000";
    let mut broken = stream_entry(c, "waste", "");
    broken.retain(|(k, _)| *k != "gtin");
    xadd(&redis, &broken);
    let out: Outcome = cli_cfg(&cfg, &["ledger", "export", "--format", "epcis"]).into();
    assert_eq!(out.code, Some(4), "{out}");
    assert!(
        out.stderr.contains(c) && out.stderr.contains("no GTIN"),
        "{out}"
    );
    assert!(serde_json::from_str::<Value>(&out.stdout).is_err(), "{out}");
    let written: Vec<&str> = out.stdout.lines().skip(1).collect();
    assert_eq!(written.len(), 2, "{out}");
    assert!(written[1].contains(b), "{out}");
}

/// docs/integrator.md's example event is, byte for byte, what the mapping
/// makes of its example entry, and valid EPCIS on its own.
#[test]
fn the_documented_example_is_what_the_mapping_writes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/integrator.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let line = |prefix: &str| {
        doc.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("docs/integrator.md has no line {prefix}…"))
    };
    let entry: scangate::ledger::epcis::Observation =
        serde_json::from_str(line("{\"seq\":1,")).unwrap();
    let event = scangate::ledger::epcis::object_event(&entry, Some(GLN)).unwrap();
    let documented = line("{\"type\":\"ObjectEvent\"");
    assert_eq!(serde_json::to_string(&event).unwrap(), documented);
    let alone = serde_json::to_value(scangate::ledger::epcis::standalone(event)).unwrap();
    assert_eq!(Validator::new().errors(&alone), None);
    // The example with a schedule and an alert: scangate's extension.
    let entry: scangate::ledger::epcis::Observation =
        serde_json::from_str(line("{\"seq\":7,")).unwrap();
    let event = scangate::ledger::epcis::object_event(&entry, Some(GLN)).unwrap();
    let documented = line("{\"@context\":{\"scangate\"");
    assert_eq!(serde_json::to_string(&event).unwrap(), documented);
    let alone = serde_json::to_value(scangate::ledger::epcis::standalone(event)).unwrap();
    assert_eq!(
        alone["@context"],
        json!([CONTEXT, {"scangate": "urn:scangate:epcis:"}])
    );
    assert_eq!(Validator::new().errors(&alone), None);
}

/// A facility Redis that cannot be reached gives no document at all (exit
/// 4), not an empty one a reader could take for an empty ledger.
#[test]
fn an_unreachable_ledger_writes_no_document() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &dir.path().join("state"), Some(GLN));
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    // Port 1 on the loopback: nothing listens there.
    text += "[redis]\nurl = \"redis://127.0.0.1:1\"\nconnect_timeout_ms = 300\ncommand_timeout_ms = 500\n";
    std::fs::write(&cfg, text).unwrap();
    let out: Outcome = cli_cfg(&cfg, &["ledger", "export", "--format", "epcis"]).into();
    assert_eq!(out.code, Some(4), "{out}");
    assert_eq!(out.stdout, "", "{out}");
}
