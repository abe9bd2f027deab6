//! Files in the formats the FDA and openFDA publish, made by the tests
//! (nothing is downloaded): the NDC Directory's `product.txt` and
//! `package.txt` (tab-separated, the FDA's header, Windows-1252 bytes,
//! CRLF) and `ndctext.zip`; the drug enforcement download's JSON.

use std::io::Write;
use std::path::Path;

/// `product.txt`'s header as the FDA writes it.
pub const PRODUCT_HEADER: &str = "PRODUCTID\tPRODUCTNDC\tPRODUCTTYPENAME\tPROPRIETARYNAME\tPROPRIETARYNAMESUFFIX\tNONPROPRIETARYNAME\tDOSAGEFORMNAME\tROUTENAME\tSTARTMARKETINGDATE\tENDMARKETINGDATE\tMARKETINGCATEGORYNAME\tAPPLICATIONNUMBER\tLABELERNAME\tSUBSTANCENAME\tACTIVE_NUMERATOR_STRENGTH\tACTIVE_INGRED_UNIT\tPHARM_CLASSES\tDEASCHEDULE\tNDC_EXCLUDE_FLAG\tLISTING_RECORD_CERTIFIED_THROUGH";

/// `package.txt`'s header as the FDA writes it.
pub const PACKAGE_HEADER: &str = "PRODUCTID\tPRODUCTNDC\tNDCPACKAGECODE\tPACKAGEDESCRIPTION\tSTARTMARKETINGDATE\tENDMARKETINGDATE\tNDC_EXCLUDE_FLAG\tSAMPLE_PACKAGE";

/// A product of the generated directory with its packages.
#[derive(Clone)]
pub struct Item {
    /// `PRODUCTNDC`.
    pub product_ndc: String,
    /// `PROPRIETARYNAME`, as Windows-1252 bytes.
    pub name: Vec<u8>,
    /// `DEASCHEDULE`.
    pub dea: &'static str,
    /// `ENDMARKETINGDATE` of the product.
    pub end: &'static str,
    /// The package segments, each with `SAMPLE_PACKAGE`.
    pub packages: Vec<(String, bool)>,
}

impl Item {
    pub fn new(product_ndc: &str, name: &[u8], dea: &'static str, packages: &[&str]) -> Item {
        Item {
            product_ndc: product_ndc.into(),
            name: name.to_vec(),
            dea,
            end: "",
            packages: packages.iter().map(|p| (p.to_string(), false)).collect(),
        }
    }
}

/// `product.txt` and `package.txt` of `items`, as bytes.
pub fn directory(items: &[Item]) -> (Vec<u8>, Vec<u8>) {
    let mut product = format!("{PRODUCT_HEADER}\r\n").into_bytes();
    let mut package = format!("{PACKAGE_HEADER}\r\n").into_bytes();
    for (i, it) in items.iter().enumerate() {
        let id = format!("{}_{:08x}-0000-4000-8000-{:012x}", it.product_ndc, i, i);
        let mut row: Vec<Vec<u8>> = vec![
            id.clone().into(),
            it.product_ndc.clone().into(),
            b"HUMAN PRESCRIPTION DRUG".to_vec(),
            it.name.clone(),
            Vec::new(),
            b"OXYCODONE HYDROCHLORIDE".to_vec(),
            b"TABLET".to_vec(),
            b"ORAL".to_vec(),
            b"20190115".to_vec(),
            it.end.into(),
            b"ANDA".to_vec(),
            b"ANDA203107".to_vec(),
            b"Laboratoires Pharmac\xe9utiques".to_vec(),
            b"OXYCODONE HYDROCHLORIDE".to_vec(),
            b"5".to_vec(),
            b"mg/1".to_vec(),
            b"Opioid Agonist [EPC]".to_vec(),
            it.dea.into(),
            b"N".to_vec(),
            b"20261231".to_vec(),
        ];
        product.extend(row.join(&b'\t'));
        product.extend(b"\r\n");
        for (pkg, sample) in &it.packages {
            row = vec![
                id.clone().into(),
                it.product_ndc.clone().into(),
                format!("{}-{pkg}", it.product_ndc).into(),
                b"100 TABLET in 1 BOTTLE (x)".to_vec(),
                b"20190115".to_vec(),
                Vec::new(),
                b"N".to_vec(),
                if *sample {
                    b"Y".to_vec()
                } else {
                    b"N".to_vec()
                },
            ];
            package.extend(row.join(&b'\t'));
            package.extend(b"\r\n");
        }
    }
    (product, package)
}

/// A zip of `entries` (name, bytes), deflated, as the FDA's are.
pub fn zip(path: &Path, entries: &[(&str, &[u8])]) {
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    use chrono::{Datelike, Timelike};
    let now = chrono::Local::now();
    let stamp = zip::DateTime::from_date_and_time(
        now.year() as u16,
        now.month() as u8,
        now.day() as u8,
        now.hour() as u8,
        now.minute() as u8,
        now.second() as u8,
    )
    .unwrap();
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(stamp);
    for (name, bytes) in entries {
        z.start_file(*name, opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}

/// `ndctext.zip` of `items` at `path`.
pub fn ndctext_zip(path: &Path, items: &[Item]) {
    let (product, package) = directory(items);
    zip(
        path,
        &[("product.txt", &product), ("package.txt", &package)],
    );
}

/// One record of the drug enforcement download.
pub fn recall(
    number: &str,
    status: &str,
    class: &str,
    package_ndcs: &[&str],
    description: &str,
    code_info: &str,
) -> serde_json::Value {
    let openfda = if package_ndcs.is_empty() {
        serde_json::json!({})
    } else {
        serde_json::json!({ "package_ndc": package_ndcs, "product_type": ["HUMAN PRESCRIPTION DRUG"] })
    };
    serde_json::json!({
        "country": "United States",
        "city": "Columbus",
        "reason_for_recall": "Failed dissolution specifications",
        "address_1": "1 Main St",
        "code_info": code_info,
        "product_quantity": "10,000 bottles",
        "center_classification_date": "20240110",
        "distribution_pattern": "Nationwide",
        "state": "OH",
        "product_description": description,
        "report_date": "20240117",
        "classification": class,
        "openfda": openfda,
        "recalling_firm": "Example Pharma",
        "recall_number": number,
        "initial_firm_notification": "Letter",
        "product_type": "Drugs",
        "event_id": "93000",
        "termination_date": "",
        "more_code_info": "",
        "recall_initiation_date": "20231220",
        "postal_code": "43215",
        "voluntary_mandated": "Voluntary: Firm initiated",
        "status": status
    })
}

/// The download holding `results`, as JSON text.
pub fn enforcement(results: &[serde_json::Value]) -> String {
    serde_json::json!({
        "meta": {
            "disclaimer": "Do not rely on openFDA to make decisions regarding medical care.",
            "terms": "https://open.fda.gov/terms/",
            "license": "https://open.fda.gov/license/",
            "last_updated": "2024-05-01",
            "results": { "skip": 0, "limit": results.len(), "total": results.len() }
        },
        "results": results
    })
    .to_string()
}
