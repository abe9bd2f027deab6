//! Product and recall data on the gateway: `products import`, `products
//! show`, `recalls import` and `status`, on files generated in the formats
//! the FDA and openFDA publish (`util::fda`), and the lookups the checks
//! call ([`scangate::products::Catalog`]).

use crate::util::*;
use scangate::products::ndc::{Key, PackageNdc, key};
use scangate::products::{Catalog, LotMatch};
use std::path::{Path, PathBuf};

/// A config whose state directory is `dir/state`.
fn config(dir: &Path) -> PathBuf {
    let cfg = dir.join("scangate.toml");
    std::fs::write(
        &cfg,
        format!(
            "[gateway]\nstate_dir = \"{}\"\n",
            dir.join("state").display()
        ),
    )
    .unwrap();
    cfg
}

/// Three products, one in each NDC configuration; the first a CII whose
/// name is Windows-1252 (`é` is the byte 0xE9).
fn items() -> Vec<Item> {
    let mut sample = Item::new("12345-678", b"Samplex", "", &["90"]);
    sample.packages[0].1 = true;
    sample.end = "20240630";
    vec![
        Item::new("0067-6382", b"Oxycod\xe9 IR", "CII", &["30", "31"]),
        sample,
        Item::new("58160-8101", b"Vaccinex", "", &["1"]),
    ]
}

fn run(cfg: &Path, args: &[&str]) -> Outcome {
    cli_cfg(cfg, args).into()
}

fn show_json(cfg: &Path, what: &str) -> serde_json::Value {
    let out = run(cfg, &["products", "show", what, "--json"]);
    assert_eq!(out.code, Some(0), "{out}");
    serde_json::from_str(&out.stdout).unwrap()
}

#[test]
fn ndc_and_gtin_agree_on_published_pairs() {
    // NDC 0067-6382-30 in a GTIN-14, the pair the product data's issue
    // quotes (its source not checked here; the check digit is GS1's rule).
    let n = PackageNdc::parse("0067-6382-30").unwrap();
    assert_eq!(n.gtin14(0), "00300676382302");
    assert_eq!(n.ndc11(), "00067638230");
    // The repository's vectors (tests/vectors/barcodes.json,
    // `ndc_gtin_pairs`): NDC10 → NDC11 as their sources publish it (HL7
    // CARIN RTPBC, coderx.io, an FDA-style explanation); the GTINs there
    // are computed with the 03 rule. Every configuration but 5-4-1 is in
    // them; 5-4-1 is checked below against the 11-digit rule.
    let vectors: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/barcodes.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut checked = 0;
    for pair in vectors["ndc_gtin_pairs"].as_array().unwrap() {
        let ten = pair["ndc10_digits"].as_str().unwrap();
        let gtin14 = pair["gtin14"].as_str().unwrap();
        assert_eq!(key(gtin14), Ok(Key::Ndc10(ten.into())), "{pair}");
        let upc = pair["upc_a_gtin12"].as_str().unwrap();
        assert_eq!(key(upc), Ok(Key::Ndc10(ten.into())), "{pair}");
        let Some(printed) = pair["ndc_as_printed"].as_str().and_then(PackageNdc::parse) else {
            continue;
        };
        assert_eq!(printed.digits10(), ten);
        assert_eq!(printed.gtin14(0), gtin14, "{pair}");
        assert_eq!(printed.ndc11(), pair["ndc11"].as_str().unwrap(), "{pair}");
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} printed NDCs in the vectors");
    // 5-4-1 pads the package: 58160-8101-1 is 58160-8101-01. Its ten
    // digits are those of the vectors' 5-3-2 58160-810-11, so the GTIN is
    // the same: only the directory tells the two apart.
    let c = PackageNdc::parse("58160-8101-1").unwrap();
    assert_eq!(c.ndc11(), "58160810101");
    assert_eq!(c.gtin14(0), "00358160810114");
    assert_ne!(
        c.ndc11(),
        PackageNdc::parse("58160-810-11").unwrap().ndc11()
    );
    // A case (indicator 1) of the same package reads back to it.
    assert_eq!(key(&n.gtin14(1)), Ok(Key::Ndc10("0067638230".into())));
}

#[test]
fn products_import_then_show_by_ndc_and_gtin() {
    let dir = tempdir("scangate-products-");
    let cfg = config(dir.path());
    let zip = dir.path().join("ndctext.zip");
    ndctext_zip(&zip, &items());
    let out = run(&cfg, &["products", "import", zip.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("3 products, 4 packages"), "{out}");
    // The same package by each of its names.
    for name in [
        "0067-6382-30",
        "0067638230",
        "00067638230",
        "00067-6382-30",
        "00300676382302",
        "300676382302",
    ] {
        let v = show_json(&cfg, name);
        let pkgs = v["packages"].as_array().unwrap();
        assert_eq!(pkgs.len(), 1, "{name}: {v}");
        assert_eq!(pkgs[0]["package_ndc"], "0067-6382-30", "{name}");
        assert_eq!(pkgs[0]["name"], "Oxycodé IR", "{name}");
        assert_eq!(pkgs[0]["dea_schedule"], "CII", "{name}");
        assert_eq!(pkgs[0]["gtin14"], "00300676382302");
    }
    // 5-3-2 and 5-4-1, sample flag and end date.
    let v = show_json(&cfg, "12345067890");
    assert_eq!(v["packages"][0]["package_ndc"], "12345-678-90");
    assert_eq!(v["packages"][0]["sample"], true);
    assert_eq!(v["packages"][0]["marketing_end"], "2024-06-30");
    let v = show_json(&cfg, &PackageNdc::parse("58160-8101-1").unwrap().gtin14(0));
    assert_eq!(v["packages"][0]["package_ndc"], "58160-8101-1");
    assert_eq!(v["packages"][0]["dea_schedule"], serde_json::Value::Null);
    // Text, with the decoded name; an unknown NDC exits 1; a wrong check
    // digit is refused (2).
    let out = run(&cfg, &["products", "show", "0067-6382-31"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.stdout.contains("Oxycodé IR") && out.stdout.contains("DEA schedule: CII"),
        "{out}"
    );
    assert_eq!(
        run(&cfg, &["products", "show", "0067-6382-99"]).code,
        Some(1)
    );
    let bad = run(&cfg, &["products", "show", "00300676382303"]);
    assert_eq!(bad.code, Some(2), "{bad}");
    assert!(bad.stderr.contains("check digit"), "{bad}");
    // The file is the service's kind: 0640, no link followed.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("state/products.sqlite"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o037, 0, "{mode:o}");
}

#[test]
fn products_import_of_plain_files_and_bad_input_keeps_the_data_before() {
    let dir = tempdir("scangate-products-bad-");
    let cfg = config(dir.path());
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let (product, package) = directory(&items());
    std::fs::write(plain.join("product.txt"), &product).unwrap();
    std::fs::write(plain.join("package.txt"), &package).unwrap();
    let out = run(
        &cfg,
        &[
            "products",
            "import",
            plain.join("product.txt").to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, Some(0), "{out}");
    let kept = |why: &str| {
        let v = show_json(&cfg, "0067-6382-30");
        assert_eq!(v["packages"][0]["name"], "Oxycodé IR", "after {why}");
    };
    // A package NDC in no configuration on line 3.
    let bad_dir = dir.path().join("bad");
    std::fs::create_dir(&bad_dir).unwrap();
    let bad_package = String::from_utf8_lossy(&package).replacen("0067-6382-31", "0067-638-231", 1);
    std::fs::write(bad_dir.join("product.txt"), &product).unwrap();
    std::fs::write(bad_dir.join("package.txt"), bad_package.as_bytes()).unwrap();
    let out = run(&cfg, &["products", "import", bad_dir.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains("package.txt line 3") && out.stderr.contains("0067-638-231"),
        "{out}"
    );
    kept("a malformed line");
    // A column missing.
    let text = String::from_utf8_lossy(&product).replace("DEASCHEDULE", "SCHEDULE");
    std::fs::write(bad_dir.join("product.txt"), text.as_bytes()).unwrap();
    std::fs::write(bad_dir.join("package.txt"), &package).unwrap();
    let out = run(&cfg, &["products", "import", bad_dir.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains("product.txt") && out.stderr.contains("no column DEASCHEDULE"),
        "{out}"
    );
    kept("a missing column");
    // A zip cut short.
    let zip = dir.path().join("ndctext.zip");
    let many: Vec<Item> = (0..2000)
        .map(|i| {
            Item::new(
                &format!("{:05}-{:03}", 10000 + i, i % 1000),
                b"X",
                "",
                &["01"],
            )
        })
        .collect();
    ndctext_zip(&zip, &many);
    let whole = std::fs::read(&zip).unwrap();
    let cut = dir.path().join("cut.zip");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let out = run(&cfg, &["products", "import", cut.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains("cut.zip") && out.stderr.contains("not a whole zip"),
        "{out}"
    );
    kept("a cut zip");
    // Nothing half-built is left.
    assert!(!dir.path().join("state/products.sqlite.new").exists());
    // The whole zip replaces the data.
    let out = run(&cfg, &["products", "import", zip.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(
        run(&cfg, &["products", "show", "0067-6382-30"]).code,
        Some(1)
    );
}

/// The recall file of the tests: ongoing and ended recalls, by
/// `openfda.package_ndc` and by the description, with lots alike.
fn recall_file() -> String {
    enforcement(&[
        recall(
            "D-0101-2024",
            "Ongoing",
            "Class II",
            &["0067-6382-30"],
            "Oxycode IR tablets, 5 mg, 100-count bottle",
            "Lot #: A123, B77; Exp 12/2025",
        ),
        recall(
            "D-0102-2024",
            "On-Going",
            "Class I",
            &[],
            "Samplex, 10 mg, NDC 12345-678-90, Rx only",
            "All lots within expiry",
        ),
        recall(
            "D-0103-2023",
            "Terminated",
            "Class II",
            &["0067-6382-31"],
            "Oxycode IR",
            "Lot 999",
        ),
        recall(
            "D-0104-2024",
            "Ongoing",
            "Class III",
            &[],
            "Vaccinex vial UPC 358160810114",
            "Batches: 21-0345 and 21-0346",
        ),
    ])
}

#[test]
fn recalls_import_keeps_ongoing_and_matches_lots_exactly() {
    let dir = tempdir("scangate-recalls-");
    let cfg = config(dir.path());
    let json = dir.path().join("drug-enforcement-0001-of-0001.json");
    std::fs::write(&json, recall_file()).unwrap();
    let out = run(&cfg, &["recalls", "import", json.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.stdout.contains("3 recalls") && out.stdout.contains("1 not ongoing"),
        "{out}"
    );
    let c = Catalog::new(&dir.path().join("state"));
    let numbers = |ndc: &str, lot: Option<&str>| -> Vec<(String, LotMatch)> {
        c.recalls_for(ndc, lot)
            .unwrap()
            .into_iter()
            .map(|m| (m.recall_number, m.lot))
            .collect()
    };
    // The lot it names, in another case; lots that look alike do not.
    assert_eq!(
        numbers("0067-6382-30", Some("a123")),
        [("D-0101-2024".into(), LotMatch::Lot)]
    );
    for alike in ["A1234", "XA123", "A12", "B7", "B777"] {
        assert!(numbers("0067-6382-30", Some(alike)).is_empty(), "{alike}");
    }
    assert_eq!(
        numbers("00300676382302", None),
        [("D-0101-2024".into(), LotMatch::LotNotRead)]
    );
    // The terminated recall is not kept.
    assert!(numbers("0067-6382-31", Some("999")).is_empty());
    // From the description; no lot named: every lot; 11 digits too.
    assert_eq!(
        numbers("12345067890", Some("ANY")),
        [("D-0102-2024".into(), LotMatch::EveryLot)]
    );
    // A GTIN in the description; lots with a hyphen, read with or without.
    assert_eq!(
        numbers("58160-8101-1", Some("210345")),
        [("D-0104-2024".into(), LotMatch::Lot)]
    );
    assert_eq!(
        numbers("58160-8101-1", Some("21-0346")),
        [("D-0104-2024".into(), LotMatch::Lot)]
    );
    assert!(numbers("58160-8101-1", Some("21-03456")).is_empty());
    let m = c.recalls_for("0067-6382-30", Some("B77")).unwrap();
    assert_eq!(m[0].classification, "Class II");

    // Bad files, each refused naming it; the recalls before are kept.
    let other = dir.path().join("drug-ndc-0001-of-0001.json");
    std::fs::write(
        &other,
        r#"{"meta":{"last_updated":"2024-05-01"},"results":[{"product_ndc":"0067-6382","generic_name":"x","packaging":[]}]}"#,
    )
    .unwrap();
    let out = run(&cfg, &["recalls", "import", other.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains("drug-ndc-0001-of-0001.json")
            && out
                .stderr
                .contains("not openFDA's drug enforcement download")
            && out.stderr.contains("recall_number"),
        "{out}"
    );
    let device = dir.path().join("device.json");
    std::fs::write(&device, recall_file().replace("\"Drugs\"", "\"Devices\"")).unwrap();
    let out = run(&cfg, &["recalls", "import", device.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("devices enforcement download"), "{out}");
    // Windows-1252 bytes in JSON (which must be UTF-8): line named.
    let mut latin = recall_file()
        .replace(",\"results\"", ",\n\"results\"")
        .into_bytes();
    let at = latin.windows(7).position(|w| w == b"Samplex").unwrap();
    latin[at + 1] = 0xE9;
    let latin_path = dir.path().join("latin.json");
    std::fs::write(&latin_path, &latin).unwrap();
    let out = run(&cfg, &["recalls", "import", latin_path.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("latin.json line 3"), "{out}");
    // A cut file, and one without results.
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, &recall_file()[..300]).unwrap();
    let out = run(&cfg, &["recalls", "import", cut.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("cut.json line 1"), "{out}");
    std::fs::write(&cut, r#"{"meta":{}}"#).unwrap();
    let out = run(&cfg, &["recalls", "import", cut.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("no \"results\""), "{out}");
    assert_eq!(numbers("0067-6382-30", Some("A123")).len(), 1, "kept");
    // Zipped, as openFDA serves it; and an unknown status refused.
    let zip_path = dir.path().join("drug-enforcement-0001-of-0001.json.zip");
    let text = recall_file().replace("On-Going", "Open");
    zip(
        &zip_path,
        &[("drug-enforcement-0001-of-0001.json", text.as_bytes())],
    );
    let out = run(&cfg, &["recalls", "import", zip_path.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains("record 2 (D-0102-2024)") && out.stderr.contains("\"open\""),
        "{out}"
    );
    zip(
        &zip_path,
        &[(
            "drug-enforcement-0001-of-0001.json",
            recall_file().as_bytes(),
        )],
    );
    let out = run(&cfg, &["recalls", "import", zip_path.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out}");
}

/// Imports beside a running daemon: the lookups of an open [`Catalog`]
/// see each new file; `status` shows the data, its age, and a reason
/// when it is older than `[checks] max_data_age_days`.
#[test]
fn import_while_the_daemon_runs_and_status_tells_the_age() {
    let mut gw = Gateway::builder("scangate-products-daemon-")
        .pty(ScannerSpec::named("counter-1").ack())
        .config("[checks]\nmax_data_age_days = 30\n")
        .build();
    gw.start();
    let catalog = Catalog::new(&gw.state);
    assert_eq!(catalog.lookup_ndc("0067-6382-30").unwrap(), None);
    let st = status_json(&gw.cfg);
    assert_eq!(st["products"]["loaded"], false, "{st}");
    let out = run(&gw.cfg, &["status"]);
    assert!(
        out.stdout
            .contains("products: not loaded: the checks that need it are off"),
        "{out}"
    );

    let zip1 = gw.dir.join("ndctext.zip");
    ndctext_zip(&zip1, &items());
    let out = run(&gw.cfg, &["products", "import", zip1.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out}");
    let p = catalog.lookup_gtin("00300676382302").unwrap().unwrap();
    assert_eq!(
        (p.name.as_str(), p.dea_schedule.as_deref()),
        ("Oxycodé IR", Some("CII"))
    );
    // A second import, of a renamed product: the open catalog sees it.
    let mut renamed = items();
    renamed[0].name = b"Oxycodone Neu".to_vec();
    ndctext_zip(&zip1, &renamed);
    let out = run(&gw.cfg, &["products", "import", zip1.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(
        catalog.lookup_ndc("0067638230").unwrap().unwrap().name,
        "Oxycodone Neu"
    );
    let json = gw.dir.join("recalls.json");
    std::fs::write(&json, recall_file()).unwrap();
    let out = run(&gw.cfg, &["recalls", "import", json.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out}");
    let out = run(
        &gw.cfg,
        &["products", "show", "0067-6382-30", "--lot", "A123"],
    );
    assert!(
        out.stdout
            .contains("RECALL D-0101-2024 (Class II): names this lot"),
        "{out}"
    );
    assert!(
        gw.daemon().log().lines().all(|l| !l.contains("ERROR")),
        "{}",
        gw.daemon().log()
    );

    // Status: the zip entry's date is today, the recall file's 2024-05-01.
    let st = status_json(&gw.cfg);
    assert_eq!(st["products"]["loaded"], true, "{st}");
    assert_eq!(st["products"]["age_days"], 0, "{st}");
    assert_eq!(st["products"]["rows"]["packages"], 4, "{st}");
    assert_eq!(st["recalls"]["published"], "2024-05-01", "{st}");
    let degraded: Vec<String> = serde_json::from_value(st["degraded"].clone()).unwrap();
    assert!(
        degraded
            .iter()
            .any(|d| d.contains("recall data") && d.contains("max_data_age_days = 30")),
        "{degraded:?}"
    );
    assert!(
        !degraded.iter().any(|d| d.contains("product data")),
        "{degraded:?}"
    );
    // Forty days later the product data is too old as well.
    let later = cli_later(&gw.cfg, 40, &["status", "--json"]);
    let st: serde_json::Value = serde_json::from_str(&later.stdout).unwrap();
    assert_eq!(st["products"]["age_days"], 40, "{later}");
    assert!(
        st["degraded"].as_array().unwrap().iter().any(|d| d
            .as_str()
            .unwrap()
            .contains("product data (FDA NDC Directory) is 40 days old")),
        "{later}"
    );
    gw.stop();
}

fn status_json(cfg: &Path) -> serde_json::Value {
    let out = run(cfg, &["status", "--json"]);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"))
}
